"""What Claude Code's transcript lines mean: the background tasks of a session.

Every form the reference lists is understood: 1.0 (`BashOutput`/`KillBash`, no notices), 2.0
(`<bash-notification>`, `KillShell`), 2.1 (`<task-notification>`, `TaskStop`, `<tool-use-id>`;
notices as `queue-operation` lines, plain user strings, `attachment`/`queued_command`, or
inside `<system-reminder>`), background Agent launches (`async_launched`), commands moved to
the background by the user or a timeout (no `run_in_background` in their input), notices that
arrive two or three times for one task (kept once per task), stops (TaskStop, KillShell and
KillBash results; TaskOutput and BashOutput results showing a final status), and Monitor-style
watchers with an expiry, which are marked so the rules skip them.

This module owns the meaning of the lines (`State`, `apply_line`) and where Claude Code keeps
a subagent's files; how the file is read is host-independent and is `incremental.py`'s:
`read(path, checkpoint_dir)` hands it `LINES` and reads only the bytes written since the last
call, resuming from a checkpoint of this state (`STATE_VERSION`, `State.to_json`,
`State.restore`). Unknown line types are tolerated, and compaction needs nothing (the file goes
on). Only lines holding one of `_MARKERS` are parsed; the tool call behind a result is found by
searching back through the file from the result's line.
"""

from __future__ import annotations

import json
import os
import re

from proctor.timeutil import parse_iso
from proctor.transcript import incremental

STATE_VERSION = 4  # 4: the checkpoint records a partial last line and a line being skipped
HEAD_BYTES = incremental.HEAD_BYTES  # the reader's, named here for those who count its reads
# A line longer than this is skipped, never held whole. Claude Code's longest lines carry a big
# tool result twice (message and toolUseResult): a Read image, base64 of up to 5 MB, is about
# 7 MB, so 14 MB or so; no launch, notice or stop result comes near. The workers' runner cuts
# lines at the same 16 MB.
MAX_LINE = 16 << 20
MAX_PENDING = 256  # a launch's result follows its call closely; older calls are let go

# A line is parsed only when it holds one of these: every launch, notice, stop and final
# status carries one. Everything else (most of a transcript) is skipped at the speed of a
# substring search; the tool call behind a result is looked up by its id when needed.
_MARKERS = (
    b"running in background",
    b"async_launched",
    b"-notification>",
    b"Successfully ",
    b"<status>",
    b"Monitor started",
    b"backgroundTaskId",
    b'"taskId"',
    b"<tool_use_error>",
)
_GONE = re.compile(
    r"(?i)\b(no (?:such )?(?:task|shell|background task)|not found|is not running|"
    r"already (?:completed|finished|stopped|exited))"
)
RUNNING = "running"
FINAL = ("completed", "failed", "killed", "stopped", "gone")

_LAUNCH = re.compile(r"running in background with ID: ([A-Za-z0-9_\-]+)")
_OUTPUT = re.compile(r"Output is being written to: (.+?\.output)")
_AGENT_OUTPUT = re.compile(r"output_file: (\S+)")
_MONITOR = re.compile(r"Monitor started \(task ([A-Za-z0-9_\-]+)(?:, expires in (\d+)([smh]))?")
_STOPPED = re.compile(r"Successfully (?:stopped task|killed shell): ([A-Za-z0-9_\-]+)")
_NOTICE = re.compile(r"<(task|bash)-notification>(.*?)</\1-notification>", re.S)
_TAG = re.compile(r"<([a-z_\-]+)>(.*?)</\1>", re.S)
_STATUS = re.compile(r"<status>([a-z_]+)</status>")
_TASK_ID_TAG = re.compile(r"<task_id>([A-Za-z0-9_\-]+)</task_id>")

BACKGROUND_TOOLS = ("Bash", "Agent", "Task", "Monitor")
STOP_TOOLS = ("TaskStop", "KillShell", "KillBash")
POLL_TOOLS = ("TaskOutput", "BashOutput", "AgentOutput")


