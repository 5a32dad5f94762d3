"""Adversarial tests of the console's new surface: actions, login links, the job page, the
event stream and the attempt viewer. Each test asserts a promise; a failure is a hole."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.parse

import pytest

from proctor import api
from tests.support import git
from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401
from tests.server.test_server_adversary import SAME_USER

# A client run as its own process (so the server sees *that* process at the other end):
# argv: port method path auth-header cookie body-json out-file
CLIENT = textwrap.dedent(r"""
    import http.client, json, sys
    port, method, path, auth, cookie, body, out = sys.argv[1:8]
    conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    headers = {"Host": "127.0.0.1:" + port, "Content-Type": "application/json"}
    if auth: headers["Authorization"] = auth
    if cookie: headers["Cookie"] = cookie
    conn.request(method, path, body=body.encode() if body else None, headers=headers)
    r = conn.getresponse()
    data = r.read()
    result = {"status": r.status, "body": data.decode("utf-8", "replace")[:4000],
              "set_cookie": r.getheader("set-cookie"), "location": r.getheader("location")}
    if out == "-":
        print(json.dumps(result))
    else:
        open(out, "w").write(json.dumps(result))
""")


def run_client(served, method, path, *, auth="", cookie="", body=None, env=None, cwd=None):
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            CLIENT,
            str(served.port),
            method,
            path,
            auth,
            cookie,
            json.dumps(body) if body is not None else "",
            "-",
        ],
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        cwd=cwd,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def leased_env(job="card"):
    env = {k: v for k, v in os.environ.items() if k not in ("PROCTOR_NONCE",)}
    env["BAGGAGE"] = f"proctor.lease={job}"
    return env


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}


def raw(served, method, path, headers=None, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    h = {"Host": f"127.0.0.1:{served.port}"}
    h.update(headers or {})
    conn.request(method, path, body=body, headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), data


def session_cookie(served) -> str:
    """A console session, opened by the person (this test process) with a login link."""
    status, link = served.call("POST", "/api/v1/login-link", {})
    assert status == 200, link
    path = link["url"].split(str(served.port), 1)[1]
    status, headers, _ = raw(served, "GET", path)
    assert status == 303, status
    cookie = headers.get("set-cookie") or headers.get("Set-Cookie")
    return cookie.split(";")[0]


def job_state(served, job):
    row = {row["id"]: row for row in served.call("GET", "/api/v1/jobs")[1]["jobs"]}.get(job)
    if row is not None:
        row.pop("age_seconds", None)
    return row


ACTIONS = [
    {"action": "move", "job": "other", "column": "Done"},
    {"action": "archive", "job": "other"},
    {"action": "trash", "job": "other"},
    {"action": "end", "job": "other"},
    {"action": "delete", "job": "other"},
]


# -- 1. only the person acts ----------------------------------------------------------------------


def test_nonce_and_leased_token_and_cookie_cannot_act(served):
    cookie = session_cookie(served)
    nonce = f"Nonce {served.card_nonce}"
    token = f"Bearer {served.token}"
    _, monitor = served.add("card", "true", "10s")
    before = job_state(served, "other")
    for body in ACTIONS:
        # a job's secret
        r = run_client(served, "POST", "/api/v1/actions", auth=nonce, body=body, env=clean_env())
        assert r["status"] in (401, 403), (body, r)
        # the token in a process with BAGGAGE
        r = run_client(served, "POST", "/api/v1/actions", auth=token, body=body, env=leased_env())
        assert r["status"] == 403, (body, r)
        # the cookie in a process with BAGGAGE
        r = run_client(served, "POST", "/api/v1/actions", cookie=cookie, body=body, env=leased_env())
        assert r["status"] == 403, (body, r)
        # the token from a process working in the bound worktree (no BAGGAGE)
        r = run_client(served, "POST", "/api/v1/actions", auth=token, body=body, env=clean_env(), cwd=served.worktree)
        assert r["status"] == 403, (body, r)
    for auth, cookie_, env, cwd in (
        (token, "", leased_env(), None),
        ("", cookie, leased_env(), None),
        (token, "", clean_env(), served.worktree),
    ):
        r = run_client(served, "POST", "/api/v1/login-link", auth=auth, cookie=cookie_, body={}, env=env, cwd=cwd)
        assert r["status"] == 403, r
        r = run_client(
            served, "DELETE", f"/api/v1/monitors/{monitor['id']}", auth=auth, cookie=cookie_, env=env, cwd=cwd
        )
        assert r["status"] == 403, r
    # a job's secret may not mint a link either (it is no person)
    r = run_client(served, "POST", "/api/v1/login-link", auth=nonce, body={}, env=clean_env())
    assert r["status"] in (401, 403), r
    # a console session is not the token: it may not mint login links
    r = run_client(served, "POST", "/api/v1/login-link", cookie=cookie, body={}, env=clean_env())
    assert r["status"] == 403, r
    assert job_state(served, "other") == before
    assert [m["id"] for m in served.call("GET", "/api/v1/monitors?job=card")[1]["monitors"]] == [monitor["id"]]


def test_nested_shell_beneath_leased_process_cannot_act(served):
    """A process whose parent carries BAGGAGE but which itself was started with it unset."""
    script = (
        "import os, subprocess, sys; env = {k: v for k, v in os.environ.items() if k != 'BAGGAGE'};"
        "sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1]] + sys.argv[2:], env=env).returncode)"
    )
    body = json.dumps({"action": "archive", "job": "other"})
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            CLIENT,
            str(served.port),
            "POST",
            "/api/v1/actions",
            f"Bearer {served.token}",
            "",
            body,
            "-",
        ],
        capture_output=True,
        text=True,
        env=leased_env(),
        timeout=60,
    )
    assert json.loads(proc.stdout)["status"] == 403, proc.stdout + proc.stderr
    assert not job_state(served, "other").get("archived")


DAEMONIZE = textwrap.dedent(r"""
    import os, sys, time
    client, port, method, path, auth, body, out = sys.argv[1:8]
    if os.fork():
        os._exit(0)                      # the leased process's child exits: its child is orphaned
    os.setsid()
    if os.fork():
        os._exit(0)
    time.sleep(0.5)                      # reparented to init (or a subreaper) by now
    os.chdir("/")
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    os.execve(sys.executable, [sys.executable, "-c", client, port, method, path, auth, "", body, out], env)
""")


@SAME_USER
def test_daemonized_grandchild_of_leased_process_cannot_use_the_token(served, tmp_path):
    """A leased agent holding the token double-forks a process with a clean environment and
    cwd outside every checkout: it is no longer beneath the leased process, but it is still the
    agent. It must not archive a job or mint a login link."""
    results = {}
    for name, method, path, body in (
        ("archive", "POST", "/api/v1/actions", {"action": "archive", "job": "other"}),
        ("link", "POST", "/api/v1/login-link", {}),
    ):
        out = str(tmp_path / f"{name}.json")
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                DAEMONIZE,
                CLIENT,
                str(served.port),
                method,
                path,
                f"Bearer {served.token}",
                json.dumps(body),
                out,
            ],
            env=leased_env(),
            cwd=served.worktree,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        results[name] = json.loads(
            wait_for(lambda: os.path.exists(out) and os.path.getsize(out) and open(out).read(), timeout=30)
        )
    assert results["archive"]["status"] == 403, f"a leased agent's orphan archived a job: {results['archive']}"
    assert results["link"]["status"] == 403, f"a leased agent's orphan minted a login link: {results['link']}"


def test_cross_site_and_form_posts_are_refused(served):
    cookie = session_cookie(served)
    body = json.dumps({"action": "archive", "job": "other"}).encode()
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/x-www-form-urlencoded"},
        {"Content-Type": "multipart/form-data; boundary=x"},
        {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{served.port + 1}"},
        {"Content-Type": "application/json", "Origin": "null"},
        {"Content-Type": "application/json", "Origin": f"http://evil.example:{served.port}"},
        {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{served.port}.evil.example"},
    ):
        status, _, _ = raw(served, "POST", "/api/v1/actions", {"Cookie": cookie, **headers}, body)
        assert status == 403, headers
        status, _, _ = raw(served, "POST", "/api/v1/login-link", {"Cookie": cookie, **headers}, b"{}")
        assert status in (401, 403), headers
    # DNS rebinding: another Host
    status, _, _ = raw(
        served,
        "POST",
        "/api/v1/actions",
        {"Cookie": cookie, "Content-Type": "application/json", "Host": f"evil.example:{served.port}"},
        body,
    )
    assert status == 421
    assert not job_state(served, "other").get("archived")


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a known limit of the CLI's doors (job move, archive, trash, delete, exit alike): the CLI reads a caller's "
        "lease from BAGGAGE (its own and its ancestors') and its own checkout's record, not from the checkouts its "
        "ancestors work in, which could be a person's terminal started in a worktree; the guard denies `proctor job "
        "move` to a leased session, and the server refuses such a caller the token and the console (daemon.lineage)"
    ),
)
def test_cli_move_from_a_bound_worktree_is_refused(served):
    """`proctor job move` from a process beneath one working in a bound worktree (no BAGGAGE
    anywhere): the agent in the worktree runs the CLI with its cwd set to the main checkout."""
    script = (
        "import subprocess, sys; p = subprocess.run([sys.executable, '-m', 'proctor', 'job', 'move', 'card', "
        "'Done'], cwd=sys.argv[1], capture_output=True, text=True); print(p.returncode); "
        "print(p.stdout + p.stderr)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, served.root],
        cwd=served.worktree,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    rc = int(proc.stdout.split("\n", 1)[0])
    row = job_state(served, "card")
    assert rc != 0 and row["column"] == "Running", (
        f"an agent in card's worktree moved card by running the CLI from the main checkout: {proc.stdout}"
    )
    # with BAGGAGE, refused
    assert cli(served.root, "job", "move", "other", "Done", env=leased_env(), check=False).returncode != 0
    assert (
        cli(served.root, "job", "move", "other", "Done", "--orchestrator", env=leased_env(), check=False).returncode
        != 0
    )


def test_server_status_prints_no_link_to_a_leased_process(served):
    for env, cwd in ((leased_env(), served.root), (clean_env(), served.worktree)):
        proc = cli(cwd, "server", "status", env=env, check=False)
        assert "/login?code=" not in proc.stdout + proc.stderr, proc.stdout


# -- 2. login links --------------------------------------------------------------------------------


def _link_path(served):
    status, link = served.call("POST", "/api/v1/login-link", {})
    assert status == 200
    return link["url"].split(str(served.port), 1)[1]


def test_login_link_once_leased_and_fixation(served):
    path = _link_path(served)
    # a leased process may not redeem it
    r = run_client(served, "GET", path, env=leased_env())
    assert r["status"] == 403 and not r["set_cookie"], r
    # fixation: an attacker-chosen cookie is not adopted
    path = _link_path(served)
    status, headers, _ = raw(served, "GET", path, {"Cookie": f"proctor_{served.port}=attacker-chosen"})
    assert status == 303
    got = headers.get("set-cookie").split(";")[0].split("=", 1)[1]
    assert got != "attacker-chosen" and "httponly" in headers["set-cookie"].lower()
    assert "samesite=strict" in headers["set-cookie"].lower()
    assert raw(served, "GET", "/api/v1/jobs", {"Cookie": f"proctor_{served.port}=attacker-chosen"})[0] == 401
    # used once
    status, _, _ = raw(served, "GET", path)
    assert status == 403
    # guessing: an empty code, a near code, a code with odd bytes
    for code in ("", "x", path.split("code=")[1][:-1], "%00", "%ff%fe", "a" * 10000):
        status, headers, _ = raw(served, "GET", "/login?code=" + code)
        assert status in (400, 403, 414, 431) and not headers.get("set-cookie"), code[:20]
    # the token is not a login code
    status, headers, _ = raw(served, "GET", "/login?code=" + urllib.parse.quote(served.token))
    assert status == 403 and not headers.get("set-cookie")


def test_leased_process_cannot_burn_the_persons_link(served):
    """A leased process that sees a login link (a printed `server status`, a shared terminal)
    tries it and is refused; the person's link should still open the console afterwards.
    (A denial of service, not an escalation: the code is spent before the peer is checked.)"""
    path = _link_path(served)
    r = run_client(served, "GET", path, env=leased_env())
    assert r["status"] == 403
    status, headers, _ = raw(served, "GET", path)
    assert status == 303 and headers.get("set-cookie"), "the leased process's refused try spent the person's link"


def test_login_codes_expire():
    from proctor.server import console

    codes = console.LoginCodes()
    real = time.monotonic
    code, seconds = codes.issue()
    try:
        console.time.monotonic = lambda: real() + seconds + 1
        assert not codes.redeem(code)
    finally:
        console.time.monotonic = real
    code, _ = codes.issue()
    assert codes.redeem(code) and not codes.redeem(code)
    # flooding issue() evicts, never grows without bound
    for _ in range(1000):
        codes.issue()
    assert len(codes.codes) <= console.MAX_LOGIN_CODES


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example",
        "/\\evil.example",
        "https://evil.example/",
        "/jobs/..//evil.example",
        "/jobs//evil.example",
        "/jobs/%2F%2Fevil.example",
        "/jobs/\t//evil.example",
        "/jobs/x\r\nSet-Cookie: a=b",
        "/jobs/x%0d%0aSet-Cookie:%20a=b",
        "javascript:alert(1)",
        '/jobs/"><script>alert(1)</script>',
        "/jobs/../../../evil",
        "/jobs/\u3002evil",
        "/jobs/x#@evil.example",
    ],
)
def test_next_never_leaves_the_server(served, target):
    # the login form's hidden field
    status, _, page = raw(served, "GET", "/login?next=" + urllib.parse.quote(target, safe=""))
    assert status == 200
    assert b"<script>alert" not in page
    # posting the token with next
    form = urllib.parse.urlencode({"token": served.token, "next": target}).encode()
    status, headers, _ = raw(served, "POST", "/login", {"Content-Type": "application/x-www-form-urlencoded"}, form)
    assert status == 303
    location = headers.get("location") or headers.get("Location")
    assert "\r" not in location and "\n" not in location
    resolved = urllib.parse.urljoin(f"http://127.0.0.1:{served.port}/login", location)
    parts = urllib.parse.urlsplit(resolved)
    assert parts.netloc == f"127.0.0.1:{served.port}" and parts.scheme == "http", location
    assert not location.startswith("//") and not location.startswith("/\\"), location
    # the unauthenticated deep link's redirect
    status, headers, _ = raw(served, "GET", "/jobs/" + urllib.parse.quote(target.lstrip("/"), safe="/"))
    if status == 303:
        location = headers.get("location")
        assert location.startswith("/login"), location


def test_login_by_token_from_leased_process_is_refused(served):
    form = urllib.parse.urlencode({"token": served.token}).encode()
    script = textwrap.dedent(r"""
        import http.client, sys
        c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
        c.request("POST", "/login", body=sys.argv[2].encode(),
                  headers={"Host": "127.0.0.1:" + sys.argv[1], "Content-Type": "application/x-www-form-urlencoded"})
        r = c.getresponse(); print(r.status, r.getheader("set-cookie"))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script, str(served.port), form.decode()],
        env=leased_env(),
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert out.startswith("403") and "None" in out, out


