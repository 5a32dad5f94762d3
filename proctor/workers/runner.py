"""One attempt: start a worker CLI, watch it, stop it, record how it ended.

Its parts: `process.spawn` starts the worker and `process.sweep` ends it whole (process.py);
`framer.Framer` turns its stdout into lines for the executor's parser; `stops.py` decides
each stop from the attempt's clock and holds the table of how an attempt's end maps to its
outcome; here `run_attempt` wires them: start, watch (`_Watch.run`: the nearest stop, the
selector, a read), sweep (`_Worker.end`), record (`_Watch.finish`).

The stops, as specified:
- the idle limit: every stdout line and every stderr byte counts as output; a worker silent
  for the limit has its whole process group killed: aborted, a provider error, not counted
  against the worker ("stopped: no output for N minutes");
- the grace window: after the final reply only `grace_seconds` remain (for Claude the idle
  clock no longer applies once its final reply arrived; an opencode worker that starts a new
  step hands back to the idle clock); when the window ends the group is killed and the
  attempt is finished;
- the wall clock (`wall_minutes`), the spend limit (`max_spend_usd`, not counted against the
  worker), and 20 seconds after a fatal error (opencode). A spend crossed before any final
  reply stops the worker at once (aborted, not counted); crossed after it (Claude reports
  its cost only in its result, which comes after its final reply), the worker keeps at least
  SPEND_FLOOR seconds from its final reply, the floor the grace window keeps so Claude can
  save its session file, and the attempt is finished and counts;
- proctor itself interrupted: `proctor work` turns SIGTERM and SIGHUP into `Interrupted`,
  SIGINT is KeyboardInterrupt; either, arriving while the attempt runs, ends the worker like
  any stop and the attempt is returned `interrupted` (not counted), never lost.

The watcher sleeps in a selector on the worker's pipes, its pidfd and, while the prompt is
still being written, its stdin (written without blocking: a worker that never reads its
stdin never holds the watch), with a timeout set to the nearest deadline: a silent worker
costs no CPU. Its output is read a megabyte at a time (the pipe is made that large); lines are
(framer.py) counted, not split (only a line still arriving is held, and only whole lines count), the last
one kept for the live display, and only a line holding one of the parser's RELEVANT markers is
cut out and fed to it: the markers are searched in C over the whole read (libc's strstr), a
parser with `skim` is shown the stretches between fed lines to keep what it needs cheaply, and
one with TAIL only the last lines of each read. A million lines of Claude's stream go through
in under twice the time `cat | cat` takes (bench/work.py). Every byte read is appended to
`stream_path` as it is read, one write a read (stderr to `stream_path + ".stderr"`), and what
is left in the pipes once the worker is gone is drained into them.

A stop, and a worker's own exit, end everything the worker started:
0. with cgroup v2 (`containment()` says what holds on this machine): the worker runs in a
   cgroup of its own, made before it starts and joined by the worker itself between fork and
   exec, so no process of it runs outside it; after the three sweeps below, `cgroup.kill`
   ends whatever is left in it, however it left the group, session and tree, and the cgroup
   is removed once empty. The worker also dies with this process (PR_SET_PDEATHSIG, SIGKILL),
   and `sweep(info)` (the `on_spawn` information) ends all of it from another process, the
   watchdog of a `proctor work` killed with SIGKILL;
1. its process group (SIGTERM, a short wait, SIGKILL, reaped), grandchildren that hold the
   pipe open included;
2. its process tree, by parent links in /proc (`process.Tree`): Claude Code runs each shell
   command in a session of its own (setsid), outside the worker's group, and a background
   one outlives `claude -p` killed with SIGKILL. The tree is read before the group is killed
   and its members are remembered, so a member reparented elsewhere is still found. With
   `adopt_orphans` (what `proctor work` passes) this process is a child subreaper while the
   attempt runs (prctl PR_SET_CHILD_SUBREAPER, set before the worker starts, cleared after
   the sweeps unless it was set already): an orphan anywhere below the worker, double-forked
   and setsid'd, reparents here instead of to init, and every child of ours started after the
   worker is the worker's, so no orphan escapes the tree. A caller that runs other children
   meanwhile (a server running monitor commands) must not pass it: their orphans would become
   its children too, indistinguishable from the worker's by parent or start time, and left as
   zombies; there the tree holds what was still linked to the worker when it was read, and
   the tag (3) and the cgroup (0) the rest. (Every worker is run by `proctor work`, a follow-up's
   resumed session included: the server resumes none.)
3. every process that still carries the attempt's tag (PROCTOR_WORKER_TAG, a fresh value per
   attempt, in the worker's environment): the fallback for an orphan reparented outside the
   tree (to init, where no group or parent chain reaches it) that kept its environment.
Signals (SIGINT, SIGTERM, SIGHUP) are blocked while the worker starts and while it is swept:
a second Ctrl-C cannot cut a sweep short; one that arrived meanwhile is taken after it.
A `proctor server` the worker started is the workspace's, not the worker's: its daemon does
not carry the tag (daemon.py drops it), it is spared by the tree sweep with everything
below it (its monitor commands), and moved out of the worker's cgroup (frozen meanwhile)
before the cgroup is killed, when it is this repository's server: this interpreter running
`-I -m proctor server start --foreground` (isolated: no package in its directory or on a
PYTHONPATH can stand in for proctor's), its environment naming exactly this repository's server
directory (PROCTOR_SERVER_DIR), whose server.json holds its pid. A variable, or a server.json of
the worker's own, spares nothing; a server that has not yet written server.json (the worker
was stopped while it started) is ended.

Events a parser hands back (executors/__init__.py) are handled here; besides those listed
there, Event("confirm", text, value) is a final reply confirmed later (Claude's result after
its Stop hook): it changes the reply and its kind, not the grace window. A parser may offer
`partial() -> str | None`, what the worker has said so far: an attempt that ends without a
final reply keeps it (`reply_kind = "partial"`).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from proctor.process import (
    Cgroup,
    Tree,
    cgroup_end,
    cgroup_home,
    child_setup,
    end_group,
    kill_tagged,
    reap_adopted,
    set_subreaper,
    spawn,
    start_time,
    subreaper,
)
from proctor.process import sweep as process_sweep
from proctor.workers import stops
from proctor.workers.executors import Event
from proctor.workers.framer import MAX_LINE, Framer  # noqa: F401 - MAX_LINE: still named here

FATAL_GRACE = 20.0
STOP_GRACE = 0.5  # seconds between SIGTERM and SIGKILL when a worker is stopped: why 0.5, in process.py's table
DRAIN_AFTER_EXIT = stops.DRAIN_AFTER_EXIT  # seconds the pipes may stay open once the worker exited
MAX_SLEEP = 86400.0  # the longest one wait in the watch loop
SPEND_FLOOR = 5.0  # seconds a worker keeps after its final reply, whatever it spent (spec: the grace floor)
STDERR_KEEP = 64 << 10
READ_SIZE = 1 << 20  # bytes read at once from the worker's stdout
PIPE_SIZE = 1 << 20  # the worker's pipes are made this large (F_SETPIPE_SZ) where Linux allows
ARGV_MAX = 100_000  # bytes: Linux refuses one argument over 128 KiB (MAX_ARG_STRLEN); room left
TAG = "PROCTOR_WORKER_TAG"  # in the worker's environment: what its descendants are found by
SERVER_DIR = "PROCTOR_SERVER_DIR"  # in a started server's environment (daemon.py): its state directory
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_F_SETPIPE_SZ = 1031


class Interrupted(BaseException):
    """Proctor itself was told to stop: `proctor work`'s SIGTERM and SIGHUP handlers raise it
    (SIGINT arrives as KeyboardInterrupt). Raised while `run_attempt` watches, it ends the
    worker and the attempt is returned `interrupted`."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"interrupted by {_signal_name(self.signum)}"


