"""proctor work and the job's monitors: a follow-up for a live job resumes its worker as a new
attempt in the same worktree, guarded, graded and landed like any other; never after the job
ended.

A real server runs a real monitor, added by the stand-in worker itself (`proctor monitor add`
under its PROCTOR_NONCE, from its worktree). The stand-in tells its first start from a resumed
one by its own argv (STANDIN_ARGV_LOG): resumed, it carries `--resume <session>` and the
follow-up's text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import git, make_repo
from tests.server.test_server import wait_for
from tests.workers.test_work import CLAUDE, STANDIN, needs_fixtures, standin_env
from proctor import api

pytestmark = needs_fixtures

PY = sys.executable
EVENT = "CI-RED: test_a failed on main"


def config(idle_minutes: float, executor: str = "claude", extra: str = "") -> str:
    return f"""
[jobs]
grace_seconds = 5
idle_minutes = {idle_minutes}

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"

[workers]
ladder = ["cheap"]
attempts = 1

[workers.cheap]
executor = "{executor}"
command = {json.dumps([PY, STANDIN])}
{extra}
"""


def cli(root, *args, check=True):
    proc = subprocess.run(
        [PY, "-m", "proctor", *args], cwd=root, capture_output=True, text=True, env=dict(os.environ), timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A repository whose job `feat` must make src/a.py say ok, and its server, running."""
    started = []

    def make(cfg: str, serve: bool = True) -> str:
        root = make_repo(tmp_path / "repo", cfg)
        os.makedirs(os.path.join(root, "src"))
        with open(os.path.join(root, "src", "a.py"), "w") as handle:
            handle.write("x = 1\n")
        with open(os.path.join(root, "src", "b.py"), "w") as handle:
            handle.write("y = 1\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "src")
        monkeypatch.chdir(root)
        api.fork({"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
        if serve:
            cli(root, "server", "start")
            started.append(root)
        return root

    yield make
    for root in started:
        cli(root, "server", "stop", check=False)


def once(tmp_path, line: str = EVENT) -> str:
    """A monitor command that prints `line` on its first run only."""
    mark = tmp_path / "monitor-ran"
    return f"test -e {mark} || {{ touch {mark}; echo {line}; }}"


def add_monitor(command: str, saved) -> str:
    """What the worker runs to add its monitor (its secret is in its environment)."""
    return f"{PY} -m proctor monitor add --cmd '{command}' --interval 10s --allow-unsandboxed -o json > {saved} 2>&1"


def by_start(first: str, resumed: str) -> str:
    """A stand-in shell that does `first` on its first start and `resumed` once resumed."""
    return f'if tail -n 1 "$STANDIN_ARGV_LOG" | grep -q -- --resume; then {resumed}; else {first}; fi'


def starts(log) -> list[list[str]]:
    if not os.path.exists(log):
        return []
    with open(log) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def store_rows(root: str, query: str, params: tuple = ()) -> list[tuple]:
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        with ws.store.read() as conn:
            return conn.execute(query, params).fetchall()


def live_monitors(root: str) -> list[tuple]:
    return store_rows(root, "SELECT id FROM monitors WHERE job = 'feat' AND deleted IS NULL")


def trail_attempts(root: str) -> list[dict]:
    from proctor.workers.work import attempts_of
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        return attempts_of(ws, "feat")


def state_of(root: str) -> str:
    return {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}["feat"]["state"]


def run_work(proctor, env):
    return proctor("work", "feat", "-o", "json", env=env)


def session_of_fixture() -> str:
    with open(CLAUDE) as handle:
        for line in handle:
            event = json.loads(line)
            if event.get("type") == "system" and event.get("subtype") == "init":
                return event["session_id"]
    raise AssertionError("no init in the fixture")


# --- the follow-up resumes the worker, and what it then does is graded and landed ---------------


def test_a_follow_up_resumes_the_worker_whose_work_is_graded_and_landed(served, proctor, tmp_path):
    root = served(config(idle_minutes=1))
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    shell = by_start(first=add_monitor(once(tmp_path), saved), resumed="printf 'ok = True\\n' > src/a.py")
    started = time.monotonic()
    result = run_work(
        proctor, standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell, STANDIN_ARGV_LOG=str(log), STANDIN_SUMMARY="did it")
    )
    took = time.monotonic() - started
    assert result.code == 0, result.out + result.err
    monitor = json.loads(saved.read_text())
    assert monitor["job"] == "feat" and f"proctor-work-{os.getuid()}" in monitor["cwd"]  # the attempt's worktree
    job = result.json()["jobs"][0]
    first, resumed = job["attempts"]
    # the first attempt added the monitor and did nothing: it failed its gates, and waited
    assert first["passed"] is False and "followup" not in first and first["counts"] is True
    assert "waiting for the monitors of feat: 1 live" in result.err, result.err
    # the follow-up resumed the same session, in the same worktree; that attempt was graded and landed
    followups = store_rows(root, "SELECT id, text, delivered, via FROM followups WHERE job = 'feat' ORDER BY id")
    handed = [f for f in followups if f[2]]
    assert len(handed) == 1, followups
    followup_id, text, _delivered, via = handed[0]
    session = first["session"]
    assert session == session_of_fixture() and via == f"resume:cheap:{session}"
    assert resumed["followup"] == followup_id and resumed["followup_delivered"] is True
    assert resumed["passed"] is True and resumed["number"] == first["number"] + 1
    assert f"follow-up {followup_id} from its monitors" in result.err
    assert job["passed"] and job["commit"] and git(root, "show", "HEAD:src/a.py") == "ok = True\n"
    assert git(root, "log", "-1", "--format=%s").strip() == "make a ok"
    # the trail's worker_attempt names the follow-up
    recorded = trail_attempts(root)
    assert [a.get("followup") for a in recorded] == [None, followup_id]
    # the worker's CLI: started twice, the second time resuming its session with the follow-up's text
    argv = starts(log)
    assert len(argv) == 2 and "--resume" not in argv[0]
    assert argv[1][argv[1].index("--resume") + 1] == session
    prompt = argv[1][argv[1].index("-p") + 1]
    assert EVENT in prompt and EVENT in text and prompt.startswith("lease: feat\n")
    assert "did not pass its gates" in prompt
    # the job ended: its monitors go with it
    assert state_of(root) == "pass"
    wait_for(lambda: not live_monitors(root), timeout=20)
    assert took < 90, took


def test_a_first_attempt_that_passes_lands_at_once_and_nothing_resumes_it_later(served, proctor, tmp_path):
    root = served(config(idle_minutes=1))
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    shell = add_monitor(f"echo {EVENT}", saved) + "; printf 'ok = True\\n' > src/a.py"
    started = time.monotonic()
    result = run_work(proctor, standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell, STANDIN_ARGV_LOG=str(log)))
    assert result.code == 0, result.out + result.err
    assert time.monotonic() - started < 30
    job = result.json()["jobs"][0]
    assert len(job["attempts"]) == 1 and job["passed"] and job["commit"]
    assert json.loads(saved.read_text())["job"] == "feat"
    assert "waiting for the monitors" not in result.err
    wait_for(lambda: not live_monitors(root), timeout=20)  # the job left its active column
    # a follow-up made after the job ended (the server's batch of the monitor's first run, and one
    # put in by hand) is never handed to the worker: its CLI is not started again
    from proctor.store import Store
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.timeutil import iso, now

    store = Store(repo_state_dir(find_checkout(root)))
    try:
        with store.write() as conn:
            conn.execute(
                "INSERT INTO followups (job, created, text, events) VALUES (?, ?, ?, 1)",
                ("feat", iso(now()), f"Follow-up from the monitors of job feat (1 event):\n{EVENT}"),
            )
    finally:
        store.close()
    time.sleep(13)  # past the server's 10 s grouping and several of its 2 s reconciles
    followups = store_rows(root, "SELECT id, delivered, via FROM followups WHERE job = 'feat'")
    assert followups and all(f[1] is None and f[2] is None for f in followups), followups
    assert len(starts(log)) == 1


def test_no_follow_up_within_the_bound_leaves_the_verdict_as_it_was(served, proctor, tmp_path):
    root = served(config(idle_minutes=0.1))  # a 6 s wait
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    started = time.monotonic()
    result = run_work(
        proctor, standin_env(STANDIN_WRITE="", STANDIN_SHELL=add_monitor("true", saved), STANDIN_ARGV_LOG=str(log))
    )
    took = time.monotonic() - started
    assert result.code == 1, result.out + result.err
    job = result.json()["jobs"][0]
    assert len(job["attempts"]) == 1 and not job["passed"] and job["attempts"][0]["counts"]
    assert "waiting for the monitors of feat: 1 live" in result.err
    assert "no follow-up from its monitors within 6 s; the attempt's verdict stands" in result.err, result.err
    assert took >= 6, took
    assert state_of(root) == "fail"
    assert len(starts(log)) == 1
    wait_for(lambda: not live_monitors(root), timeout=20)


def test_a_resumed_attempt_that_writes_outside_its_lease_is_refused_by_the_gates(served, proctor, tmp_path):
    root = served(config(idle_minutes=1))
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    remove = (
        f'{PY} -m proctor monitor remove $({PY} -c \'import json; print(json.load(open("{saved}"))["id"])\')'
        f" >/dev/null 2>&1"
    )
    shell = by_start(
        first=add_monitor(once(tmp_path), saved),
        resumed=f"printf 'ok = True\\n' > src/a.py; printf 'y = 2\\n' > src/b.py; {remove}",
    )
    head = git(root, "rev-parse", "HEAD").strip()
    result = run_work(proctor, standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell, STANDIN_ARGV_LOG=str(log)))
    assert result.code == 1, result.out + result.err
    first, resumed = result.json()["jobs"][0]["attempts"]
    assert resumed["followup"] and resumed["followup_delivered"] and resumed["passed"] is False
    assert any("src/b.py" in f for f in resumed["failures"]), resumed["failures"]
    # nothing landed: not the resumed worker's write outside its lease, nor its write inside it
    assert git(root, "rev-parse", "HEAD").strip() == head
    assert open(os.path.join(root, "src", "b.py")).read() == "y = 1\n"
    assert open(os.path.join(root, "src", "a.py")).read() == "x = 1\n"
    # its monitor removed, the job was not waited on again: the verdict
    assert "its monitors are gone" not in result.err  # nothing was waited for after the resumed attempt
    assert state_of(root) == "fail"
    assert len(starts(log)) == 2


