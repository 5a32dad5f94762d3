"""One attempt: start a worker CLI, watch it, stop it, record how it ended.

The stops, as specified:
- the idle limit: every stdout line and every stderr byte counts as output; a worker silent
  for the limit has its whole process group killed: aborted, a provider error, not counted
  against the worker ("stopped: no output for N minutes");
- the grace window: after the final reply only `grace_seconds` remain (for Claude the idle
  clock no longer applies once its result arrived; an opencode worker that starts a new step
  hands back to the idle clock); when the window ends the group is killed and the attempt is
  finished;
- the wall clock (`wall_minutes`), the spend limit (`max_spend_usd`, not counted against the
  worker), and 20 seconds after a fatal error (opencode).

The watcher sleeps in a selector on the worker's pipes and its pidfd with a timeout set to
the nearest deadline: a silent worker costs no CPU.

A stop, and a worker's own exit, end everything the worker started, in three sweeps:
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
   worker is the worker's, so no orphan escapes the tree. The server process
   (`monitors/resume.py` resumes a worker from inside it) does not pass it: the server runs
   monitor commands as its own children concurrently, and while it was a subreaper their
   orphans would become its children too, indistinguishable from the worker's by parent or
   start time, and left as zombies; there the tree holds what was still linked to the worker
   when it was read, and the tag (3) the rest;
3. every process that still carries the attempt's tag (PROCTOR_WORKER_TAG, a fresh value per
   attempt, in the worker's environment): the fallback for an orphan reparented outside the
   tree (to init, where no group or parent chain reaches it) that kept its environment.
A `proctor server` the worker started is the workspace's, not the worker's: its daemon does
not carry the tag (daemon.py drops it) and it is spared by the tree sweep with everything
below it (its monitor commands) when it is this repository's server: this interpreter running
`-m proctor server start --foreground`, its environment naming exactly this repository's server
directory (PROCTOR_SERVER_DIR), whose server.json holds its pid. A variable, or a server.json of
the worker's own, spares nothing; a server that has not yet written server.json (the worker
was stopped while it started) is ended.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import sys
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from proctor.process import (Tree, kill_group, kill_tagged, kill_tree, reap_adopted, set_subreaper, start_time,
                             subreaper)
from proctor.workers.executors import Event

FATAL_GRACE = 20.0
STOP_GRACE = 0.5  # seconds between SIGTERM and SIGKILL when a worker is stopped
DRAIN_AFTER_EXIT = 1.0
MAX_LINE = 16 << 20  # a longer line is cut here and counted as a line
STDERR_KEEP = 64 << 10
TAG = "PROCTOR_WORKER_TAG"  # in the worker's environment: what its descendants are found by
SERVER_DIR = "PROCTOR_SERVER_DIR"  # in a started server's environment (daemon.py): its state directory


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
    outcome: str = "finished"  # finished | aborted
    stop: str | None = None  # idle | grace | wall | spend | fatal | None (exited by itself)
    reason: str = ""
    provider_error: bool = False
    counts: bool = True  # against the worker: uses an attempt on its rung
    exit_code: int | None = None
    reply: str | None = None
    reply_kind: str | None = None
    session: str | None = None
    cost: float = 0.0
    lines: int = 0
    last_line: str = ""
    stderr_tail: str = ""
    stopped_at: float | None = None  # when the stop fired, for "gone within N s of the limit"
    gone_at: float | None = None  # when the process group was gone
    events: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "events"}


def _minutes(seconds: float) -> str:
    value = seconds / 60
    return f"{value:g}" if value != int(value) else str(int(value))


def run_attempt(argv: list[str], parser, limits: Limits, cwd: str, env: dict, stdin_text: str | None = None,
                on_event: Callable[[str, Attempt], None] | None = None, adopt_orphans: bool = False) -> Attempt:
    """Run one worker process to its end or its stop; with `adopt_orphans`, as a child
    subreaper while it runs (see the module's docstring: never in a process that runs other
    children meanwhile, such as the server)."""
    attempt = Attempt(started=time.time())
    tag = secrets.token_hex(12)
    env = {**env, TAG: tag, "PWD": os.path.abspath(cwd)}  # opencode takes its project from $PWD, not its cwd
    adopting = adopt_orphans and not subreaper() and set_subreaper(True)  # cleared again at the end
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        attempt.outcome, attempt.reason, attempt.counts = "aborted", f"could not start {argv[0]}: {exc.strerror}", False
        attempt.provider_error = True
        attempt.ended = time.time()
        if adopting:
            set_subreaper(False)
        return attempt
    started = start_time(proc.pid)  # readable until the worker is reaped, which only we do
    adopted_since = started if adopt_orphans and started is not None and subreaper() else None
    server_directory = _server_directory(cwd)
    tree = Tree(proc.pid, adopted_since=adopted_since,
                spare=lambda pid: _workspace_server(pid, server_directory))
    reaping = None
    if (adopted_since is not None and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGCHLD) is not None):  # None: a handler Python cannot put back
        # an adopted orphan that ends is reaped at once, not left a zombie until the sweep
        reaping = signal.signal(signal.SIGCHLD, lambda signum, frame: reap_adopted(adopted_since, proc.pid))
    if stdin_text is not None:
        try:
            proc.stdin.write(stdin_text.encode("utf-8", "replace"))
            proc.stdin.close()
        except OSError:
            pass
    notify = on_event or (lambda kind, a: None)
    selector = selectors.DefaultSelector()
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    selector.register(out_fd, selectors.EVENT_READ, "out")
    selector.register(err_fd, selectors.EVENT_READ, "err")
    try:
        exit_fd = os.pidfd_open(proc.pid)
        selector.register(exit_fd, selectors.EVENT_READ, "exit")
    except (AttributeError, OSError):
        exit_fd = None
    monotonic_start = time.monotonic()
    last_output = monotonic_start
    final_at: float | None = None
    idle_applies = True
    fatal_at: float | None = None
    exited_at: float | None = None
    buffer = b""
    held: list[bytes] = []  # pieces of a line still arriving, joined once it is whole
    held_size = 0
    relevant = getattr(parser, "RELEVANT", None)
    tail = getattr(parser, "TAIL", None)  # a parser that needs only the last lines
    open_fds = {out_fd, err_fd}
    stop: tuple[str, str] | None = None

    def handle(events: list[Event]) -> None:
        nonlocal final_at, idle_applies, fatal_at
        for event in events:
            if event.kind == "session":
                attempt.session = event.value
            elif event.kind == "cost":
                attempt.cost = float(event.value)
            elif event.kind == "final":
                if final_at is None:
                    # the first final reply starts the grace window; later output buys no time
                    attempt.reply, attempt.reply_kind = event.text or "", event.value
                    final_at = time.monotonic()
                    idle_applies = False  # from the final reply on, only the grace window counts
                    notify("final", attempt)
            elif event.kind == "step":
                if final_at is not None:
                    final_at, idle_applies = None, True  # it carried on working
                    notify("step", attempt)
            elif event.kind == "fatal":
                attempt.provider_error = True
                if fatal_at is None:
                    fatal_at = time.monotonic()
                attempt.reason = f"fatal error: {event.text}"
            elif event.kind == "provider_error":
                attempt.provider_error = True

    try:
        while True:
            now = time.monotonic()
            deadlines = []
            if idle_applies:
                deadlines.append((last_output + limits.idle, "idle"))
            if final_at is not None:
                deadlines.append((final_at + limits.grace, "grace"))
            if limits.wall is not None:
                deadlines.append((monotonic_start + limits.wall, "wall"))
            if fatal_at is not None:
                deadlines.append((fatal_at + FATAL_GRACE, "fatal"))
            if exited_at is not None:
                deadlines.append((exited_at + DRAIN_AFTER_EXIT, "drained"))
            if limits.spend is not None and attempt.cost > limits.spend:
                stop = ("spend", f"stopped: spend ${attempt.cost:.2f} past max_spend_usd ${limits.spend:g}")
                break
            due = min(deadlines, default=None)
            if due is not None and now >= due[0]:
                kind = due[1]
                if kind == "drained":
                    break
                stop = (kind, {
                    "idle": f"stopped: no output for {_minutes(limits.idle)} minutes",
                    "grace": f"stopped: {limits.grace:g} s after the final reply",
                    "wall": f"stopped: wall clock of {_minutes(limits.wall or 0)} minutes",
                    "fatal": f"stopped: {FATAL_GRACE:g} s after a fatal error ({attempt.reason})",
                }[kind])
                break
            if not open_fds and exited_at is None:
                # both pipes closed: the process is ending; its pidfd (or a short wait) says when
                if exit_fd is None:
                    try:
                        proc.wait(timeout=max(0.0, due[0] - now) if due else None)
                    except subprocess.TimeoutExpired:
                        continue
                    exited_at = time.monotonic()
                    break
            timeout = max(0.0, due[0] - now) if due is not None else None
            ready = selector.select(timeout)
            for key, _mask in ready:
                if key.data == "exit":
                    selector.unregister(exit_fd)
                    os.close(exit_fd)
                    exit_fd = None
                    exited_at = time.monotonic()
                    continue
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    open_fds.discard(key.fd)
                    continue
                if key.data == "err":
                    last_output = time.monotonic()
                    attempt.stderr_tail = (attempt.stderr_tail + chunk.decode("utf-8", "replace"))[-STDERR_KEEP:]
                    continue
                if b"\n" not in chunk:
                    held.append(chunk)  # a line still arriving: only a whole line counts as output
                    held_size += len(chunk)
                    if held_size <= MAX_LINE:
                        continue
                    chunk = b""
                if held:
                    buffer += b"".join(held)
                    held.clear()
                    held_size = 0
                buffer += chunk
                parts = buffer.split(b"\n")
                buffer = parts.pop()
                if len(buffer) > MAX_LINE:
                    parts.append(buffer)
                    buffer = b""
                if not parts:
                    continue
                last_output = time.monotonic()
                attempt.lines += len(parts)
                attempt.last_line = parts[-1][:300].decode("utf-8", "replace")
                for raw in parts[-tail:] if tail else parts:
                    # most lines of a stream carry nothing but activity; parse only the rest
                    if relevant is None or any(marker in raw for marker in relevant):
                        handle(parser.feed(raw.decode("utf-8", "replace")))
                notify("line", attempt)
            if not open_fds and exited_at is not None:
                break
            if exited_at is not None and exit_fd is None and not open_fds:
                break
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
        tree.scan()  # while the worker's links still stand: its members are remembered
        if stop is not None or proc.poll() is None or open_fds:
            attempt.stopped_at = time.time()
            kill_group(proc, grace=STOP_GRACE)
        else:
            _reap_group(proc)
        kill_tree(tree, grace=STOP_GRACE)  # what left the group: setsid'd shells, adopted orphans
        kill_tagged(TAG, tag, grace=STOP_GRACE)  # orphans outside the tree that kept the tag
        if reaping is not None:
            signal.signal(signal.SIGCHLD, reaping)
        if adopting:
            set_subreaper(False)
        attempt.gone_at = time.time()
        for stream in (proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    buffer += b"".join(held)
    if buffer:
        attempt.lines += 1
        handle(parser.feed(buffer.decode("utf-8", "replace")))
    attempt.exit_code = proc.returncode
    handle(parser.close(proc.returncode))
    attempt.ended = time.time()
    if stop is None:
        if attempt.reply is None:
            attempt.outcome = "aborted"
            attempt.reason = attempt.reason or f"exited with code {proc.returncode} without a final reply"
        else:
            attempt.outcome = "finished"
            attempt.reason = attempt.reason or f"exited with code {proc.returncode}"
        attempt.counts = not attempt.provider_error
        return attempt
    kind, reason = stop
    attempt.stop, attempt.reason = kind, reason
    if kind == "grace":
        attempt.outcome, attempt.counts = "finished", True
    elif kind == "idle":
        attempt.outcome, attempt.provider_error, attempt.counts = "aborted", True, False
    elif kind in ("spend", "fatal"):
        attempt.outcome, attempt.counts = "aborted", False
        attempt.provider_error = attempt.provider_error or kind == "fatal"
    else:  # wall
        attempt.outcome, attempt.counts = "aborted", True
    return attempt


def _reap_group(proc: subprocess.Popen) -> None:
    """The worker exited by itself: end whatever it left in its group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


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
    if os.path.realpath(exe) != os.path.realpath(sys.executable) or \
            argv[1:6] != [b"-m", b"proctor", b"server", b"start", b"--foreground"]:
        return False
    prefix = SERVER_DIR.encode() + b"="
    named = next((item[len(prefix):] for item in environ if item.startswith(prefix)), None)
    if not named or os.path.realpath(os.fsdecode(named)) != directory:
        return False
    try:
        with open(os.path.join(directory, "server.json"), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("pid") == pid
