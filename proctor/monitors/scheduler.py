"""The server's monitor loop: every monitor on its own schedule, at most four commands at once.

A monitor runs at once when it is created and when the server starts, then again `interval`
after its previous run ENDED (a monitor never overlaps itself). Runs wait for one of four
slots server-wide. A run's events are queued as they are read and stored in batches; a job's
pending events are grouped for 10 s into follow-ups (store/followups.py), after which the
version is bumped so the console and the waiters see them. A reconcile step, woken when the
store changes (its change_token) or the config file does, deletes monitors whose jobs left
an active column. Runs, groups and deliveries are driven by events and timers set for when
they are due; the one periodic tick, every two seconds, reads the store's change token to
learn whether another process changed the store, reaps the runs' adopted orphans, and once a
minute starts a retention pass (monitors/retention.py, `[monitors] keep`).

The loop never blocks and never dies:
- every store call the scheduler makes runs on one thread of its own, on a connection of its
  own (StoreThread), each bounded: the store's lock is waited for STORE_BUSY seconds at most,
  and the loop awaits a call STORE_WAIT at most; a store held by another process for minutes
  stalls no request and no run's reading;
- an exception in a monitor's loop (the store busy, a spawn failing with EMFILE, anything) is
  written to the server's log, recorded as a failed run (monitor_runs.error) when the store
  takes it (else once it does: OWED writes are retried on the tick), and the loop goes on
  after a backoff (1 s, doubling, at most the interval); the tick's steps likewise;
- ending processes, which waits, runs in worker threads.

No survivor (monitors/run.py has the means): a run's pid and tag are recorded when it starts,
with the machine they belong to; at start, before anything runs, every process of a run an
earlier server on this machine left open (it was killed) is ended and the run closed with a
note; the server is a child subreaper, so a run's orphans come back to it, are reaped when
they end and ended when it stops.

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
import collections
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from proctor import config as config_mod
from proctor import process
from proctor.jobs import reap
from proctor.monitors import retention, run, store as mstore
from proctor.paths import machine_id
from proctor.store import followups, open_store
from proctor.store import monitors as mrows
from proctor.timeutil import iso, now, parse_iso

CONCURRENCY = 4
RECONCILE_SECONDS = 2.0
STORE_BUSY = 5.0  # seconds a store call waits for another writer
STORE_WAIT = 2 * STORE_BUSY + 5  # seconds the loop awaits one store call
STARTUP_WAIT = 20.0  # seconds `start` waits for the monitors to be under way; the rest goes on after
COALESCE = 0.1  # seconds events gather before they are stored together
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0
BATCH_RETRY = 5.0
RETENTION_SECONDS = 60.0
CHECK_SECONDS = 30.0  # every monitor in the store has its loop: looked at this often
MAX_QUEUED = 200_000  # events waiting for the store; past it the oldest go (logged)
MAX_OWED = 1_000  # store writes that failed, kept to be retried
EARLY = "[proctor: run ended early: its monitor was removed or the server stopped]"
LEFT_OPEN = (
    "[proctor: run left open by a server that ended without closing it (killed?); its processes "
    "were ended when the next server started]"
)


class StoreThread:
    """The scheduler's store calls, one at a time on a thread of their own, with a connection
    of their own (opened there; SQLite connections belong to a thread), each bounded."""

    def __init__(self, state_dir: str, busy: float = STORE_BUSY, root: str | None = None) -> None:
        self.state_dir, self.busy, self.root = state_dir, busy, root
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="proctor-monitors-store")
        self.store = None

    def _store(self):
        if self.store is None:
            self.store = open_store(self.state_dir, busy_seconds=self.busy, root=self.root)
        return self.store

    def _write(self, fn, args):
        try:
            with self._store().write() as conn:
                return fn(conn, *args)
        finally:
            self._drop_if_broken()

    def _read(self, fn, args):
        try:
            with self._store().read() as conn:
                return fn(conn, *args)
        finally:
            self._drop_if_broken()

    def _drop_if_broken(self) -> None:
        """A PostgreSQL connection that was lost is opened anew on the next call."""
        if self.store is not None and self.store.broken():
            self.store.close()
            self.store = None

    async def lead(self, role: str) -> bool:
        """Whether this server holds the repository's `role` (store.lead), asked on this thread."""
        return await self._call(lambda _fn, _args: self._lead(role), None, ())

    def _lead(self, role: str) -> bool:
        try:
            return self._store().lead(role)
        finally:
            self._drop_if_broken()

    async def write(self, fn: Callable, *args):
        return await self._call(self._write, fn, args)

    async def read(self, fn: Callable, *args):
        return await self._call(self._read, fn, args)

    async def change_token(self):
        """The store's change token (store.change_token), read on this thread."""
        return await self._call(lambda _fn, _args: self._store().change_token(), None, ())

    async def _call(self, method, fn, args):
        future = asyncio.get_running_loop().run_in_executor(self.pool, method, fn, args)
        return await asyncio.wait_for(future, STORE_WAIT)  # a call not yet begun is dropped then

    def close(self) -> None:
        def shut() -> None:
            if self.store is not None:
                self.store.close()
                self.store = None

        self.pool.submit(shut)
        self.pool.shutdown(wait=False)


