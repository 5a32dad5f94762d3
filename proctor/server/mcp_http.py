"""The server's MCP endpoint: proctor's tools over streamable HTTP at /mcp.

Every request passes the API's own checks first (server/app.py): its Host must name this
loopback server, an Origin (a browser's) must be this server's, and it must carry the server
token (`Authorization: Bearer`, a person's: refused, as on the API, to a process that works a
job) or a job's secret (`Authorization: Nonce <PROCTOR_NONCE>`, which makes the caller that
job's holder and scopes its monitor tools to that job). A token caller acts as the
orchestrator, holding no lease, in the server's checkout; a secret's caller acts in the
checkout its job was taken in (its forks are declared there, never in the person's). Each
call waits at most the API's STORE_SECONDS for a store another process holds, and at most
mcp_server.CONCURRENT_CALLS run at once, so calls cannot take the API's threads.

Stateless and answered as JSON: each POST is one exchange, so who calls is decided per
request and no MCP session outlives the credential that opened it; any other method is a 405.
"""

from __future__ import annotations

import contextlib
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from proctor import errors, jobrecord

PATH = "/mcp"


class Endpoint:
    """An ASGI app: the checks, then the SDK's streamable HTTP transport."""

    def __init__(self, state) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        from proctor.mcp_server import build

        self.state = state
        hosts = [f"127.0.0.1:{state.port}", f"localhost:{state.port}"]
        self.manager = StreamableHTTPSessionManager(
            app=build(self._door),
            stateless=True,
            json_response=True,
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=hosts,
                allowed_origins=[f"http://{h}" for h in hosts],
            ),
        )
        self.transport = StreamableHTTPASGIApp(self.manager)

    def running(self):
        """The transport's task group, for the server's lifespan to hold open."""
        return self.manager.run()

    async def __call__(self, scope, receive, send) -> None:
        from proctor.server import app as api

        state = self.state
        request = Request(scope, receive)
        answer: Response | None = None
        origin = request.headers.get("origin")
        if not api._host_ok(request, state):
            answer = JSONResponse(
                {"error": {"code": errors.BAD_HOST, "message": "this server answers 127.0.0.1 only"}}, status_code=421
            )
        elif origin is not None and origin not in (f"http://127.0.0.1:{state.port}", f"http://localhost:{state.port}"):
            answer = JSONResponse(
                {"error": {"code": errors.CROSS_SITE, "message": "an MCP request from a page elsewhere is refused"}},
                status_code=403,
            )
        else:
            try:
                how, job, checkout = await api._in_thread(_identify, state, request.headers.get("authorization", ""))
                if how is None:
                    answer = JSONResponse(
                        {
                            "error": {
                                "code": errors.UNAUTHORIZED,
                                "message": (
                                    "send the server token (Authorization: Bearer <token>; proctor server status prints where "
                                    "it is) or, for an agent, its job's secret (Authorization: Nonce <PROCTOR_NONCE>)"
                                ),
                            }
                        },
                        status_code=401,
                    )
                elif how == "token":
                    why = await api._in_thread(api._peer_refusal, state, request.client)
                    if why:
                        answer = api._leased_response(why)
                elif job and checkout is None:
                    answer = JSONResponse(
                        {
                            "error": {
                                "code": errors.CHECKOUT_ELSEWHERE,
                                "message": (
                                    f"{job}'s checkout is not on this machine, or is gone; a job's secret acts in the "
                                    f"checkout its job was taken in (proctor ls jobs shows where)"
                                ),
                            }
                        },
                        status_code=409,
                    )
                elif request.method != "POST":
                    # stateless, answered as JSON: no stream to open (GET), no session to end (DELETE);
                    # an open stream would be a socket and a task that nothing writes or closes
                    answer = JSONResponse(
                        {"error": {"code": errors.METHOD, "message": "POST one JSON-RPC message to /mcp"}},
                        status_code=405,
                        headers={"Allow": "POST"},
                    )
                scope["proctor.caller"] = (how, job, checkout)
            except errors.ProctorError as exc:
                answer = api._error(exc)
        if answer is not None:
            await answer(scope, receive, send)
            return
        await self.transport(scope, receive, send)

    def _door(self, ctx):
        from proctor.jobs.lease import ORCHESTRATOR, Secret
        from proctor.mcp_tools import Door
        from proctor.server import app as api

        state = self.state
        how, job, checkout = ctx.request.scope["proctor.caller"]
        actor = f"job:{job}" if job else "token"

        async def monitors(method: str, path: str, body: dict | None) -> dict:
            url = urlsplit(path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path == "/api/v1/events":
                return await api.monitor_events(state, job, query.get("job"), int(query.get("limit", 1000)))
            if method == "GET":
                return await api.list_monitors(state, job, query.get("job"))
            if method == "POST":
                return await api.add_monitor(state, job, actor, body or {})
            return await api.remove_monitor(state, job, actor, int(url.path.rsplit("/", 1)[1]))

        return Door(
            checkout or state.root,
            {},
            Secret(job) if job else ORCHESTRATOR,
            "http",
            monitors,
            busy_seconds=api.STORE_SECONDS,
        )


def _identify(state, header: str) -> tuple[str | None, str | None, str | None]:
    """(how the caller proved itself, the job a secret names, that job's checkout when it is on
    this machine and still there): a job's holder acts in its own checkout, never the person's."""
    import os

    from proctor.server import app as api
    from proctor.store import rows

    how, job = api._identify(state, header, None)
    if not job:
        return how, job, None
    with api._opened(state) as ws, ws.store.read() as conn:
        row = rows.get(conn, job)
    taken = row.get("checkout_root") if row is not None else None
    if row is None or not taken or not jobrecord.on_this_machine(row) or not os.path.isdir(taken):
        return how, job, None
    return how, job, os.path.realpath(taken)


def lifespan(endpoint: Endpoint, inner):
    """The server's lifespan with the MCP transport's running around it."""

    @contextlib.asynccontextmanager
    async def both(app):
        async with endpoint.running():
            async with inner(app):
                yield

    return both
