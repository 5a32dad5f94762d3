"""background-silent: a background task of the session that has written nothing for long."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.guard.rules import _tasks

NAME = "background-silent"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 140  # where it is judged among the rules (proctor/guard/rules/__init__.py)
OPTIONS = {"advise_minutes": 30.0, "deny_minutes": 60.0}
SUMMARY = (
    "a background task of the session that has written nothing for advise_minutes (30 unset); "
    "past deny_minutes (60) it names what to run instead"
)
CATCHES = (
    "A background task of the session (a shell command or an agent; a watcher with an expiry is "
    "not judged, since the host ends it) that has written nothing for advise_minutes (30 unset). "
    "On each shell call of a root session proctor reads the session's transcript for the "
    "background tasks still running, and measures each one's silence from the latest of its "
    "start, its output file's last write and its newest event notice. Past advise_minutes the "
    "call is advised, once per task per session; past deny_minutes (60 unset) every shell call "
    "that is not a read is refused, naming each task's id, age, silence, command, output file "
    "and the TaskStop call that ends it."
)
WHY = (
    "A background task's output file and event notices are the only sign it is working, and one "
    "that writes nothing for half an hour is more likely waiting on a stdin nobody feeds, a lock or "
    "a prompt than doing slow work: a python3 - reading an unfed stdin sat for eight hours that way. "
    "proctor reads only the transcript bytes written since its last call, resuming from a "
    "checkpoint in the workspace cache, so a transcript of hundreds of megabytes costs a hook call "
    "no more than a small one. proctor never stops a task itself. deny_minutes must be more than "
    "advise_minutes. A subagent's tasks are background-left's at its stop."
)


def check_options(values: dict) -> str | None:
    if values["deny_minutes"] <= values["advise_minutes"]:
        return (
            f"deny_minutes ({values['deny_minutes']:g}) must be more than advise_minutes ({values['advise_minutes']:g})"
        )
    return None


def check(ctx: Context) -> list[tuple[str, str]]:
    call = ctx.call
    if not call.command or call.subagent:
        return []
    state = ctx.transcript(call.transcript)
    if state is None:
        return []
    advise_after = ctx.option(NAME, "advise_minutes", OPTIONS["advise_minutes"]) * 60
    deny_after = ctx.option(NAME, "deny_minutes", OPTIONS["deny_minutes"]) * 60
    silent_long, silent = [], []
    for task in state.running():
        if _tasks.is_monitor_wait(task):
            continue  # silent by design until the monitors have something: the session's wake
        since = _tasks.silence_since(task)
        if since is None:
            continue
        quiet = ctx.now - since
        if quiet >= deny_after:
            silent_long.append(task)
        elif quiet >= advise_after:
            silent.append(task)
    findings = []
    ceiling = ctx.option("background-unbounded", "ceiling_minutes", 120.0)
    if silent_long and not ctx.shell_writes.read:
        tasks = "; ".join(_tasks.describe(t, ctx.now) for t in silent_long)
        again = (
            "; ".join(f"timeout {ceiling:g}m {t['command']}" for t in silent_long if t.get("command"))
            or f"timeout {ceiling:g}m <command>"
        )
        findings.append(
            (
                "rule",
                (
                    f"{len(silent_long)} background task{'s' if len(silent_long) > 1 else ''} silent past "
                    f"{deny_after / 60:g} minutes: {tasks}. proctor never stops a task; stop it yourself. A stop "
                    f"loses only the process: the output file stays on disk, reads still pass, and a proctor run "
                    f"keeps its output ref and history. To pick the work back up, run it bounded: {again}"
                ),
            )
        )
    notes_path = ctx.notes_path("background-silent")
    notes = _tasks.load_notes(notes_path)
    advised = set(notes.get("advised") or [])
    fresh = [t for t in silent + (silent_long if not findings else []) if t["id"] not in advised]
    if fresh:
        findings.append(
            (
                "advise",
                (
                    "background task" + ("s have" if len(fresh) > 1 else " has") + f" written nothing for "
                    f"{advise_after / 60:g} minutes or more: "
                    + "; ".join(_tasks.describe(t, ctx.now) for t in fresh)
                    + ". One waiting on an unfed stdin, a lock or a prompt will not finish; stop it, or check its "
                    "output file"
                ),
            )
        )
        notes["advised"] = sorted(advised | {t["id"] for t in fresh})
        _tasks.save_notes(notes_path, notes)
    return findings
