"""proctor server against a real server on loopback: auth, monitors and every creation rule,
limits, deletion, scope, persistence, follow-ups, and bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.support import git
from proctor import api
from proctor.hook import run as hook_run


def cli(root, *args, env=None, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


class Server:
    def __init__(self, root: str) -> None:
        self.root = root
        info = json.loads(cli(root, "server", "status", "-o", "json").stdout)
        self.port = int(info["console"].rsplit(":", 1)[1].strip("/"))
        self.pid = info["pid"]
        with open(info["token_path"]) as handle:
            self.token = handle.read().strip()
        self.token_path = info["token_path"]

    def call(self, method, path, body=None, token="default", host=None, raw: bytes | None = None):
        headers = {"Host": host or f"127.0.0.1:{self.port}", "Content-Type": "application/json"}
        token = self.token if token == "default" else token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def add(self, job, command, interval="10s", **extra):
        body = {
            "job": job,
            "command": command,
            "interval": interval,
            "cwd": self.root,
            "allow_unsandboxed": True,
            **extra,
        }
        return self.call("POST", "/api/v1/monitors", body)

    def events(self, job=None):
        return self.call("GET", "/api/v1/events?limit=5000" + (f"&job={job}" if job else ""))[1]["events"]

    def runs(self, monitor_id):
        from proctor.paths import find_checkout, repo_state_dir
        from tests.store.store_oracle import connect

        db = connect(repo_state_dir(find_checkout(self.root)))
        rows = db.execute(
            "SELECT started, ended, exit_code, timed_out, truncated, bytes, stderr FROM monitor_runs "
            "WHERE monitor = ? ORDER BY id",
            (monitor_id,),
        ).fetchall()
        db.close()
        return rows


def wait_for(predicate, timeout=30.0, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out waiting")


@pytest.fixture
def served(tmp_path, monkeypatch, new_repo):
    root = new_repo("repo", "[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    api.fork({"id": "card", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    wt = str(tmp_path / "wt")
    git(root, "worktree", "add", "-q", "-b", "wt", wt)
    taken = api.exec_job("card", cwd=wt)
    api.exec_job("other", cwd=str(tmp_path / "wt2")) if False else None
    cli(root, "server", "start")
    server = Server(root)
    server.card_nonce = taken["nonce"]
    server.worktree = wt
    yield server
    cli(root, "server", "stop", check=False)


def test_status_auth_and_host(served):
    status, body = served.call("GET", "/api/v1/status")
    assert status == 200 and body["pid"] == served.pid and body["console"].startswith("http://127.0.0.1:")
    assert served.call("GET", "/api/v1/jobs", token=None)[0] == 401
    assert served.call("GET", "/api/v1/jobs", token="wrong")[0] == 401
    assert served.call("GET", "/api/v1/jobs", host="evil.example:80")[0] == 421
    status, listing = served.call("GET", "/api/v1/jobs")
    ids = {row["id"]: row for row in listing["jobs"]}
    assert ids["card"]["holder"] == "session" and ids["proctor-server"]["holder"] == "server"
    assert ids["card"]["column"] == "Running" and ids["other"]["column"] == "Declared"
    text = cli(served.root, "server", "status").stdout
    assert "console: http://127.0.0.1:" in text and "api:" in text and "older" not in text


def test_creation_rules_and_codes(served):
    assert (
        served.call(
            "POST", "/api/v1/monitors", {"job": "card", "command": "true", "interval": "10s", "cwd": served.root}
        )[1]["error"]["code"]
        == "MONITOR_UNSANDBOXED_ACK_REQUIRED"
    )
    for interval in ("5s", "25h", "soon", "0"):
        assert served.add("card", "true", interval)[1]["error"]["code"] == "MONITOR_INTERVAL_INVALID"
    assert served.add("card", "true", cwd="/tmp")[1]["error"]["code"] == "MONITOR_CWD_OUTSIDE_CARD"
    assert served.add("card", "true", cwd=served.worktree)[0] == 201, "the job's own checkout"
    assert served.add("other", "true")[1]["error"]["code"] == "MONITOR_CARD_INACTIVE"
    for _ in range(7):
        assert served.add("card", "true")[0] == 201
    assert served.add("card", "true")[1]["error"]["code"] == "MONITOR_LIMIT_REACHED"
    cli_missing = cli(served.root, "monitor", "add", "--cmd", "true", "--interval", "10s", "--job", "card", check=False)
    assert cli_missing.returncode == 1 and "MONITOR_UNSANDBOXED_ACK_REQUIRED" in cli_missing.stderr
    listed = json.loads(cli(served.root, "monitor", "list", "-o", "json").stdout)["monitors"]
    assert len(listed) == 8 and listed[0]["description"] == "true"
    long = served.call("DELETE", f"/api/v1/monitors/{listed[0]['id']}")
    assert long[0] == 200
    created = served.add("card", "printf '%s' " + "x" * 100 + " && true   and more")[1]
    assert created["description"].endswith("…") and len(created["description"]) <= 60


def test_runs_at_once_never_overlaps_and_times_out(served):
    _, monitor = served.add("card", "echo start; sleep 1.5; echo end", "10s")
    first = wait_for(lambda: [e for e in served.events("card") if e["line"] == "start"], timeout=10)
    assert first, "run at once on creation"
    runs = wait_for(lambda: (lambda r: r if len(r) >= 2 and r[1][1] else None)(served.runs(monitor["id"])), timeout=30)
    from proctor.timeutil import parse_iso

    gap = parse_iso(runs[1][0]) - parse_iso(runs[0][1])
    assert gap >= 9.5, "the next delay starts when the run ends"
    _, slow = served.add("card", "echo go; sleep 30", "10s")
    timed = wait_for(lambda: (lambda r: r if r and r[0][1] else None)(served.runs(slow["id"])), timeout=30)
    assert timed[0][3] == 1 and timed[0][2] is None
    assert parse_iso(timed[0][1]) - parse_iso(timed[0][0]) < 14, "timed out at the interval (10 s)"


def test_four_at_once(served):
    for n in range(6):
        served.add("card", f"echo m{n}; sleep 2")
    time.sleep(0.5)
    peak = 0
    for _ in range(20):
        peak = max(peak, served.call("GET", "/api/v1/status")[1]["monitors_running"])
        time.sleep(0.1)
    assert peak == 4
    wait_for(lambda: len([e for e in served.events("card") if e["line"].startswith("m")]) == 6, timeout=20)


def test_limits_markers_binary_and_stderr(served):
    served.add("card", "python3 -c \"print('y' * 40000); print('after')\"")
    served.add("card", "python3 -c \"import sys; sys.stdout.write(('z' * 1000 + chr(10)) * 2000)\"")
    served.add("card", "printf 'bin\\000\\377\\376ary\\n'; echo oops >&2")
    served.add("card", "head -c 10000000 /dev/zero | tr '\\0' 'q'; echo; echo tail-line")
    events = wait_for(
        lambda: (
            lambda ev: (
                ev
                if any(e["line"] == "after" for e in ev)
                and any("past 1 MiB" in e["line"] for e in ev)
                and any(e["line"].startswith("bin") for e in ev)
                and any(e["line"] == "tail-line" for e in ev)
                else None
            )
        )(served.events("card")),
        timeout=30,
    )
    cut = [e for e in events if e["line"].startswith("yyy")][0]
    assert cut["truncated"] and cut["line"].endswith("[proctor: line cut at 16 KiB]") and len(cut["line"]) < 17000
    marker = [e for e in events if "past 1 MiB" in e["line"]]
    assert len(marker) == 1 and marker[0]["truncated"]
    zs = [e for e in events if e["line"].startswith("zzz")]
    assert 1000 <= len(zs) <= 1100, "about 1 MiB of lines kept"
    binary = [e for e in events if e["line"].startswith("bin")][0]
    assert "\ufffd" in binary["line"]
    ten_mb = [e for e in events if e["line"].startswith("qqq")]
    assert len(ten_mb) == 1 and ten_mb[0]["truncated"]
    runs = served.runs(3)
    assert runs[0][6].strip() == "oops", "stderr kept as the run's diagnostic"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_descendants_are_ended(served, tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    served.add("card", f"(trap '' TERM; sleep 300) & echo $! > {pidfile}; echo started")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=10)
    pid = int(pidfile.read_text())
    wait_for(lambda: not _alive(pid), timeout=10)
    served.add("card", f"echo $$ > {pidfile}.2; exec sleep 300")
    wait_for(lambda: os.path.exists(f"{pidfile}.2") and open(f"{pidfile}.2").read().strip(), timeout=10)
    pid2 = int(open(f"{pidfile}.2").read())
    assert _alive(pid2)
    cli(served.root, "server", "stop")
    assert not _alive(pid2), "stopping the server ends every monitor command"
    assert not _alive(served.pid)


def test_exits_at_once(served):
    _, monitor = served.add("card", "true")
    runs = wait_for(lambda: (lambda r: r if r and r[0][1] else None)(served.runs(monitor["id"])), timeout=10)
    assert runs[0][2] == 0 and served.events("card") == []


def test_nonce_scopes_to_its_own_job(served):
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test", "state": "running"}, cwd=served.root)
    served.add("third", "true")
    env = {"PROCTOR_NONCE": served.card_nonce}
    made = json.loads(
        cli(
            served.root,
            "monitor",
            "add",
            "--cmd",
            "echo mine",
            "--interval",
            "10s",
            "--allow-unsandboxed",
            "--job",
            "third",
            "-o",
            "json",
            env=env,
        ).stdout
    )
    assert made["job"] == "card", "scope self, whatever --job it names"
    mine = json.loads(cli(served.root, "monitor", "list", "--job", "third", "-o", "json", env=env).stdout)["monitors"]
    assert [m["job"] for m in mine] == ["card"]
    theirs = cli(served.root, "monitor", "remove", "1", env=env, check=False)
    assert theirs.returncode == 1 and "MONITOR_OUT_OF_SCOPE" in theirs.stderr
    bad = cli(served.root, "monitor", "list", env={"PROCTOR_NONCE": "not-a-secret"}, check=False)
    assert bad.returncode == 2


def test_deleted_when_the_job_leaves_an_active_column(served):
    api.fork({"id": "a1", "write_paths": ["x1"], "check": "test", "state": "running"}, cwd=served.root)
    api.fork({"id": "a2", "write_paths": ["x2"], "check": "test", "state": "running"}, cwd=served.root)
    api.fork({"id": "a3", "write_paths": ["x3"], "check": "test", "state": "running"}, cwd=served.root)
    for job in ("a1", "a2", "a3"):
        served.add(job, "true")
    api.exit_job("a1", cwd=served.root)  # no_return: the Done column, passive
    cli(served.root, "job", "archive", "a2")
    cli(served.root, "job", "delete", "a3")
    live = lambda: {m["job"] for m in served.call("GET", "/api/v1/monitors")[1]["monitors"]}  # noqa: E731
    wait_for(lambda: not ({"a1", "a2", "a3"} & live()), timeout=15)
    served.add("card", "true")
    with open(os.path.join(served.root, "proctor.toml"), "a") as handle:
        handle.write('\n[board]\ncolumns = [{name = "Running", states = ["running"], active = false}]\n')
    wait_for(lambda: "card" not in live(), timeout=15)


def test_cwd_falls_back_to_the_repository(served):
    _, monitor = served.add("card", "pwd", cwd=served.worktree)
    wait_for(lambda: served.events("card"), timeout=10)
    # Returned first: a running job whose checkout is deleted is ended, monitors and all
    # (test_server_reap.py); removing the worktree of a job that returned is the normal end,
    # and its monitors, in the active Returned column, go on from the repository.
    api.fork({"id": "card", "write_paths": ["src/a.py"], "check": "test", "state": "exited"}, cwd=served.root)
    import shutil

    shutil.rmtree(served.worktree)
    wait_for(lambda: any(e["line"] == os.path.realpath(served.root) for e in served.events("card")), timeout=20)


def test_persists_across_restart(served):
    served.add("card", "echo once-per-start")
    wait_for(lambda: len(served.events("card")) == 1, timeout=10)
    cli(served.root, "server", "stop")
    cli(served.root, "server", "start")
    restarted = Server(served.root)
    wait_for(lambda: len(restarted.events("card")) == 2, timeout=15)
    assert [m["job"] for m in restarted.call("GET", "/api/v1/monitors")[1]["monitors"]] == ["card"]


def test_followups_batch_and_reach_a_stopping_session(served):
    served.add("card", "echo ci failed on main")
    events = wait_for(lambda: (lambda ev: ev if ev and ev[0]["batch"] else None)(served.events("card")), timeout=25)
    listed = json.loads(cli(served.root, "monitor", "events", "--job", "card", "-o", "json").stdout)["events"]
    assert set(listed[0]) == {"monitor", "run", "time", "line", "truncated", "followup"}
    assert listed[0]["followup"] == "pending", "grouped, but not handed over yet"
    stop = {
        "session_id": "int-1",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": served.worktree,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    env = dict(os.environ, BAGGAGE="proctor.lease=card")
    out, _ = hook_run(["claude"], json.dumps(stop).encode(), env)
    answer = json.loads(out)
    assert answer["decision"] == "block" and "ci failed on main" in answer["reason"]
    assert re.match(r"deny \[monitor-followup\]: Follow-up \d+ from the monitors of job card", answer["reason"])
    out, _ = hook_run(["claude"], json.dumps(stop).encode(), env)
    again = json.loads(out)
    assert "ci failed on main" not in json.dumps(again), "each follow-up is handed over once"
    # the monitor still runs and nothing would wake the session: it was asked for the wait with the
    # follow-up, and is not asked again in the same row of refusals; the person is told
    assert "proctor monitor wait --job card" in answer["reason"]
    assert "decision" not in again and "nothing will wake this session" in again["systemMessage"]
    after = json.loads(cli(served.root, "monitor", "events", "--job", "card", "-o", "json").stdout)["events"]
    assert after[0]["followup"] == events[0]["batch"], "the follow-up it went out in"


def test_batches_are_capped(tmp_path):
    """On the real schema: 100 events or 32 KiB a follow-up, as delivered (header included)."""
    from proctor.store import Store, followups

    store = Store(str(tmp_path))
    try:
        with store.write() as conn:
            conn.execute(
                "INSERT INTO monitors (id, job, command, interval, description, cwd, created, created_by) "
                "VALUES (1, 'j', 'x', 60, 'ci', '/', '2026-01-01T00:00:00.000Z', 't')"
            )
            conn.executemany(
                "INSERT INTO monitor_events (monitor, run, job, time, line, truncated) VALUES (1, 1, 'j', ?, ?, 0)",
                [(f"2026-01-01T00:00:{n % 60:02d}.000Z", f"line {n}") for n in range(250)]
                + [("2026-01-01T00:01:00.000Z", "b" * 20000)] * 3,
            )
            made = followups.batch(conn, "j")
            sizes = [r[0] for r in conn.execute("SELECT events FROM followups ORDER BY id")]
            texts = [r[0] for r in conn.execute("SELECT text FROM followups ORDER BY id")]
            order = [r[0] for r in conn.execute("SELECT followup FROM monitor_events ORDER BY id")]
    finally:
        store.close()
    assert sizes[:2] == [100, 100] and sum(sizes) == 253 and len(made) == len(sizes)
    assert sizes[2:] == [51, 1, 1], "the rest in later batches, none over 32 KiB"
    assert all(len(t.encode()) <= 32 * 1024 for t in texts)
    assert order == sorted(order), "events keep their order across batches"


def test_bad_input(served):
    twice = cli(served.root, "server", "start", "--foreground", check=False)
    assert twice.returncode == 2 and "running already" in twice.stderr
    assert "already running" in cli(served.root, "server", "start").stdout
    os.remove(served.token_path)
    assert served.call("GET", "/api/v1/status")[0] == 200, "the token in memory still serves"
    wait_for(lambda: os.path.exists(served.token_path), timeout=10)
    assert oct(os.stat(served.token_path).st_mode & 0o777) == "0o600"
    big = b'{"command": "' + b"x" * (10 << 20) + b'"}'
    status, body = served.call("POST", "/api/v1/monitors", raw=big)
    assert status == 413
    assert served.call("GET", "/api/v1/status")[0] == 200, "and keeps serving"
    status, body = served.call("POST", "/api/v1/monitors", raw=b"{not json")
    assert status == 400


def test_descendant_holding_stdout_is_not_a_timeout(served):
    _, monitor = served.add("card", "sleep 30 & echo started")
    runs = wait_for(lambda: (lambda r: r if r and r[0][1] else None)(served.runs(monitor["id"])), timeout=10)
    from proctor.timeutil import parse_iso

    assert runs[0][3] == 0 and runs[0][2] == 0, "the command exited at once, with 0"
    assert parse_iso(runs[0][1]) - parse_iso(runs[0][0]) < 5


def test_cross_site_requests_are_refused(served):
    body = json.dumps(
        {"job": "card", "command": "echo pwned", "interval": "10s", "cwd": served.root, "allow_unsandboxed": True}
    ).encode()
    for headers in (
        {"Content-Type": "text/plain"},
        {"Content-Type": "application/json", "Origin": "http://127.0.0.1:3000"},
    ):
        request = urllib.request.Request(
            f"http://127.0.0.1:{served.port}/api/v1/monitors",
            data=body,
            method="POST",
            headers={"Host": f"127.0.0.1:{served.port}", "Cookie": f"proctor_token={served.token}", **headers},
        )
        try:
            urllib.request.urlopen(request, timeout=10)
            raise AssertionError("accepted")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
    assert served.call("GET", "/api/v1/monitors")[1]["monitors"] == []
    assert served.call("GET", "/api/v1/status", token="é")[0] == 401, "a non-ASCII token is refused, not a crash"
    assert served.add("card", "true", cwd=["/"])[0] == 400
    assert served.call("DELETE", "/api/v1/monitors/99999999999999999999999")[0] == 409


def test_a_leased_caller_needs_the_jobs_secret(served):
    refused = cli(
        served.root, "monitor", "list", env={"BAGGAGE": "proctor.lease=card", "PROCTOR_NONCE": ""}, check=False
    )
    assert refused.returncode == 1 and "PROCTOR_NONCE" in refused.stderr


def test_stale_server_file_is_not_trusted(served):
    cli(served.root, "server", "stop")
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        info_path = os.path.join(os.path.dirname(served.token_path), "server.json")
        with open(info_path, "w") as handle:
            json.dump(
                {"pid": sleeper.pid, "port": 1, "version": "0", "ready": True, "url": "x", "console": "x"}, handle
            )
        assert cli(served.root, "server", "status", check=False).returncode == 1
        assert "no server was running" in cli(served.root, "server", "stop").stdout
        assert sleeper.poll() is None, "an unrelated process is left alone"
    finally:
        sleeper.kill()


def test_a_zombie_server_counts_as_stopped():
    """`server stop` waits for the server to end; one adopted by a `proctor work` that has not
    reaped it yet is a zombie, which has ended (no 30 s wait for a SIGKILL it cannot need)."""
    import time

    from proctor.server.daemon import _running

    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _running(pid), "an exited, unreaped child is not running"
        assert _running(os.getpid())
    finally:
        os.waitpid(pid, 0)
