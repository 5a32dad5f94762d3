"""The server's monitor loop: every monitor on its own schedule, at most four commands at once.

A monitor runs at once when it is created and when the server starts, then again `interval`
after its previous run ENDED (a monitor never overlaps itself). Runs wait for one of four
slots server-wide. Events are stored as they are read; a job's pending events are grouped
for 10 s into follow-ups. A reconcile step, woken when the store changes (PRAGMA
data_version) or a timer falls due, deletes monitors whose jobs left an active column and
hands ready follow-ups to finished `proctor work` workers. Runs, groups and deliveries are
driven by events and timers set for when they are due; the one periodic tick, every two
seconds, reads a single PRAGMA to learn whether another process changed the store.

The server reads the store, so it reaps like every other reader (jobs/reap.py: a job whose
ancestor ended, whose checkout is gone, or that nobody took, is ended no_return), at start,
before each API read, and on every tick: a deleted checkout changes nothing in the store, so
only a periodic look can see it. A pass is the reap's read-only candidate check (a few
indexed queries and a stat per checkout) and writes only when there is something to end; it
runs in a worker thread on a connection of its own, so a stat hanging on a dead mount stalls
no monitor and no request, and the monitors of whatever it ended are deleted at once.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

from proctor import config as config_mod
from proctor.jobs import reap
from proctor.monitors import run, store as mstore
from proctor.store import followups
from proctor.store import Store
from proctor.timeutil import iso, now

CONCURRENCY = 4
RECONCILE_SECONDS = 2.0


class Scheduler:
    def __init__(self, state_dir: str, root: str, repo_root: str) -> None:
        self.state_dir = state_dir
        self.store = Store(state_dir)
        self.root = root
        self.repo_root = repo_root
        self.slots = asyncio.Semaphore(CONCURRENCY)
        self.tasks: dict[int, asyncio.Task] = {}
        self.changed = asyncio.Condition()
        self.version = 0  # bumped on every change a console should redraw for
        self.running_now = 0
        self.drift: list[float] = []  # how late each run started against its schedule
        self._data_version = None
        self._batch_timers: dict[str, asyncio.TimerHandle] = {}
        self._reconciler: asyncio.Task | None = None
        self._delivering: set[str] = set()
        self._reaping: asyncio.Task | None = None  # the tick's pass, while it runs
        self._reap_failure: str | None = None  # the last pass's failure, logged once
        self._config: tuple[object, config_mod.Config] | None = None  # (file stamp, config)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._own_jobs("running", None)
        try:
            await self.reap_soon()  # no monitor of a job nobody holds starts
        except Exception:  # logged; the tick tries again
            pass
        self.reconcile_now()
        with self.store.read() as conn:
            monitors = mstore.live(conn)
        for monitor in monitors:
            self._spawn(monitor)
        self._reconciler = asyncio.ensure_future(self._reconcile_loop())

    async def stop(self) -> None:
        if self._reconciler:
            self._reconciler.cancel()
        if self._reaping is not None and not self._reaping.done():
            await asyncio.wait([self._reaping], timeout=5)
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        for handle in self._batch_timers.values():
            handle.cancel()
        self._own_jobs("no_return", "the server stopped")
        self.store.close()

    def _own_jobs(self, state: str, end_reason: str | None) -> None:
        """The server's maintenance jobs, held by the server (HOLDER server in every listing),
        never ended by the rules that end unheld session jobs."""
        from proctor.store import rows

        at = iso(now())
        own = (("proctor-server", None, "the server's own work: monitors, follow-ups, the console"),
               ("proctor-server/monitors", "proctor-server", "run every monitor on its schedule, four at once"),
               ("proctor-server/followups", "proctor-server", "group monitor events and wake idle agents"))
        with self.store.write() as conn:
            for job_id, parent, criteria in own:
                existing = rows.get(conn, job_id)
                job = {"schema_version": 1, "id": job_id, "parent": parent, "criteria": criteria, "write_paths": [],
                       "deny_paths": [], "read_paths": [], "depends_on": [], "model": None, "check": None,
                       "goals": [], "read_only": True, "timeout": None, "deadline": None, "actor": "server",
                       "holder": "server", "declared_in": self.root,
                       "created": existing["created"] if existing else at, "updated": at, "releases": [],
                       "unattributed": [], "entries": [], "checkout_root": self.root, "base": None,
                       "end_reason": end_reason, "state": state, "write_proof": None, "checkpoint": None}
                rows.put(conn, job, "proctor-server", 0 if parent is None else 1)

    def config(self) -> config_mod.Config:
        """The repository's proctor.toml, read again only when the file changed."""
        stamp = self._config_stamp()
        if self._config is None or self._config[0] != stamp:
            self._config = (stamp, config_mod.load(self.root))
        return self._config[1]

    # -- monitors ----------------------------------------------------------------------------

    def add(self, monitor: dict) -> None:
        self._spawn(monitor)
        self.bump()

    def removed(self, monitor_id: int) -> None:
        task = self.tasks.pop(monitor_id, None)
        if task is not None:
            task.cancel()  # the run in flight is ended as a group
        self.bump()

    def _spawn(self, monitor: dict) -> None:
        if monitor["id"] not in self.tasks:
            self.tasks[monitor["id"]] = asyncio.ensure_future(self._monitor_loop(monitor))

    async def _monitor_loop(self, monitor: dict) -> None:
        due = time.monotonic()
        try:
            while True:
                async with self.slots:
                    self.drift.append(max(0.0, time.monotonic() - due))
                    await self._run(monitor)
                due = time.monotonic() + monitor["interval"]
                await asyncio.sleep(monitor["interval"])
        except asyncio.CancelledError:
            pass
        finally:
            self.tasks.pop(monitor["id"], None)

    async def _run(self, monitor: dict) -> None:
        cwd = monitor["cwd"] if os.path.isdir(monitor["cwd"]) else self.repo_root  # a vanished cwd falls back
        with self.store.write() as conn:
            cursor = conn.execute("INSERT INTO monitor_runs (monitor, started) VALUES (?, ?)",
                                  (monitor["id"], iso(now())))
            run_id = int(cursor.lastrowid)
            conn.execute("UPDATE monitors SET last_run = ? WHERE id = ?", (iso(now()), monitor["id"]))

        def emit(batch: list[tuple[str, bool]]) -> None:
            stamp = iso(now())
            with self.store.write() as conn:
                conn.executemany(
                    "INSERT INTO monitor_events (monitor, run, job, time, line, truncated) VALUES (?, ?, ?, ?, ?, ?)",
                    [(monitor["id"], run_id, monitor["job"], stamp, line, 1 if cut else 0) for line, cut in batch])
            self._schedule_batch(monitor["job"])
            self.bump()

        self.running_now += 1
        result = None
        try:
            result = await run.run_once(monitor["command"], cwd, min(monitor["interval"], run.RUN_TIMEOUT_CAP), emit,
                                        env=dict(os.environ, PROCTOR_MONITOR=str(monitor["id"])))
        finally:
            self.running_now -= 1
            # a run cancelled (removed monitor, server stopping) is recorded as ended too
            with self.store.write() as conn:
                if result is None:
                    conn.execute("UPDATE monitor_runs SET ended = ?, stderr = ? WHERE id = ?",
                                 (iso(now()), "[proctor: run ended early: its monitor was removed or the server "
                                              "stopped]", run_id))
                else:
                    conn.execute("UPDATE monitor_runs SET ended = ?, exit_code = ?, timed_out = ?, truncated = ?, "
                                 "bytes = ?, stderr = ? WHERE id = ?",
                                 (iso(now()), result.exit_code, 1 if result.timed_out else 0,
                                  1 if result.truncated else 0, result.bytes, result.stderr, run_id))
        self.bump()

    # -- follow-ups --------------------------------------------------------------------------

    def _schedule_batch(self, job: str) -> None:
        if job in self._batch_timers:
            return
        loop = asyncio.get_event_loop()
        self._batch_timers[job] = loop.call_later(followups.GROUP_SECONDS, self._batch_due, job)

    def _batch_due(self, job: str) -> None:
        self._batch_timers.pop(job, None)
        with self.store.write() as conn:
            made = followups.batch(conn, job)
        if made:
            self.bump()
            asyncio.ensure_future(self._deliver(job))

    async def _deliver(self, job: str) -> None:
        """Resume a finished `proctor work` worker with the job's next follow-up."""
        if job in self._delivering:
            return
        self._delivering.add(job)
        try:
            from proctor.monitors import resume

            await asyncio.to_thread(resume.deliver_to_worker, self.root, job)
        except Exception:  # a failed delivery leaves the follow-up ready for the next chance
            pass
        finally:
            self._delivering.discard(job)
            self.bump()

    # -- reconcile ---------------------------------------------------------------------------

    def _ready_jobs(self) -> list[str]:
        """Jobs with a follow-up not yet handed over and a `proctor work` worker behind them."""
        rows_ = self.store.conn.execute(
            "SELECT DISTINCT f.job FROM followups f WHERE f.delivered IS NULL AND EXISTS "
            "(SELECT 1 FROM events e WHERE e.job = f.job AND e.kind = 'worker_attempt')").fetchall()
        return [r[0] for r in rows_ if r[0] not in self._delivering]

    def reap_soon(self) -> asyncio.Task:
        """Start one reap pass; the task's result is what it ended, [(job, reason)]. Await it
        to read after it (an API read does); a failure is logged and raised to whoever awaits."""
        task = asyncio.ensure_future(self._reap(self.config()["jobs.stale_after"]))
        task.add_done_callback(self._log_failure)
        return task

    def _log_failure(self, task: asyncio.Task) -> None:
        """A failed pass is logged once, not every tick while the cause lasts."""
        failure = None if task.cancelled() or task.exception() is None else str(task.exception())
        if failure is not None and failure != self._reap_failure:
            _log(f"proctor: reaping the jobs nobody holds failed: {failure}")
        self._reap_failure = failure

    async def _reap(self, stale_after: float) -> list[tuple[str, str]]:
        found = await asyncio.to_thread(_reap_pass, self.state_dir, stale_after)
        if found:
            self.reconcile_now()  # their monitors are deleted and their runs ended now
            self.bump()
        return found

    def reconcile_now(self) -> None:
        cfg = self.config()
        with self.store.write() as conn:
            gone = mstore.prune(conn, cfg)
            pending = followups.jobs_with_pending(conn)
        for monitor_id, _why in gone:
            self.removed(monitor_id)
        for job, _since in pending:
            self._schedule_batch(job)

    def _config_stamp(self):
        try:
            info = os.stat(os.path.join(self.root, config_mod.CONFIG_NAME))
            return (info.st_mtime_ns, info.st_size)
        except OSError:
            return None

    async def _reconcile_loop(self) -> None:
        stamp = self._config_stamp()
        while True:
            await asyncio.sleep(RECONCILE_SECONDS)
            if self._reaping is None or self._reaping.done():  # one pass at a time from the tick
                try:
                    self._reaping = self.reap_soon()
                except Exception:
                    pass
            version = self.store.conn.execute("PRAGMA data_version").fetchone()[0]
            config_now = self._config_stamp()  # a column made passive in proctor.toml counts too
            if version != self._data_version or config_now != stamp:
                self._data_version, stamp = version, config_now
                try:
                    self.reconcile_now()
                except Exception:
                    pass
                self.bump()
            for job in self._ready_jobs():
                asyncio.ensure_future(self._deliver(job))

    def bump(self) -> None:
        self.version += 1
        asyncio.ensure_future(self._notify())

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


def _reap_pass(state_dir: str, stale_after: float) -> list[tuple[str, str]]:
    """One pass of jobs/reap.py on a connection of its own (it runs in a worker thread; the
    loop's connection stays the loop's). `ended <id>: <reason>` goes to the server's log."""
    store = Store(state_dir)
    try:
        return reap.end_unheld(store, stale_after, _log)
    finally:
        store.close()


def _log(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
