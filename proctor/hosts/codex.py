"""Codex: the same wire format as Claude Code, read by a stricter parser.

Codex treats an unknown field as a failed hook and runs the tool (it fails open), so an
allow is exactly `{}`, and a deny is exactly `hookSpecificOutput` with `permissionDecision:
deny` and a non-empty reason (the model reads "Command blocked by PreToolUse hook: <reason>").
An advisory on a tool call is `additionalContext`, which Codex 0.171 hands the model as a
developer message; `systemMessage` reaches nobody in `codex exec` (neither the model, the
stream nor stderr), so it is never used. At Stop the only thing the model reads is
`decision: block` with a reason, which makes it carry on: a deny is that, and an advisory is
that once (not again while Codex says `stop_hook_active`). Never `ask`, a bare `allow`,
`continue`, `stopReason` or `suppressOutput`.

`apply_patch` arrives with its patch in `tool_input.command` (0.171) or `input`: every file
it adds, updates, deletes or moves (both ends) is a write, and the patch is not a command.
"""

from __future__ import annotations

from proctor.guard.call import OTHER, POST_TOOL, PRE_TOOL, STOP, SUBAGENT_STOP, Call, fill_common
from proctor.hosts.claude import pre_tool_answer, read_tool_input

EVENTS = {"PreToolUse": PRE_TOOL, "PostToolUse": POST_TOOL, "Stop": STOP, "SubagentStop": SUBAGENT_STOP}


def parse(event: dict) -> Call:
    call = Call("codex", EVENTS.get(event.get("hook_event_name", ""), OTHER))
    fill_common(call, event)
    read_tool_input(call, event.get("tool_input"))
    if call.tool == "apply_patch":
        call.command = None  # the patch body, whose files read_tool_input took as writes
    return call


def render(call: Call, verdict) -> dict:
    if verdict.decision == "pass":
        return {}
    message = verdict.text() or "refused by proctor"
    if call.event == PRE_TOOL:
        return pre_tool_answer(verdict.decision, message)
    if call.event == POST_TOOL:
        if verdict.decision == "deny":
            return {"decision": "block", "reason": message}
        return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": message}}
    if call.event in (STOP, SUBAGENT_STOP):
        if verdict.decision == "deny":
            return {"decision": "block", "reason": message}
        raw = call.raw if isinstance(call.raw, dict) else {}
        if raw.get("stop_hook_active") is True:
            return {}  # it already carried on once after a Stop answer: let it stop
        return {
            "decision": "block",
            "reason": "proctor advisory (no further action is required if this is "
            "already handled; then end your turn again): " + message,
        }
    return {}


# --- wiring (printed by `proctor describe harness --host codex`; never on the hook's path) ---

MARKER = ".codex"  # the host's configuration directory, in a checkout and in the home directory
LABEL = "Codex"
SKILLS = True  # it reads skills from <MARKER>/skills


def mcp_files(root: str, home: str, environ) -> list[str]:
    """Where Codex reads its MCP servers: the project's config and CODEX_HOME's."""
    import os

    return [
        os.path.join(root, ".codex", "config.toml"),
        os.path.join(environ.get("CODEX_HOME") or os.path.join(home, ".codex"), "config.toml"),
    ]


def protected(root: str, home: str, xdg_config: str, environ) -> list[tuple[str, str]]:
    """(path, what it is) for Codex's hook wiring, which a leased session must not write."""
    import os

    out = [
        (os.path.join(root, ".codex"), "this checkout's Codex configuration (its hook wiring)"),
        (os.path.join(home, ".codex"), "the home directory's Codex configuration (its hook wiring)"),
    ]
    configured = environ.get("CODEX_HOME")
    if configured and os.path.isabs(configured):
        out.append((configured, "Codex's configuration (its hooks)"))
    out.append(("/etc/codex", "an agent host's system-wide settings (its hook wiring)"))
    return out


COMMAND = "proctor hook codex"
TIMEOUT = 30
WIRED_EVENTS = ("PreToolUse", "PostToolUse", "Stop", "SubagentStop")
# Codex's names for its events in hook-state keys (`<source>:<label>:<group>:<handler>`).
EVENT_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
MATCHER_EVENTS = {
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "PreCompact",
    "PostCompact",
    "SessionStart",
    "SubagentStart",
    "SubagentStop",
}


def codex_home(home: str) -> str:
    import os

    return os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")


