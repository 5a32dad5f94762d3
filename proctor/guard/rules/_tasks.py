"""How the background-task rules describe a task, its silence, and the TaskStop that ends it."""

from __future__ import annotations

import json
import os

from proctor.timeutil import format_duration


def is_monitor_wait(task: dict) -> bool:
    """`proctor monitor wait`, the task a session starts so its job's monitors can wake it: silent
    by design until a follow-up is ready, and meant to run while the session is idle. Only the
    plain command counts (proctor/monitors/wake.py parse_wait): anything chained to it, or
    substituted into it, is a task like any other."""
    from proctor.monitors.wake import parse_wait

    return parse_wait(task.get("command")) is not None


def silence_since(task: dict) -> float | None:
    """The latest of the task's start, its output file's last write, and its newest notice."""
    marks = [t for t in (task.get("started"), task.get("newest_notice")) if isinstance(t, (int, float))]
    output = task.get("output_file")
    if output:
        try:
            marks.append(os.stat(os.path.expanduser(output)).st_mtime)
        except (OSError, ValueError):
            pass
    return max(marks) if marks else None


def stop_call(task: dict) -> str:
    return 'TaskStop {"task_id": "' + task["id"] + '"}'


def describe(task: dict, now: float) -> str:
    started = task.get("started")
    since = silence_since(task)
    age = format_duration(now - started) if isinstance(started, (int, float)) else "unknown"
    silent = format_duration(now - since) if since is not None else "unknown"
    what = task.get("command") or task.get("description") or "(no command recorded)"
    output = task.get("output_file") or "(no output file recorded)"
    return (
        f"task {task['id']} ({task.get('kind', 'shell')}), running {age}, silent {silent}: {what}; "
        f"output {output}; end it with {stop_call(task)}"
    )


def load_notes(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_notes(path: str, data: dict) -> None:
    from proctor.paths import write_atomic

    try:
        write_atomic(path, json.dumps(data))
    except OSError:
        pass  # unsaved, an advisory may be given once more; nothing else is lost
