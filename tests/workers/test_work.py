"""proctor work: stand-in CLIs replay real streams, then misbehave; each stop, the ladder,
both commit bodies, the ledger and the config reports are checked against them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import alive_with, git, make_repo
from proctor import api
from tests.support import SHARED_FIXTURES, STANDIN
from tests.support import needs_shared_fixtures as needs_fixtures
from tests.workers.world import GEMINI

SHARED = SHARED_FIXTURES
CLAUDE = os.path.join(SHARED, "claude", "stream", "claude-stream-2.1.41.jsonl")
OPENCODE = os.path.join(SHARED, "opencode", "opencode-run-minimal.jsonl")
CODEX = os.path.join(SHARED, "codex", "codex-exec-resumed.jsonl")

pytestmark = needs_fixtures


def config(extra_jobs: str = "", workers: str | None = None) -> str:
    standin = json.dumps([sys.executable, STANDIN])
    workers = (
        workers
        if workers is not None
        else f"""
[workers]
ladder = ["cheap", "strong"]
attempts = 1

[workers.cheap]
executor = "claude"
command = {standin}

[workers.strong]
executor = "claude"
command = {standin}
"""
    )
    return f"""
[jobs]
grace_seconds = 5
idle_minutes = 0.03
{extra_jobs}

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"
{workers}
"""


@pytest.fixture
def repo_for(tmp_path, monkeypatch):
    def make(cfg: str | None = None, job: dict | None = None) -> str:
        root = make_repo(tmp_path / "repo", cfg or config())
        os.makedirs(os.path.join(root, "src"))
        with open(os.path.join(root, "src", "a.py"), "w") as handle:
            handle.write("x = 1\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "src")
        monkeypatch.chdir(root)
        api.fork(
            job or {"id": "feat", "criteria": "make a ok\n\nmore detail", "write_paths": ["src/a.py"], "check": "test"},
            cwd=root,
        )
        return root

    return make


def work(proctor, *args, env=None):
    return proctor("work", "feat", "-o", "json", *args, env=env)


def standin_env(**values) -> dict:
    env = {
        "STANDIN_STREAM": CLAUDE,
        "STANDIN_WRITE": "src/a.py=ok = True\\n",
        "STANDIN_MODE": "",
        "STANDIN_SUMMARY": None,
        "STANDIN_APPEND": None,
    }
    env.update({k: v for k, v in values.items()})
    return {f"STANDIN_{k[8:]}" if k.startswith("STANDIN_") else k: v for k, v in env.items()}


def test_pass_commits_only_the_jobs_paths(repo_for, proctor):
    root = repo_for()
    with open(os.path.join(root, "README"), "a") as handle:
        handle.write("a person's uncommitted edit\n")
    # declared again now: the job is handed the dirty tree, and the edit is not its work
    api.fork(
        {"id": "feat", "criteria": "make a ok\n\nmore detail", "write_paths": ["src/a.py"], "check": "test"}, cwd=root
    )
    result = work(proctor, env=standin_env(STANDIN_SUMMARY="made a ok\\nand a test"))
    assert result.code == 0, result.out + result.err
    payload = result.json()
    job = payload["jobs"][0]
    assert payload["passed"] is True and job["passed"] and job["commit"]
    assert job["attempts"][0]["reply_kind"] == "error_max_turns", "classified by subtype, not is_error"
    assert job["attempts"][0]["stop"] is None and job["attempts"][0]["outcome"] == "finished"
    shown = git(root, "show", "--stat", "--format=%B", "HEAD")
    assert shown.startswith("make a ok\n\nproctor job feat (job) passed gates check test, diff within the write paths.")
    assert (
        "----- worker's claim, not verified (status: done) -----\n> made a ok\n> and a test\n"
        "----- end of worker's claim -----" in shown
    )
    assert "src/a.py" in shown and "README" not in shown.split("-----")[-1]
    assert "a person's uncommitted edit" in open(os.path.join(root, "README")).read()
    assert git(root, "status", "--porcelain").strip() == "M README"
    row = {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}["feat"]
    assert row["state"] == "pass" and row["commit"] == job["commit"]


def test_trailers_in_a_summary_cannot_forge_a_sign_off(repo_for, proctor):
    root = repo_for()
    summary = "Signed-off-by: Mallory <m@example.com>\\nCo-Authored-By: Eve <e@example.com>\\nFixes: #1\\n\x1b[31mred\x1b[0m\x07"
    assert work(proctor, env=standin_env(STANDIN_SUMMARY=summary)).code == 0
    message = git(root, "log", "-1", "--format=%B")
    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True, cwd=root
    ).stdout
    assert parsed.strip() == "", f"trailers found: {parsed!r}"
    assert "> Signed-off-by: Mallory" in message and "\x1b" not in message and "\x07" not in message
    assert "> red" in message


def test_long_summary_is_capped(repo_for, proctor):
    root = repo_for()
    assert work(proctor, env=standin_env(STANDIN_SUMMARY="word " * 1000)).code == 0
    claim = git(root, "log", "-1", "--format=%B").split("-----\n", 1)[1].split("\n-----")[0]
    text = "".join(line[2:] for line in claim.splitlines())
    assert len(text) <= 1500 + len(" [cut at 1,500 characters]") and "cut at 1,500" in text


def test_minimal_commit_body(repo_for, proctor):
    root = repo_for(config('commit_body = "minimal"'))
    assert work(proctor, env=standin_env(STANDIN_SUMMARY="anything")).code == 0
    assert git(root, "log", "-1", "--format=%B").strip() == "make a ok"


def test_idle_stop_moves_up_the_ladder_without_an_attempt(repo_for, proctor):
    repo_for()
    started = time.monotonic()
    result = work(proctor, env=standin_env(STANDIN_MODE="silent_after:3", STANDIN_WRITE=""))
    assert result.code == 1
    attempts = result.json()["jobs"][0]["attempts"]
    assert [a["worker"] for a in attempts] == ["cheap", "strong"], "idle stops use no attempt on a rung"
    first = attempts[0]
    assert first["stop"] == "idle" and first["outcome"] == "aborted" and first["provider_error"] is True
    assert first["counts"] is False and first["reason"] == "stopped: no output for 0.03 minutes"
    assert first["gone_at"] - first["stopped_at"] < 3
    assert time.monotonic() - started < 60


def test_stderr_counts_as_output(repo_for, proctor):
    repo_for(config().replace("idle_minutes = 0.03", "idle_minutes = 0.015"))
    result = work(proctor, env=standin_env(STANDIN_MODE="stderr_ticks:8"))
    assert result.code == 0, result.out
    assert result.json()["jobs"][0]["attempts"][0]["stop"] is None


def test_grace_window_after_a_hang(repo_for, proctor):
    repo_for()
    started = time.monotonic()
    result = work(proctor, env=standin_env(STANDIN_MODE="hang_after"))
    elapsed = time.monotonic() - started
    assert result.code == 0, "a worker that hung after a good change passes its gates"
    first = result.json()["jobs"][0]["attempts"][0]
    assert first["stop"] == "grace" and first["outcome"] == "finished" and first["counts"] is True
    assert first["reason"] == "stopped: 5 s after the final reply"
    assert 4 < elapsed < 40, "the idle clock (1.8 s) no longer applies after Claude's result"


def test_grandchild_holding_stdout(repo_for, proctor):
    repo_for()
    started = time.monotonic()
    result = work(proctor, env=standin_env(STANDIN_MODE="grandchild"))
    assert result.code == 0 and time.monotonic() - started < 30
    leftover = subprocess.run(["pgrep", "-f", "^sleep 120$"], capture_output=True, text=True).stdout.strip()
    assert leftover == "", "the group, grandchild included, is gone"


def test_exit_without_a_final_reply_uses_an_attempt(repo_for, proctor):
    repo_for(config().replace("attempts = 1", "attempts = 2"))
    result = work(proctor, env=standin_env(STANDIN_STREAM="", STANDIN_MODE="exit:3", STANDIN_WRITE=""))
    assert result.code == 1
    attempts = result.json()["jobs"][0]["attempts"]
    assert [a["worker"] for a in attempts] == ["cheap", "cheap", "strong", "strong"]
    assert attempts[0]["reason"] == "exited with code 3 without a final reply" and attempts[0]["counts"]
    assert all("check" in " ".join(a["failures"]) for a in attempts)
    row = {r["id"]: r for r in api.ls_jobs()["jobs"]}["feat"]
    assert row["state"] == "fail"


def test_gates_failing_use_attempts(repo_for, proctor):
    repo_for(config().replace("attempts = 1", "attempts = 2"))
    result = work(proctor, env=standin_env(STANDIN_WRITE="src/a.py=still bad\\n"))
    attempts = result.json()["jobs"][0]["attempts"]
    assert result.code == 1 and len(attempts) == 4 and all(a["outcome"] == "finished" for a in attempts)


def test_wall_clock(repo_for, proctor):
    workers = f"""