def trust_hash(event: str, handler: dict, matcher: str | None = None) -> str:
    """The hash Codex records as `trusted_hash` when a person trusts one hook handler (its
    `/hooks` review): sha256 over the canonical JSON (keys sorted, compact) of the event's
    label, the group's matcher and the one normalized handler (timeout defaulting to 600,
    `async` false, absent fields left out, as TOML drops them)."""
    import hashlib
    import json

    normalized = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": max(1, _int(handler.get("timeout", handler.get("timeoutSec")), 600)),
        "async": handler.get("async") is True,
    }
    if isinstance(handler.get("statusMessage"), str):
        normalized["statusMessage"] = handler["statusMessage"]
    identity = {"event_name": EVENT_LABELS[event], "hooks": [normalized]}
    if matcher is not None and event in MATCHER_EVENTS:
        identity["matcher"] = matcher
    data = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def _int(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def wiring(home: str | None = None, root: str | None = None) -> str:
    """The hooks for the user's config.toml with the trust Codex records for them; then, as
    comments, the same for the project's .codex/hooks.json (`root`, default: this checkout)."""
    import json
    import os

    config = os.path.join(codex_home(home or os.path.expanduser("~")), "config.toml")
    handler = {"type": "command", "command": COMMAND, "timeout": TIMEOUT}
    lines = [
        f"# Codex (tested with 0.171.0): merge into {config}",
        "# Codex runs a hook only once it is trusted. The [hooks.state] lines below are the trust",
        "# Codex's /hooks review records for exactly these hooks (the key names this file and each",
        "# event's first group, so keep proctor's groups first); without them `codex exec` skips the",
        "# hooks silently. Instead of them: trust the hooks in the TUI's /hooks, or run",
        "# `codex exec --dangerously-bypass-hook-trust` (every enabled hook, this run only).",
        "# `proctor doctor` says whether Codex will run them.",
    ]
    for event in WIRED_EVENTS:
        lines += [
            f"[[hooks.{event}]]",
            f"[[hooks.{event}.hooks]]",
            'type = "command"',
            f'command = "{COMMAND}"',
            f"timeout = {TIMEOUT}",
            "",
        ]
    lines += _state_lines(config, handler)
    if root is None:
        try:
            from proctor.paths import find_checkout

            root = find_checkout().root
        except Exception:
            root = None
    if root:
        hooks_json = os.path.join(root, ".codex", "hooks.json")
        document = {"hooks": {event: [{"hooks": [handler]}] for event in WIRED_EVENTS}}
        lines += [
            "",
            "# Or for this project only, in its .codex/ (Codex loads it only in a trusted project):",
            f"# 1. write {hooks_json}:",
            "#    " + json.dumps(document, separators=(", ", ": ")),
            f"# 2. add to {config}:",
        ]
        lines += ["#    " + line for line in _state_lines(hooks_json, handler)]
        lines += [f"# 3. trust the project once: `codex exec --trust` in {root}"]
    return "\n".join(lines) + "\n"


def mcp_wiring() -> str:
    return (
        "\n".join(
            [
                "# Codex: proctor's MCP tools (the hook sees mcp__proctor__<tool>; the model loads them with tool_search,",
                "# as namespace mcp__proctor); merge into ~/.codex/config.toml, or into a",
                "# trusted project's .codex/config.toml. Codex hands an MCP server only a few variables of its own;",
                "# env_vars passes the lease (BAGGAGE) and the job's secret (PROCTOR_NONCE) on to proctor mcp.",
                '# Codex asks before every call of an MCP tool (`codex exec` refuses it: "approval policy is',
                '# never"); default_tools_approval_mode = "approve" runs proctor\'s tools without asking (the guard\'s',
                "# PreToolUse hook still judges each call, and proctor refuses what the caller may not do).",
                "[mcp_servers.proctor]",
                'command = "proctor"',
                'args = ["mcp"]',
                'env_vars = ["BAGGAGE", "PROCTOR_NONCE", "TRACEPARENT", "PROCTOR_STATE_DIR", "PROCTOR_STORE_URL"]',
                'default_tools_approval_mode = "approve"',
            ]
        )
        + "\n"
    )


def _state_lines(source: str, handler: dict) -> list[str]:
    out = []
    for event in WIRED_EVENTS:
        key = f"{source}:{EVENT_LABELS[event]}:0:0"
        out += [f"[hooks.state.{_toml_key(key)}]", f'trusted_hash = "{trust_hash(event, handler)}"']
    return out


def _toml_key(key: str) -> str:
    import json

    return json.dumps(key)


def wired(root: str, home: str) -> tuple[bool, str]:
    """Whether Codex will run proctor's hooks: present in a layer Codex loads, enabled, and
    trusted with the hash of what is there now (or the project's layer trusted too)."""
    import json
    import os
    import tomllib

    base = codex_home(home)
    user_config = os.path.join(base, "config.toml")
    user: dict = {}
    try:
        with open(user_config, "rb") as handle:
            user = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        user = {}
    features = user.get("features")
    if not isinstance(features, dict):
        features = {}
    for flag in ("hooks", "codex_hooks"):
        if features.get(flag) is False:
            return False, f"codex will run no hook: [features] {flag} = false in {user_config}"
    states = (user.get("hooks") or {}).get("state") if isinstance(user.get("hooks"), dict) else None
    states = states if isinstance(states, dict) else {}
    sources: list[tuple[str, dict, bool]] = []  # (file, hooks table, in the project's .codex/)
    for path, project in (
        (user_config, False),
        (os.path.join(base, "hooks.json"), False),
        (os.path.join(root, ".codex", "config.toml"), True),
        (os.path.join(root, ".codex", "hooks.json"), True),
    ):
        try:
            if path.endswith(".json"):
                with open(path, encoding="utf-8") as handle:
                    table = json.load(handle).get("hooks")
            elif path == user_config:
                table = user.get("hooks")
            else:
                with open(path, "rb") as handle:
                    table = tomllib.load(handle).get("hooks")
        except (OSError, ValueError, AttributeError, tomllib.TOMLDecodeError):
            continue
        if isinstance(table, dict):
            sources.append((path, table, project))
    trusted: dict[str, str] = {}
    untrusted: list[str] = []
    for path, table, project in sources:
        for event in WIRED_EVENTS:
            for g, group in enumerate(table.get(event) or () if isinstance(table.get(event), list) else ()):
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for h, handler in enumerate(handlers if isinstance(handlers, list) else ()):
                    if not (isinstance(handler, dict) and COMMAND in str(handler.get("command") or "")):
                        continue
                    state = states.get(f"{path}:{EVENT_LABELS[event]}:{g}:{h}")
                    state = state if isinstance(state, dict) else {}
                    matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
                    if state.get("enabled") is False:
                        untrusted.append(f"{event} in {path} (disabled)")
                    elif state.get("trusted_hash") == trust_hash(event, handler, matcher):
                        if project and not _project_trusted(user, root):
                            untrusted.append(
                                f"{event} in {path} (the project is not trusted: run "
                                f"`codex exec --trust` in {root} once)"
                            )
                        else:
                            trusted.setdefault(event, path)
                    elif state.get("trusted_hash"):
                        untrusted.append(f"{event} in {path} (changed since it was trusted)")
                    else:
                        untrusted.append(f"{event} in {path} (not trusted)")
    if not sources or (not trusted and not untrusted):
        looked = [
            user_config,
            os.path.join(base, "hooks.json"),
            os.path.join(root, ".codex", "config.toml"),
            os.path.join(root, ".codex", "hooks.json"),
        ]
        return False, f"missing (looked in {', '.join(looked)})"
    missing = [e for e in WIRED_EVENTS if e not in trusted]
    if "PreToolUse" in trusted:
        text = "trusted: " + ", ".join(f"{e}" for e in WIRED_EVENTS if e in trusted) + f" in {trusted['PreToolUse']}"
        if missing:
            text += "; not run: " + ", ".join(missing)
        return True, text
    return False, (
        "present but codex will not run it: "
        + "; ".join(untrusted or ["PreToolUse missing"])
        + ". Paste the [hooks.state] lines `proctor describe harness --host codex` prints, trust "
        "the hooks in codex's /hooks, or run `codex exec --dangerously-bypass-hook-trust`"
    )


def _project_trusted(user: dict, root: str) -> bool:
    import os

    projects = user.get("projects")
    if not isinstance(projects, dict):
        projects = {}
    for path in {root, os.path.realpath(root)}:
        entry = projects.get(path)
        if isinstance(entry, dict) and entry.get("trust_level") == "trusted":
            return True
    return False
