"""The sessions the guard's hook has seen: one row per (host, session, subagent), with what
they claimed about themselves (lease, trace, spawner), how many calls, what the main thread is
doing (activity, since when) and how many Stops in a row the monitor-followup rule refused.

Only the standard library: the hook writes here on every call.
"""

from __future__ import annotations

_COLUMNS = (
    "host",
    "session",
    "subagent",
    "first_seen",
    "last_seen",
    "cwd",
    "lease",
    "lease_from",
    "trace",
    "spawner",
    "calls",
    "activity",
    "activity_at",
    "stop_blocks",
)


def record_call(
    tx,
    host: str,
    session: str,
    subagent: str,
    at: str,
    cwd,
    lease,
    lease_from,
    trace,
    spawner,
    activity: str | None,
    blocked: int | None,
) -> None:
    """One hook call of a session: seen now, one call more; its claims replaced, its trace and
    spawner kept unless given; its activity (since `at`) when one is given; `blocked` None
    leaves the Stop refusals in a row as they are, 1 counts one more, 0 resets them."""
    tx.execute(
        "INSERT INTO sessions (host, session, subagent, first_seen, last_seen, cwd, lease, lease_from, "
        "trace, spawner, calls, activity, activity_at, stop_blocks) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, coalesce(CAST(? AS INTEGER), 0)) "
        "ON CONFLICT (host, session, subagent) DO UPDATE SET last_seen = excluded.last_seen, "
        "cwd = excluded.cwd, lease = excluded.lease, lease_from = excluded.lease_from, "
        "trace = coalesce(excluded.trace, sessions.trace), spawner = coalesce(excluded.spawner, sessions.spawner), "
        "calls = sessions.calls + 1, activity = coalesce(excluded.activity, sessions.activity), "
        "activity_at = CASE WHEN excluded.activity IS NULL THEN sessions.activity_at ELSE excluded.activity_at END, "
        "stop_blocks = CASE WHEN CAST(? AS INTEGER) IS NULL THEN sessions.stop_blocks "
        "WHEN CAST(? AS INTEGER) = 1 THEN sessions.stop_blocks + 1 ELSE 0 END",
        (
            host,
            session,
            subagent,
            at,
            at,
            cwd,
            lease,
            lease_from,
            trace,
            spawner,
            activity,
            at if activity else None,
            blocked,
            blocked,
            blocked,
        ),
    )


def count_stop_block(tx, host: str, session: str, at: str) -> None:
    """One more Stop of the session's main thread refused, counted before the answer: it works on."""
    tx.execute(
        "INSERT INTO sessions (host, session, subagent, first_seen, last_seen, calls, activity, "
        "activity_at, stop_blocks) VALUES (?, ?, '', ?, ?, 0, 'working', ?, 1) "
        "ON CONFLICT (host, session, subagent) DO UPDATE SET stop_blocks = sessions.stop_blocks + 1, "
        "activity = 'working', activity_at = excluded.activity_at",
        (host, session, at, at, at),
    )


def activity(tx, host: str, session: str) -> tuple | None:
    """(activity, activity_at) of a session's main thread, or None for a session not seen."""
    return tx.one(
        "SELECT activity, activity_at FROM sessions WHERE host = ? AND session = ? AND subagent = ''", (host, session)
    )


def stop_blocks(tx, host: str, session: str) -> int:
    """The Stops of a session's main thread refused in a row (0 for a session not seen)."""
    return int(
        tx.scalar(
            "SELECT stop_blocks FROM sessions WHERE host = ? AND session = ? AND subagent = ''", (host, session), 0
        )
    )


def listing(tx) -> list[dict]:
    """Every session seen, the most recent first."""
    return [
        dict(zip(_COLUMNS, row))
        for row in tx.all(f"SELECT {', '.join(_COLUMNS)} FROM sessions ORDER BY last_seen DESC")
    ]
