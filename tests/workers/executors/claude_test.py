"""proctor/workers/executors/claude.py: its argv with the pinned hooks it hands over, and its stream Parser."""

from __future__ import annotations

import json
import os
import subprocess

from proctor import api
from proctor.hosts import claude as claude_hook
from proctor.workers.executors import claude
from tests.support import needs_shared_fixtures as needs_fixtures
from tests.support import make_repo
from tests.workers.world import HOSTS, LEASE, _stream, needs_hosts


class Worker:
    command = None
    model = None


def _settings(argv: list[str]) -> dict:
    return json.loads(argv[argv.index("--settings") + 1])


def _results(lines: list[str]) -> list[dict]:
    return [json.loads(line) for line in lines if json.loads(line).get("type") == "result"]


# --- argv and the hooks handed over -----------------------------------------------------------


def test_pinned_hook_is_claudes_for_every_host():
    from proctor.workers.executors import claude, pinned_hook

    assert pinned_hook(LEASE, "claude") == claude.pinned_hook(LEASE)
    command = pinned_hook(LEASE, "codex")
    assert command.startswith("/usr/bin/env -i ") and command.endswith(" -I -m proctor hook codex --lease plan/w1")


@needs_fixtures  # as in tests/workers/test_work.py, whose tests all need the shared captures
def test_claude_default_command_runs_shell_and_carries_the_printed_hooks():
    from proctor.config import Worker
    from proctor.hosts import claude as hook_claude
    from proctor.workers.executors import claude

    plain = claude.argv(Worker("c", "claude", None, None, None, None), "lease: feat\ndo it")
    assert plain[:6] == ["claude", "-p", "lease: feat\ndo it", "--output-format", "stream-json", "--verbose"]
    # acceptEdits refuses every shell command in -p: the worker could not run its check
    assert "--permission-mode" not in plain and "acceptEdits" not in plain
    allowed = plain[plain.index("--allowedTools") + 1].split(",")
    assert {"Bash", "Edit", "Write", "Read"} <= set(allowed) and "WebFetch" not in allowed
    printed = json.loads("\n".join(line for line in hook_claude.wiring().splitlines() if not line.startswith("#")))
    assert json.loads(plain[plain.index("--settings") + 1]) == {**printed, "disableAllHooks": False}
    assert set(printed["hooks"]) == {
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SubagentStop",
        "UserPromptSubmit",
        "Notification",
    }
    # a command that says how permissions go keeps its say; the hooks come all the same
    own = claude.argv(
        Worker("c", "claude", ("claude", "--permission-mode", "plan"), "m", None, None), "p", resume="s-1"
    )
    assert "--allowedTools" not in own and own.count("--permission-mode") == 1
    assert json.loads(own[own.index("--settings") + 1])["hooks"] == printed["hooks"]
    assert own[-4:] == ["--model", "m", "--resume", "s-1"]


def test_pinned_hooks_cover_the_printed_events():
    printed = json.loads("\n".join(line for line in claude_hook.wiring().splitlines() if not line.startswith("#")))
    pinned = _settings(claude.argv(Worker(), "p", lease="feat"))
    assert pinned["disableAllHooks"] is False
    assert sorted(pinned["hooks"]) == sorted(printed["hooks"])
    for groups in pinned["hooks"].values():
        command = groups[0]["hooks"][0]["command"]
        assert command.startswith("/usr/bin/env -i ") and command.endswith(" -m proctor hook claude --lease feat")


def test_pinned_hook_judges_under_the_job_in_a_hostile_environment(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    command = _settings(claude.argv(Worker(), "p", lease="feat"))["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    empty = tmp_path / "empty"
    empty.mkdir()
    hostile = {
        "PATH": "/nonexistent",
        "PROCTOR_STATE_DIR": str(empty),
        "XDG_CACHE_HOME": str(empty),
        "BAGGAGE": "proctor.lease=other",
        "PYTHONPATH": str(empty),
        "HOME": str(empty),
    }
    payload = {
        "session_id": "s",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": os.path.join(root, "src", "b.py"), "content": "x"},
    }
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=hostile,
        cwd=root,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    reason = json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "lease-write-scope" in reason and "outside the write paths of feat" in reason, reason
    # the printed, unpinned command in the same environment finds no proctor at all
    plain = subprocess.run(
        ["/bin/sh", "-c", "proctor hook claude"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=hostile,
        cwd=root,
        timeout=60,
    )
    assert plain.returncode != 0 and "deny" not in plain.stdout


# --- the Parser: the main agent's Stop is the final reply ---------------------------------------


@needs_hosts
def test_every_capture_ends_at_its_main_stop_with_the_results_text():
    names = sorted(n for n in os.listdir(HOSTS) if os.path.exists(os.path.join(HOSTS, n, "stream.jsonl")))
    assert len(names) >= 10
    for name in names:
        lines = _stream(name)
        main_result = next(r for r in _results(lines) if not (r.get("origin") or {}).get("kind"))
        parser, events = claude.Parser(), []
        for index, line in enumerate(lines):
            events += [(index, event) for event in parser.feed(line)]
        finals = [(i, e) for i, e in events if e.kind == "final"]
        assert len(finals) == 1, name
        index, final = finals[0]
        stop = json.loads(lines[index])
        assert stop["subtype"] == "hook_response" and stop["hook_event"] == "Stop", name
        assert final.value == "stop" and final.text == main_result["result"], name
        confirm = [e for _i, e in events if e.kind == "confirm"]
        assert [(e.text, e.value) for e in confirm] == [(main_result["result"], "success")], name
        assert parser.session == main_result["session_id"]


@needs_hosts
def test_background_agents_do_not_hold_the_reply():
    """f_bg: the main agent's Stop comes 30 lines before the result Claude withholds for its
    background agent; the reply is there, and the follow-up turn's Stop and result change nothing."""
    lines = _stream("f_bg")
    parser = claude.Parser()
    kinds = []
    for index, line in enumerate(lines):
        for event in parser.feed(line):
            kinds.append((index, event.kind, event.text))
    first_stop = next(i for i, line in enumerate(lines) if '"hook_event":"Stop"' in line and "hook_response" in line)
    result = next(i for i, line in enumerate(lines) if line.startswith('{"duration') or '"type":"result"' in line)
    assert (first_stop, "final", "[fake-turn 1] Main finished.") in kinds
    assert result - first_stop > 20
    assert not [k for k in kinds if k[1] in ("final", "step") and k[0] != first_stop]


@needs_hosts
def test_a_blocked_stop_carries_on():
    lines = _stream("e")  # the monitor follow-up blocks the first Stop
    parser = claude.Parser()
    kinds = [event.kind for line in lines for event in parser.feed(line) if event.kind in ("step", "final")]
    assert kinds == ["step", "final"]
    stop = {"type": "system", "subtype": "hook_response", "hook_event": "Stop", "output": "", "exit_code": 2}
    parser = claude.Parser()
    assert [e.kind for e in parser.feed(json.dumps(stop))] == ["step"], "exit code 2 blocks"
    stop.update(exit_code=0, output='{"decision": "approve"}\n')
    assert [e.kind for e in parser.feed(json.dumps(stop))] == ["final"]
    subagent = dict(stop, hook_event="SubagentStop")
    assert claude.Parser().feed(json.dumps(subagent)) == [], "a subagent's Stop is not the reply"