# -- 4. the stream and the page -------------------------------------------------------------------


def read_stream(served, path, auth, seconds=2.0, limit=1 << 20):
    s = socket.create_connection(("127.0.0.1", served.port), timeout=seconds)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nAuthorization: {auth}\r\n\r\n".encode())
    data = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and len(data) < limit:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    s.close()
    return data


def test_stream_and_page_keep_the_secret(served):
    import hashlib

    digest = hashlib.sha256(served.card_nonce.encode()).hexdigest()
    served.add("card", "echo hello", "10s")
    time.sleep(1.5)
    token = f"Bearer {served.token}"
    data = read_stream(served, "/api/v1/stream?job=card", token, seconds=3)
    assert b"event: job" in data and b"event: jobs" in data, data[:300]
    assert digest.encode() not in data and served.card_nonce.encode() not in data
    assert b"nonce_sha256" not in data
    status, body = served.call("GET", "/api/v1/jobs/card")
    text = json.dumps(body)
    assert status == 200 and digest not in text and served.card_nonce not in text and "nonce_sha256" not in text
    # a job's secret sees no page, no stream, no listing, no attempt
    for path in (
        "/api/v1/jobs/card",
        "/api/v1/jobs/other",
        "/api/v1/stream",
        "/api/v1/stream?job=other",
        "/api/v1/jobs",
        "/api/v1/attempt?job=other&number=1",
        "/jobs/other",
        "/",
    ):
        status, headers, payload = raw(served, "GET", path, {"Authorization": f"Nonce {served.card_nonce}"})
        assert status in (303, 401, 403), (path, status)
        assert b"other" not in payload or status == 303, path


