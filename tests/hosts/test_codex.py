"""The guard and the worker with the real Codex CLI 0.171.0 against a scripted model.

Codex is pointed at the scripted model (OpenAI Responses API, tests/hosts/responses.py) by a
custom provider in the test's own `$HOME/.codex/config.toml`, into which the text
`proctor describe harness --host codex` prints (for that HOME) is merged as it is: the hooks
and the trust Codex records for them. Each test asserts what the model was told (a deny
arrives as the tool's output, "Command blocked by PreToolUse hook: <reason>"; additionalContext
as a developer message) and what is on disk.

The first tests need no Codex binary: the real payloads of fixtures/hosts/codex-0.171.0 through
`proctor hook codex`, the answers' forms, doctor's trust reading, the executor's argv and the
spend refusal.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import pytest

from tests.hosts.conftest import (
    ADD_FOLLOW_UP,
    CI_EVENT,
    add_monitor_for,
    followup_rows,
    fork_and_take,
    git,
    host_binary,
    server,
)
from tests.hosts.model import ScriptedModel, Tool, Turn
from tests.hosts.responses import Responses

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "fixtures", "hosts", "codex-0.171.0")
JOB = "plan/w1"


def fixture_payloads(name: str) -> list[dict]:
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path) and os.environ.get("CI") != "true":
        pytest.skip(f"{path} is absent (the shared host captures are not checked out here); CI runs it")
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line)["payload"] for line in handle if line.strip()]


def hook(env, repo: str, payload: dict, lease: str | None = JOB) -> dict:
    """`proctor hook codex` on one payload, as Codex runs it (cwd and BAGGAGE as the captures had)."""
    payload = {**payload, "cwd": repo}
    proc = env.proctor(
        "hook",
        "codex",
        cwd=repo,
        stdin=json.dumps(payload),
        extra={"BAGGAGE": f"proctor.lease={lease}"} if lease else None,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def patch_event(patch: str) -> dict:
    return {
        "session_id": "s1",
        "turn_id": "t1",
        "transcript_path": None,
        "cwd": ".",
        "hook_event_name": "PreToolUse",
        "model": "gpt-5.5",
        "permission_mode": "bypassPermissions",
        "tool_name": "apply_patch",
        "tool_input": {"command": patch},
        "tool_use_id": "call_0",
    }


# --- apply_patch: the real payload, and every file a patch touches -----------------------------


def test_apply_patch_payload_from_codex_is_judged(host_env, host_repo):
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    pre, post, stop = fixture_payloads("hook-patch.jsonl")
    assert pre["tool_name"] == "apply_patch" and "src/b.py" in pre["tool_input"]["command"]
    answer = hook(host_env, host_repo, pre)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert (
        "deny [lease-write-scope]: src/b.py is outside the write paths of plan/w1"
        in answer["hookSpecificOutput"]["permissionDecisionReason"]
    )
    # the own file passes, exactly `{}`
    allow = fixture_payloads("hook-allow-patch.jsonl")[0]
    assert hook(host_env, host_repo, allow) == {}
    assert hook(host_env, host_repo, stop) == {}


@pytest.mark.parametrize(
    "body, outside",
    [
        ("*** Add File: src/new.py\n+N = 1\n", "src/new.py"),
        ("*** Delete File: src/b.py\n", "src/b.py"),
        ("*** Update File: src/a.py\n*** Move to: src/c.py\n@@\n-A = 1\n+A = 2\n", "src/c.py"),
        ("*** Update File: src/b.py\n*** Move to: src/a.py\n@@\n-B = 1\n+B = 2\n", "src/b.py"),
    ],
)
def test_every_file_a_patch_touches_is_a_write(host_env, host_repo, body, outside):
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    answer = hook(host_env, host_repo, patch_event("*** Begin Patch\n" + body + "*** End Patch\n"))
    reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert f"{outside} is outside the write paths of plan/w1" in reason


def test_parse_reads_patch_from_command_or_input():
    from proctor.hosts import codex

    patch = (
        "*** Begin Patch\n*** Add File: x/new.py\n+1\n*** Update File: a.py\n*** Move to: b.py\n"
        "*** Delete File: c.py\n*** End Patch\n"
    )
    for tool_input in ({"command": patch}, {"input": patch}):
        call = codex.parse({**patch_event(patch), "tool_input": tool_input})
        assert call.writes == ["x/new.py", "a.py", "b.py", "c.py"]
        assert not call.command  # the patch is not a shell command


# --- what each answer looks like -----------------------------------------------------------------


class _Verdict:
    def __init__(self, decision: str, message: str = "advise [lease-write-scope]: x") -> None:
        self.decision, self.message = decision, message

    def text(self) -> str:
        return self.message


def test_answers_never_use_system_message():
    from proctor.guard.call import POST_TOOL, PRE_TOOL, STOP, SUBAGENT_STOP, Call
    from proctor.hosts.codex import render

    def call(event, raw=None):
        c = Call("codex", event)
        c.raw = raw or {}
        return c

    assert render(call(PRE_TOOL), _Verdict("pass")) == {}
    assert render(call(PRE_TOOL), _Verdict("advise")) == {
        "hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": "advise [lease-write-scope]: x"}
    }
    assert render(call(PRE_TOOL), _Verdict("deny", "deny [r]: y")) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "deny [r]: y",
        }
    }
    assert render(call(POST_TOOL), _Verdict("advise"))["hookSpecificOutput"]["additionalContext"]
    for event in (STOP, SUBAGENT_STOP):
        assert render(call(event), _Verdict("deny", "carry on")) == {"decision": "block", "reason": "carry on"}
        first = render(call(event, {"stop_hook_active": False}), _Verdict("advise"))
        assert first["decision"] == "block" and "advise [lease-write-scope]: x" in first["reason"]
        assert render(call(event, {"stop_hook_active": True}), _Verdict("advise")) == {}


# --- doctor: whether Codex will run the hooks ----------------------------------------------------


def _write_codex_config(home: str, text: str) -> str:
    path = os.path.join(home, ".codex", "config.toml")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def _hooks_only(wiring: str) -> str:
    """The printed wiring without its trust lines: what a person who copied only the hooks has."""
    lines = wiring.splitlines()
    return "\n".join(lines[: next(i for i, line in enumerate(lines) if line.startswith("[hooks.state."))]) + "\n"


def test_wired_reads_codex_trust(tmp_path, monkeypatch):
    from proctor.hosts import codex

    monkeypatch.delenv("CODEX_HOME", raising=False)
    home, root = str(tmp_path / "home"), str(tmp_path / "repo")
    os.makedirs(root)
    assert codex.wired(root, home)[0] is False and "missing" in codex.wired(root, home)[1]
    wiring = codex.wiring(home)
    config = _write_codex_config(home, _hooks_only(wiring))
    ok, text = codex.wired(root, home)
    assert not ok and "not trusted" in text and "--dangerously-bypass-hook-trust" in text
    _write_codex_config(home, wiring)
    ok, text = codex.wired(root, home)
    assert ok and text.startswith("trusted: PreToolUse, PostToolUse, Stop, SubagentStop") and config in text
    _write_codex_config(home, "[features]\nhooks = false\n\n" + wiring)
    ok, text = codex.wired(root, home)
    assert not ok and "[features] hooks = false" in text
    # a hook changed after it was trusted is not run by Codex: its hash no longer matches
    _write_codex_config(home, wiring.replace("timeout = 30", "timeout = 31", 1))
    ok, text = codex.wired(root, home)
    assert not ok and "PreToolUse" in text and "changed since it was trusted" in text
    # in the project's .codex/: trusted hooks still need a trusted project
    project = os.path.join(root, ".codex", "hooks.json")
    os.makedirs(os.path.dirname(project))
    with open(project, "w") as handle:
        json.dump(
            {"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "proctor hook codex"}]}]}}, handle
        )
    handler = {"type": "command", "command": "proctor hook codex"}
    state = f'[hooks.state."{project}:pre_tool_use:0:0"]\ntrusted_hash = "{codex.trust_hash("PreToolUse", handler)}"\n'
    _write_codex_config(home, state)
    ok, text = codex.wired(root, home)
    assert not ok and "codex exec --trust" in text
    _write_codex_config(home, f'[projects."{root}"]\ntrust_level = "trusted"\n\n' + state)
    ok, text = codex.wired(root, home)
    assert ok and project in text


# --- the executor's command line, and spend ------------------------------------------------------


def test_executor_argv_sandbox_and_resume(tmp_path, monkeypatch):
    from proctor.config import Worker
    from proctor.workers.executors import codex

    monkeypatch.setenv("PROCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    worker = Worker("cx", "codex", None, "gpt-5.5", None, None)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "root")
    key = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    monkeypatch.chdir(repo)
    # this repository's state and cache only, not the bases every repository's store lives under
    roots = json.dumps([str(tmp_path / "state" / key), str(tmp_path / "cache" / "proctor" / key)]).replace(", ", ",")
    monkeypatch.setenv("PROCTOR_STORE_URL", "sqlite:")  # the embedded store (as proctor work pins it)
    first = codex.argv(worker, "lease: j\ndo it", lease="j")
    assert first == [
        "codex",
        "exec",
        "--json",
        "-c",
        'sandbox_mode="workspace-write"',
        "-c",
        f"sandbox_workspace_write.writable_roots={roots}",
        "-c",
        "allow_login_shell=false",
        *codex.hook_overrides("j"),
        "-m",
        "gpt-5.5",
        "lease: j\ndo it",
    ]
    # on a PostgreSQL store the sandbox's network is opened: the worker's proctor commands reach it
    monkeypatch.setenv("PROCTOR_STORE_URL", "postgresql://db.internal/proctor")
    networked = codex.argv(worker, "lease: j\ndo it", lease="j")
    assert networked[:9] == first[:9] and networked[9:11] == ["-c", "sandbox_workspace_write.network_access=true"]
    assert networked[11:] == [*codex.hook_overrides("j"), "-m", "gpt-5.5", "lease: j\ndo it"]
    monkeypatch.setenv("PROCTOR_STORE_URL", "sqlite:")
    resumed = codex.argv(worker, "follow-up", resume="01a2-id", lease="j")
    assert resumed[:3] == ["codex", "exec", "resume"] and resumed[-2:] == ["01a2-id", "follow-up"]
    assert "features.hooks=true" in resumed  # the guard comes with a resume too
    assert "-c" in resumed and 'sandbox_mode="workspace-write"' in resumed
    for argv in (first, resumed):
        assert "--full-auto" not in argv and "-s" not in argv and "--sandbox" not in argv
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    bases = json.dumps([str(tmp_path / "state"), str(tmp_path / "cache" / "proctor")]).replace(", ", ",")
    assert f"sandbox_workspace_write.writable_roots={bases}" in codex.argv(worker, "x")


def test_max_spend_on_a_codex_worker_is_refused_not_ignored(tmp_path):
    from proctor.config import load

    (tmp_path / "proctor.toml").write_text(
        '[workers.cx]\nexecutor = "codex"\nmax_spend_usd = 2.0\n'
        '[workers.cl]\nexecutor = "claude"\nmax_spend_usd = 2.0\n'
    )
    config = load(str(tmp_path))
    assert config.workers["cx"].max_spend_usd is None and config.workers["cl"].max_spend_usd == 2.0
    assert any("[workers.cx] max_spend_usd cannot be enforced on a codex worker" in p for p in config.problems)
    assert not any("[workers.cl]" in p for p in config.problems)


def test_config_show_reports_the_refusal(host_env, host_repo):
    with open(os.path.join(host_repo, "proctor.toml"), "a") as handle:
        handle.write('\n[workers.cx]\nexecutor = "codex"\nmax_spend_usd = 1.5\n')
    proc = host_env.proctor("config", "show", cwd=host_repo)
    assert "max_spend_usd cannot be enforced on a codex worker" in proc.stdout + proc.stderr


# --- the real Codex ---------------------------------------------------------------------------------


def provider(model: ScriptedModel) -> str:
    return (
        f'model = "gpt-5.5"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{model.url}/v1"\nwire_api = "responses"\n\n'
    )


def wire(env, repo: str, model: ScriptedModel, trusted: bool = True) -> str:
    """The test's ~/.codex/config.toml: the scripted provider, then exactly what
    `proctor describe harness --host codex` prints for this HOME (or only its hooks)."""
    proc = env.proctor("describe", "harness", "--host", "codex", "--part", "hooks", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    _write_codex_config(env.home, provider(model) + (proc.stdout if trusted else _hooks_only(proc.stdout)))
    return proc.stdout


def run_codex(env, repo: str, lease: str | None = JOB, prompt: str = "do the task") -> list[dict]:
    codex = host_binary("codex")
    proc = env.run(
        [codex, "exec", "--json", "-c", 'sandbox_mode="workspace-write"', prompt],
        cwd=repo,
        extra={"BAGGAGE": f"proctor.lease={lease}"} if lease else None,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "turn.completed", proc.stdout[-2000:]
    return events


def read(repo: str, path: str) -> str:
    with open(os.path.join(repo, path), encoding="utf-8") as handle:
        return handle.read()


def doctor_line(env, repo: str) -> str:
    out = env.proctor("doctor", cwd=repo).stdout
    return next(line for line in out.splitlines() if "hook wiring for codex" in line)


def test_untrusted_hooks_are_skipped_and_doctor_says_so(host_env, host_repo):
    host_binary("codex")
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    with ScriptedModel(
        Responses(), [Turn(tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]), Turn(text="finished")]
    ) as model:
        wire(host_env, host_repo, model, trusted=False)
        line = doctor_line(host_env, host_repo)
        assert line.startswith("FAIL") and "not trusted" in line
        run_codex(host_env, host_repo)
        # the hooks were present, untrusted, and Codex skipped them without a word
        assert read(host_repo, "src/b.py") == "B = 2\n"
        assert "lease-write-scope" not in model.all_text()
    git(host_repo, "checkout", "--", "src/b.py")
    with ScriptedModel(Responses(), []) as model:
        wire(host_env, host_repo, model)
        line = doctor_line(host_env, host_repo)
        assert line.startswith("ok") and "trusted: PreToolUse, PostToolUse, Stop, SubagentStop" in line


def project_steps(wiring: str) -> tuple[str, str, dict, str, str]:
    """The commented project route of the printed wiring: (hooks.json path, its text, the
    config.toml it names, the state lines for it, step 3)."""
    lines = wiring.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("# 1. write "))
    second = next(i for i, line in enumerate(lines) if line.startswith("# 2. add to "))
    third = next(i for i, line in enumerate(lines) if line.startswith("# 3. "))
    hooks_json = lines[first][len("# 1. write ") :].rstrip(":")
    config = lines[second][len("# 2. add to ") :].rstrip(":")
    state = "\n".join(line[len("#    ") :] for line in lines[second + 1 : third]) + "\n"
    return hooks_json, lines[first + 1][len("#    ") :], config, state, lines[third]


def test_project_wiring_runs_once_the_project_is_trusted(host_env, host_repo):
    codex = host_binary("codex")
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    with ScriptedModel(
        Responses(), [Turn(tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]), Turn(text="finished")]
    ) as model:
        wiring = host_env.proctor("describe", "harness", "--host", "codex", "--part", "hooks", cwd=host_repo).stdout
        hooks_json, document, config, state, step3 = project_steps(wiring)
        assert hooks_json == os.path.join(host_repo, ".codex", "hooks.json")
        assert config == os.path.join(host_env.home, ".codex", "config.toml")
        assert "`codex exec --trust`" in step3
        os.makedirs(os.path.dirname(hooks_json))
        with open(hooks_json, "w") as handle:
            handle.write(document + "\n")
        _write_codex_config(host_env.home, provider(model) + state)
        line = doctor_line(host_env, host_repo)
        assert line.startswith("FAIL") and "codex exec --trust" in line
        proc = host_env.run(
            [codex, "exec", "--json", "--trust", "-c", 'sandbox_mode="workspace-write"', "go"],
            cwd=host_repo,
            extra={"BAGGAGE": f"proctor.lease={JOB}"},
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "Command blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py" in model.told_after(0)
        assert read(host_repo, "src/b.py") == "B = 1\n"
        line = doctor_line(host_env, host_repo)
        assert line.startswith("ok") and hooks_json in line


def test_shell_write_outside_the_lease_is_denied_and_own_write_passes(host_env, host_repo):
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    with ScriptedModel(
        Responses(),
        [
            Turn(text="Writing b.", tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]),
            Turn(tools=[Tool("exec_command", {"cmd": "printf 'A = 2\\n' > src/a.py"})]),
            Turn(text="finished"),
        ],
    ) as model:
        wire(host_env, host_repo, model)
        events = run_codex(host_env, host_repo)
        told = model.told_after(0)
        assert (
            "Command blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py is outside the write "
            "paths of plan/w1 (src/a.py)" in told
        )
        assert read(host_repo, "src/b.py") == "B = 1\n"
        assert "Process exited with code 0" in model.told_after(1)
        assert read(host_repo, "src/a.py") == "A = 2\n"
    # the denied command left no item in the stream; the own one ran
    commands = [
        e["item"]["command"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert len(commands) == 1 and "src/a.py" in commands[0]


def test_apply_patch_outside_the_lease_is_denied_and_own_patch_passes(host_env, host_repo):
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    outside = "*** Begin Patch\n*** Update File: src/b.py\n@@\n-B = 1\n+B = 2\n*** End Patch\n"
    moved = "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/c.py\n@@\n-A = 1\n+A = 3\n*** End Patch\n"
    own = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-A = 1\n+A = 2\n*** End Patch\n"
    with ScriptedModel(
        Responses(),
        [
            Turn(tools=[Tool("apply_patch", {"input": outside})]),
            Turn(tools=[Tool("apply_patch", {"input": moved})]),
            Turn(tools=[Tool("apply_patch", {"input": own})]),
            Turn(text="finished"),
        ],
    ) as model:
        wire(host_env, host_repo, model)
        run_codex(host_env, host_repo)
        tools = {t.get("name"): t.get("type") for t in model.main_requests()[0]["body"]["tools"]}
        assert tools.get("apply_patch") == "custom"  # the freeform tool, as Codex offers it
        assert (
            "blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py is outside the write paths of "
            "plan/w1" in model.told_after(0)
        )
        assert "src/c.py is outside the write paths of plan/w1" in model.told_after(1)
        assert read(host_repo, "src/b.py") == "B = 1\n" and not os.path.exists(os.path.join(host_repo, "src/c.py"))
        assert "Success. Updated the following files" in model.told_after(2)
        assert read(host_repo, "src/a.py") == "A = 2\n"


def test_advisory_reaches_the_model(host_env, host_repo):
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    with ScriptedModel(
        Responses(),
        [
            Turn(tools=[Tool("exec_command", {"cmd": "T=src/a.py; echo 'A = 2' > \"$T\""})]),
            Turn(text="finished"),
        ],
    ) as model:
        wire(host_env, host_repo, model)
        run_codex(host_env, host_repo)
        told = model.told_after(0)
        # additionalContext arrives as a developer message beside the command's output
        assert "[developer]" in told and "advise [lease-write-scope]: cannot tell what this writes" in told
        assert read(host_repo, "src/a.py") == "A = 2\n"


def test_stop_block_hands_the_follow_up_to_the_model(host_env, host_repo):
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    text = "Follow-up from the monitors of job plan/w1 (1 event): deploy finished with 2 warnings"
    proc = host_env.run([sys.executable, "-c", ADD_FOLLOW_UP, host_repo, JOB, text], cwd=host_repo)
    assert proc.returncode == 0, proc.stderr

    def carried(record):
        return text in json.dumps(record["body"].get("input"))

    with ScriptedModel(
        Responses(), [Turn(text="first answer"), Turn(text="second answer after the follow-up", when=carried)]
    ) as model:
        wire(host_env, host_repo, model)
        events = run_codex(host_env, host_repo)
        # the Stop was refused with the follow-up as its reason; the model read it and went on
        assert text in model.told_after(0) and model.consumed() == 2
    messages = [
        e["item"]["text"] for e in events if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    ]
    assert messages == ["first answer", "second answer after the follow-up"]
    assert sum(e["type"] == "turn.started" for e in events) == 1  # the same turn carried on


# --- the executor's own argv: the guard handed on the command line, nothing wired ---------------------


def worker_argv(prompt: str, lease: str | None = JOB, command: list | None = None) -> list[str]:
    """The argv proctor's codex executor builds for a worker of `lease`, run with the real binary."""
    from proctor.config import Worker
    from proctor.workers.executors import codex

    worker = Worker("cx", "codex", command, None, None, None)
    argv = codex.argv(worker, prompt, lease=lease)
    if argv[0] == "codex":
        argv[0] = host_binary("codex")
    return argv


