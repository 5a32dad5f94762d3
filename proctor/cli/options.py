"""Options shared by several commands."""

from __future__ import annotations

import functools
from typing import Callable

import click

from proctor.cli import set_output


def output_option(*choices: str, default: str = "text") -> Callable:
    def remember(ctx: click.Context, param: click.Parameter, value: str) -> str:
        set_output(value)
        return value

    return click.option(
        "-o",
        "--output",
        type=click.Choice(choices),
        default=default,
        show_default=True,
        callback=remember,
        is_eager=True,
        help="Output format.",
    )


def _remember_orchestrator(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        ctx.meta["proctor.orchestrator"] = True
    return value


_orchestrator_flag = click.option(
    "--orchestrator",
    is_flag=True,
    expose_value=False,
    callback=_remember_orchestrator,
    help=(
        "Act as the orchestrator, holding no lease, whatever this checkout's binding or BAGGAGE say "
        "(the guard refuses it to any session under a lease)."
    ),
)


def orchestrated(function: Callable) -> Callable:
    """Add --orchestrator; the command reads it as `orchestrator` (True or False)."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        kwargs["orchestrator"] = bool(click.get_current_context().meta.get("proctor.orchestrator"))
        return function(*args, **kwargs)

    return _orchestrator_flag(wrapper)


def lease_option(function: Callable) -> Callable:
    """--lease ID and --orchestrator; the command reads `lease` as the ID, or as
    proctor.jobs.lease.ORCHESTRATOR for --orchestrator."""
    from proctor.jobs.lease import ORCHESTRATOR

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        if click.get_current_context().meta.get("proctor.orchestrator"):
            if kwargs.get("lease") is not None:
                raise click.UsageError(
                    f"--lease {kwargs['lease']} and --orchestrator contradict each other: act "
                    f"under a job's lease, or as the orchestrator holding none"
                )
            kwargs["lease"] = ORCHESTRATOR
        return function(*args, **kwargs)

    return click.option(
        "--lease",
        metavar="ID",
        default=None,
        help="Act under this job's lease (else this checkout's binding, else BAGGAGE's proctor.lease).",
    )(_orchestrator_flag(wrapper))
