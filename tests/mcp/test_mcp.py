"""The MCP door through the official SDK's own client: `proctor mcp` over stdio, started as a
host starts it (a real process, in a checkout, with an environment), and the server's /mcp
over streamable HTTP behind the token or a job's secret. Every result is compared with what
the CLI or the store says; every refusal is asserted by its PRC code."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from proctor import api
from proctor.mcp_tools import TOOL_NAMES
from tests.support import git
from tests.guard.guard_lease import job_row
from tests.support import REPO_ROOT

CONFIG = '[targets.test]\ncommand = "grep -q ok src/a.py"\n'


def stdio(cwd: str, env: dict | None = None) -> Client:
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(env or {})
    return Client(
        StdioServerParameters(command=sys.executable, args=["-m", "proctor", "mcp"], cwd=cwd, env=environ),
        read_timeout_seconds=120,
    )


def calls(client: Client, *steps: tuple[str, dict]) -> list:
    """Each (tool, arguments) called in order on one connection; the CallToolResults."""

    async def go():
        out = []
        async with client as connected:
            for name, args in steps:
                out.append(await connected.call_tool(name, args))
        return out

    return asyncio.run(go())


def ok(result) -> dict:
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == json.loads(json.dumps(result.structured_content)), (
        "the text a model reads is the structured result"
    )
    return result.structured_content


def refused(result, code: str) -> str:
    assert result.is_error, f"expected {code}, got {result.structured_content}"
    error = result.structured_content
    assert error["error"]["code"] == code, error
    assert result.content[0].text.startswith(f"{code}: "), result.content[0].text
    return result.content[0].text


def cli(cwd: str, *argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "proctor", *argv], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def world(tmp_path, monkeypatch, new_repo):
    root = new_repo("main", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    for name in ("a.py", "b.py"):
        with open(os.path.join(root, "src", name), "w") as handle:
            handle.write("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "src")
    monkeypatch.chdir(root)
    return os.path.realpath(root)


def test_the_tools_a_model_reads(world):
    async def go():
        async with stdio(world) as client:
            return (await client.list_tools()).tools

    tools = asyncio.run(go())
    assert [t.name for t in tools] == list(TOOL_NAMES)
    for tool in tools:
        assert len(tool.description) > 60, tool.name
        assert tool.input_schema["type"] == "object", tool.name
    by_name = {t.name: t for t in tools}
    assert by_name["vcs_checkpoint"].input_schema["properties"] == {}
    assert {"id", "write_paths", "check", "parent", "enter"} <= set(by_name["job_put"].input_schema["properties"])
    assert "PRC3042" in by_name["job_put"].description, "what it refuses is in the description"


def test_checkpoint_is_the_clis_record_and_takes_no_parameters(world):
    with open(os.path.join(world, "src", "a.py"), "a") as handle:
        handle.write("y = 2\n")  # dirty: a patch digest to compare too
    taken, with_path = calls(stdio(world), ("vcs_checkpoint", {}), ("vcs_checkpoint", {"path": "src"}))
    assert ok(taken) == json.loads(cli(world, "vcs", "checkpoint", "-o", "json").stdout)
    assert ok(taken)["dirty"] is True and ok(taken)["revision"] == git(world, "rev-parse", "HEAD").strip()
    refused(with_path, "PRC3055")


def test_fork_refusals_arrive_with_their_codes(world):
    results = calls(
        stdio(world),
        ("job_put", {"id": "w1", "criteria": "a", "write_paths": ["src/a.py"], "check": "test"}),
        ("job_put", {"id": "w2", "write_paths": ["src/b.py"], "check": "nosuch"}),
        ("job_put", {"id": "bad id!", "write_paths": ["src/b.py"], "check": "test"}),
        ("job_put", {"id": "w3", "write_paths": ["src/b.py"], "check": "test", "colour": "red"}),
        ("job_put", {"id": "w4", "write_paths": ["src"], "check": "test"}),
        ("job_put", {"id": "w5", "write_paths": ["../outside.py"], "check": "test"}),
        ("job_put", {"id": "w6", "read_only": True, "write_paths": ["src/b.py"]}),
        ("job_describe", {"id": "nosuch"}),
        ("job_exec", {"id": "nosuch"}),
        ("job_wait", {"id": "w1"}),
        ("job_describe", {"id": "w1", "verbose": True}),
        ("no_such_tool", {}),
    )
    row = ok(results[0])["job"]
    assert row["id"] == "w1" and row["state"] == "declared" and "nonce_sha256" not in row
    assert job_row(world, "w1")["write_paths"] == ["src/a.py"], "the store holds what the tool said"
    refused(results[1], "PRC3037")
    refused(results[2], "PRC3050")
    refused(results[3], "PRC3044")
    refused(results[4], "PRC3018")
    refused(results[5], "PRC3041")
    refused(results[6], "PRC3046")
    refused(results[7], "PRC3045")
    refused(results[8], "PRC3045")
    refused(results[9], "PRC3054")
    assert "takes id" in refused(results[10], "PRC3044")
    assert results[11].is_error and "no tool 'no_such_tool'" in results[11].content[0].text


def test_describe_and_list_are_the_clis(world):
    api.fork({"id": "w1", "write_paths": ["src/a.py"], "check": "test"}, cwd=world)
    api.fork({"id": "w2", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=world)
    described, listed = calls(stdio(world), ("job_describe", {"id": "w1"}), ("jobs_list", {}))
    assert ok(described)["terms"] == cli(world, "describe", "job", "w1").stdout
    listing = ok(listed)
    assert [j["id"] for j in listing["jobs"]] == ["w1", "w2"]
    assert listing["overlaps"] == json.loads(cli(world, "ls", "jobs", "-o", "json").stdout)["overlaps"]
    assert listing["overlaps"], "two live jobs on one file are an overlap"
    assert all("nonce_sha256" not in j for j in listing["jobs"])


def test_a_whole_job_over_stdio_holder_and_orchestrator(world, tmp_path):
    """The orchestrator declares and hands out over MCP; the holder's own `proctor mcp` (its
    host started it in the worktree with BAGGAGE and PROCTOR_NONCE) forks a child, is refused
    what is not its own, files a result citing its run; the orchestrator waits: pass."""
    holder = str(tmp_path / "holder")
    put, taken = calls(
        stdio(world),
        ("job_put", {"id": "feat", "criteria": "ok", "write_paths": ["src/a.py", "src/c.py"], "check": "test"}),
        ("job_exec", {"id": "feat", "worktree": holder}),
    )
    ok(put)
    taken = ok(taken)
    environment = taken["environment"]
    assert environment["BAGGAGE"] == "proctor.lease=feat" and environment["PROCTOR_NONCE"]
    assert os.path.realpath(taken["job"]["checkout_root"]) == os.path.realpath(holder)
    assert job_row(world, "feat")["state"] == "running"
    with open(os.path.join(holder, "src", "a.py"), "w") as handle:
        handle.write("ok = 1\n")
    made = api.run_target("test", cwd=holder, lease="feat", warn=lambda _line: None)
    assert made["exit_code"] == 0
    result = {
        "schema_version": 2,
        "changed_paths": ["src/a.py"],
        "descendants": ["feat/kid"],
        "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
    }
    steps = calls(
        stdio(holder, environment),
        ("job_put", {"id": "feat", "write_paths": ["src/a.py", "src/b.py"]}),
        ("job_put", {"id": "free", "write_paths": ["src/a.py"], "check": "test"}),
        ("job_put", {"id": "feat/kid", "parent": "feat", "write_paths": ["src/b.py"], "check": "test"}),
        ("job_put", {"id": "feat/kid", "parent": "feat", "write_paths": ["src/c.py"], "check": "test"}),
        ("job_put", {"id": "feat", "write_paths": ["src/a.py"]}),
        ("job_wait", {"id": "feat"}),
        ("job_exit", {"id": "feat/kid"}),
        ("job_exit", {"id": "feat", "result": result}),
    )
    assert "widens your write paths" in refused(steps[0], "PRC3042")
    refused(steps[1], "PRC3042")
    refused(steps[2], "PRC3043")
    assert ok(steps[3])["job"]["parent"] == "feat"
    shrunk = ok(steps[4])["job"]
    assert shrunk["write_paths"] == ["src/a.py"]
    assert [r["path"] for r in shrunk["releases"]] == ["src/c.py"] and shrunk["releases"][0]["digest"] == "absent"
    assert "may wait only on jobs forked beneath its own" in refused(steps[5], "PRC3042")
    assert ok(steps[6])["job"]["state"] == "no_return", "a holder ends a job it forked"
    assert ok(steps[7])["job"]["state"] == "exited"
    assert job_row(world, "feat")["state"] == "exited"
    [waited] = calls(stdio(world), ("job_wait", {"id": "feat"}))
    verdict = ok(waited)
    assert verdict["failures"] == [], verdict["failures"]
    assert verdict["state"] == "pass" and verdict["passed"] and verdict["graded_now"]
    assert job_row(world, "feat")["state"] == "pass"
    assert cli(world, "job", "wait", "feat").returncode == 0, "the CLI reads the same verdict"


def test_a_holders_wait_on_its_own_job_is_refused(world, tmp_path):
    holder = str(tmp_path / "holder")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=world)
    taken = api.exec_job("feat", cwd=world, worktree=holder, warn=lambda _line: None)
    with open(os.path.join(holder, "src", "a.py"), "w") as handle:
        handle.write("ok = 1\n")
    made = api.run_target("test", cwd=holder, lease="feat", warn=lambda _line: None)
    api.exit_job(
        "feat",
        {
            "schema_version": 2,
            "changed_paths": ["src/a.py"],
            "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
        },
        cwd=holder,
    )
    env = {"BAGGAGE": "proctor.lease=feat", "PROCTOR_NONCE": taken["nonce"]}
    [waited] = calls(stdio(holder, env), ("job_wait", {"id": "feat"}))
    assert "verifying feat is the forking session's" in refused(waited, "PRC3042")
    assert job_row(world, "feat")["state"] == "exited", "no verdict was recorded"


def test_a_checkout_bound_to_a_job_acts_under_it_as_the_cli_does(world):
    """No BAGGAGE: the checkout's record (job exec run here) names the lease, as for the CLI."""
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=world)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=world)
    api.exec_job("feat", cwd=world)
    [ended] = calls(stdio(world), ("job_exit", {"id": "other"}))
    refused(ended, "PRC3042")
    assert job_row(world, "other")["state"] == "declared"
    from_cli = cli(world, "job", "exit", "other")
    assert from_cli.returncode == 1 and "PRC3042" in from_cli.stderr