@pytest.mark.parametrize("checkout_says", ["nothing", "hooks off"])
def test_executor_argv_hands_the_guard_with_nothing_wired(host_env, host_repo, checkout_says):
    """No hook anywhere in the person's config or the checkout, no trust recorded: the worker's
    own command line carries proctor's hooks, trusted, and Codex runs them. Nor can the
    checkout's trusted `.codex/config.toml` switch hooks off, or its `.codex/hooks.json` add
    state for them (a project layer's hook state is never read)."""
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    extra_argv = []
    if checkout_says == "hooks off":
        os.makedirs(os.path.join(host_repo, ".codex"))
        with open(os.path.join(host_repo, ".codex", "config.toml"), "w") as handle:
            handle.write(
                '[features]\nhooks = false\n\n[hooks.state."/<session-flags>/config.toml:pre_tool_use:0:0"]\n'
                "enabled = false\n"
            )
        git(host_repo, "add", ".codex")
        git(host_repo, "commit", "-q", "-m", "a checkout that turns hooks off")
        extra_argv = ["--trust"]  # the project's .codex/ loads only in a trusted project
    with ScriptedModel(
        Responses(),
        [
            Turn(text="Writing b.", tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]),
            Turn(tools=[Tool("exec_command", {"cmd": "printf 'A = 2\\n' > src/a.py"})]),
            Turn(text="finished"),
        ],
    ) as model:
        _write_codex_config(host_env.home, provider(model))  # the model, and nothing else
        argv = worker_argv("do the task")
        argv[argv.index("exec") + 1 : argv.index("exec") + 1] = extra_argv
        # no BAGGAGE, and a PATH without proctor: the pinned hook needs neither
        path = os.pathsep.join(
            p for p in host_env.env["PATH"].split(os.pathsep) if p != os.path.dirname(sys.executable)
        )
        proc = host_env.run(argv, cwd=host_repo, extra={"PATH": path}, timeout=180)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert (
            "Command blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py is outside the write "
            "paths of plan/w1 (src/a.py)" in model.told_after(0)
        ), model.told_after(0)
        assert "Process exited with code 0" in model.told_after(1), model.told_after(1)
    assert read(host_repo, "src/b.py") == "B = 1\n"
    assert read(host_repo, "src/a.py") == "A = 2\n"