[workers.cheap]
executor = "claude"
command = {json.dumps([sys.executable, STANDIN])}
wall_minutes = 0.02
"""
    repo_for(config(workers=workers))
    result = work(proctor, env=standin_env(STANDIN_STREAM="", STANDIN_MODE="ticks_forever"))
    first = result.json()["jobs"][0]["attempts"][0]
    assert first["stop"] == "wall" and first["reason"] == "stopped: wall clock of 0.02 minutes"


def test_spend_limit(repo_for, proctor):
    workers = f"""
[workers]
ladder = ["cheap", "strong"]
[workers.cheap]
executor = "claude"
command = {json.dumps([sys.executable, STANDIN])}
max_spend_usd = 1.0
[workers.strong]
executor = "claude"
command = {json.dumps([sys.executable, STANDIN])}
"""
    repo_for(config(workers=workers))
    result = work(proctor, env=standin_env(STANDIN_MODE="hang_after"))
    attempts = result.json()["jobs"][0]["attempts"]
    # Claude's cost arrives only in its result, which is its final reply here: the spend stop
    # keeps the 5 s floor (to save its session) and the attempt is finished, graded, counted
    assert attempts[0]["stop"] == "spend" and "past max_spend_usd $1" in attempts[0]["reason"]
    assert attempts[0]["outcome"] == "finished" and attempts[0]["counts"] is True and attempts[0]["passed"]
    assert attempts[0]["stopped_at"] - attempts[0]["started"] >= 4.5


def _opencode_workers(extra: str = "") -> str:
    return f"""
