"""The guard with the real Claude Code 2.1.332 against a scripted model.

proctor is wired exactly as `proctor describe harness --host claude` prints it, written into
the repository's .claude/settings.json. Each test asserts what the scripted model was told
(a deny arrives as a tool_result with is_error, `PreToolUse:<Tool> hook error: <reason>`;
additionalContext and Stop/SubagentStop block reasons arrive as separate system messages)
and what is on disk.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading

import pytest

from tests.hosts.conftest import fork_and_take, host_binary, make_followup, wiring_json
from tests.hosts.model import Anthropic, ScriptedModel, Stall, Tool, Turn, flatten


def wire(repo: str) -> None:
    """Write exactly the printed wiring into the repository's .claude/settings.json."""
    os.makedirs(os.path.join(repo, ".claude"), exist_ok=True)
    with open(os.path.join(repo, ".claude", "settings.json"), "w", encoding="utf-8") as handle:
        json.dump(wiring_json("claude"), handle, indent=2)


def run_claude(
    env,
    repo: str,
    model: ScriptedModel,
    prompt: str = "go",
    extra: dict | None = None,
    timeout: float = 180,
    results: int = 1,
) -> list[dict]:
    """Run `claude -p` in `repo` against the scripted model until it has printed `results`
    result events (a background agent's end brings a second one); return the stream's events."""
    claude = host_binary("claude")
    if not os.path.exists(os.path.join(repo, ".claude", "settings.json")):
        wire(repo)
    variables = {
        "ANTHROPIC_BASE_URL": model.url,
        "ANTHROPIC_API_KEY": "dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "IS_SANDBOX": "1",
    }
    variables.update(extra or {})
    argv = [
        claude,
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ]
    merged = dict(env.env)
    merged.update(variables)
    merged["PWD"] = repo
    # claude -p stays alive after its result while background shells run; read until the
    # result and end it then (SIGTERM: Claude stops its own background tasks)
    proc = subprocess.Popen(
        argv,
        cwd=repo,
        env=merged,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    events: list[dict] = []
    watchdog = threading.Timer(timeout, _kill_group, (proc.pid, signal.SIGKILL))  # a host that hangs
    watchdog.start()
    try:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            events.append(event)
            if event.get("type") == "result" and sum(e.get("type") == "result" for e in events) >= results:
                break
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
        stderr = proc.stderr.read()
        proc.stderr.close()
    assert sum(e.get("type") == "result" for e in events) >= results, (
        f"claude printed {sum(e.get('type') == 'result' for e in events)} results; stderr: {stderr[-2000:]}"
    )
    return events


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass


def read(repo: str, rel: str) -> str:
    with open(os.path.join(repo, rel), encoding="utf-8") as handle:
        return handle.read()


def first_user(record: dict) -> str:
    """The text of a request's first user message: the -p prompt, or a subagent's prompt."""
    for message in record["body"].get("messages") or []:
        if message.get("role") == "user":
            return flatten(message.get("content"))
    return ""


def sent_by(marker: str):
    """A `when` predicate: the request comes from the (sub)agent whose prompt holds `marker`."""
    return lambda record: marker in first_user(record)


def parent(*markers: str):
    return lambda record: not any(m in first_user(record) for m in markers)


TASK_ID = re.compile(r"running in background with ID: ([A-Za-z0-9_-]+)")


def stop_task(marker: str, seen: dict) -> Turn:
    """A turn calling TaskStop on the background task the (sub)agent was told about; the task
    id is read from the request when it arrives (the script cannot know it in advance)."""
    tool = Tool("TaskStop", {"task_id": "?"}, id=f"taskstop_{marker.lower()}")

    def when(record: dict) -> bool:
        if marker not in first_user(record):
            return False
        found = TASK_ID.findall(json.dumps(record["body"].get("messages") or []))
        if not found:
            return False
        tool.args["task_id"] = seen["task"] = found[-1]
        return True

    return Turn(tools=[tool], when=when)


def jobs(env, repo: str) -> dict:
    proc = env.proctor("ls", "jobs", "-o", "json", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    return {job["id"]: job for job in json.loads(proc.stdout)["jobs"]}


def system_messages(model: ScriptedModel) -> list[str]:
    """Every `role: system` message the host put into a request (additionalContext, Stop and
    SubagentStop block reasons), once each."""
    out: list[str] = []
    for request in model.main_requests():
        for message in request["body"].get("messages") or []:
            if message.get("role") == "system":
                content = message.get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "\n".join(b.get("text", "") for b in content or () if isinstance(b, dict))
                )
                if text not in out:
                    out.append(text)
    return out


# --- 1. a lease denies Write, Edit and Bash writes outside its paths --------------------------


def test_lease_denies_writes_outside_and_passes_own(host_env, host_repo):
    fork_and_take(host_env, host_repo, "feat", "src/a.py")
    b = os.path.join(host_repo, "src", "b.py")
    a = os.path.join(host_repo, "src", "a.py")
    steps = [
        Turn(tools=[Tool("Write", {"file_path": b, "content": "B = 2\n"}, id="write_b")]),
        Turn(tools=[Tool("Read", {"file_path": b}, id="read_b")]),
        Turn(tools=[Tool("Edit", {"file_path": b, "old_string": "B = 1", "new_string": "B = 3"}, id="edit_b")]),
        Turn(tools=[Tool("Bash", {"command": "echo x > src/b.py", "description": "overwrite b"}, id="bash_b")]),
        Turn(tools=[Tool("Write", {"file_path": a, "content": "A = 2\n"}, id="write_a")]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model, extra={"BAGGAGE": "proctor.lease=feat"})
        for step, tool in ((0, "Write"), (2, "Edit"), (3, "Bash")):
            told = model.told_after(step)
            assert f"[error] PreToolUse:{tool} hook error: " in told, told
            assert "deny [lease-write-scope]: src/b.py is outside the write paths of feat (src/a.py)" in told, told
            # a session id is reported, so the checkout's record is not read; BAGGAGE answers
            assert "(acting under lease feat, from env)" in told, told
        own = model.told_after(4)
        assert "[error]" not in own and "hook error" not in own, own
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert read(host_repo, "src/a.py") == "A = 2\n"


# --- 2. an advisory reaches the model --------------------------------------------------------


def test_advisories_reach_the_model(host_env, host_repo):
    proc = host_env.proctor(
        "job", "fork", "feat", "--criteria", "scripted", "--write-paths", "src/a.py", "--check", "test", cwd=host_repo
    )
    assert proc.returncode == 0, proc.stderr
    a = os.path.join(host_repo, "src", "a.py")
    steps = [
        Turn(tools=[Tool("Write", {"file_path": a, "content": "A = 5\n"}, id="write_a_unleased")]),
        Turn(
            tools=[
                Tool(
                    "Bash",
                    {"command": "tail -f src/b.py", "description": "follow b", "run_in_background": True},
                    id="tail_bg",
                )
            ]
        ),
        Turn(text="finished"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model)
        told = model.told_after(0)
        assert "advise [lease-unattributed]: src/a.py belongs to feat (src/a.py)" in told, told
        assert "[error]" not in told
        told = model.told_after(1)
        assert "advise [background-unbounded]" in told and "timeout 120m tail -f src/b.py" in told, told
        systems = system_messages(model)
        assert any("advise [lease-unattributed]" in m for m in systems), systems
        assert any("advise [background-unbounded]" in m for m in systems), systems
    assert read(host_repo, "src/a.py") == "A = 5\n"
    assert jobs(host_env, host_repo)["feat"]["unattributed"][0]["path"] == "src/a.py"


# --- 3. a silent background task is advised, then denied, and forgotten once stopped ---------

SILENT = """
[guard.background-silent]
advise_minutes = 0.03
deny_minutes = 0.1
"""


def test_silent_background_task_advised_denied_then_stopped(host_env, host_repo):
    # thresholds of 1.8 and 6 seconds (the options take any positive number of minutes); the
    # model answers late (a stall) so that the task has been silent that long for real: at
    # least 2.5 s at the first call after the launch (advised unless the host took 3.5 s more),
    # at least 6.5 s at the second (denied); and 6.5 s after the TaskStop, when a task still
    # counted as running would be denied again
    with open(os.path.join(host_repo, "proctor.toml"), "a", encoding="utf-8") as handle:
        handle.write(SILENT)
    seen: dict = {}
    steps = [
        Turn(
            tools=[
                Tool("Bash", {"command": "sleep 300", "description": "wait", "run_in_background": True}, id="sleep_bg")
            ]
        ),
        Stall(
            2.5, then=Turn(tools=[Tool("Bash", {"command": "echo one > one.txt", "description": "one"}, id="echo_one")])
        ),
        Stall(
            4, then=Turn(tools=[Tool("Bash", {"command": "echo two > two.txt", "description": "two"}, id="echo_two")])
        ),
        Turn(tools=[Tool("Bash", {"command": "npm install left-pad", "description": "install"}, id="npm")]),
        Turn(tools=[Tool("Bash", {"command": "ls -la && git status", "description": "look"}, id="look")]),
        stop_task("go", seen),
        Stall(
            6.5,
            then=Turn(
                tools=[Tool("Bash", {"command": "echo three > three.txt", "description": "three"}, id="echo_three")]
            ),
        ),
        Turn(text="finished"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model)
        launched = model.told_after(0)
        task = TASK_ID.search(launched).group(1)
        advised = model.told_after(1)
        assert "advise [background-silent]" in advised and f"task {task} (shell)" in advised, advised
        assert "[error]" not in advised
        denied = model.told_after(2)
        assert "[error] PreToolUse:Bash hook error: deny [background-silent]" in denied, denied
        assert f'TaskStop {{"task_id": "{task}"}}' in denied and "sleep 300" in denied, denied
        # not only the first call: every shell call that is not a read, npm install among them
        npm = model.told_after(3)
        assert "[error] PreToolUse:Bash hook error: deny [background-silent]" in npm, npm
        assert f'TaskStop {{"task_id": "{task}"}}' in npm, npm
        look = model.told_after(4)
        assert "[error]" not in look and "proctor.toml" in look, look  # a read passes
        assert seen["task"] == task
        stopped = model.told_after(5)
        assert "[error]" not in stopped and task in stopped, stopped  # TaskStop's own answer
        after = model.told_after(6)
        assert "[error]" not in after and task not in after and "background-silent" not in after, after
    assert os.path.exists(os.path.join(host_repo, "one.txt"))
    assert not os.path.exists(os.path.join(host_repo, "two.txt"))
    assert os.path.exists(os.path.join(host_repo, "three.txt"))


def test_background_task_that_ended_is_not_named(host_env, host_repo):
    with open(os.path.join(host_repo, "proctor.toml"), "a", encoding="utf-8") as handle:
        handle.write(SILENT)
    steps = [
        Turn(
            tools=[
                Tool("Bash", {"command": "sleep 1", "description": "short", "run_in_background": True}, id="short_bg")
            ]
        ),
        # the task ended at 1 s; this call is judged 3.5 s after that, past the advisory's 1.8 s
        Stall(
            4.5,
            then=Turn(tools=[Tool("Bash", {"command": "echo one > one.txt", "description": "one"}, id="after_end")]),
        ),
        Turn(text="finished"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model)
        task = TASK_ID.search(model.told_after(0)).group(1)
        after = model.told_after(1)
        assert "[error]" not in after and "background-silent" not in after, after
        assert f"task {task}" not in after, after
    assert os.path.exists(os.path.join(host_repo, "one.txt"))


# --- 4. a Stop is blocked with the job's monitor follow-up; the next Stop passes -------------


def test_stop_blocked_with_monitor_followup_then_passes(host_env, host_repo):
    fork_and_take(host_env, host_repo, "feat", "src/a.py")

    def while_working(record: dict) -> bool:
        # the follow-up is made once the session works (past its prompt, which would carry it)
        make_followup(host_repo, "feat", "CI-RED: test_b failed on main")
        return True

    steps = [Turn(text="I am finished.", when=while_working), Turn(text="Handled the follow-up.")]
    with ScriptedModel(Anthropic(), steps) as model:
        events = run_claude(host_env, host_repo, model, extra={"BAGGAGE": "proctor.lease=feat"})
        told = model.told_after(0)
        assert re.search(r"deny \[monitor-followup\]: Follow-up \d+ from the monitors of job feat \(1 event\)", told), (
            told
        )
        # the job's monitor is live and nothing would wake the session: the wait is asked for once
        assert "proctor monitor wait --job feat" in told, told
        assert "ci watcher (monitor 1): CI-RED: test_b failed on main" in told, told
        assert any("CI-RED" in m for m in system_messages(model))
        assert model.consumed() == 2 and len(model.main_requests()) == 2, model.summary()
    result = [e for e in events if e.get("type") == "result"][-1]
    assert result.get("result") == "Handled the follow-up." and result.get("is_error") is False, result
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(host_repo)))
    try:
        delivered = store.tx.execute("SELECT delivered, via FROM followups WHERE job = 'feat'").fetchall()
    finally:
        store.close()
    assert len(delivered) == 1 and delivered[0][0] and delivered[0][1].startswith("stop-hook:claude:"), delivered


# --- 5. a subagent that leaves a background task running is held at its SubagentStop ---------


def test_subagent_stop_blocked_by_background_left(host_env, host_repo):
    seen: dict = {}
    sub = sent_by("HELPER-SUB")
    steps = [
        Turn(
            tools=[
                Tool(
                    "Agent",
                    {
                        "description": "Run a helper",
                        "prompt": "HELPER-SUB run a helper",
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                    id="spawn_helper",
                )
            ],
            when=parent("HELPER-SUB"),
        ),
        Turn(
            tools=[
                Tool(
                    "Bash",
                    {"command": "sleep 300", "description": "helper", "run_in_background": True},
                    id="helper_sleep",
                )
            ],
            when=sub,
        ),
        Turn(text="Subagent finished.", when=sub),
        stop_task("HELPER-SUB", seen),
        Turn(text="Stopped my task; finished.", when=sub),
        Turn(text="All done.", when=parent("HELPER-SUB")),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model)
        task = seen.get("task")
        assert task, model.summary()
        blocked = model.told_after(2)
        assert "deny [background-left]: this subagent started background tasks that are still running" in blocked
        assert f"task {task} (shell)" in blocked and f'TaskStop {{"task_id": "{task}"}}' in blocked, blocked
        # the block went to the subagent (its own request), and its second stop passed
        blocked_request = [r for r in model.main_requests() if r.get("step") == 3][0]
        assert "HELPER-SUB" in first_user(blocked_request)
        assert model.consumed() == len(steps), model.summary()
        blocks = [m for m in system_messages(model) if "deny [background-left]" in m]
        assert len(blocks) == 1, blocks


# --- 6. a subagent spawned with `lease: <id>` is judged under that job from its first call ---


def _declare(env, repo: str, job: str, write_paths: str) -> None:
    proc = env.proctor(
        "job", "fork", job, "--criteria", "scripted", "--write-paths", write_paths, "--check", "test", cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("background", [False, True], ids=["foreground", "background"])
def test_subagent_spawned_with_lease_is_judged_from_its_first_call(host_env, host_repo, background):
    _declare(host_env, host_repo, "plan/w1", "src/a.py")
    marker = "WORKER-SUB"
    sub, main = sent_by(marker), parent(marker)
    b = os.path.join(host_repo, "src", "b.py")
    a = os.path.join(host_repo, "src", "a.py")
    spawn = {
        "description": "Edit the files",
        "prompt": f"lease: plan/w1\n{marker} edit src/a.py",
        "subagent_type": "general-purpose",
        "run_in_background": background,
    }
    # (said either way: without it, this claude -p launches the subagent in the background)
    steps = [
        Turn(tools=[Tool("Agent", spawn, id=f"spawn_{background}")], when=main),
        # the subagent's very first call writes outside its job
        Turn(tools=[Tool("Write", {"file_path": b, "content": "B = 9\n"}, id=f"sub_write_b_{background}")], when=sub),
        Turn(
            tools=[
                Tool("Bash", {"command": "echo 'B = 4' > src/b.py", "description": "b"}, id=f"sub_bash_b_{background}")
            ],
            when=sub,
        ),
        Turn(tools=[Tool("Write", {"file_path": a, "content": "A = 9\n"}, id=f"sub_write_a_{background}")], when=sub),
        Turn(text="Subagent finished.", when=sub),
        Turn(text="Parent finished.", when=main),
    ]
    if background:
        # the parent's follow-up turn once the background agent's notice arrives
        steps.append(Turn(text="Noted the helper's end.", when=main))
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model, results=2 if background else 1)
        for step, tool in ((1, "Write"), (2, "Bash")):
            told = model.told_after(step)
            assert (
                f"[error] PreToolUse:{tool} hook error: deny [lease-write-scope]: src/b.py is outside the "
                f"write paths of plan/w1 (src/a.py)" in told
            ), told
            assert "(acting under lease plan/w1, from agent)" in told, told
        own = model.told_after(3)
        assert "[error]" not in own and "hook error" not in own, own
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert read(host_repo, "src/a.py") == "A = 9\n"
    job = jobs(host_env, host_repo)["plan/w1"]
    # taken as `proctor job exec` takes a job: in this checkout, on this base
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=host_repo, capture_output=True, text=True).stdout.strip()
    assert job["state"] == "running" and os.path.realpath(job["checkout_root"]) == os.path.realpath(host_repo), job
    assert job["base"] == head, job


def test_subagent_of_a_bound_session_acts_under_its_job(host_env, host_repo):
    """A session bound to a job (its `proctor job exec` went through the guard) binds its
    subagents too, unless a subagent is spawned with a job of its own."""
    _declare(host_env, host_repo, "feat", "src/a.py")
    marker = "PLAIN-SUB"
    sub, main = sent_by(marker), parent(marker)
    b = os.path.join(host_repo, "src", "b.py")
    steps = [
        Turn(
            tools=[Tool("Bash", {"command": "proctor job exec feat", "description": "take feat"}, id="exec")], when=main
        ),
        Turn(
            tools=[
                Tool(
                    "Agent",
                    {
                        "description": "Help",
                        "prompt": f"{marker} write b",
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                    id="spawn_plain",
                )
            ],
            when=main,
        ),
        Turn(tools=[Tool("Write", {"file_path": b, "content": "B = 9\n"}, id="plain_write_b")], when=sub),
        Turn(text="Subagent finished.", when=sub),
        Turn(text="Parent finished.", when=main),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model)
        told = model.told_after(2)
        assert (
            "[error] PreToolUse:Write hook error: deny [lease-write-scope]: src/b.py is outside the write "
            "paths of feat (src/a.py)" in told
        ), told
    assert read(host_repo, "src/b.py") == "B = 1\n"


# --- 6. the guard's ground is not the worker's -------------------------------------------------


def test_a_leased_worker_cannot_plant_a_git_hook_or_rewire_the_guard(host_env, host_repo):
    """The forgeries seen from a worker under a lease: a commit-msg hook that would forge the
    trailers of proctor's commit, a hooksPath pointing git at the worker's own hooks, and the
    host's own hook wiring rewritten. Each is refused by the real host's hook; git and the disk
    are the oracle for what did not happen."""
    fork_and_take(host_env, host_repo, "feat", "src/**")
    forge = "printf '#!/bin/sh\\necho Proctor-Job: forged >> \"$1\"\\n' > .git/hooks/commit-msg"
    settings = os.path.join(host_repo, ".claude", "settings.json")
    steps = [
        Turn(tools=[Tool("Bash", {"command": forge, "description": "plant"}, id="plant")]),
        Turn(tools=[Tool("Bash", {"command": "git config core.hooksPath src/hooks", "description": "cfg"}, id="cfg")]),
        Turn(tools=[Tool("Write", {"file_path": settings, "content": "{}"}, id="unwire")]),
        Turn(tools=[Tool("Bash", {"command": "proctor server stop", "description": "stop"}, id="stop")]),
        Turn(tools=[Tool("Bash", {"command": "echo 'A = 2' > src/a.py", "description": "own"}, id="own")]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model, extra={"BAGGAGE": "proctor.lease=feat"})
        for step, tool, rule in (
            (0, "Bash", "lease-tamper"),
            (1, "Bash", "lease-tamper"),
            (2, "Write", "lease-tamper"),
            (3, "Bash", "lease-store"),
        ):
            told = model.told_after(step)
            assert f"[error] PreToolUse:{tool} hook error: deny [" in told and f"deny [{rule}]" in told, (step, told)
        own = model.told_after(4)
        assert "[error]" not in own, own
    assert not os.path.exists(os.path.join(host_repo, ".git", "hooks", "commit-msg"))
    hooks_path = subprocess.run(
        ["git", "config", "--get", "core.hooksPath"], cwd=host_repo, capture_output=True, text=True
    )
    assert hooks_path.returncode == 1 and hooks_path.stdout == "", hooks_path.stdout
    assert json.load(open(settings)) == wiring_json("claude"), "the wiring is the printed one still"
    assert read(host_repo, "src/a.py") == "A = 2\n"


# --- declaration claims: two jobs on one file, each held to its own declaration ------------------

TWO_DECLARATIONS = "import os\n\n\ndef alpha():\n    return 1\n\n\ndef beta():\n    return 2\n"


def test_an_edit_lands_in_its_own_declaration_and_is_refused_in_anothers(host_env, host_repo):
    d = os.path.join(host_repo, "src", "d.py")
    with open(d, "w") as handle:
        handle.write(TWO_DECLARATIONS)
    subprocess.run(["git", "add", "-A"], cwd=host_repo, check=True)
    subprocess.run(["git", "commit", "-qm", "d"], cwd=host_repo, check=True)
    other = host_env.proctor(
        "job",
        "fork",
        "other",
        "--criteria",
        "beta's",
        "--write-paths",
        "src/d.py#def beta",
        "--check",
        "test",
        cwd=host_repo,
    )
    assert other.returncode == 0, other.stderr
    fork_and_take(host_env, host_repo, "feat", "src/d.py#alpha")
    steps = [
        Turn(
            tools=[
                Tool(
                    "Edit",
                    {"file_path": d, "old_string": "    return 2", "new_string": "    return 20"},
                    id="edit_beta",
                )
            ]
        ),
        Turn(tools=[Tool("Write", {"file_path": d, "content": "x = 1\n"}, id="write_d")]),
        Turn(
            tools=[
                Tool(
                    "Edit",
                    {"file_path": d, "old_string": "    return 1", "new_string": "    return 10"},
                    id="edit_alpha",
                )
            ]
        ),
        Turn(text="finished"),
    ]
    with ScriptedModel(Anthropic(), steps) as model:
        run_claude(host_env, host_repo, model, extra={"BAGGAGE": "proctor.lease=feat"})
        told = model.told_after(0)
        assert "[error] PreToolUse:Edit hook error: " in told, told
        assert "deny [lease-claimed-declaration]: src/d.py: this edit lands in the declaration 'def beta():'" in told
        assert "which other claims (src/d.py#def beta" in told, told
        whole = model.told_after(1)
        assert "deny [lease-claimed-declaration]" in whole and "as an edit" in whole, whole
        own = model.told_after(2)
        assert "[error]" not in own and "hook error" not in own, own
    assert read(host_repo, "src/d.py") == TWO_DECLARATIONS.replace("return 1", "return 10")