def test_a_command_of_ones_own_still_gets_the_guard(host_env, host_repo):
    """`[workers.X] command` keeps its own say about the sandbox (none is added), and the
    hooks are handed all the same."""
    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    with ScriptedModel(
        Responses(), [Turn(tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]), Turn(text="finished")]
    ) as model:
        _write_codex_config(host_env.home, provider(model))
        argv = worker_argv("do the task", command=[host_binary("codex"), "-s", "workspace-write"])
        assert 'sandbox_mode="workspace-write"' not in argv and "features.hooks=true" in argv
        proc = host_env.run(argv, cwd=host_repo, timeout=180)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py" in model.told_after(0)
    assert read(host_repo, "src/b.py") == "B = 1\n"


def test_the_persons_own_trusted_hooks_still_run_beside_the_handed_ones(host_env, host_repo, tmp_path):
    """The handed trust (`-c hooks.state={...}`) is a layer of its own: the trust the person
    recorded in config.toml for their own hooks still counts."""
    from proctor.hosts.codex import trust_hash

    fork_and_take(host_env, host_repo, JOB, "src/a.py")
    marker = tmp_path / "marker"
    handler = {"type": "command", "command": f"touch {marker}; echo '{{}}'", "timeout": 30}
    config = os.path.join(host_env.home, ".codex", "config.toml")
    with ScriptedModel(
        Responses(), [Turn(tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]), Turn(text="finished")]
    ) as model:
        _write_codex_config(
            host_env.home,
            provider(model)
            + (
                f'[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = "command"\ncommand = "{handler["command"]}"\n'
                f'timeout = 30\n\n[hooks.state."{config}:pre_tool_use:0:0"]\n'
                f'trusted_hash = "{trust_hash("PreToolUse", handler)}"\n'
            ),
        )
        proc = host_env.run(worker_argv("do the task"), cwd=host_repo, timeout=180)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py" in model.told_after(0)
    assert marker.exists(), "the person's own trusted hook did not run"
    assert read(host_repo, "src/b.py") == "B = 1\n"


