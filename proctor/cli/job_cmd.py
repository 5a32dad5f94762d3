"""`proctor job fork|exec|exit`: declare a job, take its lease, end it."""

from __future__ import annotations

import json
import sys

import click

from proctor import api, errors, jobrecord
from proctor.cli import emit_json
from proctor.cli.options import lease_option, output_option


@click.group()
def job() -> None:
    """Declare jobs, take their leases, and end them."""


def _split(value: str | None) -> list[str] | None:
    return None if value is None else jobrecord.comma_list(value)


def _read_stdin_json(what: str) -> dict:
    """One JSON object from standard input, or one clear line saying why not."""
    if sys.stdin is None or sys.stdin.closed:
        raise errors.ProctorError(f"--stdin given but there is no standard input; pipe {what} in")
    try:
        text = sys.stdin.read()
    except UnicodeDecodeError:
        raise errors.ProctorError(f"standard input is not UTF-8 text; pipe {what} as JSON", errors.BAD_RECORD) from None
    if not text.strip():
        raise errors.ProctorError(
            f"--stdin read nothing; pipe {what} in as JSON (--schema prints its shape)", errors.BAD_RECORD
        )
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise errors.ProctorError(
            f"standard input is not {what} in JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            errors.BAD_RECORD,
        ) from None
    if not isinstance(record, dict):
        raise errors.ProctorError(f"standard input must hold one JSON object, {what}", errors.BAD_RECORD)
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
def fork(
    job_id,
    criteria,
    write_paths,
    deny_paths,
    read_paths,
    check,
    parent,
    depends_on,
    timeout,
    read_only,
    model,
    checkpoint,
    from_stdin,
    schema,
    lease,
    output,
) -> None:
    """Declare a job: what its holder is handed, where it may write, and the one check it runs.

    Replaces any job with the same id. A session holding a lease may only shrink its own
    write paths (releasing them) and fork children of its own job inside its paths.
    """
    if schema:
        emit_json(api.record_schema())
        return
    flags = {
        "criteria": criteria,
        "write_paths": _split(write_paths),
        "deny_paths": _split(deny_paths),
        "read_paths": _split(read_paths),
        "check": check,
        "parent": parent,
        "depends_on": _split(depends_on),
        "timeout": timeout,
        "read_only": read_only,
        "model": model,
        "checkpoint": checkpoint,
    }
    given = {k: v for k, v in flags.items() if v is not None}
    if from_stdin:
        if given:
            raise click.UsageError(
                f"--stdin reads the whole record; drop --{sorted(given)[0].replace('_', '-')} or put it in the record"
            )
        record = _read_stdin_json("a job record")
        if job_id is not None:
            if record.get("id") not in (None, job_id):
                raise errors.ProctorError(
                    f"the record's id {record.get('id')!r} differs from the ID argument {job_id!r}; give one",
                    errors.BAD_RECORD,
                )
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
    elif "enter" in record:
        entry = (stored.get("entries") or [{}])[-1]
        click.echo(
            f"entered {entry.get('path', record['enter'])} of {stored['id']} for one write; the guard lets "
            f"the next write there through and stamps the entry consumed"
        )
    else:
        proof = f", write_proof {stored['write_proof']}" if stored.get("write_proof") else ""
        click.echo(f"forked {stored['id']} ({stored['state']}{proof})")
        for release in stored.get("releases") or ():
            if release["released"] == stored["updated"]:
                click.echo(f"released {release['path']} at {release['digest']}")


@job.command(name="exec")
@click.argument("job_id", metavar="ID")
@click.option(
    "--worktree",
    metavar="PATH",
    default=None,
    help="Make a new worktree at PATH on the job's checkpoint and take the job there.",
)
@lease_option
@output_option("text", "json")
def exec_(job_id: str, worktree: str | None, lease: str | None, output: str) -> None:
    """Take the job's lease in this checkout, recording the base this tree landed on.

    Every caller in that checkout that reports no session acts under the job from then on, so
    take jobs in worktrees of their own: --worktree PATH makes one at the job's checkpoint
    (its uncommitted work carried over while the declaring checkout still holds it). Taking
    the job already held here again only records the new base; its secret is unchanged.
    """
    taken = api.exec_job(job_id, lease=lease, worktree=worktree)
    if output == "json":
        emit_json(taken)
        return
    for note in taken.get("notes") or ():
        click.echo(f"note: {note}", err=True)
    if taken.get("retake"):
        click.echo(f"retook {job_id} in {taken['checkout_root']}: recorded the base {taken['base']}")
    else:
        click.echo(f"took {job_id} in {taken['checkout_root']}")
    if taken.get("base_diverges"):
        click.echo(
            f"note: this tree ({taken['base']}) diverges from the checkpoint the job was "
            f"handed ({taken['checkpoint']}); recorded"
        )
    from shlex import quote

    if worktree is not None:
        click.echo(f"cd {quote(taken['checkout_root'])}")
    click.echo(f"export BAGGAGE={quote('proctor.lease=' + job_id)}")
    if taken.get("nonce"):
        click.echo(f"export PROCTOR_NONCE={quote(taken['nonce'])}")
    elif taken.get("retake"):
        click.echo("PROCTOR_NONCE is unchanged: the secret handed when the job was first taken still holds")