@dataclass
class Limits:
    idle: float  # seconds
    grace: float  # seconds
    wall: float | None = None  # seconds
    spend: float | None = None  # dollars


@dataclass
class Attempt:
    started: float
    ended: float = 0.0
    outcome: str = "finished"  # finished | aborted | interrupted
    stop: str | None = None  # idle | grace | wall | spend | fatal | interrupted | None (exited by itself)
    reason: str = ""
    provider_error: bool = False
    counts: bool = True  # against the worker: uses an attempt on its rung
    exit_code: int | None = None
    reply: str | None = None
    reply_kind: str | None = None  # the parser's kind of final reply, or "partial": what it had said so far
    session: str | None = None
    cost: float = 0.0
    lines: int = 0
    last_line: str = ""
    stderr_tail: str = ""
    stopped_at: float | None = None  # when the stop fired, for "gone within N s of the limit"
    gone_at: float | None = None  # when the process group was gone
    interrupted_by: int | None = None  # the signal that interrupted proctor during the attempt
    stream_path: str | None = None  # where its whole stdout was kept (stderr: + ".stderr"), if it was
    events: list = field(default_factory=list)
    # sha256 of the bytes written to each kept stream, as read from the worker's pipes: the file
    # proctor keeps is checked against them, since a worker can reach the file (not the pipe)
    kept_digests: tuple = (None, None)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("events", "kept_digests")}


