"""`proctor agent harness install`: write the multi-agent skill where each host reads skills."""

from __future__ import annotations

import click

from proctor import errors
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
    from proctor.guard.harness import install_plugin, install_skill
    from proctor.jobs.lease import resolve
    from proctor.workspace import Workspace

    with Workspace() as ws:
        with ws.store.read() as conn:
            caller = resolve(conn, ws.root, lease)
        if caller.lease:
            raise errors.Refused([(errors.NOT_YOUR_JOB,
                f"refused proctor agent harness install: {caller.whence()}; the skills steer every holder, so "
                f"only an unbound caller rewrites them{caller.remedy()}")])
        for path in install_skill(ws.root):
            click.echo(f"wrote {path}")
        click.echo(f"wrote {install_plugin(ws.root)}")
