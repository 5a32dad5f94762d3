"""The store's schema, as forward migrations. Append; never edit a released step.

One list serves both engines: a step is a statement in SQLite's dialect (store/postgres.py
translates it for PostgreSQL) or a function called with the migrating transaction."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

SCHEMA_VERSION = 8


def _machine_scopes(tx) -> None:
    """Every path and pid a store from before machines holds was recorded by one machine, the one
    migrating it now: its checkout bindings (`checkout:<machine>:<path>`), its jobs' checkouts and
    worker pids, its runs. Unstamped, a job would be every machine's to judge gone. (A store made
    new on PostgreSQL has no such rows; json_set is SQLite's.)"""
    from proctor.paths import machine_id

    here = machine_id()
    tx.execute(
        "UPDATE bindings SET scope = 'checkout:' || ? || ':' || substr(scope, 10), machine = ? "
        "WHERE scope LIKE 'checkout:/%'",
        (here, here),
    )
    if tx.dialect != "sqlite":
        return
    tx.execute(
        "UPDATE jobs SET machine = ?, doc = json_set(doc, '$.machine', ?) WHERE checkout_root IS NOT NULL", (here, here)
    )
    tx.execute(
        "UPDATE jobs SET doc = json_set(doc, '$.worker_machine', ?) "
        "WHERE json_extract(doc, '$.worker_pid') IS NOT NULL",
        (here,),
    )
    tx.execute(
        "UPDATE jobs SET doc = json_set(doc, '$.declared_on', ?) WHERE json_extract(doc, '$.declared_in') IS NOT NULL",
        (here,),
    )
    tx.execute("UPDATE runs SET machine = ?", (here,))
    tx.execute("UPDATE monitor_runs SET machine = ?", (here,))