def test_hostile_job_ids(served):
    for job in (
        "a" * 100000,
        "../../etc/passwd",
        "%00",
        "x/../y",
        "\u202e",
        "a/" * 150 + "a",
        "card\nx",
        "card%0aevent:%20jobs",
        ".",
    ):
        for path in (
            "/api/v1/jobs/" + urllib.parse.quote(job, safe="/"),
            "/api/v1/stream?job=" + urllib.parse.quote(job, safe=""),
            "/api/v1/attempt?number=1&job=" + urllib.parse.quote(job, safe=""),
        ):
            status, _, body = raw(served, "GET", path, {"Authorization": f"Bearer {served.token}"})
            assert status in (400, 404, 409, 414, 431), (job[:30], path[:60], status, body[:200])
    status, _ = served.call("GET", "/api/v1/status")
    assert status == 200
    # hostile numbers on the attempt viewer
    for number in ("-1", "0", "99999999999999999999999999", "1e9", "nan", "1" * 5000):
        status, _, body = raw(
            served, "GET", f"/api/v1/attempt?job=card&number={number}", {"Authorization": f"Bearer {served.token}"}
        )
        assert status in (400, 404, 409, 414, 431), (number[:20], status, body[:200])


def test_many_streams_and_a_client_that_never_reads(served):
    token = f"Bearer {served.token}"
    sockets = []
    try:
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", served.port), timeout=5)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.sendall(
                f"GET /api/v1/stream?job=card HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\n"
                f"Authorization: {token}\r\n\r\n".encode()
            )
            sockets.append(s)
        # churn so every stream has something to send, none read
        for i in range(20):
            served.add("card", f"seq 1 2000 # {i}", "10s") if i < 7 else None
            api.fork(
                {"id": f"churn{i}", "write_paths": [f"c/{i}"], "check": "test", "criteria": "x" * 50000},
                cwd=served.root,
            )
        started = time.monotonic()
        status, body = served.call("GET", "/api/v1/jobs")
        assert status == 200 and time.monotonic() - started < 10, "the server is blocked by unread streams"
        status, _ = served.call("GET", "/api/v1/jobs/card")
        assert status == 200
    finally:
        for s in sockets:
            s.close()

    # every slot comes back
    def reopened():
        data = read_stream(served, "/api/v1/stream", token, seconds=1)
        return data.startswith(b"HTTP/1.1 200")

    wait_for(reopened, timeout=30, step=1)