[workers.oc]
executor = "opencode"
command = {json.dumps([sys.executable, STANDIN])}
{extra}
"""


def test_opencode_final_step(repo_for, proctor):
    repo_for(config(workers=_opencode_workers()))
    result = work(proctor, env=standin_env(STANDIN_STREAM=OPENCODE))
    assert result.code == 0
    first = result.json()["jobs"][0]["attempts"][0]
    assert first["reply_kind"] == "stop" and first["session"].startswith("ses_")


def test_opencode_new_step_hands_back_to_the_idle_clock(repo_for, proctor):
    repo_for(config(workers=_opencode_workers()).replace("grace_seconds = 5", "grace_seconds = 600"))
    new_step = json.dumps({"type": "step_start", "timestamp": 1, "sessionID": "ses_x", "part": {"type": "step-start"}})
    started = time.monotonic()
    result = work(proctor, env=standin_env(STANDIN_STREAM=OPENCODE, STANDIN_APPEND=new_step, STANDIN_MODE="hang_after"))
    first = result.json()["jobs"][0]["attempts"][0]
    assert first["stop"] == "idle" and time.monotonic() - started < 60, "not the 600 s grace window"


def test_opencode_fatal_error(repo_for, proctor, monkeypatch):
    from proctor.workers import runner

    monkeypatch.setattr(runner, "FATAL_GRACE", 1.0)
    repo_for(config(workers=_opencode_workers()).replace("idle_minutes = 0.03", "idle_minutes = 5"))
    error = json.dumps({"type": "error", "timestamp": 1, "sessionID": "ses_x", "error": {"message": "provider down"}})
    result = work(proctor, env=standin_env(STANDIN_STREAM="", STANDIN_APPEND=error, STANDIN_MODE="hang_after"))
    first = result.json()["jobs"][0]["attempts"][0]
    assert first["stop"] == "fatal" and first["provider_error"] and "provider down" in first["reason"]


def test_codex_stream(repo_for, proctor):
    workers = f"""