class State:
    """What the reader knows so far: tasks by id, and tool calls still waiting for a result."""

    def __init__(self) -> None:
        self.tasks: dict[str, dict] = {}
        self.pending: dict[str, dict] = {}  # tool_use_id -> {name, input, time, agent}

    def to_json(self) -> dict:
        return {"tasks": self.tasks, "pending": self.pending}

    @classmethod
    def from_json(cls, data: dict) -> "State":
        state = cls()
        state.tasks = dict(data.get("tasks") or {})
        state.pending = dict(data.get("pending") or {})
        return state

    @classmethod
    def restore(cls, data: dict) -> "State | None":
        """The state a checkpoint saved, or None when its tasks or calls are not all objects."""
        for key in ("tasks", "pending"):
            entries = data.get(key) or {}
            if not (isinstance(entries, dict) and all(isinstance(entry, dict) for entry in entries.values())):
                return None
        return cls.from_json(data)

    def running(self, include_watchers: bool = False) -> list[dict]:
        return [t for t in self.tasks.values() if t["status"] == RUNNING and (include_watchers or not t.get("watcher"))]


def _time(line: dict) -> float | None:
    stamp = line.get("timestamp")
    if isinstance(stamp, str) and len(stamp) >= 19:
        try:
            return parse_iso(stamp)
        except (ValueError, IndexError):
            return None
    return None


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text(part.get("text") if isinstance(part, dict) and "text" in part else part)
            for part in content
            if isinstance(part, (dict, str))
        )
    return ""


def apply_line(state: State, line: dict, before=None) -> None:
    """Fold one transcript line into the state. `before`, the reader's search back through the
    file from this line (see `incremental`), finds the tool call behind a result when needed."""
    kind = line.get("type")
    when = _time(line)
    agent = line.get("agentId") if isinstance(line.get("agentId"), str) else None
    if kind == "assistant":
        message = line.get("message")
        for block in (message.get("content") if isinstance(message, dict) else None) or ():
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                name = block.get("name")
                if name in BACKGROUND_TOOLS or name in STOP_TOOLS or name in POLL_TOOLS:
                    state.pending[block["id"]] = {
                        "name": name,
                        "input": block.get("input") or {},
                        "time": when,
                        "agent": agent,
                    }
    elif kind == "user":
        message = line.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            _notices(state, content, when)
            return
        for block in content or ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                _result(state, block, line.get("toolUseResult"), when, agent, before)
            elif block.get("type") == "text":
                _notices(state, _text(block.get("text")), when)
    elif kind == "queue-operation":
        if line.get("operation") in ("enqueue", None) and isinstance(line.get("content"), str):
            _notices(state, line["content"], when)
    elif kind == "attachment":
        attachment = line.get("attachment")
        if isinstance(attachment, dict):
            for key in ("prompt", "content"):
                if isinstance(attachment.get(key), str):
                    _notices(state, attachment[key], when)
    elif kind == "system" and isinstance(line.get("content"), str):
        _notices(state, line["content"], when)


