"""Waking an idle agent with its job's follow-up, and knowing when the model has it.

A follow-up is delivered only once it is in the model's context. Three ways get it there:

- the Stop hook refuses the stop with the follow-up as its reason (Claude Code hands a
  block's reason to the model): delivered then;
- the person's next prompt carries it (UserPromptSubmit's additionalContext): delivered then;
- `proctor monitor wait`, started by the agent as a background task, blocks until the job
  has a follow-up ready and the session is idle, prints it and exits: the host wakes the
  idle session with a task notification, and the model reads the task's output. The wait
  records that it printed it (`printed`, `printed_to`); it counts as delivered once the
  session's transcript shows the model was given that output (the follow-up's header in a
  tool result), which the next Stop checks, and otherwise the Stop hands it over itself.

The Stop hook also asks for the wait: a session whose job has live monitors and no wait
among its background tasks is refused its stop once with the command to start. Refusals in a
row are bounded (MAX_STOP_BLOCKS, counted by the hook per session, reset by any stop let
through): a monitor that prints every ten seconds cannot keep a session from ever stopping;
past the bound the stop goes through and the wait takes over.

Only the standard library and the store: the hook imports this at Stop.
"""

from __future__ import annotations

import json
import os

MAX_STOP_BLOCKS = 3
WAIT_WORDS = "proctor monitor wait"


def header(followup_id: int, job: str) -> str:
    """The words every follow-up's text starts with (store/followups.py writes them)."""
    return f"Follow-up {followup_id} from the monitors of job {job}"


def wait_command(job: str, host: str | None, session: str | None) -> str:
    words = [WAIT_WORDS, "--job", _quote(job)]
    if session:
        words += ["--host", _quote(host or "claude"), "--session", _quote(session)]
    return " ".join(words)