[workers.cx]
executor = "codex"
command = {json.dumps([sys.executable, STANDIN])}
"""
    repo_for(config(workers=workers))
    result = work(proctor, env=standin_env(STANDIN_STREAM=CODEX))
    first = result.json()["jobs"][0]["attempts"][0]
    assert result.code == 0 and first["reply_kind"] == "completed"
    assert first["session"] == "01a02e32-c487-7581-b55e-3ef604577fef"


def test_command_executor(repo_for, proctor, tmp_path):
    script = tmp_path / "worker.sh"
    seen = tmp_path / "prompt.seen"
    script.write_text(f"#!/bin/sh\ncat > {seen}\necho 'ok = 1' > src/a.py\necho working\necho DONE\n")
    script.chmod(0o755)
    workers = f'\n[workers.sh]\nexecutor = "command"\ncommand = ["{script}"]\n'
    repo_for(config(workers=workers))
    result = work(proctor)
    assert result.code == 0
    first = result.json()["jobs"][0]["attempts"][0]
    # a last line reading DONE is prose: the status is the filed result's, and none was filed
    assert first["status"] == "unknown" and first["reply_kind"] == "exit 0"
    assert seen.read_text().startswith("lease: feat\n")


def test_ledger_and_ls_attempts(repo_for, proctor):
    root = repo_for()
    work(proctor, env=standin_env(STANDIN_MODE="silent_after:3", STANDIN_WRITE=""))
    from proctor import trail
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(root)))
    with store.read() as conn:
        claims = trail.events(conn, job="feat", kind="worker_claim")
    store.close()
    assert [c["data"]["idle_stopped"] for c in claims] == [True, True]
    assert all(c["data"]["aborted"] and c["data"]["status"] == "unknown" for c in claims)
    listed = proctor("ls", "attempts", "feat")
    assert "#1 cheap (claude): aborted - stopped: no output for 0.03 minutes" in listed.out
    assert "provider error" in listed.out and "not counted" in listed.out
    assert len(proctor("ls", "attempts", "feat", "-o", "json").json()["attempts"]) == 2


def test_children_in_depends_on_order(repo_for, proctor):
    root = repo_for(job={"id": "root", "criteria": "plan", "check": "test", "write_paths": ["src/**"]})
    api.fork(
        {
            "id": "root/b",
            "parent": "root",
            "criteria": "second",
            "write_paths": ["src/a.py"],
            "check": "test",
            "depends_on": [],
        },
        cwd=root,
    )
    api.fork(
        {"id": "root/a", "parent": "root", "criteria": "first", "write_paths": ["src/a.py"], "check": "test"}, cwd=root
    )
    api.fork(
        {
            "id": "root/b",
            "parent": "root",
            "criteria": "second",
            "write_paths": ["src/a.py"],
            "check": "test",
            "depends_on": ["root/a"],
        },
        cwd=root,
    )
    # each step changes the file on the tree it starts from: b adds to what a landed
    shell = (
        'case "$BAGGAGE" in *proctor.lease=root/a*) echo "ok = 1" > src/a.py ;; '
        '*proctor.lease=root/b*) echo "also = 2" >> src/a.py ;; esac'
    )
    result = proctor("work", "root", "-o", "json", env=standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell))
    assert result.code == 0, result.out
    assert [j["id"] for j in result.json()["jobs"]] == ["root/a", "root/b", "root"]
    assert git(root, "log", "--format=%s").splitlines()[:2] == ["second", "first"]
    assert open(os.path.join(root, "src", "a.py")).read() == "ok = 1\nalso = 2\n"


def test_cannot_start(repo_for, proctor):
    repo_for(config(workers='\n[workers.ghost]\nexecutor = "claude"\ncommand = ["/nonexistent/claude"]\n'))
    missing = work(proctor)
    assert missing.code == 2 and "could not start" in missing.err
    unknown = proctor("work", "feat", "--worker", "nope")
    assert unknown.code == 2 and "no worker 'nope'" in unknown.err
    none = proctor("work", "nojob")
    assert none.code == 2


def test_worker_config_reports(tmp_path, proctor):
    root = make_repo(
        tmp_path / "r",
        """
