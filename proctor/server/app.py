"""The server's routes: a list you can read, each handler a short function over the same
functions the CLI calls.

Every request passes two checks first: its Host header must name this loopback server (a
page elsewhere cannot reach it through DNS rebinding), and it must carry the token (bearer
header, or the HttpOnly cookie the login page sets) or a job's secret (`Authorization: Nonce
<secret>`, which scopes the request to that job's monitors). Request bodies are capped.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from proctor import __version__, errors
from proctor.monitors import store as mstore

MAX_BODY = 1 << 20
DRAIN_LIMIT = 64 << 20
COOKIE = "proctor_token"


class State:
    def __init__(self, root: str, state_dir: str, repo_root: str, token: str, port: int) -> None:
        self.root, self.state_dir, self.repo_root, self.token, self.port = root, state_dir, repo_root, token, port
        self.scheduler = None
        self.started = time.time()
        self.shutdown = None  # set by the daemon: ends the server


def _error(exc: errors.ProctorError) -> JSONResponse:
    status = 409 if isinstance(exc, errors.Refused) else 400
    return JSONResponse(exc.to_json(), status_code=status)


def _host_ok(request: Request, state: State) -> bool:
    host = request.headers.get("host", "")
    return host in (f"127.0.0.1:{state.port}", f"localhost:{state.port}")


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode("utf-8"))


def _cross_site(request: Request, state: State) -> bool:
    """A state-changing request a page elsewhere could have sent: not JSON, or from another
    origin (another port on 127.0.0.1 is another origin, whatever SameSite thinks)."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return False
    origin = request.headers.get("origin")
    if origin is not None and origin not in (f"http://127.0.0.1:{state.port}", f"http://localhost:{state.port}"):
        return True
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return content_type != "application/json"


def _scope(request: Request, state: State) -> tuple[bool, str | None]:
    """(authenticated, job the caller is scoped to or None for the token holder)."""
    header = request.headers.get("authorization", "")
    token = None
    if header.startswith("Bearer "):
        token = header[7:].strip()
    elif request.cookies.get(COOKIE):
        token = request.cookies[COOKIE]
    if token is not None:
        return _same(token, state.token), None
    if header.startswith("Nonce "):
        digest = hashlib.sha256(header[6:].strip().encode()).hexdigest()
        from proctor.store import Store

        store = Store(state.state_dir)
        try:
            row = store.conn.execute("SELECT id, doc FROM jobs WHERE live = 1").fetchall()
        finally:
            store.close()
        for job_id, doc in row:
            if json.loads(doc).get("nonce_sha256") == digest:
                return True, job_id
    return False, None


async def _body(request: Request) -> dict:
    """The JSON body, at most MAX_BODY bytes. A larger one is read and thrown away (up to
    DRAIN_LIMIT) so the client gets its 413 rather than a reset connection."""
    data = bytearray()
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen <= MAX_BODY:
            data.extend(chunk)
        elif seen > DRAIN_LIMIT:
            break
    if seen > MAX_BODY:
        raise errors.ProctorError(f"request body of {seen} bytes is over the {MAX_BODY}-byte limit", "TOO_LARGE")
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        raise errors.ProctorError("the request body is not JSON", "BAD_JSON") from None
    if not isinstance(value, dict):
        raise errors.ProctorError("the request body must be a JSON object", "BAD_JSON")
    return value


def guarded(handler, allow_nonce: bool = True):
    async def wrapped(request: Request) -> Response:
        state: State = request.app.state.proctor
        if not _host_ok(request, state):
            return JSONResponse({"error": {"code": "BAD_HOST", "message": "this server answers 127.0.0.1 only"}},
                                status_code=421)
        if _cross_site(request, state):
            return JSONResponse({"error": {"code": "CROSS_SITE", "message": "a state-changing request must be "
                                           "JSON from this server's own origin"}}, status_code=403)
        ok, scope = _scope(request, state)
        if not ok or (scope is not None and not allow_nonce):
            if request.url.path == "/" or request.url.path.startswith("/console"):
                return RedirectResponse("/login", status_code=303)
            return JSONResponse({"error": {"code": "UNAUTHORIZED",
                                           "message": "send the server token (proctor server status prints where it is)"}},
                                status_code=401)
        request.state.scope = scope
        try:
            return await handler(request)
        except errors.ProctorError as exc:
            if exc.code == "TOO_LARGE":
                return JSONResponse(exc.to_json(), status_code=413)
            return _error(exc)

    return wrapped


