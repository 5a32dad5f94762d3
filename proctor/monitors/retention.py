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

from proctor.store import monitors as mrows
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

    def chunked(which: str, params: tuple) -> None:
        table = mrows.DELETIONS[which][0]
        while budget[0] > 0:
            budget[0] -= 1
            with store.write() as tx:
                count = mrows.delete_chunk(tx, which, params, CHUNK)
            deleted[table] += count
            if count < CHUNK:
                return

    # older than `keep`
    chunked("old_events", (cutoff,))
    chunked("old_runs", (cutoff,))
    chunked("old_followups", (cutoff,))
    # caps, whatever the age
    with store.read() as tx:
        jobs = mrows.jobs_with_events(tx)
        busy_monitors = mrows.monitors_with_runs_over(tx, KEEP_RUNS)
        many_followups = mrows.jobs_with_followups_over(tx, KEEP_FOLLOWUPS)
    for job in jobs:
        with store.read() as tx:
            first_dropped = mrows.event_cutoff(tx, job, KEEP_EVENTS, KEEP_EVENT_BYTES)
        if first_dropped is not None:
            chunked("job_events", (job, first_dropped))
    for monitor in busy_monitors:
        with store.read() as tx:
            last = mrows.run_before_newest(tx, monitor, KEEP_RUNS)
        if last is not None:
            chunked("monitor_runs", (monitor, last))
    for job in many_followups:
        with store.read() as tx:
            last = mrows.followup_before_newest(tx, job, KEEP_FOLLOWUPS)
        if last is not None:
            chunked("job_followups", (job, last))
    return deleted
