"""The server's routes: a list you can read, each handler a short function over the same
functions the CLI calls.

Every request passes two checks first (server/auth.py, by the policy `build`'s table gives
its route): its Host header must name this loopback server (a page elsewhere cannot reach it
through DNS rebinding), and it must carry the token (bearer header), a console session (the
HttpOnly cookie `proctor_<port>` the login page sets: a random id only this server knows,
never the token), or a job's secret (`Authorization: Nonce <secret>`, which scopes the
request to that job's monitors, runs and follow-ups). The token is a person's: the server
finds the process at the other end of the connection and refuses it (403
SERVER_LEASED_CALLER) when that process works a job of this store or runs beneath one
(daemon.lineage); the login page asks the same before it opens a session.

Request bodies are capped (1 MiB; 4 KiB for the login form) and must arrive within
BODY_SECONDS (else 408); a body nested too deep for the parser is a 400. At most MAX_STREAMS
event streams are open at once (else 503). Handlers do their store work in a worker thread,
waiting at most STORE_SECONDS for a store another process holds (else 503 STORE_BUSY), so
the server answers while the store is busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import time
from typing import TYPE_CHECKING, Callable, TypeVar
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from proctor import __version__, errors
from proctor.monitors import store as mstore

if TYPE_CHECKING:
    from proctor.monitors.scheduler import Scheduler

MAX_BODY = 1 << 20
DRAIN_LIMIT = 64 << 20
LOGIN_BODY = 4096
BODY_SECONDS = 30.0
MAX_STREAMS = 32
STORE_SECONDS = 5.0
MAX_SESSIONS = 64
SESSION_IDLE = 12 * 3600.0
STORE_BUSY = errors.STORE_BUSY
_STATUS: dict[str | None, int] = {errors.TOO_LARGE: 413, errors.BODY_TIMEOUT: 408, STORE_BUSY: 503}


def cookie_name(port: int) -> str:
    """The console's cookie, one per server: a browser sends every cookie of 127.0.0.1 to every
    port, so two repositories' consoles must not share a name (nor log each other out)."""
    return f"proctor_{port}"


class State:
    def __init__(self, root: str, state_dir: str, repo_root: str, token: str, port: int) -> None:
        self.root, self.state_dir, self.repo_root, self.token, self.port = root, state_dir, repo_root, token, port
        self.scheduler: Scheduler | None = None
        self.started = time.time()
        self.shutdown: Callable[[], None] | None = None  # set by the daemon: ends the server
        self.sessions: dict[str, float] = {}  # console session id -> last used (monotonic), loop thread only
        self._valid: frozenset = frozenset()
        self.streams = 0  # event streams open now
        from proctor.server import console as console_mod

        self.board = console_mod.Board()  # the console's rows, read once per change for every tab
        self.login_codes = console_mod.LoginCodes()
        self.watcher: asyncio.Future[None] | None = None  # looks for other processes' writes while a console is open

    def open_session(self) -> str:
        self.expire()
        now = time.monotonic()
        while len(self.sessions) >= MAX_SESSIONS:
            del self.sessions[min(self.sessions, key=lambda sid: self.sessions[sid])]
        sid = secrets.token_urlsafe(32)
        self.sessions[sid] = now
        self._refresh()
        return sid

    def expire(self) -> None:
        now = time.monotonic()
        for sid, used in list(self.sessions.items()):
            if now - used > SESSION_IDLE:
                del self.sessions[sid]
        self._refresh()

    def valid_sessions(self) -> frozenset:
        """The console sessions in use (read from a worker thread: a snapshot, never the dict)."""
        return self._valid

    def touch(self, sid: str) -> None:
        if sid in self.sessions:
            self.sessions[sid] = time.monotonic()

    def _refresh(self) -> None:
        self._valid = frozenset(self.sessions)


def _error(exc: errors.ProctorError) -> Response:
    status = 409 if isinstance(exc, errors.Refused) else _STATUS.get(exc.code, 400)
    # a refusal may repeat what the caller sent (a path): never let that make the answer fail
    body = json.dumps(exc.to_json(), ensure_ascii=True).encode("ascii", "replace")
    return Response(body, status_code=status, media_type="application/json")


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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


