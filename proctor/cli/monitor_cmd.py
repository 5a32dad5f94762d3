"""`proctor monitor add|list|remove|events|runs|followups|wait`: commands the server runs for a job.

With PROCTOR_NONCE (the job's secret, handed to the agent that works the job) the CLI
manages that job's monitors (their runs, its follow-ups) only, whatever --job it names; a
person uses the server token and names --job. The token is refused to a caller that works a
job: under a lease, or beneath a process started under one (proctor/monitors/client.py).
"""

from __future__ import annotations

import os

import click

from proctor.cli import emit_json
from proctor.cli.options import orchestrated, output_option


def _call(method: str, path: str, body: dict | None = None, orchestrator: bool = False) -> dict:
    from proctor.monitors.client import call

    return call(method, path, body, orchestrator)


@click.group()
def monitor() -> None:
    """Commands the server runs at an interval for a job, waking its agent with what they print."""


@monitor.command()
@click.option("--cmd", "command", required=True, help="The shell command to run.")
@click.option("--interval", required=True, help="10s to 24h; the next run starts this long after a run ends.")
@click.option(
    "--description", default=None, help="One line, cut at 200 characters; default: a readable excerpt of the command."
)
@click.option(
    "--allow-unsandboxed",
    is_flag=True,
    help="Acknowledge: it runs outside the agent sandbox (recorded with the monitor: when, by whom).",
)
@click.option("--job", "job_id", default=None, metavar="ID", help="The job (card) it belongs to.")
@orchestrated
@output_option("text", "json")
def add(
    command: str,
    interval: str,
    description: str | None,
    allow_unsandboxed: bool,
    job_id: str | None,
    output: str,
    orchestrator: bool,
) -> None:
    """Add a monitor; it runs at once and then every interval.

    It runs in this directory: the repository, the job's checkout or a worktree attached to
    it, or a directory inside one of them (else MONITOR_CWD_OUTSIDE_CARD)."""
    created = _call(
        "POST",
        "/api/v1/monitors",
        {
            "job": job_id,
            "command": command,
            "interval": interval,
            "description": description,
            "cwd": os.getcwd(),
            "allow_unsandboxed": allow_unsandboxed,
        },
        orchestrator,
    )
    if output == "json":
        emit_json(created)
    else:
        click.echo(
            f"monitor {created['id']} on {created['job']} every {created['interval']:g}s: {created['description']}"
        )


@monitor.command(name="list")
@click.option("--job", "job_id", default=None, metavar="ID")
@orchestrated
@output_option("text", "json")
def list_(job_id: str | None, output: str, orchestrator: bool) -> None:
    """The live monitors (of one job with --job), with who acknowledged each runs unsandboxed, and when."""
    from urllib.parse import quote

    found = _call("GET", "/api/v1/monitors" + (f"?job={quote(job_id)}" if job_id else ""), None, orchestrator)
    if output == "json":
        emit_json(found)
        return
    if not found["monitors"]:
        click.echo("no monitors")
    for m in found["monitors"]:
        click.echo(
            f"{m['id']}  {m['job']}  every {m['interval']:g}s  {m['description']}  (last run {m['last_run'] or 'none'}; "
            f"unsandboxed acknowledged {m.get('acknowledged') or 'before it was recorded'})"
        )


@monitor.command()
@click.argument("monitor_id", type=int, metavar="ID")
@orchestrated
def remove(monitor_id: int, orchestrator: bool) -> None:
    """Remove a monitor: its command (and its descendants) are ended."""
    removed = _call("DELETE", f"/api/v1/monitors/{monitor_id}", None, orchestrator)
    click.echo(f"removed monitor {removed['id']} of {removed['job']}")


@monitor.command()
@click.option("--job", "job_id", default=None, metavar="ID")
@click.option("--limit", default=1000, show_default=True)
@orchestrated
@output_option("text", "json")
def events(job_id: str | None, limit: int, output: str, orchestrator: bool) -> None:
    """Monitor events: monitor, run, time, truncation, and the follow-up each went out in (or pending)."""
    from urllib.parse import quote

    query = f"?limit={limit}" + (f"&job={quote(job_id)}" if job_id else "")
    found = _call("GET", "/api/v1/events" + query, None, orchestrator)
    if output == "json":
        emit_json(
            {
                "events": [
                    {k: e[k] for k in ("monitor", "run", "time", "line", "truncated", "followup")}
                    for e in found["events"]
                ]
            }
        )
        return
    for e in found["events"]:
        click.echo(
            f"{e['time']}  #{e['monitor']} run {e['run']}  [{e['followup']}]  {e['line']}"
            + ("  (truncated)" if e["truncated"] else "")
        )


