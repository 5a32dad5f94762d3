"""An adversarial review of the server's promises (issue 14): a leased agent, running shell
commands as the same Unix user as the person, against a real server on loopback.

Each test is one attack, named in its docstring, and asserts the PROMISED behaviour: a test
that fails is an attack that worked. The agent here is a process started with the lease in
its environment (BAGGAGE=proctor.lease=card, PROCTOR_NONCE=<card's secret>), or, for the
checkout binding, a process in the worktree `proctor job exec card` bound.

Promises attacked:
1. a leased agent manages only its own job's monitors (with its secret): not with the server
   token (even read from its file), not another job's monitors, follow-ups, runs or events,
   and it neither stops nor starts the server;
2. a server is not started under a lease (its BAGGAGE and secret would reach every monitor);
3. hardening: bodies capped and timed, the console cookie a random HttpOnly SameSite=Strict
   session, 400 not 500, event streams capped, Host checked, cross-origin writes refused;
4. a monitor's cwd is the repository, the job's checkout or inside them;
5. the API answers while the store is busy (503 STORE_BUSY, not a freeze).
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

import pytest

from proctor import api
from tests.support import git
from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)
from tests.support import REPO_ROOT

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the peer is found through /proc")

# The agent's direct reach into the store: its own driver on the file, or on the database
# PROCTOR_STORE_URL (in the agent's environment too) names (tests/store/store_oracle.py).
STORE = "import sys\nsys.path.insert(0, {root!r})\nfrom tests.store.store_oracle import connect\n".format(
    root=REPO_ROOT
)

SAME_USER = pytest.mark.xfail(
    strict=True,
    reason=(
        "a known limit, stated in the README: the agent runs as the person's own user, so a process that leaves "
        "the process tree its lease is read from (setsid, env -i, a relay, a rewritten /proc/<pid>/mem), reads the "
        "store file, or signals the server is not told apart from the person; only a boundary the agent cannot "
        "leave (the sandbox, a cgroup, another user) closes it. strict: the test says so the day it holds"
    ),
)


# -- the agent's tools ------------------------------------------------------------------------------

# One HTTP call, described by a JSON file (argv[1]): where to connect (host, port: a relay, an
# IPv6 address), the request (method, path, headers with the Host to send, body), and where to
# write what came back (`out`), since a double-forked process has no stdout anyone reads.
# `erase` names ancestors whose environment to rewrite first (/proc/<pid>/mem), up to `stop`.
CALL = textwrap.dedent(r'''
    import http.client, json, os, sys, time
    spec = json.load(open(sys.argv[1]))

    def erase(stop):
        """Rewrite BAGGAGE= and PROCTOR_NONCE= in this process's and its ancestors' initial
        environment (what /proc/<pid>/environ shows), as far as `stop` (excluded)."""
        pid = os.getpid()
        while pid > 1 and pid != stop:
            raw = open(f"/proc/{pid}/stat", "rb").read()
            fields = raw[raw.rfind(b")") + 2:].split()
            start, end = int(fields[47]), int(fields[48])
            with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
                mem.seek(start)
                data = mem.read(end - start)
                for key in (b"BAGGAGE=", b"PROCTOR_NONCE="):
                    at = data.find(key)
                    while at != -1:
                        mem.seek(start + at)
                        mem.write(b"X" + key[1:])
                        at = data.find(key, at + 1)
            pid = int(fields[1])

    try:
        if spec.get("erase"):
            erase(spec["erase"])
        if spec.get("token_file"):
            spec["headers"]["Authorization"] = "Bearer " + open(spec["token_file"]).read().strip()
        if spec.get("cookie_file"):
            spec["headers"]["Cookie"] = open(spec["cookie_file"]).read().strip()
        conn = http.client.HTTPConnection(spec["host"], spec["port"], timeout=30)
        body = spec.get("body")
        conn.request(spec["method"], spec["path"], body=body.encode() if body is not None else None,
                     headers=spec["headers"])
        if spec.get("hang_up"):  # the request is out: hang up before the answer comes
            conn.sock.close()
            result = "hung up"
        else:
            response = conn.getresponse()
            result = f"status {response.status} {response.read().decode('utf-8', 'replace')}"
    except Exception as exc:
        result = f"error {type(exc).__name__}: {exc}"
    with open(spec["out"] + ".part", "w") as handle:
        handle.write(result)
    os.rename(spec["out"] + ".part", spec["out"])
''')


def _tool(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _spec(
    tmp_path,
    served,
    name: str,
    method: str,
    path: str,
    *,
    auth: str | None = "token",  # noqa: F811
    host: str = "127.0.0.1",
    port: int | None = None,
    body: dict | None = None,
    **extra,
) -> tuple[str, str]:
    """(the call's spec file, the file its answer lands in)."""
    out = str(tmp_path / f"{name}.out")
    headers = {"Host": f"127.0.0.1:{served.port}", "Content-Type": "application/json"}
    spec = {
        "host": host,
        "port": port or served.port,
        "method": method,
        "path": path,
        "headers": headers,
        "body": json.dumps(body) if body is not None else None,
        "out": out,
        **extra,
    }
    if auth == "token":
        spec["token_file"] = served.token_path
    elif auth is not None:
        headers["Authorization"] = auth
    spec_path = tmp_path / f"{name}.json"
    spec_path.write_text(json.dumps(spec))
    return str(spec_path), out


def _answer(out: str, timeout: float = 40) -> str:
    return wait_for(lambda: os.path.exists(out) and open(out).read(), timeout=timeout)


def _leased_env(served, **extra):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    env.update({"BAGGAGE": "proctor.lease=card", "PROCTOR_NONCE": served.card_nonce}, **extra)
    return env


def _leased_shell(served, command: str, cwd: str, timeout: float = 60):  # noqa: F811
    """`command` in a bash started under card's lease, as the agent's tool call would be."""
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=_leased_env(served), capture_output=True, text=True, timeout=timeout
    )