class EventQueue:
    """Events read by the runs, stored together every COALESCE seconds (or at once for `flush`)
    by one task; a write that fails is retried after a backoff, the events kept meanwhile."""

    def __init__(self, db: StoreThread, written: Callable[[set[str]], None]) -> None:
        self.db, self.written = db, written
        self.rows: list[tuple] = []
        self.put_count = self.done_count = 0
        self.wake = asyncio.Event()
        self.hurry = asyncio.Event()
        self.progress = asyncio.Condition()
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._loop())

    def put(self, rows: list[tuple]) -> None:
        self.rows.extend(rows)
        self.put_count += len(rows)
        if len(self.rows) > MAX_QUEUED:
            lost = len(self.rows) - MAX_QUEUED
            del self.rows[:lost]
            self.done_count += lost
            _log(f"proctor: {lost} monitor events dropped: the store has not taken them and {MAX_QUEUED} wait")
        self.wake.set()

    async def flush(self, timeout: float = STORE_WAIT) -> None:
        """Until every event put so far is stored; TimeoutError after `timeout`."""
        target = self.put_count
        if self.done_count >= target:
            return
        self.hurry.set()
        self.wake.set()

        async def reached() -> None:
            async with self.progress:
                await self.progress.wait_for(lambda: self.done_count >= target)

        await asyncio.wait_for(reached(), timeout)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait([self.task], timeout=5)

    async def _loop(self) -> None:
        failures = 0
        while True:
            await self.wake.wait()
            if not self.hurry.is_set():
                try:
                    await asyncio.wait_for(self.hurry.wait(), COALESCE)
                except asyncio.TimeoutError:
                    pass
            self.wake.clear()
            self.hurry.clear()
            taken, self.rows = self.rows, []
            if not taken:
                continue
            try:
                await self.db.write(_insert_events, taken)
            except asyncio.CancelledError:
                self.rows[:0] = taken
                raise
            except Exception as exc:  # kept, and tried again
                self.rows[:0] = taken
                failures += 1
                delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (failures - 1))
                _log(f"proctor: storing {len(taken)} monitor events failed: {_why(exc)}; trying again in {delay:g} s")
                await asyncio.sleep(delay)
                self.wake.set()
                continue
            failures = 0
            self.done_count += len(taken)
            async with self.progress:
                self.progress.notify_all()
            try:
                self.written({row[2] for row in taken})
            except Exception as exc:  # noqa: BLE001 - a callback's failure is no reason to stop storing
                _log(f"proctor: after storing monitor events: {_why(exc)}")