# --- proctor work with executor = "codex" ------------------------------------------------------------


@pytest.fixture
def state_outside_tmp(host_env, monkeypatch):
    """proctor's state and cache outside /tmp, which Codex's workspace-write sandbox leaves
    writable anyway: only the writable roots proctor adds let the worker write there."""
    temporary = ("/tmp/", os.path.realpath(tempfile.gettempdir()) + "/")
    places = [os.path.join(os.path.expanduser("~"), ".cache"), "/var/tmp"]
    place = next(
        (
            p
            for p in places
            if os.path.isdir(p) and os.access(p, os.W_OK) and not (os.path.realpath(p) + "/").startswith(temporary)
        ),
        None,
    )
    if place is None:
        reason = f"no writable directory outside the temporary directories ({', '.join(places)})"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    base = tempfile.mkdtemp(prefix="proctor-codex-test-", dir=place)
    for name, value in (
        ("PROCTOR_STATE_DIR", os.path.join(base, "state")),
        ("XDG_CACHE_HOME", os.path.join(base, "cache")),
    ):
        host_env.env[name] = value
        monkeypatch.setenv(name, value)
    yield base
    shutil.rmtree(base, ignore_errors=True)


RESULT = json.dumps({"schema_version": 1, "status": "done", "summary": "set A"})