def test_the_plain_command_executor_is_not_waited_for(served, proctor, tmp_path):
    served(config(idle_minutes=1, executor="command"))
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    started = time.monotonic()
    result = run_work(
        proctor,
        standin_env(
            STANDIN_STREAM="",
            STANDIN_WRITE="",
            STANDIN_ARGV_LOG=str(log),
            STANDIN_SHELL=add_monitor(f"echo {EVENT}", saved),
        ),
    )
    assert result.code == 1, result.out + result.err
    assert json.loads(saved.read_text())["job"] == "feat"
    assert "waiting for the monitors" not in result.err
    assert time.monotonic() - started < 20 and len(starts(log)) == 1
    assert len(result.json()["jobs"][0]["attempts"]) == 1


def test_monitors_no_server_runs_are_not_waited_for(served, proctor, tmp_path):
    """A monitor left live in the store while no server runs (nothing runs it, no follow-up
    can come): the attempt's verdict, at once."""
    root = served(config(idle_minutes=1), serve=False)
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        with ws.store.write() as conn:
            conn.execute(
                "INSERT INTO monitors (job, command, interval, description, cwd, created, created_by) "
                "VALUES ('feat', 'true', 10, 'ci', ?, '2026-12-01T00:00:00Z', 'test')",
                (root,),
            )
    log = tmp_path / "argv.log"
    started = time.monotonic()
    result = run_work(proctor, standin_env(STANDIN_WRITE="", STANDIN_ARGV_LOG=str(log)))
    assert result.code == 1, result.out + result.err
    assert "1 live monitor, but no server runs them (proctor server start), so no wait" in result.err, result.err
    assert time.monotonic() - started < 20 and len(starts(log)) == 1


