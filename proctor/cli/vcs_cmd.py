"""`proctor vcs checkpoint`: the identity of the working tree right now."""

from __future__ import annotations

import click

from proctor import api
from proctor.cli import emit_json
from proctor.cli.options import output_option
from proctor.errors import CHECKPOINT_TAKES_NO_PATH, ProctorError
from proctor.vcs.checkpoint import Checkpoint


@click.group()
def vcs() -> None:
    """Read the working state of this checkout."""


@vcs.command(context_settings={"ignore_unknown_options": True})
@output_option("text", "name", "json")
@click.argument("paths", nargs=-1, type=click.UNPROCESSED)
def checkpoint(output: str, paths: tuple[str, ...]) -> None:
    """Print the checkout's revision, branch, and whether and how it is dirty.

    \b
    text  <revision> <branch> clean | <revision> <branch> dirty <digest>
    name  <revision> when clean, <revision>+<digest> when not
    json  {revision, branch, dirty, patch_digest, vcs}

    It takes no arguments and writes nothing anywhere: no tag, stash, ref or file.
    """
    if paths:
        raise ProctorError(
            f"proctor vcs checkpoint takes no path (got {' '.join(paths)}): it reports the whole "
            f"workspace's working state, and a path-scoped digest would be a different, narrower "
            f"fact; run it without arguments",
            CHECKPOINT_TAKES_NO_PATH,
        )
    record = api.checkpoint()
    if output == "json":
        emit_json(record)
    elif output == "name":
        click.echo(Checkpoint(**record).name)
    else:
        click.echo(Checkpoint(**record).text())
