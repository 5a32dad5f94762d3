"""`proctor init`: write a commented proctor.toml at the repository root."""

from __future__ import annotations

import os

import click

from proctor import config as config_mod
from proctor.errors import ProctorError
from proctor.paths import find_checkout


@click.command()
@click.option("--force", is_flag=True, help="Overwrite an existing proctor.toml.")
def init(force: bool) -> None:
    """Write a commented proctor.toml at the root of this repository."""
    root = find_checkout().root
    path = os.path.join(root, config_mod.CONFIG_NAME)
    if os.path.exists(path) and not force:
        raise ProctorError(f"{path} exists already; edit it, or pass --force to replace it")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(config_mod.TEMPLATE)
    click.echo(f"wrote {path}")
    from proctor.workspace import Workspace

    with Workspace(root, warn=lambda line: None) as ws:
        click.echo(f"store: {ws.store.path}")
    click.echo("next: declare targets in it, then proctor job fork <id> ... and proctor ls jobs")
