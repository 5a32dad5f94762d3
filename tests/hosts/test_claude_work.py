"""`proctor work` with the real Claude Code 2.1.332 against a scripted model.

The worker is configured as a person would (`[workers.claude] executor = "claude"`, the
default command, `claude` found on PATH) and `proctor work <job>` runs as a real process.
The checkout wires no hooks: proctor hands the worker its hooks itself (`--settings`), so
every tool call is judged under the job's lease. Each test asserts what the scripted model
was told, what landed in the repository and the store, and, for the stops, that no process
of the worker is left: not claude, not the shells it runs each in a session of its own.
"""

from __future__ import annotations

import json
import os
import random
import re

from proctor.store import rows
from proctor.workspace import Workspace
from tests.hosts.conftest import git, host_binary
from tests.hosts.model import Anthropic, ScriptedModel, Stall, Tool, Turn, flatten

OUTPUT_REF = re.compile(r"run (run-[0-9A-Za-z-]+), output_ref (sha256:[0-9a-f]{64})")


def claude_env(model: ScriptedModel) -> dict:
    return {
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def declare(env, repo: str, jobs: str = "", claude_settings: dict | None = None) -> None:
    """One claude worker with its default command; the job `feat` on src/a.py, checked by
    `test`, declared but not taken (proctor work takes it). `claude_settings` is committed as
    the checkout's .claude/settings.json; by default the checkout has none."""
    host_binary("claude")
    with open(os.path.join(repo, "proctor.toml"), "a", encoding="utf-8") as handle:
        handle.write(
            f'\n[jobs]\n{jobs}\n[workers]\nladder = ["claude"]\nattempts = 1\n\n[workers.claude]\nexecutor = "claude"\n'
        )
    if claude_settings is not None:
        os.makedirs(os.path.join(repo, ".claude"))
        with open(os.path.join(repo, ".claude", "settings.json"), "w", encoding="utf-8") as handle:
            json.dump(claude_settings, handle)
        git(repo, "add", ".claude/settings.json")
    git(repo, "commit", "-q", "-am", "a claude worker")
    proc = env.proctor(
        "job",
        "fork",
        "feat",
        "--criteria",
        "make A two\n\nscripted",
        "--write-paths",
        "src/a.py",
        "--check",
        "test",
        cwd=repo,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "proctor hook" not in json.dumps(claude_settings or {}), "the checkout must wire nothing itself"


def work(env, repo: str, model: ScriptedModel, timeout: float = 240) -> tuple[int, dict, str]:
    proc = env.proctor("work", "feat", "-o", "json", cwd=repo, extra=claude_env(model), timeout=timeout)
    try:
        out = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(
            f"proctor work printed no JSON (exit {proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
        ) from None
    return proc.returncode, out, proc.stderr


def attempts(env, repo: str) -> list[dict]:
    proc = env.proctor("ls", "attempts", "feat", "-o", "json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["attempts"]


def job_row(env, repo: str) -> dict:
    proc = env.proctor("ls", "jobs", "-o", "json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return {job["id"]: job for job in json.loads(proc.stdout)["jobs"]}["feat"]


def tree(repo: str, job: str = "feat") -> str:
    """The worktree proctor work runs the job's attempts in (a real model is told its cwd)."""
    from proctor.workers.work import _worktree_path

    with Workspace(repo) as ws:
        return _worktree_path(ws, job)


def read(repo: str, rel: str) -> str:
    with open(os.path.join(repo, rel), encoding="utf-8") as handle:
        return handle.read()


def first_prompt(model: ScriptedModel) -> str:
    """The prompt proctor gave the worker: the first user message's text block that is not a
    reminder Claude Code added."""
    content = model.main_requests()[0]["body"]["messages"][0]["content"]
    blocks = [content] if isinstance(content, str) else [b.get("text", "") for b in content if isinstance(b, dict)]
    return next((b for b in blocks if not b.startswith("<system-reminder>")), flatten(content))


def exit_citing_the_run(cited: dict, summary: str):
    """A step computed from the request: `proctor job exit feat --stdin` with a result citing the
    run the model was told about (its id and output_ref, kept in `cited`)."""

    def step(record: dict) -> Turn:
        found = OUTPUT_REF.findall(Anthropic().told(record["body"]))
        if not found:  # the check never ran: say so, and let the test's assertions tell why
            return Turn(text="I could not run the check.")
        cited["run"], cited["ref"] = found[-1]
        result = {
            "schema_version": 2,
            "changed_paths": ["src/a.py"],
            "validation": [{"run": cited["run"], "command": "proctor run test", "output_ref": cited["ref"]}],
            "status": "done",
            "summary": summary,
        }
        return Turn(
            tools=[
                Tool(
                    "Bash",
                    {
                        "command": f"proctor job exit feat --stdin <<'EOF'\n{json.dumps(result)}\nEOF",
                        "description": "file the result",
                    },
                )
            ]
        )

    return step


def edit_a(repo: str) -> list[Turn]:
    a = os.path.join(repo, "src", "a.py")
    return [
        Turn(tools=[Tool("Read", {"file_path": a})]),
        Turn(tools=[Tool("Edit", {"file_path": a, "old_string": "A = 1", "new_string": "A = 2"})]),
    ]


def background_sleep() -> tuple[str, list[Turn]]:
    """Two sleeps whose command lines carry a marker no other process has: a background Bash
    task (Claude Code tracks it, and ends it when it is sent SIGTERM in time), and one a
    foreground command detaches with nohup (nobody tracks it; its shell has exited, so it is
    an orphan in a session of its own)."""
    seconds = f"300.{random.randrange(10**8):08d}"
    return seconds, [
        Turn(
            tools=[
                Tool(
                    "Bash",
                    {"command": f"sleep {seconds}", "description": "wait in the background", "run_in_background": True},
                )
            ]
        ),
        Turn(
            tools=[
                Tool("Bash", {"command": f"nohup sleep {seconds}1 >/dev/null 2>&1 &", "description": "detach a sleep"})
            ]
        ),
    ]


def survivors(repo: str, marker: str) -> list[str]:
    """Every live process (zombies have no command line) running in the repository or
    carrying the marker, except this test's own process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if command and (marker in command or cwd == repo or cwd.startswith(repo + os.sep)):
            found.append(f"{entry}: {command[:200]} (in {cwd})")
    return found


# --- 1. edit, run the check, file the result citing the run: graded pass and committed -------


def test_work_edits_runs_its_check_files_its_result_and_is_committed(host_env, host_repo):
    declare(host_env, host_repo)
    cited: dict = {}
    exit_with_result = exit_citing_the_run(cited, "A is two; the check passed")

    steps = edit_a(tree(host_repo)) + [
        Turn(tools=[Tool("Bash", {"command": "proctor run test", "description": "run the job's check"})]),
        exit_with_result,
        Turn(text="Set A to 2, ran the check, filed the result.\nDONE"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        code, out, stderr = work(host_env, host_repo, model)
        # what the model was told: its terms, then each tool's real result (nothing refused)
        prompt = first_prompt(model)
        assert prompt.startswith("lease: feat\n"), prompt[:300]
        assert "proctor run test" in prompt and "proctor job exit feat --stdin" in prompt, prompt
        edited = model.told_after(1)
        assert "[error]" not in edited and "updated successfully" in edited, edited
        ran = model.told_after(2)
        assert "[error]" not in ran and "proctor: test exit 0" in ran and cited.get("ref", "?") in ran, ran
        filed = model.told_after(3)
        assert "[error]" not in filed and "filed the result of feat" in filed, filed
    assert code == 0, json.dumps(out, indent=1) + stderr[-3000:]
    # the repository: one commit on top, carrying the job's path only
    [job] = out["jobs"]
    assert job["passed"] is True and job["commit"], job
    assert git(host_repo, "rev-parse", "HEAD").strip() == job["commit"]
    assert git(host_repo, "show", "--name-only", "--format=%s", "HEAD").split() == ["make", "A", "two", "src/a.py"]
    assert git(host_repo, "show", "HEAD:src/a.py") == "A = 2\n"
    assert git(host_repo, "status", "--porcelain") == ""
    # the store: the result the worker filed, citing its run; one attempt, finished and passed
    row = job_row(host_env, host_repo)
    assert row["state"] == "pass", row
    [attempt] = attempts(host_env, host_repo)
    assert attempt["outcome"] == "finished" and attempt["passed"] is True and attempt["status"] == "done", attempt
    assert attempt["stop"] in (None, "grace") and attempt["session"], attempt
    with Workspace(host_repo) as ws, ws.store.read() as conn:
        result = rows.get(conn, "feat")["result"]
    assert result["validation"][0] == {
        "run": cited["run"],
        "command": "proctor run test",
        "output_ref": cited["ref"],
    }, result
    assert result["status"] == "done" and result["changed_paths"] == ["src/a.py"], result


# --- 2. the guard judges the worker's calls under its lease, with nothing wired by hand ------


def test_worker_write_outside_the_write_paths_is_denied(host_env, host_repo):
    declare(host_env, host_repo)
    b = os.path.join(tree(host_repo), "src", "b.py")
    steps = [
        Turn(tools=[Tool("Write", {"file_path": b, "content": "B = 2\n"})]),
        Turn(tools=[Tool("Bash", {"command": "echo 'B = 3' > src/b.py", "description": "overwrite b"})]),
        *edit_a(tree(host_repo)),
        Turn(text="A is two; b was refused.\nDONE"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        code, out, stderr = work(host_env, host_repo, model)
        told = [model.told_after(0), model.told_after(1), model.told_after(3)]
    for tool, text in zip(("Write", "Bash"), told):
        assert f"[error] PreToolUse:{tool} hook error: " in text, text
        assert "deny [lease-write-scope]: src/b.py is outside the write paths of feat (src/a.py)" in text, text
    assert "[error]" not in told[2] and "updated successfully" in told[2], told[2]
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert code == 0, json.dumps(out, indent=1) + stderr[-3000:]
    assert git(host_repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/a.py"]


def test_a_checkout_turning_hooks_off_does_not_turn_off_the_workers_guard(host_env, host_repo):
    declare(host_env, host_repo, claude_settings={"disableAllHooks": True})
    b = os.path.join(tree(host_repo), "src", "b.py")
    steps = [Turn(tools=[Tool("Write", {"file_path": b, "content": "B = 2\n"})]), Turn(text="DONE")]
    with ScriptedModel(Anthropic(), steps) as model:
        work(host_env, host_repo, model)
        told = model.told_after(0)
    assert "[error] PreToolUse:Write hook error: deny [lease-write-scope]: src/b.py" in told, told
    assert read(host_repo, "src/b.py") == "B = 1\n"


# --- 3. the idle stop and the grace stop leave no process behind -----------------------------


def test_idle_stop_leaves_no_process(host_env, host_repo):
    declare(host_env, host_repo, "idle_minutes = 0.1\n")  # 6 s of silence
    marker, sleeps = background_sleep()
    steps = [*sleeps, Stall(60)]  # the model never answers the next request
    with ScriptedModel(Anthropic(), steps) as model:
        code, out, stderr = work(host_env, host_repo, model)
        started = model.told_after(0)
        detached = model.told_after(1)
        stalled = model.consumed() == 3
    assert "Command running in background" in started, started
    assert "[error]" not in detached, detached
    assert stalled, model.summary()
    [job] = out["jobs"]
    [attempt] = job["attempts"]
    assert attempt["stop"] == "idle" and attempt["reason"] == "stopped: no output for 0.1 minutes", attempt
    assert attempt["counts"] is False and attempt["provider_error"] is True, attempt
    assert code == 1 and job["passed"] is False, job
    assert survivors(host_repo, marker) == [] and survivors(tree(host_repo), marker) == []


def test_grace_stop_leaves_no_process(host_env, host_repo):
    declare(host_env, host_repo, "grace_seconds = 5\n")
    marker, sleeps = background_sleep()
    steps = [*sleeps, *edit_a(tree(host_repo)), Turn(text="A is two.\nDONE")]
    with ScriptedModel(Anthropic(), steps) as model:
        code, out, stderr = work(host_env, host_repo, model)
        started, detached = model.told_after(0), model.told_after(1)
    assert "Command running in background" in started, started
    assert "[error]" not in detached, detached
    [job] = out["jobs"]
    [attempt] = job["attempts"]
    # claude -p stays alive after its result while a background shell runs: the grace window ends it
    assert attempt["stop"] == "grace" and attempt["reason"] == "stopped: 5 s after the final reply", attempt
    assert attempt["outcome"] == "finished" and attempt["reply_kind"] == "success", attempt
    assert survivors(host_repo, marker) == [] and survivors(tree(host_repo), marker) == []
    assert code == 0 and job["passed"] is True, job
    assert git(host_repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/a.py"]


# --- 6. a follow-up of the job's monitors resumes the worker (claude --resume), graded -------


def test_a_followup_resumes_the_claude_worker_as_a_graded_attempt(host_env, host_repo, tmp_path):
    """The Claude worker adds a monitor itself (its pinned hook knows it is a proctor work
    worker: its secret is in its environment, not the hook's) and ends its turn without the
    work; it is not asked to start `proctor monitor wait` (its runner resumes it). The attempt
    fails its gates and `proctor work` waits; the real server runs the monitor, and its
    follow-up resumes the same session (`claude --resume`) as a second attempt that edits,
    checks, files its result and is committed."""
    from tests.hosts.conftest import CI_EVENT, followup_rows, monitor_add, server

    declare(host_env, host_repo, jobs="idle_minutes = 2\n")
    exit_with_result = exit_citing_the_run({}, "A is two once CI spoke")

    resumed = lambda record: CI_EVENT in json.dumps(record["body"])  # noqa: E731
    a = os.path.join(tree(host_repo), "src", "a.py")
    steps = [
        Turn(tools=[Tool("Bash", {"command": monitor_add(str(tmp_path / "ci-ran")), "description": "watch CI"})]),
        Turn(text="CI has to go green first; my monitor will tell me."),
        Turn(tools=[Tool("Edit", {"file_path": a, "old_string": "A = 1", "new_string": "A = 2"})], when=resumed),
        Turn(tools=[Tool("Bash", {"command": "proctor run test", "description": "run the job's check"})]),
        exit_with_result,
        Turn(text="Set A to 2 after CI spoke.\nDONE"),
    ]
    with ScriptedModel(Anthropic(), steps) as model, server(host_env, host_repo):
        code, out, stderr = work(host_env, host_repo, model, timeout=300)
        assert model.consumed() == len(steps), model.summary() + stderr[-3000:]
        added = model.told_after(0)
        assert "on feat every 10s: ci watcher" in added and "deny" not in added, added
        assert all("proctor monitor wait" not in Anthropic().told(r["body"]) for r in model.main_requests())
    assert code == 0, json.dumps(out, indent=1) + stderr[-3000:]
    [job] = out["jobs"]
    first, again = job["attempts"]
    assert first["passed"] is False and first["outcome"] == "finished" and first["session"], first
    assert again["passed"] is True and again["session"] == first["session"], again
    assert "waiting for the monitors of feat: 1 live" in stderr, stderr[-3000:]
    handed = [f for f in followup_rows(host_repo, "feat") if f["delivered"]]
    assert len(handed) == 1 and CI_EVENT in handed[0]["text"], followup_rows(host_repo, "feat")
    assert handed[0]["via"] == f"resume:claude:{first['session']}"
    assert again["followup"] == handed[0]["id"]
    assert git(host_repo, "show", "--name-only", "--format=%s", "HEAD").split() == ["make", "A", "two", "src/a.py"]
    assert git(host_repo, "show", "HEAD:src/a.py") == "A = 2\n"
