"""`proctor server start|stop|status`."""

from __future__ import annotations

import click

from proctor import __version__
from proctor.cli import emit_json
from proctor.cli.options import orchestrated, output_option

_PERSON = (
    "a person {verb} the server, from a shell that works no job (the server runs every job's monitors, and "
    "a server started under a lease would hand that lease and its secret to all of them)"
)


@click.group()
def server() -> None:
    """The daemon: monitors, follow-ups, the JSON API and the console."""


@server.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port on 127.0.0.1 (default: a free one).")
@click.option(
    "--foreground",
    is_flag=True,
    help="Run in this process until SIGTERM or Ctrl-C (it prints the same lines once it listens).",
)
@click.option(
    "--detached",
    is_flag=True,
    hidden=True,
    help="Started by `server start`, with its output on the server's log: print no login link there.",
)
@orchestrated
def start(port: int | None, foreground: bool, detached: bool, orchestrator: bool) -> None:
    """Start the server for this repository, bound to 127.0.0.1 behind a bearer token, and
    print where it is and a one-time link that logs a browser in to the console (`proctor
    server status` prints another).

    Refused (SERVER_LEASED_CALLER) to a caller that works a job: under a lease, or beneath a
    process that was started under one."""
    from proctor.server import daemon
    from proctor.workspace import Workspace

    with Workspace() as ws:
        daemon.refuse_leased(ws, orchestrator, "start the server", _PERSON.format(verb="starts"))
        if foreground:

            def announce(running: dict, url: str, seconds: float) -> None:
                _where(ws, running, "started in the foreground; Ctrl-C or proctor server stop ends it")
                click.echo(f"login:   {_login_line(url, seconds)}")

            daemon.serve(ws, port, announce=None if detached else announce)
            if not detached:
                click.echo("server stopped")
            return
        running = daemon.start_background(ws, port)
        _where(ws, running, "already running" if running.get("already") else "started")
        click.echo(f"login:   {_login_link(ws)[1]}")


def _where(ws, running: dict, how: str) -> None:
    """The lines that say where a running server is."""
    from proctor.server import daemon

    click.echo(f"server {how} (pid {running['pid']})")
    click.echo(f"console: {running['console']}")
    click.echo(f"api:     {running['url']}")
    click.echo(f"mcp:     {running.get('mcp') or 'none (a server older than this proctor; restart it)'}")
    click.echo(f"token:   {daemon.token_path(ws)}")


def _login_line(url: str, seconds: float) -> str:
    return f"{url}  (opens the console once, within {int(seconds // 60)} min)"


def _login_link(ws) -> tuple[str | None, str]:
    """(a one-time console login link, or None; the line that says it or why there is none)."""
    from proctor import errors
    from proctor.server import daemon

    try:
        link = daemon.request(ws, "POST", "/api/v1/login-link", {}, timeout=10)
    except errors.ProctorError as exc:
        return None, f"no login link: {exc.message}"
    return link["url"], _login_line(link["url"], link.get("expires_in", 300))


@server.command()
@orchestrated
def stop(orchestrator: bool) -> None:
    """Stop the server; every monitor command and its descendants are ended and reaped.

    Refused (SERVER_LEASED_CALLER) to a caller that works a job, as start is."""
    from proctor.server import daemon
    from proctor.workspace import Workspace

    with Workspace() as ws:
        daemon.refuse_leased(ws, orchestrator, "stop the server", _PERSON.format(verb="stops"))
        click.echo("server stopped" if daemon.stop(ws) else "no server was running")


@server.command()
@output_option("text", "json")
def status(output: str) -> int:
    """Where the server is (console, API and MCP URLs), a one-time link that logs a browser in
    to the console, and whether it runs other code than this proctor (an older version, or the
    same version's files changed since it started)."""
    from proctor.server import daemon
    from proctor.workspace import Workspace

    with Workspace() as ws:
        running = daemon.info(ws)
        if running is None:
            if output == "json":
                emit_json({"running": False, "installed_version": __version__})
            else:
                click.echo("no server is running; start one with proctor server start")
            return 1
        installed = daemon.code_digest()
        outdated = running.get("version") != __version__ or running.get("code") != installed
        payload = {
            "running": True,
            "url": running["url"],
            "console": running["console"],
            "mcp": running.get("mcp"),
            "pid": running["pid"],
            "version": running.get("version"),
            "installed_version": __version__,
            "outdated": outdated,
            "code": running.get("code"),
            "installed_code": installed,
            "token_path": daemon.token_path(ws),
        }
        payload["login_link"] = None
        login_line = "no login link: this server predates them; restart it"
        if running.get("console"):
            payload["login_link"], login_line = _login_link(ws)
        if output == "json":
            emit_json(payload)
            return 0
        click.echo(f"server running (pid {running['pid']}, proctor {running.get('version')})")
        click.echo(f"console: {running['console']}")
        click.echo(f"api:     {running['url']}")
        if running.get("mcp"):
            click.echo(f"mcp:     {running['mcp']}  (Authorization: Bearer <token>, or Nonce <a job's secret>)")
        else:
            click.echo("mcp:     none: this server predates the MCP endpoint; restart it")
        click.echo(f"token:   {payload['token_path']}")
        click.echo(f"login:   {login_line}")
        if outdated:
            if running.get("version") != __version__:
                why = f"it runs proctor {running.get('version')}, the installed one is {__version__}"
            elif running.get("code") is None:
                why = "it predates the record of the code a server runs"
            else:
                why = f"its code differs from the installed proctor {__version__}'s (changed since it started)"
            click.echo("outdated: restart it (proctor server stop; proctor server start)")
            click.echo(f"  {why}; every call is answered by the code it started with")
        return 0
