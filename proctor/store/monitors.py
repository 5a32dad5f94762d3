"""Monitors, their runs and their events: the rows. Only this module (and followups.py, which
groups the events) writes `monitors`, `monitor_runs` and `monitor_events`.

The rules about what may be declared, and who may see what, live in monitors/store.py; the
server's loop that runs them in monitors/scheduler.py; how long their records are kept in
monitors/retention.py.
"""

from __future__ import annotations

COLUMNS = (
    "id",
    "job",
    "command",
    "interval",
    "description",
    "cwd",
    "created",
    "created_by",
    "last_run",
    "deleted",
    "acknowledged",
)
# `interval` is a keyword to PostgreSQL: quoted (SQLite reads the quotes the same way)
_SELECT = (
    'SELECT id, job, command, "interval", description, cwd, created, created_by, last_run, deleted, '
    "acknowledged FROM monitors"
)


def octets(tx, expression: str) -> str:
    """An SQL expression for the length in bytes of the text `expression` (UTF-8)."""
    if tx.dialect == "postgresql":
        return f"octet_length({expression})"
    return f"length(CAST({expression} AS BLOB))"


# -- monitors ----------------------------------------------------------------------------------


def count_live(tx, job: str) -> int:
    """The monitors of `job` not deleted."""
    return int(tx.scalar("SELECT COUNT(*) FROM monitors WHERE job = ? AND deleted IS NULL", (job,), 0))


def insert(
    tx,
    job: str,
    command: str,
    interval: float,
    description: str,
    cwd: str,
    created: str,
    created_by: str,
    acknowledged: str,
) -> int:
    return tx.insert(
        'INSERT INTO monitors (job, command, "interval", description, cwd, created, created_by, acknowledged) '
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (job, command, interval, description, cwd, created, created_by, acknowledged),
    )


def get(tx, monitor_id: int) -> dict | None:
    row = tx.one(_SELECT + " WHERE id = ?", (monitor_id,))
    return dict(zip(COLUMNS, row)) if row else None


def live(tx, job: str | None = None) -> list[dict]:
    """The monitors not deleted (of one job), oldest first."""
    if job is None:
        found = tx.all(_SELECT + " WHERE deleted IS NULL ORDER BY id")
    else:
        found = tx.all(_SELECT + " WHERE deleted IS NULL AND job = ? ORDER BY id", (job,))
    return [dict(zip(COLUMNS, r)) for r in found]


def mark_deleted(tx, monitor_id: int, note: str) -> None:
    """Deleted for good: `note` says when and why."""
    tx.execute("UPDATE monitors SET deleted = ? WHERE id = ?", (note, monitor_id))


# -- runs --------------------------------------------------------------------------------------


def open_run(tx, monitor_id: int, started: str, tag: str, timeout: float, machine: str | None = None) -> int:
    """A run's record, opened before its command has a slot on `machine` (where its pid and tag
    mean something); the monitor's last run is now."""
    run_id = tx.insert(
        "INSERT INTO monitor_runs (monitor, started, tag, timeout, machine) VALUES (?, ?, ?, ?, ?)",
        (monitor_id, started, tag, timeout, machine),
    )
    tx.execute("UPDATE monitors SET last_run = ? WHERE id = ?", (started, monitor_id))
    return run_id


def run_started(tx, run_id: int, monitor_id: int, pid: int, started: str) -> None:
    """The command started: its pid, and its start."""
    tx.execute("UPDATE monitor_runs SET pid = ?, started = ? WHERE id = ?", (pid, started, run_id))
    tx.execute("UPDATE monitors SET last_run = ? WHERE id = ?", (started, monitor_id))


def close_run(tx, values: tuple) -> None:
    """values: (ended, exit_code, timed_out 0/1, truncated 0/1, bytes, lines, stderr, error, run id)."""
    tx.execute(
        "UPDATE monitor_runs SET ended = ?, exit_code = ?, timed_out = ?, truncated = ?, bytes = ?, "
        "lines = ?, stderr = ?, error = ? WHERE id = ?",
        values,
    )


