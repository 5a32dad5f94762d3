"""proctor's tools served over MCP with the official SDK: stdio (`proctor mcp`) and HTTP (the
server's /mcp, proctor/server/mcp_http.py).

Each call runs the tool's library call (proctor/mcp_tools.py) in a worker thread; a refusal
comes back as a tool error (isError) whose structured content is the same JSON the CLI prints
with -o json: {"error": {"code": "PRC...", "message": ...}, "refusals": [...]}.
"""

from __future__ import annotations

import contextvars
import json
import os

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.lowlevel import Server

from proctor import __version__, errors, store
from proctor import mcp_tools

INSTRUCTIONS = (
    "proctor supervises the agents working this repository. Jobs declare who may write what; a job's holder "
    "returns it with a result that proctor verifies against the real diff and recorded runs, never the agent's "
    "word. Take a checkpoint (vcs_checkpoint) and read jobs_list before you declare work; declare a job with "
    "job_put, take it with job_exec, return it with job_exit and verify it with job_wait. Every refusal names its "
    "PRC code and what to do instead."
)


def _result(value: dict) -> types.CallToolResult:
    # the same JSON as text for a client that reads only content; compact, so the C encoder
    # writes it (an indented dump of 1,000 jobs costs five times as long)
    text = json.dumps(value, separators=(",", ":"), default=str)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=value)


def _failure(payload: dict, text: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=payload, is_error=True
    )


def refusal(exc: errors.ProctorError) -> types.CallToolResult:
    payload = mcp_tools.error_json(exc)
    lines = [
        f"{code}: {message}" if code else message
        for code, message in (getattr(exc, "reasons", None) or [(exc.code, exc.message)])
    ]
    return _failure(payload, "\n".join(lines))


async def call(door: mcp_tools.Door, name: str, arguments: dict | None) -> types.CallToolResult:
    """One tool call as `door`'s caller; a refusal or an unusable store is a tool error."""
    args = arguments or {}
    try:
        if not isinstance(args, dict):
            raise errors.ProctorError(f"{name} takes its arguments as an object", errors.BAD_RECORD)
        if name in mcp_tools.MONITOR_TOOLS:
            method, path, body = mcp_tools.monitor_request(name, args, door.cwd)
            return _result(mcp_tools.monitor_answer(name, await door.monitors(method, path, body)))
        function = mcp_tools.CALLS.get(name)
        if function is None:
            raise errors.ProctorError(f"no tool {name!r}; the tools are {', '.join(mcp_tools.TOOL_NAMES)}")
        return _result(await anyio.to_thread.run_sync(_bounded, function, door, args, limiter=_limiter()))
    except errors.StoreError as exc:
        return refusal(errors.busy(exc) or exc)  # as the API answers it
    except errors.ProctorError as exc:
        return refusal(exc)
    except Exception as exc:  # a bug: say so as a tool error rather than drop the connection
        return _failure(
            {"error": {"code": None, "message": f"proctor failed: {type(exc).__name__}: {exc}"}},
            f"proctor failed: {type(exc).__name__}: {exc}",
        )


# At most this many tool calls run at once in one process: over HTTP they share the server's
# worker threads with the API's own handlers, which a flood of calls waiting on a held store
# must not take from the person.
CONCURRENT_CALLS = 4
_limiters: dict = {}


def _limiter():
    loop = id(anyio.lowlevel.current_token())
    if loop not in _limiters:
        _limiters.clear()
        _limiters[loop] = anyio.CapacityLimiter(CONCURRENT_CALLS)
    return _limiters[loop]


BUSY_LIMIT: contextvars.ContextVar = contextvars.ContextVar("proctor_mcp_busy_limit", default=None)
store.busy_limit = BUSY_LIMIT.get  # read by every store this process opens, None outside a door's call


def _bounded(function, door: mcp_tools.Door, args: dict) -> dict:
    """The call, its every wait for the store bounded by the door's busy_seconds."""
    if door.busy_seconds is None:
        return function(door, args)
    token = BUSY_LIMIT.set(door.busy_seconds)
    try:
        return function(door, args)
    finally:
        BUSY_LIMIT.reset(token)


def build(door_for) -> Server:
    """The MCP server; `door_for(ctx)` says who a request's caller is."""
    listed = [
        types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
        for t in mcp_tools.tools()
    ]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx, params) -> types.CallToolResult:
        return await call(door_for(ctx), params.name, params.arguments)

    return Server(
        "proctor", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool
    )


async def _count(client) -> int:
    async with client as connected:
        return len((await connected.list_tools()).tools)


def probe(url: str | None = None, authorization: str | None = None, timeout: float = 10.0) -> int:
    """How many tools the MCP server lists: this build's, in process, or the one at `url` over
    HTTP. Raises what the SDK raises when it cannot be reached (for doctor to say)."""
    from mcp import Client

    if url is None:
        return anyio.run(_count, Client(build(lambda ctx: stdio_door())))
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def over_http() -> int:
        async with httpx2.AsyncClient(headers={"Authorization": authorization or ""}, timeout=timeout) as http:
            with anyio.fail_after(timeout):
                return await _count(Client(streamable_http_client(url, http_client=http)))

    return anyio.run(over_http)


def stdio_door() -> mcp_tools.Door:
    """This process's caller: its environment (BAGGAGE, PROCTOR_NONCE) and working directory."""
    environ = dict(os.environ)
    cwd = os.getcwd()

    async def monitors(method: str, path: str, body: dict | None) -> dict:
        from proctor.monitors.client import call as request

        return await anyio.to_thread.run_sync(lambda: request(method, path, body, cwd=cwd, environ=environ))

    return mcp_tools.Door(cwd, environ, None, "stdio", monitors)


def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    door = stdio_door()
    server = build(lambda ctx: door)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