REAP_WAIT = 5.0


async def _reaped(state: State) -> None:
    """Every read of the store first ends the jobs nobody can hold (jobs/reap.py), and the
    server's reads are no exception: a pass starts now and the monitors of what it ended are
    deleted before the read. A pass stuck past REAP_WAIT (a stat on a dead mount) is left to
    finish on its own and the read goes ahead: a job nobody can decide about stays live."""
    if state.scheduler is None:
        return
    try:
        await asyncio.wait_for(asyncio.shield(state.scheduler.reap_soon()), REAP_WAIT)
    except asyncio.TimeoutError:
        pass


def _workspace(state: State):
    from proctor.workspace import Workspace

    return Workspace(state.root, warn=lambda line: None)


# -- handlers ---------------------------------------------------------------------------------

async def status(request: Request) -> Response:
    state: State = request.app.state.proctor
    url = f"http://127.0.0.1:{state.port}"
    return JSONResponse({"url": url + "/api/v1/", "console": url + "/", "pid": os.getpid(), "version": __version__,
                         "started": state.started, "repo": state.repo_root,
                         "monitors_running": state.scheduler.running_now if state.scheduler else 0})


async def jobs(request: Request) -> Response:
    from proctor import config as config_mod
    from proctor.jobs.listing import list_jobs

    state: State = request.app.state.proctor
    await _reaped(state)
    with _workspace(state) as ws:
        listing = list_jobs(ws)
        cfg = ws.config
        for row in listing["jobs"]:
            column = config_mod.column_of(cfg, row["state"])
            row["column"] = None if row.get("archived") or row.get("trashed") or column is None else column[0]
            row.pop("nonce_sha256", None)
        listing["board"] = [{"name": n, "states": list(s), "active": a} for n, s, a in cfg.board]
    return JSONResponse(listing)


async def monitors_list(request: Request) -> Response:
    state: State = request.app.state.proctor
    job = request.state.scope or request.query_params.get("job")
    await _reaped(state)
    with _workspace(state) as ws, ws.store.read() as conn:
        return JSONResponse({"monitors": mstore.live(conn, job)})