def _signal_name(signum: int | None) -> str:
    if signum is None:
        return f"signal {signum}"
    try:
        return signal.Signals(signum).name
    except (ValueError, TypeError):
        return f"signal {signum}"


def _signum(exc: BaseException) -> int:
    return int(getattr(exc, "signum", signal.SIGINT))


def fits_argv(text: str) -> bool:
    """Whether `text` can be one command-line argument (Linux refuses one over 128 KiB,
    MAX_ARG_STRLEN; under ARGV_MAX bytes leaves room). When not, put it in a file."""
    if len(text) * 4 < ARGV_MAX:
        return True
    return len(text.encode("utf-8", "surrogatepass")) < ARGV_MAX


# ------------------------------------------------------------------------------ containment

_CONTAINMENT: str | None = None


def containment() -> str:
    """Which mechanism holds a worker's processes on this machine, in a sentence (for the
    README and `proctor doctor`): a cgroup v2 per attempt where one can be made and joined,
    else the process group, subreaper and tree, tag and parent-death signal alone."""
    global _CONTAINMENT
    if _CONTAINMENT is None:
        _CONTAINMENT = _probe()
    return _CONTAINMENT


def _probe() -> str:
    fallback = "the process group, the process tree (as a child subreaper), the tag and the parent-death signal"
    home = cgroup_home()
    if home is None:
        return f"no writable cgroup (no cgroup v2 hierarchy holds this process): {fallback}"
    group = Cgroup.make(f"proctor-probe-{os.getpid()}-{secrets.token_hex(4)}")
    if group is None:
        return f"no writable cgroup (cgroup v2 at {home[0]} is not writable here): {fallback}"
    try:
        joined = True
        true = next((p for p in ("/bin/true", "/usr/bin/true") if os.path.exists(p)), None)
        if true is not None:
            try:
                subprocess.run([true], preexec_fn=child_setup(group.procs_fd), check=False)
            except (subprocess.SubprocessError, OSError):
                joined = False
        kill = os.path.exists(os.path.join(group.path, "cgroup.kill"))
    finally:
        group.end(wait=1.0)
    if not joined:
        return f"no writable cgroup (cgroup v2 at {home[0]}: a process cannot be moved into one here): {fallback}"
    ending = "cgroup.kill" if kill else "SIGKILL to each of its processes (no cgroup.kill before Linux 5.14)"
    return f"cgroup v2 at {home[0]}: each attempt runs in a cgroup of its own, ended with {ending}; besides, {fallback}"


# ------------------------------------------------------------------------------ signals


def _block() -> list[int]:
    """Signals blocked (SIGINT, SIGTERM, SIGHUP) until `_restore`; one that arrives meanwhile
    waits. Python handlers run only in the main thread: elsewhere this is harmless."""
    raised: list[int] = []
    while True:
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
            return raised
        except (Interrupted, KeyboardInterrupt) as exc:  # arrived just before the block took hold
            raised.append(_signum(exc))


def _restore(mask) -> list[int]:
    """Put the signal mask back; the signals that arrived while blocked are taken here, and
    returned instead of raised."""
    raised: list[int] = []
    while True:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            return raised
        except (Interrupted, KeyboardInterrupt) as exc:
            raised.append(_signum(exc))


def _mask():
    return signal.pthread_sigmask(signal.SIG_BLOCK, [])


# ------------------------------------------------------------------------------ sweeping from outside


