"""Claude Code: its hook events in, and the answers it honours out.

PreToolUse deny is `hookSpecificOutput.permissionDecision: deny` with the reason, which the
model reads; an advisory is `additionalContext`, which the model sees. Stop and
SubagentStop are refused with `decision: block` and a reason (Claude carries on with it);
their advisories go to the person as `systemMessage`, since additionalContext on a Stop
would itself make Claude keep going. UserPromptSubmit's advisory is `additionalContext`,
which the model reads with the prompt; Notification is only listened to (it says when the
session waits for the person), never answered.
"""

from __future__ import annotations

from proctor.guard.call import (
    NOTIFY,
    OTHER,
    POST_TOOL,
    PRE_TOOL,
    PROMPT,
    STOP,
    SUBAGENT_STOP,
    Call,
    fill_common,
    proctor_tool,
    read_named_paths,
    text,
)

EVENTS = {
    "PreToolUse": PRE_TOOL,
    "PostToolUse": POST_TOOL,
    "Stop": STOP,
    "SubagentStop": SUBAGENT_STOP,
    "UserPromptSubmit": PROMPT,
    "Notification": NOTIFY,
}
WIRED_EVENTS = ("PreToolUse", "PostToolUse", "Stop", "SubagentStop", "UserPromptSubmit", "Notification")
WRITE_TOOLS = {"Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path", "NotebookEdit": "notebook_path"}
READ_TOOLS = {"Read": "file_path", "NotebookRead": "notebook_path", "Glob": "path", "Grep": "path", "LS": "path"}
# Tools whose input is not a file path (a spawn's prompt is read below; apply_patch's body too).
KNOWN_TOOLS = frozenset(
    (
        "Bash",
        "Task",
        "Agent",
        "TodoWrite",
        "WebFetch",
        "WebSearch",
        "TaskStop",
        "TaskOutput",
        "BashOutput",
        "KillBash",
        "KillShell",
        "Skill",
        "AskUserQuestion",
        "ExitPlanMode",
        "EnterPlanMode",
        "apply_patch",
        "shell",
        "exec_command",
        "local_shell",
    )
)


def parse(event: dict) -> Call:
    call = Call("claude", EVENTS.get(event.get("hook_event_name", ""), OTHER))
    fill_common(call, event)
    read_tool_input(call, event.get("tool_input"))
    return call


def read_tool_input(call: Call, tool_input: object) -> None:
    """The tool's input, in the shape Claude Code (and Codex, which copies it) sends."""
    if not isinstance(tool_input, dict):
        return
    if proctor_tool(call, tool_input):
        return  # proctor's own MCP tool: judged by the lease-store rule, never as a file or shell tool
    command = tool_input.get("command")
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        command = " ".join(_quote(c) for c in command)
    call.command = text(command)
    call.background = tool_input.get("run_in_background") is True
    tool = call.tool or ""
    if tool in WRITE_TOOLS and text(tool_input.get(WRITE_TOOLS[tool])):
        call.writes.append(tool_input[WRITE_TOOLS[tool]])
    elif tool in READ_TOOLS and text(tool_input.get(READ_TOOLS[tool])):
        call.reads.append(tool_input[READ_TOOLS[tool]])
    elif (
        tool not in WRITE_TOOLS
        and tool not in READ_TOOLS
        and tool not in KNOWN_TOOLS
        and (not call.command or tool.startswith("mcp_"))
    ):
        read_named_paths(call, tool_input)  # an MCP server's file tool (its command too), or any tool naming a path
    if isinstance(tool_input.get("old_string"), str) and isinstance(tool_input.get("new_string"), str):
        call.edits.append((None, tool_input["old_string"], tool_input["new_string"]))
    for edit in tool_input.get("edits") or () if isinstance(tool_input.get("edits"), list) else ():
        if (
            isinstance(edit, dict)
            and isinstance(edit.get("old_string"), str)
            and isinstance(edit.get("new_string"), str)
        ):
            call.edits.append((None, edit["old_string"], edit["new_string"]))
    patch = (text(tool_input.get("command")) or text(tool_input.get("input"))) if tool == "apply_patch" else None
    if isinstance(patch, str):
        from proctor.guard.shell import patch_paths

        call.writes.extend(patch_paths(patch))
        call.patch = patch
    # A payload carrying a prompt rather than a command or a path is a delegation.
    if text(tool_input.get("prompt")) and not call.command and not call.writes and not call.reads:
        call.prompt = tool_input["prompt"]
        call.spawn_label = text(tool_input.get("subagent_type")) or text(tool_input.get("description")) or tool


def _quote(word: str) -> str:
    if word and all(c.isalnum() or c in "-_./=:,+@%" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def pre_tool_answer(decision: str, message: str) -> dict:
    """A tool call's answer, a deny or an advisory: Claude Code's form, which Codex reads too."""
    if decision == "deny":
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": message,
            }
        }
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": message}}


