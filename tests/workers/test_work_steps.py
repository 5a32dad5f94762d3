"""proctor work on steps and against a worker that misbehaves with git: each step graded on
the tree it starts from, the root recorded, an attempt per worktree, commits no worker can
forge (checked with `git interpret-trailers --parse` and `git log --format=%(trailers)`), one
runner per job, slots, --retry, resumed sessions, and what a person reads afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import git, machine_slots, make_repo
from tests.workers.test_work import CLAUDE, STANDIN, standin_env
from tests.support import needs_shared_fixtures as needs_fixtures
from proctor import api

pytestmark = needs_fixtures


def config(workers: str | None = None, extra: str = "", root_check: str = "grep -q ok src/a.py") -> str:
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
idle_minutes = 0.05
{extra}

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"

[targets.both]
command = "grep -q ok src/a.py && grep -q ok src/b.py"
timeout = "30s"

[targets.b]
command = "grep -q ok src/b.py"
timeout = "30s"

[targets.whole]
command = "{root_check}"
timeout = "30s"
{workers}
"""


def work_repo(tmp_path, monkeypatch, cfg: str) -> str:
    """A repository with proctor.toml `cfg` and src/a.py, src/b.py committed; the cwd."""
    root = make_repo(tmp_path / "repo", cfg)
    os.makedirs(os.path.join(root, "src"))
    for name in ("a", "b"):
        with open(os.path.join(root, "src", f"{name}.py"), "w") as handle:
            handle.write("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "src")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return lambda cfg=None: work_repo(tmp_path, monkeypatch, cfg or config())


def fork(root: str, record: dict) -> None:
    api.fork(record, cwd=root)


def by_lease(cases: dict[str, str]) -> str:
    """A shell command that does, for each lease, its own thing."""
    arms = "".join(
        f'  *"proctor.lease={lease}"|*"proctor.lease={lease},"*) {command} ;;\n' for lease, command in cases.items()
    )
    return f'case "$BAGGAGE" in\n{arms}esac'


def trailers_of_every_commit(root: str) -> tuple[str, str]:
    """What git's own trailer parsers find in every commit message on the branch."""
    logged = git(root, "log", "--format=%(trailers)")
    parsed = ""
    for sha in git(root, "rev-list", "HEAD").split():
        message = git(root, "log", "-1", "--format=%B", sha)
        parsed += subprocess.run(
            ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True, cwd=root
        ).stdout
    return logged.strip(), parsed.strip()


def rows(root: str) -> dict[str, dict]:
    return {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}


def steps(root: str, root_check: str = "whole", shared: bool = False) -> None:
    fork(root, {"id": "root", "criteria": "plan", "check": root_check, "write_paths": ["src/**"]})
    fork(root, {"id": "root/a", "parent": "root", "criteria": "first", "write_paths": ["src/a.py"], "check": "test"})
    fork(
        root,
        {
            "id": "root/b",
            "parent": "root",
            "criteria": "second",
            "write_paths": ["src/a.py"] if shared else ["src/b.py"],
            "check": "both" if not shared else "test",
            "depends_on": ["root/a"],
        },
    )


# ------------------------------------------------------------------ 1. steps on the tree they start from


def test_disjoint_steps_each_graded_on_the_tree_it_starts_from_and_the_root_recorded(repo, proctor):
    root = repo()
    steps(root)
    shell = by_lease({"root/a": "echo 'ok = 1' > src/a.py", "root/b": "echo 'ok = 2' > src/b.py"})
    result = proctor("work", "root", "-o", "json", env=standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell))
    assert result.code == 0, result.out + result.err
    jobs = result.json()["jobs"]
    assert [j["id"] for j in jobs] == ["root/a", "root/b", "root"]
    assert all(j["passed"] for j in jobs)
    assert git(root, "log", "--format=%s").splitlines()[:2] == ["second", "first"]
    # step 2 was graded on the tree after step 1 landed, not on the fork's checkpoint
    found = rows(root)
    first_commit = found["root/a"]["commit"]
    assert found["root/b"]["checkpoint"] == first_commit
    assert found["root/b"]["forked_checkpoint"] != first_commit
    assert found["root"]["state"] == "pass" and found["root"]["verdict"]["verdict"] == "pass"
    assert open(os.path.join(root, "src", "b.py")).read() == "ok = 2\n"
    assert git(root, "status", "--porcelain").strip() == ""
    assert git(root, "worktree", "list").count("\n") == 1, "every attempt's worktree is gone"