def sweep(info: dict) -> None:
    """End everything of one attempt, from another process (the watchdog of a `proctor work`
    killed with SIGKILL), given what `on_spawn` handed out: its cgroup (cgroup.kill, wait until
    empty, removed; this repository's server moved out first), its process group (when its
    leader is the worker still, or gone: a group's id is not reused while a member lives), and
    every process carrying its tag."""
    mask = _mask()
    _block()
    try:
        directory = info.get("server_dir")
        spare = (lambda pid: _workspace_server(pid, directory)) if directory else None
        if info.get("cgroup"):
            cgroup_end(info["cgroup"], spare)
        pgid = info.get("pgid") or info.get("pid")
        if isinstance(pgid, int) and pgid > 1:
            leader = start_time(pgid)
            if leader is None or leader == info.get("start_time"):
                end_group(pgid, grace=STOP_GRACE)
        if info.get("tag"):
            kill_tagged(TAG, info["tag"], grace=STOP_GRACE)
    finally:
        taken = _restore(mask)
        if taken:  # a signal that came while sweeping: delivered again, now that all is swept
            signal.raise_signal(taken[0])


_Lines = Framer  # the name the tests knew it by


class _Sink:
    """An append-only file every byte read is written to, as it is read, one write a read; its
    first error stops the writing (the attempt goes on). (A thread writing it a few reads behind
    was measured slower: it and the watch contend for the interpreter.)"""

    def __init__(self, path: str | None) -> None:
        import hashlib

        self.fd: int | None = None
        self.error: str | None = None
        self.sha = hashlib.sha256()
        if path:
            try:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                self.error = f"{path}: {exc.strerror}"

    def write(self, data: bytes) -> None:
        if self.fd is None:
            return
        self.sha.update(data)
        try:
            written = os.write(self.fd, data)
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(self.fd, view) :]
        except OSError as exc:
            self.error = exc.strerror
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


