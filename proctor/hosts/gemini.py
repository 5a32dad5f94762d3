"""Gemini CLI: BeforeTool, AfterTool and AfterAgent events, and the answers it honours.

What reaches the model (Gemini CLI 0.61.0): a BeforeTool `{"decision": "deny", "reason"}` is
the tool's result, `Tool execution blocked: <reason>`; an AfterTool deny replaces the result
with `Tool result blocked: <reason>`; `hookSpecificOutput.additionalContext` is appended to the
tool's result on AfterTool only (on BeforeTool it is dropped); `systemMessage` goes to the
person's terminal only. At AfterAgent, a deny turns the reason into the next prompt.

So a BeforeTool advisory is shown to the person and carried to the AfterTool answer of the
same call, where the model reads it: the payloads carry no call id, so the carry is a small
file in proctor's cache keyed by session, tool name and tool input (which Gemini passes to
both events unchanged).

Tools and their arguments: run_shell_command {command, dir_path (where it runs, relative to
cwd or absolute), is_background}; write_file {file_path, content}; replace {file_path,
old_string, new_string}; read_file {file_path}; list_directory, glob and grep_search
{dir_path}; read_many_files {include}; invoke_agent {agent_name, prompt} is a delegation;
web_fetch {prompt} is not.
"""

from __future__ import annotations

import os

from proctor.guard.call import OTHER, POST_TOOL, PRE_TOOL, STOP, Call, fill_common, proctor_tool, read_named_paths, text

EVENTS = {"BeforeTool": PRE_TOOL, "AfterTool": POST_TOOL, "AfterAgent": STOP}
WRITE_TOOLS = {"write_file": "file_path", "replace": "file_path", "edit": "file_path"}
READ_TOOLS = {
    "read_file": ("file_path", "absolute_path"),
    "list_directory": ("dir_path", "path"),
    "glob": ("dir_path", "path"),
    "grep_search": ("dir_path", "path"),
    "search_file_content": ("dir_path", "path"),
}
SPAWN_TOOLS = ("invoke_agent",)
KNOWN_TOOLS = ("run_shell_command", "web_fetch", "google_web_search", "save_memory", "write_todos", "activate_skill")
CARRY_DIR = "gemini-advice"
CARRY_MAX_AGE = 3600.0  # seconds: a carried advisory whose AfterTool never came is dropped


def parse(event: dict) -> Call:
    call = Call("gemini", EVENTS.get(event.get("hook_event_name", ""), OTHER))
    fill_common(call, event)
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return call
    tool = call.tool or ""
    if proctor_tool(call, tool_input, event.get("mcp_context")):
        return call  # proctor's own MCP tool: judged by the lease-store rule
    if tool == "run_shell_command":
        call.command = text(tool_input.get("command"))
        call.background = tool_input.get("is_background") is True
        directory = text(tool_input.get("dir_path")) or text(tool_input.get("directory"))
        if directory:
            if os.path.isabs(directory):
                call.cwd = directory
            elif call.cwd:
                call.cwd = os.path.join(call.cwd, directory)
    elif tool in WRITE_TOOLS and text(tool_input.get(WRITE_TOOLS[tool])):
        call.writes.append(tool_input[WRITE_TOOLS[tool]])
    elif tool in READ_TOOLS:
        for key in READ_TOOLS[tool]:
            if text(tool_input.get(key)):
                call.reads.append(tool_input[key])
                break
    elif tool == "read_many_files":
        for key in ("include", "paths"):
            if isinstance(tool_input.get(key), list):
                call.reads.extend(p for p in tool_input[key] if isinstance(p, str) and p)
    elif tool not in SPAWN_TOOLS and tool not in KNOWN_TOOLS:
        read_named_paths(call, tool_input)  # an MCP server's file tool (mcp_context), or any tool naming a path
    if isinstance(tool_input.get("old_string"), str) and isinstance(tool_input.get("new_string"), str):
        call.edits.append((None, tool_input["old_string"], tool_input["new_string"]))
    # A delegation is invoke_agent (a subagent gets the prompt); web_fetch's prompt is not one.
    if tool in SPAWN_TOOLS and text(tool_input.get("prompt")):
        call.prompt = tool_input["prompt"]
        call.spawn_label = text(tool_input.get("agent_name")) or tool
    return call