# -- 5. the attempt viewer ---------------------------------------------------------------------------


def test_attempt_viewer_serves_only_a_recorded_attempt_as_inert_text(served):
    from proctor import trail
    from proctor.store import blobs
    from proctor.workspace import Workspace

    with Workspace(served.root) as ws:
        with ws.store.write() as conn:
            evil = blobs.put(conn, b"<script>alert(1)</script>")
    with Workspace(served.root) as ws:
        with ws.store.write() as conn:
            trail.append(
                conn,
                ws.state_dir,
                "worker_attempt",
                "worker:w",
                "card",
                {"number": 1, "stream": evil, "worker": "w", "executor": "command"},
            )
    status, headers, body = raw(
        served, "GET", "/api/v1/attempt?job=card&number=1", {"Authorization": f"Bearer {served.token}"}
    )
    assert status == 200 and body == b"<script>alert(1)</script>"
    assert headers["content-type"].startswith("text/plain")
    assert "sandbox" in headers["content-security-policy"] and headers["x-content-type-options"] == "nosniff"
    # another job's number, a stream it has not, stderr of an attempt without one
    for path in (
        "/api/v1/attempt?job=other&number=1",
        "/api/v1/attempt?job=card&number=2",
        "/api/v1/attempt?job=card&number=1&stderr=1",
        "/api/v1/attempt?job=card",
    ):
        status, _, body = raw(served, "GET", path, {"Authorization": f"Bearer {served.token}"})
        assert status in (400, 404, 409) and b"<script>" not in body, (path, status)