def _result(state: State, block: dict, structured, when: float | None, agent: str | None, before) -> None:
    text = _text(block.get("content"))
    structured = structured if isinstance(structured, dict) else {}
    tool_use_id = block.get("tool_use_id")
    call = state.pending.pop(tool_use_id, None) if tool_use_id is not None else None
    looked_up = call is not None

    def the_call() -> dict:
        # The tool call behind a result is looked up only for the few results that need it.
        nonlocal call, looked_up
        if not looked_up:
            looked_up = True
            if before is not None and isinstance(tool_use_id, str):
                call = _call(before, tool_use_id)
        return call or {}

    launch = _LAUNCH.search(text)
    task_id = structured.get("backgroundTaskId") or (launch.group(1) if launch else None)
    if isinstance(task_id, str) and task_id:
        found = the_call()
        tool_input = found.get("input")
        if not isinstance(tool_input, dict):
            tool_input = {}
        output = _OUTPUT.search(text)
        _upsert(
            state,
            task_id,
            kind="shell",
            started=when or found.get("time"),
            tool_use_id=tool_use_id,
            command=tool_input.get("command") if isinstance(tool_input.get("command"), str) else None,
            description=tool_input.get("description") if isinstance(tool_input.get("description"), str) else None,
            output_file=output.group(1) if output else structured.get("persistedOutputPath"),
            subagent=found.get("agent") or agent,
            moved=tool_input.get("run_in_background") is not True,
        )
        return
    if structured.get("status") == "async_launched" or "Async agent launched" in text:
        agent_id = structured.get("agentId") or _first(re.search(r"agentId: ([A-Za-z0-9_\-]+)", text))
        if isinstance(agent_id, str) and agent_id:
            found = the_call()
            tool_input = found.get("input")
            if not isinstance(tool_input, dict):
                tool_input = {}
            agent_output = structured.get("outputFile") or _first(_AGENT_OUTPUT.search(text))
            _upsert(
                state,
                agent_id,
                kind="agent",
                started=when or found.get("time"),
                tool_use_id=tool_use_id,
                command=None,
                description=structured.get("description") or tool_input.get("description"),
                output_file=agent_output,
                subagent=found.get("agent") or agent,
            )
        return
    monitor = _MONITOR.search(text)
    if monitor or (structured.get("taskId") and "timeoutMs" in structured):
        task = structured.get("taskId") or (monitor.group(1) if monitor else None)
        if isinstance(task, str) and task:
            found = the_call()
            tool_input = found.get("input")
            if not isinstance(tool_input, dict):
                tool_input = {}
            expires = None
            if isinstance(structured.get("timeoutMs"), (int, float)):
                expires = (when or 0) + structured["timeoutMs"] / 1000
            elif monitor and monitor.group(2):
                expires = (when or 0) + int(monitor.group(2)) * {"s": 1, "m": 60, "h": 3600}[monitor.group(3)]
            _upsert(
                state,
                task,
                kind="monitor",
                started=when or found.get("time"),
                tool_use_id=tool_use_id,
                command=tool_input.get("command"),
                description=tool_input.get("description"),
                output_file=None,
                subagent=found.get("agent") or agent,
                watcher=True,
                expires=expires,
            )
        return
    if block.get("is_error") is True or "<tool_use_error>" in text:
        found = the_call()
        if found.get("name") in STOP_TOOLS and _GONE.search(text):
            tool_input = found.get("input")
            if not isinstance(tool_input, dict):
                tool_input = {}
            gone = tool_input.get("task_id") or tool_input.get("shell_id") or tool_input.get("bash_id")
            if isinstance(gone, str) and gone in state.tasks:
                _finish(state, gone, "gone", when)  # the host no longer has it: nothing left to stop
        return
    stopped = _STOPPED.search(text)
    if stopped:
        _finish(state, stopped.group(1), "killed" if "killed shell" in text else "stopped", when)
        return
    if (structured.get("task_id") or structured.get("shell_id")) and "Successfully" in str(
        structured.get("message", "")
    ):
        _finish(state, structured.get("task_id") or structured.get("shell_id"), "stopped", when)
        return
    status = _first(_STATUS.search(text))
    if status in FINAL:
        task_id = _first(_TASK_ID_TAG.search(text))
        if not task_id:
            tool_input = the_call().get("input") or {}
            task_id = tool_input.get("task_id") or tool_input.get("bash_id") or tool_input.get("shell_id")
        if isinstance(task_id, str) and task_id:
            _finish(state, task_id, status, when)
    _notices(state, text, when)


def _first(match) -> str | None:
    return match.group(1) if match else None


def _upsert(state: State, task_id: str, **fields) -> None:
    task = state.tasks.get(task_id)
    if task is None:
        task = state.tasks[task_id] = {"id": task_id, "status": RUNNING, "notices": 0, "newest_notice": None}
    for key, value in fields.items():
        if value is not None or key not in task:
            task[key] = value


def _finish(state: State, task_id: str, status: str, when: float | None) -> None:
    task = state.tasks.get(task_id)
    if task is None:
        task = state.tasks[task_id] = {
            "id": task_id,
            "kind": "shell",
            "status": RUNNING,
            "notices": 0,
            "newest_notice": None,
            "started": when,
            "command": None,
            "description": None,
            "output_file": None,
            "tool_use_id": None,
            "subagent": None,
        }
    task["status"] = status
    task["ended"] = when


def _notices(state: State, text: str, when: float | None) -> None:
    if "-notification>" not in text:
        return
    for match in _NOTICE.finditer(text):
        tags = {name: value.strip() for name, value in _TAG.findall(match.group(2))}
        task_id = tags.get("task-id") or tags.get("shell-id")
        if not task_id:
            continue
        task = state.tasks.get(task_id)
        if task is None:
            kind = "agent" if "Agent" in tags.get("summary", "") else "shell"
            task = state.tasks[task_id] = {
                "id": task_id,
                "kind": kind,
                "status": RUNNING,
                "notices": 0,
                "newest_notice": None,
                "started": when,
                "command": None,
                "description": None,
                "output_file": None,
                "tool_use_id": tags.get("tool-use-id"),
                "subagent": None,
            }
        task["notices"] = task.get("notices", 0) + 1
        if when is not None and (task.get("newest_notice") is None or when > task["newest_notice"]):
            task["newest_notice"] = when
        if tags.get("output-file") and not task.get("output_file"):
            task["output_file"] = tags["output-file"]
        if tags.get("tool-use-id") and not task.get("tool_use_id"):
            task["tool_use_id"] = tags["tool-use-id"]
        if tags.get("summary"):
            task["summary"] = tags["summary"][:300]
        status = tags.get("status")
        if status in FINAL and task["status"] == RUNNING:
            task["status"] = status
            task["ended"] = when