def render(call: Call, verdict) -> dict:
    message = verdict.text() if verdict.decision != "pass" else ""
    if call.event == PRE_TOOL:
        if verdict.decision == "deny":
            return {"decision": "deny", "reason": message}
        if verdict.decision == "advise":
            _carry(call, message)  # the model reads it with this call's result
            return {"systemMessage": message}
        return {}
    if call.event == POST_TOOL:
        carried = _take_carried(call)
        if verdict.decision == "deny":
            return {"decision": "deny", "reason": "\n".join(m for m in (carried, message) if m)}
        context = "\n".join(m for m in (carried, message) if m)
        if context:
            return {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": context}}
        return {}
    if verdict.decision == "pass":
        return {}
    if verdict.decision == "deny":
        return {"decision": "deny", "reason": message}  # at AfterAgent: the reason is the next prompt
    return {"systemMessage": message}


# --- the carry from BeforeTool to AfterTool (on the hook's path: os and zlib only) ---


def _carry_key(call: Call) -> tuple[str, str] | None:
    """(directory, file name prefix) for this call, or None when it cannot be keyed."""
    if not call.session:
        return None
    import json
    import zlib

    from proctor.paths import cache_base

    session = "".join(c if c.isalnum() or c in "-_" else "_" for c in call.session)[:80]
    tool = "".join(c if c.isalnum() or c in "-_" else "_" for c in (call.tool or "tool"))[:60]
    try:
        data = json.dumps(call.raw.get("tool_input"), sort_keys=True, separators=(",", ":")).encode("utf-8", "replace")
    except (TypeError, ValueError):
        data = b""
    digest = f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"
    return os.path.join(cache_base(), CARRY_DIR), f"{session}.{tool}.{digest}"


def _carry(call: Call, message: str) -> None:
    key = _carry_key(call)
    if key is None or not message:
        return
    directory, name = key
    import time

    from proctor.paths import write_atomic

    try:
        # one file per call; a second identical call before the first's AfterTool gets its own
        path = os.path.join(directory, f"{name}.{time.time_ns():020d}")
        write_atomic(path, message)
        _prune(directory)
    except OSError:
        pass


def _take_carried(call: Call) -> str:
    """The advisory carried from this call's BeforeTool, removed as it is read ("" when none)."""
    key = _carry_key(call)
    if key is None:
        return ""
    directory, name = key
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(name + ".") and not n.endswith(".tmp"))
    except OSError:
        return ""
    for candidate in names:  # the oldest first: calls with the same input finish in order
        path = os.path.join(directory, candidate)
        try:
            with open(path, encoding="utf-8") as handle:
                message = handle.read()
            os.unlink(path)
        except OSError:
            continue  # another hook process took it
        return message
    return ""


def _prune(directory: str) -> None:
    import time

    now = time.time()
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        path = os.path.join(directory, entry)
        try:
            if now - os.stat(path).st_mtime > CARRY_MAX_AGE:
                os.unlink(path)
        except OSError:
            continue


# --- wiring (printed by `proctor describe harness --host gemini`; never on the hook's path) ---

MARKER = ".gemini"  # the host's configuration directory, in a checkout and in the home directory
LABEL = "Gemini CLI"
SKILLS = True  # it reads skills from <MARKER>/skills


def mcp_files(root: str, home: str, environ) -> list[str]:
    """Where Gemini CLI reads its MCP servers: the project's settings and the user's."""
    import os

    return [os.path.join(root, ".gemini", "settings.json"), os.path.join(home, ".gemini", "settings.json")]


