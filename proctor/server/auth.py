"""Who may call each route of the server: one policy per route, in the table next to the routes
(server/app.py `build`), checked by the middleware here before the route runs.

The policies:

- OPEN: nothing is asked here; the route checks for itself (the login page and its form, which
  open a console session; /mcp, which takes the token or a job's secret, server/mcp_http.py).
- PAGE: the server token or a console session; a caller with neither is sent to the login page
  (303), which sends it back here once logged in (the console's pages).
- PERSON: the server token or a console session, else 401 (a job's secret too: its job's
  process manages only that job's monitors, runs and follow-ups).
- JOB: the token, a console session, or a job's secret (`Authorization: Nonce <secret>`),
  which scopes the request to that job (`request.state.scope`).

The checks, in this order, each answering at once when it fails: the Host header names this
loopback server (421 BAD_HOST), a state-changing request is JSON from this server's own origin
(403 CROSS_SITE), the caller proves itself as its policy asks (401 UNAUTHORIZED, or the login
page), and the token's (or a session's) caller is no process that works a job (403
SERVER_LEASED_CALLER). Then `request.state.actor` says who acts ("token", "console" or
"job:<id>") and `request.state.scope` the job a secret scopes it to (else None).

A request no route takes (404, 405, a slash redirect) passes unchecked: the router's answer
says nothing. A route the table gives no policy is refused to everyone (500 ROUTE_UNLISTED), so
a route added without one is never open by omission.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from proctor import errors
from proctor.server import app as api

OPEN = "open"
PAGE = "page"
PERSON = "person"
JOB = "job"
POLICIES = (OPEN, PAGE, PERSON, JOB)


class Authenticate:
    """A pure ASGI middleware (the response, an event stream too, passes through untouched):
    the checks of the policy of the route a request goes to. `table`: (route, policy) for
    every route of the application."""

    def __init__(self, app: ASGIApp, table: Sequence[tuple[BaseRoute, str]]) -> None:
        for route, policy in table:
            if policy not in POLICIES:
                raise ValueError(f"{route!r}: {policy!r} is no policy (one of {', '.join(POLICIES)})")
        self.app = app
        self.table = list(table)

    def policy(self, route: BaseRoute) -> str | None:
        """The policy the table gives `route` (that route object), or None."""
        return next((policy for known, policy in self.table if known is route), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = _route(scope)
        if route is not None:
            policy = self.policy(route)
            answer = _unlisted() if policy is None else None if policy == OPEN else await _check(scope, receive, policy)
            if answer is not None:
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _route(scope: Scope) -> BaseRoute | None:
    """The route the router will hand the request to: the first that matches it fully."""
    for route in scope["app"].router.routes:
        match, _child = route.matches(scope)
        if match is Match.FULL:
            return route
    return None


def _unlisted() -> Response:
    return JSONResponse(
        {
            "error": {
                "code": errors.ROUTE_UNLISTED,
                "message": "this route has no entry in the server's table of who may call it: refused to everyone",
            }
        },
        status_code=500,
    )


async def _check(scope: Scope, receive: Receive, policy: str) -> Response | None:
    """The answer that refuses the request, or None (and request.state says who acts)."""
    request = Request(scope, receive)
    state: api.State = request.app.state.proctor
    if not api._host_ok(request, state):
        return JSONResponse(
            {"error": {"code": errors.BAD_HOST, "message": "this server answers 127.0.0.1 only"}}, status_code=421
        )
    if api._cross_site(request, state):
        return JSONResponse(
            {
                "error": {
                    "code": errors.CROSS_SITE,
                    "message": "a state-changing request must be JSON from this server's own origin",
                }
            },
            status_code=403,
        )
    try:
        state.expire()
        cookie = request.cookies.get(api.cookie_name(state.port))
        how, job = await api._in_thread(api._identify, state, request.headers.get("authorization", ""), cookie)
        if how == "session" and cookie is not None:  # (a session is named by its cookie)
            state.touch(cookie)
        if how is None or (job is not None and policy != JOB):
            if policy == PAGE:
                path = request.url.path
                return RedirectResponse(
                    "/login" if path == "/" else "/login?next=" + quote(path, safe="/"), status_code=303
                )
            return JSONResponse(
                {
                    "error": {
                        "code": errors.UNAUTHORIZED,
                        "message": "send the server token (proctor server status prints where it is)",
                    }
                },
                status_code=401,
            )
        if how in ("token", "session"):  # a console session is the token's too: a cookie can leak
            why = await api._in_thread(api._peer_refusal, state, request.client)
            if why:
                return api._leased_response(why)
    except errors.ProctorError as exc:
        return api._error(exc)
    request.state.scope = job
    request.state.actor = f"job:{job}" if job else "token" if how == "token" else "console"
    return None
