"""`proctor job fork|exec|exit`: declare a job, take its lease, end it."""

from __future__ import annotations

import json
import sys

import click

from proctor import api, errors
from proctor.cli import emit_json
from proctor.cli.options import lease_option, output_option


@click.group()
def job() -> None:
    """Declare jobs, take their leases, and end them."""


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def _read_stdin_record() -> dict:
    if sys.stdin is None or sys.stdin.closed:
        raise errors.ProctorError("--stdin given but there is no standard input; pipe a JSON job record in")
    text = sys.stdin.read()
    if not text.strip():
        raise errors.ProctorError(
            "--stdin read nothing; pipe a JSON job record in (proctor job fork --schema prints its shape)",
            errors.BAD_RECORD)
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise errors.ProctorError(
            f"standard input is not a JSON job record: {exc.msg} at line {exc.lineno} column {exc.colno}",
            errors.BAD_RECORD) from None
    if not isinstance(record, dict):
        raise errors.ProctorError("standard input must hold one JSON object, the job record", errors.BAD_RECORD)
    return record


@job.command()
@click.argument("job_id", required=False, metavar="ID")
@click.option("--criteria", help="The acceptance criteria: prose a person grades.")
@click.option("--write-paths", help="Comma-separated files, globs or file#declaration claims it may write.")
@click.option("--deny-paths", help="Comma-separated paths it must not write.")
@click.option("--read-paths", help="Comma-separated paths it may read (default: its write paths).")
@click.option("--check", "check", metavar="TARGET", help="The one target from [targets] that grades it.")
@click.option("--parent", metavar="ID", help="The job this one is forked from.")
@click.option("--depends-on", metavar="IDS", help="Comma-separated jobs that must land first.")
@click.option("--timeout", metavar="DURATION", help="A deadline this long from now (30m, 2h).")
@click.option("--read-only", is_flag=True, default=None, help="A job that writes nothing.")
@click.option("--model", help="The model the holder should run.")
@click.option("--checkpoint", metavar="TOKEN", help="As `proctor vcs checkpoint -o name` prints it (default: now).")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the whole record as JSON from standard input.")
@click.option("--schema", is_flag=True, help="Print the JSON Schema of a --stdin record and exit.")
@lease_option
@output_option("text", "json", "name")
def fork(job_id, criteria, write_paths, deny_paths, read_paths, check, parent, depends_on, timeout,
         read_only, model, checkpoint, from_stdin, schema, lease, output) -> None:
    """Declare a job: what its holder is handed, where it may write, and the one check it runs.

    Replaces any job with the same id. A session holding a lease may only shrink its own
    write paths (releasing them) and fork children of its own job inside its paths.
    """
    if schema:
        emit_json(api.record_schema())
        return
    flags = {
        "criteria": criteria, "write_paths": _split(write_paths), "deny_paths": _split(deny_paths),
        "read_paths": _split(read_paths), "check": check, "parent": parent,
        "depends_on": _split(depends_on), "timeout": timeout, "read_only": read_only, "model": model,
        "checkpoint": checkpoint,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if from_stdin:
        if given:
            raise click.UsageError(
                f"--stdin reads the whole record; drop --{sorted(given)[0].replace('_', '-')} "
                f"or put it in the record")
        record = _read_stdin_record()
        if job_id is not None:
            if record.get("id") not in (None, job_id):
                raise errors.ProctorError(
                    f"the record's id {record.get('id')!r} differs from the ID argument {job_id!r}; "
                    f"give one", errors.BAD_RECORD)
            record["id"] = job_id
    else:
        if job_id is None:
            raise click.UsageError("name the job: proctor job fork ID ..., or pipe a record with --stdin")
        record = {"id": job_id, **given}
    stored = api.fork(record, lease=lease)
    if output == "json":
        emit_json(stored)
    elif output == "name":
        click.echo(stored["id"])
    else:
        proof = f", write_proof {stored['write_proof']}" if stored.get("write_proof") else ""
        click.echo(f"forked {stored['id']} ({stored['state']}{proof})")
        for release in stored.get("releases") or ():
            if release["released"] == stored["updated"]:
                click.echo(f"released {release['path']} at {release['digest']}")


@job.command(name="exec")
@click.argument("job_id", metavar="ID")
@lease_option
@output_option("text", "json")
def exec_(job_id: str, lease: str | None, output: str) -> None:
    """Take the job's lease in this checkout, recording the base this tree landed on."""
    taken = api.exec_job(job_id, lease=lease)
    if output == "json":
        emit_json(taken)
        return
    click.echo(f"took {job_id} in {taken['checkout_root']}")
    if taken.get("base_diverges"):
        click.echo(f"note: this tree ({taken['base']}) diverges from the checkpoint the job was "
                   f"handed ({taken['checkpoint']}); recorded")
    click.echo(f"export BAGGAGE=proctor.lease={job_id}")


@job.command(name="exit")
@click.argument("job_id", metavar="ID")
@lease_option
@output_option("text", "json")
def exit_(job_id: str, lease: str | None, output: str) -> None:
    """End a job without a result: it is recorded no_return."""
    ended = api.exit_job(job_id, lease=lease)
    if output == "json":
        emit_json(ended)
    else:
        click.echo(f"ended {job_id}: no_return ({ended['end_reason']})")
