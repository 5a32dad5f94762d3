"""`proctor server start|stop|status`."""

from __future__ import annotations

import click

from proctor import __version__
from proctor.cli import emit_json
from proctor.cli.options import output_option


@click.group()
def server() -> None:
    """The daemon: monitors, follow-ups, the JSON API and the console."""


@server.command()
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--foreground", is_flag=True, help="Run in this process until SIGTERM or Ctrl-C.")
def start(port: int | None, foreground: bool) -> None:
    """Start the server for this repository, bound to 127.0.0.1 behind a bearer token."""
    from proctor.server import daemon
    from proctor.workspace import Workspace

    with Workspace() as ws:
        if foreground:
            daemon.serve(ws, port)
            return
        running = daemon.start_background(ws, port)
        prefix = "already running" if running.get("already") else "started"
        click.echo(f"server {prefix} (pid {running['pid']})")
        click.echo(f"console: {running['console']}")
        click.echo(f"api:     {running['url']}")
        click.echo(f"token:   {daemon.token_path(ws)}")


@server.command()
def stop() -> None:
    """Stop the server; every monitor command and its descendants are ended and reaped."""
    from proctor.server import daemon
    from proctor.workspace import Workspace

    with Workspace() as ws:
        click.echo("server stopped" if daemon.stop(ws) else "no server was running")


@server.command()
@output_option("text", "json")
def status(output: str) -> int:
    """Where the server is (console and API URLs), and whether it is older than this proctor."""
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
        outdated = running.get("version") != __version__
        payload = {"running": True, "url": running["url"], "console": running["console"], "pid": running["pid"],
                   "version": running.get("version"), "installed_version": __version__, "outdated": outdated,
                   "token_path": daemon.token_path(ws)}
        if output == "json":
            emit_json(payload)
            return 0
        click.echo(f"server running (pid {running['pid']}, proctor {running.get('version')})")
        click.echo(f"console: {running['console']}")
        click.echo(f"api:     {running['url']}")
        click.echo(f"token:   {payload['token_path']}")
        if outdated:
            click.echo(f"note: the running server is proctor {running.get('version')}, older than the installed "
                       f"{__version__}; every call is answered by the older build until you restart it "
                       f"(proctor server stop; proctor server start)")
        return 0
