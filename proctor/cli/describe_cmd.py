"""`proctor describe job|rules|rule|harness`."""

from __future__ import annotations

import click

from proctor import api
from proctor.cli import emit_json
from proctor.cli.options import output_option
from proctor.hosts import HOSTS


@click.group()
def describe() -> None:
    """Render what proctor knows, for a person or an agent to act on."""


@describe.command()
@click.argument("job_id", metavar="ID")
def job(job_id: str) -> None:
    """The holder's terms, rendered from the row: byte-identical across renders."""
    click.echo(api.describe_job(job_id), nl=False)


@describe.command()
@output_option("text", "json")
def rules(output: str) -> None:
    """Every guard rule this workspace enforces, deny first, with its decision here."""
    listed = api.describe_rules()
    if output == "json":
        emit_json({"rules": listed})
        return
    width = max(len(r["name"]) for r in listed)
    for row in listed:
        note = "" if row["decision"] == row["default"] else f" (default {row['default']})"
        click.echo(f"{row['decision']:<7} {row['name']:<{width}}  {row['summary']}{note}")


@describe.command()
@click.argument("name")
def rule(name: str) -> None:
    """One rule's entry: what it catches, why, its default and override, how to see it."""
    click.echo(api.describe_rule(name), nl=False)


@describe.command()
@click.option("--host", type=click.Choice(HOSTS), default=None, help="Only this host's wiring (default: every host).")
@click.option(
    "--part",
    type=click.Choice(["hooks", "mcp", "all"]),
    default="all",
    show_default=True,
    help="The guard's hooks, the MCP tools (proctor mcp), or both.",
)
def harness(host: str | None, part: str) -> None:
    """Print the wiring for each agent host, for a person to merge; proctor writes none.

    Two parts per host: the guard's hooks (`proctor hook <host>` on every tool call), and
    proctor's MCP tools (`proctor mcp`, which the host starts over stdio). The server also
    serves the tools over HTTP; `proctor server status` prints that URL.
    """
    from proctor.guard.harness import HOSTS, mcp_wiring, wiring

    for name in [host] if host else list(HOSTS):
        if part in ("hooks", "all"):
            click.echo(wiring(name))
        if part in ("mcp", "all"):
            click.echo(mcp_wiring(name))
