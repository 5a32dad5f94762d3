"""proctor/guard/rules/background_left.py: background-left, background tasks left running at a stop."""

from __future__ import annotations

import json
import os


from proctor.hook import run as hook_run
from tests.guard.rules.background import launch
from tests.transcript.test_transcript import tool_result, tool_use, write


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
