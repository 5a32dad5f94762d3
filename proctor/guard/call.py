"""One tool call, as every rule sees it, whatever host sent it."""

from __future__ import annotations

PRE_TOOL = "pre_tool"
POST_TOOL = "post_tool"
STOP = "stop"
SUBAGENT_STOP = "subagent_stop"
OTHER = "other"


class Call:
    __slots__ = ("host", "event", "session", "subagent", "tool", "command", "writes", "reads",
                 "edits", "transcript", "agent_transcript", "cwd", "prompt", "spawn_label", "tool_use_id",
                 "response", "background", "raw")

    def __init__(self, host: str, event: str) -> None:
        self.host = host
        self.event = event
        self.session: str | None = None
        self.subagent: str | None = None
        self.tool: str | None = None
        self.command: str | None = None  # a shell command
        self.writes: list[str] = []  # file paths a file tool writes (absolute or cwd-relative)
        self.reads: list[str] = []  # file paths a file tool reads
        self.edits: list[tuple[str, str]] = []  # (old_string, new_string) pairs
        self.transcript: str | None = None
        self.agent_transcript: str | None = None  # a subagent's own transcript, at SubagentStop
        self.cwd: str | None = None
        self.prompt: str | None = None  # a delegation: a payload carrying a prompt is a spawn
        self.spawn_label: str | None = None
        self.tool_use_id: str | None = None
        self.response: dict | None = None
        self.background = False
        self.raw: dict = {}


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