@job.command(name="exit")
@click.argument("job_id", metavar="ID", required=False)
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the result (JSON) from standard input.")
@click.option("--schema", is_flag=True, help="Print the JSON Schema of a result and exit.")
@lease_option
@output_option("text", "json")
def exit_(job_id: str | None, from_stdin: bool, schema: bool, lease: str | None, output: str) -> None:
    """Return a job: with --stdin, file its result (the job becomes exited and waits for
    `proctor job wait`); without it, abandon it (recorded no_return)."""
    if schema:
        emit_json(api.result_schema())
        return
    if job_id is None:
        raise click.UsageError("name the job: proctor job exit ID [--stdin]")
    if from_stdin:
        filed = api.exit_job(job_id, _read_stdin_json("a result"), lease=lease)
        if output == "json":
            emit_json(filed)
        else:
            click.echo(f"filed the result of {job_id}; proctor job wait {job_id} verifies it")
        return
    ended = api.exit_job(job_id, lease=lease)
    if output == "json":
        emit_json(ended)
    else:
        click.echo(f"ended {job_id}: no_return ({ended['end_reason']})")


@job.command()
@click.argument("job_id", metavar="ID")
@lease_option
@output_option("text", "json")
def wait(job_id: str, lease: str | None, output: str) -> int:
    """Verify a job's filed result against evidence and record pass or fail.

    Exit 0 pass; 1 rejected, naming every rule and goal subject that failed; 2 when proctor
    cannot answer (nothing filed, no such job).
    """
    from proctor.jobs.verify import render_footprint

    answer = api.wait_job(job_id, lease=lease)
    job, graded = answer["job"], answer["grade"]
    passed = job["state"] == "pass"
    if output == "json":
        emit_json({"job": job_id, "state": job["state"], "verdict": job.get("verdict"), "grade": graded})
        return 0 if passed else 1
    if graded is None:
        verdict = job.get("verdict") or {}
        click.echo(f"{job_id} was verified already: {job['state']} ({verdict.get('graded', 'unknown time')})")
        for failure in verdict.get("failures", []):
            for subject in failure["subjects"]:
                click.echo(f"  {failure['label']}: {subject}")
        return 0 if passed else 1
    if passed:
        click.echo(f"passed {job_id}")
    else:
        click.echo(f"rejected {job_id}: recorded fail")
        for outcome in graded["outcomes"]:
            if not outcome["ok"]:
                for subject in outcome["subjects"]:
                    click.echo(f"  {outcome['label']}: {subject}")
    from proctor.jobs.verify import Observed, render_entries

    observed = None
    if graded.get("checkout") is not None:
        observed = Observed(
            graded["checkout"], graded.get("revision") or _revision(job), graded["changed"], graded["footprint"]
        )
    entries = job.get("entries") or []
    for line in render_footprint(observed, entries) + render_entries(entries):
        click.echo(line)
    return 0 if passed else 1


def _revision(job: dict) -> str | None:
    from proctor.jobrecord import checkpoint_revision

    return checkpoint_revision(job.get("checkpoint"))


_PUT_AWAY_HELP = {
    "archive": "Archive a job: off the board; its monitors are deleted for good.",
    "trash": "Trash a job: off the board; its monitors are deleted for good.",
    "delete": "Delete a job's row for good; its monitors go with it.",
}


def _put_away(how: str):
    @job.command(name=how, help=_PUT_AWAY_HELP[how])
    @click.argument("job_id", metavar="ID")
    @lease_option
    def command(job_id: str, lease: str | None) -> None:
        api.put_away(job_id, how, lease=lease)
        click.echo(f"{how}d {job_id}" if how != "delete" else f"deleted {job_id}")

    return command


for _how in ("archive", "trash", "delete"):
    _put_away(_how)


@job.command()
@click.argument("job_id", metavar="ID")
@click.argument("column")
@lease_option
@output_option("text", "json")
def move(job_id: str, column: str, lease: str | None, output: str) -> None:
    """Move a job's card to another COLUMN of the board ([board] in proctor.toml).

    A job's column follows its state unless moved; the move holds while the job stays in the
    state it was moved in. A passive column deletes the job's monitors for good. The person's
    move: refused under a lease."""
    moved = api.move_job(job_id, column, lease=lease)
    if output == "json":
        emit_json({"job": job_id, "column": column, "moved": moved.get("moved")})
    else:
        click.echo(f"moved {job_id} to {column}")