def _pipe_size(fd: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
    except (ImportError, OSError):
        pass  # the default size only costs speed


def run_attempt(
    argv: list[str],
    parser,
    limits: Limits,
    cwd: str,
    env: dict,
    stdin_text: str | None = None,
    on_event: Callable[[str, Attempt], None] | None = None,
    adopt_orphans: bool = False,
    stream_path: str | None = None,
    on_spawn: Callable[[dict], None] | None = None,
    confine: Callable[[], None] | None = None,
) -> Attempt:
    """Run one worker process to its end or its stop; with `adopt_orphans`, as a child
    subreaper while it runs (see the module's docstring: never in a process that runs other
    children meanwhile, such as the server). `stream_path`: where its whole stdout is kept
    (its stderr in `stream_path + ".stderr"`). `on_spawn(info)`: called once it started, with
    what `sweep(info)` needs to end it from another process: {"pid", "start_time", "pgid",
    "tag", "cgroup" (a path or None), "server_dir"}. `confine`: run in the child just before
    exec, after the rest of its set-up (the sandbox's, with `[sandbox] workers = true`)."""
    attempt = Attempt(started=time.time())
    tag = secrets.token_hex(12)
    env = {**env, "PWD": os.path.abspath(cwd)}  # opencode takes its project from $PWD, not its cwd
    mask = _mask()
    late = _block()  # no signal between the worker's start and the watch whose end sweeps it
    if late:  # interrupted before anything started
        return _not_started(attempt, mask, late)
    out_sink, err_sink = _Sink(stream_path), _Sink(stream_path + ".stderr" if stream_path else None)
    attempt.stream_path = stream_path if out_sink.fd is not None else None
    adopting = adopt_orphans and not subreaper() and set_subreaper(True)  # cleared again at the end
    try:
        proc, group = spawn(argv, cwd, env, (TAG, tag), f"proctor-{tag}", stdin_text is not None, mask, confine)
    except (OSError, subprocess.SubprocessError) as exc:
        attempt.outcome, attempt.counts = "aborted", False
        attempt.reason = f"could not start {argv[0]}: {getattr(exc, 'strerror', None) or exc}"
        attempt.provider_error = True
        out_sink.close()
        err_sink.close()
        if adopting:
            set_subreaper(False)
        return _not_started(attempt, mask, late)
    worker = _Worker(proc, group, tag, cwd, adopt_orphans, adopting)
    watch = _Watch(proc, parser, limits, attempt, on_event, out_sink, err_sink, stdin_text)
    restored = False
    try:
        try:
            try:
                _watch(watch, worker, mask, on_spawn)
            finally:
                worker.end(watch)  # whole: a signal that arrives meanwhile waits, or it runs again
        except (Interrupted, KeyboardInterrupt) as exc:  # a second signal while the first was handled
            watch.interrupted_by(_signum(exc))
        watch.finish()
        late = _restore(mask)
        restored = True
        watch.interrupted_by(late[0] if late else None)
        if watch.interrupted is not None:
            _interrupted(attempt, watch.interrupted)
        return attempt
    finally:
        if not restored:  # an error of another kind on its way out: the mask is put back all the same
            _restore(mask)


def _not_started(attempt: Attempt, mask, late: list[int]) -> Attempt:
    """The attempt ended before its worker started: the mask put back, a signal taken."""
    late = late + _restore(mask)
    if late:
        _interrupted(attempt, late[0])
    attempt.ended = time.time()
    return attempt


def _watch(watch: "_Watch", worker: "_Worker", mask, on_spawn: Callable[[dict], None] | None) -> None:
    """Hand out `on_spawn`'s information, unblock the signals, watch the worker to its end or
    its stop; proctor interrupted meanwhile is recorded on the watch."""
    try:
        if on_spawn is not None:
            on_spawn(dict(worker.info))
        raised = _restore(mask)  # a signal that came while the worker started is taken here
        if raised:
            raise Interrupted(raised[0])
        watch.run()
    except (Interrupted, KeyboardInterrupt) as exc:
        watch.interrupted = _signum(exc)


def _interrupted(attempt: Attempt, signum: int) -> None:
    attempt.outcome, attempt.stop, attempt.counts = "interrupted", "interrupted", False
    attempt.interrupted_by = signum
    attempt.reason = f"stopped: proctor was interrupted ({_signal_name(signum)})"


class _Worker:
    """A started worker and what ends it whole: its tree (as a subreaper, with `adopt_orphans`),
    its tag, its cgroup, this repository's server spared."""

    def __init__(
        self, proc: subprocess.Popen, group: Cgroup | None, tag: str, cwd: str, adopt_orphans: bool, adopting: bool
    ) -> None:
        self.proc, self.group, self.tag, self.adopting = proc, group, tag, adopting
        started = start_time(proc.pid)  # readable until the worker is reaped, which only we do
        self.adopted_since = started if adopt_orphans and started is not None and subreaper() else None
        server_directory = _server_directory(cwd)
        self.spare = lambda pid: _workspace_server(pid, server_directory)
        self.tree = Tree(proc.pid, adopted_since=self.adopted_since, spare=self.spare)
        self.info = {
            "pid": proc.pid,
            "start_time": started,
            "pgid": proc.pid,
            "tag": tag,
            "cgroup": group.path if group is not None else None,
            "server_dir": server_directory,
        }
        self.reaping = None
        if (
            self.adopted_since is not None
            and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGCHLD) is not None
        ):  # None: a handler Python cannot put back
            # an adopted orphan that ends is reaped at once, not left a zombie until the sweep
            since = self.adopted_since
            self.reaping = signal.signal(signal.SIGCHLD, _reaper(since, proc.pid))

    def end(self, watch: "_Watch") -> None:
        """The sweeps, run whole (signals blocked; run again whole when one cut them short),
        then the subreaper and SIGCHLD put back and the adopted orphans reaped."""
        while True:
            try:
                late = _block()
                watch.interrupted_by(late[0] if late else None)
                self.sweep(watch, stopped=watch.stop is not None or watch.interrupted is not None)
                break
            except (Interrupted, KeyboardInterrupt) as exc:
                watch.interrupted_by(_signum(exc))
        if self.reaping is not None:
            signal.signal(signal.SIGCHLD, self.reaping)
        if self.adopting:
            set_subreaper(False)
        if self.adopted_since is not None:
            reap_adopted(self.adopted_since, self.proc.pid)
        watch.attempt.gone_at = time.time()

    def sweep(self, watch: "_Watch", stopped: bool) -> None:
        """End everything of the worker's (the module's docstring, `process.sweep`): its group,
        its tree, its tag, its cgroup; then drain its pipes. Idempotent, step by step."""
        watch.close_selector()

        def stopping() -> None:
            if watch.attempt.stopped_at is None:
                watch.attempt.stopped_at = time.time()

        process_sweep(
            self.proc,
            self.tree,
            (TAG, self.tag),
            self.group,
            STOP_GRACE,
            stop=stopped or bool(watch.open_fds),
            spare=self.spare,
            on_stop=stopping,
        )
        watch.drain()