class Scheduler:
    def __init__(self, state_dir: str, root: str, repo_root: str) -> None:
        self.state_dir = state_dir
        self.root = root
        self.repo_root = repo_root
        self.db = StoreThread(state_dir, root=root)
        self.events = EventQueue(self.db, self._events_written)
        self.slots = asyncio.Semaphore(CONCURRENCY)
        self.tasks: dict[int, asyncio.Task] = {}
        self.changed = asyncio.Condition()
        self.version = 0  # bumped on every change a console or a waiter should see
        self.running_now = 0
        self.drift: collections.deque = collections.deque(maxlen=10_000)  # how late runs started
        self.roots: set[int] = set()  # the pids of the commands in flight (not orphans: not ours to reap)
        self._change_token = None
        self.leading: bool | None = None  # set by _spawn_missing, which start runs before any monitor
        self._took_lead = False  # the tick starts the monitors of a lead taken over from another server
        self._batch_timers: dict[str, asyncio.TimerHandle] = {}
        self._batching: set[str] = set()
        self._removed: set[int] = set()  # never started again by this server
        self._refused: set[int] = set()  # live rows `monitor add` cannot have written, said once in the log
        self._spawned: dict[int, float] = {}  # monitor id -> when its loop started (loop time)
        self._owed: collections.deque = collections.deque()  # (what, fn, args): writes to retry
        self._starting: asyncio.Task | None = None
        self._reconciler: asyncio.Task | None = None
        self._reaping: asyncio.Task | None = None  # the tick's pass, while it runs
        self._retaining: asyncio.Task | None = None
        self._reap_failure: str | None = None  # the last pass's failure, logged once
        self._failures: dict[str, str] = {}  # the tick's steps: the last failure of each, logged once
        self._config: tuple[object, config_mod.Config] | None = None  # (file stamp, config)
        self._background: set[asyncio.Task] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Under way within STARTUP_WAIT seconds; a store that stays locked longer only delays
        the monitors (the rest of the start goes on in the background)."""
        process.set_subreaper(True)  # a run's orphans come back here, not to init
        self.events.start()
        self._starting = asyncio.ensure_future(self._startup())
        await asyncio.wait([self._starting], timeout=STARTUP_WAIT)

    async def _startup(self) -> None:
        failures = 0
        while True:  # nothing runs before what an earlier server left is ended
            try:
                await self.db.write(_own_jobs, self.root, "running", None)
                await self._end_left_over()
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (failures - 1))
                _log(f"proctor: starting the monitors: {_why(exc)}; trying again in {delay:g} s")
                await asyncio.sleep(delay)
        try:
            await self.reap_soon()  # no monitor of a job nobody holds starts
        except Exception:  # logged; the tick tries again
            pass
        await self._step("reconcile", self.reconcile)
        self._reconciler = asyncio.ensure_future(self._reconcile_loop())
        await self._step("start monitors", self._spawn_missing)
        self._retain_soon()

    async def _end_left_over(self) -> None:
        """End every process of the runs an earlier server left open, and close those runs."""
        left = await self.db.read(mrows.open_runs, machine_id())
        for run_id, pid, tag, started in left:
            try:
                at = parse_iso(started)
            except (TypeError, ValueError):
                at = None
            await asyncio.to_thread(run.sweep_left_over, pid, tag, at)
            _log(f"proctor: run {run_id} was left open by an earlier server; its processes were ended")
        if left:
            stamp = iso(now())
            await self.db.write(mrows.close_left_open, [r[0] for r in left], stamp, LEFT_OPEN)

    async def stop(self) -> None:
        """Every run ended whole (its processes first, its record after), what came back here
        ended, the last events and records stored: each step bounded, so a store held by
        another process delays the stop by seconds, and never a process's end."""
        for task in (self._starting, self._reconciler):
            if task is not None and not task.done():
                task.cancel()
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()  # each run is ended whole, and its record closed
        loop = asyncio.get_running_loop()
        until = loop.time() + 15
        while self.running_now and loop.time() < until:  # the processes first: nothing waits on the store
            await asyncio.sleep(0.05)
        try:  # what escaped every run's sweep but came back here
            await asyncio.wait_for(asyncio.to_thread(run.end_orphans, set(self.roots)), 10)
            run.reap_orphans(self.roots)
        except Exception as exc:
            _log(f"proctor: ending the monitors' orphans: {_why(exc)}")
        if tasks:
            await asyncio.wait(tasks, timeout=10)  # their records
        for task in (self._reaping, self._retaining):
            if task is not None and not task.done():
                await asyncio.wait([task], timeout=5)
        for handle in self._batch_timers.values():
            handle.cancel()
        try:
            await self.events.flush(5)
        except Exception as exc:
            _log(f"proctor: storing the last monitor events: {_why(exc)}")
        await self.events.stop()
        await self._step("settle", lambda: asyncio.wait_for(self._settle(), 5))
        await self._step(
            "stop", lambda: asyncio.wait_for(self.db.write(_own_jobs, self.root, "no_return", "the server stopped"), 5)
        )
        self.db.close()

    def config(self) -> config_mod.Config:
        """The repository's proctor.toml, read again only when the file changed."""
        stamp = self._config_stamp()
        if self._config is None or self._config[0] != stamp:
            self._config = (stamp, config_mod.load(self.root))
        return self._config[1]

    # -- monitors ----------------------------------------------------------------------------

    def add(self, monitor: dict) -> None:
        self._removed.discard(monitor["id"])
        self._spawn(monitor)
        self.bump()

    def removed(self, monitor_id: int) -> None:
        self._removed.add(monitor_id)
        self._spawned.pop(monitor_id, None)
        task = self.tasks.pop(monitor_id, None)
        if task is not None:
            task.cancel()  # the run in flight is ended whole
        self.bump()

    def _spawn(self, monitor: dict) -> None:
        if not self.leading:
            return  # the leading server runs it (its change token or next check finds it)
        if monitor["id"] not in self.tasks and monitor["id"] not in self._removed:
            odd = _not_added_by_proctor(monitor)
            if odd:  # a row written into the store by hand skipped every check of `monitor add`
                if monitor["id"] not in self._refused:
                    self._refused.add(monitor["id"])
                    _log(f"proctor: monitor {monitor['id']} of {monitor['job']} is not run: {odd}")
                return
            self.tasks[monitor["id"]] = asyncio.ensure_future(self._monitor_loop(monitor))
            self._spawned[monitor["id"]] = asyncio.get_running_loop().time()

    async def _check_lead(self) -> bool:
        """Whether this server runs the monitors (store.lead); a server that lost the lead (its
        connection, and with it the lock, gone) ends its monitors' loops at once, so two servers
        never run one monitor for longer than a tick."""
        try:
            leading = await self.db.lead("monitors")
        except Exception:
            leading = False  # a store it cannot ask: it cannot know it leads
        if leading != self.leading:
            was, self.leading = self.leading, leading
            self._took_lead = leading and was is False
            if not leading:
                for monitor_id in list(self.tasks):
                    self._spawned.pop(monitor_id, None)
                    self.tasks.pop(monitor_id).cancel()  # not `removed`: it runs again if this server leads again
                _log(
                    "proctor: another server on this repository's store runs its monitors; this one stands by "
                    "and takes over when that one stops" + (" (it had led until now)" if was else "")
                )
        return leading

    async def _spawn_missing(self) -> None:
        """Every live monitor has its loop (one that died of a bug included); a loop whose
        monitor is deleted in the store goes. On a store several machines share, only the server
        that leads runs monitors; the others ask again on every check and take over when the
        leader's connection ends."""
        if not await self._check_lead():
            return
        asked = asyncio.get_running_loop().time()
        live = {m["id"]: m for m in await self.db.read(mstore.live)}
        for monitor in live.values():
            self._spawn(monitor)
        for monitor_id in list(self.tasks):
            if monitor_id not in live and self._spawned.get(monitor_id, asked) < asked:
                self.removed(monitor_id)

    async def _monitor_loop(self, monitor: dict) -> None:
        monitor_id = monitor["id"]
        me = asyncio.current_task()
        due = time.monotonic()
        failures = 0
        try:
            while True:
                try:
                    await self._run(monitor, due)
                    failures, delay = 0, monitor["interval"]
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # logged, recorded, and the loop goes on
                    failures += 1
                    delay = min(monitor["interval"], BACKOFF_MAX, BACKOFF_FIRST * 2 ** (failures - 1))
                    _log(f"proctor: monitor {monitor_id}: {_why(exc)}; its next run in {delay:g} s")
                due = time.monotonic() + delay
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            pass
        finally:
            if self.tasks.get(monitor_id) is me:
                self.tasks.pop(monitor_id, None)

    async def _run(self, monitor: dict, due: float) -> None:
        """One run: its record opened, a slot taken for as long as its command lives (started,
        waited for, ended whole), then its events stored and its record closed."""
        monitor_id, job = monitor["id"], monitor["job"]
        timeout = min(monitor["interval"], run.RUN_TIMEOUT_CAP)
        tag = run.new_tag()
        opening = asyncio.ensure_future(self.db.write(_open_run, monitor_id, iso(now()), tag, timeout))
        try:
            run_id = await run.finish_anyway(opening)
        except asyncio.CancelledError:  # removed meanwhile: a run opened is closed at once
            if not opening.cancelled() and opening.exception() is None:
                self._later(
                    f"closing run {opening.result()}",
                    _close_run,
                    (iso(now()), None, 0, 0, 0, 0, None, EARLY, opening.result()),
                )
            raise
        except Exception as exc:
            self._owe("a failed run", _failed_run, monitor_id, iso(now()), timeout, f"not run: {_why(exc)}")
            raise

        def emit(batch: list[tuple[str, bool]]) -> None:
            stamp = iso(now())
            self.events.put([(monitor_id, run_id, job, stamp, line, 1 if cut else 0) for line, cut in batch])

        # a vanished cwd falls back; so does one that now resolves elsewhere (a directory swapped
        # for a symlink after `monitor add` checked it: the stored path is the resolved one)
        stored = monitor["cwd"]
        cwd = stored if os.path.isdir(stored) and os.path.realpath(stored) == stored else self.repo_root
        runner = run.Run(monitor["command"], cwd, timeout, emit, run.monitor_env(os.environ, monitor_id, job, tag), tag)
        cancelled, error, result = False, None, runner.result
        try:
            async with self.slots:
                self.drift.append(max(0.0, time.monotonic() - due))
                try:
                    pid = runner.start()
                except Exception as exc:  # EMFILE, ENOMEM, a cwd gone meanwhile: a failed run
                    error = f"could not start the command: {getattr(exc, 'strerror', None) or _why(exc)}"
                else:
                    result = await self._watch(runner, run_id, monitor_id, pid)
        except asyncio.CancelledError:  # while waiting for a slot, or while the run ended
            cancelled = True
        except Exception as exc:  # anything else on the way: the run is failed, and ended below
            error = f"the run failed: {_why(exc)}"
        if runner.proc is not None and not runner.ended:  # it did not get to its end: ended whole now
            try:
                result = await run.finish_anyway(runner.end())
            except asyncio.CancelledError:
                cancelled, result = True, runner.result
        if cancelled or runner.cancelled:
            cancelled, error = True, EARLY
            result.stderr = f"{result.stderr}\n{EARLY}" if result.stderr else EARLY
        try:
            await run.finish_anyway(self._finish_run(run_id, result, error))
        except asyncio.CancelledError:
            cancelled = True
        self.bump()
        if cancelled:
            raise asyncio.CancelledError
        if error is not None:
            raise RuntimeError(error)

    async def _watch(self, runner: run.Run, run_id: int, monitor_id: int, pid: int) -> run.RunResult:
        """The command's life, from its start to its end whole (cancelled or not: `runner.cancelled`
        says which)."""
        self.roots.add(pid)
        self._later(f"recording run {run_id}'s start", _started, run_id, monitor_id, pid, iso(now()))
        self.running_now += 1
        self.bump()
        try:
            try:
                await runner.wait()
            except asyncio.CancelledError:
                runner.cancelled = True
            try:
                return await run.finish_anyway(runner.end())
            except asyncio.CancelledError:
                runner.cancelled = True
                return runner.result
        finally:
            self.roots.discard(pid)
            self.running_now -= 1

    async def _finish_run(self, run_id: int, result: run.RunResult, error: str | None) -> None:
        try:
            await self.events.flush()  # its events are stored before its end
        except Exception as exc:  # they go when the store takes them
            _log(f"proctor: run {run_id}'s events are not stored yet: {_why(exc)}")
        await self._close_run(run_id, result, error)

    async def _close_run(self, run_id: int, result: run.RunResult, error: str | None) -> None:
        values = (
            iso(now()),
            result.exit_code,
            1 if result.timed_out else 0,
            1 if result.truncated else 0,
            result.bytes,
            result.lines,
            result.stderr,
            error,
            run_id,
        )
        try:
            await self.db.write(_close_run, values)
        except Exception as exc:
            self._owe(f"closing run {run_id}", _close_run, values)
            _log(f"proctor: closing run {run_id}: {_why(exc)}; tried again on the next tick")

    # -- store writes that could not be made now ---------------------------------------------

    def _owe(self, what: str, fn: Callable, *args) -> None:
        if len(self._owed) >= MAX_OWED:
            dropped = self._owed.popleft()
            _log(f"proctor: {dropped[0]}: given up ({MAX_OWED} writes wait for the store)")
        self._owed.append((what, fn, args))

    async def _settle(self) -> None:
        while self._owed:
            what, fn, args = self._owed[0]
            await self.db.write(fn, *args)
            self._owed.popleft()

    def _later(self, what: str, fn: Callable, *args) -> None:
        """A store write nobody waits for; owed when it fails."""

        async def write() -> None:
            try:
                await self.db.write(fn, *args)
            except Exception:
                self._owe(what, fn, *args)

        task = asyncio.ensure_future(write())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- follow-ups --------------------------------------------------------------------------

    def _events_written(self, jobs: set[str]) -> None:
        for job in jobs:
            self._schedule_batch(job)
        self.bump()

    def _schedule_batch(self, job: str, delay: float = followups.GROUP_SECONDS) -> None:
        if job in self._batch_timers:
            return
        loop = asyncio.get_running_loop()
        self._batch_timers[job] = loop.call_later(delay, self._batch_due, job)

    def _batch_due(self, job: str) -> None:
        self._batch_timers.pop(job, None)
        if job in self._batching:
            self._schedule_batch(job, 1.0)
            return
        self._batching.add(job)
        task = asyncio.ensure_future(self._batch(job))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _batch(self, job: str) -> None:
        try:
            waiting = self.config()["monitors.max_waiting"]
            made = await self.db.write(followups.batch, job, waiting)
        except Exception as exc:
            _log(f"proctor: grouping job {job}'s monitor events: {_why(exc)}; trying again in {BATCH_RETRY:g} s")
            self._schedule_batch(job, BATCH_RETRY)
            return
        finally:
            self._batching.discard(job)
        if made:
            self.bump()  # the console and `proctor monitor wait` see the new follow-up

    # -- reconcile ---------------------------------------------------------------------------

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
        found = await asyncio.to_thread(_reap_pass, self.state_dir, stale_after, self.root)
        if found:
            await self.reconcile()  # their monitors are deleted and their runs ended now
            self.bump()
        return found

    async def reconcile(self) -> None:
        cfg = self.config()
        # a look first, and a write only when a monitor is to go: a write is a change every
        # server (and every waiter) sees, this one's own next look included
        doomed, pending = await self.db.read(_reconcile_look, cfg)
        gone = []
        if doomed:
            gone, pending = await self.db.write(_reconcile, cfg)
        for monitor_id, _why_gone in gone:
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
        loop = asyncio.get_running_loop()
        checked = retained = loop.time()
        while True:
            await asyncio.sleep(RECONCILE_SECONDS)
            if self._reaping is None or self._reaping.done():  # one pass at a time from the tick
                try:
                    self._reaping = self.reap_soon()
                except Exception as exc:
                    self._failed("reap", exc)
            try:
                run.reap_orphans(self.roots)
            except Exception as exc:
                self._failed("orphans", exc)
            if self._owed:
                await self._step("settle", self._settle)

            async def look() -> None:
                nonlocal stamp
                token = await self.db.change_token()
                config_now = self._config_stamp()  # a column made passive in proctor.toml counts too
                if token != self._change_token or config_now != stamp:
                    await self.reconcile()
                    self._change_token, stamp = token, config_now
                    self.bump()

            await self._step("reconcile", look)
            if await self._check_lead() and self._took_lead:
                self._took_lead = False
                await self._step("start monitors", self._spawn_missing)  # a lead just taken over
            if loop.time() - checked >= CHECK_SECONDS:
                checked = loop.time()
                await self._step("start monitors", self._spawn_missing)
            if loop.time() - retained >= RETENTION_SECONDS:
                retained = loop.time()
                self._retain_soon()

    async def _step(self, name: str, step: Callable) -> None:
        """One step of the start or the tick: a failure is logged (once while it lasts), never raised."""
        try:
            await step()
            self._failures.pop(name, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(name, exc)

    def _failed(self, name: str, exc: BaseException) -> None:
        why = _why(exc)
        if self._failures.get(name) != why:
            _log(f"proctor: the monitors' {name} step failed: {why}; tried again on the next tick")
        self._failures[name] = why

    def _retain_soon(self) -> None:
        if self._retaining is not None and not self._retaining.done():
            return

        async def retain() -> None:
            try:
                deleted = await asyncio.to_thread(
                    _retention_pass, self.state_dir, self.config()["monitors.keep"], self.root
                )
                self._failures.pop("retention", None)
                if any(deleted.values()):
                    self.bump()
            except Exception as exc:
                self._failed("retention", exc)

        self._retaining = asyncio.ensure_future(retain())

    def bump(self) -> None:
        self.version += 1
        task = asyncio.ensure_future(self._notify())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


# -- store calls (on the StoreThread) ----------------------------------------------------------


def _own_jobs(conn, root: str, state: str, end_reason: str | None) -> None:
    """The server's maintenance jobs, held by the server (HOLDER server in every listing),
    never ended by the rules that end unheld session jobs."""
    from proctor.store import rows

    at = iso(now())
    own = (
        ("proctor-server", None, "the server's own work: monitors, follow-ups, the console"),
        ("proctor-server/monitors", "proctor-server", "run every monitor on its schedule, four at once"),
        ("proctor-server/followups", "proctor-server", "group monitor events and wake idle agents"),
    )
    for job_id, parent, criteria in own:
        existing = rows.get(conn, job_id)
        job: dict = {
            "schema_version": 1,
            "id": job_id,
            "parent": parent,
            "criteria": criteria,
            "write_paths": [],
            "deny_paths": [],
            "read_paths": [],
            "depends_on": [],
            "model": None,
            "check": None,
            "goals": [],
            "read_only": True,
            "timeout": None,
            "deadline": None,
            "actor": "server",
            "holder": "server",
            "declared_in": root,
            "created": existing["created"] if existing else at,
            "updated": at,
            "releases": [],
            "unattributed": [],
            "entries": [],
            "checkout_root": root,
            "base": None,
            "end_reason": end_reason,
            "state": state,
            "write_proof": None,
            "checkpoint": None,
        }
        rows.put(conn, job, "proctor-server", 0 if parent is None else 1)


def _open_run(conn, monitor_id: int, started: str, tag: str, timeout: float) -> int:
    return mrows.open_run(conn, monitor_id, started, tag, timeout, machine_id())


_started = mrows.run_started  # the command started (the record was opened before it had a slot)
_close_run = mrows.close_run
_insert_events = mrows.insert_events


def _failed_run(conn, monitor_id: int, started: str, timeout: float, error: str) -> None:
    mrows.failed_run(conn, monitor_id, started, iso(now()), timeout, error, machine_id())


def _reconcile_look(conn, cfg) -> tuple[list, list]:
    return mstore.prunable(conn, cfg), followups.jobs_with_pending(conn)


def _reconcile(conn, cfg) -> tuple[list, list]:
    return mstore.prune(conn, cfg), followups.jobs_with_pending(conn)


def _reap_pass(state_dir: str, stale_after: float, root: str | None = None) -> list[tuple[str, str]]:
    """One pass of jobs/reap.py on a connection of its own (it runs in a worker thread; the
    loop's connection stays the loop's). `ended <id>: <reason>` goes to the server's log."""
    store = open_store(state_dir, root=root)
    try:
        return reap.end_unheld(store, stale_after, _log)
    finally:
        store.close()


def _retention_pass(state_dir: str, keep: float, root: str | None = None) -> dict[str, int]:
    store = open_store(state_dir, busy_seconds=STORE_BUSY, root=root)
    try:
        return retention.prune(store, keep)
    finally:
        store.close()


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (OSError, RuntimeError)) or "store" in text else f"{type(exc).__name__}: {text}"


def _log(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a full disk or a closed log costs the line, never the loop
        pass


def _not_added_by_proctor(monitor: dict) -> str | None:
    """Why a live monitor row cannot have come from `monitor add` (its acknowledgement, its
    interval's range), or None."""
    if not monitor.get("acknowledged"):
        return "it carries no --allow-unsandboxed acknowledgement"
    interval = monitor.get("interval")
    if not isinstance(interval, (int, float)) or not mstore.MIN_INTERVAL <= interval <= mstore.MAX_INTERVAL:
        return f"its interval {interval!r} is outside 10s to 24h"
    if not isinstance(monitor.get("cwd"), str) or not os.path.isabs(monitor["cwd"]):
        return f"its directory {monitor.get('cwd')!r} is not an absolute path"
    return None