# --- the wait itself, without a server -------------------------------------------------------------


def _ready(root: str, text: str = "Follow-up from the monitors of job feat (1 event):\nx") -> int:
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store
    from proctor.timeutil import iso, now

    store = Store(repo_state_dir(find_checkout(root)))
    try:
        with store.write() as conn:
            return conn.insert(
                "INSERT INTO followups (job, created, text, events) VALUES (?, ?, ?, 1)", ("feat", iso(now()), text)
            )
    finally:
        store.close()


def test_await_followup_takes_a_ready_one_only_while_the_job_is_live_and_in_time(served):
    from proctor.jobs import take
    from proctor.jobs.lease import Caller
    from proctor.workers.work import _await_followup, _ensure_filed
    from proctor.workspace import Workspace

    root = served(config(idle_minutes=1), serve=False)
    seen = []
    notify = lambda kind, data: seen.append((kind, data))  # noqa: E731
    ready = _ready(root)
    orchestrator = Caller(None, None, "t")
    wt = os.path.join(os.path.dirname(root), "wt")
    with Workspace(root) as ws:
        # declared (a passive column): never resumed
        assert _await_followup(ws, "feat", time.monotonic() + 5, notify) is None
        with Workspace(root) as there:
            take.exec_job(there, "feat", orchestrator, worktree=wt)
        with Workspace(wt) as there:
            _ensure_filed(there, "feat", orchestrator, "reply")
        # exited, with a follow-up ready: taken at once, no server needed
        got = _await_followup(ws, "feat", time.monotonic() + 5, notify)
        assert got is not None and got["id"] == ready and seen[-1][0] == "followup"
        # past the bound (the session's wall clock spent): not even a ready one
        assert _await_followup(ws, "feat", time.monotonic() - 1, notify) is None
        assert seen[-1][0] == "wait_over" and "wall clock" in seen[-1][1]["reason"]
        # released (declared again): never
        take.release(ws, "feat", orchestrator, "test")
        assert _await_followup(ws, "feat", time.monotonic() + 5, notify) is None