class _Watch:
    """The watch over one running worker: its pipes, its exit, its stops (stops.py)."""

    def __init__(
        self,
        proc: subprocess.Popen,
        parser,
        limits: Limits,
        attempt: Attempt,
        on_event,
        out_sink: _Sink,
        err_sink: _Sink,
        stdin_text: str | None,
    ) -> None:
        self.proc, self.parser, self.limits, self.attempt = proc, parser, limits, attempt
        self.notify = on_event or (lambda kind, a: None)
        self.out_sink, self.err_sink = out_sink, err_sink
        self.stop: tuple[str, str] | None = None
        self.interrupted: int | None = None  # the signal that interrupted proctor meanwhile
        now = time.monotonic()
        self.clock = stops.Clock(started=now, last_output=now)
        self.graces = stops.Graces(fatal=FATAL_GRACE, spend_floor=SPEND_FLOOR)
        self.stderr = bytearray()
        self.selector = selectors.DefaultSelector()
        assert proc.stdout is not None and proc.stderr is not None  # spawn starts it with both piped
        self.out_fd, self.err_fd = proc.stdout.fileno(), proc.stderr.fileno()
        _pipe_size(self.out_fd)
        self.open_fds = {self.out_fd, self.err_fd}
        self.selector.register(self.out_fd, selectors.EVENT_READ, "out")
        self.selector.register(self.err_fd, selectors.EVENT_READ, "err")
        try:
            self.exit_fd: int | None = os.pidfd_open(proc.pid)
            self.selector.register(self.exit_fd, selectors.EVENT_READ, "exit")
        except (AttributeError, OSError):
            self.exit_fd = None
        self.prompt: memoryview | None = None
        self.in_fd: int | None = None
        if stdin_text is not None:
            assert proc.stdin is not None  # spawn pipes stdin when there is a prompt to write
            self.in_fd = proc.stdin.fileno()
            self.prompt = memoryview(stdin_text.encode("utf-8", "replace"))
            _pipe_size(self.in_fd)
            os.set_blocking(self.in_fd, False)
            if self.prompt:
                self.selector.register(self.in_fd, selectors.EVENT_WRITE, "in")
            else:
                self.close_stdin()
        self.lines = Framer(parser, attempt, self.handle)

    def interrupted_by(self, signum: int | None) -> None:
        """Proctor interrupted by `signum` (None: not): the first signal is the one kept."""
        if self.interrupted is None:
            self.interrupted = signum

    # -- events

    def handle(self, events: list[Event]) -> None:
        # Claude's cost comes in its result, which is also its final reply when no Stop came first:
        # a spend crossed there is crossed at the final reply, and keeps the floor
        with_final = any(e.kind in ("final", "confirm") for e in events)
        for event in events:
            handler = self.HANDLERS.get(event.kind)
            if handler is not None:
                handler(self, event, with_final)

    def _session(self, event: Event, with_final: bool) -> None:
        self.attempt.session = event.value

    def _cost(self, event: Event, with_final: bool) -> None:
        attempt, clock, spend = self.attempt, self.clock, self.limits.spend
        attempt.cost = float(event.value)
        if spend is not None and attempt.cost > spend and not clock.spend_crossed:
            clock.spend_crossed = True
            clock.spend_before_final = clock.final_at is None and not with_final

    def _final(self, event: Event, with_final: bool) -> None:
        if self.clock.final_at is None:
            # the first final reply starts the grace window; later output buys no time
            self.attempt.reply, self.attempt.reply_kind = event.text or "", event.value
            self.clock.final_at = time.monotonic()
            self.clock.idle_applies = False  # from the final reply on, only the grace window counts
            self.notify("final", self.attempt)

    def _confirm(self, event: Event, with_final: bool) -> None:
        if self.clock.final_at is None:  # a confirmed reply with none before it: the final reply
            self._final(event, with_final)
            return
        self.attempt.reply = event.text or self.attempt.reply
        self.attempt.reply_kind = event.value

    def _step(self, event: Event, with_final: bool) -> None:
        if self.clock.final_at is not None:
            self.clock.final_at, self.clock.idle_applies = None, True  # it carried on working
            self.notify("step", self.attempt)

    def _fatal(self, event: Event, with_final: bool) -> None:
        self.attempt.provider_error = True
        if self.clock.fatal_at is None:
            self.clock.fatal_at = time.monotonic()
        self.attempt.reason = f"fatal error: {event.text}"

    def _provider_error(self, event: Event, with_final: bool) -> None:
        self.attempt.provider_error = True

    HANDLERS: dict[str, Callable[["_Watch", Event, bool], None]] = {
        "session": _session,
        "cost": _cost,
        "final": _final,
        "confirm": _confirm,
        "step": _step,
        "fatal": _fatal,
        "provider_error": _provider_error,
    }

    # -- the loop

    def run(self) -> None:
        """Until a stop fires (`self.stop`), or the worker exited and its pipes closed."""
        clock, limits, graces = self.clock, self.limits, self.graces
        clock.started = clock.last_output = time.monotonic()
        select = self.selector.select
        while True:
            now = time.monotonic()
            due = stops.due(clock, limits, graces)
            if due is not None and now >= due[0]:
                if due[1] != "drained":
                    reason = stops.reason(due[1], clock, limits, graces, self.attempt.cost, self.attempt.reason)
                    self.stop = (due[1], reason)
                return
            # epoll takes at most INT_MAX milliseconds (24.8 days): a longer limit wakes once a day
            timeout = min(max(0.0, due[0] - now), MAX_SLEEP) if due is not None else MAX_SLEEP
            if not self.open_fds and clock.exited_at is None and self.exit_fd is None:
                # both pipes closed and no pidfd: a short wait says when the process ends
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    continue
                return
            for key, _mask in select(timeout):
                self.READY[key.data](self)
            if not self.open_fds and clock.exited_at is not None:
                return

    def _out(self) -> None:
        chunk = os.read(self.out_fd, READ_SIZE)
        if not chunk:
            self._closed(self.out_fd)
            return
        self.out_sink.write(chunk)
        if self.lines.chunk(chunk):
            self.clock.last_output = time.monotonic()
            self.notify("line", self.attempt)

    def _err(self) -> None:
        chunk = os.read(self.err_fd, 1 << 16)
        if not chunk:
            self._closed(self.err_fd)
            return
        self.err_sink.write(chunk)
        self.clock.last_output = time.monotonic()
        self._keep_stderr(chunk)

    def _exit(self) -> None:
        assert self.exit_fd is not None  # registered as "exit" only while set
        self.selector.unregister(self.exit_fd)
        os.close(self.exit_fd)
        self.exit_fd = None
        self.clock.exited_at = time.monotonic()

    def _closed(self, fd: int) -> None:
        self.selector.unregister(fd)
        self.open_fds.discard(fd)

    def _keep_stderr(self, chunk: bytes) -> None:
        self.stderr += chunk
        if len(self.stderr) > 2 * STDERR_KEEP:
            del self.stderr[:-STDERR_KEEP]

    def _write_prompt(self) -> None:
        """Write what the pipe takes now; never wait for a worker to read."""
        # registered as "in" only while both are set (close_stdin unregisters before clearing them)
        assert self.in_fd is not None and self.prompt is not None
        try:
            written = os.write(self.in_fd, self.prompt[:PIPE_SIZE])
        except BlockingIOError:
            return
        except OSError:  # it closed its stdin, or exited: the rest is not wanted
            self.close_stdin()
            return
        self.prompt = self.prompt[written:]
        if not self.prompt:
            self.close_stdin()

    def close_stdin(self) -> None:
        if self.in_fd is None:
            return
        try:
            self.selector.unregister(self.in_fd)
        except (KeyError, ValueError, RuntimeError):
            pass
        assert self.proc.stdin is not None  # in_fd is set only from a piped stdin
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.in_fd, self.prompt = None, None

    # -- the end

    def close_selector(self) -> None:
        self.close_stdin()
        if self.exit_fd is not None:
            try:
                os.close(self.exit_fd)
            except OSError:
                pass
            self.exit_fd = None
        try:
            self.selector.close()
        except (OSError, RuntimeError):
            pass

    def drain(self) -> None:
        """After the sweeps nothing writes to the pipes any more: what is left in them goes to
        the stream files (not to the parser: the attempt already ended)."""
        for fd, sink in ((self.out_fd, self.out_sink), (self.err_fd, self.err_sink)):
            if fd not in self.open_fds:
                continue
            try:
                os.set_blocking(fd, False)
                while True:
                    chunk = os.read(fd, READ_SIZE)
                    if not chunk:
                        break
                    sink.write(chunk)
            except OSError:
                pass
            self.open_fds.discard(fd)

    def finish(self) -> None:
        """The attempt's record, once the worker and everything of it is gone."""
        attempt, proc, parser = self.attempt, self.proc, self.parser
        for stream in (proc.stdout, proc.stderr):
            if stream is None:  # never: spawn pipes both
                continue
            try:
                stream.close()
            except OSError:
                pass
        self.out_sink.close()
        self.err_sink.close()
        attempt.kept_digests = tuple(
            None if sink.error else f"sha256:{sink.sha.hexdigest()}" for sink in (self.out_sink, self.err_sink)
        )
        self.lines.finish()
        attempt.exit_code = proc.returncode
        self.handle(parser.close(proc.returncode))
        attempt.stderr_tail = bytes(self.stderr[-STDERR_KEEP:]).decode("utf-8", "replace")
        attempt.ended = time.time()
        self._outcome()
        if attempt.reply is None:
            partial = getattr(parser, "partial", None)
            said = partial() if callable(partial) else None
            if said:
                attempt.reply, attempt.reply_kind = said, "partial"

    def _outcome(self) -> None:
        """The attempt's outcome, from the table in stops.py: which stop, a final reply or not."""
        attempt, clock = self.attempt, self.clock
        if self.stop is None:
            said = f"exited with code {self.proc.returncode}"
            attempt.reason = attempt.reason or (said if attempt.reply is not None else f"{said} without a final reply")
        else:
            attempt.stop, attempt.reason = stops.relabel(
                self.stop, clock.spend_crossed, attempt.cost, self.limits.spend
            )
        row = stops.row(attempt.stop if self.stop else None, attempt.reply is not None, clock.spend_before_final)
        attempt.outcome = row.outcome
        if row.provider_error:
            attempt.provider_error = True
        attempt.counts = not attempt.provider_error if row.counts is None else row.counts

    READY: dict[str, Callable[["_Watch"], None]] = {"out": _out, "err": _err, "in": _write_prompt, "exit": _exit}


