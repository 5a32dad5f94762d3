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
