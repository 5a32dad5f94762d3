"""Follow-ups: a job's monitor events, ordered, grouped for 10 s, then delivered to its agent
as batches of at most 100 events or 32 KiB (the rest in later batches).

They wait while the agent is working and go as soon as it is idle: an interactive Claude Code
session bound to the job gets the oldest batch at its next Stop hook, as a block whose reason
is the follow-up (the guard's monitor-followup rule calls `take_for_stop`); an agent run by
`proctor work` that has finished its attempt is resumed with it as its next message
(`claude --resume`, `opencode --session`, `codex exec resume`) by the server.
"""

from __future__ import annotations

import sqlite3

from proctor.timeutil import iso, now

GROUP_SECONDS = 10.0
MAX_EVENTS = 100
MAX_BYTES = 32 << 10


def pending_since(conn: sqlite3.Connection, job: str) -> str | None:
    row = conn.execute("SELECT MIN(time) FROM monitor_events WHERE job = ? AND followup IS NULL", (job,)).fetchone()
    return row[0] if row else None


def jobs_with_pending(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT job, MIN(time) FROM monitor_events WHERE followup IS NULL GROUP BY job").fetchall()


def batch(conn: sqlite3.Connection, job: str) -> list[int]:
    """Group every pending event of `job` into follow-ups (inside a write transaction)."""
    events = conn.execute(
        "SELECT e.id, e.monitor, e.time, e.line, e.truncated, m.description FROM monitor_events e "
        "JOIN monitors m ON m.id = e.monitor WHERE e.job = ? AND e.followup IS NULL ORDER BY e.id", (job,)).fetchall()
    made: list[int] = []
    current: list[tuple] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        if not current:
            return
        lines = [f"[{time_}] {description} (monitor {monitor}): {line}" for _id, monitor, time_, line, _t, description
                 in current]
        text = f"Follow-up from the monitors of job {job} ({len(current)} event{'s' if len(current) > 1 else ''}):\n" \
               + "\n".join(lines)
        cursor = conn.execute("INSERT INTO followups (job, created, text, events) VALUES (?, ?, ?, ?)",
                              (job, iso(now()), text, len(current)))
        followup = int(cursor.lastrowid)
        conn.executemany("UPDATE monitor_events SET followup = ? WHERE id = ?", [(followup, e[0]) for e in current])
        made.append(followup)
        current, size = [], 0

    for event in events:
        line_size = len(event[3].encode("utf-8", "replace")) + 80
        if current and (len(current) >= MAX_EVENTS or size + line_size > MAX_BYTES):
            flush()
        current.append(event)
        size += line_size
    flush()
    return made


def next_ready(conn: sqlite3.Connection, job: str) -> dict | None:
    row = conn.execute("SELECT id, text, events, created FROM followups WHERE job = ? AND delivered IS NULL "
                       "ORDER BY id LIMIT 1", (job,)).fetchone()
    return {"id": row[0], "text": row[1], "events": row[2], "created": row[3]} if row else None


def mark_delivered(conn: sqlite3.Connection, followup: int, via: str) -> None:
    conn.execute("UPDATE followups SET delivered = ?, via = ? WHERE id = ? AND delivered IS NULL",
                 (iso(now()), via, followup))
