"""One run of a monitor command: its limits, its containment, its end.

Limits. Each stdout line is an event; a line is cut at LINE_CAP (16 KiB) with LINE_MARKER, a
run's events at RUN_CAP (1 MiB of collected output) with RUN_MARKER or at RUN_LINES lines with
LINES_MARKER, whichever comes first. A cut falls between two UTF-8 characters, never inside
one (bytes that are no UTF-8 are shown as U+FFFD, as they were in the input). Once a run's
events are collected its stdout is no longer split: what follows is discarded a pipe-full at
a time (spliced to /dev/null, DISCARD_PAUSE apart), so a command that never stops talking
costs neither the server's CPU nor its loop, and the run still ends at its timeout. Stderr is
drained the same way and kept as the run's diagnostic: its first and last STDERR_KEEP / 2
bytes, with a marker for what was left out between them. The run is timed out at the smaller
of its interval and 60 s.

Reading happens on the server's event loop, without blocking it: the pipes are non-blocking
and watched by the loop (add_reader), the command's exit by a pidfd. Ending the processes,
which waits, runs in a worker thread.

Containment, as the worker runner has it (workers/runner.py, process.py): the command runs
in a session of its own; in a cgroup v2 of its own where one can be made (joined between fork
and exec, so nothing of it runs outside it); with the parent-death signal (SIGKILL when the
server's loop thread dies, SIGKILL of the server included); and with a fresh tag in its
environment (PROCTOR_MONITOR_TAG) that every descendant inherits, setsid'd and double-forked
ones included. The server is a child subreaper (scheduler.py), so orphans of a run reparent
to it rather than to init. A run is started by `process.spawn` and ended, whatever ended it
(its own exit, its timeout, its monitor removed, the server stopping), by `process.sweep`, as
a worker is: its process group (SIGTERM, TERM_GRACE, SIGKILL), its process tree by parent
links, every process carrying its tag, and its cgroup (cgroup.kill): nothing of a run
outlives it. `sweep_left_over` does the same from a later
server, given the pid, tag and start time recorded in monitor_runs, for the runs of a server
that was killed before it could.

Environment. A command gets the server's environment without what makes a process act for a
job (BAGGAGE, PROCTOR_NONCE, PROCTOR_LEASE, PROCTOR_WORKER_TAG) or find the server
(PROCTOR_SERVER_DIR), plus PROCTOR_MONITOR=<id>, PROCTOR_MONITOR_JOB=<job> and its tag.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import secrets
import subprocess
import time
from typing import Callable, Mapping

from proctor import process
from proctor.store.followups import utf8_complete, utf8_start

LINE_CAP = 16 << 10
RUN_CAP = 1 << 20
RUN_LINES = 10_000
STDERR_KEEP = 8 << 10  # the first and the last half of this are kept
RUN_TIMEOUT_CAP = 60.0
DRAIN_AFTER_EXIT = 1.0
TERM_GRACE = 1.0  # seconds between SIGTERM and SIGKILL: why 1.0, in process.py's table
READ_SIZE = 1 << 20
PIPE_SIZE = 1 << 20
DISCARD_PAUSE = 0.05  # seconds between two discards of a full pipe
DISCARD_PER_PASS = 4 << 20  # bytes discarded at most per pass: about 80 MB/s at most
LINE_MARKER = " [proctor: line cut at 16 KiB]"
RUN_MARKER = "[proctor: output past 1 MiB of this run dropped]"
LINES_MARKER = f"[proctor: lines past {RUN_LINES:,} of this run dropped]"
TAG = "PROCTOR_MONITOR_TAG"
CGROUP_PREFIX = "proctor-monitor-"
WITHHELD = ("BAGGAGE", "PROCTOR_NONCE", "PROCTOR_LEASE", "PROCTOR_WORKER_TAG", "PROCTOR_SERVER_DIR", TAG)
_F_SETPIPE_SZ = 1031


class RunResult:
    __slots__ = (
        "exit_code",
        "timed_out",
        "truncated",
        "capped",
        "bytes",
        "lines",
        "stderr",
        "pid",
        "tag",
        "cgroup",
        "started",
    )

    def __init__(self, tag: str) -> None:
        self.exit_code: int | None = None
        self.timed_out = False
        self.truncated = False  # a line cut, or the run's output capped
        self.capped = False  # the run's output capped (RUN_CAP or RUN_LINES)
        self.bytes = 0  # collected: the bytes of the lines kept, newlines included
        self.lines = 0  # lines kept as events (markers not counted)
        self.stderr = ""
        self.pid: int | None = None
        self.tag = tag
        self.cgroup: str | None = None
        self.started = time.time()


def new_tag() -> str:
    return secrets.token_hex(12)


def monitor_env(base: Mapping[str, str], monitor_id: int, job: str, tag: str) -> dict:
    env = {k: v for k, v in base.items() if k not in WITHHELD}
    env.update({"PROCTOR_MONITOR": str(monitor_id), "PROCTOR_MONITOR_JOB": job, TAG: tag})
    return env


# -- stdout into events ------------------------------------------------------------------------


class Lines:
    """A run's stdout, a read at a time, into events (text, truncated) within the limits.
    Once the run's events are collected (`full`), nothing more is split: the first byte that
    comes after adds the run's marker, once."""

    def __init__(self, result: RunResult) -> None:
        self.result = result
        self.held = bytearray()  # the start of a line still arriving (at most LINE_CAP)
        self.dropping = False  # inside a line already cut at LINE_CAP
        self.full = False  # the run's events are collected: the rest is discarded
        self.marker: str | None = None  # the marker owed once more output comes

    def feed(self, chunk: bytes) -> list[tuple[str, bool]]:
        out: list[tuple[str, bool]] = []
        if self.full:
            if chunk:
                self.more(out)
            return out
        start = 0
        size = len(chunk)
        while start < size and not self.full:
            cut = chunk.find(b"\n", start)
            if cut == -1:
                if not self.dropping:
                    room = LINE_CAP - len(self.held)
                    self.held += chunk[start : start + room]
                    if size - start > room:  # the line passed the cap: cut, the rest of it dropped
                        line = bytes(self.held)
                        self.held.clear()
                        self.dropping = True
                        self._event(line, True, out)
                start = size
                break
            if self.dropping:
                self.dropping = False
            elif self.held:
                self.held += chunk[start:cut]
                line = bytes(self.held)
                self.held.clear()
                self._event(line[:LINE_CAP], len(line) > LINE_CAP, out)
            else:
                self._event(chunk[start : min(cut, start + LINE_CAP)], cut - start > LINE_CAP, out)
            start = cut + 1
        if self.full and start < size:
            self.more(out)
        return out

    def end(self) -> list[tuple[str, bool]]:
        """The stream ended: a last line without its newline still counts."""
        out: list[tuple[str, bool]] = []
        if self.held and not self.full and not self.dropping:
            self._event(bytes(self.held), False, out)
        self.held.clear()
        return out

    def more(self, out: list) -> None:
        """Output came past the run's cap: its marker, once."""
        if self.marker is not None:
            self.result.capped = self.result.truncated = True
            out.append((self.marker, True))
            self.marker = None

    def _event(self, raw: bytes, cut: bool, out: list) -> None:
        result = self.result
        result.bytes += len(raw) + 1
        result.lines += 1
        if cut:
            raw = raw[: utf8_complete(raw)]  # no character cut in two
        text = raw.decode("utf-8", "replace")
        if text.endswith("\r"):
            text = text.rstrip("\r")
        if cut:
            result.truncated = True
            text += LINE_MARKER
        out.append((text, cut))
        if result.bytes >= RUN_CAP or result.lines >= RUN_LINES:
            self.full = True
            self.held.clear()
            self.marker = RUN_MARKER if result.bytes >= RUN_CAP else LINES_MARKER