def _quote(word: str) -> str:
    if word and all(c.isalnum() or c in "-_./=:,+@%" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def ask_text(job: str, live: int, host: str | None, session: str | None) -> str:
    command = wait_command(job, host, session)
    return (f"Job {job} has {live} monitor{'s' if live != 1 else ''} running. Before you stop, start "
            f"`{command}` as a background task (Bash with run_in_background: true). It waits until their next "
            f"follow-up is ready and you are idle, prints it and exits; its completion wakes you: read its output "
            f"and act on what the monitors saw. When the job needs them no more, remove them "
            f"(proctor monitor list; proctor monitor remove <id>).")


def live_monitors(conn, job: str) -> int:
    try:
        return conn.execute("SELECT COUNT(*) FROM monitors WHERE job = ? AND deleted IS NULL", (job,)).fetchone()[0]
    except Exception:  # a store older than monitors
        return 0


def undelivered(conn, job: str, limit: int = 50) -> list[dict]:
    rows = conn.execute("SELECT id, text, events, created, printed, printed_to FROM followups WHERE job = ? AND "
                        "delivered IS NULL ORDER BY id LIMIT ?", (job, limit)).fetchall()
    return [{"id": r[0], "text": r[1], "events": r[2], "created": r[3], "printed": r[4], "printed_to": r[5]}
            for r in rows]


def mark_delivered(conn, followup: int, via: str) -> None:
    from proctor.timeutil import iso, now

    conn.execute("UPDATE followups SET delivered = ?, via = ? WHERE id = ? AND delivered IS NULL",
                 (iso(now()), via, followup))


def mark_printed(conn, followup: int, to: str) -> None:
    from proctor.timeutil import iso, now

    conn.execute("UPDATE followups SET printed = ?, printed_to = ? WHERE id = ?", (iso(now()), to, followup))


def waiter_running(background_tasks, job: str) -> bool:
    """Whether the Stop payload's background tasks include a running `proctor monitor wait`
    for this job (Claude Code lists each with its command)."""
    if not isinstance(background_tasks, list):
        return False
    for task in background_tasks:
        if not isinstance(task, dict) or task.get("status") not in (None, "running"):
            continue
        command = task.get("command")
        if isinstance(command, str) and WAIT_WORDS in command and job in command:
            return True
    return False


TRANSCRIPT_READ_CAP = 64 << 20


def read_by_model(transcript: str | None, marks: list[str]) -> set[str]:
    """The marks (follow-up headers) found in the session's transcript in a line the model was
    given: a tool result (the task's output, read) or an attachment; never in what the model
    itself wrote (a tool call quoting a header proves nothing)."""
    if not transcript or not marks:
        return set()
    found: set[str] = set()
    wanted = {mark: json.dumps(mark)[1:-1].encode("utf-8") for mark in marks}
    try:
        size = os.path.getsize(transcript)
        with open(transcript, "rb") as handle:
            if size > TRANSCRIPT_READ_CAP:
                handle.seek(size - TRANSCRIPT_READ_CAP)
            for line in handle:
                hits = [mark for mark, raw in wanted.items() if mark not in found and raw in line]
                if not hits:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if _given_to_model(record):
                    found.update(hits)
    except OSError:
        return found
    return found


def _given_to_model(record: dict) -> bool:
    if not isinstance(record, dict):
        return False
    if record.get("type") == "attachment":
        return True
    message = record.get("message")
    if record.get("type") != "user" or not isinstance(message, dict):
        return False
    content = message.get("content")
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def session_state(conn, host: str, session: str) -> tuple[str | None, str | None]:
    """(activity, since) of a session's main thread, as its hook last recorded it."""
    try:
        row = conn.execute("SELECT activity, activity_at FROM sessions WHERE host = ? AND session = ? AND "
                           "subagent = ''", (host, session)).fetchone()
    except Exception:
        return None, None
    return (row[0], row[1]) if row else (None, None)


def stop_blocks(conn, host: str, session: str) -> int:
    try:
        row = conn.execute("SELECT stop_blocks FROM sessions WHERE host = ? AND session = ? AND subagent = ''",
                           (host, session)).fetchone()
    except Exception:
        return 0
    return int(row[0] or 0) if row else 0


# -- proctor monitor wait ---------------------------------------------------------------------

NOTHING_LEFT, TIMED_OUT = 3, 4
POLL_SECONDS = 0.5


def wait(ws, job: str, host: str | None, session: str | None, timeout: float | None,
         clock=None, sleep=None) -> tuple[int, dict | None, str]:
    """Block until `job` has a follow-up no wait has printed yet and the session (when named)
    is idle; record it printed for that session and return (0, follow-up, ""). Returns
    (NOTHING_LEFT, None, why) once there is nothing left to wait for (the job is gone or
    ended, or has neither live monitors nor a follow-up to come), (TIMED_OUT, None, why)
    after `timeout` seconds. Reads the store only when it changed (PRAGMA data_version)."""
    import time

    from proctor.store import rows

    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    deadline = None if timeout is None else clock() + timeout
    version = None
    last_look = 0.0
    while True:
        with ws.store.read() as conn:
            now_version = conn.execute("PRAGMA data_version").fetchone()[0]
            # data_version moves only for other connections' writes; look again every few
            # seconds regardless, since the session's activity has an age that matters
            if now_version != version or clock() - last_look >= 5:
                version, last_look = now_version, clock()
                row = rows.get(conn, job)
                if row is None:
                    return NOTHING_LEFT, None, f"no job {job}"
                if not rows.is_live(row["state"]):
                    return NOTHING_LEFT, None, f"job {job} has ended ({row.get('state')})"
                found = conn.execute("SELECT id, text, events, created FROM followups WHERE job = ? AND "
                                     "delivered IS NULL AND printed IS NULL ORDER BY id LIMIT 1",
                                     (job,)).fetchone()
                idle = True
                if session:
                    activity, _since = session_state(conn, host or "claude", session)
                    idle = activity in (None, "idle")
                if found is None:
                    coming = live_monitors(conn, job) or conn.execute(
                        "SELECT 1 FROM monitor_events WHERE job = ? AND followup IS NULL LIMIT 1", (job,)).fetchone()
                    if not coming:
                        return NOTHING_LEFT, None, f"job {job} has no live monitors and no follow-up to come"
                elif idle:
                    followup = {"id": found[0], "text": found[1], "events": found[2], "created": found[3],
                                "job": job}
                    break
        if deadline is not None and clock() >= deadline:
            return TIMED_OUT, None, f"no follow-up for job {job} within {timeout:g}s"
        sleep(POLL_SECONDS)
    with ws.store.write() as conn:
        mark_printed(conn, followup["id"], f"{host or 'claude'}:{session}" if session else "-")
    return 0, followup, ""