def failed_run(
    tx, monitor_id: int, started: str, ended: str, timeout: float, error: str, machine: str | None = None
) -> None:
    """A run that never got to start its command, recorded whole."""
    tx.execute(
        "INSERT INTO monitor_runs (monitor, started, ended, timeout, error, machine) VALUES (?, ?, ?, ?, ?, ?)",
        (monitor_id, started, ended, timeout, error, machine),
    )


def open_runs(tx, machine: str | None = None) -> list[tuple]:
    """(id, pid, tag, started) of every run not closed (with `machine`: of the runs opened on it,
    or on a machine not recorded)."""
    if machine is None:
        return [tuple(r) for r in tx.all("SELECT id, pid, tag, started FROM monitor_runs WHERE ended IS NULL")]
    return [
        tuple(r)
        for r in tx.all(
            "SELECT id, pid, tag, started FROM monitor_runs WHERE ended IS NULL AND (machine = ? OR machine IS NULL)",
            (machine,),
        )
    ]


def close_left_open(tx, run_ids: list[int], ended: str, error: str) -> None:
    """Close the runs an earlier server left open, each with `error`."""
    tx.executemany(
        "UPDATE monitor_runs SET ended = ?, error = ? WHERE id = ? AND ended IS NULL",
        [(ended, error, run_id) for run_id in run_ids],
    )


_RUN_SELECT = (
    "SELECT r.id, r.monitor, m.job, r.started, r.ended, r.exit_code, r.timed_out, r.timeout, r.truncated, "
    "r.lines, r.bytes, r.error, r.stderr, r.pid FROM monitor_runs r JOIN monitors m ON m.id = r.monitor"
)


def latest_runs(tx, job: str | None = None, monitor: int | None = None, limit: int = 100) -> list[tuple]:
    """The latest `limit` runs (of one job's monitors, of one monitor), newest first, as rows of
    (id, monitor, job, started, ended, exit_code, timed_out, timeout, truncated, lines, bytes,
    error, stderr, pid)."""
    clauses: list[str] = []
    params: list[str | int] = []
    if job is not None:
        clauses.append("m.job = ?")
        params.append(job)
    if monitor is not None:
        clauses.append("r.monitor = ?")
        params.append(monitor)
    query = _RUN_SELECT + (" WHERE " + " AND ".join(clauses) if clauses else "")
    return tx.all(query + " ORDER BY r.id DESC LIMIT ?", (*params, limit))


# -- events ------------------------------------------------------------------------------------


def insert_events(tx, rows: list[tuple]) -> None:
    """rows: (monitor, run, job, time, line, truncated 0/1)."""
    tx.executemany(
        "INSERT INTO monitor_events (monitor, run, job, time, line, truncated) VALUES (?, ?, ?, ?, ?, ?)", rows
    )


def latest_events(tx, job: str | None = None, limit: int = 1000) -> list[tuple]:
    """The latest `limit` events (of one job), newest first, as rows of (monitor, run, time,
    line, truncated, followup, job, when the follow-up was delivered)."""
    query = (
        "SELECT e.monitor, e.run, e.time, e.line, e.truncated, e.followup, e.job, f.delivered "
        "FROM monitor_events e LEFT JOIN followups f ON f.id = e.followup"
    )
    params: tuple = ()
    if job is not None:
        query += " WHERE e.job = ?"
        params = (job,)
    return tx.all(query + " ORDER BY e.id DESC LIMIT ?", (*params, limit))


# -- follow-ups, as a person reads them --------------------------------------------------------

FOLLOWUP_COLUMNS = ("id", "job", "events", "bytes", "created", "delivered", "via", "printed", "printed_to")