def test_a_step_that_changes_nothing_on_a_shared_path_fails(repo, proctor):
    root = repo()
    steps(root, root_check="test", shared=True)
    shell = by_lease({"root/a": "echo 'ok = 1' > src/a.py", "root/b": "echo 'ok = 1' > src/a.py"})
    result = proctor("work", "root", "-o", "json", env=standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell))
    assert result.code == 1
    jobs = {j["id"]: j for j in result.json()["jobs"]}
    assert jobs["root/a"]["passed"] and not jobs["root/b"]["passed"]
    assert any("nothing changed since" in f for a in jobs["root/b"]["attempts"] for f in a.get("failures", []))
    assert rows(root)["root/b"]["state"] == "fail"


def test_the_root_fails_when_its_own_check_fails_on_the_landed_steps(repo, proctor):
    root = repo(config(root_check="grep -q never src/a.py"))
    steps(root)
    shell = by_lease({"root/a": "echo 'ok = 1' > src/a.py", "root/b": "echo 'ok = 2' > src/b.py"})
    result = proctor("work", "root", "-o", "json", env=standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell))
    assert result.code == 1
    jobs = {j["id"]: j for j in result.json()["jobs"]}
    assert jobs["root/a"]["passed"] and jobs["root/b"]["passed"] and not jobs["root"]["passed"]
    assert rows(root)["root"]["state"] == "fail"


# ------------------------------------------------------------------ 2. commits no worker can forge


def _hook_text() -> str:
    return "#!/bin/sh\\necho 'Signed-off-by: Mallory <m@example.com>' >> \\\"$1\\\"\\n"


PLANT_HOOK = (
    'hooks="$(git rev-parse --git-common-dir)/hooks"; mkdir -p "$hooks"; '
    'printf \'#!/bin/sh\\necho "Signed-off-by: Mallory <m@example.com>" >> "$1"\\n\' '
    '> "$hooks/commit-msg"; chmod +x "$hooks/commit-msg"; cp "$hooks/commit-msg" "$hooks/prepare-commit-msg"'
)


@pytest.mark.parametrize("vector", ["hook", "hooksPath"])
def test_a_hook_the_worker_plants_fails_the_attempt_and_reaches_no_commit(repo, proctor, tmp_path, vector):
    standin = json.dumps([sys.executable, STANDIN])
    root = repo(config(workers=f'\n[workers.one]\nexecutor = "claude"\ncommand = {standin}\n'))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    if vector == "hook":
        shell = PLANT_HOOK
    else:
        evil = tmp_path / "evil"
        evil.mkdir()
        (evil / "commit-msg").write_text('#!/bin/sh\necho "Signed-off-by: Mallory <m@example.com>" >> "$1"\n')
        (evil / "commit-msg").chmod(0o755)
        shell = f"git config core.hooksPath {evil}"
    hooks = os.path.join(root, ".git", "hooks")
    before = sorted(os.listdir(hooks))
    config_before = open(os.path.join(root, ".git", "config")).read()
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_SHELL=shell))
    assert result.code == 1
    failures = [f for a in result.json()["jobs"][0]["attempts"] for f in a.get("failures", [])]
    assert any(".git/" in f and "hooks or config" in f for f in failures), failures
    logged, parsed = trailers_of_every_commit(root)
    assert "Mallory" not in logged and "Mallory" not in parsed
    # and the failed attempt left nothing behind in the git directory either
    assert sorted(os.listdir(hooks)) == before
    assert open(os.path.join(root, ".git", "config")).read() == config_before
    git(root, "commit", "-q", "--allow-empty", "-m", "the person's own commit")
    assert "Mallory" not in git(root, "log", "-1", "--format=%B")