# -- monitors: the server runs them; the tools reach it with the job's secret ---------------------


@pytest.fixture
def served(world, tmp_path):
    api.fork({"id": "card", "write_paths": ["src/a.py"], "check": "test"}, cwd=world)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=world)
    holder = str(tmp_path / "holder")
    taken = api.exec_job("card", cwd=world, worktree=holder, warn=lambda _line: None)
    assert cli(world, "server", "start").returncode == 0
    status = json.loads(cli(world, "server", "status", "-o", "json").stdout)
    with open(status["token_path"]) as handle:
        token = handle.read().strip()
    yield {
        "root": world,
        "holder": holder,
        "nonce": taken["nonce"],
        "token": token,
        "url": status["mcp"],
        "port": int(status["console"].rsplit(":", 1)[1].strip("/")),
    }
    cli(world, "server", "stop")


def test_monitor_tools_over_stdio_with_the_jobs_secret(served):
    env = {"BAGGAGE": "proctor.lease=card", "PROCTOR_NONCE": served["nonce"]}
    added, listed, other, events, removed, gone = calls(
        stdio(served["holder"], env),
        ("monitor_add", {"command": "echo tick", "interval": "10s", "allow_unsandboxed": True}),
        ("monitor_list", {}),
        ("monitor_add", {"command": "true", "interval": "10s", "job": "other", "allow_unsandboxed": True}),
        ("monitor_events", {"limit": 10}),
        ("monitor_remove", {"id": 1}),
        ("monitor_list", {}),
    )
    monitor = ok(added)
    assert monitor["job"] == "card" and monitor["created_by"] == "job:card"
    assert [m["id"] for m in ok(listed)["monitors"]] == [monitor["id"]]
    assert ok(other)["job"] == "card", "the secret scopes the call to its own job, whatever it names"
    assert set(ok(events)) == {"events"}
    assert ok(removed)["id"] == 1
    assert [m["id"] for m in ok(gone)["monitors"]] == [ok(other)["id"]]