async def monitors_add(request: Request) -> Response:
    state: State = request.app.state.proctor
    body = await _body(request)
    job = request.state.scope or body.get("job")
    if not isinstance(job, str) or not job:
        raise errors.ProctorError("name the job (--job ID); a monitor belongs to one job")
    for key in ("command", "cwd", "description"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise errors.ProctorError(f"{key} must be a string")
    if body.get("interval") is not None and not isinstance(body["interval"], (str, int, float)):
        raise errors.ProctorError("interval must be a duration such as 45s")
    await _reaped(state)
    with _workspace(state) as ws:
        with ws.store.write() as conn:
            monitor = mstore.add(conn, ws.config, state.repo_root, job, body.get("command"), body.get("interval"),
                                 body.get("description"), body.get("cwd") or state.repo_root,
                                 body.get("allow_unsandboxed") is True,
                                 f"job:{job}" if request.state.scope else "token")
    state.scheduler.add(monitor)
    return JSONResponse(monitor, status_code=201)


async def monitors_remove(request: Request) -> Response:
    state: State = request.app.state.proctor
    try:
        monitor_id = int(request.path_params["id"])
    except ValueError:
        raise errors.ProctorError("a monitor id is a number") from None
    if not 0 < monitor_id < 2 ** 62:
        raise errors.Refused([(mstore.NOT_FOUND, f"no monitor {monitor_id}")])
    with _workspace(state) as ws, ws.store.write() as conn:
        monitor = mstore.remove(conn, monitor_id, request.state.scope)
    state.scheduler.removed(monitor_id)
    return JSONResponse(monitor)


async def events(request: Request) -> Response:
    state: State = request.app.state.proctor
    job = request.state.scope or request.query_params.get("job")
    try:
        limit = min(5000, int(request.query_params.get("limit", "1000")))
    except ValueError:
        limit = 1000
    await _reaped(state)
    with _workspace(state) as ws, ws.store.read() as conn:
        return JSONResponse({"events": mstore.events(conn, job, limit)})


async def stream(request: Request) -> Response:
    """Server-sent events: `changed` whenever the store or a monitor changed."""
    state: State = request.app.state.proctor
    scheduler = state.scheduler

    async def gen():
        last = -1
        yield "retry: 2000\n\n"
        while True:
            if await request.is_disconnected():
                break
            if scheduler.version != last:
                last = scheduler.version
                yield f"event: changed\ndata: {last}\n\n"
            try:
                async with scheduler.changed:
                    await asyncio.wait_for(scheduler.changed.wait(), timeout=15)
            except asyncio.TimeoutError:
                yield ": keep-alive\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def shutdown(request: Request) -> Response:
    state: State = request.app.state.proctor
    if state.shutdown:
        state.shutdown()
    return JSONResponse({"stopping": True})


async def console(request: Request) -> Response:
    from importlib import resources

    page = resources.files("proctor.server").joinpath("console.html").read_text(encoding="utf-8")
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


async def login_page(request: Request) -> Response:
    state: State = request.app.state.proctor
    if not _host_ok(request, state):
        return JSONResponse({"error": {"code": "BAD_HOST"}}, status_code=421)
    failed = request.query_params.get("failed")
    note = "<p class=err>That token is not this server's.</p>" if failed else ""
    return HTMLResponse(f"""<!doctype html><meta charset=utf-8><title>proctor: log in</title>
<style>body{{font:15px system-ui;margin:4em auto;max-width:32em}}input{{width:100%;padding:.4em}}.err{{color:#b00}}</style>
<h1>proctor console</h1>{note}
<form method=post action=/login><label>Server token (<code>proctor server status</code> prints its path)<br>
<input name=token type=password autofocus></label><p><button>Log in</button></form>""")


async def login(request: Request) -> Response:
    state: State = request.app.state.proctor
    if not _host_ok(request, state):
        return JSONResponse({"error": {"code": "BAD_HOST"}}, status_code=421)
    body = (await request.body())[:4096].decode("utf-8", "replace")
    from urllib.parse import parse_qs

    token = (parse_qs(body).get("token") or [""])[0]
    origin = request.headers.get("origin")
    if origin is not None and origin not in (f"http://127.0.0.1:{state.port}", f"http://localhost:{state.port}"):
        return JSONResponse({"error": {"code": "CROSS_SITE"}}, status_code=403)
    if not _same(token, state.token):
        return RedirectResponse("/login?failed=1", status_code=303)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(COOKIE, state.token, httponly=True, samesite="strict", path="/")
    return response


def build(state: State, lifespan) -> Starlette:
    routes = [
        Route("/", guarded(console, allow_nonce=False)),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/api/v1/status", guarded(status)),
        Route("/api/v1/jobs", guarded(jobs, allow_nonce=False)),
        Route("/api/v1/monitors", guarded(monitors_list), methods=["GET"]),
        Route("/api/v1/monitors", guarded(monitors_add), methods=["POST"]),
        Route("/api/v1/monitors/{id}", guarded(monitors_remove), methods=["DELETE"]),
        Route("/api/v1/events", guarded(events)),
        Route("/api/v1/stream", guarded(stream, allow_nonce=False)),
        Route("/api/v1/shutdown", guarded(shutdown, allow_nonce=False), methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.proctor = state
    return app