class _Stderr:
    """The head and the tail of a run's stderr, STDERR_KEEP bytes in all."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.seen = 0

    def add(self, chunk: bytes) -> None:
        half = STDERR_KEEP // 2
        self.seen += len(chunk)
        room = half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk[-half:]
            if len(self.tail) > 2 * half:
                del self.tail[:-half]

    def text(self) -> str:
        head, tail = bytes(self.head), bytes(self.tail[-(STDERR_KEEP // 2) :])
        left_out = self.seen - len(head) - len(tail)
        if left_out <= 0:
            return (head + tail).decode("utf-8", "replace")
        head, tail = head[: utf8_complete(head)], tail[utf8_start(tail, 0) :]  # no character cut in two
        return (
            head.decode("utf-8", "replace")
            + f"\n[proctor: {left_out:,} bytes of stderr left out]\n"
            + tail.decode("utf-8", "replace")
        )


# -- the run -----------------------------------------------------------------------------------


class Run:
    """One monitor command in flight. `start()` (on the loop thread: the parent-death signal
    belongs to the thread that forks) then `await wait()`; `await end()` whatever happened."""

    def __init__(
        self,
        command: str,
        cwd: str,
        timeout: float,
        emit: Callable[[list[tuple[str, bool]]], None],
        env: dict,
        tag: str,
    ) -> None:
        self.command, self.cwd, self.timeout, self.emit, self.env = command, cwd, timeout, emit, env
        self.result = RunResult(tag)
        self.lines = Lines(self.result)
        self.stderr = _Stderr()
        self.proc: subprocess.Popen | None = None
        self.group: process.Cgroup | None = None
        self.tree: process.Tree | None = None
        self.loop = asyncio.get_running_loop()
        self.open: dict[int, str] = {}  # fd -> "out" | "err"
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()  # both pipes at their end
        self.exit_fd: int | None = None
        self.timers: dict[object, asyncio.TimerHandle] = {}  # fd (or "exit") -> its next pass
        self.ended = False
        self.cancelled = False  # ended early: its monitor removed, or the server stopping

    def start(self) -> int:
        """Start the command; OSError (EMFILE, ENOENT, ...) when it cannot start."""
        tag = self.result.tag
        try:
            proc, group = process.spawn(
                ["/bin/sh", "-c", self.command], self.cwd, self.env, (TAG, tag), CGROUP_PREFIX + tag
            )
        except subprocess.SubprocessError:
            raise OSError(errno.ECHILD, "the command could not be started") from None
        self.proc, self.group = proc, group
        self.result.pid = proc.pid
        self.result.cgroup = group.path if group else None
        self.tree = process.Tree(proc.pid)
        for stream, kind in ((proc.stdout, "out"), (proc.stderr, "err")):
            assert stream is not None  # started with stdout=PIPE, stderr=PIPE
            fd = stream.fileno()
            os.set_blocking(fd, False)
            if kind == "out":
                try:
                    fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
                except OSError:
                    pass
            self.open[fd] = kind
            self.loop.add_reader(fd, self._readable, fd)
        try:
            self.exit_fd = os.pidfd_open(proc.pid)
            self.loop.add_reader(self.exit_fd, self._exit_seen)
        except (AttributeError, OSError):
            self.exit_fd = None
            self._poll_exit()
        return proc.pid

    # -- the loop's callbacks (short: one read each)

    def _readable(self, fd: int) -> None:
        kind = self.open.get(fd)
        if kind is None:
            return
        try:
            chunk = os.read(fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close(fd)
            return
        if kind == "err":
            self.stderr.add(chunk)
            if len(self.stderr.head) >= STDERR_KEEP // 2:
                self._throttle(fd)  # past the head only the tail is kept: no hurry
            return
        self._feed(chunk)
        if self.lines.full or self.lines.dropping:
            self._throttle(fd)  # what comes now is discarded: no hurry

    def _feed(self, chunk: bytes) -> None:
        events = self.lines.feed(chunk)
        if events:
            self.emit(events)

    def _throttle(self, fd: int) -> None:
        """From now on `fd` is read a pipe-full every DISCARD_PAUSE, not as fast as it fills."""
        try:
            self.loop.remove_reader(fd)
        except (ValueError, OSError):
            pass
        self.timers[fd] = self.loop.call_later(DISCARD_PAUSE, self._discard, fd)

    def _discard(self, fd: int) -> None:
        """A pass over a throttled pipe: stdout past the run's cap is spliced away unread;
        inside a cut line it is read and fed (the line's end starts the next event, and reading
        goes back to full speed); stderr past its head is read for its tail."""
        kind = self.open.get(fd)
        if kind is None or self.ended:
            return
        taken = 0
        while taken < DISCARD_PER_PASS:
            try:
                if kind == "out" and self.lines.full:
                    moved = _splice_away(fd)
                    if moved and self.lines.marker is not None:  # output past the cap: its marker
                        owed: list = []
                        self.lines.more(owed)
                        self.emit(owed)
                else:
                    chunk = os.read(fd, READ_SIZE)
                    moved = len(chunk)
                    if kind == "err":
                        self.stderr.add(chunk)
                    elif chunk:
                        self._feed(chunk)
                        if not (self.lines.full or self.lines.dropping):
                            self.loop.add_reader(fd, self._readable, fd)  # full speed again
                            return
            except BlockingIOError:
                break
            except OSError:
                moved = 0
            if moved == 0:
                self._close(fd)
                return
            taken += moved
        self.timers[fd] = self.loop.call_later(DISCARD_PAUSE, self._discard, fd)

    def _close(self, fd: int) -> None:
        kind = self.open.pop(fd, None)
        if kind is None:
            return
        try:
            self.loop.remove_reader(fd)
        except (ValueError, OSError):
            pass
        if kind == "out":
            tail = self.lines.end()
            if tail:
                self.emit(tail)
        if not self.open:
            self.closed.set()

    def _exit_seen(self) -> None:
        if self.exit_fd is not None:
            try:
                self.loop.remove_reader(self.exit_fd)
            except (ValueError, OSError):
                pass
        self.exited.set()

    def _poll_exit(self) -> None:
        """No pidfd (before Linux 5.3): look now and then."""
        if self.proc is not None and self.proc.poll() is not None:
            self.exited.set()
        elif not self.ended:
            self.timers["exit"] = self.loop.call_later(0.1, self._poll_exit)

    # -- waiting and ending

    async def wait(self) -> None:
        """Until the command exits (then up to DRAIN_AFTER_EXIT for what holds its pipes) or
        its timeout; `end()` follows."""
        started = self.loop.time()
        try:
            await asyncio.wait_for(self.exited.wait(), self.timeout)
        except asyncio.TimeoutError:
            self.result.timed_out = True
            return
        remaining = self.timeout - (self.loop.time() - started)
        try:
            await asyncio.wait_for(self.closed.wait(), max(0.0, min(DRAIN_AFTER_EXIT, remaining)))
        except asyncio.TimeoutError:
            pass  # a descendant holds a pipe: it is ended with the rest

    async def end(self) -> RunResult:
        """End everything of the run (in a worker thread), read what is left in its pipes,
        close them; the result. Runs whole, even when the caller is cancelled meanwhile (the
        cancellation is raised after)."""
        if self.ended:
            return self.result
        self.ended = True
        for timer in self.timers.values():
            timer.cancel()
        cancelled = False
        if self.proc is not None:
            assert self.tree is not None  # set with self.proc, in start()
            try:
                await finish_anyway(asyncio.to_thread(sweep, self.proc, self.tree, self.result.tag, self.group))
            except asyncio.CancelledError:
                cancelled = True  # the sweep ran whole; the rest too, then the cancellation goes on
            self._drain_left()
            if self.exit_fd is not None:
                try:
                    self.loop.remove_reader(self.exit_fd)
                except (ValueError, OSError):
                    pass
                os.close(self.exit_fd)
                self.exit_fd = None
            for stream in (self.proc.stdout, self.proc.stderr):
                assert stream is not None  # started with stdout=PIPE, stderr=PIPE
                try:
                    stream.close()
                except OSError:
                    pass
            self.result.exit_code = None if self.result.timed_out else self.proc.returncode
        self.result.stderr = self.stderr.text()
        if cancelled:
            raise asyncio.CancelledError
        return self.result

    def _drain_left(self) -> None:
        """After the sweep nothing writes: what is left in the pipes, within the limits."""
        for fd, kind in list(self.open.items()):
            try:
                self.loop.remove_reader(fd)
            except (ValueError, OSError):
                pass
            for _ in range(4):  # nothing writes any more: the pipe holds at most PIPE_SIZE
                try:
                    chunk = os.read(fd, READ_SIZE)
                except OSError:
                    break
                if not chunk:
                    break
                if kind == "err":
                    self.stderr.add(chunk)
                else:
                    self._feed(chunk)
            self._close(fd)


async def run_once(
    command: str,
    cwd: str,
    timeout: float,
    emit: Callable[[list[tuple[str, bool]]], None],
    env: dict,
    tag: str | None = None,
    on_start: Callable[[RunResult], None] | None = None,
) -> RunResult:
    """Run `command` to its end or its timeout; `emit` receives each batch of (line, truncated)
    as it is read, `on_start` the result (pid, tag, cgroup) once the command started. OSError
    when it could not start. Cancelled, the run is ended whole before the cancellation goes on."""
    run = Run(command, cwd, timeout, emit, env, tag or new_tag())
    run.start()
    if on_start is not None:
        on_start(run.result)
    try:
        await run.wait()
    finally:
        await run.end()
    return run.result


async def finish_anyway(awaitable):
    """Await `awaitable` to its end even when cancelled meanwhile; the cancellation is raised
    after it."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return task.result()