# -- 6. forged `moved` -------------------------------------------------------------------------------


def test_fork_cannot_forge_a_move(served):
    api.fork(
        {
            "id": "card/kid",
            "parent": "card",
            "write_paths": ["src/a.py"],
            "check": "test",
            "moved": {"column": "Running", "state": "declared", "at": "2020-01-01T00:00:00Z", "by": "token"},
            "column": "Running",
            "archived": None,
        },
        cwd=served.root,
        environ={"BAGGAGE": "proctor.lease=card"},
    )
    row = job_state(served, "card/kid")
    assert row["column"] == "Declared", row
    assert served.add("card/kid", "true")[1].get("error", {}).get("code") == "MONITOR_CARD_INACTIVE"
    # a fork replacing a job the person moved must not let a leased caller undo it either way
    status, _ = served.call("POST", "/api/v1/actions", {"action": "move", "job": "card/kid", "column": "Done"})
    assert status == 200
    assert job_state(served, "card/kid")["column"] == "Done"
    try:
        api.fork(
            {
                "id": "card/kid",
                "parent": "card",
                "write_paths": ["src/a.py"],
                "check": "test",
                "moved": {"column": "Running", "state": "declared"},
            },
            cwd=served.root,
            environ={"BAGGAGE": "proctor.lease=card"},
        )
    except Exception:
        pass
    assert job_state(served, "card/kid")["column"] in ("Done", "Declared")
    page = served.call("GET", "/api/v1/jobs/card/kid")[1]
    assert page["job"]["column"] == job_state(served, "card/kid")["column"]


