"""Codex: the same wire format as Claude Code, read by a stricter parser.

Codex treats an unknown field as a failed hook and runs the tool (it fails open), so an
allow is exactly `{}`, a deny is exactly `hookSpecificOutput` with `permissionDecision: deny`
and a non-empty reason, and an advisory travels as `systemMessage` (some Codex versions
reject `additionalContext` on PreToolUse). Never `ask`, a bare `allow`, `continue`,
`stopReason` or `suppressOutput`.
"""

from __future__ import annotations

from proctor.guard.call import OTHER, POST_TOOL, PRE_TOOL, STOP, SUBAGENT_STOP, Call, fill_common
from proctor.hook.claude import read_tool_input

EVENTS = {"PreToolUse": PRE_TOOL, "PostToolUse": POST_TOOL, "Stop": STOP, "SubagentStop": SUBAGENT_STOP}


def parse(event: dict) -> Call:
    call = Call("codex", EVENTS.get(event.get("hook_event_name"), OTHER))
    fill_common(call, event)
    read_tool_input(call, event.get("tool_input"))
    return call


def render(call: Call, verdict) -> dict:
    if verdict.decision == "pass":
        return {}
    message = verdict.text() or "refused by proctor"
    if verdict.decision == "deny":
        if call.event == PRE_TOOL:
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": message}}
        return {"decision": "block", "reason": message}
    return {"systemMessage": message}


# --- wiring (printed by `proctor describe harness --host codex`; never on the hook's path) ---

MARKER = ".codex"


def wiring() -> str:
    lines = ["# Codex: merge into ~/.codex/config.toml (or <repo>/.codex/hooks.json as JSON)"]
    for event in ("PreToolUse", "PostToolUse", "Stop"):
        lines += [f"[[hooks.{event}]]", f"[[hooks.{event}.hooks]]", 'type = "command"',
                  'command = "proctor hook codex"', ""]
    return "\n".join(lines)


def wired(root: str, home: str) -> tuple[bool, str]:
    import os

    from proctor.guard.harness import settings_mention

    paths = [os.path.join(root, ".codex", "hooks.json"), os.path.join(home, ".codex", "hooks.json"),
             os.path.join(home, ".codex", "config.toml")]
    found = settings_mention(paths, "proctor hook codex")
    return (True, f"present in {found}") if found else (False, f"missing (looked in {', '.join(paths)})")
