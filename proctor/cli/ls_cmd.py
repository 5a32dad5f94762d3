"""`proctor ls jobs`."""

from __future__ import annotations

import click

from proctor import api
from proctor.cli import emit_json
from proctor.cli.options import output_option
from proctor.jobs.listing import render_text


@click.group()
def ls() -> None:
    """List what the store holds."""


@ls.command()
@output_option("text", "json", "name")
def jobs(output: str) -> None:
    """Every job, parents above the jobs they forked: state, age, marks, write_proof, overlaps."""
    listing = api.ls_jobs()
    if output == "json":
        emit_json(listing)
    elif output == "name":
        for row in listing["jobs"]:
            click.echo(row["id"])
    else:
        click.echo(render_text(listing), nl=False)


@ls.command()
@click.argument("job_id", metavar="JOB")
@click.option(
    "--stream",
    "stream_of",
    type=int,
    metavar="N",
    help="Print attempt N's whole stream (what the worker printed), byte for byte.",
)
@click.option("--stderr", "of_stderr", is_flag=True, help="With --stream: print what it wrote to stderr instead.")
@output_option("text", "json")
def attempts(job_id: str, stream_of: int | None, of_stderr: bool, output: str) -> None:
    """The attempts `proctor work` made on JOB: worker, how it ended, its claim, the gate
    failures and where its stream is kept (--stream N prints it)."""
    from proctor.workers.work import attempts_of
    from proctor.workspace import Workspace

    with Workspace() as ws:
        found = attempts_of(ws, job_id)
        if stream_of is not None:
            key = "stderr_stream" if of_stderr else "stream"
            chosen = [a for a in found if a.get("number") == stream_of and a.get(key)]
            if not chosen:
                numbers = ", ".join(str(a.get("number")) for a in found if a.get(key)) or "none"
                raise click.ClickException(
                    f"no {'stderr' if of_stderr else 'stream'} kept for attempt {stream_of} "
                    f"of {job_id} (attempts with one: {numbers})"
                )
            from proctor.store import blobs

            with blobs.reader(ws.store, chosen[-1][key]) as handle:
                import sys

                sys.stdout.flush()
                out = sys.stdout.buffer
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    out.write(chunk)
                out.flush()
            return
    if output == "json":
        emit_json({"attempts": found})
        return
    if not found:
        click.echo(f"no attempts on {job_id}; proctor work {job_id} runs one")
        return
    for a in found:
        flags = ", ".join(
            f
            for f, on in (("provider error", a.get("provider_error")), ("not counted", not a.get("counts", True)))
            if on
        )
        click.echo(
            f"#{a.get('number')} {a.get('worker')} ({a.get('executor')}): {a.get('outcome')} - "
            f"{a.get('reason')}; status {a.get('status')}; {'passed' if a.get('passed') else 'failed'}"
            + (f" [{flags}]" if flags else "")
            + (f"; spend ${a['cost']:.2f}" if a.get("cost") else "")
        )
        claim = " ".join((a.get("claim") or "").split())
        if claim:
            click.echo(f"    claim (not verified): {claim[:300]}")
        for failure in (a.get("failures") or [])[:10]:
            click.echo(f"    gate: {failure}")
        for notice in a.get("noticed") or []:
            click.echo(f"    note: {notice}")
        if a.get("stream"):
            click.echo(f"    stream: {a['stream']} (proctor ls attempts {job_id} --stream {a.get('number')})")
        if a.get("stderr_stream"):
            click.echo(
                f"    stderr: {a['stderr_stream']} (proctor ls attempts {job_id} --stream {a.get('number')} --stderr)"
            )