def test_the_display_says_what_it_waits_for():
    import io

    from proctor.cli.work_cmd import Display

    out = io.StringIO()
    display = Display(out)
    display("monitors", {"job": "feat", "live": 2, "bound": 900.0, "since": time.monotonic()})
    display("followup", {"job": "feat", "id": 7, "events": 3})
    display("wait_over", {"job": "feat", "reason": "no follow-up from its monitors within 900 s"})
    display.close()
    text = out.getvalue()
    assert "feat: waiting for the monitors of feat: 2 live · 0s/15m00s" in text, text
    assert "feat: follow-up 7 from its monitors (3 events): the worker's session resumes with it" in text
    assert "no follow-up from its monitors within 900 s; the attempt's verdict stands" in text


# --- proctor work stopped while it waits: the job is handed back, nothing resumes its worker ---------


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_stopped_while_waiting_hands_the_job_back_and_resumes_nothing(served, tmp_path, how):
    import signal

    root = served(config(idle_minutes=1))
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    variables = standin_env(
        STANDIN_WRITE="", STANDIN_ARGV_LOG=str(log), STANDIN_SHELL=add_monitor(once(tmp_path), saved)
    )
    env = {k: v for k, v in {**os.environ, **variables}.items() if v is not None}
    work = subprocess.Popen(
        [PY, "-m", "proctor", "work", "feat"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen = []
    try:
        for line in work.stdout:
            seen.append(line)
            if "waiting for the monitors of feat: 1 live" in line:
                break
        assert any("waiting for the monitors" in line for line in seen), "".join(seen)
        worktree = json.loads(saved.read_text())["cwd"]
        assert os.path.isdir(worktree) and state_of(root) == "exited"
        work.send_signal(getattr(signal, how))
        work.communicate(timeout=60)
    finally:
        if work.poll() is None:
            work.kill()
            work.wait()
    assert work.returncode == (128 + signal.SIGTERM if how == "SIGTERM" else -signal.SIGKILL)
    # handed back (by proctor work itself, or by its watchdog): declared, its worktree gone, its monitors with it
    wait_for(lambda: state_of(root) == "declared" and not os.path.exists(worktree), timeout=30)
    wait_for(lambda: not live_monitors(root), timeout=20)
    time.sleep(12)  # the monitor's first event grouped into a follow-up meanwhile: nobody takes it
    made = store_rows(root, "SELECT delivered FROM followups WHERE job = 'feat'")
    assert made and all(f[0] is None for f in made), made
    assert len(starts(log)) == 1


def test_monitors_that_keep_printing_resume_a_failing_worker_only_within_its_wall_clock(served, proctor, tmp_path):
    """A monitor printing on every run and a worker that never does the work: each follow-up
    resumes it, until the worker's wall clock, counted from its session's first attempt, is spent."""
    root = served(config(idle_minutes=1, extra="wall_minutes = 0.4"))  # 24 s for the whole session
    log, saved = tmp_path / "argv.log", tmp_path / "monitor.json"
    shell = by_start(first=add_monitor(f"echo {EVENT}", saved), resumed="true")
    started = time.monotonic()
    result = run_work(proctor, standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell, STANDIN_ARGV_LOG=str(log)))
    took = time.monotonic() - started
    assert result.code == 1, result.out + result.err
    attempts = result.json()["jobs"][0]["attempts"]
    assert len(attempts) >= 2 and all(a.get("followup") for a in attempts[1:]), attempts
    assert not any(a["passed"] for a in attempts)
    assert len(starts(log)) == len(attempts)
    last = result.err.strip().splitlines()[-1]
    assert "no follow-up from its monitors within" in last or "wall clock" in last, result.err
    assert took < 24 + 30, took
    assert state_of(root) == "fail"