def test_monitor_tools_without_the_secret_are_refused_to_a_leased_caller(served):
    [added] = calls(
        stdio(served["holder"], {"BAGGAGE": "proctor.lease=card"}),
        ("monitor_add", {"command": "true", "interval": "10s", "allow_unsandboxed": True}),
    )
    assert "PROCTOR_NONCE" in refused(added, "PRC3042")
    assert ok(calls(stdio(served["root"]), ("monitor_list", {}))[0])["monitors"] == []


def test_monitor_tools_say_when_the_server_is_not_running(world):
    [listed] = calls(stdio(world), ("monitor_list", {}))
    assert listed.is_error and "proctor server start" in listed.content[0].text


# -- the server's /mcp ---------------------------------------------------------------------------


def http(url: str, authorization: str, *steps: tuple[str, dict], headers: dict | None = None) -> list:
    async def go():
        async with httpx2.AsyncClient(
            headers={"Authorization": authorization, **(headers or {})}, timeout=60
        ) as client:
            async with Client(streamable_http_client(url, http_client=client)) as connected:
                out = [len((await connected.list_tools()).tools)]
                for name, args in steps:
                    out.append(await connected.call_tool(name, args))
                return out

    return asyncio.run(go())


def test_http_with_the_token_acts_as_the_orchestrator(served):
    count, taken, put, bad, described = http(
        served["url"],
        f"Bearer {served['token']}",
        ("vcs_checkpoint", {}),
        ("job_put", {"id": "w9", "write_paths": ["src/c.py"], "check": "test"}),
        ("job_put", {"id": "w10", "write_paths": ["src/c.py"], "check": "nosuch"}),
        ("job_describe", {"id": "w9"}),
    )
    assert count == len(TOOL_NAMES)
    assert ok(taken)["revision"] == git(served["root"], "rev-parse", "HEAD").strip()
    assert ok(put)["job"]["actor"].startswith("user:")
    refused(bad, "PRC3037")
    assert "src/c.py" in ok(described)["terms"]