def _identify(state: State, header: str, cookie: str | None) -> tuple[str | None, str | None]:
    """(how the caller proved itself: "token", "session", "nonce" or None; the job a secret
    scopes it to). A secret is looked up in the store: call this in a worker thread."""
    if header.startswith("Bearer "):
        return ("token" if _same(header[7:].strip(), state.token) else None), None
    if header.startswith("Nonce "):
        digest = hashlib.sha256(header[6:].strip().encode("utf-8", "surrogateescape")).hexdigest()
        from proctor.store import rows

        with _opened(state) as ws, ws.store.read() as conn:
            found = rows.live_job_by_secret_digest(conn, digest)
        return ("nonce", found) if found else (None, None)
    if cookie is not None:
        return ("session" if cookie in state.valid_sessions() else None), None
    return None, None


def _peer_refusal(state: State, client) -> str | None:
    """Why the process at the other end of this connection may not use the token, or None.
    Where there is no /proc (not Linux), or its socket tables do not show this server's own
    listening socket, nothing is known and nothing is refused; where they do, a connection
    whose process cannot be found is refused."""
    from proctor.server import daemon

    if not os.path.isdir("/proc/self/fd"):
        return None
    holders = daemon.peer_pids(int(client[1]), state.port) if client else []
    if holders is None:  # a /proc whose socket tables do not show this server: nothing is known
        return None
    if not holders:
        return (
            f"the server cannot tell which process is calling (from port {client[1] if client else '?'}); "
            f"the token is served only to a process it can see is not working a job"
        )
    with _opened(state) as ws, ws.store.read() as conn:
        for pid in holders:
            why = daemon.lineage(conn, pid, state.state_dir, os.getpid())
            if why:
                return why
            # lineage reads a process that ended (or lies unreaped, its environment gone) as one
            # that claims nothing: a caller that hung up right after sending must not pass so
            if not daemon.alive(pid):
                return (
                    f"process {pid} ended before the server could see whom it works for; the token is "
                    f"served only to a process it can see is not working a job"
                )
    return None


def _leased_response(why: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": {
                "code": errors.SERVER_LEASED_CALLER,
                "message": (
                    f"the server token is a person's, and {why}; a job's process manages that job's monitors with its secret "
                    f"(Authorization: Nonce <PROCTOR_NONCE>), which scopes it to them"
                ),
            }
        },
        status_code=403,
    )


async def _in_thread(function, *args):
    """`function(*args)` in a worker thread; a store held by another process past the wait is
    a STORE_BUSY error (503), not a frozen server."""
    try:
        return await run_in_threadpool(function, *args)
    except errors.StoreError as exc:
        answer = errors.busy(exc)
        if answer is not None:
            raise answer from None
        raise


@contextlib.contextmanager
def _opened(state: State):
    """A workspace whose store waits at most STORE_SECONDS for another writer."""
    from proctor.store import _busy_seconds, open_store
    from proctor.workspace import Workspace

    ws = Workspace(state.root, warn=lambda line: None)
    ws._state_dir = state.state_dir
    ws._store = open_store(state.state_dir, busy_seconds=min(STORE_SECONDS, _busy_seconds()), root=state.root)
    try:
        yield ws
    finally:
        ws.close()


