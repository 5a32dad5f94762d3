"""`proctor query output <ref>`: read back recorded evidence."""

from __future__ import annotations

import sys

import click

from proctor import api


@click.group()
def query() -> None:
    """Read back what the store recorded."""


@query.command()
@click.argument("ref")
def output(ref: str) -> None:
    """Print the whole recorded output of a run, by its output_ref."""
    data = api.query_output(ref)
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
