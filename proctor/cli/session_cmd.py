"""`proctor session ls`: the agent sessions the guard has seen."""

from __future__ import annotations

import click

from proctor import api
from proctor.cli import emit_json
from proctor.cli.options import output_option


@click.group()
def session() -> None:
    """Agent sessions the hook has seen."""


@session.command(name="ls")
@output_option("text", "json")
def ls_(output: str) -> None:
    """Each session (host, session, subagent) with its lease, its claims (trace, spawner) and what its
    main thread is doing (working, idle, person, plan: monitor follow-ups wait for idle)."""
    seen = api.sessions()
    if output == "json":
        emit_json({"sessions": seen})
        return
    if not seen:
        click.echo("no sessions yet; wire the hook (proctor describe harness) and run an agent")
        return
    for row in seen:
        who = f"{row['host']} {row['session'] or '-'}" + (f"/{row['subagent']}" if row["subagent"] else "")
        lease = f"lease {row['lease']} ({row['lease_from']})" if row["lease"] else "no lease"
        claims = " ".join(f"{k}={row[k]}" for k in ("spawner", "trace") if row[k])
        doing = f"  {row['activity']} since {row['activity_at']}" if row.get("activity") else ""
        click.echo(f"{who}  {lease}  calls {row['calls']}  last {row['last_seen']}{doing}  {claims}".rstrip())