def test_work_with_codex_resumes_its_worker_with_a_follow_up_and_lands_the_work(
    host_env, host_repo, state_outside_tmp, tmp_path
):
    """Nothing is wired: no hook in the person's config.toml or the checkout, no trust recorded.
    The guard comes with the worker's command line, so its write outside the lease is denied.
    While the worker's first turn runs, a monitor is added for its job (by the person: from inside
    Codex's workspace-write sandbox a worker cannot reach the server on loopback, "Operation not
    permitted"), and the worker ends its turn without the work: that attempt fails its gates, and
    `proctor work` waits. The real server runs the monitor; its follow-up resumes the session
    (`codex exec resume`) as a new attempt in the same worktree, which does the work, and is
    graded and landed."""
    host_binary("codex")
    assert host_env.proctor("init", "--force", cwd=host_repo).returncode == 0  # the store in the new state dir
    with open(os.path.join(host_repo, "proctor.toml"), "w") as handle:
        handle.write(
            '[targets.test]\ncommand = "python3 -c \'import sys; sys.exit(0)\'"\ntimeout = "5m"\n\n'
            '[targets.ci]\ncommand = "make ci"\n\n[jobs]\nidle_minutes = 2\n\n[workers.cx]\nexecutor = "codex"\n'
        )
    git(host_repo, "add", "-A")
    git(host_repo, "commit", "-q", "-m", "a codex worker")
    proc = host_env.proctor(
        "job", "fork", JOB, "--criteria", "set A to 2", "--write-paths", "src/a.py", "--check", "test", cwd=host_repo
    )
    assert proc.returncode == 0, proc.stderr
    resumed = lambda record: CI_EVENT in json.dumps(record["body"].get("input"))  # noqa: E731
    added = []

    def monitor_then_stop(record: dict) -> Turn:
        added.append(add_monitor_for(host_env, host_repo, JOB, str(tmp_path / "ci-ran")))
        return Turn(text="CI has to go green first; the monitor will tell me.")

    with (
        ScriptedModel(
            Responses(),
            [
                Turn(text="Writing b.", tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py"})]),
                monitor_then_stop,
                Turn(tools=[Tool("exec_command", {"cmd": "printf 'A = 2\\n' > src/a.py"})], when=resumed),
                Turn(tools=[Tool("exec_command", {"cmd": "proctor run test"})]),
                Turn(tools=[Tool("exec_command", {"cmd": f"echo '{RESULT}' | proctor job exit {JOB} --stdin"})]),
                Turn(text="Set A = 2.\n\nDONE"),
            ],
        ) as model,
        server(host_env, host_repo),
    ):
        _write_codex_config(host_env.home, provider(model))  # the model only: no hooks, no trust
        proc = host_env.proctor("work", JOB, "-o", "json", cwd=host_repo, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert model.consumed() == 6, model.summary()
        assert added and added[0].returncode == 0 and f"on {JOB} every 10s: ci watcher" in added[0].stdout, added
        outcome = json.loads(proc.stdout)["jobs"][0]
        first, again = outcome["attempts"]
        assert outcome["passed"] and outcome["commit"] and first["executor"] == again["executor"] == "codex"
        assert first["outcome"] == "finished" and first["reply_kind"] == "completed" and first["session"]
        assert first["passed"] is False and "followup" not in first
        assert (
            "Command blocked by PreToolUse hook: deny [lease-write-scope]: src/b.py is outside the write "
            "paths of plan/w1 (src/a.py)" in model.told_after(0)
        ), model.told_after(0)
        assert f"waiting for the monitors of {JOB}: 1 live" in proc.stderr, proc.stderr[-3000:]
        # the follow-up resumed the same conversation: the first attempt's prompt and outputs are in it
        request = next(r for r in model.main_requests() if r.get("step") == 2)
        assert "set A to 2" in json.dumps(request["body"]["input"]) and CI_EVENT in model.dialect.told(request["body"])
        handed = [f for f in followup_rows(host_repo, JOB) if f["delivered"]]
        assert len(handed) == 1 and CI_EVENT in handed[0]["text"], followup_rows(host_repo, JOB)
        assert again["followup"] == handed[0]["id"] and again["followup_delivered"] is True
        assert handed[0]["via"] == f"resume:cx:{first['session']}"
        assert again["passed"] is True and again["session"] == first["session"], again
        # the resumed worker ran proctor run and proctor job exit inside Codex's sandbox, and both worked
        for step in (3, 4):
            told = model.told_after(step)
            assert "Process exited with code 0" in told and "Read-only file system" not in told, told
    assert git(host_repo, "show", "HEAD:src/a.py") == "A = 2\n"
    assert git(host_repo, "log", "-1", "--format=%s").strip() == "set A to 2"
    assert read(host_repo, "src/b.py") == "B = 1\n"


def test_apply_patch_into_another_jobs_declaration_is_denied_and_own_passes(host_env, host_repo):
    source = "import os\n\n\ndef alpha():\n    return 1\n\n\ndef beta():\n    return 2\n"
    with open(os.path.join(host_repo, "src", "d.py"), "w") as handle:
        handle.write(source)
    git(host_repo, "add", "-A")
    git(host_repo, "commit", "-qm", "d")
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
    fork_and_take(host_env, host_repo, JOB, "src/d.py#alpha")
    theirs = (
        "*** Begin Patch\n*** Update File: src/d.py\n@@ def beta():\n-    return 2\n+    return 20\n*** End Patch\n"
    )
    own = "*** Begin Patch\n*** Update File: src/d.py\n@@ def alpha():\n-    return 1\n+    return 10\n*** End Patch\n"
    with ScriptedModel(
        Responses(),
        [
            Turn(tools=[Tool("apply_patch", {"input": theirs})]),
            Turn(tools=[Tool("apply_patch", {"input": own})]),
            Turn(text="finished"),
        ],
    ) as model:
        wire(host_env, host_repo, model)
        run_codex(host_env, host_repo)
        assert (
            "blocked by PreToolUse hook: deny [lease-claimed-declaration]: src/d.py: this edit lands in the "
            "declaration 'def beta():'" in model.told_after(0)
        )
        assert "Success. Updated the following files" in model.told_after(1)
    assert read(host_repo, "src/d.py") == source.replace("return 1", "return 10")


def test_a_sandboxed_codex_worker_reaches_the_store_through_its_broker_alone(host_env, host_repo, state_outside_tmp):
    """The real Codex as a worker inside its job's Landlock domain (`[sandbox] workers = true`),
    inside Codex's own workspace-write sandbox too: its `proctor run test` and `proctor job exit`
    are run by the broker of its attempt (a Unix socket, which Codex's sandbox lets through),
    while a write into proctor's state and one outside its path are refused by the kernel."""
    host_binary("codex")
    from proctor import sandbox

    if sandbox.kernel_abi() == 0 and os.environ.get("CI") != "true":
        pytest.skip("this kernel offers no Landlock; CI's kernel does, and there this test runs")
    assert host_env.proctor("init", "--force", cwd=host_repo).returncode == 0
    with open(os.path.join(host_repo, "proctor.toml"), "w") as handle:
        handle.write(
            '[targets.test]\ncommand = "grep -q 2 src/a.py"\ntimeout = "5m"\n\n[jobs]\nidle_minutes = 2\n\n'
            '[sandbox]\nmode = "landlock"\nworkers = true\n\n'
            '[guard.rules]\nlease-write-scope = "off"\nlease-tamper = "off"\n\n[workers.cx]\nexecutor = "codex"\n'
        )
    git(host_repo, "add", "-A")
    git(host_repo, "commit", "-q", "-m", "a sandboxed codex worker")
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
        assert proc.returncode == 0, proc.stderr
    from proctor.workspace import Workspace

    with Workspace(host_repo) as ws:
        state = ws.state_dir
    with ScriptedModel(
        Responses(),
        [
            Turn(tools=[Tool("exec_command", {"cmd": "echo 'B = 2' > src/b.py; echo rc=$?"})]),
            Turn(tools=[Tool("exec_command", {"cmd": f"echo x >> {state}/planted; echo rc=$?"})]),
            Turn(tools=[Tool("exec_command", {"cmd": "printf 'A = 2\\n' > src/a.py"})]),
            Turn(tools=[Tool("exec_command", {"cmd": "proctor run test"})]),
            Turn(tools=[Tool("exec_command", {"cmd": f"echo '{RESULT}' | proctor job exit {JOB} --stdin"})]),
            Turn(text="Set A = 2.\n\nDONE"),
        ],
    ) as model:
        _write_codex_config(host_env.home, provider(model))
        proc = host_env.proctor("work", JOB, "-o", "json", cwd=host_repo, timeout=300)
        told = [model.told_after(n) for n in range(5)]
    assert proc.returncode == 0, "\n--\n".join(told) + proc.stdout[-3000:] + proc.stderr[-3000:]
    for n in (0, 1):
        assert "rc=0" not in told[n] and ("Permission denied" in told[n] or "Read-only" in told[n]), told[n]
    for n in (3, 4):
        assert "Process exited with code 0" in told[n], told[n]
    assert not os.path.exists(os.path.join(state, "planted"))
    outcome = json.loads(proc.stdout)["jobs"][0]
    assert outcome["passed"] and outcome["commit"], outcome
    assert git(host_repo, "show", "--name-only", "--format=", "HEAD").split() == ["src/a.py"]
    from proctor import trail

    with Workspace(host_repo) as ws, ws.store.read() as tx:
        [brokered] = trail.events(tx, JOB, "sandbox_broker")
    assert brokered["data"]["served"] >= 2 and brokered["data"]["refused"] == [], brokered