def _server_directory(cwd: str) -> str | None:
    """The server directory of the repository the worker runs in (daemon.server_dir), or None."""
    try:
        from proctor.paths import find_checkout, repo_state_dir

        return os.path.realpath(os.path.join(repo_state_dir(find_checkout(cwd), create=False), "server"))
    except Exception:
        return None


def _workspace_server(pid: int, directory: str | None) -> bool:
    """Whether `pid` is this repository's running `proctor server`: started as daemon.py starts
    it (this interpreter, `-m proctor server start --foreground`), naming exactly this
    repository's server directory, whose server.json records this pid. A worker's own process
    that names another directory, or writes a server.json of its own, is not spared."""
    if directory is None:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read().split(b"\0")
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return False
    if os.path.realpath(exe) != os.path.realpath(sys.executable) or argv[1:7] != [
        b"-I",
        b"-m",
        b"proctor",
        b"server",
        b"start",
        b"--foreground",
    ]:
        return False
    prefix = SERVER_DIR.encode() + b"="
    named = next((item[len(prefix) :] for item in environ if item.startswith(prefix)), None)
    if not named or os.path.realpath(os.fsdecode(named)) != directory:
        return False
    try:
        with open(os.path.join(directory, "server.json"), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("pid") == pid


def _reaper(since: int, keep: int):
    """The SIGCHLD handler that reaps adopted orphans (process.reap_adopted), never run inside
    itself: a child that ends while a reap reads /proc would call it again from within, and a
    tree whose members keep ending (processes hopping sessions) would recurse without bound.
    A signal that comes during a reap makes that reap read the table once more instead."""
    state = {"busy": False, "again": False}

    def handler(signum, frame) -> None:
        if state["busy"]:
            state["again"] = True
            return
        state["busy"] = True
        try:
            while True:
                state["again"] = False
                reap_adopted(since, keep)
                if not state["again"]:
                    break
        finally:
            state["busy"] = False

    return handler
