"""opencode: it has no command hooks; a plugin in `.opencode/plugins/` reshapes each tool call
as a Claude-style PreToolUse or PostToolUse event and runs `proctor hook opencode` on it.

The answer is the plugin's to act on: `{"decision": "deny", "reason"}` (the plugin throws, and
the thrown text reaches the model) or `{"advisory": text}` (appended to the tool's output).
"""

from __future__ import annotations

from proctor.guard.call import OTHER, POST_TOOL, PRE_TOOL, STOP, Call, fill_common
from proctor.hook.claude import read_tool_input

EVENTS = {"PreToolUse": PRE_TOOL, "PostToolUse": POST_TOOL, "Stop": STOP}


def parse(event: dict) -> Call:
    call = Call("opencode", EVENTS.get(event.get("hook_event_name"), OTHER))
    fill_common(call, event)
    read_tool_input(call, event.get("tool_input"))
    return call


def render(call: Call, verdict) -> dict:
    if verdict.decision == "pass":
        return {}
    message = verdict.text() or "refused by proctor"
    if verdict.decision == "deny":
        return {"decision": "deny", "reason": message}
    return {"advisory": message}


# --- wiring (printed by `proctor describe harness --host opencode`; never on the hook's path) ---

MARKER = ".opencode"


def wiring() -> str:
    return "# opencode: the plugin is not written yet\n"


def wired(root: str, home: str) -> tuple[bool, str]:
    return False, "the opencode plugin is not written yet"