def test_hooks_already_in_place_never_run_on_proctors_commit(repo, proctor, tmp_path):
    root = repo()
    subprocess.run(["sh", "-c", PLANT_HOOK], cwd=root, check=True)
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "commit-msg").write_text('#!/bin/sh\necho "Co-Authored-By: Eve <e@example.com>" >> "$1"\n')
    (evil / "commit-msg").chmod(0o755)
    (evil / "post-checkout").write_text(f"#!/bin/sh\ntouch {tmp_path}/post-checkout-ran\n")
    (evil / "post-checkout").chmod(0o755)
    git(root, "config", "core.hooksPath", str(evil))
    git(root, "config", "commit.cleanup", "scissors")
    fork(root, {"id": "feat", "criteria": "# make a ok", "write_paths": ["src/a.py"], "check": "test"})
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_SUMMARY="did it\\nSigned-off-by: M"))
    assert result.code == 0, result.out + result.err
    logged, parsed = trailers_of_every_commit(root)
    assert logged == "" and parsed == ""
    assert git(root, "log", "-1", "--format=%s") == "# make a ok\n", "the subject is verbatim, never cleaned away"
    assert not (tmp_path / "post-checkout-ran").exists(), "no hook runs on the worktree proctor makes"


def test_a_worker_that_commits_itself_fails_and_its_commit_is_not_passed_work(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    before = git(root, "rev-parse", "HEAD").strip()
    shell = "echo stray > README && git add -A && git commit -qm 'work' -m 'Signed-off-by: Mallory <m@example.com>'"
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_SHELL=shell))
    assert result.code == 1
    job = result.json()["jobs"][0]
    assert job["commit"] is None and not job["passed"]
    failures = [f for a in job["attempts"] for f in a.get("failures", [])]
    assert any("HEAD of the attempt's worktree" in f for f in failures), failures
    assert git(root, "rev-parse", "HEAD").strip() == before
    assert rows(root)["feat"]["state"] == "fail"
    logged, parsed = trailers_of_every_commit(root)
    assert "Mallory" not in logged + parsed
    assert open(os.path.join(root, "README")).read() == "hello\n"


def test_a_worker_that_moves_the_branch_fails_with_the_move_named(repo, proctor):
    standin = json.dumps([sys.executable, STANDIN])
    root = repo(config(workers=f'\n[workers.one]\nexecutor = "claude"\ncommand = {standin}\n'))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    shell = (
        'c=$(git commit-tree -p HEAD -m "forged" -m "Signed-off-by: Mallory <m@example.com>" HEAD^{tree}) && '
        "git update-ref refs/heads/main $c"
    )
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_SHELL=shell))
    assert result.code == 1
    failures = [f for a in result.json()["jobs"][0]["attempts"] for f in a.get("failures", [])]
    assert any("moved refs/heads/main" in f for f in failures), failures
    assert rows(root)["feat"]["state"] == "fail" and rows(root)["feat"].get("commit") is None


def test_step_two_cannot_amend_step_one(repo, proctor):
    root = repo()
    steps(root)
    shell = by_lease(
        {
            "root/a": "echo 'ok = 1' > src/a.py",
            "root/b": "echo 'ok = 2' > src/b.py && git add -A && "
            "git commit -q --amend -m 'first' -m 'Signed-off-by: Mallory <m@example.com>'",
        }
    )
    result = proctor("work", "root", "-o", "json", env=standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell))
    assert result.code == 1
    jobs = {j["id"]: j for j in result.json()["jobs"]}
    assert jobs["root/a"]["passed"] and not jobs["root/b"]["passed"]
    assert git(root, "rev-parse", "HEAD").strip() == jobs["root/a"]["commit"]
    logged, parsed = trailers_of_every_commit(root)
    assert "Mallory" not in logged + parsed


# ------------------------------------------------------------------ 3. a failed attempt leaves nothing behind


def test_a_failed_attempts_stray_write_reaches_neither_the_next_attempt_nor_the_person(repo, proctor, tmp_path):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    with open(os.path.join(root, "src", "b.py"), "a") as handle:
        handle.write("# the person's own edit\n")
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    counter = tmp_path / "count"
    shell = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
        f"if [ $n = 1 ]; then echo stray > notes.txt; fi; ls > {tmp_path}/seen-$n"
    )
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_SHELL=shell))
    assert result.code == 0, result.out + result.err
    attempts = result.json()["jobs"][0]["attempts"]
    assert [a["passed"] for a in attempts] == [False, True]
    assert any("notes.txt changed outside the write paths" in f for f in attempts[0]["failures"])
    assert "notes.txt" not in (tmp_path / "seen-2").read_text(), "attempt 2 started on the checkpoint"
    assert not os.path.exists(os.path.join(root, "notes.txt"))
    assert open(os.path.join(root, "src", "b.py")).read() == "x = 1\n# the person's own edit\n"
    assert git(root, "status", "--porcelain").strip() == "M src/b.py"


