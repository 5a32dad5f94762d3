"""opencode 1.18.33 against a scripted chat-completions model, with proctor's guard plugin
installed as `proctor describe harness --host opencode` prints it, and as a `proctor work`
executor.

opencode is pointed at the model by an `@ai-sdk/openai-compatible` provider in
$XDG_CONFIG_HOME/opencode/opencode.json; it takes its project directory from $PWD.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

import pytest

from tests.hosts.chat import Chat
from tests.hosts.conftest import (
    CI_EVENT,
    followup_rows,
    fork_and_take,
    git,
    host_binary,
    json_lines,
    monitor_add,
    server,
    wiring_text,
)
from tests.hosts.model import HttpError, ScriptedModel, Tool, Turn

PROMPT = "do the task"


@pytest.fixture(autouse=True)
def npm_offline(request):
    """opencode installs @opencode-ai/plugin into each config directory holding a plugin and
    waits for it before loading plugins; offline, npm's retries take about 70 s to give up.
    npm_config_offline makes that install fail at once (the plugin needs no package)."""
    if "host_env" in request.fixturenames:
        request.getfixturevalue("host_env").env["npm_config_offline"] = "true"


def scripted_provider(model: ScriptedModel) -> dict:
    """opencode's config with the scripted model as its only model."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "scripted": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "scripted",
                "options": {"baseURL": model.url + "/v1", "apiKey": "unused"},
                "models": {"scripted-model": {"name": "scripted-model"}},
            }
        },
        "model": "scripted/scripted-model",
        "autoupdate": False,
        "share": "disabled",
    }


def configure(env, model: ScriptedModel) -> None:
    """The provider opencode talks to: the scripted model, as its only model."""
    directory = os.path.join(env.env["XDG_CONFIG_HOME"], "opencode")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "opencode.json"), "w") as handle:
        json.dump(scripted_provider(model), handle)


