"""`proctor monitor add|list|remove|events`: commands the server runs for a job.

With PROCTOR_NONCE (the job's secret, handed to the agent that works the job) the CLI
manages that job's monitors only, whatever --job it names; a person uses the server token
and names --job.
"""

from __future__ import annotations

import os

import click

from proctor.cli import emit_json
from proctor.cli.options import orchestrated, output_option


def _call(method: str, path: str, body: dict | None = None, orchestrator: bool = False) -> dict:
    from proctor import errors
    from proctor.jobs.lease import ORCHESTRATOR, resolve
    from proctor.server import daemon
    from proctor.workspace import Workspace

    nonce = os.environ.get("PROCTOR_NONCE") or None
    with Workspace() as ws:
        if nonce is None:
            with ws.store.read() as conn:
                caller = resolve(conn, ws.root, ORCHESTRATOR if orchestrator else None)
            if caller.lease:
                # an agent manages monitors with its job's secret, scoped to that job; the server
                # token is a person's
                raise errors.Refused([(errors.NOT_YOUR_JOB,
                    f"{caller.whence()}; manage its monitors with the job's secret in PROCTOR_NONCE (proctor job "
                    f"exec prints it){caller.remedy()}")])
        return daemon.request(ws, method, path, body, nonce=nonce)


@click.group()
def monitor() -> None:
    """Commands the server runs at an interval for a job, waking its agent with what they print."""


@monitor.command()
@click.option("--cmd", "command", required=True, help="The shell command to run.")
@click.option("--interval", required=True, help="10s to 24h; the next run starts this long after a run ends.")
@click.option("--description", default=None, help="Default: a readable excerpt of the command.")
@click.option("--allow-unsandboxed", is_flag=True, help="Acknowledge: it runs outside the agent sandbox.")
@click.option("--job", "job_id", default=None, metavar="ID", help="The job (card) it belongs to.")
@orchestrated
@output_option("text", "json")
def add(command: str, interval: str, description: str | None, allow_unsandboxed: bool, job_id: str | None,
        output: str, orchestrator: bool) -> None:
    """Add a monitor; it runs at once and then every interval."""
    created = _call("POST", "/api/v1/monitors", {
        "job": job_id, "command": command, "interval": interval, "description": description,
        "cwd": os.getcwd(), "allow_unsandboxed": allow_unsandboxed}, orchestrator)
    if output == "json":
        emit_json(created)
    else:
        click.echo(f"monitor {created['id']} on {created['job']} every {created['interval']:g}s: {created['description']}")


@monitor.command(name="list")
@click.option("--job", "job_id", default=None, metavar="ID")
@orchestrated
@output_option("text", "json")
def list_(job_id: str | None, output: str, orchestrator: bool) -> None:
    """The live monitors (of one job with --job)."""
    from urllib.parse import quote

    found = _call("GET", "/api/v1/monitors" + (f"?job={quote(job_id)}" if job_id else ""), None, orchestrator)
    if output == "json":
        emit_json(found)
        return
    if not found["monitors"]:
        click.echo("no monitors")
    for m in found["monitors"]:
        click.echo(f"{m['id']}  {m['job']}  every {m['interval']:g}s  {m['description']}  (last run {m['last_run'] or 'none'})")


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
        emit_json({"events": [{k: e[k] for k in ("monitor", "run", "time", "line", "truncated", "followup")}
                              for e in found["events"]]})
        return
    for e in found["events"]:
        click.echo(f"{e['time']}  #{e['monitor']} run {e['run']}  [{e['followup']}]  {e['line']}"
                   + ("  (truncated)" if e["truncated"] else ""))