_DEVNULL: list[int] = []


def _splice_away(fd: int) -> int:
    """Move what the pipe holds to /dev/null without copying it here; 0 at its end."""
    if not _DEVNULL:
        _DEVNULL.append(os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC))
    splice = getattr(os, "splice", None)
    if splice is not None:
        try:
            return splice(fd, _DEVNULL[0], PIPE_SIZE, flags=getattr(os, "SPLICE_F_NONBLOCK", 0))
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                raise BlockingIOError from None
            if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
    return len(os.read(fd, READ_SIZE))


# -- ending processes (worker threads) ---------------------------------------------------------


def sweep(proc: subprocess.Popen, tree: process.Tree, tag: str, group: process.Cgroup | None) -> None:
    """End everything of one run (`process.sweep`): its group (SIGTERM, TERM_GRACE, SIGKILL;
    the command reaped), its tree, every process with its tag, its cgroup."""
    process.sweep(proc, tree, (TAG, tag), group, TERM_GRACE)


def cgroup_path(tag: str) -> str | None:
    home = process.cgroup_home()
    return os.path.join(home[1], CGROUP_PREFIX + tag) if home else None


def sweep_left_over(pid: int | None, tag: str | None, started: float | None) -> None:
    """End what a run of an earlier server left (that server was killed before it could): its
    cgroup, every process with its tag, and its process group when its members started after
    the run did, in this boot (a pid number alone may be another process's by now)."""
    if tag:
        path = cgroup_path(tag)
        if path and os.path.isdir(path):
            process.cgroup_end(path)
        process.kill_tagged(TAG, tag, grace=TERM_GRACE)
    if isinstance(pid, int) and pid > 1 and started is not None and _boot_time() <= started:
        ours = lambda: [p for p in process.group_members(pid) if _started_at(p) >= started - 1]  # noqa: E731
        process._end(ours, TERM_GRACE, 20)


