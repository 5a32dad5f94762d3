"""`proctor describe job`."""

from __future__ import annotations

import click

from proctor import api


@click.group()
def describe() -> None:
    """Render what proctor knows, for a person or an agent to act on."""


@describe.command()
@click.argument("job_id", metavar="ID")
def job(job_id: str) -> None:
    """The holder's terms, rendered from the row: byte-identical across renders."""
    click.echo(api.describe_job(job_id), nl=False)
