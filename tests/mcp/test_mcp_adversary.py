"""An adversarial review of the MCP door (proctor mcp over stdio, the server's /mcp over HTTP,
and the guard's judgement of mcp__proctor__<tool> calls).

Each test is one attack and asserts the SAFE behaviour: a leased agent (BAGGAGE, a checkout
bound by `proctor job exec`, or its job's secret) gets through the MCP door no more than the
CLI or the guard would give it, and a page or another local process gets nothing. Ten of
these attacks worked when the file was written (uncapped GET streams, calls waiting past the
API's store bound and starving its threads, a holder's fork declared in the person's checkout,
the store alone letting a child widen its reads or a running child be re-declared, a take
through MCP not binding the session, the guard blind to a renamed server or to a child's
state); each is closed and its test passes. The one marked xfail(strict=True) is the known
same-user limit (tests/server/test_server_adversary.py).

The world (tests/mcp/test_mcp.py's `served`): a repository `main` with src/a.py and src/b.py; job
`card` (src/a.py) taken in the worktree `holder`, its secret in hand; job `other` (src/b.py)
declared; a server running in `main`. The guard's world (tests/guard/guard_lease.py's `ws`): the
session holds w1 (plan/w1/**, w1/sub beneath it), `other` holds src/**.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from proctor import api
from proctor.hook import run as hook_run
from tests.guard.guard_lease import denied, job_row, said, take_here, ws  # noqa: F401 (fixtures)
from tests.mcp.test_mcp import calls, cli, http, ok, refused, served, world  # noqa: F401 (fixtures)
from tests.support import REPO_ROOT

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="leases are read from /proc")

HERE = REPO_ROOT


# -- tools --------------------------------------------------------------------------------------


def _bare_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    env.update(extra)
    return env


def post(port: int, body, headers: dict | None = None, method: str = "POST", timeout: float = 30) -> tuple:
    """One request to /mcp by hand: (status, the answer's bytes), or ("error", what happened)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=data,
        method=method,
        headers={
            "Host": f"127.0.0.1:{port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except Exception as exc:  # the connection itself: reset, closed early
        return "error", repr(exc).encode()


def tool_call(name: str, arguments, rpc_id: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def answered(status, data: bytes) -> dict:
    assert status == 200, (status, data[:400])
    return json.loads(data)


def nonce(served) -> dict:  # noqa: F811
    return {"Authorization": f"Nonce {served['nonce']}"}


def token(served) -> dict:  # noqa: F811
    return {"Authorization": f"Bearer {served['token']}"}


def still_answers(served) -> None:  # noqa: F811
    status, data = post(served["port"], tool_call("jobs_list", {}), token(served))
    assert status == 200 and not answered(status, data)["result"].get("isError"), data[:300]


def stdio_client(cwd: str, command: list[str], env: dict):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    return Client(
        StdioServerParameters(command=command[0], args=command[1:], cwd=cwd, env=env), read_timeout_seconds=120
    )


run_calls = calls  # each (tool, arguments) in order on one connection


def exited(served) -> None:  # noqa: F811
    """card files a (thin) result from its worktree: exited, its secret still good (exited is live)."""
    api.exit_job(
        "card",
        {"schema_version": 2, "changed_paths": [], "validation": []},
        cwd=served["holder"],
        lease="card",
        warn=lambda _line: None,
    )
    assert job_row(served["root"], "card")["state"] == "exited"


# == 1. the HTTP transport: methods, bodies, headers ==============================================


def test_a_get_on_mcp_holds_no_stream_open_past_the_servers_cap(served):  # noqa: F811
    """Attack: the event streams are capped at MAX_STREAMS (a job's secret exhausting them is
    a test of its own on /api/v1/stream). On /mcp a GET opens the SDK's standalone SSE stream,
    in stateless mode a new one per request, never written to and never closed: a job's secret
    (or the token) opens as many as it likes, each a socket and a task in the server."""
    from proctor.server.app import MAX_STREAMS

    port = served["port"]
    request = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Nonce {served['nonce']}\r\n"
        f"Accept: text/event-stream\r\n\r\n"
    ).encode()
    sockets = []
    try:
        for _ in range(MAX_STREAMS + 8):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(request)
            sockets.append(sock)
        time.sleep(3)
        held = 0
        for sock in sockets:
            sock.settimeout(0.5)
            try:
                data = b""
                while True:
                    piece = sock.recv(65536)
                    if not piece:
                        break  # the server closed it: not held
                    data += piece
                    if data.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in data:
                        held += 1  # an open event stream
                        break
                    if not data.startswith(b"HTTP/1.1 200") and b"\r\n\r\n" in data:
                        break  # refused (405, 503, ...)
            except socket.timeout:
                held += data.startswith(b"HTTP/1.1 200")
        assert held <= MAX_STREAMS, f"{held} GET streams on /mcp held open (cap {MAX_STREAMS})"
    finally:
        for sock in sockets:
            sock.close()
    still_answers(served)


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
def test_other_methods_without_credentials_are_refused(served, method):  # noqa: F811
    status, _ = post(
        served["port"], None if method in ("GET", "DELETE") else tool_call("jobs_list", {}), method=method, timeout=10
    )
    assert status == 401, status


def test_a_delete_answers_and_ends_no_one_elses_session(served):  # noqa: F811
    status, _ = post(served["port"], None, nonce(served), method="DELETE", timeout=10)
    assert status in (400, 404, 405), status
    still_answers(served)


def test_a_batch_body_is_refused_not_run(served):  # noqa: F811
    """Attack: a JSON-RPC batch, one call of which widens card's paths; none is run."""
    batch = [
        tool_call("jobs_list", {}, 1),
        tool_call("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]}, 2),
    ]
    status, _ = post(served["port"], batch, nonce(served))
    assert status == 400, status
    assert job_row(served["root"], "card")["write_paths"] == ["src/a.py"]
    still_answers(served)


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"Content-Type": "text/plain"}, 400),  # a form a page may post without a preflight
        ({"Content-Type": "application/x-www-form-urlencoded"}, 400),
        ({"Origin": "null"}, 403),  # a sandboxed iframe, a file:// page
        ({"Origin": "http://127.0.0.1:1"}, 403),  # another port on loopback is another origin
        ({"Origin": "http://evil.example"}, 403),
        ({"Host": "evil.example"}, 421),  # DNS rebinding: the page's own name
        ({"Host": "127.0.0.1"}, 421),  # no port
        ({"Host": "LOCALHOST:{port}"}, 421),
    ],
)
def test_cross_site_and_rebinding_requests_are_refused(served, headers, expected):  # noqa: F811
    headers = {k: v.format(port=served["port"]) for k, v in headers.items()}
    status, _ = post(
        served["port"],
        tool_call("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]}),
        {**token(served), **headers},
    )
    assert status == expected, status
    assert job_row(served["root"], "card")["write_paths"] == ["src/a.py"]


@pytest.mark.parametrize(
    "authorization",
    [
        "nonce {nonce}",
        "NONCE {nonce}",
        "Nonce{nonce}",
        "Bearer {nonce}",
        "Nonce {token}",
        "bearer {token}",
        "Basic {token}",
        "Nonce ",
        "Bearer ",
        "Nonce {nonce}x",
        "Nonce {nonce}\u00e9",
    ],
)
def test_spellings_of_the_credentials_are_not_credentials(served, authorization):  # noqa: F811
    header = authorization.format(nonce=served["nonce"], token=served["token"])
    status, _ = post(
        served["port"], tool_call("jobs_list", {}), {"Authorization": header.encode("utf-8").decode("latin-1")}
    )
    assert status == 401, (header, status)


def test_the_console_cookie_is_no_credential_on_mcp(served):  # noqa: F811
    """Attack: a page's request carries the browser's cookies, never an Authorization header:
    /mcp must not take the console's session."""
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    port = served["port"]
    login = urllib.request.Request(
        f"http://127.0.0.1:{port}/login",
        data=f"token={served['token']}".encode(),
        method="POST",
        headers={"Host": f"127.0.0.1:{port}", "Content-Type": "application/x-www-form-urlencoded"},
    )
    opener.open(login, timeout=30).read()
    cookie = "; ".join(f"{c.name}={c.value}" for c in jar)
    assert cookie, "the login set the console's cookie"
    status, _ = post(
        port, tool_call("job_put", {"id": "w8", "write_paths": ["src/c.py"], "check": "test"}), {"Cookie": cookie}
    )
    assert status == 401, status


def test_an_oversize_body_is_refused_and_the_server_answers_on(served):  # noqa: F811
    status, _ = post(served["port"], b'{"a": "' + b"x" * (6 << 20) + b'"}', nonce(served))
    assert status in (413, "error"), status
    still_answers(served)


@pytest.mark.parametrize("depth", [900, 5000, 200000])
def test_arguments_nested_past_the_parser_are_refused_and_the_server_answers_on(served, depth):  # noqa: F811
    nested = "[" * depth + "]" * depth
    body = (
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job_put","arguments":'
        '{"id":"card/x","parent":"card","goals":' + nested + "}}}"
    ).encode()
    status, data = post(served["port"], body, nonce(served))
    assert status in (200, 400, 413), status
    if status == 200:
        assert answered(status, data)["result"]["isError"]
    assert not _exists(served["root"], "card/x")
    still_answers(served)


def _exists(root: str, job_id: str) -> bool:
    try:
        job_row(root, job_id)
        return True
    except AssertionError:
        return False


def test_the_modern_protocol_path_keeps_the_callers_identity(served):  # noqa: F811
    """Attack: an MCP-Protocol-Version the legacy transport does not handle sends the request
    down the SDK's other (per-request envelope) path; the caller is still card's holder there."""
    version = "2026-07-28"
    body = tool_call("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]})
    body["params"]["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    status, data = post(
        served["port"],
        body,
        {**nonce(served), "MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": "job_put"},
    )
    if status == 200:
        result = json.loads(data).get("result") or {}
        assert result.get("isError"), data[:400]
    assert job_row(served["root"], "card")["write_paths"] == ["src/a.py"]
    status, _ = post(
        served["port"], body, {"MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": "job_put"}
    )
    assert status == 401, status
    still_answers(served)


@pytest.mark.parametrize(
    "name, arguments",
    [
        ("vcs_checkpoint", '{"\\ud800": 1}'),
        ("job_exit", '{"id": "other", "\\udfff": 1}'),
        ("job_describe", '{"id": "\\ud800"}'),
        ("job_put", '{"id": "card/x", "parent": "card", "criteria": "\\ud800"}'),
    ],
)
def test_lone_surrogates_on_the_modern_path_get_an_answer(served, name, arguments):  # noqa: F811
    """Attack: the per-request-envelope path decodes the body with json.loads, which lets a
    lone surrogate through (the legacy path's parser refuses it); a refusal that repeats what
    was sent must still be an answer, not a failed response."""
    version = "2026-07-28"
    meta = (
        '{"io.modelcontextprotocol/protocolVersion": "%s", "io.modelcontextprotocol/clientCapabilities": {}}' % version
    )
    body = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "%s", "arguments": %s, '
        '"_meta": %s}}' % (name, arguments, meta)
    ).encode()
    status, data = post(
        served["port"],
        body,
        {**nonce(served), "MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": name},
        timeout=20,
    )
    assert status in (200, 400), (status, data[:300])
    if status == 200:
        assert json.loads(data)["result"]["isError"], data[:300]
    assert job_row(served["root"], "other")["state"] == "declared"
    still_answers(served)


def test_a_listen_stream_on_the_modern_path_is_not_held_open(served):  # noqa: F811
    """Attack: subscriptions/listen answers with a notification stream; the server offers no
    subscriptions, so it must answer and close rather than hold the connection."""
    version = "2026-07-28"
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "subscriptions/listen",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    started = time.monotonic()
    status, _ = post(
        served["port"],
        body,
        {**nonce(served), "MCP-Protocol-Version": version, "Mcp-Method": "subscriptions/listen"},
        timeout=20,
    )
    assert status != "error" and time.monotonic() - started < 15, status
    still_answers(served)


@pytest.mark.sqlite_store
def test_mcp_calls_waiting_on_a_held_store_do_not_freeze_the_api(served):  # noqa: F811
    """Attack: the agent holds the store's write lock (BEGIN IMMEDIATE on the file, the same
    user's to open) and sends many MCP tool calls with its secret. The API's own handlers wait
    at most STORE_SECONDS for the store and answer 503 STORE_BUSY; every MCP call waits the
    library's full busy timeout in a worker thread of the same pool, so enough of them leave
    the person's API (the console's monitors, runs, follow-ups) with no thread to answer on."""
    import sqlite3
    from concurrent.futures import ThreadPoolExecutor

    from proctor.server.app import STORE_SECONDS
    from tests.guard.guard_lease import state_dir

    port = served["port"]
    db = sqlite3.connect(os.path.join(state_dir(served["root"]), "proctor.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    pool = ThreadPoolExecutor(120)
    try:
        for i in range(120):
            pool.submit(
                post,
                port,
                tool_call(
                    "job_put", {"id": f"card/k{i}", "parent": "card", "write_paths": ["src/a.py"], "check": "test"}
                ),
                nonce(served),
                "POST",
                120,
            )
        time.sleep(1.5)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/monitors", headers={"Host": f"127.0.0.1:{port}", **token(served)}
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        waited = time.monotonic() - started
        assert status in (200, 503) and waited < 2 * STORE_SECONDS, f"the API answered {status} after {waited:.1f} s"
    finally:
        db.execute("ROLLBACK")
        db.close()
        pool.shutdown(wait=True)
    still_answers(served)


@pytest.mark.sqlite_store
def test_an_mcp_call_on_a_held_store_answers_busy_as_the_api_does(served):  # noqa: F811
    """The API waits at most STORE_SECONDS for a store another process holds, then answers
    STORE_BUSY (app.py); an MCP tool call over HTTP is a request to the same server."""
    import sqlite3

    from proctor.server.app import STORE_SECONDS
    from tests.guard.guard_lease import state_dir

    db = sqlite3.connect(os.path.join(state_dir(served["root"]), "proctor.db"), isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        status, data = post(
            served["port"],
            tool_call("job_put", {"id": "card/k", "parent": "card", "write_paths": ["src/a.py"], "check": "test"}),
            nonce(served),
            timeout=120,
        )
        waited = time.monotonic() - started
    finally:
        db.execute("ROLLBACK")
        db.close()
    assert waited < STORE_SECONDS + 2, f"answered {status} after {waited:.1f} s: {data[:300]!r}"


# == 2. the token, from a process that works a job ===============================================


def _token_script(served) -> str:  # noqa: F811
    """A process that sends the token to /mcp, ending `other`; it prints (status, body)."""
    body = json.dumps(tool_call("job_exit", {"id": "other"}))
    return (
        f"import json, sys; sys.path.insert(0, {HERE!r}); from tests.mcp.test_mcp import raw; "
        f"print(json.dumps(raw({served['port']}, {{'Authorization': 'Bearer {served['token']}'}}, "
        f"json.loads({body!r}))))"
    )


def _token_from(served, cwd: str, env: dict) -> tuple[int, dict]:  # noqa: F811
    proc = subprocess.run(
        [sys.executable, "-c", _token_script(served)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return tuple(json.loads(proc.stdout))


def test_the_token_from_a_process_in_the_jobs_checkout_is_refused(served):  # noqa: F811
    """Attack: no BAGGAGE, no secret; only the checkout `proctor job exec card` bound."""
    status, body = _token_from(served, served["holder"], _bare_env())
    assert status == 403 and body["error"]["code"] == "SERVER_LEASED_CALLER", body
    assert job_row(served["root"], "other")["state"] == "declared"


def test_the_token_from_a_process_holding_only_the_jobs_secret_is_refused(served, tmp_path):  # noqa: F811
    status, body = _token_from(served, str(tmp_path), _bare_env(PROCTOR_NONCE=served["nonce"]))
    assert status == 403 and body["error"]["code"] == "SERVER_LEASED_CALLER", body
    assert job_row(served["root"], "other")["state"] == "declared"


def test_the_token_from_beneath_a_leased_shell_that_unset_baggage_is_refused(served, tmp_path):  # noqa: F811
    script = _token_script(served)
    proc = subprocess.run(
        ["sh", "-c", f'env -u BAGGAGE -u PROCTOR_NONCE {sys.executable} -c "$S"; exit $?'],
        cwd=str(tmp_path),
        env=_bare_env(BAGGAGE="proctor.lease=card", S=script),
        capture_output=True,
        text=True,
        timeout=60,
    )
    status, body = json.loads(proc.stdout)
    assert status == 403 and body["error"]["code"] == "SERVER_LEASED_CALLER", body
    assert job_row(served["root"], "other")["state"] == "declared"


@pytest.mark.xfail(
    strict=True,
    reason="a known limit (tests/server/test_server_adversary.py SAME_USER): a process that "
    "double-forks out of the leased process tree with its environment cleared is not told apart from "
    "the person; over /mcp the token it reads from its file is the orchestrator's whole power (job_put, "
    "job_exit, job_wait of any job), not only monitors",
)
def test_a_double_forked_escapee_with_the_token_file_gets_no_orchestrator_over_mcp(served, tmp_path):  # noqa: F811
    status_json = json.loads(cli(served["root"], "server", "status", "-o", "json").stdout)
    out = tmp_path / "answer.json"
    script = tmp_path / "call.py"
    script.write_text(
        f"import json, sys\nsys.path.insert(0, {HERE!r})\nfrom tests.mcp.test_mcp import raw\n"
        f"token = open({status_json['token_path']!r}).read().strip()\n"
        f"answer = raw({served['port']}, {{'Authorization': 'Bearer ' + token}}, "
        f"{tool_call('job_exit', {'id': 'other'})!r})\n"
        f"open({str(out) + '.part'!r}, 'w').write(json.dumps(answer))\n"
        f"import os; os.rename({str(out) + '.part'!r}, {str(out)!r})\n"
    )
    subprocess.run(
        ["bash", "-c", f"setsid -f env -i {sys.executable} {script}"],
        cwd=str(tmp_path),
        env=_bare_env(BAGGAGE="proctor.lease=card", PROCTOR_NONCE=served["nonce"]),
        timeout=60,
    )
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    status, body = json.loads(out.read_text())
    assert status == 403 and body["error"]["code"] == "SERVER_LEASED_CALLER", (status, str(body)[:300])
    assert job_row(served["root"], "other")["state"] == "declared"


# == 3. a job's secret over HTTP: card's holder, and no more ======================================


@pytest.mark.parametrize(
    "call, code",
    [
        (("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]}), "PRC3042"),
        (("job_put", {"id": "other", "write_paths": ["src/b.py", "src/a.py"], "check": "test"}), "PRC3042"),
        (("job_put", {"id": "fresh", "write_paths": ["src/c.py"], "check": "test"}), "PRC3042"),
        (("job_put", {"id": "card/kid", "parent": "card", "write_paths": ["src/b.py"], "check": "test"}), "PRC3043"),
        (
            (
                "job_put",
                {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test", "state": "pass"},
            ),
            "PRC3042",
        ),
        (("job_put", {"id": "card", "state": "pass"}), "PRC3042"),
        (("job_put", {"id": "card", "check": None, "write_paths": ["src/a.py"]}), None),
        (("job_put", {"id": "other", "enter": "src/b.py"}), None),
        (("job_put", {"id": "card", "lease": "other"}), "PRC3044"),
        (("job_put", {"id": "card", "orchestrator": True}), "PRC3044"),
        (("job_exec", {"id": "other"}), None),
        (("job_exec", {"id": "other", "worktree": "../elsewhere"}), None),
        (("job_exit", {"id": "other"}), "PRC3042"),
        (("job_exit", {"id": "proctor-server"}), "PRC3042"),
        (("job_wait", {"id": "card"}), "PRC3042"),
        (("job_wait", {"id": "other"}), "PRC3042"),
    ],
)
def test_a_jobs_secret_is_refused_what_the_cli_refuses_its_holder(served, call, code):  # noqa: F811
    before = {j: job_row(served["root"], j) for j in ("card", "other")}
    result = http(served["url"], f"Nonce {served['nonce']}", call)[1]
    assert result.is_error, result.structured_content
    if code:
        assert result.structured_content["error"]["code"] == code, result.structured_content
    for j, row in before.items():
        now = job_row(served["root"], j)
        assert (now["state"], now["write_paths"], now.get("check")) == (
            row["state"],
            row["write_paths"],
            row.get("check"),
        ), j


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": ["other"]},
        {"id": {"$ne": ""}},
        {"id": 7},
        {"id": True},
        {"id": "other", "extra": 1},
        {"id": "card/../other"},
        {"id": "other\n"},
        {"id": "other\u0000"},
        {"id": "./other"},
        {"id": "x" * 100000},
    ],
)
def test_odd_job_ids_reach_no_job(served, arguments):  # noqa: F811
    for name in ("job_exit", "job_wait", "job_exec", "job_describe"):
        result = http(served["url"], f"Nonce {served['nonce']}", (name, arguments))[1]
        assert result.is_error, (name, result.structured_content)
    assert job_row(served["root"], "other")["state"] == "declared"


@pytest.mark.parametrize("arguments", [None, [], "card", 5, [{"id": "other"}]])
def test_arguments_that_are_not_an_object_are_refused(served, arguments):  # noqa: F811
    status, data = post(served["port"], tool_call("job_exit", arguments), nonce(served))
    if status == 200:
        result = json.loads(data).get("result")
        assert result is None or result.get("isError"), data[:400]
    else:
        assert status == 400, status
    assert job_row(served["root"], "other")["state"] == "declared"
    still_answers(served)


@pytest.mark.parametrize("field", ["write_paths", "read_paths", "deny_paths", "depends_on"])
def test_a_huge_record_is_answered_in_bounded_time(served, field):  # noqa: F811
    """Attack: a record as large as the transport takes (4 MiB): its parsing must not hold a
    worker thread for long (the API's handlers share the pool)."""
    values = [f"src/d{i}/f{i}.py" if field != "depends_on" else f"j{i}" for i in range(150000)]
    record = {"id": "card/huge", "parent": "card", "write_paths": ["src/a.py"], "check": "test", field: values}
    body = json.dumps(tool_call("job_put", record)).encode()
    started = time.monotonic()
    status, data = post(served["port"], body, nonce(served), timeout=300)
    waited = time.monotonic() - started
    assert status in (200, 400, 413, "error"), status
    assert waited < 20, f"{field}: answered {status} after {waited:.1f} s"
    still_answers(served)


def test_output_only_fields_in_a_record_change_nothing(served):  # noqa: F811
    """Attack: a child record carrying what the store writes (actor, holder, nonce_sha256,
    checkout_root, declared_in, result, verdict): ignored, never stored as sent."""
    record = {
        "id": "card/kid",
        "parent": "card",
        "write_paths": ["src/a.py"],
        "check": "test",
        "actor": "user:person",
        "holder": "server",
        "nonce_sha256": "0" * 64,
        "checkout_root": "/",
        "declared_in": "/",
        "result": {"schema_version": 2},
        "verdict": {"state": "pass"},
        "archived": "2026-01-01T00:00:00Z",
        "deadline": "2999-01-01T00:00:00Z",
    }
    result = http(served["url"], f"Nonce {served['nonce']}", ("job_put", record))[1]
    row = job_row(served["root"], "card/kid") if not result.is_error else None
    if row is not None:
        assert row["actor"] == "job:card" and row["holder"] != "server" and row.get("nonce_sha256") != "0" * 64
        assert row.get("checkout_root") in (None, "") and row.get("declared_in") != "/"
        assert not row.get("result") and not row.get("verdict") and not row.get("archived")
        assert row["state"] == "declared"


def test_over_http_job_exec_never_binds_the_servers_checkout(served):  # noqa: F811
    """Attack: card's holder files its result (exited is live: its secret still opens the door),
    then takes `other` over HTTP without a worktree: "this checkout" is the server's, the
    person's own, and binding it would put the orchestrator's every command there under `other`."""
    exited(served)
    result = http(served["url"], f"Nonce {served['nonce']}", ("job_exec", {"id": "other"}))[1]
    assert result.is_error, result.structured_content
    from proctor.jobs.lease import resolve
    from proctor.workspace import Workspace

    with Workspace(served["root"]) as ws, ws.store.read() as conn:
        assert resolve(conn, served["root"], environ={}).lease is None, "the person's checkout is bound"
    assert job_row(served["root"], "other")["state"] == "declared"


def test_a_child_forked_over_http_is_declared_where_its_parent_is_worked(served):  # noqa: F811
    """Attack: over HTTP "here" is the server's checkout, the person's. A child card's holder
    forks there is declared in the person's checkout, on its working state: the checkpoint is
    the person's uncommitted work, not the holder's, and taking the child in a worktree copies
    that work in (carry_uncommitted reads declared_in). The same fork from the holder's own
    checkout (CLI, stdio) is declared there; the guard refuses a writing child forked from a
    checkout bound to nobody, which the server's is."""
    secret = os.path.join(served["root"], "person-notes.txt")
    with open(secret, "w") as handle:
        handle.write("the person's uncommitted notes\n")
    result = http(
        served["url"],
        f"Nonce {served['nonce']}",
        ("job_put", {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test"}),
    )[1]
    if result.is_error:
        return  # refused: nothing declared in the person's checkout
    row = job_row(served["root"], "card/kid")
    assert os.path.realpath(row["declared_in"]) == os.path.realpath(served["holder"]), (
        f"card/kid was declared in {row['declared_in']}, checkpoint {row['checkpoint']}"
    )


def test_the_person_uncommitted_work_does_not_reach_a_childs_worktree(served, tmp_path):  # noqa: F811
    """The chain behind the test above: card forks card/kid over HTTP, files its result, and
    (exited: taking is one-way only while in flight) takes its own child in a new worktree over
    HTTP. The worktree must hold the parent's state, never the person's untracked files."""
    with open(os.path.join(served["root"], "person-notes.txt"), "w") as handle:
        handle.write("the person's uncommitted notes\n")
    put = http(
        served["url"],
        f"Nonce {served['nonce']}",
        ("job_put", {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test"}),
    )[1]
    if put.is_error:
        return
    exited(served)
    kid = str(tmp_path / "kid")
    taken = http(served["url"], f"Nonce {served['nonce']}", ("job_exec", {"id": "card/kid", "worktree": kid}))[1]
    if taken.is_error:
        return
    assert not os.path.exists(os.path.join(kid, "person-notes.txt")), (
        "the person's untracked file was copied into the worktree the leased agent took"
    )


@pytest.mark.parametrize(
    "record, why",
    [
        ({"depends_on": ["other"]}, "depends_on reaching past card's own jobs"),
        ({"read_paths": ["**"]}, "read_paths wider than what card may read"),
    ],
)
def test_a_jobs_secret_over_http_is_held_to_the_guards_fork_rules(served, record, why):  # noqa: F811
    """Attack: curl the server's /mcp with the job's secret from a shell: no host reports that
    as mcp__proctor__job_put, so the guard never judges it; the store alone decides. What the
    guard refuses a holder's fork (lease-store: a child's depends_on outside the holder's
    family, read_paths past its read boundary) must not pass this way."""
    full = {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test", **record}
    result = http(served["url"], f"Nonce {served['nonce']}", ("job_put", full))[1]
    assert result.is_error, f"{why} was stored: {job_row(served['root'], 'card/kid')}"


def test_a_jobs_secret_over_http_does_not_rewrite_a_child_being_worked(served, tmp_path):  # noqa: F811
    """Attack: the guard refuses a holder's fork of an id that exists ("does not rewrite
    another job's row"); over HTTP the store lets the parent re-declare its running child, its
    check and criteria changed under the child's own holder."""
    made = http(
        served["url"],
        f"Nonce {served['nonce']}",
        (
            "job_put",
            {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test", "criteria": "all of it"},
        ),
    )[1]
    ok(made)
    api.exec_job("card/kid", cwd=served["root"], worktree=str(tmp_path / "kid"), warn=lambda _line: None)
    again = http(
        served["url"],
        f"Nonce {served['nonce']}",
        (
            "job_put",
            {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test", "criteria": "nothing"},
        ),
    )[1]
    row = job_row(served["root"], "card/kid")
    assert again.is_error and row["criteria"] == "all of it", f"rewritten: criteria={row['criteria']!r}"


# == 4. monitors over the door ====================================================================


@pytest.mark.parametrize("cwd", ["/", "/tmp", "{holder}/../..", "{root}/.git", "{link}", "{other_wt}"])
def test_a_monitor_cwd_outside_the_jobs_places_is_refused(served, tmp_path, cwd):  # noqa: F811
    link = tmp_path / "link"
    link.symlink_to("/tmp")
    other_wt = str(tmp_path / "other-wt")
    api.exec_job("other", cwd=served["root"], worktree=other_wt, warn=lambda _line: None)
    where = cwd.format(holder=served["holder"], root=served["root"], link=str(link), other_wt=other_wt)
    results = http(
        served["url"],
        f"Nonce {served['nonce']}",
        ("monitor_add", {"command": "true", "interval": "10s", "allow_unsandboxed": True, "cwd": where}),
    )
    assert results[1].is_error, results[1].structured_content


@pytest.mark.parametrize(
    "arguments",
    [
        {"id": True},
        {"id": -1},
        {"id": 0},
        {"id": 2**70},
        {"id": "1"},
        {"id": 1.5},
        {"id": "1/../2"},
    ],
)
def test_monitor_remove_with_odd_ids(served, arguments):  # noqa: F811
    result = http(served["url"], f"Nonce {served['nonce']}", ("monitor_remove", arguments))[1]
    assert result.is_error, result.structured_content
    still_answers(served)


def test_a_jobs_secret_reaches_no_other_jobs_monitor(served):  # noqa: F811
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test", "state": "running"}, cwd=served["root"])
    added = ok(
        http(
            served["url"],
            f"Bearer {served['token']}",
            ("monitor_add", {"command": "true", "interval": "1h", "job": "third", "allow_unsandboxed": True}),
        )[1]
    )
    _, listed, events, removed = http(
        served["url"],
        f"Nonce {served['nonce']}",
        ("monitor_list", {"job": "third"}),
        ("monitor_events", {"job": "third", "limit": 5000}),
        ("monitor_remove", {"id": added["id"]}),
    )
    assert all(m["job"] == "card" for m in ok(listed)["monitors"])
    assert all(e["monitor"] != added["id"] for e in ok(events)["events"])
    assert removed.is_error
    listed = ok(http(served["url"], f"Bearer {served['token']}", ("monitor_list", {}))[1])
    assert added["id"] in [m["id"] for m in listed["monitors"]]


# == 5. stdio: proctor mcp started by a leased host ===============================================


def test_stdio_started_with_baggage_removed_outside_the_checkout_still_acts_under_the_lease(served):  # noqa: F811
    """Attack: the host (a shell with BAGGAGE=card) starts `env -u BAGGAGE proctor mcp` in the
    person's checkout, which is bound to nobody: the server process reads its lease from the
    host's environment, as the CLI does."""
    env = _bare_env(BAGGAGE="proctor.lease=card")
    client = stdio_client(
        served["root"], ["sh", "-c", f"env -u BAGGAGE -u PROCTOR_NONCE {sys.executable} -m proctor mcp; exit $?"], env
    )
    widened, fresh, ended = run_calls(
        client,
        ("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]}),
        ("job_put", {"id": "fresh", "write_paths": ["src/c.py"], "check": "test"}),
        ("job_exit", {"id": "other"}),
    )
    refused(widened, "PRC3042")
    refused(fresh, "PRC3042")
    refused(ended, "PRC3042")
    assert job_row(served["root"], "card")["write_paths"] == ["src/a.py"]
    assert job_row(served["root"], "other")["state"] == "declared"


def test_stdio_with_another_jobs_baggage_beneath_a_leased_host_acts_as_the_host(served):  # noqa: F811
    env = _bare_env(BAGGAGE="proctor.lease=card")
    client = stdio_client(
        served["root"], ["sh", "-c", f"BAGGAGE=proctor.lease=other {sys.executable} -m proctor mcp; exit $?"], env
    )
    [ended] = run_calls(client, ("job_exit", {"id": "other"}))
    refused(ended, "PRC3042")
    assert job_row(served["root"], "other")["state"] == "declared"


def test_stdio_in_the_bound_checkout_without_baggage_acts_under_it(served):  # noqa: F811
    sub = os.path.join(served["holder"], "src")
    client = stdio_client(sub, [sys.executable, "-m", "proctor", "mcp"], _bare_env())
    widened, ended = run_calls(
        client, ("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]}), ("job_exit", {"id": "other"})
    )
    refused(widened, "PRC3042")
    refused(ended, "PRC3042")


def test_stdio_outside_any_checkout_does_nothing(served, tmp_path):  # noqa: F811
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    client = stdio_client(
        str(nowhere), [sys.executable, "-m", "proctor", "mcp"], _bare_env(BAGGAGE="proctor.lease=card")
    )
    results = run_calls(client, ("job_exit", {"id": "other"}), ("job_put", {"id": "x", "write_paths": ["a"]}))
    assert all(r.is_error for r in results)
    assert job_row(served["root"], "other")["state"] == "declared"


def test_stdio_monitor_tools_without_the_secret_beneath_a_leased_host_are_refused(served):  # noqa: F811
    """Attack: the host holds card's lease; proctor mcp is started with BAGGAGE and the secret
    removed, in the person's checkout: its monitor tools fall back to the token, a person's."""
    env = _bare_env(BAGGAGE="proctor.lease=card", PROCTOR_NONCE=served["nonce"])
    client = stdio_client(
        served["root"], ["sh", "-c", f"env -u BAGGAGE -u PROCTOR_NONCE {sys.executable} -m proctor mcp; exit $?"], env
    )
    [added] = run_calls(
        client, ("monitor_add", {"command": "true", "interval": "1h", "job": "other", "allow_unsandboxed": True})
    )
    assert added.is_error, added.structured_content


# == 6. the guard: proctor's tools under other names, and records it lets through =================


def _judge(root: str, tool_name: str, args, host: str = "claude", extra: dict | None = None) -> dict:
    environ = _bare_env()
    event = {
        "session_id": "s1",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": args,
        "tool_use_id": "toolu_1",
        **(extra or {}),
    }
    if host == "gemini":
        event["hook_event_name"] = "BeforeTool"
    out, code = hook_run([host, "--lease", "w1"], json.dumps(event).encode(), environ)
    assert code == 0
    return json.loads(out) if out.strip() else {}


WIDENING = [
    ("job_exit", {"id": "other"}),
    ("job_exec", {"id": "other"}),
    ("job_wait", {"id": "w1"}),
    ("job_put", {"id": "w1", "write_paths": ["plan/w1/**", "src/b.py"]}),
    ("monitor_add", {"command": "true", "interval": "10s", "job": "other", "allow_unsandboxed": True}),
]


@pytest.mark.parametrize("tool, args", WIDENING)
def test_the_guard_judges_proctors_tools_under_the_names_it_wires(ws, tool, args):  # noqa: F811
    for name in (f"mcp__proctor__{tool}", f"proctor_{tool}"):
        answer = _judge(ws, name, args)
        assert denied(answer, "lease-store"), (name, said(answer))


@pytest.mark.parametrize("tool, args", WIDENING)
def test_the_guard_judges_proctor_mcp_registered_under_another_name(ws, tool, args):  # noqa: F811
    """Attack: .mcp.json registers `proctor mcp` as `pm` (Claude Code names its tools
    mcp__pm__<tool>). The guard reads the wiring elsewhere (doctor finds a server that starts
    `proctor mcp` under any name); the same calls under `proctor` are denied."""
    with open(os.path.join(ws, ".mcp.json"), "w") as handle:
        json.dump({"mcpServers": {"pm": {"type": "stdio", "command": "proctor", "args": ["mcp"]}}}, handle)
    answer = _judge(ws, f"mcp__pm__{tool}", args)
    assert denied(answer, "lease-store"), said(answer)


def test_the_guard_judges_gemini_mcp_context_of_proctor_under_another_name(ws):  # noqa: F811
    os.makedirs(os.path.join(ws, ".gemini"), exist_ok=True)
    with open(os.path.join(ws, ".gemini", "settings.json"), "w") as handle:
        json.dump({"mcpServers": {"pm": {"command": "proctor", "args": ["mcp"]}}}, handle)
    answer = _judge(
        ws,
        "job_exit",
        {"id": "other"},
        host="gemini",
        extra={"mcp_context": {"server_name": "pm", "tool_name": "job_exit", "command": "proctor"}},
    )
    assert denied(answer, "lease-store"), said(answer)


@pytest.mark.parametrize(
    "args",
    [
        {"id": "w1", "write_paths": "plan/w1/a.py,src/b.py"},  # flags' comma spelling
        {"id": "w1", "write_paths": ["plan/w1/../../src/b.py"]},
        {"id": "w1", "write_paths": ["./plan/w1/a.py", "/etc/passwd"]},
        {"id": "w1", "write_paths": ["plan/w1/**", "plan/**"]},
        {"id": "w1", "write_paths": {"0": "src/**"}},
        {"id": "w1", "write_paths": ["plan/w1/a.py"], "read_only": False, "deny_paths": []},  # holds: falsy extras
        {"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "depends_on": "other"},
        {"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "read_paths": "src/**"},
        {"id": "w1/c", "parent": "w1", "write_paths": [["src/b.py"]]},
        {"id": ["w1"], "parent": "w1", "write_paths": ["src/b.py"]},
        {"id": "w1", "parent": "w1", "write_paths": ["src/b.py"]},
        {"id": "other", "parent": "w1", "write_paths": ["src/b.py"]},
    ],
)
def test_the_guard_refuses_confused_job_put_records(ws, args):  # noqa: F811
    if args.get("read_only") is False:  # the shrink with falsy extras is the holder's own
        take_here(ws)  # (where the store sees the lease: a checkout bound to w1)
    answer = _judge(ws, "mcp__proctor__job_put", args)
    if args.get("read_only") is False:
        assert not denied(answer), said(answer)
        return
    if args.get("write_paths") == [["src/b.py"]]:
        # a nested list: the store refuses it as a bad record; the guard may pass it to the store
        return
    assert denied(answer, "lease-store"), said(answer)


@pytest.mark.parametrize("tool_input", ['{"id": "other"}', ["other"], None, 5])
def test_proctors_tool_with_input_that_is_not_an_object(ws, tool_input):  # noqa: F811
    """Not an object: the server refuses such arguments (PRC3044) before any call, so the guard
    passing them is no hole; asserted here so a change to either side is seen."""
    answer = _judge(ws, "mcp__proctor__job_exit", tool_input)
    assert not denied(answer) or denied(answer, "lease-store")


def test_the_guard_refuses_a_child_record_that_sets_its_state(ws):  # noqa: F811
    answer = _judge(
        ws,
        "mcp__proctor__job_put",
        {"id": "w1/c9", "parent": "w1", "write_paths": ["plan/w1/z.py"], "check": "test", "state": "pass"},
    )
    assert denied(answer, "lease-store"), said(answer)


def _session_call(root: str, tool_name: str, tool_input: dict, session: str = "s7") -> dict:
    """A PreToolUse of an unleased Claude Code session (ids, no --lease, no BAGGAGE)."""
    event = {
        "session_id": session,
        "transcript_path": "/tmp/none.jsonl",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_use_id": "toolu_7",
    }
    out, code = hook_run(["claude"], json.dumps(event).encode(), _bare_env())
    assert code == 0
    return json.loads(out) if out.strip() else {}


@pytest.mark.parametrize("take", ["bash", "mcp"])
def test_a_session_that_takes_a_job_through_mcp_is_bound_to_it_as_through_the_cli(ws, take):  # noqa: F811
    """Attack: `proctor job exec other` in a shell binds the calling session to `other` (the
    guard records it at the call), and from then on the session is judged as other's holder.
    The same take through mcp__proctor__job_exec must bind it too, or the session that took
    the job goes on unjudged: it writes outside other's paths, ends jobs not its own."""
    if take == "bash":
        taken = _session_call(ws, "Bash", {"command": "proctor job exec other"})
    else:
        taken = _session_call(ws, "mcp__proctor__job_exec", {"id": "other"})
    assert not denied(taken), said(taken)
    api.exec_job("other", cwd=ws, warn=lambda _line: None)  # what the command (the stdio server) then does
    ended = _session_call(ws, "mcp__proctor__job_exit", {"id": "w1"})
    assert denied(ended, "lease-store"), said(ended)
    wrote = _session_call(ws, "Write", {"file_path": os.path.join(ws, "plan", "w1", "a.py"), "content": "y\n"})
    assert denied(wrote), f"a write outside other's src/**: {said(wrote)}"
