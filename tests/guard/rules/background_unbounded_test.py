"""proctor/guard/rules/background_unbounded.py: background-unbounded, a background command with no bound on its run."""

from __future__ import annotations

import json
import os

import pytest

from proctor.hook import run as hook_run


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
