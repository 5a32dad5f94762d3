"""How long monitor records are kept: the store stays bounded under a monitor that never stops
talking.

Events, runs and follow-ups older than `[monitors] keep` (default 7 days) are deleted. Besides,
whatever their age, a job keeps at most KEEP_EVENTS events and KEEP_EVENT_BYTES of their text
(the newest), KEEP_FOLLOWUPS follow-ups, and a monitor its last KEEP_RUNS runs: a monitor
printing 10,000 lines every 10 s reaches these in minutes, not in a week. What is still on its
way to an agent is never deleted here (an event not yet grouped; a follow-up not yet
delivered, unless older than `keep`: held back by followups.max_waiting instead), nor the
newest row of a table (a new row never takes the id of one an agent may have seen).

The deletions go in short transactions of at most CHUNK rows, so no writer (the guard's hook
above all) waits long behind them; a pass does at most MAX_CHUNKS of them and leaves the rest to
the next one. The server runs a pass at start and every minute, in a worker thread on its own
connection.
"""

from __future__ import annotations

from proctor.timeutil import iso, now

KEEP_DEFAULT = 7 * 86400.0
KEEP_EVENTS = 50_000  # per job
KEEP_EVENT_BYTES = 32 << 20  # per job, of event text
KEEP_FOLLOWUPS = 1_000  # per job
KEEP_RUNS = 1_000  # per monitor
CHUNK = 5_000
MAX_CHUNKS = 100


def prune(store, keep: float = KEEP_DEFAULT, at: float | None = None) -> dict[str, int]:
    """One pass over `store` (a proctor.store.Store); the rows deleted, by table."""
    cutoff = iso((now() if at is None else at) - keep)
    budget = [MAX_CHUNKS]
    deleted = {"monitor_events": 0, "monitor_runs": 0, "followups": 0}

    def chunked(table: str, where: str, params: tuple) -> None:
        while budget[0] > 0:
            budget[0] -= 1
            with store.write() as conn:
                cursor = conn.execute(
                    f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {where} "
                    f"AND id < (SELECT MAX(id) FROM {table}) LIMIT {CHUNK})", params)
                count = cursor.rowcount
            deleted[table] += count
            if count < CHUNK:
                return

    # older than `keep`
    chunked("monitor_events", "time < ? AND followup IS NOT NULL", (cutoff,))
    chunked("monitor_runs", "ended IS NOT NULL AND ended < ?", (cutoff,))
    chunked("followups", "created < ?", (cutoff,))
    # caps, whatever the age
    with store.read() as conn:
        jobs = conn.execute("SELECT job, COUNT(*) FROM monitor_events GROUP BY job").fetchall()
        busy_monitors = conn.execute("SELECT monitor FROM monitor_runs GROUP BY monitor HAVING COUNT(*) > ?",
                                     (KEEP_RUNS,)).fetchall()
        many_followups = conn.execute("SELECT job FROM followups GROUP BY job HAVING COUNT(*) > ?",
                                      (KEEP_FOLLOWUPS,)).fetchall()
    for job, _count in jobs:
        with store.read() as conn:
            first_dropped = _event_cutoff(conn, job)
        if first_dropped is not None:
            chunked("monitor_events", "job = ? AND followup IS NOT NULL AND id <= ?", (job, first_dropped))
    for (monitor,) in busy_monitors:
        with store.read() as conn:
            row = conn.execute("SELECT id FROM monitor_runs WHERE monitor = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
                               (monitor, KEEP_RUNS)).fetchone()
        if row:
            chunked("monitor_runs", "monitor = ? AND ended IS NOT NULL AND id <= ?", (monitor, row[0]))
    for (job,) in many_followups:
        with store.read() as conn:
            row = conn.execute("SELECT id FROM followups WHERE job = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
                               (job, KEEP_FOLLOWUPS)).fetchone()
        if row:
            chunked("followups", "job = ? AND delivered IS NOT NULL AND id <= ?", (job, row[0]))
    return deleted


def _event_cutoff(conn, job: str) -> int | None:
    """The id of the newest event of `job` past its caps (KEEP_EVENTS, KEEP_EVENT_BYTES), or None."""
    kept = size = 0
    for event_id, length in conn.execute(
            "SELECT id, length(CAST(line AS BLOB)) FROM monitor_events WHERE job = ? ORDER BY id DESC", (job,)):
        kept += 1
        size += length or 0
        if kept > KEEP_EVENTS or size > KEEP_EVENT_BYTES:
            return event_id
    return None