def _boot_time() -> float:
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return float("inf")  # unknown: no process is trusted by its pid


def _started_at(pid: int) -> float:
    ticks = process.start_time(pid)
    if ticks is None:
        return 0.0
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


# -- orphans (the server is their subreaper) ---------------------------------------------------


def children() -> list[int]:
    """This process's children (every thread's), from /proc/self/task/*/children."""
    found: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/children", "rb") as handle:
                found.extend(int(word) for word in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def _session_and_state(pid: int) -> tuple[int, str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
        fields = raw[raw.rfind(b")") + 2 :].split()
        return int(fields[3]), fields[0].decode()
    except (OSError, IndexError, ValueError):
        return None


def orphans(roots: set[int]) -> list[tuple[int, str]]:
    """(pid, state) of this process's children that are adopted orphans of monitor runs: not
    a run's own command (`roots`), and in another session than this process's. Every monitor
    command starts a session of its own and its descendants stay out of this one (a process
    can only leave its session, never join another's); a child this process forked otherwise
    (git, from a thread) stays in it, and is waited for by whoever forked it."""
    own = os.getsid(0)
    found = []
    for pid in children():
        if pid in roots:
            continue
        info = _session_and_state(pid)
        if info is not None and info[0] != own:
            found.append((pid, info[1]))
    return found


def reap_orphans(roots: set[int]) -> int:
    """Reap the adopted orphans that have ended (cheap: this process's children only); on the
    loop thread, where runs start, so no run's own command is taken for one."""
    reaped = 0
    for pid, state in orphans(roots):
        if state in ("Z", "X"):
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    reaped += 1
            except ChildProcessError:
                pass
    return reaped


def end_orphans(roots: set[int]) -> None:
    """End every adopted orphan still alive and what is below it (the server stopping)."""
    live = [pid for pid, state in orphans(roots) if state not in ("Z", "X")]
    for pid in live:
        process.kill_tree(process.Tree(pid), grace=TERM_GRACE)