def render(call: Call, verdict) -> dict:
    if verdict.decision == "pass":
        return {}
    message = verdict.text()
    if call.event == PRE_TOOL:
        return pre_tool_answer(verdict.decision, message)
    if call.event in (STOP, SUBAGENT_STOP):
        if verdict.decision == "deny":
            return {"decision": "block", "reason": message}
        return {"systemMessage": message}
    if call.event == POST_TOOL:
        if verdict.decision == "deny":
            return {"decision": "block", "reason": message}
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": message}}
    if call.event == PROMPT:  # never refused: what a rule says goes to the model with the prompt
        return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": message}}
    if call.event == NOTIFY:
        return {}
    return {"systemMessage": message}


# --- wiring (printed by `proctor describe harness --host claude`; never on the hook's path) ---

MARKER = ".claude"  # the host's configuration directory, in a checkout and in the home directory
LABEL = "Claude Code"
SKILLS = True  # it reads skills from <MARKER>/skills


def mcp_files(root: str, home: str, environ) -> list[str]:
    """Where Claude Code reads its MCP servers."""
    import os

    return [os.path.join(root, ".mcp.json"), os.path.join(home, ".claude.json")]


def protected(root: str, home: str, xdg_config: str, environ) -> list[tuple[str, str]]:
    """(path, what it is) for what Claude Code reads that a leased session must not write: its
    hook wiring, and its record of each session and subagent (a subagent's spawn is read from
    it). lease-tamper keeps a holder out of each."""
    import os

    out = [
        (os.path.join(root, ".claude"), "this checkout's Claude Code configuration (its hook wiring)"),
        (
            os.path.join(home, ".claude", "settings.json"),
            "the home directory's Claude Code configuration (its hook wiring)",
        ),
        (os.path.join(home, ".claude", "settings.local.json"), "the home directory's Claude Code hook wiring"),
    ]
    configured = environ.get("CLAUDE_CONFIG_DIR")
    if configured and os.path.isabs(configured):
        out.append((configured, "Claude Code's configuration (its hooks, its subagents' records)"))
    out.append((os.path.join(home, ".claude", "projects"), "Claude Code's session records"))
    out.append(("/etc/claude-code", "an agent host's system-wide settings (its hook wiring)"))
    return out


def wiring() -> str:
    import json

    hooks = {
        "hooks": {
            event: [{"matcher": "*", "hooks": [{"type": "command", "command": "proctor hook claude", "timeout": 30}]}]
            for event in WIRED_EVENTS
        }
    }
    return (
        "# Claude Code: merge into .claude/settings.json (project) or ~/.claude/settings.json\n"
        + json.dumps(hooks, indent=2)
        + "\n"
    )


MCP_SERVER = {"type": "stdio", "command": "proctor", "args": ["mcp"]}


def mcp_wiring() -> str:
    import json

    return (
        "# Claude Code: proctor's MCP tools (mcp__proctor__<tool>). Run once in the repository:\n"
        "#   claude mcp add --scope project proctor -- proctor mcp\n"
        "# or merge into .mcp.json at its root. Claude Code asks once before it starts a project's servers;\n"
        '# "enableAllProjectMcpServers": true (or "enabledMcpjsonServers": ["proctor"]) in\n'
        "# .claude/settings.json approves them. The server runs in the session's directory and environment,\n"
        "# so a leased session's calls act under its lease.\n"
        + json.dumps({"mcpServers": {"proctor": MCP_SERVER}}, indent=2)
        + "\n"
    )


def wired(root: str, home: str) -> tuple[bool, str]:
    import os

    paths = [
        os.path.join(root, ".claude", "settings.json"),
        os.path.join(root, ".claude", "settings.local.json"),
        os.path.join(home, ".claude", "settings.json"),
    ]
    found: dict[str, str] = {}  # event -> the file that wires proctor for it
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError:
            continue
        if "proctor hook claude" not in text:
            continue
        for event in _events_wired(text):
            found.setdefault(event, path)
    if not found:
        return False, f"missing (looked in {', '.join(paths)})"
    missing = [event for event in WIRED_EVENTS if event not in found]
    where = ", ".join(sorted(set(found.values())))
    if missing:
        return False, (
            f"present in {where} but not for {', '.join(missing)} (monitor follow-ups and the "
            f"session's activity need them): merge `proctor describe harness --host claude` again"
        )
    return True, f"present in {where}"


def _events_wired(text: str) -> list[str]:
    """The hook events whose hooks run `proctor hook claude` in one settings file."""
    import json

    try:
        hooks = json.loads(text).get("hooks")
    except (ValueError, AttributeError):
        return list(WIRED_EVENTS[:4])  # unreadable as JSON: the older wiring, at least
    events = []
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        if "proctor hook claude" in json.dumps(groups):
            events.append(event)
    return events