@monitor.command()
@click.option("--job", "job_id", default=None, metavar="ID", help="Of this job's monitors only.")
@click.option("--monitor", "monitor_id", type=int, default=None, metavar="N", help="Of this monitor only.")
@click.option("--limit", type=click.IntRange(1, 5000), default=50, show_default=True, help="The latest this many.")
@click.option("--stderr", "show_stderr", is_flag=True, help="Print each run's stderr too (json always has it).")
@orchestrated
@output_option("text", "json")
def runs(
    job_id: str | None, monitor_id: int | None, limit: int, show_stderr: bool, output: str, orchestrator: bool
) -> None:
    """Monitor runs, oldest first: start, end, exit code, timed out (and the timeout), output
    truncated, lines, bytes, an error of the loop that ran it, and its stderr."""
    from urllib.parse import urlencode

    query = {"limit": limit, **({"job": job_id} if job_id else {}), **({"monitor": monitor_id} if monitor_id else {})}
    found = _call("GET", "/api/v1/runs?" + urlencode(query), None, orchestrator)
    if output == "json":
        emit_json(found)
        return
    if not found["runs"]:
        click.echo("no runs")
    for r in found["runs"]:
        if r["ended"] is None:
            outcome = "running"
        elif r["timed_out"]:
            outcome = f"timed out after {r['timeout']:g}s" if r.get("timeout") else "timed out"
        elif r["exit_code"] is None:
            outcome = "ended early"
        else:
            outcome = f"exit {r['exit_code']}"
        cut = "  truncated" if r["truncated"] else ""
        error = f"  error: {r['error']}" if r.get("error") else ""
        click.echo(
            f"run {r['id']}  #{r['monitor']} {r['job']}  {r['started']} .. {r['ended'] or '-'}  {outcome}  "
            f"{r['lines']} lines {r['bytes']} bytes{cut}{error}"
        )
        if show_stderr and r.get("stderr"):
            for line in r["stderr"].rstrip("\n").splitlines():
                click.echo(f"    stderr: {line}")


@monitor.command()
@click.option("--job", "job_id", default=None, metavar="ID", help="Of this job only.")
@click.option("--limit", type=click.IntRange(1, 5000), default=50, show_default=True, help="The latest this many.")
@click.option("--text", "text_of", type=int, default=None, metavar="N", help="Print follow-up N's text.")
@orchestrated
@output_option("text", "json")
def followups(job_id: str | None, limit: int, text_of: int | None, output: str, orchestrator: bool) -> None:
    """Follow-ups, oldest first: id, job, events, bytes, created, pending or delivered (when, and
    how: via), and a `proctor monitor wait` that printed it (printed, printed_to)."""
    from urllib.parse import urlencode

    if text_of is not None:
        found = _call("GET", f"/api/v1/followups/{text_of}", None, orchestrator)
        if output == "json":
            emit_json(found)
        else:
            click.echo(found["text"])
        return
    query = {"limit": limit, **({"job": job_id} if job_id else {})}
    found = _call("GET", "/api/v1/followups?" + urlencode(query), None, orchestrator)
    if output == "json":
        emit_json(found)
        return
    if not found["followups"]:
        click.echo("no follow-ups")
    for f in found["followups"]:
        state = f"delivered {f['delivered']} via {f['via'] or '?'}" if f["delivered"] else "pending"
        printed = f"  printed {f['printed']} to {f['printed_to'] or '?'}" if f.get("printed") else ""
        click.echo(
            f"{f['id']}  {f['job']}  {f['events']} events  {f['bytes']} bytes  created {f['created']}  {state}{printed}"
        )


@monitor.command(name="wait")
@click.option("--job", "job_id", default=None, metavar="ID", help="The job; default: the one you act under.")
@click.option("--host", default="claude", show_default=True, help="The host of --session.")
@click.option(
    "--session",
    default=None,
    metavar="ID",
    help="Hold the follow-up until this session is idle (not working, nor waiting for the person or a plan approval).",
)
@click.option("--timeout", default=None, metavar="DURATION", help="Give up after this long (default: never).")
@output_option("text", "json")
def wait_(job_id: str | None, host: str, session: str | None, timeout: str | None, output: str) -> None:
    """Block until the job's next follow-up is ready, print it and exit.

    Started by an agent as a background task, its end wakes the idle agent, which reads the
    follow-up from its output. Exit 0: printed; 3: nothing left to wait for (the job ended, or
    it has no live monitors and no follow-up to come); 4: --timeout passed.
    """
    from proctor.monitors import wake
    from proctor.timeutil import parse_duration
    from proctor.workspace import Workspace

    seconds = None
    if timeout is not None:
        try:
            seconds = parse_duration(timeout)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--timeout") from None
    with Workspace() as ws:
        job = wake.job_to_wait(ws, job_id)
        code, followup, why = wake.wait(ws, job, host, session, seconds)
    if output == "json":
        emit_json(
            {
                "job": job,
                "followup": followup,
                "status": {0: "printed", 3: "nothing-left", 4: "timed-out"}[code],
                "reason": why or None,
            }
        )
    elif followup is not None:
        click.echo(followup["text"])
    else:
        click.echo(f"proctor monitor wait: {why}", err=True)
    raise SystemExit(code)