def protected(root: str, home: str, xdg_config: str, environ) -> list[tuple[str, str]]:
    """(path, what it is) for Gemini CLI's hook wiring, which a leased session must not write."""
    import os

    out = [
        (os.path.join(root, ".gemini"), "this checkout's Gemini CLI configuration (its hook wiring)"),
        (os.path.join(home, ".gemini"), "the home directory's Gemini CLI configuration (its hook wiring)"),
    ]
    configured = environ.get("GEMINI_CLI_HOME")
    if configured and os.path.isabs(configured):
        out.append((configured, "Gemini CLI's configuration (its hooks)"))
    out.append(("/etc/gemini-cli", "an agent host's system-wide settings (its hook wiring)"))
    return out


HOOK_COMMAND = "proctor hook gemini"
WIRED_EVENTS = ("BeforeTool", "AfterTool", "AfterAgent")


def mcp_wiring() -> str:
    import json

    return (
        "# Gemini CLI: proctor's MCP tools; merge into the same settings.json as the hooks (the hook is told\n"
        "# the server by mcp_context). The server runs in the session's directory and environment.\n"
        + json.dumps({"mcpServers": {"proctor": {"command": "proctor", "args": ["mcp"]}}}, indent=2)
        + "\n"
    )


def wiring() -> str:
    import json

    hooks = {
        "hooks": {
            event: [{"matcher": ".*", "hooks": [{"type": "command", "command": HOOK_COMMAND, "timeout": 30000}]}]
            for event in WIRED_EVENTS
        }
    }
    notes = [
        "# Gemini CLI (tested with 0.61.0): merge into ~/.gemini/settings.json (user settings: loaded in",
        "# every folder, --skip-trust included), or into <repo>/.gemini/settings.json (project settings:",
        "# loaded only when gemini starts in <repo> itself, not in a subfolder, and <repo> is trusted).",
        "# timeout is in milliseconds.",
        "# `gemini -p` in an untrusted folder exits 55; `--skip-trust` runs it but does NOT load the",
        "# project's settings, so hooks wired there never run. Trust the folder, one of:",
        "#   - export GEMINI_CLI_TRUST_WORKSPACE=true in the environment that starts gemini",
        "#     (proctor work sets it for gemini workers);",
        '#   - add it to ~/.gemini/trustedFolders.json: {"/abs/path/to/repo": "TRUST_FOLDER"}',
        "#     (what answering the trust prompt of an interactive `gemini` in that folder writes).",
        "# Run unattended with --approval-mode yolo. `proctor doctor` checks that the wiring will load.",
    ]
    return "\n".join(notes) + "\n" + json.dumps(hooks, indent=2) + "\n"