# -- 3. no XSS -----------------------------------------------------------------------------------

P = '<img src=x onerror="window.__xss=(window.__xss||0)+1">'
Q = '"><svg onload="window.__xss=(window.__xss||0)+1">'
BOARD = f"""[targets.test]
command = 'true'
[board]
columns = [
  {{ name = {json.dumps(P)}, states = ["declared"], active = false }},
  {{ name = {json.dumps(Q)}, states = ["running"], active = true }},
  {{ name = "</script><script>window.__xss=9</script>", states = ["exited", "pass", "fail", "no_return"], active = false }},
]
"""


@pytest.fixture
def hostile(tmp_path, monkeypatch, new_repo):
    root = new_repo("repo", BOARD)
    monkeypatch.chdir(root)
    api.fork({"id": "card", "write_paths": ["src/a.py"], "check": "test", "criteria": P + Q}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test", "criteria": P}, cwd=root)
    wt = str(tmp_path / "wt")
    git(root, "worktree", "add", "-q", "-b", "wt", wt)
    api.exec_job("card", cwd=wt)
    cli(root, "server", "start")
    server = Server(root)
    server.worktree = wt
    yield server
    cli(root, "server", "stop", check=False)


@pytest.mark.slow  # Chromium
def test_no_script_runs_in_the_console(hostile):
    from tests.server.test_console import browser as _b  # noqa: F401
    from playwright.sync_api import sync_playwright

    served = hostile
    status, monitor = served.add(
        "card",
        "echo '" + P.replace("'", "") + "'; echo '</pre><script>window.__xss=7</script>'",
        "10s",
        description=P + Q,
    )
    assert status == 201, monitor
    status, _ = served.call("POST", "/api/v1/actions", {"action": "move", "job": "other", "column": Q})
    assert status == 200
    wait_for(lambda: served.events("card"), timeout=20)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless=new", "--no-sandbox"])
        try:
            context = browser.new_context()
            page = context.new_page()
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            _, link = served.call("POST", "/api/v1/login-link", {})
            page.goto(link["url"])
            page.wait_for_selector("body[data-loaded=yes]", timeout=20000)
            time.sleep(1)
            for job in ("card", "other"):
                page.goto(f"http://127.0.0.1:{served.port}/jobs/{job}")
                page.wait_for_selector(f"body[data-page='{job}']", timeout=20000)
                time.sleep(1)
                assert page.evaluate("window.__xss") is None, job
                assert "onerror" in page.inner_text("body"), "the payload is shown as text (the test reached it)"
                assert page.query_selector("img[src=x]") is None and page.query_selector("svg") is None
            page.goto(f"http://127.0.0.1:{served.port}/login?next=" + urllib.parse.quote("/jobs/" + Q, safe=""))
            time.sleep(0.5)
            assert page.evaluate("window.__xss") is None
            assert not dialogs
        finally:
            browser.close()


def test_leased_refork_cannot_undo_the_persons_move(served):
    """The person moves card (running) to the passive Done column; its agent re-forks card, or
    files and the runner reopens, hoping to clear the move and add monitors again."""
    status, _ = served.call("POST", "/api/v1/actions", {"action": "move", "job": "card", "column": "Done"})
    assert status == 200 and job_state(served, "card")["column"] == "Done"
    for record in (
        {"id": "card", "write_paths": ["src/a.py"], "check": "test"},
        {"id": "card", "write_paths": ["src/a.py"], "check": "test", "state": "running"},
        {"id": "card", "write_paths": ["src/a.py"], "check": "test", "state": "declared"},
    ):
        try:
            api.fork(record, cwd=served.worktree, environ={"BAGGAGE": "proctor.lease=card"})
        except Exception:
            pass
        assert job_state(served, "card")["column"] == "Done", record
    r = run_client(
        served,
        "POST",
        "/api/v1/monitors",
        auth=f"Nonce {served.card_nonce}",
        body={"command": "true", "interval": "10s", "allow_unsandboxed": True},
        env=clean_env(),
    )
    assert r["status"] != 201, r
