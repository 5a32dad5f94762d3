"""Hardening the server (issue 14, items 8 and 10, and a busy store): bodies capped and timed
on every route, the login included; the console cookie a session id named per server; a
body nested past the parser a 400; event streams capped; the store, the server's directory
and its log private; the API answering while another process holds the store; and `server
status` telling a server whose code differs from the installed proctor's."""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)

on_postgresql = pytest.mark.postgresql_store  # a twin of a test of the embedded store (conftest)


def _rss_peak_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmHWM:"))


def _raw(port: int, head: str, body_chunks=(), pause: float = 0.0, timeout: float = 30.0) -> str:
    """Send a request by hand (a body in chunks, with a pause between them); the answer's
    status line, or what went wrong with the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(head.encode())
            for chunk in body_chunks:
                if select.select([sock], [], [], pause)[0]:
                    break  # the server answered (or closed) before the body was all sent
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            answer = sock.recv(65536).decode("latin-1")
        except (ConnectionResetError, socket.timeout) as exc:
            return f"connection: {type(exc).__name__}"
    return answer.split("\r\n", 1)[0] if answer else "connection: closed"


def _login(served, token):  # noqa: F811
    """POST the login form; (status, Set-Cookie header)."""
    data = f"token={token}".encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/login",
        data=data,
        method="POST",
        headers={"Host": f"127.0.0.1:{served.port}", "Content-Type": "application/x-www-form-urlencoded"},
    )

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.headers.get("Set-Cookie")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Set-Cookie")


def _get_with_cookie(served, cookie: str, path: str = "/api/v1/jobs") -> int:  # noqa: F811
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}{path}", headers={"Host": f"127.0.0.1:{served.port}", "Cookie": cookie}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


# -- bodies -------------------------------------------------------------------------------------------


def test_a_huge_login_body_is_refused_without_being_read(served):  # noqa: F811
    before = _rss_peak_kib(served.pid)
    size = 200 << 20
    head = (
        f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nContent-Type: application/x-www-form-"
        f"urlencoded\r\nContent-Length: {size}\r\n\r\n"
    )
    status = _raw(served.port, head, (b"token=" + b"x" * ((1 << 20) - 6),) + (b"x" * (1 << 20),) * 199)
    assert "413" in status or status.startswith("connection"), status
    chunked = (
        f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nContent-Type: application/x-www-form-"
        f"urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    piece = b"x" * (1 << 20)
    status = _raw(served.port, chunked, [f"{len(piece):x}\r\n".encode() + piece + b"\r\n"] * 50)
    assert "413" in status or status.startswith("connection"), status
    assert served.call("GET", "/api/v1/status")[0] == 200, "and it keeps serving"
    grown = _rss_peak_kib(served.pid) - before
    assert grown < 24 << 10, f"the server's peak RSS grew by {grown} KiB"


def test_a_body_nested_past_the_parser_is_a_400(served):  # noqa: F811
    for raw in (b"[" * 100_000, b'{"job": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
        status, body = served.call("POST", "/api/v1/monitors", raw=raw)
        assert status == 400 and body["error"]["code"] == "BAD_JSON", (status, body)
    assert served.call("GET", "/api/v1/status")[0] == 200


# -- the console's cookie ---------------------------------------------------------------------------


def test_the_console_cookie_is_a_session_named_per_server(served):  # noqa: F811
    status, cookie = _login(served, served.token)
    assert status == 303, status
    name, _, rest = cookie.partition("=")
    value = rest.split(";", 1)[0]
    attributes = {a.strip().split("=")[0].lower(): a.strip() for a in rest.split(";")[1:]}
    assert name == f"proctor_{served.port}"
    assert value and value != served.token and served.token not in cookie, "a session id, never the token"
    assert "httponly" in attributes and attributes["path"].lower() == "path=/"
    assert attributes["samesite"].lower() == "samesite=strict"
    assert _get_with_cookie(served, f"{name}={value}") == 200
    assert _get_with_cookie(served, f"{name}={served.token}") == 401, "the token is no session"
    assert _get_with_cookie(served, f"proctor_token={served.token}") == 401, "the old, shared name is gone"
    assert _get_with_cookie(served, f"proctor_{served.port + 1}={value}") == 401, "another server's name"
    assert _login(served, "wrong")[1] is None
    second = _login(served, served.token)[1].partition("=")[2].split(";", 1)[0]
    assert second != value and _get_with_cookie(served, f"{name}={value}") == 200, "sessions live side by side"


def test_a_restarted_server_forgets_its_sessions(served):  # noqa: F811
    cookie = _login(served, served.token)[1].split(";", 1)[0]
    cli(served.root, "server", "stop")
    cli(served.root, "server", "start", "--port", str(served.port))
    restarted = Server(served.root)
    assert restarted.port == served.port
    assert _get_with_cookie(restarted, cookie) == 401


# -- event streams -------------------------------------------------------------------------------------


def test_event_streams_are_capped(served):  # noqa: F811
    from proctor.server.app import MAX_STREAMS

    head = (
        f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nAuthorization: Bearer {served.token}\r\n\r\n"
    )
    opened = []
    try:
        for _ in range(MAX_STREAMS):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=20)
            sock.sendall(head.encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 200"), "a stream within the cap"
            opened.append(sock)
        assert _raw(served.port, head).startswith("HTTP/1.1 503")
        assert served.call("GET", "/api/v1/status")[0] == 200, "the rest of the API still answers"
        opened.pop().close()

        def one_more():
            with socket.create_connection(("127.0.0.1", served.port), timeout=20) as sock:
                sock.sendall(head.encode())
                return sock.recv(4096).startswith(b"HTTP/1.1 200")

        assert wait_for(one_more, timeout=15, step=0.2), "a closed stream gives its slot back"
    finally:
        for sock in opened:
            sock.close()


# -- slow bodies, against the app in this process (BODY_SECONDS made short) ------------------------------


@pytest.fixture
def inprocess(tmp_path, monkeypatch, new_repo):
    import uvicorn

    from proctor.server import app as app_mod

    monkeypatch.setattr(app_mod, "BODY_SECONDS", 1.5)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from proctor.paths import find_checkout, repo_state_dir

    root = new_repo("repo")
    state = app_mod.State(root, repo_state_dir(find_checkout(root)), root, "tok", port)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield

    server = uvicorn.Server(
        uvicorn.Config(app_mod.build(state, lifespan), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started, timeout=10)
    yield port
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize(
    "path, headers",
    [
        ("/login", "Content-Type: application/x-www-form-urlencoded\r\n"),
        ("/api/v1/monitors", "Content-Type: application/json\r\nAuthorization: Bearer tok\r\n"),
    ],
)
def test_a_trickling_body_times_out(inprocess, path, headers):
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{inprocess}\r\n{headers}Content-Length: 200\r\n\r\n"
    started = time.monotonic()
    status = _raw(inprocess, head, [b"t"] * 40, pause=0.25)
    assert status.startswith("HTTP/1.1 408"), status
    assert time.monotonic() - started < 12


# -- files ----------------------------------------------------------------------------------------------


# SQLite's engine itself: the file mode of proctor.db (the twin below checks the rest on PostgreSQL)
@pytest.mark.sqlite_store
def test_the_store_and_the_log_are_private(served):  # noqa: F811
    server_dir = os.path.dirname(served.token_path)
    state_dir = os.path.dirname(server_dir)
    for path, mode in (
        (state_dir, 0o700),
        (server_dir, 0o700),
        (os.path.join(state_dir, "proctor.db"), 0o600),
        (os.path.join(server_dir, "server.log"), 0o600),
        (served.token_path, 0o600),
    ):
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, (path, oct(os.stat(path).st_mode))


@on_postgresql
def test_the_server_directory_and_the_log_are_private_on_postgresql(served):  # noqa: F811
    server_dir = os.path.dirname(served.token_path)
    state_dir = os.path.dirname(server_dir)
    for path, mode in (
        (state_dir, 0o700),
        (server_dir, 0o700),
        (os.path.join(server_dir, "server.log"), 0o600),
        (served.token_path, 0o600),
    ):
        assert stat.S_IMODE(os.stat(path).st_mode) == mode, (path, oct(os.stat(path).st_mode))


# -- a busy store ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _sqlite_write_lock(state_dir: str):
    db = sqlite3.connect(os.path.join(state_dir, "proctor.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


@contextlib.contextmanager
def _postgresql_write_lock(state_dir: str):
    """The repository's advisory lock, which every write transaction takes, held in a
    transaction another connection keeps open."""
    import psycopg

    from proctor.store.postgres import _lock_key, schema_name

    conn = psycopg.connect(os.environ["PROCTOR_STORE_URL"])
    try:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(schema_name(state_dir)),))
        yield
    finally:
        conn.rollback()
        conn.close()


# SQLite's engine itself: its write lock (BEGIN IMMEDIATE) held from another connection
@pytest.mark.sqlite_store
def test_the_api_answers_while_another_process_holds_the_store(served):  # noqa: F811
    _the_api_answers_while(served, _sqlite_write_lock)


@on_postgresql
def test_the_api_answers_while_another_process_holds_the_postgresql_store(served):  # noqa: F811
    _the_api_answers_while(served, _postgresql_write_lock)


def _the_api_answers_while(served, held):  # noqa: F811
    cli(served.root, "server", "stop")
    cli(served.root, "server", "start", env={"PROCTOR_BUSY_TIMEOUT": "1"})
    busy = Server(served.root)
    with held(os.path.dirname(os.path.dirname(busy.token_path))):
        answers = {}

        def add():
            answers["add"] = busy.add("card", "true")

        writer = threading.Thread(target=add)
        started = time.monotonic()
        writer.start()
        time.sleep(0.2)
        status_at = time.monotonic()
        assert busy.call("GET", "/api/v1/status")[0] == 200
        assert time.monotonic() - status_at < 0.8, "the status answered while a write waited for the store"
        assert busy.call("GET", "/api/v1/monitors")[0] == 200, "a read goes on beside the held write lock"
        writer.join(30)
        status, body = answers["add"]
        assert status == 503 and body["error"]["code"] == "STORE_BUSY", (status, body)
        assert "busy" in body["error"]["message"]
        assert time.monotonic() - started < 8
    assert busy.add("card", "true")[0] == 201, "and works again once the store is free"


# -- an outdated server -----------------------------------------------------------------------------------


def _serve_from(copy_parent: str, root: str) -> subprocess.Popen:
    code = (
        f"import sys; sys.path.insert(0, {copy_parent!r}); import proctor; "
        f"assert proctor.__file__.startswith({copy_parent!r}), proctor.__file__; "
        f"from proctor.cli import run; sys.exit(run(['server', 'start', '--foreground']))"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.mark.parametrize("changed", [False, True])
def test_status_tells_a_server_whose_code_differs(served, tmp_path, changed):  # noqa: F811
    import proctor

    normal = json.loads(cli(served.root, "server", "status", "-o", "json").stdout)
    assert normal["outdated"] is False and normal["code"] == normal["installed_code"]
    cli(served.root, "server", "stop")
    parent = str(tmp_path / "copy")
    shutil.copytree(
        os.path.dirname(proctor.__file__), os.path.join(parent, "proctor"), ignore=shutil.ignore_patterns("__pycache__")
    )
    if changed:
        with open(os.path.join(parent, "proctor", "trail.py"), "a") as handle:
            handle.write("\n# a change the version string does not show\n")
    proc = _serve_from(parent, served.root)
    try:
        wait_for(
            lambda: json.loads(cli(served.root, "server", "status", "-o", "json", check=False).stdout).get("running"),
            timeout=20,
        )
        report = json.loads(cli(served.root, "server", "status", "-o", "json").stdout)
        assert report["version"] == report["installed_version"]
        assert report["outdated"] is changed
        text = cli(served.root, "server", "status").stdout
        said = "outdated: restart it (proctor server stop; proctor server start)"
        assert (said in text) is changed, text
    finally:
        cli(served.root, "server", "stop", check=False)
        proc.wait(20)