def test_http_with_a_jobs_secret_is_that_jobs_holder(served):
    _, widened, child, wait, added, listed, removed = http(
        served["url"],
        f"Nonce {served['nonce']}",
        ("job_put", {"id": "card", "write_paths": ["src/a.py", "src/b.py"]}),
        ("job_put", {"id": "card/kid", "parent": "card", "write_paths": ["src/a.py"], "check": "test"}),
        ("job_wait", {"id": "card"}),
        (
            "monitor_add",
            {"command": "true", "interval": "10s", "job": "other", "allow_unsandboxed": True, "cwd": served["holder"]},
        ),
        ("monitor_list", {"job": "other"}),
        ("monitor_remove", {"id": 99}),
    )
    assert "you called with its secret" in refused(widened, "PRC3042")
    assert job_row(served["root"], "card")["write_paths"] == ["src/a.py"]
    assert ok(child)["job"]["actor"] == "job:card"
    refused(wait, "PRC3042")
    monitor = ok(added)
    assert monitor["job"] == "card" and monitor["created_by"] == "job:card"
    assert [m["job"] for m in ok(listed)["monitors"]] == ["card"], "scoped to its own job"
    assert removed.is_error


def raw(port: int, headers: dict, body: dict | None = None) -> tuple[int, dict]:
    import urllib.error
    import urllib.request

    data = json.dumps(body or {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=data,
        method="POST",
        headers={
            "Host": f"127.0.0.1:{port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_http_refuses_without_credentials_from_elsewhere_and_to_a_leased_process(served):
    port = served["port"]
    assert raw(port, {})[0] == 401
    assert raw(port, {"Authorization": "Bearer wrong"})[0] == 401
    assert raw(port, {"Authorization": "Nonce wrong"})[0] == 401
    assert raw(port, {"Authorization": f"Bearer {served['token']}", "Host": "evil.example:80"})[0] == 421
    assert raw(port, {"Authorization": f"Bearer {served['token']}", "Origin": "http://evil.example"})[0] == 403
    # the token from a process that works a job: the server sees whose process calls
    here = REPO_ROOT
    script = (
        f"import json, sys; sys.path.insert(0, {here!r}); from tests.mcp.test_mcp import raw; "
        f"print(json.dumps(raw({port}, {{'Authorization': 'Bearer {served['token']}'}})))"
    )
    environ = {**os.environ, "BAGGAGE": "proctor.lease=card"}
    proc = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=60)
    status, body = json.loads(proc.stdout)
    assert status == 403 and body["error"]["code"] == "SERVER_LEASED_CALLER", body


def test_server_status_and_doctor_name_the_endpoint(served):
    status = cli(served["root"], "server", "status")
    assert f"mcp:     {served['url']}" in status.stdout
    doctor = cli(served["root"], "doctor")
    assert f"mcp endpoint: {served['url']} answers ({len(TOOL_NAMES)} tools)" in doctor.stdout, doctor.stdout
    assert f"ok   mcp: proctor mcp serves {len(TOOL_NAMES)} tools" in doctor.stdout


def test_http_job_exec_takes_a_job_only_in_a_new_worktree(served, tmp_path):
    """Over HTTP "this checkout" would be the server's, the person's own: job_exec there is refused
    rather than binding every caller in it to the job; with worktree it takes the job there."""
    api.fork({"id": "w8", "write_paths": ["src/b.py"], "check": "test"}, cwd=served["root"])
    place = str(tmp_path / "w8")
    _, here, there = http(
        served["url"],
        f"Bearer {served['token']}",
        ("job_exec", {"id": "w8"}),
        ("job_exec", {"id": "w8", "worktree": place}),
    )
    assert "pass worktree" in refused(here, "PRC3044")
    taken = ok(there)
    assert os.path.realpath(taken["job"]["checkout_root"]) == os.path.realpath(place)
    assert taken["environment"]["PROCTOR_NONCE"]
    from proctor.jobs.lease import resolve
    from proctor.workspace import Workspace

    with Workspace(served["root"]) as ws, ws.store.read() as conn:
        assert resolve(conn, ws.root, None, {}).lease is None, "the server's checkout stays unbound"


def test_a_whole_job_over_http(served, tmp_path):
    """The person hands a job out over /mcp with the token; its holder works it with the secret
    job_exec returned (in the worktree it was taken in), files the result over /mcp, and the
    person's job_wait grades it: pass."""
    token = f"Bearer {served['token']}"
    place = str(tmp_path / "w7")
    _, ended, put, taken = http(
        served["url"],
        token,
        ("job_exit", {"id": "card"}),
        ("job_put", {"id": "w7", "criteria": "ok", "write_paths": ["src/a.py"], "check": "test"}),
        ("job_exec", {"id": "w7", "worktree": place}),
    )
    assert ok(ended)["job"]["state"] == "no_return", "the person ends card, which held src/a.py"
    ok(put)
    secret = ok(taken)["environment"]["PROCTOR_NONCE"]
    with open(os.path.join(place, "src", "a.py"), "w") as handle:
        handle.write("ok = 1\n")
    made = api.run_target("test", cwd=place, lease="w7", warn=lambda _line: None)
    result = {
        "schema_version": 2,
        "changed_paths": ["src/a.py"],
        "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
    }
    _, checkpoint, early, filed = http(
        served["url"],
        f"Nonce {secret}",
        ("vcs_checkpoint", {}),
        ("job_wait", {"id": "w7"}),
        ("job_exit", {"id": "w7", "result": result}),
    )
    assert ok(checkpoint)["dirty"] is True, "a secret's caller reads its own job's checkout, not the person's"
    refused(early, "PRC3042")
    assert ok(filed)["job"]["state"] == "exited"
    _, waited, again = http(served["url"], token, ("job_wait", {"id": "w7"}), ("job_wait", {"id": "w7"}))
    verdict = ok(waited)
    assert verdict["failures"] == [] and verdict["state"] == "pass" and verdict["graded_now"], verdict
    assert ok(again)["graded_now"] is False and ok(again)["state"] == "pass", "recorded once; read back after"
    assert job_row(served["root"], "w7")["state"] == "pass"


@pytest.mark.sqlite_store
def test_proctor_mcp_killed_mid_call_leaves_nothing_half_written(world):
    """`proctor mcp` SIGKILLed while a job_put waits on a store another process holds: nothing of
    the call is stored, the store is usable at once, and the next `proctor mcp` serves."""
    import signal
    import sqlite3
    import time

    from tests.guard.guard_lease import state_dir

    api.fork({"id": "first", "write_paths": ["src/b.py"], "check": "test"}, cwd=world)  # the store exists
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "mcp"],
        cwd=world,
        env=environ,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    db = sqlite3.connect(os.path.join(state_dir(world), "proctor.db"), isolation_level=None)
    try:

        def send(message: dict) -> None:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()

        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
        )
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        db.execute("BEGIN IMMEDIATE")
        send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "job_put",
                    "arguments": {"id": "killed", "write_paths": ["src/a.py"], "check": "test"},
                },
            }
        )
        time.sleep(2)  # the call is in its wait for the store
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        db.execute("ROLLBACK") if db.in_transaction else None
        db.close()
        if proc.poll() is None:
            proc.kill()
    assert [row["id"] for row in api.ls_jobs(world, warn=lambda _line: None)["jobs"]] == ["first"]
    [put] = calls(stdio(world), ("job_put", {"id": "after", "write_paths": ["src/a.py"], "check": "test"}))
    assert ok(put)["job"]["id"] == "after"