def run_opencode(
    env, cwd: str, prompt: str = PROMPT, extra: dict | None = None, session: str | None = None, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    argv = [host_binary("opencode"), "run", "--format", "json", "--auto"]
    if session:
        argv += ["--session", session]
    proc = env.run(argv + [prompt], cwd=cwd, extra=extra, timeout=timeout)
    return proc, json_lines(proc.stdout)


def tool_uses(events: list[dict]) -> list[dict]:
    return [e["part"] for e in events if e.get("type") == "tool_use"]


def install_printed_plugin(repo: str) -> str:
    """The plugin exactly as `describe harness --host opencode` prints it, where opencode loads it."""
    path = os.path.join(repo, ".opencode", "plugins", "proctor.js")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(wiring_text("opencode"))
    return path


def read(repo: str, path: str) -> str:
    with open(os.path.join(repo, path)) as handle:
        return handle.read()


# --- the chat-completions dialect itself (no host) ---------------------------------------------


def _post(url: str, body: dict) -> tuple[str, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers.get("Content-Type"), response.read()


def test_chat_dialect_streams_chunks_and_answers_whole():
    steps = [Turn(text="Running.", tools=[Tool("bash", {"command": "echo hi"})]), Turn(text="all done")]
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    with ScriptedModel(Chat(), steps) as model:
        ctype, raw = _post(
            model.url + "/v1/chat/completions",
            {"model": "m", "stream": True, "tools": tools, "messages": [{"role": "user", "content": "go"}]},
        )
        assert ctype == "text/event-stream"
        lines = [line[len("data: ") :] for line in raw.decode().split("\n\n") if line.startswith("data: ")]
        assert lines[-1] == "[DONE]"
        chunks = [json.loads(line) for line in lines[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        deltas = [c["choices"][0]["delta"] for c in chunks]
        assert "".join(d.get("content") or "" for d in deltas) == "Running."
        calls = [tc for d in deltas for tc in d.get("tool_calls") or ()]
        assert calls[0]["index"] == 0 and calls[0]["id"] and calls[0]["function"]["name"] == "bash"
        assert json.loads("".join(tc["function"].get("arguments", "") for tc in calls)) == {"command": "echo hi"}
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls" and chunks[-1]["usage"]["total_tokens"]
        call_id = calls[0]["id"]

        ctype, raw = _post(
            model.url + "/v1/chat/completions",
            {
                "model": "m",
                "tools": tools,
                "messages": [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": "Running.",
                        "tool_calls": [
                            {"id": call_id, "type": "function", "function": {"name": "bash", "arguments": "{}"}}
                        ],
                    },
                    {"role": "tool", "tool_call_id": call_id, "content": "hi\n"},
                ],
            },
        )
        whole = json.loads(raw)
        assert whole["object"] == "chat.completion"
        assert whole["choices"][0]["message"] == {"role": "assistant", "content": "all done"}
        assert whole["choices"][0]["finish_reason"] == "stop"
        assert model.told_after(0) == "hi\n"


# --- parse: opencode's tool names and arguments ------------------------------------------------


def _parse(tool: str, args: dict, cwd: str = "/r"):
    from proctor.hosts import opencode

    return opencode.parse(
        {
            "hook_event_name": "PreToolUse",
            "session_id": "ses_1",
            "tool_use_id": "call_1",
            "cwd": cwd,
            "tool_name": tool,
            "tool_input": args,
        }
    )


def test_parse_reads_opencode_tools():
    call = _parse("bash", {"command": "echo x > b.py", "workdir": "src"})
    assert (call.command, call.cwd, call.session, call.tool_use_id) == ("echo x > b.py", "/r/src", "ses_1", "call_1")
    assert _parse("bash", {"command": "ls", "workdir": "/abs"}).cwd == "/abs"
    assert _parse("write", {"filePath": "src/b.py", "content": "x"}).writes == ["src/b.py"]
    edit = _parse("edit", {"filePath": "/r/src/a.py", "oldString": "A", "newString": "B"})
    assert edit.writes == ["/r/src/a.py"] and edit.edits == [("/r/src/a.py", "A", "B")]
    multi = _parse(
        "multiedit",
        {
            "filePath": "a.py",
            "edits": [
                {"filePath": "a.py", "oldString": "1", "newString": "2"},
                {"filePath": "c.py", "oldString": "3", "newString": "4"},
            ],
        },
    )
    # each replacement with the file it is made in, which the claimed-declaration row places
    assert multi.writes == ["a.py", "c.py"] and multi.edits == [("a.py", "1", "2"), ("c.py", "3", "4")]
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-A\n+B\n*** Add File: src/n.py\n+x\n*** End Patch"
    assert _parse("apply_patch", {"patchText": patch}).writes == ["src/a.py", "src/n.py"]
    assert _parse("read", {"filePath": "src/a.py"}).reads == ["src/a.py"]
    assert _parse("grep", {"pattern": "x", "path": "src"}).reads == ["src"]
    task = _parse("task", {"description": "d", "prompt": "lease: plan/w1\nwork", "subagent_type": "general"})
    assert task.prompt.startswith("lease: plan/w1") and task.spawn_label == "general"
    fetch = _parse("webfetch", {"url": "https://example.invalid", "prompt": "summarise"})
    assert fetch.prompt is None and not fetch.writes


def test_executor_error_text_is_in_error_data_message():
    from proctor.workers.executors import opencode as executor

    line = json.dumps(
        {
            "type": "error",
            "timestamp": 1,
            "sessionID": "ses_1",
            "error": {"name": "APIError", "data": {"message": "rate limited", "statusCode": 429, "isRetryable": True}},
        }
    )
    events = executor.Parser().feed(line)
    assert [(e.kind, e.text) for e in events] == [("session", None), ("fatal", "APIError: rate limited (HTTP 429)")]
    assert executor.error_text({"message": "old shape"}) == "old shape"
    assert executor.error_text({"name": "UnknownError", "data": {}}) == "UnknownError"
    assert executor.error_text("plain") == "plain"


# --- the guard plugin against the real opencode ------------------------------------------------


def test_plugin_denies_a_shell_write_outside_the_lease_and_the_model_reads_why(host_env, host_repo):
    host_binary("opencode")
    install_printed_plugin(host_repo)
    git(host_repo, "add", ".opencode")
    git(host_repo, "commit", "-q", "-m", "opencode plugin")
    fork_and_take(host_env, host_repo, "plan/w1", "src/a.py")
    steps = [
        Turn(text="Writing b.", tools=[Tool("bash", {"command": "echo 'B = 2' > src/b.py", "description": "write b"})]),
        Turn(tools=[Tool("bash", {"command": "echo 'A = 2' > src/a.py", "description": "write a"})]),
        Turn(tools=[Tool("write", {"filePath": os.path.join(host_repo, "src", "c.py"), "content": "C = 1\n"})]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, events = run_opencode(host_env, host_repo, extra={"BAGGAGE": "proctor.lease=plan/w1"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.consumed() == 4, model.summary()
        # the shell write outside the lease never ran, and the model was told why, naming the rule
        assert read(host_repo, "src/b.py") == "B = 1\n"
        told = model.told_after(0)
        assert "deny [lease-write-scope]" in told and "src/b.py" in told and "plan/w1" in told, told
        # the own write ran, with nothing added to its output
        assert read(host_repo, "src/a.py") == "A = 2\n"
        assert "deny" not in model.told_after(1) and "lease" not in model.told_after(1)
        # opencode's write tool outside the lease: denied too
        assert not os.path.exists(os.path.join(host_repo, "src", "c.py"))
        assert "deny [lease-write-scope]" in model.told_after(2) and "src/c.py" in model.told_after(2)
    uses = tool_uses(events)
    assert [u["state"]["status"] for u in uses] == ["error", "completed", "error"]
    assert "lease-write-scope" in uses[0]["state"]["error"]


def test_plugin_judges_a_subagent_under_its_session_job(host_env, host_repo):
    """The session takes its job with `proctor job exec` (no BAGGAGE); a subagent it spawns
    with the task tool runs in a session of its own, which the plugin reports as the parent
    session's agent: its write outside the job is denied under the session's job."""
    host_binary("opencode")
    install_printed_plugin(host_repo)
    proc = host_env.proctor(
        "job",
        "fork",
        "plan/w1",
        "--criteria",
        "scripted",
        "--write-paths",
        "src/a.py",
        "--check",
        "test",
        cwd=host_repo,
    )
    assert proc.returncode == 0, proc.stderr

    steps = [
        Turn(tools=[Tool("bash", {"command": "proctor job exec plan/w1", "description": "take the job"})]),
        Turn(
            tools=[
                Tool(
                    "task",
                    {"description": "write b", "prompt": "Write B = 2 into src/b.py.", "subagent_type": "general"},
                )
            ]
        ),
        Turn(tools=[Tool("bash", {"command": "echo 'B = 2' > src/b.py", "description": "write b"})]),
        Turn(text="child done"),
        Turn(text="finished"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, events = run_opencode(host_env, host_repo)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.consumed() == 5, model.summary()
        told_exec, told_child = model.told_after(0), model.told_after(2)
    assert "plan/w1" in told_exec
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert "deny [lease-write-scope]" in told_child and "src/b.py" in told_child, told_child
    assert "acting under lease plan/w1, from agent" in told_child, told_child
    child = [u for u in tool_uses(events) if u["tool"] == "task"]
    assert child and child[0]["state"]["status"] == "completed"


def test_plugin_advisory_is_appended_to_the_tool_output(host_env, host_repo):
    """A session under no lease writing a path a live job owns: lease-unattributed advises, and
    the advisory reaches the model in the tool's output. The plugin is the user's, in
    $XDG_CONFIG_HOME/opencode/plugins/, for every repository."""
    host_binary("opencode")
    user_plugins = os.path.join(host_env.env["XDG_CONFIG_HOME"], "opencode", "plugins")
    os.makedirs(user_plugins)
    with open(os.path.join(user_plugins, "proctor.js"), "w") as handle:
        handle.write(wiring_text("opencode"))
    fork_and_take(host_env, host_repo, "plan/w1", "src/a.py")
    steps = [
        Turn(tools=[Tool("edit", {"filePath": "src/a.py", "oldString": "A = 1", "newString": "A = 3"})]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, events = run_opencode(host_env, host_repo)
        assert proc.returncode == 0, proc.stderr[-2000:]
        told = model.told_after(0)
    assert read(host_repo, "src/a.py") == "A = 3\n"
    assert told.startswith("Edit applied successfully."), told
    assert "advise [lease-unattributed]" in told and "plan/w1" in told, told
    assert [u["state"]["status"] for u in tool_uses(events)] == ["completed"]


def test_plugin_installed_twice_judges_each_call_once(host_env, host_repo):
    """The plugin both in the user's plugin directory and the repository's: opencode loads
    both, and each call is judged once (one advisory in the output of an edit and of a shell
    write); doctor warns of the two copies."""
    host_binary("opencode")
    project_copy = install_printed_plugin(host_repo)
    user_copy = os.path.join(host_env.env["XDG_CONFIG_HOME"], "opencode", "plugins", "proctor.js")
    os.makedirs(os.path.dirname(user_copy))
    with open(user_copy, "w") as handle:
        handle.write(wiring_text("opencode"))
    doctor = host_env.proctor("doctor", cwd=host_repo).stdout
    assert f"ok   hook wiring for opencode: present in {project_copy}, {user_copy}; warning: 2 copies" in doctor, doctor
    fork_and_take(host_env, host_repo, "plan/w1", "src/a.py")
    steps = [
        Turn(tools=[Tool("edit", {"filePath": "src/a.py", "oldString": "A = 1", "newString": "A = 3"})]),
        Turn(tools=[Tool("bash", {"command": "echo 'A = 4' > src/a.py", "description": "write a"})]),
        Turn(text="finished"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, events = run_opencode(host_env, host_repo)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.consumed() == 3, model.summary()
        told_edit, told_shell = model.told_after(0), model.told_after(1)
    assert read(host_repo, "src/a.py") == "A = 4\n"
    assert told_edit.startswith("Edit applied successfully."), told_edit
    assert told_edit.count("advise [lease-unattributed]") == 1 and "plan/w1" in told_edit, told_edit
    assert told_shell.count("advise [lease-unattributed]") == 1 and "plan/w1" in told_shell, told_shell
    assert [u["state"]["status"] for u in tool_uses(events)] == ["completed", "completed"]
    # an edited copy beside another judges every call again: doctor fails it
    with open(user_copy, "a") as handle:
        handle.write("// edited\n")
    doctor = host_env.proctor("doctor", cwd=host_repo)
    assert doctor.returncode == 1
    assert (
        f"FAIL hook wiring for opencode: present in {project_copy}, {user_copy}; warning: 2 copies, opencode "
        f"loads each, and {user_copy} is not this proctor's text"
    ) in doctor.stdout, doctor.stdout


def _stub_proctor(tmp_path) -> str:
    """A stand-in `proctor` on PATH, by what the event names: `hang` sleeps 60 s; `silent`
    exits 3 printing nothing; `huge` prints 2 MiB of garbage; anything else prints a line of
    garbage and exits 3 (a proctor that ran and answered what the plugin cannot read)."""
    stub_dir = tmp_path / "stub"
    stub_dir.mkdir()
    stub = stub_dir / "proctor"
    stub.write_text(
        '#!/bin/sh\nevent=$(cat)\ncase "$event" in\n'
        "  *hang*) sleep 60 ;;\n"
        "  *silent*) exit 3 ;;\n"
        "  *huge*) head -c 2097152 /dev/zero | tr '\\000' x; exit 0 ;;\n"
        "esac\necho 'Traceback: not json'\nexit 3\n"
    )
    stub.chmod(0o755)
    return str(stub_dir)


def _bare_path() -> str:
    """A PATH with opencode and the system's tools, and no proctor."""
    hosts_bin = os.path.dirname(host_binary("opencode"))
    bare_path = os.pathsep.join([hosts_bin, "/usr/local/bin", "/usr/bin", "/bin"])
    assert subprocess.run(["sh", "-c", "command -v proctor"], env={"PATH": bare_path}).returncode != 0
    return bare_path


def test_plugin_fails_open_without_proctor_and_when_proctor_hangs_or_says_nothing(host_env, host_repo, tmp_path):
    """No proctor on PATH: calls run. A proctor that hangs (the plugin's timeout, shortened here
    to 2 s) or exits 3 printing nothing: calls run, nothing is added to their output."""
    host_binary("opencode")
    install_printed_plugin(host_repo)
    fork_and_take(host_env, host_repo, "plan/w1", "src/a.py")
    bare_path = _bare_path()
    steps = [Turn(tools=[Tool("bash", {"command": "echo 'B = 9' > src/b.py", "description": "w"})]), Turn(text="ok")]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, _ = run_opencode(host_env, host_repo, extra={"BAGGAGE": "proctor.lease=plan/w1", "PATH": bare_path})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.told_after(0).strip() == "(no output)"
    assert read(host_repo, "src/b.py") == "B = 9\n"

    stub_dir = _stub_proctor(tmp_path)
    plugin = os.path.join(host_repo, ".opencode", "plugins", "proctor.js")
    text = read(host_repo, ".opencode/plugins/proctor.js")
    assert "const TIMEOUT_MS = 30000" in text
    with open(plugin, "w") as handle:
        handle.write(text.replace("const TIMEOUT_MS = 30000", "const TIMEOUT_MS = 2000"))
    steps = [
        Turn(tools=[Tool("bash", {"command": "echo hang > src/b.py", "description": "w"})]),
        Turn(tools=[Tool("bash", {"command": "echo silent > src/a.py", "description": "w"})]),
        Turn(text="ok"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        started = time.monotonic()
        proc, _ = run_opencode(
            host_env,
            host_repo,
            extra={"BAGGAGE": "proctor.lease=plan/w1", "PATH": os.pathsep.join([stub_dir, bare_path])},
        )
        elapsed = time.monotonic() - started
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.consumed() == 3
        assert model.told_after(0).strip() == "(no output)" and model.told_after(1).strip() == "(no output)"
    assert read(host_repo, "src/b.py") == "hang\n" and read(host_repo, "src/a.py") == "silent\n"
    assert elapsed < 50, elapsed  # two 2 s timeouts (before and after the hanging call), never the stub's 60 s


def test_plugin_refuses_an_answer_it_cannot_read(host_env, host_repo, tmp_path):
    """A proctor that ran and printed what the plugin cannot read (a line that is not JSON,
    then exit 3; 2 MiB of garbage, over the plugin's 1 MiB read limit) does not let the call
    through: it is refused, and the model is told why."""
    host_binary("opencode")
    install_printed_plugin(host_repo)
    stub_dir = _stub_proctor(tmp_path)
    steps = [
        Turn(tools=[Tool("bash", {"command": "echo garbage > src/b.py", "description": "w"})]),
        Turn(tools=[Tool("bash", {"command": "echo huge > src/a.py", "description": "w"})]),
        Turn(text="ok"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, events = run_opencode(host_env, host_repo, extra={"PATH": os.pathsep.join([stub_dir, _bare_path()])})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.consumed() == 3, model.summary()
        told_garbage, told_huge = model.told_after(0), model.told_after(1)
    assert read(host_repo, "src/b.py") == "B = 1\n" and read(host_repo, "src/a.py") == "A = 1\n"
    assert "`proctor hook opencode` printed 20 bytes that are not JSON (exit 3)" in told_garbage, told_garbage
    assert "Traceback: not json" in told_garbage and "the call is refused" in told_garbage, told_garbage
    assert "`proctor hook opencode` printed more than 1048576 bytes" in told_huge, told_huge[:2000]
    assert "the call is refused" in told_huge and len(told_huge) < 2000, told_huge[:2000]
    assert [u["state"]["status"] for u in tool_uses(events)] == ["error", "error"]


def test_plugin_deny_with_a_long_reason_is_capped_and_still_denies(host_env, host_repo):
    """The real proctor denying a command that writes 300 long paths outside the lease: the
    reason (over 60 KiB) is cut to 16 KiB with a note, and the call is still refused."""
    host_binary("opencode")
    install_printed_plugin(host_repo)
    fork_and_take(host_env, host_repo, "plan/w1", "src/a.py")
    names = [f"src/{'n' * 120}{i}.py" for i in range(300)]
    steps = [
        Turn(tools=[Tool("bash", {"command": "touch " + " ".join(names), "description": "many"})]),
        Turn(text="ok"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc, events = run_opencode(host_env, host_repo, extra={"BAGGAGE": "proctor.lease=plan/w1"})
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert model.consumed() == 2, model.summary()
        told = model.told_after(0)
    assert not any(os.path.exists(os.path.join(host_repo, name)) for name in names)
    assert told.count("deny [lease-write-scope]") > 50 and names[0] in told, told[:2000]
    assert "[cut by proctor: the full text is " in told and "only the first 16384 are shown]" in told, told[-500:]
    full = int(told.split("[cut by proctor: the full text is ")[1].split()[0])
    assert full > 60000, full
    assert 16384 < len(told) < 16384 + 1000, len(told)
    assert names[-1] not in told
    assert [u["state"]["status"] for u in tool_uses(events)] == ["error"]


# --- installing and reporting the plugin -------------------------------------------------------


def test_harness_install_writes_the_printed_plugin_and_doctor_sees_it(host_env, host_repo):
    plugin = os.path.join(host_repo, ".opencode", "plugins", "proctor.js")
    doctor = host_env.proctor("doctor", cwd=host_repo)
    assert "hook wiring for opencode: missing" in doctor.stdout + doctor.stderr
    proc = host_env.proctor("agent", "harness", "install", cwd=host_repo)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {plugin}" in proc.stdout
    assert read(host_repo, ".opencode/plugins/proctor.js").strip() == wiring_text("opencode").strip()
    doctor = host_env.proctor("doctor", cwd=host_repo)
    assert f"hook wiring for opencode: present in {plugin}" in doctor.stdout + doctor.stderr
    # an older or edited plugin is still wired, and doctor says to rewrite it
    with open(plugin, "a") as handle:
        handle.write("// edited\n")
    doctor = host_env.proctor("doctor", cwd=host_repo)
    assert "not this proctor's text" in doctor.stdout + doctor.stderr
    # the user's own plugin directory counts too
    os.remove(plugin)
    user_plugin = os.path.join(host_env.env["XDG_CONFIG_HOME"], "opencode", "plugins", "proctor.js")
    os.makedirs(os.path.dirname(user_plugin))
    with open(user_plugin, "w") as handle:
        handle.write(wiring_text("opencode"))
    doctor = host_env.proctor("doctor", cwd=host_repo)
    assert f"hook wiring for opencode: present in {user_plugin}" in doctor.stdout + doctor.stderr
    os.remove(user_plugin)
    # a leased caller may not install it
    fork_and_take(host_env, host_repo, "plan/w1", "src/a.py")
    proc = host_env.proctor("agent", "harness", "install", cwd=host_repo)
    assert proc.returncode == 1 and "only an unbound caller" in proc.stdout + proc.stderr
    assert not os.path.exists(plugin)


# --- the executor: proctor work with the real opencode -----------------------------------------

WORKER = """
[workers]
ladder = ["oc"]

[workers.oc]
executor = "opencode"

[jobs]
grace_seconds = 5
idle_minutes = 2
"""


def _exit_citing_the_run(job: str):
    """The step that files the result, citing the output_ref the model was told by `proctor run
    test` (read from the tool result, as a model would)."""

    def step(record: dict) -> Turn:
        told = Chat().told(record["body"])
        words = told.replace(",", " ").split()
        ref = next((w for w in words if w.startswith("sha256:")), "sha256:missing")
        run_id = next((w for w in words if w.startswith("run-")), "run-missing")
        result = {
            "schema_version": 2,
            "status": "done",
            "changed_paths": ["src/a.py"],
            "summary": "A is 2",
            "validation": [{"run": run_id, "command": "proctor run test", "output_ref": ref}],
        }
        command = f"proctor job exit {job} --stdin <<'EOF'\n{json.dumps(result)}\nEOF"
        return Turn(tools=[Tool("bash", {"command": command, "description": "file the result"})])

    return step


def _attempt_rows(listed) -> list[dict]:
    rows = listed.get("attempts", listed) if isinstance(listed, dict) else listed
    return [r for r in rows if isinstance(r, dict)]


def test_work_passes_a_job_from_a_subdirectory(host_env, host_repo, tmp_path):
    """`proctor work` run from src/: opencode works in the repository root (PWD). Its write
    outside its lease is denied by the plugin; it adds a monitor (its job's secret in its
    environment, which the plugin's hook inherits) and ends its turn without the work: that
    attempt fails its gates, and `proctor work` waits. The real server runs the monitor; its
    follow-up resumes the worker's session (`--session`), again in the worktree's root, as a new
    attempt that edits its file, runs its check and files its result citing the run; the job is
    graded and committed."""
    host_binary("opencode")
    with open(os.path.join(host_repo, "proctor.toml"), "a") as handle:
        handle.write(WORKER)
    install_printed_plugin(host_repo)
    git(host_repo, "add", "proctor.toml", ".opencode")
    git(host_repo, "commit", "-q", "-m", "worker and opencode plugin")
    proc = host_env.proctor(
        "job",
        "fork",
        "plan/w1",
        "--criteria",
        "make A two",
        "--write-paths",
        "src/a.py",
        "--check",
        "test",
        cwd=host_repo,
    )
    assert proc.returncode == 0, proc.stderr
    resumed = lambda record: CI_EVENT in json.dumps(record["body"])  # noqa: E731
    steps = [
        Turn(text="Trying b.", tools=[Tool("bash", {"command": "echo 'B = 2' > src/b.py", "description": "also b"})]),
        Turn(tools=[Tool("bash", {"command": monitor_add(str(tmp_path / "ci-ran")), "description": "watch ci"})]),
        Turn(text="CI has to go green first; my monitor will tell me."),
        Turn(
            text="Editing.",
            tools=[Tool("edit", {"filePath": "src/a.py", "oldString": "A = 1", "newString": "A = 2"})],
            when=resumed,
        ),
        Turn(tools=[Tool("bash", {"command": "proctor run test", "description": "run the check"})]),
        _exit_citing_the_run("plan/w1"),
        Turn(text="Set A to 2, ran the check, filed the result.\n\nDONE"),
    ]
    subdir = os.path.join(host_repo, "src")
    with ScriptedModel(Chat(), steps) as model, server(host_env, host_repo):
        configure(host_env, model)
        proc = host_env.proctor("work", "plan/w1", "-o", "json", cwd=subdir, timeout=240)
        assert model.consumed() == 7, model.summary() + proc.stdout[-3000:] + proc.stderr[-3000:]
        first = model.main_requests()[0]["body"]
        told_denied, told_added, told_edit, told_run, told_exit = (model.told_after(n) for n in (0, 1, 3, 4, 5))
        again = next(r for r in model.main_requests() if r.get("step") == 3)["body"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outcome = json.loads(proc.stdout)
    assert outcome["passed"] is True
    attempt, resumed_attempt = outcome["jobs"][0]["attempts"]
    assert attempt["executor"] == "opencode" and attempt["outcome"] == "finished" and attempt["passed"] is False
    assert attempt["session"].startswith("ses_") and attempt["provider_error"] is False
    assert attempt["reply_kind"] == "stop" and attempt["exit_code"] == 0
    assert "waiting for the monitors of plan/w1: 1 live" in proc.stderr, proc.stderr[-3000:]
    # opencode worked in the repository root, not in the subdirectory proctor work was run from
    system = "\n".join(m["content"] for m in first["messages"] if m["role"] == "system")
    from tests.hosts.test_claude_work import tree

    assert f"Working directory: {tree(host_repo, 'plan/w1')}\n" in system
    assert "lease: plan/w1" in json.dumps(first["messages"])
    assert not os.path.exists(os.path.join(subdir, "src"))
    # the worker's write outside its lease (BAGGAGE set by proctor work) was denied by the plugin
    assert "deny [lease-write-scope]" in told_denied and "src/b.py" in told_denied, told_denied
    assert "from env" in told_denied
    assert read(host_repo, "src/b.py") == "B = 1\n"
    # the worker added its monitor itself, under its job's secret
    assert "on plan/w1 every 10s: ci watcher" in told_added and "deny" not in told_added, told_added
    # the follow-up resumed the same session, in the same worktree: the model got the whole earlier conversation
    handed = [f for f in followup_rows(host_repo, "plan/w1") if f["delivered"]]
    assert len(handed) == 1 and CI_EVENT in handed[0]["text"], followup_rows(host_repo, "plan/w1")
    assert handed[0]["via"] == f"resume:oc:{attempt['session']}"
    assert resumed_attempt["followup"] == handed[0]["id"] and resumed_attempt["followup_delivered"] is True
    assert resumed_attempt["passed"] is True and resumed_attempt["session"] == attempt["session"]
    conversation = json.dumps(again["messages"])
    assert "lease: plan/w1" in conversation and "CI has to go green first" in conversation
    assert CI_EVENT in conversation
    assert f"Working directory: {tree(host_repo, 'plan/w1')}\n" in "\n".join(
        m["content"] for m in again["messages"] if m["role"] == "system"
    )
    assert told_edit.strip() == "Edit applied successfully."
    assert "test exit 0" in told_run and "output_ref sha256:" in told_run, told_run
    ref = next(w for w in told_run.split() if w.startswith("sha256:"))
    assert told_exit.startswith("filed the result of plan/w1"), told_exit
    # filed by the worker (citing the run it made), graded, committed: only src/a.py
    jobs = json.loads(host_env.proctor("ls", "jobs", "-o", "json", cwd=host_repo).stdout)["jobs"]
    row = next(j for j in jobs if j["id"] == "plan/w1")
    assert row["state"] == "pass", row
    described = host_env.proctor("describe", "job", "plan/w1", cwd=host_repo).stdout
    assert ref in json.dumps(row) or ref in described, (row, described)
    head = git(host_repo, "show", "--name-only", "--format=%s", "HEAD").split()
    assert head[:3] == ["make", "A", "two"] and head[3:] == ["src/a.py"], head
    assert read(host_repo, "src/a.py") == "A = 2\n"
    assert git(host_repo, "status", "--porcelain").strip() == ""
    listed = host_env.proctor("ls", "attempts", "plan/w1", "-o", "json", cwd=host_repo).stdout
    sessions = [a.get("session") for a in _attempt_rows(json.loads(listed))]
    assert sessions == [attempt["session"], attempt["session"]], listed


def test_executor_reads_a_provider_error(host_env, host_repo):
    host_binary("opencode")
    from proctor.workers.executors import opencode as executor

    class Worker:
        command: list = []
        model = None

    with ScriptedModel(
        Chat(), [HttpError(400, {"error": {"message": "scripted: bad request", "type": "invalid_request_error"}})]
    ) as model:
        configure(host_env, model)
        proc = host_env.run(executor.argv(Worker(), "go"), cwd=host_repo)
    parser = executor.Parser()
    fatal = [e for line in proc.stdout.splitlines() for e in parser.feed(line) if e.kind == "fatal"]
    assert fatal and "scripted: bad request" in fatal[0].text and "400" in fatal[0].text, proc.stdout[-2000:]


def test_a_sandboxed_opencode_worker_reaches_the_store_through_its_broker_alone(host_env, host_repo):
    """The real opencode as a worker inside its job's Landlock domain (`[sandbox] workers =
    true`), the guard's write-scope and tamper rules off: a write into proctor's state and one
    outside its path are refused by the kernel; its edit, its `proctor run test` and its `proctor
    job exit` work, the commands and its plugin's hooks run by the broker of its attempt."""
    host_binary("opencode")
    from proctor import sandbox

    if sandbox.kernel_abi() == 0 and os.environ.get("CI") != "true":
        pytest.skip("this kernel offers no Landlock; CI's kernel does, and there this test runs")
    with open(os.path.join(host_repo, "proctor.toml"), "a") as handle:
        handle.write(
            WORKER + '\n[sandbox]\nmode = "landlock"\nworkers = true\n\n'
            '[guard.rules]\nlease-write-scope = "off"\nlease-tamper = "off"\n'
        )
    install_printed_plugin(host_repo)
    git(host_repo, "add", "proctor.toml", ".opencode")
    git(host_repo, "commit", "-q", "-m", "a sandboxed opencode worker")
    for argv in (
        ("job", "fork", "plan", "--criteria", "the plan", "--check", "test"),
        (
            "job",
            "fork",
            "plan/w1",
            "--parent",
            "plan",
            "--criteria",
            "make A two",
            "--write-paths",
            "src/a.py",
            "--check",
            "test",
        ),
    ):
        proc = host_env.proctor(*argv, cwd=host_repo)
        assert proc.returncode == 0, proc.stderr
    from proctor.workspace import Workspace

    with Workspace(host_repo) as ws:
        state = ws.state_dir
    steps = [
        Turn(tools=[Tool("bash", {"command": "echo 'B = 2' > src/b.py; echo rc=$?", "description": "also b"})]),
        Turn(tools=[Tool("bash", {"command": f"echo x >> {state}/planted; echo rc=$?", "description": "state"})]),
        Turn(tools=[Tool("edit", {"filePath": "src/a.py", "oldString": "A = 1", "newString": "A = 2"})]),
        Turn(tools=[Tool("bash", {"command": "proctor run test", "description": "run the check"})]),
        _exit_citing_the_run("plan/w1"),
        Turn(text="Set A to 2, ran the check, filed the result.\n\nDONE"),
    ]
    with ScriptedModel(Chat(), steps) as model:
        configure(host_env, model)
        proc = host_env.proctor("work", "plan/w1", "-o", "json", cwd=host_repo, timeout=240)
        told = [model.told_after(n) for n in range(5)]
    assert proc.returncode == 0, "\n--\n".join(told) + proc.stdout[-3000:] + proc.stderr[-3000:]
    for n in (0, 1):
        assert "rc=0" not in told[n] and "Permission denied" in told[n] and "deny" not in told[n], told[n]
    assert told[2].strip() == "Edit applied successfully.", told[2]
    assert "test exit 0" in told[3], told[3]
    assert told[4].startswith("filed the result of plan/w1"), told[4]
    assert not os.path.exists(os.path.join(state, "planted"))
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert git(host_repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/a.py"]
    from proctor import trail

    with Workspace(host_repo) as ws, ws.store.read() as tx:
        [brokered] = trail.events(tx, "plan/w1", "sandbox_broker")
    assert brokered["data"]["served"] >= 2 * 5 + 2 and brokered["data"]["refused"] == [], brokered
