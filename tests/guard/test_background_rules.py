"""background-silent, background-left and background-unbounded: deny, advise and pass."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support import git, make_repo
from proctor.hook import run as hook_run
from tests.test_transcript import deadline, notice, tool_result, tool_use, ts, write


@pytest.fixture
def root(tmp_path, monkeypatch):
    path = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(path)
    return path


def call(root, transcript, command, session="s1", name="PreToolUse", **extra):
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": root,
        "hook_event_name": name,
        "tool_name": "Bash",
        "tool_input": {"command": command},
        **extra,
    }
    out, code = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    assert code == 0
    return json.loads(out)


def launch(task, command, ago, output=None, agent=None):
    text = f"Command running in background with ID: {task}."
    if output:
        text += f" Output is being written to: {output}"
    return [
        tool_use("tu-" + task, "Bash", {"command": command, "run_in_background": True}, ago, agent=agent),
        tool_result("tu-" + task, text, ago - 1, {"backgroundTaskId": task}),
    ]


def text_of(answer) -> str:
    spec = answer.get("hookSpecificOutput", {})
    return (
        spec.get("permissionDecisionReason")
        or spec.get("additionalContext")
        or answer.get("reason")
        or answer.get("systemMessage")
        or ""
    )


def test_silent_task_denies_writes_but_passes_reads(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b1", "python3 - < /dev/stdin", 2 * 3600, output=str(tmp_path / "b1.output")))
    answer = call(root, transcript, "make build > out.txt")
    spec = answer["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    reason = spec["permissionDecisionReason"]
    assert reason.startswith("deny [background-silent]: 1 background task silent past 60 minutes")
    for part in (
        "task b1 (shell)",
        "running 1h",
        "silent 1h",
        "python3 - < /dev/stdin",
        str(tmp_path / "b1.output"),
        'TaskStop {"task_id": "b1"}',
        "proctor never stops a task",
        "the output file stays on disk",
        "run it bounded: timeout 120m python3 - < /dev/stdin",
    ):
        assert part in reason, part
    for read in ("cat out.txt | grep error", "ls -la", "tail -n 50 " + str(tmp_path / "b1.output")):
        answer = call(root, transcript, read)
        assert "permissionDecision" not in answer.get("hookSpecificOutput", {}), "reads still pass"


def test_output_file_writes_keep_a_task_alive(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    output = tmp_path / "b2.output"
    output.write_text("progress\n")
    write(transcript, launch("b2", "make long", 2 * 3600, output=str(output)))
    assert call(root, transcript, "touch x") == {}, "the output file was written just now"
    old = time.time() - 45 * 60
    os.utime(output, (old, old))
    advised = call(root, transcript, "touch x")
    assert (
        "advise [background-silent]" in text_of(advised) and "permissionDecision" not in advised["hookSpecificOutput"]
    )
    assert call(root, transcript, "touch x") == {}, "advised once per task per session"
    again = call(root, transcript, "touch x", session="s2")
    assert "advise [background-silent]" in text_of(again), "another session is advised too"


def test_notices_and_final_status(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    lines = launch("b3", "server", 3 * 3600)
    lines.append(
        {
            "type": "queue-operation",
            "operation": "enqueue",
            "timestamp": ts(60),
            "content": notice("task", "b3", "running", 60),
        }
    )
    write(transcript, lines)
    assert call(root, transcript, "touch x") == {}, "a recent notice is a sign of life"
    write(
        transcript,
        launch("b4", "stuck", 3 * 3600)
        + [
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": ts(10),
                "content": notice("task", "b4", "completed", 10),
            }
        ],
    )
    assert call(root, transcript, "touch x") == {}, "a finished task is not silent"


def test_watchers_and_subagent_calls_are_not_judged(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    write(
        transcript,
        [
            tool_use("m", "Monitor", {"command": "tail -f log"}, 5 * 3600),
            tool_result(
                "m",
                "Monitor started (task mon1, expires in 10m unless the source ends first).",
                5 * 3600 - 1,
                {"taskId": "mon1", "timeoutMs": 600000},
            ),
        ],
    )
    assert call(root, transcript, "touch x") == {}
    write(transcript, launch("b5", "sleep 99999", 3 * 3600))
    assert call(root, transcript, "touch x", agent_id="sub1") == {}, "on shell calls of a root session"


def test_thresholds_from_config(root, tmp_path):
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write("[guard.background-silent]\nadvise_minutes = 1\ndeny_minutes = 2.5\n")
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b6", "x", 3 * 60))
    assert "deny [background-silent]" in text_of(call(root, transcript, "touch x"))
    write(transcript, launch("b7", "x", 90))
    assert "advise [background-silent]" in text_of(call(root, transcript, "touch x"))


def test_bad_threshold_pair_keeps_defaults(root, tmp_path, proctor):
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write(
            "[guard.background-silent]\nadvise_minutes = 40\ndeny_minutes = 20\n"
            "[guard.background-unbounded]\nceiling_minutes = inf\n"
        )
    problems = proctor("config", "show", "-o", "json").json()["problems"]
    assert any("deny_minutes (20) must be more than advise_minutes (40)" in p for p in problems)
    assert any("ceiling_minutes" in p and "using the default (120)" in p for p in problems)
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b8", "x", 45 * 60))
    assert "advise [background-silent]" in text_of(call(root, transcript, "touch x")), "defaults 30/60 kept"


def test_rule_set_to_advise_or_off(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b9", "x", 3 * 3600))
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('[guard.rules]\nbackground-silent = "advise"\n')
    git(root, "commit", "-qam", "advise")
    assert "advise [background-silent]" in text_of(call(root, transcript, "touch x"))
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('background-unbounded = "off"\n')
    with open(os.path.join(root, "proctor.toml")) as handle:
        text = handle.read().replace('background-silent = "advise"', 'background-silent = "off"')
    with open(os.path.join(root, "proctor.toml"), "w") as handle:
        handle.write(text)
    git(root, "commit", "-qam", "off")
    assert call(root, transcript, "touch x", session="s9") == {}


def test_unreadable_transcripts_pass(root, tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path, "relative/none.jsonl"):
        assert call(root, path, "touch x") == {}
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n" * 100)
    assert call(root, binary, "touch x") == {}


def test_hostile_transcript_paths_pass_without_blocking(root, tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    with deadline(30):
        for path in (fifo, "/dev/zero", zero):
            assert call(root, path, "touch x") == {}
        # a line nested past the JSON parser's depth, then a real silent task: the task is seen
        deep = tmp_path / "deep.jsonl"
        deep.write_bytes(b"[" * 200_000 + b'"Command running in background with ID: deep"\n')
        write(deep, launch("b10", "sleep 99999", 2 * 3600), mode="a")
        reason = text_of(call(root, deep, "touch x"))
        assert reason.startswith("deny [background-silent]") and "task b10 " in reason and "deep" not in reason


def test_background_left_at_subagent_stop(root, tmp_path):
    sub = tmp_path / "agent-a1.jsonl"
    write(sub, launch("s1task", "npm run dev", 120))
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "root.jsonl"),
        "cwd": root,
        "hook_event_name": "SubagentStop",
        "agent_id": "a1",
        "agent_transcript_path": str(sub),
        "stop_hook_active": False,
        "last_assistant_message": "done",
        "background_tasks": [],
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    answer = json.loads(out)
    assert answer["decision"] == "block"
    assert (
        answer["reason"].startswith("deny [background-left]") and 'TaskStop {"task_id": "s1task"}' in answer["reason"]
    )
    write(
        sub,
        launch("s2task", "npm run dev", 120)
        + [
            tool_use("stop", "TaskStop", {"task_id": "s2task"}, 60),
            tool_result("stop", "Successfully stopped task: s2task (npm run dev)", 59),
        ],
    )
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    assert json.loads(out) == {}


def test_background_left_at_root_stop_is_advisory(root, tmp_path):
    transcript = tmp_path / "root.jsonl"
    write(transcript, launch("r1", "vite", 120))
    payload = {
        "session_id": "s1",
        "transcript_path": str(transcript),
        "cwd": root,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "background_tasks": [
            {
                "id": "task-001",
                "type": "shell",
                "status": "running",
                "description": "tail logs",
                "command": "tail -f /var/log/syslog",
            }
        ],
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    answer = json.loads(out)
    assert set(answer) == {"systemMessage"}
    assert "advise [background-left]" in answer["systemMessage"]
    assert "r1" in answer["systemMessage"] and "task-001" in answer["systemMessage"]


@pytest.mark.parametrize(
    "command, background, flagged",
    [
        ("npm run dev", True, True),
        ("tail -f app.log &", False, True),
        ("nohup python -m http.server 8000", False, True),
        ("setsid sleep infinity", False, True),
        ("pnpm dev &", False, True),
        ("watch -n1 ls &", False, True),
        ("timeout 30m npm run dev &", False, False),
        ("npm test &", False, False),
        ("npm run dev", False, False),
        ("vite build &", False, False),
        ("tsc --watch &", False, True),
    ],
)
def test_background_unbounded(root, tmp_path, command, background, flagged):
    payload = {
        "session_id": "s1",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "run_in_background": background},
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    answer = json.loads(out)
    if flagged:
        text = answer["hookSpecificOutput"]["additionalContext"]
        assert text.startswith("advise [background-unbounded]") and "timeout 120m" in text
    else:
        assert answer == {}


@pytest.mark.parametrize(
    "command", ["tail -f x | grep y &", "(npm run dev) &", "bash -c 'npm run dev' &", "npx vite &"]
)
def test_background_unbounded_whole_pipelines(root, command):
    payload = {
        "session_id": "s1",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    assert "advise [background-unbounded]" in json.loads(out).get("hookSpecificOutput", {}).get("additionalContext", "")


def test_background_left_does_not_loop(root, tmp_path):
    sub = tmp_path / "agent-a1.jsonl"
    write(sub, launch("s1task", "npm run dev", 120))
    payload = {
        "session_id": "s1",
        "transcript_path": str(tmp_path / "root.jsonl"),
        "cwd": root,
        "hook_event_name": "SubagentStop",
        "agent_id": "a1",
        "agent_transcript_path": str(sub),
        "stop_hook_active": True,
        "last_assistant_message": "done",
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    assert set(json.loads(out)) == {"systemMessage"}, "advised, not refused again"
    handed = dict(payload, stop_hook_active=False, last_assistant_message="Leaving s1task to the parent session.")
    out, _ = hook_run(["claude"], json.dumps(handed).encode(), dict(os.environ))
    assert json.loads(out) == {}


def test_background_unbounded_set_to_deny(root):
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('[guard.rules]\nbackground-unbounded = "deny"\n')
    payload = {
        "session_id": "s1",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "tail -f app.log", "run_in_background": True},
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    spec = json.loads(out)["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    assert spec["permissionDecisionReason"].startswith("deny [background-unbounded]")
    assert "timeout 120m tail -f app.log" in spec["permissionDecisionReason"]