def test_a_pass_never_overwrites_what_the_person_changed_meanwhile(repo, proctor, tmp_path):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    target = os.path.join(root, "src", "a.py")
    shell = f"printf 'the person typed this\\n' > {target}"
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_SHELL=shell))
    assert result.code == 2 and "not landed" in result.err and "never overwrites your work" in result.err
    assert open(target).read() == "the person typed this\n"
    assert rows(root)["feat"]["state"] == "declared"


# ------------------------------------------------------------------ 5. one runner per job, slots


def _spawn_work(root: str, job: str, env: dict, *extra: str) -> subprocess.Popen:
    full = dict(os.environ)
    full.update({k: v for k, v in env.items() if v is not None})
    for key, value in env.items():
        if value is None:
            full.pop(key, None)
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "work", job, *extra],
        cwd=root,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def _tagged_alive(tag_file: str) -> list[int]:
    """Processes whose environment carries the marker the stand-in's descendants are given."""
    marker = open(tag_file).read().strip().encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if marker in handle.read().split(b"\0"):
                    with open(f"/proc/{entry}/stat") as stat:
                        if stat.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(entry))
        except OSError:
            continue
    return found


ESCAPE = (
    "export STANDIN_MARK=mark-$$; echo STANDIN_MARK=mark-$$ > {mark}; "
    "setsid sh -c 'sleep 300' & (sh -c 'setsid sleep 300 &' &) ; echo started > {ready}"
)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_no_survivor_and_a_record_when_proctor_itself_is_stopped(repo, tmp_path, how):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    mark, ready = tmp_path / "mark", tmp_path / "ready"
    env = standin_env(
        STANDIN_MODE="hang_after",
        STANDIN_SHELL=ESCAPE.format(mark=mark, ready=ready),
        STANDIN_STREAM="",
        STANDIN_APPEND=json.dumps(
            {
                "type": "assistant",
                "parent_tool_use_id": None,
                "message": {"content": [{"type": "text", "text": "halfway there"}]},
            }
        ),
    )
    proc = _spawn_work(root, "feat", env)
    try:
        _wait_for(lambda: ready.exists())
        _wait_for(lambda: _tagged_alive(str(mark)))
        time.sleep(1.0)  # the stream has been read
        # a second runner on the same job is refused, naming the first
        second = subprocess.run(
            [sys.executable, "-m", "proctor", "work", "feat"],
            cwd=root,
            capture_output=True,
            text=True,
            env=dict(os.environ, **{k: v for k, v in env.items() if v is not None}),
        )
        assert second.returncode == 2 and f"pid {proc.pid}" in second.stderr, second.stderr
        os.kill(proc.pid, how)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    if how != signal.SIGKILL:
        assert proc.returncode == 128 + how, (proc.returncode, proc.stderr.read())
    _wait_for(lambda: not _tagged_alive(str(mark)), timeout=30)
    attempts = _wait_for(lambda: api_attempts(root))
    assert attempts[-1]["outcome"] == "interrupted"
    assert "halfway there" in (attempts[-1].get("claim") or ""), attempts[-1]
    row = _wait_for(lambda: (r := rows(root)["feat"]) and r.get("worker_pid") is None and r)
    assert row["state"] == "declared"
    assert _wait_for(lambda: git(root, "worktree", "list").count("\n") == 1)


def api_attempts(root: str) -> list[dict]:
    from proctor.workers.work import attempts_of
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        return attempts_of(ws, "feat")


