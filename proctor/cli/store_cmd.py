"""`proctor store`: which engine holds this repository's store, and moving it to another."""

from __future__ import annotations

import click

from proctor.cli import emit_json, set_output
from proctor.cli.options import orchestrated, output_option


@click.group()
def store() -> None:
    """The job store: the embedded SQLite file, or PostgreSQL for agents on several machines."""


@store.command()
@click.option(
    "--to",
    "to_url",
    required=True,
    metavar="URL",
    help="postgresql://user@host/db to move into PostgreSQL, or sqlite: for this machine's embedded store.",
)
@click.option(
    "--from",
    "from_url",
    metavar="URL",
    help="The store to copy (default: the one proctor.toml or PROCTOR_STORE_URL selects).",
)
@click.option("--replace", is_flag=True, help="Empty the target first when it already holds rows.")
@orchestrated
@output_option("text", "json")
def migrate(to_url: str, from_url: str | None, replace: bool, orchestrator: bool, output: str) -> int:
    """Copy this repository's store into another engine, table by table, in one transaction,
    and verify it by a count per table (and of the blobs). The source is left as it was; point
    [store] url in proctor.toml (or PROCTOR_STORE_URL) at the target afterwards.

    Refused (SERVER_LEASED_CALLER) to a caller that works a job, as server start is."""
    from proctor.errors import STORE_NOT_EMPTY, ProctorError
    from proctor.store import open_store, redact
    from proctor.store.move import move
    from proctor.workspace import Workspace

    from proctor.server import daemon

    set_output(output)
    ws = Workspace()
    daemon.refuse_leased(
        ws, orchestrator, "move the store", "a person moves the store every job lives in, from a shell of their own"
    )
    source_url = from_url or ws.store_url or "sqlite:"
    if _same(source_url, to_url):
        raise ProctorError(
            f"the source and the target are the same store ({redact(to_url)}); name another with --to", STORE_NOT_EMPTY
        )
    source = open_store(ws.state_dir, url=source_url)
    target = open_store(ws.state_dir, url=to_url)
    try:
        say = (lambda text: click.echo(f"copied {text}", err=True)) if output == "text" else None
        counted = move(source, target, replace=replace, progress=say)
    finally:
        source.close()
        target.close()
    if output == "json":
        emit_json({"from": source.describe(), "to": target.describe(), **counted})
    else:
        click.echo(
            f"moved {source.describe()} to {target.describe()}: "
            + ", ".join(f"{t} {n}" for t, n in counted["tables"].items())
            + f", blobs {counted['blobs']}; every count matches"
        )
        if to_url.startswith("sqlite"):
            click.echo("now unset [store] url in proctor.toml and PROCTOR_STORE_URL to use it")
        else:
            click.echo(f'now set [store] url = "{redact(to_url)}" in proctor.toml (or PROCTOR_STORE_URL) to use it')
    return 0


def _same(a: str, b: str) -> bool:
    return (a.startswith("sqlite") and b.startswith("sqlite")) or a == b
