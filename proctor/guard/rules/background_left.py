"""background-left: a subagent stops with background tasks it started still running."""

from __future__ import annotations

from proctor.guard.call import STOP, SUBAGENT_STOP
from proctor.guard.context import Context
from proctor.guard.rules import _tasks

NAME = "background-left"
DEFAULT = "deny"
EVENTS = (STOP, SUBAGENT_STOP)
ORDER = 150  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a subagent stops and leaves the background tasks it started running"
CATCHES = (
    "At a subagent's stop (SubagentStop), the background tasks that subagent started and left "
    "running, each named with the TaskStop call that ends it; by default the stop is refused so "
    "the subagent ends or hands over its tasks first. At the root session's Stop the same list is "
    "an advisory. Watchers with an expiry are left to the host."
)
WHY = (
    "A subagent's background task outlives the subagent and nobody is left to read its output or "
    "stop it: it holds ports, files and CPU until the session ends. The subagent that started it is "
    "the one that knows whether to stop it or hand it over."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    call = ctx.call
    if call.event == SUBAGENT_STOP:
        tasks = _subagent_tasks(ctx)
        reply = call.raw.get("last_assistant_message")
        if not isinstance(reply, str):
            reply = ""
        tasks = [t for t in tasks if t["id"] not in reply]  # a task the reply hands over is handed over
        if not tasks:
            return []
        text = (
            "this subagent started background tasks that are still running: "
            + "; ".join(_tasks.describe(t, ctx.now) for t in tasks)
            + ". Stop each, or name each task id in your reply with who takes it over, before you stop"
        )
        # refused once; a stop the host already continued because of a hook is not refused again
        return [("advise" if call.raw.get("stop_hook_active") is True else "rule", text)]
    tasks = [t for t in _root_tasks(ctx) if not _tasks.is_monitor_wait(t)]  # the wake, left running on purpose
    if not tasks:
        return []
    return [
        (
            "advise",
            "background tasks still running as the session stops: "
            + "; ".join(_tasks.describe(t, ctx.now) for t in tasks),
        )
    ]


def _subagent_tasks(ctx) -> list[dict]:
    found: dict[str, dict] = {}
    own = ctx.transcript(ctx.call.agent_transcript)
    if own is not None:
        for task in own.running():
            found[task["id"]] = task
    root = ctx.transcript(ctx.call.transcript)
    if root is not None and ctx.call.subagent:
        for task in root.running():
            if task.get("subagent") == ctx.call.subagent:
                found.setdefault(task["id"], task)
    return sorted(found.values(), key=lambda t: t["id"])


def _root_tasks(ctx) -> list[dict]:
    found: dict[str, dict] = {}
    state = ctx.transcript(ctx.call.transcript)
    if state is not None:
        for task in state.running():
            found[task["id"]] = task
    # The host's own list, where its Stop payload carries one, is read as well.
    listed = ctx.call.raw.get("background_tasks")
    for entry in listed if isinstance(listed, list) else ():
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        if entry.get("type") not in ("shell", "subagent", None) or entry.get("status") not in ("running", None):
            if entry["id"] in found and entry.get("status") not in ("running", None):
                found.pop(entry["id"])
            continue
        found.setdefault(
            entry["id"],
            {
                "id": entry["id"],
                "kind": "agent" if entry.get("type") == "subagent" else "shell",
                "command": entry.get("command"),
                "description": entry.get("description"),
                "started": None,
                "output_file": None,
                "status": "running",
            },
        )
    return sorted(found.values(), key=lambda t: t["id"])