@machine_slots
def test_slots_bound_the_workers_of_one_cli_on_the_machine(repo, tmp_path):
    standin = json.dumps([sys.executable, STANDIN])
    root = repo(config(workers=f'\n[workers.one]\nexecutor = "claude"\ncommand = {standin}\nslots = 1\n'))
    fork(root, {"id": "x", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    fork(root, {"id": "y", "criteria": "make b", "write_paths": ["src/b.py"], "check": "b"})
    first = _spawn_work(root, "x", standin_env(STANDIN_MODE="slow:0.03"))
    try:
        lock = os.path.join("/tmp", f"proctor-slots-{os.getuid()}", "claude", "0.lock")  # machine-wide, per user

        def held() -> bool:
            import fcntl

            try:
                with open(lock) as handle:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except FileNotFoundError:
                return False
            except OSError:
                return True
            return False

        _wait_for(held)
        time.sleep(0.5)
        second = _spawn_work(root, "y", standin_env(STANDIN_MODE="", STANDIN_WRITE="src/b.py=ok\\n"))
        out, err = second.communicate(timeout=120)
        assert "waiting for a claude slot (1 on this machine, held by pid" in out + err, out + err
        assert second.returncode == 0 and first.wait(timeout=60) == 0, out + err
        # y was graded on the tree it started from and landed beside x, which proctor landed meanwhile
        assert git(root, "log", "--format=%s").splitlines()[:2] == ["make b", "make a ok"]
    finally:
        first.kill()
        first.wait()


# ------------------------------------------------------------------ 9. what a person sees and keeps


def test_retry_works_a_failed_job_again_and_keeps_its_history(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    failed = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_WRITE="src/a.py=nope\\n"))
    assert failed.code == 1 and rows(root)["feat"]["state"] == "fail"
    again = proctor("work", "feat", env=standin_env())
    assert again.code == 2 and "--retry" in again.err
    retried = proctor("work", "feat", "--retry", "-o", "json", env=standin_env())
    assert retried.code == 0, retried.out + retried.err
    row = rows(root)["feat"]
    assert row["state"] == "pass" and row["previous_verdicts"][0]["verdict"] == "fail"
    numbers = [a["number"] for a in api_attempts(root)]
    assert numbers == sorted(numbers) and len(numbers) >= 3


def test_a_later_attempt_resumes_the_session_with_the_gate_failures(repo, proctor, tmp_path):
    root = repo(
        config(
            workers=f'\n[workers]\nattempts = 2\n[workers.one]\nexecutor = "claude"\n'
            f"command = {json.dumps([sys.executable, STANDIN])}\n"
        )
    )
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    log = tmp_path / "argv.log"
    counter = tmp_path / "count"
    shell = (
        f"n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter}; "
        f'if [ $n = 2 ]; then echo "ok = 1" > src/a.py; fi'
    )
    result = proctor(
        "work", "feat", "-o", "json", env=standin_env(STANDIN_WRITE="", STANDIN_SHELL=shell, STANDIN_ARGV_LOG=str(log))
    )
    assert result.code == 0, result.out + result.err
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert "--resume" not in runs[0]
    resumed = runs[1][runs[1].index("--resume") + 1]
    assert resumed == result.json()["jobs"][0]["attempts"][0]["session"]
    prompt = runs[1][runs[1].index("-p") + 1]
    assert "did not pass its gates" in prompt and "nothing changed since" in prompt


def test_status_is_the_filed_results_never_guessed_from_prose(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    stream = tmp_stream = os.path.join(root, "..", "prose.jsonl")
    with open(tmp_stream, "w") as handle:
        handle.write(
            json.dumps(
                {
                    "type": "result",
                    "subtype": "success",
                    "session_id": "s1",
                    "result": "The status done by the last worker was wrong; I am BLOCKED",
                }
            )
            + "\n"
        )
    result = proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_STREAM=stream))
    assert result.json()["jobs"][0]["attempts"][0]["status"] == "unknown"


def test_ls_attempts_shows_the_claim_the_gates_and_prints_the_stream(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_WRITE="src/a.py=nope\\n"))
    listed = proctor("ls", "attempts", "feat")
    assert "gate: " in listed.out and "src/a.py" not in "" and "stream: sha256:" in listed.out
    assert "claim (not verified):" in listed.out
    printed = proctor("ls", "attempts", "feat", "--stream", "1")
    assert printed.code == 0
    with open(CLAUDE) as handle:
        expected = "".join(line for line in handle if line.strip())
    assert expected in printed.out
    missing = proctor("ls", "attempts", "feat", "--stream", "9")
    assert missing.code != 0 and "no stream kept for attempt 9" in missing.err


