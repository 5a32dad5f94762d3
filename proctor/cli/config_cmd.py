"""`proctor config show`: every effective setting and where it came from."""

from __future__ import annotations

import click

from proctor import api
from proctor.cli import emit_json
from proctor.cli.options import output_option


@click.group()
def config() -> None:
    """Read proctor.toml as proctor sees it."""


@config.command()
@output_option("text", "json")
def show(output: str) -> None:
    """Print every effective value, its source, and each bad value with the default kept."""
    shown = api.config_show()
    if output == "json":
        emit_json(shown)
        return
    where = shown["file"] if shown["exists"] else f"{shown['file']} (absent: every value is a default)"
    click.echo(f"# {where}")
    width = max(len(s["key"]) for s in shown["settings"])
    vwidth = max(len(s["shown"]) for s in shown["settings"])
    for setting in shown["settings"]:
        source = setting["source"]
        if setting["problem"]:
            # a value still read from the file despite a problem is one brought back into its range
            source += " (clamped)" if source != "default" else " (proctor.toml value rejected)"
        click.echo(f"{setting['key'].ljust(width)}  {setting['shown'].ljust(vwidth)}  {source}")
    if shown["problems"]:
        click.echo("")
        click.echo("problems:")
        for problem in shown["problems"]:
            click.echo(f"  {problem}")