def latest_followups(tx, job: str | None = None, limit: int = 100) -> list[tuple]:
    """The latest `limit` follow-ups (of one job), newest first, without their text, as rows of
    FOLLOWUP_COLUMNS (bytes measured for a row written before they were recorded)."""
    query = (
        f"SELECT id, job, events, COALESCE(NULLIF(bytes, 0), {octets(tx, 'text')}), created, delivered, "
        "via, printed, printed_to FROM followups"
    )
    params: tuple = ()
    if job is not None:
        query += " WHERE job = ?"
        params = (job,)
    return tx.all(query + " ORDER BY id DESC LIMIT ?", (*params, limit))


def followup_row(tx, followup_id: int) -> tuple | None:
    """One follow-up: FOLLOWUP_COLUMNS, then its text."""
    return tx.one(f"SELECT {', '.join(FOLLOWUP_COLUMNS)}, text FROM followups WHERE id = ?", (followup_id,))


# -- retention ---------------------------------------------------------------------------------

# What a retention pass deletes, by name: (table, the rows).
DELETIONS = {
    "old_events": ("monitor_events", "time < ? AND followup IS NOT NULL"),  # (cutoff,)
    "old_runs": ("monitor_runs", "ended IS NOT NULL AND ended < ?"),  # (cutoff,)
    "old_followups": ("followups", "created < ?"),  # (cutoff,)
    "job_events": ("monitor_events", "job = ? AND followup IS NOT NULL AND id <= ?"),  # (job, last id)
    "monitor_runs": ("monitor_runs", "monitor = ? AND ended IS NOT NULL AND id <= ?"),  # (monitor, last id)
    "job_followups": ("followups", "job = ? AND delivered IS NOT NULL AND id <= ?"),  # (job, last id)
}


def delete_chunk(tx, which: str, params: tuple, chunk: int) -> int:
    """Delete at most `chunk` rows of the deletion `which` (DELETIONS), never the newest row of
    its table (a new row never takes the id of one an agent may have seen); how many went."""
    table, where = DELETIONS[which]
    cursor = tx.execute(
        f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {where} "
        f"AND id < (SELECT MAX(id) FROM {table}) LIMIT {int(chunk)})",
        params,
    )
    return int(cursor.rowcount)


def jobs_with_events(tx) -> list[str]:
    return [r[0] for r in tx.all("SELECT job FROM monitor_events GROUP BY job")]


def monitors_with_runs_over(tx, count: int) -> list[int]:
    return [r[0] for r in tx.all("SELECT monitor FROM monitor_runs GROUP BY monitor HAVING COUNT(*) > ?", (count,))]


def jobs_with_followups_over(tx, count: int) -> list[str]:
    return [r[0] for r in tx.all("SELECT job FROM followups GROUP BY job HAVING COUNT(*) > ?", (count,))]


def run_before_newest(tx, monitor: int, newer: int) -> int | None:
    """The id of the run of `monitor` that has `newer` runs after it, or None."""
    return tx.scalar(
        "SELECT id FROM monitor_runs WHERE monitor = ? ORDER BY id DESC LIMIT 1 OFFSET ?", (monitor, newer)
    )


def followup_before_newest(tx, job: str, newer: int) -> int | None:
    """The id of the follow-up of `job` that has `newer` follow-ups after it, or None."""
    return tx.scalar("SELECT id FROM followups WHERE job = ? ORDER BY id DESC LIMIT 1 OFFSET ?", (job, newer))


def event_cutoff(tx, job: str, keep_events: int, keep_bytes: int) -> int | None:
    """The id of the newest event of `job` past its caps (`keep_events` events, `keep_bytes` of
    their text, counting from the newest), or None."""
    kept = size = 0
    cursor = tx.execute(f"SELECT id, {octets(tx, 'line')} FROM monitor_events WHERE job = ? ORDER BY id DESC", (job,))
    for event_id, length in cursor:
        kept += 1
        size += length or 0
        if kept > keep_events or size > keep_bytes:
            return event_id
    return None
