"""Gemini CLI: BeforeTool and AfterTool events, and its `decision` answer form.

A deny is `{"decision": "deny", "reason": ...}`; an advisory is `systemMessage`. Its tools
are named differently (run_shell_command, write_file, replace, read_file, ...).
"""

from __future__ import annotations

from proctor.guard.call import OTHER, POST_TOOL, PRE_TOOL, STOP, Call, fill_common, text

EVENTS = {"BeforeTool": PRE_TOOL, "AfterTool": POST_TOOL, "AfterAgent": STOP}
WRITE_TOOLS = {"write_file": "file_path", "replace": "file_path", "edit": "file_path"}
READ_TOOLS = {"read_file": ("absolute_path", "file_path"), "glob": ("path",),
              "search_file_content": ("path",), "list_directory": ("path",)}


def parse(event: dict) -> Call:
    call = Call("gemini", EVENTS.get(event.get("hook_event_name"), OTHER))
    fill_common(call, event)
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return call
    tool = call.tool or ""
    if tool == "run_shell_command":
        call.command = text(tool_input.get("command"))
        directory = text(tool_input.get("directory"))
        if directory and call.cwd:
            import os

            call.cwd = os.path.join(call.cwd, directory)
    elif tool in WRITE_TOOLS and text(tool_input.get(WRITE_TOOLS[tool])):
        call.writes.append(tool_input[WRITE_TOOLS[tool]])
    elif tool in READ_TOOLS:
        for key in READ_TOOLS[tool]:
            if text(tool_input.get(key)):
                call.reads.append(tool_input[key])
                break
    elif tool == "read_many_files" and isinstance(tool_input.get("paths"), list):
        call.reads.extend(p for p in tool_input["paths"] if isinstance(p, str) and p)
    if isinstance(tool_input.get("old_string"), str) and isinstance(tool_input.get("new_string"), str):
        call.edits.append((tool_input["old_string"], tool_input["new_string"]))
    if text(tool_input.get("prompt")) and not call.command and not call.writes and not call.reads:
        call.prompt = tool_input["prompt"]
        call.spawn_label = tool or None
    return call


def render(call: Call, verdict) -> dict:
    if verdict.decision == "pass":
        return {}
    message = verdict.text()
    if verdict.decision == "deny":
        return {"decision": "deny", "reason": message}
    return {"systemMessage": message}


# --- wiring (printed by `proctor describe harness --host gemini`; never on the hook's path) ---

MARKER = ".gemini"


def wiring() -> str:
    import json

    hooks = {"hooks": {event: [{"matcher": ".*", "hooks": [
        {"type": "command", "command": "proctor hook gemini", "timeout": 30000}]}]
        for event in ("BeforeTool", "AfterTool", "AfterAgent")}}
    return ("# Gemini CLI: merge into .gemini/settings.json (timeout is in milliseconds)\n"
            + json.dumps(hooks, indent=2) + "\n")


def wired(root: str, home: str) -> tuple[bool, str]:
    import os

    from proctor.guard.harness import settings_mention

    paths = [os.path.join(root, ".gemini", "settings.json"), os.path.join(home, ".gemini", "settings.json")]
    found = settings_mention(paths, "proctor hook gemini")
    return (True, f"present in {found}") if found else (False, f"missing (looked in {', '.join(paths)})")
