"""`proctor hook` as click sees it: only for --help. A real hook call never reaches click;
proctor/__main__.py branches on `hook` before the CLI framework is imported."""

from __future__ import annotations

import click

from proctor.hosts import HOSTS


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("host", type=click.Choice(HOSTS))
@click.option("--lease", metavar="ID", help="Judge every call under this job's lease.")
def hook(host: str, lease: str | None) -> int:
    """Judge one tool call: the host's JSON event on stdin, its answer on stdout.

    Wire it with the output of `proctor describe harness`. It passes ({}) whenever it cannot
    judge; set PROCTOR_HOOK_DEBUG=1 to see why on stderr.
    """
    from proctor.hook import main

    return main([host] + (["--lease", lease] if lease else []))