[jobs]
idle_minutes = nan
grace_seconds = 99999
commit_body = "everything"
[workers]
ladder = ["a", "ghost"]
attempts = 0
[workers.a]
executor = "claude"
max_spend_usd = -1
wall_minutes = inf
[workers.b]
executor = "emacs"
""",
    )
    shown = proctor("config", "show", "-o", "json", cwd=root).json()
    problems = "\n".join(shown["problems"])
    for needle in (
        "idle_minutes = nan",
        "grace_seconds = 99999 is out of range; clamped to 5..3600 seconds (3600)",
        "commit_body",
        "ladder names ghost",
        "attempts = 0",
        "max_spend_usd = -1",
        "wall_minutes = inf",
        'executor = "emacs"',
    ):
        assert needle in problems, needle
    settings = {s["key"]: s["value"] for s in shown["settings"]}
    assert settings["jobs.grace_seconds"] == 3600 and settings["jobs.commit_body"] == "full"
    assert settings["jobs.idle_minutes"] is None


def test_later_results_buy_no_time(repo_for, proctor):
    repo_for()
    result_line = open(CLAUDE).read().strip().splitlines()[-1]
    started = time.monotonic()
    out = work(proctor, env=standin_env(STANDIN_APPEND="\n".join([result_line] * 60), STANDIN_MODE="slow_append:0.5"))
    first = out.json()["jobs"][0]["attempts"][0]
    assert first["stop"] == "grace" and time.monotonic() - started < 15, "the first result starts the window"


def test_commit_failure_records_no_pass(repo_for, proctor):
    root = repo_for()
    # no repository hook runs on proctor's commit (they are a worker's way to forge one), so the
    # commit is made to fail by signing that cannot work
    git(root, "config", "commit.gpgSign", "true")
    git(root, "config", "gpg.program", "false")
    result = work(proctor, env=standin_env())
    assert result.code == 2 and "git commit failed" in result.err and "not landed" in result.err
    row = {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}["feat"]
    assert row["state"] == "declared", "not recorded pass, and ready for another run"
    assert git(root, "diff", "--cached", "--name-only").strip() == "", "the index is left as it was"


def test_taken_elsewhere_cannot_start(repo_for, proctor, tmp_path):
    root = repo_for()
    wt = str(tmp_path / "wt")
    git(root, "worktree", "add", "-q", "-b", "wt", wt)
    api.exec_job("feat", cwd=wt)
    result = work(proctor, env=standin_env())
    assert result.code == 2 and "could not start feat" in result.err


def test_children_that_ended_stop_their_dependents(repo_for, proctor):
    root = repo_for(job={"id": "root", "criteria": "plan", "check": "test"})
    api.fork({"id": "root/a", "parent": "root", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork(
        {"id": "root/b", "parent": "root", "write_paths": ["src/a.py"], "check": "test", "depends_on": ["root/a"]},
        cwd=root,
    )
    api.exit_job("root/a", cwd=root)
    result = proctor("work", "root", env=standin_env())
    assert result.code == 1 and "ended without passing (root/a)" in result.err


# --- Gemini CLI workers, replaying its stream-json as 0.61.0 writes it (fixtures/hosts/gemini-0.61.0) ---


def _gemini_workers(extra: str = "") -> str:
    return f"""
[workers]
ladder = ["gm", "gm2"]
attempts = 1

[workers.gm]
executor = "gemini"
command = {json.dumps([sys.executable, STANDIN])}
{extra}

