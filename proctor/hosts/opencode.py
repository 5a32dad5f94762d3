"""opencode: it has no command hooks; a plugin in `.opencode/plugins/` reshapes each tool call
as a Claude-style PreToolUse or PostToolUse event and runs `proctor hook opencode` on it.

The event carries opencode's own tool name and arguments (`bash` with `command` and `workdir`,
`write`/`edit`/`read` with `filePath`, `glob`/`grep`/`list` with `path`, `apply_patch` with
`patchText`, `task` with `prompt`); `parse` reads them, and Claude-named tools as Claude does.

The answer is the plugin's to act on: `{"decision": "deny", "reason"}` (the plugin throws, and
the thrown text reaches the model as the tool's error) or `{"advisory": text}` (appended to the
tool's output, which the model reads).
"""

from __future__ import annotations

from proctor.guard.call import OTHER, POST_TOOL, PRE_TOOL, STOP, Call, fill_common, text
from proctor.hosts.claude import read_tool_input

EVENTS = {"PreToolUse": PRE_TOOL, "PostToolUse": POST_TOOL, "Stop": STOP}
WRITE_TOOLS = ("write", "edit", "multiedit")
READ_TOOLS = {"read": "filePath", "glob": "path", "grep": "path", "list": "path"}
PATCH_TOOLS = ("apply_patch", "patch")


def parse(event: dict) -> Call:
    call = Call("opencode", EVENTS.get(event.get("hook_event_name", ""), OTHER))
    fill_common(call, event)
    tool_input = event.get("tool_input")
    tool = call.tool or ""
    if not isinstance(tool_input, dict):
        return call
    if tool == "bash":
        call.command = text(tool_input.get("command"))
        workdir = text(tool_input.get("workdir"))
        if workdir:
            import os

            call.cwd = os.path.join(call.cwd or "", workdir) if call.cwd else workdir
    elif tool in WRITE_TOOLS:
        edits = tool_input.get("edits")
        if not isinstance(edits, list):
            edits = []
        for item in [tool_input] + [e for e in edits if isinstance(e, dict)]:
            path = text(item.get("filePath"))
            if path and path not in call.writes:
                call.writes.append(path)
            if isinstance(item.get("oldString"), str) and isinstance(item.get("newString"), str):
                call.edits.append((path, item["oldString"], item["newString"]))
    elif tool in READ_TOOLS:
        if text(tool_input.get(READ_TOOLS[tool])):
            call.reads.append(tool_input[READ_TOOLS[tool]])
    elif tool in PATCH_TOOLS:
        patch = tool_input.get("patchText") if isinstance(tool_input.get("patchText"), str) else tool_input.get("input")
        if isinstance(patch, str):
            from proctor.guard.shell import patch_paths

            call.writes.extend(patch_paths(patch))
            call.patch = patch
    elif tool == "task":
        if text(tool_input.get("prompt")):
            call.prompt = tool_input["prompt"]
            call.spawn_label = text(tool_input.get("subagent_type")) or text(tool_input.get("description")) or tool
    elif tool == "webfetch":
        pass  # a fetch: no repository path, no spawn
    else:
        read_tool_input(call, tool_input)  # Claude-named tools, and MCP tools that carry a command or path
    return call


REASON_LIMIT = 16384  # characters of a reason or advisory: the answer always fits the plugin's read limit


def cap(message: str, limit: int = REASON_LIMIT) -> str:
    """`message`, cut to `limit` characters with a note saying so."""
    if len(message) <= limit:
        return message
    return (
        message[:limit]
        + f"\n[cut by proctor: the full text is {len(message)} characters, only the first {limit} are shown]"
    )


def render(call: Call, verdict) -> dict:
    if verdict.decision == "pass":
        return {}
    message = cap(verdict.text() or "refused by proctor")
    if verdict.decision == "deny":
        return {"decision": "deny", "reason": message}
    return {"advisory": message}


# --- wiring (printed by `proctor describe harness --host opencode`; never on the hook's path) ---


def mcp_wiring() -> str:
    import json

    return (
        "// opencode: proctor's MCP tools (proctor_<tool>); merge into opencode.json at the repository's root,\n"
        "// or ~/.config/opencode/opencode.json. The server runs in the session's directory and environment.\n"
        + json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "mcp": {"proctor": {"type": "local", "command": ["proctor", "mcp"], "enabled": True}},
            },
            indent=2,
        )
        + "\n"
    )


MARKER = ".opencode"  # the host's configuration directory, in a checkout and in the home directory
LABEL = "opencode"
SKILLS = False  # proctor's guard reaches opencode as a plugin, written by install()


def mcp_files(root: str, home: str, environ) -> list[str]:
    """Where opencode reads its MCP servers: the project's config and the user's."""
    import os

    config = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [
        os.path.join(root, "opencode.json"),
        os.path.join(root, "opencode.jsonc"),
        os.path.join(config, "opencode", "opencode.json"),
    ]