def _read_json(path: str):
    """A settings file as Gemini reads it (JSON with comments), or None when absent or unreadable."""
    import json
    import re

    try:
        with open(path, encoding="utf-8") as handle:
            raw = handle.read()
    except OSError:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        pass
    # strip // and /* */ comments outside strings, then trailing commas
    out, i, n, in_string = [], 0, len(raw), False
    while i < n:
        c = raw[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(raw[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif raw.startswith("//", i):
            while i < n and raw[i] != "\n":
                i += 1
            continue
        elif raw.startswith("/*", i):
            end = raw.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    try:
        return json.loads(re.sub(r",(\s*[}\]])", r"\1", "".join(out)))
    except ValueError:
        return None


def _wired_events(settings) -> list[str]:
    """The events whose hooks run `proctor hook gemini` in one settings object."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    if not isinstance(hooks, dict):
        return []
    found = []
    for event in WIRED_EVENTS:
        for group in hooks.get(event) or [] if isinstance(hooks.get(event), list) else []:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if any(
                isinstance(h, dict) and isinstance(h.get("command"), str) and HOOK_COMMAND in h["command"]
                for h in entries or []
                if isinstance(entries, list)
            ):
                found.append(event)
                break
    return found


def _section(settings, *keys):
    value = settings
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def trust_of(root: str, home: str, user_settings=None) -> tuple[bool | None, str]:
    """Whether Gemini CLI trusts `root`, as it decides it: GEMINI_CLI_TRUST_WORKSPACE, folder
    trust turned off in the user's settings, else the longest matching rule of its trusted
    folders file (TRUST_FOLDER, TRUST_PARENT: the rule's parent, DO_NOT_TRUST)."""
    flag = os.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if os.environ.get("GEMINI_RESTRICTED_MODE") == "true" or flag == "false":
        return False, "untrusted by GEMINI_CLI_TRUST_WORKSPACE=false in this environment"
    if flag == "true":
        return True, "trusted by GEMINI_CLI_TRUST_WORKSPACE=true in this environment"
    if _section(user_settings, "security", "folderTrust", "enabled") is False:
        return True, "folder trust is off in the user settings"
    path = os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH") or os.path.join(home, ".gemini", "trustedFolders.json")
    rules = _read_json(path)
    if not isinstance(rules, dict):
        return None, f"not trusted ({path} has no rule for it)"
    location = os.path.realpath(root)
    best, best_len = None, -1
    for rule, level in rules.items():
        if level not in ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST") or not isinstance(rule, str):
            continue
        effective = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
        effective = os.path.realpath(effective)
        if (location == effective or location.startswith(effective.rstrip(os.sep) + os.sep)) and len(rule) > best_len:
            best, best_len = (rule, level), len(rule)
    if best is None:
        return None, f"not trusted ({path} has no rule for it)"
    if best[1] == "DO_NOT_TRUST":
        return False, f"untrusted by {path} ({best[0]}: DO_NOT_TRUST)"
    return True, f"trusted by {path} ({best[0]}: {best[1]})"


def wired(root: str, home: str) -> tuple[bool, str]:
    """Whether Gemini CLI started at `root` will run proctor's hooks: wired in the user's
    settings (always loaded) or in the project's (loaded only in a trusted folder), hooks not
    turned off, proctor's command not disabled, on BeforeTool, AfterTool and AfterAgent."""
    home_dir = os.environ.get("GEMINI_CLI_HOME") or home
    user_path = os.path.join(home_dir, ".gemini", "settings.json")
    project_path = os.path.join(root, ".gemini", "settings.json")
    user = _read_json(user_path)
    project = _read_json(project_path) if os.path.realpath(root) != os.path.realpath(home_dir) else None
    trusted, trust_text = trust_of(root, home_dir, user)
    loaded = [(user_path, user)] + ([(project_path, project)] if trusted else [])
    for path, settings in loaded:
        enabled = _section(settings, "hooksConfig", "enabled")
        if enabled is False:
            return False, f"hooks are turned off in {path} (hooksConfig.enabled = false)"
        disabled = _section(settings, "hooksConfig", "disabled")
        if isinstance(disabled, list) and any(isinstance(d, str) and HOOK_COMMAND in d for d in disabled):
            return False, f"{HOOK_COMMAND} is listed in hooksConfig.disabled of {path}"
    events: dict[str, str] = {}
    for path, settings in loaded:
        for event in _wired_events(settings):
            events.setdefault(event, path)
    missing = [e for e in WIRED_EVENTS if e not in events]
    where = sorted(set(events.values()))
    if not events:
        if _wired_events(project):
            return False, (
                f"present in {project_path}, but Gemini CLI loads project settings only in a trusted "
                f"folder and {root} is {trust_text}: gemini -p exits 55 here, and --skip-trust runs "
                f"without the project's hooks; export GEMINI_CLI_TRUST_WORKSPACE=true, or add "
                f'{{"{os.path.realpath(root)}": "TRUST_FOLDER"}} to ~/.gemini/trustedFolders.json, '
                f"or wire it in {user_path}"
            )
        return False, f"missing (looked in {user_path} and {project_path})"
    if missing:
        return False, (
            f"partial in {', '.join(where)}: {', '.join(missing)} not wired "
            f"(AfterTool carries advisories to the model, AfterAgent hands over follow-ups)"
        )
    if project_path in where and user_path not in where:
        return True, f"present in {project_path}, {trust_text}; loaded when gemini starts in {root}"
    return True, f"present in {', '.join(where)}"