# -- reading, by the host-independent reader ----------------------------------------------------


def _call(before, tool_use_id: str) -> dict | None:
    """The tool call with this id, as `pending` holds one, from the nearest line before the
    result's that names it (Claude Code writes a call just before its result), or None."""
    ident = tool_use_id.encode("utf-8", "surrogateescape")
    # Claude Code writes compact JSON; a spaced form is accepted too
    line = before((b'"id":"' + ident + b'"', b'"id": "' + ident + b'"'))
    message = line.get("message") if line is not None else None
    for block in (message.get("content") if isinstance(message, dict) else None) or ():
        if isinstance(block, dict) and block.get("id") == tool_use_id and block.get("type") == "tool_use":
            agent = line.get("agentId") if isinstance(line.get("agentId"), str) else None
            return {
                "name": block.get("name"),
                "input": block.get("input") or {},
                "time": _time(line),
                "agent": agent,
            }
    return None


def _settle(state: State) -> None:
    """Let go of the oldest calls still waiting for a result past MAX_PENDING."""
    if len(state.pending) > MAX_PENDING:
        for stale in list(state.pending)[: len(state.pending) - MAX_PENDING]:
            del state.pending[stale]


LINES = incremental.Meaning(
    name="transcript",
    version=STATE_VERSION,
    new=State,
    dump=State.to_json,
    restore=State.restore,
    apply=apply_line,
    markers=_MARKERS,
    settle=_settle,
)


def read(path: str, checkpoint_dir: str | None) -> State:
    """The state of the transcript at `path` now, read since the last call with a checkpoint
    in `checkpoint_dir` (or from the start, with None); lines longer than MAX_LINE are
    skipped. Raises OSError when the file cannot be read."""
    return incremental.read(path, checkpoint_dir, LINES, MAX_LINE)


# -- subagents ----------------------------------------------------------------------------------

FIRST_LINE_LIMIT = 1 << 20  # a spawn's prompt is kilobytes; a first line past this is not read


def subagent_files(transcript: str | None, session: str | None, agent_id: str | None) -> tuple[str, str] | None:
    """Where Claude Code (2.1) keeps a subagent's own transcript and its meta file, beside the
    parent's transcript: `<dir>/<session>/subagents/agent-<id>.jsonl` and `.meta.json`."""
    if not (transcript and agent_id) or not all(c.isalnum() or c in "-_" for c in agent_id):
        return None
    base = os.path.splitext(os.path.expanduser(transcript))[0]
    if session and all(c.isalnum() or c in "-_" for c in session):
        base = os.path.join(os.path.dirname(base), session)
    stem = os.path.join(base, "subagents", f"agent-{agent_id}")
    return stem + ".jsonl", stem + ".meta.json"


def subagent_prompt(transcript: str | None, session: str | None, agent_id: str | None) -> str | None:
    """The prompt a subagent was spawned with: its own transcript's first line (a user
    message), or None when the file is not there or its first line is something else."""
    files = subagent_files(transcript, session, agent_id)
    if files is None:
        return None
    try:
        with incremental.open_regular(files[0]) as handle:
            first = handle.readline(FIRST_LINE_LIMIT)
    except OSError:
        return None
    try:
        line = json.loads(first.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(line, dict) or line.get("type") != "user":
        return None
    message = line.get("message")
    prompt = _text(message.get("content")) if isinstance(message, dict) else ""
    return prompt or None


def subagent_spawn_call(transcript: str | None, session: str | None, agent_id: str | None) -> str | None:
    """The id of the parent's tool call that spawned the subagent (`toolUseId` in its meta file)."""
    files = subagent_files(transcript, session, agent_id)
    if files is None:
        return None
    meta = incremental.load_json(files[1], MAX_LINE)
    tool_use_id = meta.get("toolUseId") if meta else None
    return tool_use_id if isinstance(tool_use_id, str) and tool_use_id else None