# a step: an SQL statement, or a function called with the migrating transaction
MIGRATIONS: list[tuple[int, list[str | Callable[[Any], None]]]] = [
    (
        1,
        [
            # One row per job. `doc` is the whole record as JSON; the columns beside it are
            # the facts queries select on, kept in step with it by jobs/rows.py alone.
            """CREATE TABLE jobs (
                id TEXT PRIMARY KEY,
                parent TEXT,
                root TEXT NOT NULL,
                depth INTEGER NOT NULL,
                state TEXT NOT NULL,
                live INTEGER NOT NULL,
                holder TEXT NOT NULL DEFAULT 'session',
                checkout_root TEXT,
                declared_in TEXT,
                created TEXT NOT NULL,
                updated TEXT NOT NULL,
                doc TEXT NOT NULL
            )""",
            "CREATE INDEX jobs_parent ON jobs(parent)",
            "CREATE INDEX jobs_root_live ON jobs(root, live)",
            "CREATE INDEX jobs_live_state ON jobs(live, state)",
            # Write paths of live jobs, by the directory key overlap is judged on, so that
            # finding a job's overlaps reads only the rows that share a prefix with it.
            """CREATE TABLE job_paths (
                job TEXT NOT NULL,
                spelling TEXT NOT NULL,
                key TEXT NOT NULL
            )""",
            "CREATE INDEX job_paths_key ON job_paths(key)",
            "CREATE INDEX job_paths_job ON job_paths(job)",
            # Who acts under which job: `checkout:<root>` now; the guard adds per-session keys.
            """CREATE TABLE bindings (
                scope TEXT PRIMARY KEY,
                job TEXT NOT NULL,
                recorded TEXT NOT NULL
            )""",
            # The activity trail: what happened, when, by whom, for which job. A payload too
            # large for a row is a content-addressed blob, referenced by `blob`.
            """CREATE TABLE events (
                id INTEGER PRIMARY KEY,
                time TEXT NOT NULL,
                kind TEXT NOT NULL,
                actor TEXT NOT NULL,
                job TEXT,
                data TEXT,
                blob TEXT
            )""",
            "CREATE INDEX events_job ON events(job, id)",
            "CREATE INDEX events_kind ON events(kind, id)",
        ],
    ),
    (
        2,
        [
            # Recorded runs of targets: the evidence a check is graded on. The output is a
            # content-addressed blob; `output_ref` names it.
            """CREATE TABLE runs (
                id TEXT PRIMARY KEY,
                target TEXT NOT NULL,
                command TEXT NOT NULL,
                cwd TEXT NOT NULL,
                checkout TEXT NOT NULL,
                checkpoint TEXT,
                lease TEXT,
                exit_code INTEGER,
                timed_out INTEGER NOT NULL,
                started TEXT NOT NULL,
                ended TEXT NOT NULL,
                output_ref TEXT NOT NULL,
                output_bytes INTEGER NOT NULL
            )""",
            "CREATE INDEX runs_target ON runs(target, started)",
            "CREATE INDEX runs_output ON runs(output_ref)",
        ],
    ),
    (
        3,
        [
            # The guard and fork ask "which live jobs are bound to this checkout" on every call.
            "CREATE INDEX jobs_checkout_live ON jobs(checkout_root, live)",
            "CREATE INDEX jobs_declared_live ON jobs(declared_in, live)",
            # Sessions the hook has seen, with what they claimed about themselves.
            """CREATE TABLE sessions (
                host TEXT NOT NULL,
                session TEXT NOT NULL,
                subagent TEXT NOT NULL,
                first_seen TEXT NOT NULL,
                last_seen TEXT NOT NULL,
                cwd TEXT,
                lease TEXT,
                lease_from TEXT,
                trace TEXT,
                spawner TEXT,
                calls INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (host, session, subagent)
            )""",
        ],
    ),
    (
        4,
        [
            # Monitors: commands the server runs for a job at an interval.
            """CREATE TABLE monitors (
                id INTEGER PRIMARY KEY,
                job TEXT NOT NULL,
                command TEXT NOT NULL,
                interval REAL NOT NULL,
                description TEXT NOT NULL,
                cwd TEXT NOT NULL,
                created TEXT NOT NULL,
                created_by TEXT NOT NULL,
                last_run TEXT,
                deleted TEXT
            )""",
            "CREATE INDEX monitors_job ON monitors(job, deleted)",
            """CREATE TABLE monitor_runs (
                id INTEGER PRIMARY KEY,
                monitor INTEGER NOT NULL,
                started TEXT NOT NULL,
                ended TEXT,
                exit_code INTEGER,
                timed_out INTEGER NOT NULL DEFAULT 0,
                truncated INTEGER NOT NULL DEFAULT 0,
                bytes INTEGER NOT NULL DEFAULT 0,
                stderr TEXT
            )""",
            "CREATE INDEX monitor_runs_monitor ON monitor_runs(monitor, id)",
            """CREATE TABLE monitor_events (
                id INTEGER PRIMARY KEY,
                monitor INTEGER NOT NULL,
                run INTEGER NOT NULL,
                job TEXT NOT NULL,
                time TEXT NOT NULL,
                line TEXT NOT NULL,
                truncated INTEGER NOT NULL DEFAULT 0,
                followup INTEGER
            )""",
            "CREATE INDEX monitor_events_job ON monitor_events(job, followup, id)",
            # Follow-ups: batches of a job's monitor events, delivered to its agent when idle.
            """CREATE TABLE followups (
                id INTEGER PRIMARY KEY,
                job TEXT NOT NULL,
                created TEXT NOT NULL,
                text TEXT NOT NULL,
                events INTEGER NOT NULL,
                delivered TEXT,
                via TEXT
            )""",
            "CREATE INDEX followups_job ON followups(job, delivered)",
        ],
    ),
    (
        5,
        [
            # The content identity of the tree a run started on (vcs.checkpoint.tree_digest):
            # a check is graded only on a run whose tree is the job's tree now.
            "ALTER TABLE runs ADD COLUMN tree TEXT",
            # ... and of the tree it ended on: a run is evidence only for a tree that stood still.
            "ALTER TABLE runs ADD COLUMN tree_end TEXT",
        ],
    ),
    (
        6,
        [
            # What a session is doing, as its hook events tell it (working, idle, waiting for the
            # person, waiting for a plan approval), since when, and how many Stops in a row the
            # monitor-followup rule refused: follow-ups are held while it is not idle.
            "ALTER TABLE sessions ADD COLUMN activity TEXT",
            "ALTER TABLE sessions ADD COLUMN activity_at TEXT",
            "ALTER TABLE sessions ADD COLUMN stop_blocks INTEGER NOT NULL DEFAULT 0",
            # The --allow-unsandboxed acknowledgement, recorded with the monitor (when, by whom).
            "ALTER TABLE monitors ADD COLUMN acknowledged TEXT",
            # A run's process: its pid and the tag (or cgroup) its descendants carry, so a server
            # started after one that was killed ends what that one left; an error in the loop.
            "ALTER TABLE monitor_runs ADD COLUMN pid INTEGER",
            "ALTER TABLE monitor_runs ADD COLUMN tag TEXT",
            "ALTER TABLE monitor_runs ADD COLUMN error TEXT",
            "ALTER TABLE monitor_runs ADD COLUMN lines INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE monitor_runs ADD COLUMN timeout REAL",
            "CREATE INDEX monitor_runs_open ON monitor_runs(ended)",
            "CREATE INDEX monitor_events_time ON monitor_events(time)",
            # A follow-up's size as delivered, and a `proctor monitor wait` that printed it for a
            # session (printed, printed_to) before any hook handed it to the model (delivered).
            "ALTER TABLE followups ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE followups ADD COLUMN printed TEXT",
            "ALTER TABLE followups ADD COLUMN printed_to TEXT",
            "CREATE INDEX followups_created ON followups(created)",
        ],
    ),
    (
        7,
        [
            # The machine a path or a pid belongs to (paths.machine_id): checkout paths and pids
            # mean something only where they were taken, once one store serves several machines.
            "ALTER TABLE jobs ADD COLUMN machine TEXT",
            "ALTER TABLE bindings ADD COLUMN machine TEXT",
            "ALTER TABLE runs ADD COLUMN machine TEXT",
            "ALTER TABLE monitor_runs ADD COLUMN machine TEXT",
            # Content-addressed blobs kept in the store itself (run outputs, large trail payloads),
            # so a wait on one machine reads evidence recorded on another. The embedded store
            # keeps its blobs as files beside the database (store/blobs.py).
            """CREATE TABLE blobs (
                ref TEXT PRIMARY KEY,
                bytes INTEGER NOT NULL,
                created TEXT NOT NULL,
                data BLOB NOT NULL
            )""",
            _machine_scopes,
        ],
    ),
    (
        8,
        [
            # How a run was sandboxed (proctor/sandbox.py): the job whose grant it ran in, what it
            # could write, and whether the kernel's denials could be read; NULL when it was not.
            "ALTER TABLE runs ADD COLUMN sandbox TEXT",
        ],
    ),
]