def protected(root: str, home: str, xdg_config: str, environ) -> list[tuple[str, str]]:
    """(path, what it is) for opencode's configuration and plugins, which load proctor's guard:
    a leased session must not write them."""
    import os

    out = [
        (os.path.join(root, ".opencode"), "this checkout's opencode configuration (its hook wiring)"),
        (os.path.join(home, ".opencode"), "the home directory's opencode configuration (its hook wiring)"),
        (os.path.join(xdg_config, "opencode"), "opencode's configuration (its plugins)"),
        (os.path.join(root, "opencode.json"), "opencode's configuration (its plugins)"),
    ]
    for variable in ("OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG"):
        configured = environ.get(variable)
        if configured and os.path.isabs(configured):
            out.append((configured, "opencode's configuration (its plugins)"))
    out.append(("/etc/opencode", "an agent host's system-wide settings (its hook wiring)"))
    return out


def install(root: str) -> list[str]:
    """`proctor agent harness install`: the guard plugin (the text `describe harness --host
    opencode` prints) where opencode loads a project's plugins, .opencode/plugins/proctor.js."""
    import os

    path = os.path.join(root, ".opencode", "plugins", PLUGIN_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(PLUGIN)
    return [path]


NEEDLE = '"opencode"]'  # the plugin's spawn of `proctor hook opencode`
PLUGIN_FILE = "proctor.js"

PLUGIN = r"""// proctor guard for opencode: save as .opencode/plugins/proctor.js in a repository, or as
// ~/.config/opencode/plugins/proctor.js ($XDG_CONFIG_HOME) for every repository;
// `proctor agent harness install` writes the first. opencode loads it at its next start.
// Before each tool call runs, the call goes to `proctor hook opencode` as a PreToolUse event;
// after it ran, as a PostToolUse event. A deny is thrown, so the call fails and the model
// reads the reason; an advisory is appended to the tool's output. It fails open only when
// proctor gives no answer: not on PATH, it could not start, 30 s without an answer, or it
// exited without printing anything. An answer it printed that cannot be read (not JSON, or
// over 1 MiB) refuses the call, naming why. When opencode loads several copies of this file
// (a repository's and the user's), each call is judged by the first copy that sees it only.
import { spawn } from "node:child_process"

const TIMEOUT_MS = 30000
const OUTPUT_LIMIT = 16384
const ANSWER_LIMIT = 1048576
const CALLS = Symbol.for("proctor.opencode.guard.calls") // shared by every copy in this process

function ask(event, cwd) {
  return new Promise((resolve) => {
    const chunks = []
    let size = 0
    let settled = false
    let timer
    let child
    const done = (answer) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(answer && typeof answer === "object" && !Array.isArray(answer) ? answer : {})
    }
    const refuse = (why) => done({
      decision: "deny",
      reason: `proctor guard: \`proctor hook opencode\` ${why}; the guard ran but its answer could not be read, so the call is refused`,
    })
    try {
      child = spawn("proctor", ["hook", "opencode"], { cwd, stdio: ["pipe", "pipe", "ignore"] })
    } catch {
      return done({})
    }
    timer = setTimeout(() => {
      try { child.kill("SIGKILL") } catch {}
      done({})
    }, TIMEOUT_MS)
    child.on("error", () => done({}))
    child.stdout.on("data", (chunk) => {
      if (settled) return
      size += chunk.length
      if (size > ANSWER_LIMIT) {
        try { child.kill("SIGKILL") } catch {}
        try { child.stdout.destroy() } catch {}
        return refuse(`printed more than ${ANSWER_LIMIT} bytes (the most this plugin reads)`)
      }
      chunks.push(Buffer.from(chunk))
    })
    child.on("close", (code) => {
      if (settled) return
      const out = Buffer.concat(chunks).toString("utf8")
      if (!out.trim()) return done({}) // no answer at all: the call goes through
      let answer
      try {
        answer = JSON.parse(out)
      } catch {
        return refuse(`printed ${size} bytes that are not JSON (exit ${code}): ${JSON.stringify(out.slice(0, 200))}`)
      }
      if (!answer || typeof answer !== "object" || Array.isArray(answer)) {
        return refuse(`printed JSON that is not an object (exit ${code}): ${JSON.stringify(out.slice(0, 200))}`)
      }
      done(answer)
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(event))
  })
}

// opencode runs every plugin file it finds, so a second copy of this one (the user's and a
// repository's) sees each call too: the first copy to see a call claims it, the others let
// it be. Claims are per call, not per process: opencode starts plugins once per project
// directory it serves, and each must judge its own calls.
const claims = globalThis[CALLS] || (globalThis[CALLS] = new Map())
const claim = (key, me) => {
  const owner = claims.get(key)
  if (owner !== undefined && owner !== me) return false
  claims.set(key, me)
  while (claims.size > 4096) claims.delete(claims.keys().next().value)
  return true
}

export const ProctorGuard = async ({ directory, worktree }) => {
  const cwd = directory || worktree || process.cwd()
  const me = Symbol("proctor guard copy")
  const held = new Map() // callID -> the call's arguments and a PreToolUse advisory
  const others = new Set() // calls another copy of this plugin judges
  const parents = new Map() // a subagent's session -> the session that spawned it
  const root = (id) => {
    let seen = 0
    while (parents.has(id) && seen++ < 64) id = parents.get(id)
    return id
  }
  const key = (input) => `${input.sessionID}\u0000${input.callID}`
  // A subagent's calls are its root session's, as agent_id: the guard judges them as Claude
  // Code's subagents (under the session's job unless a spawn bound them to another).
  const event = (name, input, args, extra) => ({
    hook_event_name: name, session_id: root(input.sessionID),
    ...(parents.has(input.sessionID) ? { agent_id: input.sessionID } : {}),
    tool_use_id: input.callID, cwd,
    tool_name: input.tool, tool_input: args && typeof args === "object" ? args : {}, ...extra,
  })
  return {
    event: async ({ event: bus }) => {
      try {
        const info = bus && bus.type === "session.created" && bus.properties ? bus.properties.info : null
        if (info && typeof info.id === "string" && typeof info.parentID === "string") parents.set(info.id, info.parentID)
      } catch {}
    },
    "tool.execute.before": async (input, output) => {
      if (!claim(key(input), me)) {
        others.add(key(input))
        while (others.size > 4096) others.delete(others.values().next().value)
        return
      }
      let answer = {}
      const args = output ? output.args : undefined
      try {
        answer = await ask(event("PreToolUse", input, args), cwd)
      } catch {}
      if (answer.decision === "deny") {
        claims.delete(key(input))
        throw new Error(String(answer.reason || "refused by proctor"))
      }
      held.set(input.callID, { args, advisory: typeof answer.advisory === "string" ? answer.advisory : "" })
    },
    "tool.execute.after": async (input, output) => {
      if (others.delete(key(input))) return
      if (claims.get(key(input)) === me) claims.delete(key(input))
      else if (claims.has(key(input))) return
      const before = held.get(input.callID) || { args: input.args, advisory: "" }
      held.delete(input.callID)
      const notes = before.advisory ? [before.advisory] : []
      try {
        const result = output && typeof output.output === "string" ? output.output.slice(0, OUTPUT_LIMIT) : ""
        const response = { output: result }
        const spawned = output && output.metadata ? output.metadata.sessionId : undefined
        if (typeof spawned === "string") response.agentId = spawned // the task tool's subagent
        const answer = await ask(event("PostToolUse", input, before.args, { tool_response: response }), cwd)
        for (const note of [answer.advisory, answer.reason]) if (typeof note === "string" && note) notes.push(note)
      } catch {}
      if (notes.length && output && typeof output.output === "string") output.output += "\n\n" + notes.join("\n")
    },
  }
}
"""


def wiring() -> str:
    return PLUGIN


def plugin_dirs(root: str, home: str) -> list[str]:
    """Where opencode loads plugin files (`{plugin,plugins}/*.{ts,js}`) from: its config
    directories, i.e. the repository's .opencode/, $XDG_CONFIG_HOME/opencode/, ~/.opencode/
    and $OPENCODE_CONFIG_DIR."""
    import os

    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    bases = [os.path.join(root, ".opencode"), os.path.join(config, "opencode"), os.path.join(home, ".opencode")]
    if os.environ.get("OPENCODE_CONFIG_DIR"):
        bases.append(os.environ["OPENCODE_CONFIG_DIR"])
    return [os.path.join(base, sub) for base in bases for sub in ("plugins", "plugin")]


def wired(root: str, home: str) -> tuple[bool, str]:
    """Whether opencode loads the plugin here. opencode runs every copy it finds: this
    proctor's text judges each call once whatever the number of copies, but an older or
    edited copy beside another judges each call again, so more than one copy is warned of,
    and is a failure when any of them is not this proctor's text."""
    import os

    dirs = plugin_dirs(root, home)
    copies: list[tuple[str, bool]] = []
    seen: set[str] = set()
    for directory in dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".js", ".ts")):
                continue
            path = os.path.join(directory, name)
            real = os.path.realpath(path)
            if real in seen:
                continue
            try:
                with open(path, encoding="utf-8") as handle:
                    content = handle.read()
            except OSError:
                continue
            if "proctor" in content and "hook" in content and NEEDLE in content:
                seen.add(real)
                copies.append((path, content.strip() == PLUGIN.strip()))
    if not copies:
        return False, f"missing (looked in {', '.join(dirs[::2])} and plugin/ beside each)"
    if len(copies) == 1:
        path, current = copies[0]
        if current:
            return True, f"present in {path}"
        return True, (
            f"present in {path}, but not this proctor's text: reprint it with "
            f"`proctor describe harness --host opencode`"
        )
    stale = [path for path, current in copies if not current]
    listed = ", ".join(path for path, _ in copies)
    if not stale:
        return True, (
            f"present in {listed}; warning: {len(copies)} copies, opencode loads each (they judge "
            f"each call once between them); keep one"
        )
    return False, (
        f"present in {listed}; warning: {len(copies)} copies, opencode loads each, and "
        f"{', '.join(stale)} {'is' if len(stale) == 1 else 'are'} not this proctor's text, so each "
        f"call is judged more than once; keep one, reprinted"
    )  # doctor adds where the text is printed
