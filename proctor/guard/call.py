"""One tool call, as every rule sees it, whatever host sent it."""

from __future__ import annotations

PRE_TOOL = "pre_tool"
POST_TOOL = "post_tool"
STOP = "stop"
SUBAGENT_STOP = "subagent_stop"
PROMPT = "prompt"  # the person's prompt is about to reach the model (Claude Code's UserPromptSubmit)
NOTIFY = "notify"  # the host tells the person something: a permission prompt, an idle session
OTHER = "other"


class Call:
    __slots__ = (
        "host",
        "event",
        "session",
        "subagent",
        "tool",
        "command",
        "writes",
        "reads",
        "edits",
        "transcript",
        "agent_transcript",
        "cwd",
        "prompt",
        "spawn_label",
        "tool_use_id",
        "response",
        "background",
        "raw",
        "unknown_writes",
        "proctor_tool",
        "tool_args",
        "patch",
    )

    def __init__(self, host: str, event: str) -> None:
        self.host = host
        self.event = event
        self.session: str | None = None
        self.subagent: str | None = None
        self.tool: str | None = None
        self.command: str | None = None  # a shell command
        self.writes: list[str] = []  # file paths a file tool writes (absolute or cwd-relative)
        self.reads: list[str] = []  # file paths a file tool reads
        # (file or None for the call's one written file, old_string, new_string), in order
        self.edits: list[tuple[str | None, str, str]] = []
        self.patch: str | None = None  # an apply_patch body
        self.transcript: str | None = None
        self.agent_transcript: str | None = None  # a subagent's own transcript, at SubagentStop
        self.cwd: str | None = None
        self.prompt: str | None = None  # a delegation: a payload carrying a prompt is a spawn
        self.spawn_label: str | None = None
        self.tool_use_id: str | None = None
        self.response: dict | None = None
        self.background = False
        self.raw: dict = {}
        self.unknown_writes: list[str] = []  # a tool that writes and names no path proctor can read
        self.proctor_tool: str | None = None  # one of proctor's own MCP tools (mcp_tools.TOOL_NAMES)
        self.tool_args: dict = {}  # its arguments, for the lease-store rule


def text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def fill_common(call: Call, event: dict) -> None:
    """The fields every host names the same way."""
    call.raw = event
    call.session = text(event.get("session_id"))
    call.subagent = text(event.get("agent_id"))
    call.transcript = text(event.get("transcript_path"))
    call.agent_transcript = text(event.get("agent_transcript_path"))
    call.cwd = text(event.get("cwd"))
    call.tool = text(event.get("tool_name"))
    call.tool_use_id = text(event.get("tool_use_id"))
    response = event.get("tool_response")
    call.response = response if isinstance(response, dict) else None


# proctor's own MCP tools, as each host names them: `mcp__<server>__<tool>` (Claude Code, Codex),
# `mcp_<server>_<tool>` (Gemini CLI, whose hook is also told the server by mcp_context) and
# `<server>_<tool>` (opencode). The server is proctor's when its name says so (`proctor`,
# `Proctor`, `proctor-dev`, a plugin's `plugin_proctor_proctor`) or when the host's MCP config
# starts `proctor mcp` under that name (a project that registered it as `pm`).


# The tools `proctor mcp` serves (proctor/mcp_tools.py reads them from here, so the hook loads
# no module of the door to know them), in the order a model reads them.
TOOL_NAMES = (
    "vcs_checkpoint",
    "jobs_list",
    "job_describe",
    "job_put",
    "job_exec",
    "job_exit",
    "job_wait",
    "monitor_add",
    "monitor_list",
    "monitor_remove",
    "monitor_events",
)


def _split_tool(tool: str) -> tuple[str, str] | None:
    """(server, proctor tool) for a name ending in one of proctor's tools, or None."""
    if tool.startswith("mcp__") and tool.count("__") >= 2:
        server, _, name = tool[len("mcp__") :].rpartition("__")
        return (server, name) if name in TOOL_NAMES and server else None
    for name in TOOL_NAMES:
        if tool.endswith("_" + name) and len(tool) > len(name) + 1:
            server = tool[: -len(name) - 1].rstrip("_")
            if server.startswith("mcp_"):
                server = server[len("mcp_") :]
            return (server, name) if server else None
    return None


