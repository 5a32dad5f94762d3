"""The hook's world: a repository in which job feat holds src/a.py and src/gen/** (less
src/gen/secret.py) and job `other` holds src/b.py; a Claude Code event in it; what an answer says,
and whether it denies or advises under a rule. tests/conftest.py's `ws` lays the world out."""

from __future__ import annotations

import os

from proctor import api


CONFIG = """
[targets.test]
command = "true"
[targets.full]
command = "proctor run ci"
[targets.ci]
command = "make ci"
"""


def leased_repo(new_repo, monkeypatch) -> str:
    """The world, laid out in a new repository that becomes the working directory."""
    root = new_repo("repo", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    monkeypatch.chdir(root)
    api.fork(
        {"id": "feat", "write_paths": ["src/a.py", "src/gen/**"], "deny_paths": ["src/gen/secret.py"], "check": "test"},
        cwd=root,
    )
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    return root


def event(root, tool, tool_input, name="PreToolUse", session="s1", **extra):
    return {
        "session_id": session,
        "transcript_path": "/tmp/none.jsonl",
        "cwd": root,
        "permission_mode": "default",
        "hook_event_name": name,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01",
        **extra,
    }


LEASED = {"BAGGAGE": "proctor.lease=feat"}


def reason(answer) -> str:
    return (
        answer["hookSpecificOutput"].get("permissionDecisionReason")
        or answer["hookSpecificOutput"]["additionalContext"]
    )


def denied(answer, rule) -> bool:
    spec = answer.get("hookSpecificOutput", {})
    return spec.get("permissionDecision") == "deny" and f"deny [{rule}]:" in spec["permissionDecisionReason"]


def advised(answer, rule) -> bool:
    spec = answer.get("hookSpecificOutput", {})
    return "permissionDecision" not in spec and f"advise [{rule}]:" in spec.get("additionalContext", "")