[workers.gm2]
executor = "gemini"
command = {json.dumps([sys.executable, STANDIN])}
"""


def test_gemini_worker_passes(repo_for, proctor):
    repo_for(config(workers=_gemini_workers()))
    result = work(proctor, env=standin_env(STANDIN_STREAM=os.path.join(GEMINI, "stream-tools.jsonl")))
    assert result.code == 0, result.err
    first = result.json()["jobs"][0]["attempts"][0]
    assert first["executor"] == "gemini" and first["reply_kind"] == "success" and first["passed"]
    assert first["session"] == "0c93bc11-d58a-4856-9dcb-c948d0da5967"


def test_gemini_provider_error_moves_up_without_an_attempt(repo_for, proctor):
    repo_for(config(workers=_gemini_workers()))
    result = work(
        proctor,
        env=standin_env(
            STANDIN_STREAM=os.path.join(GEMINI, "stream-error-400.jsonl"), STANDIN_WRITE="", STANDIN_MODE="exit:144"
        ),
    )
    attempts = result.json()["jobs"][0]["attempts"]
    assert [a["worker"] for a in attempts] == ["gm", "gm2"]
    assert attempts[0]["provider_error"] is True and attempts[0]["counts"] is False
    assert attempts[0]["exit_code"] == 144


def test_gemini_max_spend_is_reported_unenforceable(repo_for, proctor):
    repo_for(config(workers=_gemini_workers("max_spend_usd = 2.0")))
    shown = proctor("config", "show")
    assert "[workers.gm] max_spend_usd cannot be enforced on a gemini worker (gemini reports tokens" in shown.out


# --- the prompt, the worker's environment; what a worker leaves behind ------------------------


def test_prompt_asks_for_the_run_to_be_cited(repo_for):
    from proctor.workers.work import prompt_for
    from proctor.workspace import Workspace

    root = repo_for()
    with Workspace(root) as ws:
        prompt = prompt_for(ws, {"id": "feat", "check": {"target": "test"}})
    assert prompt.startswith("lease: feat\n")
    assert '"validation": [{"run": "run-...", "command": "proctor run test", "output_ref": "sha256:..."}]' in prompt
    assert '{"schema_version": 2, ' in prompt and "only a run on your finished tree counts" in prompt
    assert "proctor job exit --schema" in prompt


def test_worker_env_puts_proctor_on_path_when_missing(monkeypatch, tmp_path):
    from proctor.workers.work import worker_env

    monkeypatch.setenv("PATH", str(tmp_path))
    env = worker_env("feat", "n")
    assert env["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), str(tmp_path)]
    assert env["BAGGAGE"] == "proctor.lease=feat" and env["PROCTOR_NONCE"] == "n"
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path), os.path.dirname(sys.executable)]))
    assert worker_env("feat")["PATH"] == os.environ["PATH"]  # one found: left as it is


LEAVER = """
import json, os, subprocess, sys, time
# a shell of its own, as Claude Code runs each command, and an orphan in a session of its own
quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
subprocess.Popen(["sleep", sys.argv[1]], start_new_session=True, **quiet)
subprocess.Popen(["sh", "-c", "setsid sleep %s1 & exit 0" % sys.argv[1]], **quiet).wait()
print(json.dumps({"type": "result", "subtype": "success", "result": "done", "session_id": "s"}), flush=True)
if sys.argv[2] == "hang":
    time.sleep(60)
"""


@pytest.mark.parametrize("ending", ["hang", "exit"])
def test_no_descendant_outlives_the_attempt(tmp_path, ending):
    """Stopped after its grace window, or exited by itself: the worker's setsid'd children and
    its orphans are ended too (they carry the attempt's tag in their environment)."""
    from proctor.workers import runner
    from proctor.workers.executors import claude

    marker = f"300.{os.getpid()}{int(time.time() * 1000) % 100000}"
    script = tmp_path / "leaver.py"
    script.write_text(LEAVER)
    try:
        attempt = runner.run_attempt(
            [sys.executable, str(script), marker, ending],
            claude.Parser(),
            runner.Limits(idle=30, grace=0.5),
            str(tmp_path),
            dict(os.environ),
        )
        assert attempt.reply == "done"
        assert attempt.stop == ("grace" if ending == "hang" else None), attempt.reason
        assert alive_with(marker) == []
    finally:
        for pid in alive_with(marker):  # a failure leaves no sleeper behind
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


def test_tagged_lists_only_the_tagged(tmp_path):
    from proctor.process import kill_tagged, tagged

    env = {**os.environ, "PROCTOR_TEST_TAG": "t1"}
    procs = [
        subprocess.Popen(["sleep", "30"], env=env, start_new_session=True),
        subprocess.Popen(["sleep", "30"], env={**env, "PROCTOR_TEST_TAG": "t2"}),
    ]
    try:
        # Popen returns once exec has begun; the kernel sets the new image's environment a moment
        # later, and /proc/<pid>/environ reads empty until then (seen once on a loaded CI machine)
        deadline = time.monotonic() + 10
        while not tagged("PROCTOR_TEST_TAG", "t1") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert tagged("PROCTOR_TEST_TAG", "t1") == [procs[0].pid]
        assert tagged("PROCTOR_TEST_TAG", "t") == []  # the whole value, never a prefix
        assert kill_tagged("PROCTOR_TEST_TAG", "t1", grace=0.2) == [procs[0].pid]
        assert procs[0].wait(timeout=5) == -15 and procs[1].poll() is None
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