def proctor_tool(call: Call, tool_input: dict, mcp_context: object = None) -> bool:
    """Whether the call is one of proctor's own MCP tools; if so it is recorded as one (its
    arguments kept for the lease-store rule) and read as nothing else: a job record's
    write_paths are not a file the call writes, nor a monitor's command one it runs."""
    tool = call.tool or ""
    if isinstance(mcp_context, dict):
        name, server = text(mcp_context.get("tool_name")), text(mcp_context.get("server_name")) or ""
        command, args = mcp_context.get("command"), mcp_context.get("args")
        runs_proctor = (
            isinstance(command, str)
            and command.rsplit("/", 1)[-1] == "proctor"
            and isinstance(args, list)
            and args[:1] == ["mcp"]
        )
        if name not in TOOL_NAMES or not (runs_proctor or _proctors(call, server)):
            return False
    else:
        split = _split_tool(tool) if "_" in tool else None  # every spelling joins server and tool with _
        if split is None or not _proctors(call, split[0]):
            return False
        name = split[1]
    call.proctor_tool, call.tool_args = name, tool_input
    return True


def _proctors(call: Call, server: str) -> bool:
    """Whether the MCP server of that name is proctor's: its name says so, or this host's MCP
    config (the repository's or the user's) starts `proctor mcp` under it."""
    if "proctor" in server.lower():
        return True
    if not server:
        return False
    try:
        from proctor.guard.harness import starts_proctor_mcp

        return starts_proctor_mcp(call.host, server, call.cwd or ".")
    except Exception:  # a config proctor cannot read names no server of its own
        return False


# A tool this module does not know by name is a file tool when its input names a path: an MCP
# server's (`mcp__<server>__<tool>` in Claude Code and Codex, `<server>_<tool>` in opencode,
# Gemini CLI's with an mcp_context) or any other. Its name says whether it writes.
_PATH_KEYS = (
    "path",
    "file_path",
    "filePath",
    "filepath",
    "file",
    "filename",
    "fileName",
    "notebook_path",
    "absolute_path",
    "target",
    "target_path",
    "targetPath",
    "destination",
    "dest",
    "destination_path",
    "source",
    "src",
    "source_path",
    "old_path",
    "new_path",
    "from",
    "to",
    "dir_path",
    "directory",
)
_PATH_LISTS = ("paths", "files", "file_paths", "filePaths")
_URI_KEYS = ("uri", "url", "file_uri", "fileUri")
_WRITE_VERBS = frozenset(
    (
        "write",
        "edit",
        "create",
        "move",
        "rename",
        "delete",
        "remove",
        "rm",
        "mkdir",
        "patch",
        "replace",
        "append",
        "save",
        "put",
        "upload",
        "update",
        "insert",
        "apply",
        "copy",
        "cp",
        "mv",
        "touch",
        "truncate",
        "modify",
        "chmod",
        "unlink",
        "overwrite",
        "set",
        "change",
        "restore",
        "checkout",
        "commit",
        "format",
        "fix",
        "refactor",
        "generate",
        "new",
        "add",
    )
)


def _words(name: str) -> set[str]:
    out, word = [], ""
    for char in name:
        if char.isupper() and word and not word[-1].isupper():
            out.append(word)
            word = char.lower()
        elif char.isalnum():
            word += char.lower()
        else:
            if word:
                out.append(word)
            word = ""
    if word:
        out.append(word)
    return set(out)


def read_named_paths(call: Call, tool_input: dict) -> None:
    """The paths of a tool proctor does not know by name: written when its name has a verb that
    writes (write_file, edit_file, move_file, create_directory, ...), read otherwise; a copy
    reads its source and writes its destination."""
    tool = call.tool or ""
    verbs = _words(tool.split("__")[-1] if "__" in tool else tool)
    writes = bool(verbs & _WRITE_VERBS)
    copying = bool(verbs & {"copy", "cp"})
    for key in _PATH_KEYS:
        value = text(tool_input.get(key))
        if not value:
            continue
        if writes and not (copying and key in ("source", "src", "source_path", "from")):
            call.writes.append(value)
        else:
            call.reads.append(value)
    for key in _URI_KEYS:
        value = text(tool_input.get(key))
        if value and value.startswith("file://"):
            path = value[len("file://") :]
            (call.writes if writes else call.reads).append(path[path.index("/") :] if "/" in path else path)
    for key in _PATH_LISTS:
        values = tool_input.get(key)
        if isinstance(values, list):
            for value in values[:1000]:
                if text(value):
                    (call.writes if writes else call.reads).append(value)
    hints = ("file", "dir", "folder", "path", "uri", "url", "notebook")
    if (
        writes
        and not call.writes
        and (any(h in key.lower() for key in tool_input for h in hints) or any(h in tool.lower() for h in hints))
    ):
        call.unknown_writes.append(f"{tool}: a file tool that writes, naming its file in a way proctor cannot read")
