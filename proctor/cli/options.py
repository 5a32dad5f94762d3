"""Options shared by several commands."""

from __future__ import annotations

from typing import Callable

import click

from proctor.cli import set_output


def output_option(*choices: str, default: str = "text") -> Callable:
    def remember(ctx: click.Context, param: click.Parameter, value: str) -> str:
        set_output(value)
        return value

    return click.option(
        "-o", "--output", type=click.Choice(choices), default=default, show_default=True,
        callback=remember, is_eager=True, help="Output format.",
    )


lease_option = click.option(
    "--lease", metavar="ID", default=None,
    help="Act under this job's lease (else BAGGAGE's proctor.lease, else this checkout's binding).",
)
