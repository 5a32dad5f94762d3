"""The guard and the worker with the real Gemini CLI 0.61.0 against a scripted model.

Gemini CLI is pointed at the scripted model (the Gemini API, tests/hosts/gemini_api.py) with
`GOOGLE_GEMINI_BASE_URL` and `GEMINI_API_KEY=dummy`, its auth type chosen in the test's own
`$HOME/.gemini/settings.json`, into which the JSON `proctor describe harness --host gemini`
prints is merged as it is (user settings: always loaded), or written into the repository's
`.gemini/settings.json` (project settings: loaded only in a trusted folder). Each test asserts
what the model was told (a deny arrives as the tool's result, `Tool execution blocked:
<reason>`; an advisory inside the result as `<hook_context>`; an AfterAgent deny as the next
prompt) and what is on disk.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

from tests.hosts.conftest import (
    CI_EVENT,
    followup_rows,
    fork_and_take,
    git,
    host_binary,
    json_lines,
    make_followup,
    monitor_add,
    server,
    wiring_json,
)
from tests.hosts.model import HttpError, ScriptedModel, Tool, Turn
from tests.hosts.gemini_api import Gemini

JOB = "plan/w1"
AUTH = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
BLOCKED = "Tool execution blocked: deny [lease-write-scope]: src/b.py is outside the write paths of plan/w1"


def user_settings(env, *parts: dict) -> str:
    """~/.gemini/settings.json of the test's HOME: the auth type, then each part merged in."""
    settings: dict = {}
    for part in (AUTH, *parts):
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(settings.get(key), dict):
                settings[key] = {**settings[key], **value}
            else:
                settings[key] = value
    path = os.path.join(env.home, ".gemini", "settings.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)
    return path


def wire_project(repo: str, commit: bool = True) -> None:
    """Exactly the printed wiring in the repository's .gemini/settings.json, committed so the
    jobs' diffs do not carry it."""
    os.makedirs(os.path.join(repo, ".gemini"), exist_ok=True)
    with open(os.path.join(repo, ".gemini", "settings.json"), "w", encoding="utf-8") as handle:
        json.dump(wiring_json("gemini"), handle, indent=2)
    if commit:
        git(repo, "add", ".gemini/settings.json")
        git(repo, "commit", "-q", "-m", "gemini wiring")


def model_env(model: ScriptedModel, tmp: str, lease: str | None = JOB) -> dict:
    extra = {"GOOGLE_GEMINI_BASE_URL": model.url, "GEMINI_API_KEY": "dummy", "TMPDIR": tmp}
    if lease:
        extra["BAGGAGE"] = f"proctor.lease={lease}"
    return extra


def run_gemini(
    env,
    repo: str,
    model: ScriptedModel,
    tmp,
    prompt: str = "do the task",
    lease: str | None = JOB,
    args: tuple = ("--skip-trust",),
    extra: dict | None = None,
    timeout: float = 180,
):
    """`gemini -p` in `repo`, headless and approving every call; (process, stream events).
    Headless Gemini exits 55 in an untrusted folder whatever is wired; `--skip-trust` (the
    default here) runs there with the user's settings only."""
    gemini = host_binary("gemini")
    variables = model_env(model, str(tmp), lease)
    variables.update(extra or {})
    argv = [gemini, "-p", prompt, "--output-format", "stream-json", "--approval-mode", "yolo", *args]
    proc = env.run(argv, cwd=repo, extra=variables, timeout=timeout)
    return proc, json_lines(proc.stdout)


def shell(command: str, **more) -> Tool:
    return Tool("run_shell_command", {"command": command, "description": "scripted command", **more})


def read(repo: str, path: str) -> str:
    with open(os.path.join(repo, path), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture
def tmp(tmp_path):
    path = tmp_path / "tmp"
    path.mkdir()
    return path


# --- the guard, wired in the user's settings (always loaded) ----------------------------------


def test_writes_outside_the_lease_are_denied_and_own_writes_pass(host_env, host_repo, tmp):
    host_binary("gemini")
    user_settings(host_env, wiring_json("gemini"))
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    src = os.path.join(host_repo, "src")
    steps = [
        Turn(text="Writing b.", tools=[shell("echo 'B = 2' > src/b.py")]),  # 0
        Turn(tools=[shell("echo 'B = 3' > b.py", dir_path="src")]),  # 1: dir_path, relative
        Turn(tools=[shell("echo 'B = 4' > b.py", dir_path=src)]),  # 2: dir_path, absolute
        Turn(tools=[Tool("write_file", {"file_path": "src/b.py", "content": "B = 5\n"})]),  # 3
        Turn(
            tools=[
                Tool(
                    "replace",
                    {
                        "file_path": os.path.join(host_repo, "src/b.py"),
                        "old_string": "B = 1",
                        "new_string": "B = 6",
                        "instruction": "scripted edit",
                    },
                )
            ]
        ),  # 4
        Turn(tools=[Tool("write_file", {"file_path": "src/a.py", "content": "A = 2\n"})]),  # 5: own
        Turn(tools=[shell("echo 'A = 3' > a.py", dir_path="src")]),  # 6: own, from src/
        Turn(
            tools=[
                Tool(
                    "replace",
                    {
                        "file_path": "src/a.py",
                        "old_string": "A = 3",
                        "new_string": "A = 4",
                        "instruction": "scripted edit",
                    },
                )
            ]
        ),  # 7: own
        Turn(text="finished"),
    ]
    with ScriptedModel(Gemini(), steps) as model:
        proc, events = run_gemini(host_env, host_repo, model, tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert model.consumed() == len(steps), model.summary()
        for step in range(5):
            told = model.told_after(step)
            assert BLOCKED in told, (step, told)
            assert "(acting under lease plan/w1, from env)" in told
        for step in (5, 6, 7):
            assert "Tool execution blocked" not in model.told_after(step), model.told_after(step)
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert read(host_repo, "src/a.py") == "A = 4\n"
    results = [e for e in events if e.get("type") == "tool_result"]
    assert [r["status"] for r in results] == ["error"] * 5 + ["success"] * 3, results
    assert events[-1]["type"] == "result" and events[-1]["status"] == "success"


def test_advisories_reach_the_model(host_env, host_repo, tmp):
    """A BeforeTool advisory (what this command writes cannot be told) is carried to the
    AfterTool answer of the same call, the only place Gemini hands additionalContext to the
    model; the person sees it as systemMessage. A second identical call is advised once, not
    twice: each carry is taken by its own call."""
    host_binary("gemini")
    user_settings(host_env, wiring_json("gemini"))
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    command = "T=src/a.py; echo 'A = 2' > \"$T\""
    steps = [
        Turn(tools=[shell(command)]),
        Turn(tools=[shell("echo plain")]),
        Turn(tools=[shell(command)]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Gemini(), steps) as model:
        proc, events = run_gemini(host_env, host_repo, model, tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        first, plain, again = model.told_after(0), model.told_after(1), model.told_after(2)
    advice = "advise [lease-write-scope]: cannot tell what this writes"
    assert "<hook_context>" in first and advice in first, first
    assert "plan/w1 may write only src/a.py" in first
    assert advice not in plain and "<hook_context>" not in plain, plain
    assert again.count(advice) == 1, again
    assert read(host_repo, "src/a.py") == "A = 2\n"  # an advisory does not stop the call
    carried = os.path.join(host_env.home, ".cache", "proctor", "gemini-advice")
    assert not os.path.isdir(carried) or os.listdir(carried) == [], os.listdir(carried)


def test_after_agent_deny_hands_the_followup_as_the_next_prompt(host_env, host_repo, tmp):
    host_binary("gemini")
    user_settings(host_env, wiring_json("gemini"))
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    make_followup(host_repo, JOB, "CI-RED: test_b failed on main")
    steps = [
        Turn(tools=[shell("echo working")]),
        Turn(text="first answer"),
        Turn(tools=[shell("echo again")]),
        Turn(text="handled the follow-up"),
    ]
    with ScriptedModel(Gemini(), steps) as model:
        proc, events = run_gemini(host_env, host_repo, model, tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        told = model.told_after(1)
        assert model.consumed() == 4, model.summary()
    assert re.search(r"deny \[monitor-followup\]: Follow-up \d+ from the monitors of job plan/w1 \(1 event\)", told), (
        told
    )
    assert "CI-RED: test_b failed on main" in told
    warnings = [e for e in events if e.get("type") == "error"]
    assert any("CI-RED" in e.get("message", "") for e in warnings), warnings
    assert events[-1]["type"] == "result" and events[-1]["status"] == "success"


# --- wiring and trust: project settings load only in a trusted folder -------------------------


def doctor_line(env, repo: str, extra: dict | None = None) -> str:
    proc = env.proctor("doctor", cwd=repo, extra=extra)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if "hook wiring for gemini" in line]
    assert lines, proc.stdout + proc.stderr
    return lines[0]


def deny_b_steps() -> list:
    return [Turn(tools=[shell("echo 'B = 2' > src/b.py")]), Turn(text="finished")]


def test_project_wiring_in_an_untrusted_folder_never_runs_and_doctor_says_so(host_env, host_repo, tmp):
    host_binary("gemini")
    user_settings(host_env)
    wire_project(host_repo)
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    line = doctor_line(host_env, host_repo)
    assert "trusted folder" in line and "GEMINI_CLI_TRUST_WORKSPACE=true" in line, line
    assert line.startswith("FAIL"), line
    with ScriptedModel(Gemini(), deny_b_steps()) as model:
        proc, _ = run_gemini(host_env, host_repo, model, tmp, args=())
        assert proc.returncode == 55, (proc.returncode, proc.stderr[-2000:])
        assert model.main_requests() == []
        # --skip-trust runs, but without the project's settings: the guard never sees the write
        proc, _ = run_gemini(host_env, host_repo, model, tmp, args=("--skip-trust",))
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Tool execution blocked" not in model.told_after(0), model.told_after(0)
    assert read(host_repo, "src/b.py") == "B = 2\n"


@pytest.mark.parametrize("how", ["trusted-folders", "environment"])
def test_project_wiring_in_a_trusted_folder_runs(host_env, host_repo, tmp, how):
    host_binary("gemini")
    user_settings(host_env)
    wire_project(host_repo)
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    extra = {}
    if how == "trusted-folders":
        with open(os.path.join(host_env.home, ".gemini", "trustedFolders.json"), "w", encoding="utf-8") as handle:
            json.dump({os.path.realpath(host_repo): "TRUST_FOLDER"}, handle)
    else:
        extra = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}
    line = doctor_line(host_env, host_repo, extra=extra)
    assert line.startswith("ok"), line
    assert "present in " + os.path.join(host_repo, ".gemini", "settings.json") in line and "trusted by" in line, line
    with ScriptedModel(Gemini(), deny_b_steps()) as model:
        proc, _ = run_gemini(host_env, host_repo, model, tmp, args=(), extra=extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert BLOCKED in model.told_after(0), model.told_after(0)
    assert read(host_repo, "src/b.py") == "B = 1\n"


def test_project_wiring_loads_only_where_gemini_starts(host_env, host_repo, tmp):
    """Gemini reads `.gemini/settings.json` of the folder it starts in, not of the repository
    root: started in src/, even a trusted checkout runs without the project's hooks (what the
    printed wiring says; user settings have no such gap)."""
    host_binary("gemini")
    user_settings(host_env)
    wire_project(host_repo)
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    steps = [Turn(tools=[shell("echo 'B = 2' > b.py")]), Turn(text="finished")]
    with ScriptedModel(Gemini(), steps) as model:
        proc, _ = run_gemini(
            host_env, os.path.join(host_repo, "src"), model, tmp, args=(), extra={"GEMINI_CLI_TRUST_WORKSPACE": "true"}
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Tool execution blocked" not in model.told_after(0), model.told_after(0)
    assert read(host_repo, "src/b.py") == "B = 2\n"


# --- the executor's own argv and env: the guard handed by proctor, nothing wired --------------


@pytest.fixture
def root_owned_state(host_env, monkeypatch):
    """proctor's state and cache in a directory root owns all the way up, closed to group and
    others (not under /tmp): where Gemini CLI loads a system settings file from. Only as root."""
    import shutil
    import tempfile

    if os.geteuid() != 0:
        reason = "Gemini CLI loads proctor's system settings only for a worker run as root"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    place = os.path.join(os.path.expanduser("~"), ".cache")
    os.makedirs(place, exist_ok=True)
    base = tempfile.mkdtemp(prefix="proctor-gemini-test-", dir=place)
    for name, value in (
        ("PROCTOR_STATE_DIR", os.path.join(base, "state")),
        ("XDG_CACHE_HOME", os.path.join(base, "cache")),
    ):
        host_env.env[name] = value
        monkeypatch.setenv(name, value)
    from proctor.workers.executors import gemini

    handed, why = gemini.hooks_handed()
    if not handed:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{place}: {why}")
        pytest.skip(f"{place}: {why}")
    yield base
    shutil.rmtree(base, ignore_errors=True)


def init_store(env, repo: str) -> None:
    """The store in the new state directory; proctor.toml as the repository had it."""
    from tests.hosts.conftest import HOST_CONFIG

    assert env.proctor("init", "--force", cwd=repo).returncode == 0
    with open(os.path.join(repo, "proctor.toml"), "w", encoding="utf-8") as handle:
        handle.write(HOST_CONFIG)
    git(repo, "add", "-A")
    if git(repo, "status", "--porcelain"):
        git(repo, "commit", "-q", "-m", "proctor")


def start_worker(
    env,
    repo: str,
    model: ScriptedModel,
    tmp,
    prompt: str = "do the task",
    command: list | None = None,
    timeout: float = 180,
):
    """A worker as proctor starts it: the executor's argv and env(lease), in an environment
    with no BAGGAGE and no proctor on PATH (the pinned hooks need neither)."""
    from proctor.config import Worker
    from proctor.workers.executors import gemini

    argv = gemini.argv(Worker("gm", "gemini", command, None, None, None), prompt, lease=JOB)
    if argv[0] == "gemini":
        argv[0] = host_binary("gemini")
    variables = model_env(model, str(tmp), lease=None)
    variables.update(gemini.env(JOB))
    variables["PATH"] = os.pathsep.join(
        p for p in env.env["PATH"].split(os.pathsep) if p != os.path.dirname(sys.executable)
    )
    proc = env.run(argv, cwd=repo, extra=variables, timeout=timeout)
    return proc, json_lines(proc.stdout), variables


@pytest.mark.parametrize("checkout_says", ["nothing", "hooks off"])
def test_executor_env_hands_the_guard_with_nothing_wired(host_env, host_repo, tmp, root_owned_state, checkout_says):
    """No hook in the person's settings or the checkout's: the worker's environment points
    Gemini at system settings proctor wrote, and its write outside the lease is denied, its own
    passes. A trusted checkout whose settings turn hooks off, or disable proctor's by command,
    has no say: system settings outrank it, and the hooks' names are made for each start."""
    host_binary("gemini")
    init_store(host_env, host_repo)
    user_settings(host_env)  # the auth type only
    if checkout_says == "hooks off":
        from proctor.workers.executors import pinned_hook

        os.makedirs(os.path.join(host_repo, ".gemini"))
        with open(os.path.join(host_repo, ".gemini", "settings.json"), "w", encoding="utf-8") as handle:
            json.dump(
                {"hooksConfig": {"enabled": False, "disabled": ["proctor hook gemini", pinned_hook(JOB, "gemini")]}},
                handle,
            )
        git(host_repo, "add", ".gemini")
        git(host_repo, "commit", "-q", "-m", "a checkout that turns hooks off")
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    steps = [
        Turn(text="Writing b.", tools=[shell("echo 'B = 2' > src/b.py")]),
        Turn(tools=[Tool("write_file", {"file_path": "src/b.py", "content": "B = 5\n"})]),
        Turn(tools=[Tool("write_file", {"file_path": "src/a.py", "content": "A = 2\n"})]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Gemini(), steps) as model:
        proc, events, variables = start_worker(host_env, host_repo, model, tmp)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert model.consumed() == len(steps), model.summary()
        for step in (0, 1):
            assert BLOCKED in model.told_after(step), (step, model.told_after(step))
        assert "Tool execution blocked" not in model.told_after(2), model.told_after(2)
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert read(host_repo, "src/a.py") == "A = 2\n"
    settings = variables["GEMINI_CLI_SYSTEM_SETTINGS_PATH"]
    assert settings.startswith(root_owned_state) and not settings.startswith(host_repo)
    assert "Security Warning" not in proc.stderr and "Invalid configuration" not in proc.stderr, proc.stderr[-2000:]
    assert git(host_repo, "status", "--porcelain", "--", ".gemini") == ""  # nothing written in the checkout


def test_a_command_of_ones_own_still_gets_the_guard(host_env, host_repo, tmp, root_owned_state):
    """`[workers.X] command` keeps its own approval mode (none is added); the hooks come with
    the environment all the same."""
    host_binary("gemini")
    init_store(host_env, host_repo)
    user_settings(host_env)
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    with ScriptedModel(Gemini(), deny_b_steps()) as model:
        proc, _, _ = start_worker(host_env, host_repo, model, tmp, command=[host_binary("gemini"), "--yolo"])
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert BLOCKED in model.told_after(0), model.told_after(0)
    assert read(host_repo, "src/b.py") == "B = 1\n"


# --- proctor work with executor = "gemini" -------------------------------------------------


WORKERS = """
[workers]
ladder = ["flaky", "gm"]

[workers.flaky]
executor = "gemini"

[workers.gm]
executor = "gemini"

[jobs]
idle_minutes = 2
"""


def resumed(record: dict) -> bool:
    return CI_EVENT in json.dumps(record["body"].get("contents"))


def test_work_with_gemini_passes_a_job_and_a_provider_error_does_not_count(host_env, host_repo, tmp, tmp_path):
    """The default command, unattended, in the trusted checkout so the project's hooks load:
    a 429 (the CLI's retries cut to one by general.maxAttempts) moves up the ladder without
    using an attempt; the next worker's write outside the lease is denied, it adds a monitor
    (`proctor monitor add`, its job's secret in its environment) and ends its turn without the
    work: that attempt fails its gates and `proctor work` waits. The real server runs the monitor,
    and its follow-up resumes the session (`gemini --resume <session>`) as a new attempt in the
    same worktree: its own edit passes, it runs `proctor run test` and files `proctor job
    exit`, and the job is graded and committed."""
    host_binary("gemini")
    user_settings(host_env, {"general": {"maxAttempts": 1}})
    wire_project(host_repo, commit=False)
    with open(os.path.join(host_repo, "proctor.toml"), "a", encoding="utf-8") as handle:
        handle.write(WORKERS)
    git(host_repo, "add", "-A")
    git(host_repo, "commit", "-q", "-m", "workers and gemini wiring")
    proc = host_env.proctor(
        "job", "fork", JOB, "--criteria", "set A to 2", "--write-paths", "src/a.py", "--check", "test", cwd=host_repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.dumps({"schema_version": 1, "changed_paths": ["src/a.py"], "status": "done", "summary": "set A to 2"})
    steps = [
        HttpError(429),
        Turn(text="Trying b first.", tools=[shell("echo 'B = 2' > src/b.py")]),
        Turn(tools=[shell(monitor_add(str(tmp_path / "ci-ran")))]),
        Turn(text="CI has to go green first; my monitor will tell me."),
        Turn(
            tools=[
                Tool(
                    "replace",
                    {"file_path": "src/a.py", "old_string": "A = 1", "new_string": "A = 2", "instruction": "set A"},
                )
            ],
            when=resumed,
        ),
        Turn(tools=[shell("proctor run test")]),
        Turn(tools=[shell(f"proctor job exit {JOB} --stdin <<'EOF'\n{result}\nEOF")]),
        Turn(text="Set A = 2 in src/a.py.\n\nDONE"),
    ]
    with ScriptedModel(Gemini(), steps) as model, server(host_env, host_repo):
        started = time.monotonic()
        proc = host_env.proctor(
            "work", JOB, "-o", "json", cwd=host_repo, timeout=400, extra=model_env(model, str(tmp), lease=None)
        )
        took = time.monotonic() - started
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        told = model.told_after(2)
        assert f" on {JOB} every 10s: ci watcher" in told and "blocked" not in told, told
        outcome = json.loads(proc.stdout)
        attempts = outcome["jobs"][0]["attempts"]
        assert [a["worker"] for a in attempts] == ["flaky", "gm", "gm"], attempts
        flaky, gm, again = attempts
        assert flaky["executor"] == "gemini" and flaky["provider_error"] is True and flaky["counts"] is False, flaky
        assert flaky["exit_code"] == 429 % 256, flaky
        assert gm["outcome"] == "finished" and gm["passed"] is False and "followup" not in gm, gm
        assert gm["session"] and gm["reply_kind"] == "success", gm
        assert f"waiting for the monitors of {JOB}: 1 live" in proc.stderr, proc.stderr[-3000:]
        # the follow-up resumed the same session, in the same worktree, and that attempt passed
        handed = [f for f in followup_rows(host_repo, JOB) if f["delivered"]]
        assert len(handed) == 1 and CI_EVENT in handed[0]["text"], followup_rows(host_repo, JOB)
        assert handed[0]["via"] == f"resume:gm:{gm['session']}"
        assert again["followup"] == handed[0]["id"] and again["followup_delivered"] is True, again
        assert again["outcome"] == "finished" and again["passed"] is True and again["status"] == "done", again
        assert model.told_after(1).count(BLOCKED) == 1, model.told_after(1)
        assert "proctor: test exit 0" in model.told_after(5), model.told_after(5)
        assert "Tool execution blocked" not in model.told_after(6), model.told_after(6)
        first = model.main_requests()[1]["body"]["contents"]
        assert any(f"lease: {JOB}" in part.get("text", "") for c in first for part in c.get("parts", [])), first
        request = next(r for r in model.main_requests() if r.get("step") == 4)["body"]["contents"]
        texts = [part.get("text", "") for c in request for part in c.get("parts", [])]
        assert any(f"lease: {JOB}" in t for t in texts), "the resumed session holds the first conversation"
        assert any(CI_EVENT in t for t in texts), texts
        assert model.consumed() == len(steps), model.summary()
        assert took < 240, took
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store, rows

    store = Store(repo_state_dir(find_checkout(host_repo)))
    try:
        with store.read() as conn:
            job = rows.get(conn, JOB)
    finally:
        store.close()
    assert job["state"] == "pass" and job["result"]["summary"] == "set A to 2", job  # filed by the worker
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert git(host_repo, "show", "HEAD:src/a.py") == "A = 2\n"
    assert git(host_repo, "log", "-1", "--format=%s") == "set A to 2\n"
    assert git(host_repo, "status", "--porcelain") == ""


def test_a_sandboxed_gemini_worker_reaches_the_store_through_its_broker_alone(
    host_env, host_repo, tmp, root_owned_state
):
    """The real Gemini CLI as a worker inside its job's Landlock domain (`[sandbox] workers =
    true`), the guard's write-scope and tamper rules off: a write into proctor's state and one
    outside its path are refused by the kernel; its own edit, its `proctor run test` and its
    `proctor job exit` work, the two commands and its hooks run by the broker of its attempt."""
    host_binary("gemini")
    from proctor import sandbox

    if sandbox.kernel_abi() == 0 and os.environ.get("CI") != "true":
        pytest.skip("this kernel offers no Landlock; CI's kernel does, and there this test runs")
    user_settings(host_env, {"general": {"maxAttempts": 1}})
    with open(os.path.join(host_repo, "proctor.toml"), "a", encoding="utf-8") as handle:
        handle.write(
            '\n[workers]\nladder = ["gm"]\nattempts = 1\n\n[workers.gm]\nexecutor = "gemini"\n\n'
            '[jobs]\nidle_minutes = 2\n\n[sandbox]\nmode = "landlock"\nworkers = true\n\n'
            '[guard.rules]\nlease-write-scope = "off"\nlease-tamper = "off"\n'
        )
    git(host_repo, "add", "-A")
    git(host_repo, "commit", "-q", "-m", "a sandboxed gemini worker")
    for argv in (
        ("job", "fork", "plan", "--criteria", "the plan", "--check", "test"),
        (
            "job",
            "fork",
            JOB,
            "--parent",
            "plan",
            "--criteria",
            "set A to 2",
            "--write-paths",
            "src/a.py",
            "--check",
            "test",
        ),
    ):
        proc = host_env.proctor(*argv, cwd=host_repo)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    from proctor.workspace import Workspace

    with Workspace(host_repo) as ws:
        state = ws.state_dir
    result = json.dumps({"schema_version": 1, "changed_paths": ["src/a.py"], "status": "done", "summary": "set A"})
    steps = [
        Turn(tools=[shell("echo 'B = 2' > src/b.py; echo rc=$?")]),
        Turn(tools=[shell(f"echo x >> {state}/planted; echo rc=$?")]),
        Turn(
            tools=[
                Tool(
                    "replace",
                    {"file_path": "src/a.py", "old_string": "A = 1", "new_string": "A = 2", "instruction": "set A"},
                )
            ]
        ),
        Turn(tools=[shell("proctor run test")]),
        Turn(tools=[shell(f"proctor job exit {JOB} --stdin <<'EOF'\n{result}\nEOF")]),
        Turn(text="Set A = 2 in src/a.py.\n\nDONE"),
    ]
    with ScriptedModel(Gemini(), steps) as model:
        proc = host_env.proctor(
            "work", JOB, "-o", "json", cwd=host_repo, timeout=400, extra=model_env(model, str(tmp), lease=None)
        )
        told = [model.told_after(n) for n in range(5)]
    assert proc.returncode == 0, "\n--\n".join(told) + proc.stdout[-3000:] + proc.stderr[-3000:]
    for n in (0, 1):
        assert "rc=0" not in told[n] and "Permission denied" in told[n] and "blocked" not in told[n], told[n]
    assert "proctor: test exit 0" in told[3], told[3]
    assert "Tool execution blocked" not in told[4], told[4]
    assert not os.path.exists(os.path.join(state, "planted"))
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert git(host_repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/a.py"]
    from proctor import trail

    with Workspace(host_repo) as ws, ws.store.read() as tx:
        [brokered] = trail.events(tx, JOB, "sandbox_broker")
    assert brokered["data"]["served"] >= 2 * 5 + 2 and brokered["data"]["refused"] == [], brokered
