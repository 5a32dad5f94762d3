"""The command tree. Each group lives in its own module and is imported only when it runs,
so `proctor --version` and `proctor --help` pay for click alone."""

from __future__ import annotations

import importlib

import click

from proctor import __version__

# name -> (module, attribute, one-line help shown by `proctor --help`)
GROUPS = {
    "init": ("proctor.cli.init_cmd", "init", "Write a commented proctor.toml in this repository."),
    "config": ("proctor.cli.config_cmd", "config", "Read proctor.toml as proctor sees it."),
    "vcs": ("proctor.cli.vcs_cmd", "vcs", "Read the working state of this checkout."),
    "job": ("proctor.cli.job_cmd", "job", "Declare jobs, take their leases, and end them."),
    "ls": ("proctor.cli.ls_cmd", "ls", "List what the store holds."),
    "describe": ("proctor.cli.describe_cmd", "describe", "Render what proctor knows, for a person or an agent."),
    "run": ("proctor.cli.run_cmd", "run", "Run a target from proctor.toml and record the run."),
    "query": ("proctor.cli.query_cmd", "query", "Read back recorded evidence (a run's output)."),
    "session": ("proctor.cli.session_cmd", "session", "Agent sessions the guard's hook has seen."),
    "agent": ("proctor.cli.agent_cmd", "agent", "Install the multi-agent skill for agent hosts."),
    "doctor": ("proctor.cli.doctor_cmd", "doctor", "Check the store, config, hook wiring and lease."),
    "hook": ("proctor.cli.hook_cmd", "hook", "The guard hook agent hosts run on every tool call."),
    "work": ("proctor.cli.work_cmd", "work", "Run a job with agent CLIs: stops, gates, commits."),
    "server": ("proctor.cli.server_cmd", "server", "The daemon: monitors, follow-ups, API and console."),
    "monitor": ("proctor.cli.monitor_cmd", "monitor", "Commands the server runs for a job, waking its agent."),
    "mcp": ("proctor.cli.mcp_cmd", "mcp", "proctor's tools for an agent, over MCP on stdio."),
    "store": ("proctor.cli.store_cmd", "store", "The job store's engine, and moving it (SQLite, PostgreSQL)."),
    "graph": ("proctor.cli.graph_cmd", "graph", "The symbols a change added, removed and changed."),
    "diff": ("proctor.cli.graph_cmd", "diff", "Annotate `git diff REV | proctor diff -` with declarations."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(GROUPS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in GROUPS:
            return None
        module, attribute, _ = GROUPS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, help_text) for name, (_, _, help_text) in GROUPS.items()])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="proctor", message="%(prog)s %(version)s")
def cli() -> None:
    """proctor supervises AI coding agents working on one git repository.

    \b
    Declare work as jobs with write paths and one check, hand each to an agent under a
    lease, and verify what comes back against the real diff, never the agent's word.

    \b
    Start here:
      proctor init                 write a commented proctor.toml in this repository
      proctor server start         the console, monitors and follow-ups
      proctor job fork ID ...      declare a job
      proctor ls jobs              every job, its state and its overlaps
      proctor work ID              run a job with an agent CLI, unattended
    """