def test_the_live_line_in_words_fits_the_terminal_and_a_heartbeat_without_one(monkeypatch):
    import io

    from proctor.cli import work_cmd

    assert (
        work_cmd.words(
            json.dumps(
                {
                    "type": "assistant",
                    "message": {
                        "content": [{"type": "tool_use", "name": "Bash", "input": {"command": "proctor run test"}}]
                    },
                }
            )
        )
        == "runs Bash: proctor run test"
    )
    assert (
        work_cmd.words(json.dumps({"type": "system", "subtype": "hook_started", "hook_name": "Stop"}))
        == "hook Stop starts"
    )
    assert work_cmd.words('{"type":"step_start"}') == "step start"
    monkeypatch.setattr(work_cmd, "HEARTBEAT", 1.0)
    out = io.StringIO()
    display = work_cmd.Display(out)
    display(
        "start",
        {
            "job": "feat",
            "worker": "w",
            "executor": "claude",
            "attempt": 1,
            "rung": 1,
            "rungs": 1,
            "worktree": "/tmp/x",
            "idle": 900,
            "grace": 60,
            "wall": 3600,
            "spend": None,
        },
    )
    time.sleep(2.5)
    display.close()
    beats = [line for line in out.getvalue().splitlines() if "silent" in line]
    assert beats and "idle stop in" in beats[0] and "attempt 1 w" in beats[0]

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(work_cmd.shutil, "get_terminal_size", lambda fallback: os.terminal_size((40, 10)))
    tty = Tty()
    display = work_cmd.Display(tty)
    display(
        "start",
        {
            "job": "feat",
            "worker": "w",
            "executor": "claude",
            "attempt": 1,
            "rung": 1,
            "rungs": 1,
            "worktree": "/tmp/x",
            "idle": 900,
            "grace": 60,
            "wall": 3600,
            "spend": None,
        },
    )
    time.sleep(1.5)
    display.close()
    live = [part for part in tty.getvalue().split("\r\x1b[K") if part and not part.endswith("\n")]
    assert live and all(len(part) <= 39 for part in live)


def test_a_prompt_too_long_for_one_argument_goes_in_a_file_the_short_prompt_names(repo, proctor, tmp_path):
    root = repo()
    criteria = "make a ok\n\n" + "a detail the worker must read. " * 6000  # ~190 KB: over MAX_ARG_STRLEN
    fork(root, {"id": "feat", "criteria": criteria, "write_paths": ["src/a.py"], "check": "test"})
    log = tmp_path / "argv.log"
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        prompts = os.path.join(ws.state_dir, "prompts")
    seen = tmp_path / "seen"
    seen.mkdir()
    # the worker reads the file while it runs (proctor deletes it once the attempt is over)
    result = proctor(
        "work",
        "feat",
        "-o",
        "json",
        env=standin_env(STANDIN_ARGV_LOG=str(log), STANDIN_SHELL=f"cp {prompts}/*.md {seen}/"),
    )
    assert result.code == 0, result.out + result.err
    argv = json.loads(log.read_text().splitlines()[0])
    prompt = argv[argv.index("-p") + 1]
    assert len(prompt.encode()) < 100_000 and "Your instructions are too long" in prompt
    named = prompt.split("they are in the file ", 1)[1].split(". Read", 1)[0]
    with open(seen / os.path.basename(named), encoding="utf-8") as handle:
        whole = handle.read()
    assert whole.startswith("lease: feat\n") and criteria.splitlines()[-1].strip() in whole
    assert not os.path.exists(named)


def test_stderr_is_kept_and_nothing_is_left_in_the_state_directory(repo, proctor):
    root = repo()
    fork(
        root,
        {"id": "feat", "criteria": "make a ok\n\n" + "detail " * 30000, "write_paths": ["src/a.py"], "check": "test"},
    )
    assert proctor("work", "feat", "-o", "json", env=standin_env(STANDIN_MODE="stderr_ticks:2")).code == 0
    printed = proctor("ls", "attempts", "feat", "--stream", "1", "--stderr")
    assert printed.code == 0 and printed.out == "thinking 0\nthinking 1\n"
    assert "stderr: sha256:" in proctor("ls", "attempts", "feat").out
    from proctor.workspace import Workspace

    with Workspace(root) as ws:
        for leftover in ("streams", "prompts", "landing"):
            place = os.path.join(ws.state_dir, leftover)
            assert not os.path.isdir(place) or os.listdir(place) == [], (leftover, os.listdir(place))