def _third(served, command: str = "true", interval: str = "1h"):  # noqa: F811
    """An active job that is not card's, with a monitor the person added: what the agent reaches for."""
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test", "state": "running"}, cwd=served.root)
    status, monitor = served.add("third", command, interval)
    assert status == 201, monitor
    return monitor["id"]


def _live(served, monitor_id) -> bool:  # noqa: F811
    return any(m["id"] == monitor_id for m in served.call("GET", "/api/v1/monitors")[1]["monitors"])


def _raw(port: int, data: bytes, timeout: float = 10) -> str:
    """Send bytes by hand; the answer's status line (or what became of the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        chunks = b""
        try:
            while b"\r\n" not in chunks:
                piece = sock.recv(65536)
                if not piece:
                    break
                chunks += piece
        except (ConnectionResetError, socket.timeout) as exc:
            return f"connection: {type(exc).__name__}"
    return chunks.decode("latin-1").split("\r\n", 1)[0] if chunks else "connection: closed"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


# -- 1. the token, from a process the server cannot see is leased --------------------------------------


@SAME_USER
def test_double_forked_setsid_env_i_escapee_sending_the_token_is_refused(served, tmp_path):  # noqa: F811
    """Attack: the leased shell runs `setsid -f env -i python call.py`: the call runs in a
    new session, with an empty environment, reparented away from the leased shell (to init or
    the nearest subreaper), reads the token file and removes another job's monitor."""
    victim = _third(served)
    tool = _tool(tmp_path, "call.py", CALL)
    control, seen = _spec(tmp_path, served, "control", "DELETE", f"/api/v1/monitors/{victim}")
    _leased_shell(served, f"env -i {sys.executable} {tool} {control}; true", cwd=str(tmp_path))
    assert _answer(seen).startswith("status 403"), "control: the same call, not escaped, is refused"
    spec, out = _spec(tmp_path, served, "escape", "DELETE", f"/api/v1/monitors/{victim}")
    done = _leased_shell(served, f"setsid -f env -i {sys.executable} {tool} {spec}", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    answer = _answer(out)
    assert answer.startswith("status 403") and "SERVER_LEASED_CALLER" in answer, answer
    assert _live(served, victim), "another job's monitor was removed with the person's token"


@SAME_USER
def test_leased_process_erasing_the_lease_from_its_ancestors_environ_is_refused(served, tmp_path):  # noqa: F811
    """Attack: no escape from the process tree at all. The leased process rewrites the
    `BAGGAGE=` and `PROCTOR_NONCE=` of its own and its leased ancestors' initial environment
    through /proc/<pid>/mem (same user, no Yama here), which is exactly what the server reads
    back as /proc/<pid>/environ, then sends the token."""
    victim = _third(served)
    tool = _tool(tmp_path, "call.py", CALL)
    control, seen = _spec(tmp_path, served, "control", "DELETE", f"/api/v1/monitors/{victim}")
    _leased_shell(served, f"{sys.executable} {tool} {control}; true", cwd=str(tmp_path))
    assert _answer(seen).startswith("status 403"), "control: without the rewrite, refused"
    spec, out = _spec(tmp_path, served, "erase", "DELETE", f"/api/v1/monitors/{victim}", erase=os.getpid())
    done = _leased_shell(served, f"{sys.executable} {tool} {spec}; true", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    answer = _answer(out)
    assert not answer.startswith("error"), answer
    assert answer.startswith("status 403") and "SERVER_LEASED_CALLER" in answer, answer
    assert _live(served, victim)


def test_a_process_in_the_checkout_job_exec_bound_sending_the_token_is_refused(served, tmp_path):  # noqa: F811
    """Attack: an agent whose lease is the checkout's binding (`proctor job exec card` in the
    worktree, a host that reports no session id): nothing in its environment names the job.
    The CLI refuses it the token (its checkout is bound); a direct HTTP call from the same
    directory sends it."""
    victim = _third(served)
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    refused = subprocess.run(
        [sys.executable, "-m", "proctor", "monitor", "remove", str(victim)],
        cwd=served.worktree,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0, "the CLI knows this checkout works card"
    tool = _tool(tmp_path, "call.py", CALL)
    spec, out = _spec(tmp_path, served, "bound", "DELETE", f"/api/v1/monitors/{victim}")
    subprocess.run([sys.executable, tool, spec], cwd=served.worktree, env=env, timeout=60)
    answer = _answer(out)
    assert answer.startswith("status 403"), answer
    assert _live(served, victim)


RELAY = textwrap.dedent(r"""
    import socket, sys, threading
    target = int(sys.argv[1])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(listener.getsockname()[1], flush=True)

    def pipe(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    while True:
        client, _ = listener.accept()
        upstream = socket.create_connection(("127.0.0.1", target))
        threading.Thread(target=pipe, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
""")


@SAME_USER
def test_a_relay_started_before_the_lease_does_not_launder_the_token(served, tmp_path):  # noqa: F811
    """Attack: a TCP relay (socat, an ssh -L, a dev proxy: here a Python one) the person started
    before any lease existed. The leased process connects to the relay with the token and the
    server's Host; the server's peer is the relay, which works no job."""
    victim = _third(served)
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    relay = subprocess.Popen(
        [sys.executable, "-c", RELAY, str(served.port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        relay_port = int(relay.stdout.readline())
        tool = _tool(tmp_path, "call.py", CALL)
        control, seen = _spec(tmp_path, served, "control", "DELETE", f"/api/v1/monitors/{victim}")
        _leased_shell(served, f"{sys.executable} {tool} {control}; true", cwd=str(tmp_path))
        assert _answer(seen).startswith("status 403"), "control: straight to the server, refused"
        spec, out = _spec(tmp_path, served, "relay", "DELETE", f"/api/v1/monitors/{victim}", port=relay_port)
        _leased_shell(served, f"{sys.executable} {tool} {spec}; true", cwd=str(tmp_path))
        answer = _answer(out)
        assert answer.startswith("status 403"), answer
        assert _live(served, victim)
    finally:
        relay.kill()
        relay.wait(10)


def test_other_loopback_routes_from_a_leased_process(served, tmp_path):  # noqa: F811
    """Attack: reach the server some other way than 127.0.0.1 over IPv4: through an IPv4-mapped
    IPv6 socket (its row is in /proc/net/tcp6, not tcp), ::1, 127.0.0.2, `localhost`."""
    victim = _third(served)
    tool = _tool(tmp_path, "call.py", CALL)
    answers = {}
    for name, host in (("mapped", "::ffff:127.0.0.1"), ("v6", "::1"), ("other", "127.0.0.2"), ("name", "localhost")):
        spec, out = _spec(tmp_path, served, name, "DELETE", f"/api/v1/monitors/{victim}", host=host)
        _leased_shell(served, f"{sys.executable} {tool} {spec}; true", cwd=str(tmp_path))
        answers[name] = _answer(out)
    for name, answer in answers.items():
        assert answer.startswith("status 403") or answer.startswith("error"), (name, answer)
    assert _live(served, victim)


def test_hanging_up_right_after_the_request_does_not_dodge_the_peer_check(served, tmp_path):  # noqa: F811
    """Attack: race the pid lookup. The leased process sends a DELETE with the token and
    closes its socket at once, so that when the server looks up /proc/net/tcp the client end
    is gone (no inode, no owner) and, it hopes, nothing is known and nothing refused."""
    victim = _third(served)
    tool = _tool(tmp_path, "call.py", CALL)
    for attempt in range(5):
        spec, out = _spec(tmp_path, served, f"hangup{attempt}", "DELETE", f"/api/v1/monitors/{victim}", hang_up=True)
        _leased_shell(served, f"{sys.executable} {tool} {spec}; true", cwd=str(tmp_path))
        assert _answer(out) == "hung up"
    time.sleep(1)
    assert _live(served, victim), "a request whose sender hung up was served with the token"


def test_a_session_cookie_leaked_to_another_port_is_refused_to_a_leased_process(served, tmp_path):  # noqa: F811
    """Attack: cookie reuse across ports. A browser sends every cookie of 127.0.0.1 to every
    port; the agent runs a dev server on 127.0.0.1:<its port> and the person opens it (to look
    at the agent's work) with the browser logged in to the console. The agent's server records
    `proctor_<port>=<session>`, and the leased process replays it to remove another job's
    monitor. The token is refused to the agent; the session it stands for should be too."""
    victim = _third(served)
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    login = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/login",
        data=f"token={served.token}".encode(),
        method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    with contextlib.suppress(urllib.error.HTTPError):
        browser.open(login, timeout=10)
    assert any(c.name == f"proctor_{served.port}" for c in jar), "the person is logged in"
    stolen = tmp_path / "stolen"
    dev_server = _tool(
        tmp_path,
        "dev.py",
        textwrap.dedent(f"""
        import http.server
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                open({str(stolen)!r}, "w").write(self.headers.get("Cookie") or "")
                self.send_response(200); self.end_headers(); self.wfile.write(b"my work")
            def log_message(self, *args): pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        print(server.server_address[1], flush=True)
        server.handle_request()
    """),
    )
    agent = subprocess.Popen(
        [sys.executable, dev_server], env=_leased_env(served), stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        port = int(agent.stdout.readline())
        with browser.open(f"http://127.0.0.1:{port}/", timeout=10) as page:
            assert page.read() == b"my work"
    finally:
        agent.kill()
        agent.wait(10)
    assert f"proctor_{served.port}=" in stolen.read_text(), "the browser handed the agent's port the session"
    tool = _tool(tmp_path, "call.py", CALL)
    spec, out = _spec(
        tmp_path, served, "cookie", "DELETE", f"/api/v1/monitors/{victim}", auth=None, cookie_file=str(stolen)
    )
    _leased_shell(served, f"{sys.executable} {tool} {spec}; true", cwd=str(tmp_path))
    answer = _answer(out)
    assert answer.startswith("status 403") or answer.startswith("status 401"), answer
    assert _live(served, victim), "another job's monitor was removed with the person's console session"


def test_a_monitor_command_that_double_forks_out_is_refused_the_token(served, tmp_path):  # noqa: F811
    """Attack: with its own secret, the agent adds a monitor whose command double-forks
    (`setsid -f env -i`) a call that sends the token: out of the run's process tree, to be
    orphaned away from the server before it connects."""
    victim = _third(served)
    tool = _tool(tmp_path, "call.py", CALL)
    spec, out = _spec(tmp_path, served, "monitor", "DELETE", f"/api/v1/monitors/{victim}")
    command = f"setsid -f env -i {sys.executable} {tool} {spec}; sleep 5"
    made = cli(
        served.root,
        "monitor",
        "add",
        "--cmd",
        command,
        "--interval",
        "1h",
        "--allow-unsandboxed",
        "-o",
        "json",
        env={"PROCTOR_NONCE": served.card_nonce},
    )
    assert json.loads(made.stdout)["job"] == "card"
    try:
        answer = _answer(out)
    except AssertionError:
        raise AssertionError(f"no answer; runs: {served.call('GET', '/api/v1/runs?job=card')[1]}") from None
    assert answer.startswith("status 403") and "SERVER_LEASED_CALLER" in answer, answer
    assert _live(served, victim)


def test_a_leased_process_cannot_log_in_to_the_console(served, tmp_path):  # noqa: F811
    """Attack: the leased process posts the token it read to /login to get a session cookie
    (a session skips the peer check the token gets)."""
    tool = _tool(tmp_path, "call.py", CALL)
    spec_path, out = _spec(tmp_path, served, "login", "POST", "/login", auth=None)
    spec = json.loads(open(spec_path).read())
    spec["headers"]["Content-Type"] = "application/x-www-form-urlencoded"
    spec["body"] = f"token={served.token}"
    open(spec_path, "w").write(json.dumps(spec))
    _leased_shell(served, f"{sys.executable} {tool} {spec_path}; true", cwd=str(tmp_path))
    answer = _answer(out)
    assert answer.startswith("status 403") and "SERVER_LEASED_CALLER" in answer, answer


# -- 1. another job's monitors, follow-ups, runs and events with this job's secret ----------------------


def test_a_jobs_secret_reaches_nothing_of_another_job(served, tmp_path):  # noqa: F811
    """Attack: `Authorization: Nonce <card's secret>` against third's monitors: remove by a
    guessed id, list/events/runs/follow-ups naming third (or its monitor, or its follow-up by
    id), add naming third; and the routes a secret is not for (jobs, the event stream, shutdown)."""
    victim = _third(served, "echo third-secret-line", "10s")
    batch = wait_for(lambda: [e["batch"] for e in served.events("third") if e["batch"]], timeout=40)[0]
    nonce = {"Authorization": f"Nonce {served.card_nonce}"}

    def call(method, path, body=None, headers=nonce):
        request = urllib.request.Request(
            f"http://127.0.0.1:{served.port}{path}",
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Host": f"127.0.0.1:{served.port}", "Content-Type": "application/json", **headers},
        )
        try:
            with urllib.request.build_opener(_NoRedirect).open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    status, text = call("DELETE", f"/api/v1/monitors/{victim}")
    assert status == 409 and "MONITOR_OUT_OF_SCOPE" in text, (status, text)
    assert _live(served, victim)
    for path in (
        "/api/v1/monitors?job=third",
        "/api/v1/events?job=third&limit=5000",
        f"/api/v1/runs?job=third&monitor={victim}",
        "/api/v1/followups?job=third",
    ):
        status, text = call("GET", path)
        assert status == 200 and "third" not in text, (path, text)
    status, text = call("GET", f"/api/v1/followups/{batch}")
    assert status == 409 and "third-secret-line" not in text, (status, text)
    status, text = call(
        "POST",
        "/api/v1/monitors",
        {"job": "third", "command": "true", "interval": "1h", "cwd": served.root, "allow_unsandboxed": True},
    )
    assert status == 201 and json.loads(text)["job"] == "card", text
    for method, path in (
        ("GET", "/api/v1/jobs"),
        ("GET", "/api/v1/stream"),
        ("POST", "/api/v1/shutdown"),
        ("GET", "/"),
    ):
        status, _ = call(method, path, {} if method == "POST" else None)
        assert status in (401, 303), (path, status)
    assert served.call("GET", "/api/v1/status")[0] == 200, "still running"


def test_an_ended_jobs_secret_is_refused(served):  # noqa: F811
    """Attack: keep using the secret of a job that has ended (no_return)."""
    api.exit_job("card", cwd=served.worktree)
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/api/v1/followups",
        headers={"Host": f"127.0.0.1:{served.port}", "Authorization": f"Nonce {served.card_nonce}"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401


def test_secret_authenticated_streams_take_no_slot(served):  # noqa: F811
    """Attack: exhaust the event streams (MAX_STREAMS) with a job's secret, so the person's
    console cannot open its live view."""
    from proctor.server.app import MAX_STREAMS

    head = (
        f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nAuthorization: Nonce "
        f"{served.card_nonce}\r\n\r\n"
    ).encode()
    held = []
    try:
        for _ in range(MAX_STREAMS + 4):
            sock = socket.create_connection(("127.0.0.1", served.port), timeout=10)
            sock.sendall(head)
            assert sock.recv(4096).startswith(b"HTTP/1.1 401")
            held.append(sock)
        person = (
            f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nAuthorization: Bearer "
            f"{served.token}\r\n\r\n"
        ).encode()
        assert _raw(served.port, person).startswith("HTTP/1.1 200")
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize("how", ["stripped", pytest.param("escaped", marks=SAME_USER)])
def test_monitor_wait_for_another_job_from_a_leased_shell(served, tmp_path, how):  # noqa: F811
    """Attack: `proctor monitor wait` reads the store itself (no server, no token, no secret).
    The leased shell runs it with its lease stripped (`env -u BAGGAGE -u PROCTOR_NONCE`, from
    the repository rather than its bound worktree) and --job third, as a child of the shell
    (stripped) or double-forked out of it (escaped, `setsid -f`): it would print third's follow-up."""
    _third(served, "echo third-secret-line", "10s")
    wait_for(lambda: [e["batch"] for e in served.events("third") if e["batch"]], timeout=40)
    out = tmp_path / "wait.out"
    wait = (
        f"env -u BAGGAGE -u PROCTOR_NONCE {sys.executable} -m proctor monitor wait --job third --timeout 5s "
        f"> {out}.part 2>&1; echo rc=$? >> {out}.part; mv {out}.part {out}"
    )
    if how == "escaped":
        command = f"setsid -f env -u BAGGAGE -u PROCTOR_NONCE sh -c '{wait}'"
    else:
        command = wait
    _leased_shell(served, command, cwd=served.root)
    said = _answer(str(out), timeout=60)
    assert "third-secret-line" not in said and "rc=0" not in said, said


@SAME_USER
def test_the_store_file_does_not_hand_a_leased_process_another_jobs_followups(served, tmp_path):  # noqa: F811
    """Attack: skip the server. The store is the person's file, 0600, and the agent is the
    person's Unix user: it reads third's follow-up text with the database's own driver."""
    _third(served, "echo third-secret-line", "10s")
    wait_for(lambda: [e["batch"] for e in served.events("third") if e["batch"]], timeout=40)
    db = os.path.join(os.path.dirname(os.path.dirname(served.token_path)), "proctor.db")
    read = _tool(
        tmp_path,
        "read.py",
        STORE + "print(','.join(r[0] for r in connect(sys.argv[1]).execute(\"SELECT text FROM followups \"\n"
        "      \"WHERE job = 'third'\")))\n",
    )
    done = _leased_shell(served, f"{sys.executable} {read} {db}", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "third-secret-line" not in done.stdout, done.stdout


def test_a_monitor_written_into_the_store_is_not_run(served, tmp_path):  # noqa: F811
    """Attack: skip the API's checks. The leased process inserts a monitor row for ANOTHER job
    straight into the store, with cwd `/`, no acknowledgement; the server spawns every live
    monitor it finds in the store (every CHECK_SECONDS)."""
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test", "state": "running"}, cwd=served.root)
    db = os.path.join(os.path.dirname(os.path.dirname(served.token_path)), "proctor.db")
    insert = STORE + textwrap.dedent(f"""
        conn = connect({db!r}, timeout=30)
        conn.execute("INSERT INTO monitors (job, command, interval, description, cwd, created, created_by) "
                     "VALUES ('third', 'pwd -P; echo injected', 10, 'x', '/', '2020-01-01T00:00:00Z', 'token')")
        conn.commit()
    """)
    done = _leased_shell(served, f"{sys.executable} {_tool(tmp_path, 'insert.py', insert)}", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    from proctor.monitors.scheduler import CHECK_SECONDS

    deadline = time.monotonic() + CHECK_SECONDS + 10
    while time.monotonic() < deadline:
        lines = [e["line"] for e in served.events("third")]
        assert "injected" not in lines and "/" not in lines, f"the injected monitor ran: {lines}"
        time.sleep(1)


# -- 1 and 2. stopping and starting the server ----------------------------------------------------------


@SAME_USER
def test_an_escaped_leased_process_cannot_stop_the_server(served, tmp_path):  # noqa: F811
    """Attack: `setsid -f env -u BAGGAGE -u PROCTOR_NONCE proctor server stop`, from the
    repository (not the bound worktree): the stop's own lineage check walks a tree the
    escapee has left."""
    out = tmp_path / "stop.out"
    command = (
        f"setsid -f env -u BAGGAGE -u PROCTOR_NONCE sh -c '{sys.executable} -m proctor server stop "
        f"> {out}.part 2>&1; echo rc=$? >> {out}.part; mv {out}.part {out}'"
    )
    _leased_shell(served, command, cwd=served.root)
    said = _answer(str(out), timeout=60)
    assert "rc=0" not in said, said
    assert served.call("GET", "/api/v1/status")[0] == 200, "the server was stopped by the agent"


@SAME_USER
def test_a_leased_shell_cannot_signal_the_server(served):  # noqa: F811
    """Attack: no proctor command at all: `kill -TERM <pid>` (server.json names it; the guard
    refuses pkill and killall of proctor, not kill of a pid)."""
    _leased_shell(served, f"kill -TERM {served.pid}; true", cwd=served.root)
    time.sleep(3)
    try:
        status = served.call("GET", "/api/v1/status")[0]
    except (urllib.error.URLError, OSError) as exc:
        status = repr(exc)
    assert status == 200, f"the agent stopped the server with a signal: {status}"


@SAME_USER
def test_an_escaped_leased_process_cannot_start_the_server(served, tmp_path):  # noqa: F811
    """Attack: the person stopped the server; the leased shell starts it again from an escapee
    (`setsid -f`, lease stripped, in the repository): a server the agent started, with an
    environment (PATH, ...) the agent chose for every job's monitors."""
    cli(served.root, "server", "stop")
    out = tmp_path / "start.out"
    command = (
        f"setsid -f env -u BAGGAGE -u PROCTOR_NONCE sh -c '{sys.executable} -m proctor server start "
        f"> {out}.part 2>&1; echo rc=$? >> {out}.part; mv {out}.part {out}'"
    )
    _leased_shell(served, command, cwd=served.root)
    said = _answer(str(out), timeout=60)
    running = json.loads(cli(served.root, "server", "status", "-o", "json", check=False).stdout).get("running")
    assert not running, f"the agent started the server: {said}"


def test_a_server_started_under_a_lease_hands_no_lease_to_monitors(served, tmp_path):  # noqa: F811
    """Attack on promise 2 from inside the lease (no escape): `server start` with BAGGAGE and
    the secret in the environment is refused; and a monitor never sees BAGGAGE or
    PROCTOR_NONCE of whoever started the server."""
    cli(served.root, "server", "stop")
    done = _leased_shell(served, f"{sys.executable} -m proctor server start; echo rc=$?", cwd=served.root)
    running = json.loads(cli(served.root, "server", "status", "-o", "json", check=False).stdout).get("running")
    assert not running and "SERVER_LEASED_CALLER" in done.stderr, done.stdout + done.stderr
    cli(served.root, "server", "start", env={"BAGGAGE": "", "PROCTOR_NONCE": ""})
    again = Server(served.root)
    again.add("card", "echo env:${BAGGAGE:-none}:${PROCTOR_NONCE:-none}:${PROCTOR_LEASE:-none}")
    lines = wait_for(lambda: [e["line"] for e in again.events("card") if e["line"].startswith("env:")], timeout=20)
    assert lines == ["env:none:none:none"], lines


# -- 3. hardening ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}.",
        "127.0.0.1.:{port}",
        "localhost.:{port}",
        "LOCALHOST:{port}",
        "[::1]:{port}",
        "127.0.0.1",
        "localhost",
        "127.0.0.1:{port}@evil.example",
        "evil.example:{port}",
        "127.0.0.1.evil.example:{port}",
        "127.0.0.1:0{port}",
        " 127.0.0.1:{port}x",
        "",
    ],
)
def test_host_header_variants_are_refused(served, host):  # noqa: F811
    """Attack: DNS rebinding through a Host the check might normalise: a trailing dot,
    uppercase, IPv6 literal, no port, userinfo, a suffix, a leading zero, an empty Host."""
    value = host.format(port=served.port)
    head = (
        f"GET /api/v1/status HTTP/1.1\r\nHost: {value}\r\nAuthorization: Bearer {served.token}\r\n"
        f"Connection: close\r\n\r\n"
    ).encode()
    status = _raw(served.port, head)
    assert not status.startswith("HTTP/1.1 2"), (value, status)


@pytest.mark.parametrize("order", ["evil-first", "good-first"])
def test_two_host_headers_are_refused(served, order):  # noqa: F811
    """Attack: two Host headers, one this server's, one another site's."""
    hosts = [f"evil.example:{served.port}", f"127.0.0.1:{served.port}"]
    if order == "good-first":
        hosts.reverse()
    head = (
        f"GET /api/v1/status HTTP/1.1\r\nHost: {hosts[0]}\r\nHost: {hosts[1]}\r\nAuthorization: Bearer "
        f"{served.token}\r\nConnection: close\r\n\r\n"
    ).encode()
    status = _raw(served.port, head)
    assert not status.startswith("HTTP/1.1 2"), status


def test_cross_origin_writes_are_refused(served):  # noqa: F811
    """Attack: a page elsewhere (another port of 127.0.0.1, a sandboxed frame with Origin null)
    posts or deletes with the person's console session: JSON from a foreign origin, a
    CORS-simple content type without Origin, a list of content types, the login form."""
    victim = _third(served)
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect)
    login = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/login", data=f"token={served.token}".encode(), method="POST"
    )
    with contextlib.suppress(urllib.error.HTTPError):
        browser.open(login, timeout=10)
    cookie = next(f"{c.name}={c.value}" for c in jar)
    cases = [
        (
            "DELETE",
            f"/api/v1/monitors/{victim}",
            {"Origin": f"http://127.0.0.1:{served.port + 1}", "Content-Type": "application/json"},
        ),
        ("DELETE", f"/api/v1/monitors/{victim}", {"Origin": "null", "Content-Type": "application/json"}),
        ("DELETE", f"/api/v1/monitors/{victim}", {"Content-Type": "text/plain"}),
        ("DELETE", f"/api/v1/monitors/{victim}", {}),
        ("POST", "/api/v1/shutdown", {"Content-Type": "application/x-www-form-urlencoded"}),
        ("POST", "/api/v1/shutdown", {"Content-Type": "text/plain; charset=application/json"}),
        (
            "POST",
            "/api/v1/shutdown",
            {"Origin": f"http://localhost:{served.port + 1}", "Content-Type": "application/json"},
        ),
        (
            "POST",
            "/login",
            {"Origin": f"http://127.0.0.1:{served.port + 1}", "Content-Type": "application/x-www-form-urlencoded"},
        ),
    ]
    for method, path, headers in cases:
        data = f"token={served.token}".encode() if path == "/login" else b"{}"
        request = urllib.request.Request(
            f"http://127.0.0.1:{served.port}{path}",
            data=data,
            method=method,
            headers={"Host": f"127.0.0.1:{served.port}", "Cookie": cookie, **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        assert status == 403, (method, path, headers, status)
    assert _live(served, victim) and served.call("GET", "/api/v1/status")[0] == 200
    preflight = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/api/v1/monitors",
        method="OPTIONS",
        headers={
            "Host": f"127.0.0.1:{served.port}",
            "Origin": "http://evil.example",
            "Access-Control-Request-Method": "POST",
        },
    )
    try:
        with urllib.request.urlopen(preflight, timeout=10) as response:
            allowed = response.headers.get("Access-Control-Allow-Origin")
    except urllib.error.HTTPError as exc:
        allowed = exc.headers.get("Access-Control-Allow-Origin")
    assert allowed is None, "no CORS grant"


def test_failed_logins_open_nothing_and_a_fixed_cookie_is_never_a_session(served):  # noqa: F811
    """Attack: brute force /login (300 wrong tokens), and fixation: present a session id of the
    attacker's choosing before the person logs in, hoping the server adopts it."""
    name = f"proctor_{served.port}"
    fixed = "attacker-chosen-session-id"
    for n in range(300):
        request = urllib.request.Request(
            f"http://127.0.0.1:{served.port}/login",
            data=f"token=guess{n}".encode(),
            method="POST",
            headers={"Cookie": f"{name}={fixed}"},
        )
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            opener.open(request, timeout=10)
        except urllib.error.HTTPError as exc:
            assert exc.code == 303 and exc.headers.get("Set-Cookie") is None
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/login",
        data=f"token={served.token}".encode(),
        method="POST",
        headers={"Cookie": f"{name}={fixed}"},
    )
    issued = None
    try:
        urllib.request.build_opener(_NoRedirect).open(request, timeout=10)
    except urllib.error.HTTPError as exc:
        issued = exc.headers.get("Set-Cookie")
    assert issued and fixed not in issued
    check = urllib.request.Request(f"http://127.0.0.1:{served.port}/api/v1/jobs", headers={"Cookie": f"{name}={fixed}"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(check, timeout=10)
    assert refused.value.code == 401


def test_huge_query_strings_are_refused_and_the_server_goes_on(served):  # noqa: F811
    """Attack: a megabyte query string, a 5000-digit number, and a negative limit."""
    for query in ("job=" + "x" * (1 << 20), "limit=" + "9" * 5000, "monitor=" + "9" * 5000):
        head = (
            f"GET /api/v1/runs?{query} HTTP/1.1\r\nHost: 127.0.0.1:{served.port}\r\nAuthorization: Bearer "
            f"{served.token}\r\nConnection: close\r\n\r\n"
        ).encode()
        status = _raw(served.port, head)
        assert not status.startswith("HTTP/1.1 5"), (query[:20], status)
    assert served.call("GET", "/api/v1/status")[0] == 200


def test_a_negative_limit_does_not_lift_the_events_cap(served):  # noqa: F811
    """Attack: `/api/v1/events?limit=-1`: min(5000, -1) is -1, and SQLite reads LIMIT -1 as no
    limit at all: every event of the store in one answer."""
    served.add("card", "seq 1 6000")
    wait_for(lambda: len(served.events("card")) >= 5000, timeout=30)
    wait_for(lambda: served.runs(1) and served.runs(1)[0][1], timeout=30)
    status, body = served.call("GET", "/api/v1/events?limit=-1&job=card")
    assert status in (200, 400), status
    if status == 200:
        assert len(body["events"]) <= 5000, f"{len(body['events'])} events in one answer"


@pytest.mark.parametrize(
    "body",
    [
        {"cwd": "/tmp\u0000/x"},
        {"command": "true\u0000"},
        {"interval": 1e308},
        {"interval": True},
        {"job": "\ud800"},
        {"description": "\u0000" * 1000},
        {"cwd": "\udcff"},
    ],
)
def test_hostile_bodies_are_client_errors(served, body):  # noqa: F811
    """Attack: bodies a JSON parser accepts but the handlers may not: a NUL in cwd or command,
    a huge or boolean interval, a lone surrogate in the job or cwd."""
    full = {"job": "card", "command": "true", "interval": "10s", "cwd": served.root, "allow_unsandboxed": True, **body}
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/api/v1/monitors",
        method="POST",
        data=json.dumps(full).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {served.token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, answer = response.status, response.read()[:200]
    except urllib.error.HTTPError as exc:
        status, answer = exc.code, exc.read()[:200]
    assert status < 500, (body, status, answer)
    assert served.call("GET", "/api/v1/status")[0] == 200


def test_the_console_renders_no_markup_from_the_store(served):  # noqa: F811
    """Attack: a monitor description and output carrying `<script>`/`<img onerror>`, shown by
    the console; a `failed` parameter on the login page."""
    payload = "<img src=x onerror=alert(1)><script>alert(1)</script>"
    assert served.add("card", f"echo '{payload}'", description=payload)[0] == 201
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/", headers={"Authorization": f"Bearer {served.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        page = response.read().decode()
    assert payload not in page
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in page, sink
    monitors = urllib.request.Request(
        f"http://127.0.0.1:{served.port}/api/v1/monitors?job=card", headers={"Authorization": f"Bearer {served.token}"}
    )
    with urllib.request.urlopen(monitors, timeout=10) as response:
        assert response.headers.get_content_type() == "application/json"
    with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/login?failed=<script>x</script>", timeout=10) as r:
        assert "<script>x" not in r.read().decode()


from tests.server.test_server_scope_hardening import inprocess  # noqa: E402,F401  (the app in this process)


@pytest.mark.xfail(
    strict=True,
    reason="uvicorn has no timeout for a request's head (only for its body, which proctor bounds); a known limit, in the note",
)
def test_a_trickled_request_head_times_out(inprocess):
    """Attack: slowloris on the head, not the body: send the request line, then one byte of
    a header every half second. Uploads time out after BODY_SECONDS (1.5 s here); a head that
    never ends holds a connection (and a file descriptor) for as long as the sender likes."""
    with socket.create_connection(("127.0.0.1", inprocess), timeout=5) as sock:
        sock.sendall(f"POST /login HTTP/1.1\r\nHost: 127.0.0.1:{inprocess}\r\nX-Slow: ".encode())
        sock.settimeout(0.5)
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 20:
            try:
                sock.sendall(b"a")
                sock.recv(4096)  # b"" (closed) or an answer (a 408): either ends it
                closed = True
                break
            except socket.timeout:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
    assert closed, "a request head trickled for 20 s still held its connection"


# -- 4. the monitor's directory -------------------------------------------------------------------------


def test_a_cwd_swapped_for_a_symlink_after_the_check_does_not_move_the_runs(served, tmp_path):  # noqa: F811
    """Attack: TOCTOU on the cwd. The agent adds a monitor (with its secret) in a directory of
    the repository, then replaces that directory with a symlink to a place outside; the next
    run's chdir follows the link."""
    sub = os.path.join(served.root, "sub")
    os.mkdir(sub)
    outside = tmp_path / "outside"
    outside.mkdir()
    made = cli(
        sub,
        "monitor",
        "add",
        "--cmd",
        "pwd -P",
        "--interval",
        "10s",
        "--allow-unsandboxed",
        "-o",
        "json",
        env={"PROCTOR_NONCE": served.card_nonce},
    )
    assert json.loads(made.stdout)["cwd"] == os.path.realpath(sub)
    wait_for(lambda: served.events("card"), timeout=15)
    os.rmdir(sub)
    os.symlink(str(outside), sub)
    lines = wait_for(
        lambda: (lambda ev: ev if len(ev) >= 2 else None)([e["line"] for e in served.events("card")]), timeout=30
    )
    root = os.path.realpath(served.root)
    for line in lines:
        assert line == root or line.startswith(root + "/"), f"a run went to {line}"


def test_cwd_escapes_are_refused_at_creation(served, tmp_path):  # noqa: F811
    """Attack: name a cwd that resolves elsewhere: a symlink in the repository to outside, a
    `..` path, the git directory (and a worktree's admin directory in it), another job's
    worktree, a worktree nested in the repository, an independent repository inside it."""
    nonce = {"PROCTOR_NONCE": served.card_nonce}
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(served.root, "link-out"))
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test"}, cwd=served.root)
    third_wt = str(tmp_path / "wt3")
    git(served.root, "worktree", "add", "-q", "-b", "wt3", third_wt)
    api.exec_job("third", cwd=third_wt)
    nested = os.path.join(served.root, "nested")
    git(served.root, "worktree", "add", "-q", "-b", "nested", nested)
    inner = os.path.join(served.root, "inner")
    os.mkdir(inner)
    git(inner, "init", "-q")
    cwds = [
        os.path.join(served.root, "link-out"),
        os.path.join(served.root, "..", "outside"),
        os.path.join(served.root, ".git"),
        os.path.join(served.root, ".git", "worktrees", "wt"),
        os.path.join(served.root, ".git", "hooks"),
        third_wt,
        nested,
        inner,
        "/",
    ]
    for cwd in cwds:
        request = urllib.request.Request(
            f"http://127.0.0.1:{served.port}/api/v1/monitors",
            method="POST",
            data=json.dumps({"command": "true", "interval": "1h", "cwd": cwd, "allow_unsandboxed": True}).encode(),
            headers={
                "Host": f"127.0.0.1:{served.port}",
                "Content-Type": "application/json",
                "Authorization": f"Nonce {nonce['PROCTOR_NONCE']}",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                raise AssertionError(f"accepted cwd {cwd}: {response.read().decode()}")
        except urllib.error.HTTPError as exc:
            assert exc.code == 409 and "MONITOR_CWD_OUTSIDE_CARD" in exc.read().decode(), cwd


# -- 5. a busy store ------------------------------------------------------------------------------------

HOLD = textwrap.dedent(r"""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1] + "-shm", os.O_RDWR)
    for offset in range(123, 128):  # WAL_READ_LOCK(0..4): 120 + 3 .. 120 + 7
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
""")


# SQLite's engine itself: the WAL read-mark locks of proctor.db-shm
@pytest.mark.sqlite_store
@pytest.mark.xfail(
    strict=True,
    reason="SQLite retries SQLITE_PROTOCOL (a held WAL read mark) for about 10 s itself, past the busy timeout: the answer is a 503 STORE_BUSY, after 10 s rather than 5; a known limit, in the note",
)
def test_the_api_answers_while_a_process_holds_the_store(served, tmp_path):  # noqa: F811
    """Attack: the agent holds the store against readers too, not only writers (BEGIN
    IMMEDIATE is tested elsewhere): it takes the five WAL read-mark locks of proctor.db-shm
    (fcntl byte locks, the same user's to take). Every route must still answer 200, or 503
    STORE_BUSY, in about STORE_SECONDS, not hang and not blame the client."""
    from proctor.server.app import STORE_SECONDS

    db = os.path.join(os.path.dirname(os.path.dirname(served.token_path)), "proctor.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, db, "120"],
        stdout=subprocess.PIPE,
        text=True,
        env=_leased_env(served),
        start_new_session=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        results = {}
        for method, path, body in (
            ("GET", "/api/v1/status", None),
            ("GET", "/api/v1/monitors", None),
            (
                "POST",
                "/api/v1/monitors",
                {"job": "card", "command": "true", "interval": "1h", "cwd": served.root, "allow_unsandboxed": True},
            ),
        ):
            started = time.monotonic()
            try:
                status, answer = served.call(method, path, body)
            except (socket.timeout, TimeoutError, urllib.error.URLError) as exc:
                status, answer = None, repr(exc)
            results[method + " " + path] = (status, round(time.monotonic() - started, 1), str(answer)[-100:])
        wrong = {
            key: result
            for key, result in results.items()
            if not (result[0] in (200, 201) or (result[0] == 503 and "STORE_BUSY" in result[2]))
            or result[1] >= 2 * STORE_SECONDS
        }
        assert not wrong, wrong
    finally:
        holder.kill()
        holder.wait(10)
    assert served.call("GET", "/api/v1/monitors")[0] == 200, "and answers again once the store is free"
