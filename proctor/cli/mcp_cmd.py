"""`proctor mcp`: proctor's tools for an agent, over MCP on stdin and stdout."""

from __future__ import annotations

import click


@click.command()
@click.option("--list", "list_tools", is_flag=True, help="Print the tools (name and description) and exit.")
def mcp(list_tools: bool) -> None:
    """Serve proctor's tools over MCP on stdin and stdout, for an agent host to start.

    \b
    Tools: vcs_checkpoint, jobs_list, job_describe, job_put, job_exec, job_exit,
    job_wait, monitor_add, monitor_list, monitor_remove, monitor_events.

    Each calls what the CLI calls, with the same refusals (their PRC codes in the tool's
    structured error). The caller is this process: its BAGGAGE and PROCTOR_NONCE, and the
    checkout it runs in, exactly as for `proctor job ...`; the host starts it in the
    session's working directory and environment. `proctor describe harness` prints the
    wiring for each host; the server serves the same tools over HTTP at /mcp (`proctor
    server status` prints the URL).
    """
    if list_tools:
        from proctor.mcp_tools import tools

        for tool in tools():
            click.echo(f"{tool['name']}\n    {tool['description']}\n")
        return
    from proctor.mcp_server import serve_stdio

    serve_stdio()