async def _read(request: Request, limit: int, drain: int) -> bytes:
    """The body, at most `limit` bytes, arrived within BODY_SECONDS. A larger one is read and
    thrown away up to `drain` bytes, so a client that sends it whole gets its 413 rather than
    a reset connection."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > drain:
        raise errors.ProctorError(f"request body of {declared} bytes is over the {limit}-byte limit", errors.TOO_LARGE)
    data = bytearray()
    seen = 0

    async def pull() -> None:
        nonlocal seen
        async for chunk in request.stream():
            seen += len(chunk)
            if seen <= limit:
                data.extend(chunk)
            elif seen > drain:
                break

    try:
        await asyncio.wait_for(pull(), BODY_SECONDS)
    except asyncio.TimeoutError:
        raise errors.ProctorError(
            f"the request body did not arrive within {BODY_SECONDS:g} s", errors.BODY_TIMEOUT
        ) from None
    if seen > limit:
        raise errors.ProctorError(f"request body of {seen} bytes is over the {limit}-byte limit", errors.TOO_LARGE)
    return bytes(data)


async def _body(request: Request) -> dict:
    """The JSON body, at most MAX_BODY bytes, an object."""
    data = await _read(request, MAX_BODY, DRAIN_LIMIT)
    try:
        value = json.loads(data or b"{}")
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        raise errors.ProctorError("the request body is not JSON (or is nested too deep)", errors.BAD_JSON) from None
    if not isinstance(value, dict):
        raise errors.ProctorError("the request body must be a JSON object", errors.BAD_JSON)
    return value


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
    except Exception:  # a failed pass (a busy store) is logged by the scheduler; the read goes ahead
        pass


# -- handlers ---------------------------------------------------------------------------------


async def status(request: Request) -> Response:
    state: State = request.app.state.proctor
    url = f"http://127.0.0.1:{state.port}"
    return JSONResponse(
        {
            "url": url + "/api/v1/",
            "console": url + "/",
            "mcp": url + "/mcp",
            "pid": os.getpid(),
            "version": __version__,
            "started": state.started,
            "repo": state.repo_root,
            "monitors_running": state.scheduler.running_now if state.scheduler else 0,
        }
    )


async def jobs(request: Request) -> Response:
    state: State = request.app.state.proctor
    await _reaped(state)
    return JSONResponse(await _in_thread(_jobs, state))


def _jobs(state: State) -> dict:
    from proctor.jobs.listing import list_jobs

    with _opened(state) as ws:
        listing = list_jobs(ws)  # rows as jobrecord.public shows them
        listing["board"] = [{"name": n, "states": list(s), "active": a} for n, s, a in ws.config.board]
    return listing


def _reading(state: State, read, *args):
    with _opened(state) as ws, ws.store.read() as conn:
        return read(conn, *args)


_Default = TypeVar("_Default", int, None)


def _query_int(request: Request, name: str, default: _Default, low: int = 1, high: int = 5000) -> int | _Default:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise errors.ProctorError(f"{name} must be a number") from None
    return min(high, max(low, value))


async def monitors_list(request: Request) -> Response:
    state: State = request.app.state.proctor
    return JSONResponse(await list_monitors(state, request.state.scope, request.query_params.get("job")))


async def monitors_add(request: Request) -> Response:
    state: State = request.app.state.proctor
    body = await _body(request)
    return JSONResponse(await add_monitor(state, request.state.scope, request.state.actor, body), status_code=201)


async def monitors_remove(request: Request) -> Response:
    state: State = request.app.state.proctor
    try:
        monitor_id = int(request.path_params["id"])
    except ValueError:
        raise errors.ProctorError("a monitor id is a number") from None
    return JSONResponse(await remove_monitor(state, request.state.scope, request.state.actor, monitor_id))


async def events(request: Request) -> Response:
    state: State = request.app.state.proctor
    limit = _query_int(request, "limit", 1000)  # 1 to 5000: SQLite reads LIMIT -1 as no limit at all
    return JSONResponse(await monitor_events(state, request.state.scope, request.query_params.get("job"), limit))


# -- the monitor verbs, as the routes above and the MCP door (server/mcp_http.py) call them:
# `scope` is the job a secret scopes the caller to (None for the token), and wins over `job`.


async def list_monitors(state: State, scope: str | None, job: str | None) -> dict:
    await _reaped(state)
    return {"monitors": await _in_thread(_reading, state, mstore.live, scope or job)}


async def add_monitor(state: State, scope: str | None, actor: str, body: dict) -> dict:
    job = scope or body.get("job")
    if not isinstance(job, str) or not job:
        raise errors.ProctorError("name the job (--job ID); a monitor belongs to one job")
    for key in ("job", "command", "cwd", "description"):
        value = body.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise errors.ProctorError(f"{key} must be a string")
        if "\0" in value or not _utf8(value):
            raise errors.ProctorError(f"{key} holds a NUL or a character UTF-8 cannot carry")
    if body.get("interval") is not None and not isinstance(body["interval"], (str, int, float)):
        raise errors.ProctorError("interval must be a duration such as 45s")
    await _reaped(state)

    def add() -> dict:
        with _opened(state) as ws:
            cfg = ws.config
            with ws.store.write() as conn:
                return mstore.add(
                    conn,
                    cfg,
                    state.repo_root,
                    job,
                    body.get("command"),
                    body.get("interval"),
                    body.get("description"),
                    body.get("cwd") or state.repo_root,
                    body.get("allow_unsandboxed") is True,
                    actor,
                )

    monitor = await _in_thread(add)
    assert state.scheduler is not None  # the daemon starts it before the server answers a request
    state.scheduler.add(monitor)
    return monitor


async def remove_monitor(state: State, scope: str | None, actor: str, monitor_id: int) -> dict:
    def remove() -> dict:
        with _opened(state) as ws, ws.store.write() as conn:
            return mstore.remove(conn, monitor_id, scope, actor=actor)

    monitor = await _in_thread(remove)
    assert state.scheduler is not None  # the daemon starts it before the server answers a request
    state.scheduler.removed(monitor_id)
    return monitor


async def monitor_events(state: State, scope: str | None, job: str | None, limit: int) -> dict:
    await _reaped(state)
    return {"events": await _in_thread(_reading, state, mstore.events, scope or job, limit)}


async def runs(request: Request) -> Response:
    """Monitor runs (of one job, of one monitor); a job's secret sees its own job's only."""
    state: State = request.app.state.proctor
    job = request.state.scope or request.query_params.get("job")
    monitor = _query_int(request, "monitor", None, 1, 2**62)
    limit = _query_int(request, "limit", 100)
    await _reaped(state)
    return JSONResponse({"runs": await _in_thread(_reading, state, mstore.runs, job, monitor, limit)})


async def followups_list(request: Request) -> Response:
    """Follow-ups (of one job), without their text; a job's secret sees its own job's only."""
    state: State = request.app.state.proctor
    job = request.state.scope or request.query_params.get("job")
    limit = _query_int(request, "limit", 100)
    await _reaped(state)
    return JSONResponse({"followups": await _in_thread(_reading, state, mstore.followups, job, limit)})


async def followup_one(request: Request) -> Response:
    """One follow-up with its text."""
    state: State = request.app.state.proctor
    followup_id = request.path_params["id"]
    return JSONResponse(await _in_thread(_reading, state, mstore.followup, followup_id, request.state.scope))


class _CountedStream(StreamingResponse):
    """An event stream that gives its slot back however it ends."""

    def __init__(self, state: State, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._state = state

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._state.streams -= 1


async def stream(request: Request) -> Response:
    """Server-sent events (server/console.py): `jobs`, the board's rows (all, then what
    changed), and with ?job=ID `job`, that job's page whenever it changed."""
    from proctor.server import console as console_mod

    state: State = request.app.state.proctor
    job = request.query_params.get("job") or None
    if state.streams >= MAX_STREAMS:
        return JSONResponse(
            {
                "error": {
                    "code": errors.TOO_MANY_STREAMS,
                    "message": f"{MAX_STREAMS} event streams are open already; close one (a console tab) and retry",
                }
            },
            status_code=503,
            headers={"Retry-After": "5"},
        )
    if job is not None:
        from proctor.jobs.model import check_job_id

        check_job_id(job)
    state.streams += 1
    if state.watcher is None:
        state.watcher = asyncio.ensure_future(console_mod.watch(state))
    return _CountedStream(
        state,
        console_mod.stream_body(state, request, job),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def job_one(request: Request) -> Response:
    """One job's page (server/console.py job_page)."""
    from proctor.server import console as console_mod

    state: State = request.app.state.proctor
    await _reaped(state)
    page = await _in_thread(console_mod.job_page, state, request.path_params["id"])
    return Response(json.dumps(page, default=str), media_type="application/json")


async def action(request: Request) -> Response:
    """A person's action from the console: archive, trash, delete, end (no result) or move a
    job's card; by the CLI's rules, as the orchestrator."""
    from proctor.server import console as console_mod

    state: State = request.app.state.proctor
    body = await _body(request)
    await _reaped(state)
    done = await _in_thread(console_mod.act, state, body, request.state.actor)
    assert state.scheduler is not None  # the daemon starts it before the server answers a request
    for monitor_id in done["monitors_deleted"]:
        state.scheduler.removed(monitor_id)
    state.scheduler.bump()
    return JSONResponse(done)


async def attempt_stream(request: Request) -> Response:
    """What a worker printed in one attempt (?job=ID&number=N, &stderr=1 for its stderr), as
    `proctor ls attempts ID --stream N` prints it."""
    state: State = request.app.state.proctor
    job = request.query_params.get("job") or ""
    number = _query_int(request, "number", None, 1, 1 << 30)
    key = "stderr_stream" if request.query_params.get("stderr") else "stream"

    def read() -> bytes:
        from proctor.jobs.model import check_job_id
        from proctor.store import blobs
        from proctor.workers.work import attempts_of

        check_job_id(job)
        with _opened(state) as ws:
            chosen = [a for a in attempts_of(ws, job) if a.get("number") == number and a.get(key)]
            if not chosen:
                raise errors.ProctorError(
                    f"no {key.replace('_', ' ')} kept for attempt {number} of {job}", errors.UNKNOWN_RUN
                )
            return blobs.get(ws.store, chosen[-1][key])

    data = await _in_thread(read)
    return Response(
        data,
        media_type="text/plain; charset=utf-8",
        headers={
            "Cache-Control": "no-store",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
        },
    )


async def login_link(request: Request) -> Response:
    """A one-time login link for the console (the token's holder asks: server start, status)."""
    state: State = request.app.state.proctor
    if request.state.actor != "token":
        return JSONResponse(
            {
                "error": {
                    "code": errors.TOKEN_ONLY,
                    "message": "a login link is issued to the token's holder only (proctor server status prints one)",
                }
            },
            status_code=403,
        )
    code, seconds = state.login_codes.issue()
    return JSONResponse({"url": f"http://127.0.0.1:{state.port}/login?code={code}", "expires_in": seconds})


async def shutdown(request: Request) -> Response:
    state: State = request.app.state.proctor
    if state.shutdown:
        state.shutdown()
    return JSONResponse({"stopping": True})


_PAGE: tuple[str, dict] | None = None


def _console_page() -> tuple[str, dict]:
    """The console's page and its headers: a policy that runs only the page's own script (by
    its digest), connects only to this server, and lets no other page frame it (a click on
    Delete through a frame)."""
    global _PAGE
    if _PAGE is None:
        import base64
        from importlib import resources

        page = resources.files("proctor.server").joinpath("console.html").read_text(encoding="utf-8")
        script = page.split("<script>", 1)[1].split("</script>", 1)[0]
        digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
        policy = (
            f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
            f"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        _PAGE = (
            page,
            {
                "Cache-Control": "no-store",
                "Content-Security-Policy": policy,
                "X-Frame-Options": "DENY",
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "same-origin",
            },
        )
    return _PAGE


async def console(request: Request) -> Response:
    page, headers = _console_page()
    return HTMLResponse(page, headers=headers)


async def login_page(request: Request) -> Response:
    state: State = request.app.state.proctor
    if not _host_ok(request, state):
        return JSONResponse({"error": {"code": errors.BAD_HOST}}, status_code=421)
    code = request.query_params.get("code")
    if code is not None:
        return await _redeem(request, state, code)
    failed = request.query_params.get("failed")
    note = "<p class=err>That token is not this server's.</p>" if failed else ""
    from html import escape

    return HTMLResponse(
        _LOGIN_PAGE.format(note=note, next=escape(_local(request.query_params.get("next")))), headers=_LOGIN_HEADERS
    )


def _local(target: str | None) -> str:
    """Where to go after logging in: a path of this server's console, else the board."""
    if not target or not target.startswith("/jobs/") or "\\" in target or any(c in target for c in "\r\n"):
        return "/"
    return target


_LOGIN_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
_LOGIN_PAGE = """<!doctype html><html lang=en><meta charset=utf-8><title>proctor: log in</title>
<meta name=viewport content="width=device-width, initial-scale=1">
<style>body{{font:16px system-ui;margin:2em auto;max-width:32em;padding:0 1em;color:#1d1d1f}}
input{{width:100%;padding:.5em;box-sizing:border-box;font:inherit}}button{{font:inherit;padding:.4em 1.2em}}
.err{{color:#a4001c}}</style>
<h1>proctor console</h1>{note}
<p>Open the login link <code>proctor server status</code> prints, or paste the server token.</p>
<form method=post action=/login><input type=hidden name=next value="{next}"><label>Server token (<code>proctor server status</code> prints its path)<br>
<input name=token type=password autofocus></label><p><button>Log in</button></form></html>"""


async def _redeem(request: Request, state: State, code: str) -> Response:
    """A login link: a code used once, within its time, by a process that works no job (asked
    first: a leased process that tries a link it found does not spend the person's)."""
    return await _open_session(request, state, "/", lambda: state.login_codes.redeem(code))


async def _open_session(request: Request, state: State, target: str, proven) -> Response:
    """A console session for the caller, sent on to `target`, once the process at the other end
    is seen to work no job and then `proven()` (a code spent, a token matched) holds."""
    try:
        why = await _in_thread(_peer_refusal, state, request.client)
    except errors.ProctorError as exc:
        return _error(exc)
    if why:
        return _leased_response(why)
    if not proven():
        return HTMLResponse(
            _LOGIN_PAGE.format(
                next="/",
                note="<p class=err>That login link was used already or has expired; "
                "<code>proctor server status</code> prints a new one.</p>",
            ),
            status_code=403,
            headers=_LOGIN_HEADERS,
        )
    response = RedirectResponse(quote(target, safe="/"), status_code=303)
    response.set_cookie(cookie_name(state.port), state.open_session(), httponly=True, samesite="strict", path="/")
    return response


async def login(request: Request) -> Response:
    state: State = request.app.state.proctor
    if not _host_ok(request, state):
        return JSONResponse({"error": {"code": errors.BAD_HOST}}, status_code=421)
    origin = request.headers.get("origin")
    if origin is not None and origin not in (f"http://127.0.0.1:{state.port}", f"http://localhost:{state.port}"):
        return JSONResponse({"error": {"code": errors.CROSS_SITE}}, status_code=403)
    try:
        body = (await _read(request, LOGIN_BODY, LOGIN_BODY)).decode("utf-8", "replace")
    except errors.ProctorError as exc:
        return _error(exc)
    from urllib.parse import parse_qs

    form = parse_qs(body)
    token = (form.get("token") or [""])[0]
    target = _local((form.get("next") or ["/"])[0])
    if not _same(token, state.token):
        return RedirectResponse(
            "/login?failed=1" + ("&next=" + quote(target, safe="/") if target != "/" else ""), status_code=303
        )
    return await _open_session(request, state, target, lambda: True)


async def _refused(request: Request, exc: Exception) -> Response:
    """A handler's refusal (a ProctorError it raised before answering), as JSON."""
    assert isinstance(exc, errors.ProctorError)
    return _error(exc)


def build(state: State, lifespan) -> Starlette:
    from proctor.server import auth, mcp_http

    endpoint = mcp_http.Endpoint(state)
    # Every route, with who may call it (server/auth.py checks it before the route runs):
    # PAGE and PERSON the token or a console session (PAGE sends anyone else to the login page),
    # JOB those or a job's secret (scoped to its job), OPEN nothing (the route checks for itself).
    table: list[tuple[Route, str]] = [
        (Route("/", console), auth.PAGE),
        (Route("/jobs/{id:path}", console), auth.PAGE),
        (Route("/api/v1/jobs/{id:path}", job_one), auth.PERSON),
        (Route("/api/v1/actions", action, methods=["POST"]), auth.PERSON),
        (Route("/api/v1/attempt", attempt_stream), auth.PERSON),
        (Route("/api/v1/login-link", login_link, methods=["POST"]), auth.PERSON),
        (Route("/login", login_page, methods=["GET"]), auth.OPEN),
        (Route("/login", login, methods=["POST"]), auth.OPEN),
        (Route("/api/v1/status", status), auth.JOB),
        (Route("/api/v1/jobs", jobs), auth.PERSON),
        (Route("/api/v1/monitors", monitors_list, methods=["GET"]), auth.JOB),
        (Route("/api/v1/monitors", monitors_add, methods=["POST"]), auth.JOB),
        (Route("/api/v1/monitors/{id}", monitors_remove, methods=["DELETE"]), auth.JOB),
        (Route("/api/v1/events", events), auth.JOB),
        (Route("/api/v1/runs", runs), auth.JOB),
        (Route("/api/v1/followups", followups_list), auth.JOB),
        (Route("/api/v1/followups/{id:int}", followup_one), auth.JOB),
        (Route("/api/v1/stream", stream), auth.PERSON),
        (Route("/api/v1/shutdown", shutdown, methods=["POST"]), auth.PERSON),
        (Route(mcp_http.PATH, endpoint), auth.OPEN),  # checked there as here: the token or a job's secret
    ]
    app = Starlette(
        routes=[route for route, _policy in table],
        middleware=[Middleware(auth.Authenticate, table=table)],
        exception_handlers={errors.ProctorError: _refused},
        lifespan=mcp_http.lifespan(endpoint, lifespan),
    )
    app.state.proctor = state
    return app
