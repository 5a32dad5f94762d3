"""The command tree. Groups are listed here; each lives in its own module."""

from __future__ import annotations

import click

from proctor import __version__
from proctor.cli import config_cmd, describe_cmd, init_cmd, job_cmd, ls_cmd, vcs_cmd


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="proctor", message="%(prog)s %(version)s")
def cli() -> None:
    """proctor supervises AI coding agents working on one git repository.

    \b
    Declare work as jobs with write paths and one check, hand each to an agent under a
    lease, and verify what comes back against the real diff, never the agent's word.

    \b
    Start here:
      proctor init                 write a commented proctor.toml in this repository
      proctor job fork ID ...      declare a job
      proctor ls jobs              every job, its state and its overlaps
    """


cli.add_command(init_cmd.init)
cli.add_command(config_cmd.config)
cli.add_command(vcs_cmd.vcs)
cli.add_command(job_cmd.job)
cli.add_command(ls_cmd.ls)
cli.add_command(describe_cmd.describe)
