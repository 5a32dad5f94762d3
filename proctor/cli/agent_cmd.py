"""`proctor agent harness install`: write the multi-agent skill where each host reads skills."""

from __future__ import annotations

import click

from proctor.cli.options import lease_option


@click.group()
def agent() -> None:
    """What proctor gives the agents themselves."""


@agent.group()
def harness() -> None:
    """The multi-agent skill, and opencode's guard plugin."""


@harness.command()
@lease_option
def install(lease: str | None) -> None:
    """Write the proctor-multi-agent skill into .claude/, .codex/ and .gemini/ of this repository,
    and opencode's guard plugin into .opencode/plugins/proctor.js.

    Refused under a lease (the checkout's binding or a BAGGAGE claim): the skills steer every
    holder, so only an unbound caller rewrites them.
    """
    from proctor.guard.harness import install as install_harness
    from proctor.workspace import Workspace

    with Workspace() as ws:
        for path in install_harness(ws, lease):
            click.echo(f"wrote {path}")
