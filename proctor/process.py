"""Child processes, run the one way proctor runs them: in a session of their own, ended as
a group (SIGTERM, a short wait, SIGKILL, reaped), output drained with a bound.

Never `communicate()`: on Python 3.11 it does not return while a grandchild holds the pipe
open (CPython issue 119710). The reader watches the pipe with a selector and the deadline
with its timeout, so a silent child costs no CPU.

Also here, for the worker runner (workers/runner.py) and the monitor runner (monitors/run.py):
one way to start a process they must be able to end whole (`spawn`: a session of its own, a
tag in its environment, a cgroup of its own where one can be made, the parent-death signal)
and one way to end it whole (`sweep`: its group, then its tree, then its tag, then its
cgroup), and under them the ways to find and end everything a process started, wherever it
went. A cgroup v2 of its own where one can be made (`Cgroup`: nothing below the worker leaves
it short of writing to a cgroup.procs file, and `cgroup.kill` ends all of it at once,
race-free); its process tree by parent links (`Tree`), as a child
subreaper or not; every process carrying a tag in its environment (`tagged`); its process
group (`kill_group`, `group_members`); and the parent-death signal (`child_setup`), so the
worker dies with the process that started it, SIGKILL included.

Grace periods: the seconds between SIGTERM and SIGKILL. Each caller passes its own, a named
constant of its module; they differ on purpose, and are kept here in one table:

| who ends what | constant | seconds | why |
|---|---|---|---|
| the worker runner: a worker stopped, or exited, and everything it left (`sweep`), and `runner.sweep(info)` from the watchdog | `workers.runner.STOP_GRACE` | 0.5 | a worker stopped is already judged (silent past the idle limit, past its wall clock or spend, or its grace window over): the time to save its session was the grace window (and SPEND_FLOOR), not this; the stop is reported as "gone within N s of the limit" |
| the monitor runner: a run's command ended (`sweep`), an earlier server's left-overs, the adopted orphans when the server stops | `monitors.run.TERM_GRACE` | 1.0 | a monitor command is the user's watcher, not judged: SIGTERM gives it a moment to flush its last lines, which are still collected once it is gone; the sweep holds one of the server's worker threads meanwhile, so no longer |
| `run_shell` (`proctor run`'s targets and a job's checks, jobs/runs.py), the broker's children, the check tags of work.py and the watchdog (the default of every function here) | `TERM_GRACE` | 2.0 | a check or target is the user's own program (a test runner, a build): ended on its timeout or with proctor interrupted, it gets time to stop its own children and remove its temporary files; nothing waits on it being fast |
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

CHUNK = 1 << 20
PIPE_SIZE = 1 << 20  # a larger pipe means fewer wake-ups per megabyte of output
_F_SETPIPE_SZ = 1031
TERM_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
DRAIN_AFTER_EXIT = 1.0  # seconds a pipe may stay open (a grandchild) after the child exits


@dataclass
class Finished:
    exit_code: int | None  # None when proctor had to kill it
    timed_out: bool
    pipe_held: bool  # a descendant held the output open after the child exited
    pid: int | None = None  # the child's (/bin/sh's) pid


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux 5.3+), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def kill_group(proc: subprocess.Popen, grace: float = TERM_GRACE) -> None:
    """SIGTERM the child's process group, wait up to `grace`, SIGKILL it, reap the child."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + grace
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the group may outlive its leader
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def tagged(name: str, value: str) -> list[int]:
    """The live processes whose environment holds `name=value` (read from /proc; Linux).

    A tag in the environment follows a process wherever it goes: into a session of its own
    (setsid), and to init when its parent exits, where no process group or parent chain
    reaches it. Processes proctor may not read, and zombies (their environment is gone), are
    not listed; nor is this process."""
    needle = f"{name}={value}".encode()
    own = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == own:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry))
    return found


def kill_tagged(name: str, value: str, grace: float = TERM_GRACE, rounds: int = 20) -> list[int]:
    """End every process tagged `name=value` (see `_end`). Returns the pids signalled."""
    return _end(lambda: tagged(name, value), grace, rounds)


def _end(scan, grace: float, rounds: int) -> list[int]:
    """End every process `scan()` finds: SIGTERM, up to `grace` seconds, then SIGKILL, again
    until none is left (one may have forked meanwhile). Returns the pids signalled."""
    pids = scan()
    signalled = list(pids)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.02)
        pids = scan()
    for _ in range(rounds):
        if not pids:
            break
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        signalled.extend(p for p in pids if p not in signalled)
        time.sleep(0.02)
        pids = scan()
    return signalled


PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


def _prctl(option: int, value: int) -> int | None:
    """prctl(2) through ctypes; None where it cannot be called (not Linux, no libc)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if option == PR_GET_CHILD_SUBREAPER:
            out = ctypes.c_int(0)
            if libc.prctl(option, ctypes.byref(out), 0, 0, 0) != 0:
                return None
            return out.value
        return None if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0 else 0
    except (OSError, AttributeError):
        return None


def subreaper() -> bool:
    """Whether this process is a child subreaper (orphaned descendants reparent to it)."""
    return bool(_prctl(PR_GET_CHILD_SUBREAPER, 0))


def set_subreaper(on: bool) -> bool:
    """Make this process a child subreaper, or stop being one; False when Linux refused."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0) == 0


def _stat(pid: int | str) -> tuple[int, str, int] | None:
    """(ppid, state, start time in clock ticks since boot) from /proc/<pid>/stat, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()  # the name, in parentheses, may hold anything
    try:
        return int(fields[1]), fields[0].decode(), int(fields[19])
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    stat = _stat(pid)
    return stat[2] if stat else None


def _table() -> dict[int, tuple[int, str, int]]:
    table: dict[int, tuple[int, str, int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            stat = _stat(entry)
            if stat is not None:
                table[int(entry)] = stat
    return table


class Tree:
    """The processes of one child, found by their parent links in /proc.

    Members are the descendants of `root`, and, when `adopted_since` is given (this process
    is a subreaper), also every child of this process started at or after that start time
    (orphans reparented here) with their descendants. Members are remembered by pid and start
    time: a member whose parent died and was reparented elsewhere stays a member, and its
    children with it; a pid reused by another process is not. A process for which `spare(pid)`
    is true is no member, nor is any process below it. Members that are this process's zombies
    (adopted orphans that ended) are reaped as they are seen; `root` is never reaped here
    (its Popen does that)."""

    def __init__(self, root: int, adopted_since: int | None = None, spare: Callable[[int], bool] = lambda pid: False):
        self.root, self.adopted_since, self.spare = root, adopted_since, spare
        self.known: dict[int, int] = {}  # pid -> start time
        self.root_start = start_time(root)  # once reaped, its pid may be another process's
        self.spared: set[tuple[int, int]] = set()

    def scan(self) -> list[int]:
        """The live members now (zombies left out, ours reaped)."""
        table = _table()
        own = os.getpid()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _state, _start) in table.items():
            children.setdefault(ppid, []).append(pid)
        seeds = [pid for pid, start in self.known.items() if pid in table and table[pid][2] == start]
        if self.root in table and self.root != own and table[self.root][2] == self.root_start:
            seeds.append(self.root)
        if self.adopted_since is not None:
            seeds += [pid for pid in children.get(own, ()) if pid != self.root and table[pid][2] >= self.adopted_since]
        members: dict[int, int] = {}
        queue = list(dict.fromkeys(seeds))
        while queue:
            pid = queue.pop()
            if pid in members or pid == own or pid not in table:
                continue
            start = table[pid][2]
            if (pid, start) in self.spared:
                continue
            if table[pid][1] != "Z" and self.spare(pid):
                self.spared.add((pid, start))
                continue
            members[pid] = start
            queue.extend(children.get(pid, ()))
        self.known.update(members)
        live = []
        for pid in members:
            ppid, state, _start = table[pid]
            if state in ("Z", "X"):
                if ppid == own and pid != self.root:
                    with contextlib.suppress(ChildProcessError, OSError):
                        os.waitpid(pid, os.WNOHANG)  # an adopted orphan that ended: ours to reap
                continue
            live.append(pid)
        return live


def reap_adopted(since: int, keep: int) -> None:
    """Reap this process's zombie children started at or after `since`, except `keep`: orphans
    a subreaper adopted that have ended (a zombie still answers kill(pid, 0), so a process
    waiting for one to go, such as `proctor server stop`, would wait in vain)."""
    own = os.getpid()
    for pid, (ppid, state, start) in _table().items():
        if ppid == own and state == "Z" and pid != keep and start >= since:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def kill_tree(tree: Tree, grace: float = TERM_GRACE, rounds: int = 20) -> list[int]:
    """End every member of `tree` (see `_end`). Returns the pids signalled."""
    return _end(tree.scan, grace, rounds)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def spawn(
    argv: list[str],
    cwd: str,
    env: dict,
    tag: tuple[str, str],
    cgroup: str | None,
    stdin: bool = False,
    mask=None,
    confine: Callable[[], None] | None = None,
) -> tuple[subprocess.Popen, Cgroup | None]:
    """Start `argv` to be ended whole by `sweep`: in a session of its own, stdout and stderr
    piped (stdin too with `stdin`, else /dev/null), the tag `tag` (name, value) in its
    environment, in a new cgroup named `cgroup` where one can be made (and joined: started
    again without it when it cannot join), with the parent-death signal, the signal mask
    `mask` put back (None: left as is), and last `confine` (a sandbox's) just before exec.
    Returns the process and its cgroup (None when it runs in none). When it cannot start the
    error is raised (OSError, or SubprocessError when a child's set-up failed without a
    cgroup) and the cgroup made for it is removed: nothing is left behind."""
    env = {**env, tag[0]: tag[1]}
    group = Cgroup.make(cgroup) if cgroup else None
    while True:
        setup = child_setup(group.procs_fd if group else None, mask)
        preexec = setup
        if confine is not None:

            def preexec(setup=setup) -> None:
                setup()
                confine()

        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                preexec_fn=preexec,
            )
            break
        except subprocess.SubprocessError:
            if group is None:
                raise
            group.end(wait=1.0)  # it could not join a cgroup: none here
            group = None
        except BaseException:  # OSError (EMFILE, ENOENT, a cwd gone) and anything else
            if group is not None:
                group.end(wait=1.0)
            raise
    if group is not None:
        group.close()
    return proc, group


def sweep(
    proc: subprocess.Popen,
    tree: Tree,
    tag: tuple[str, str],
    group: Cgroup | None,
    grace: float,
    stop: bool = False,
    spare: Callable[[int], bool] | None = None,
    on_stop: Callable[[], None] | None = None,
) -> None:
    """End everything of a process `spawn` started: its process group (SIGTERM, `grace`,
    SIGKILL, when it is still running or `stop` says so: `on_stop()` is called first; else
    only SIGKILL for what it left in its group), its process tree (read first, while its links
    still stand, so a member reparented since is still found), every process carrying its tag,
    and its cgroup (cgroup.kill; a process `spare(pid)` is true of is moved out first). The
    process is reaped. Each step is idempotent: a sweep cut short can be run again whole."""
    tree.scan()  # while its links stand: members stay known once reparented
    if stop or proc.poll() is None:
        if on_stop is not None:
            on_stop()
        kill_group(proc, grace=grace)
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # what it left in its group
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
    kill_tree(tree, grace=grace)  # what left the group: setsid'd shells, adopted orphans
    kill_tagged(tag[0], tag[1], grace=grace)  # orphans outside the tree that kept the tag
    if group is not None:
        group.end(spare)  # whatever is left, however it left the group, the tree and its tag


def run_shell(
    command: str,
    cwd: str,
    timeout: float | None,
    sink: Callable[[bytes], None],
    env: dict | None = None,
    preexec: Callable[[], None] | None = None,
) -> Finished:
    """Run `command` through /bin/sh, stdout and stderr merged into `sink`, within `timeout`;
    `preexec` runs in the child just before exec (the sandbox's)."""
    proc = subprocess.Popen(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=preexec,
    )
    assert proc.stdout is not None  # started with stdout=PIPE
    fd = proc.stdout.fileno()
    try:
        import fcntl

        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_SIZE)
    except (ImportError, OSError):
        pass  # the default pipe size only costs speed
    deadline = time.monotonic() + timeout if timeout else None
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    exit_fd = _pidfd(proc.pid)
    if exit_fd is not None:
        selector.register(exit_fd, selectors.EVENT_READ)
    timed_out = pipe_held = False
    exited_at: float | None = None
    try:
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= DRAIN_AFTER_EXIT:
                pipe_held = True
                break
            waits = [
                t
                for t in (
                    deadline - now if deadline is not None else None,
                    exited_at + DRAIN_AFTER_EXIT - now if exited_at is not None else None,
                    # Without a pidfd, wake now and then to notice an exit behind an open pipe.
                    0.5 if exited_at is None and exit_fd is None else None,
                )
                if t is not None
            ]
            ready = selector.select(max(0.0, min(waits)) if waits else None)
            if not any(key.fd == fd for key, _ in ready):
                if exit_fd is not None and ready:
                    selector.unregister(exit_fd)  # exited: the pipe's deadline takes over
                    os.close(exit_fd)
                    exit_fd = None
                continue
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            sink(chunk)
    except BaseException:
        kill_group(proc)  # interrupted (Ctrl-C, SIGTERM): the target goes with proctor
        raise
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
    if timed_out or pipe_held:
        kill_group(proc)
    else:
        remaining = max(0.0, deadline - time.monotonic()) if deadline is not None else None
        try:
            proc.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
    proc.stdout.close()
    code = None if timed_out else proc.returncode
    return Finished(code, timed_out, pipe_held, proc.pid)


def _pgrp(pid: int | str) -> int | None:
    """The process group of `pid`, from /proc/<pid>/stat, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
        return int(raw[raw.rfind(b")") + 2 :].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def group_members(pgid: int) -> list[int]:
    """The live processes in process group `pgid` (zombies left out; never this process)."""
    own = os.getpid()
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if entry.isdigit() and int(entry) != own and _pgrp(entry) == pgid:
            stat = _stat(entry)
            if stat is not None and stat[1] not in ("Z", "X"):
                members.append(int(entry))
    return members


def end_group(pgid: int, grace: float = TERM_GRACE, rounds: int = 20) -> list[int]:
    """End process group `pgid` from a process that is not its leader's parent (see `_end`)."""
    return _end(lambda: group_members(pgid), grace, rounds)


# ---------------------------------------------------------------------------------- cgroup v2

PR_SET_PDEATHSIG = 1
CGROUP_WAIT = 5.0  # seconds a killed cgroup may take to empty
_FREEZE_WAIT = 1.0


def _unescape(field: str) -> str:
    """A path from /proc/self/mountinfo, where space, tab, newline and backslash are octal escapes."""
    import re

    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def cgroup_home() -> tuple[str, str] | None:
    """(the cgroup2 mount point, this process's own cgroup directory under it), or None: no
    cgroup v2 hierarchy mounted (cgroup v1 only), or this process's cgroup not under it."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="surrogateescape") as handle:
            own = next((line[3:].rstrip("\n") for line in handle if line.startswith("0::")), None)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            mounts = handle.read().splitlines()
    except OSError:
        return None
    if not own or not own.startswith("/") or own.endswith(" (deleted)"):
        return None
    for line in mounts:
        left, separator, right = line.partition(" - ")
        if not separator or not right.startswith("cgroup2 "):
            continue
        fields = left.split()
        if len(fields) < 5:
            continue
        root, point = _unescape(fields[3]).rstrip("/"), _unescape(fields[4])
        if own == root or own.startswith(root + "/"):
            return point, os.path.normpath(point + own[len(root) :])
    return None


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _write(path: str, text: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(fd, text.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def cgroup_populated(path: str) -> bool:
    """Whether a process still lives in cgroup `path` or below it (zombies do not count)."""
    events = _read(os.path.join(path, "cgroup.events"))
    return events is not None and "populated 1" in events


def cgroup_pids(path: str) -> list[int]:
    """The processes in cgroup `path` and in the cgroups below it."""
    pids: list[int] = []
    for directory, _subdirs, _files in os.walk(path):
        text = _read(os.path.join(directory, "cgroup.procs")) or ""
        pids.extend(int(word) for word in text.split() if word.isdigit())
    return pids


class Cgroup:
    """A cgroup v2 for one worker: made before the worker starts, joined by the worker itself
    between fork and exec (`child_setup` writes 0 into the cgroup.procs file opened here, which
    moves the writer), so nothing the worker runs is ever outside it unless it writes to a
    cgroup.procs file itself; ended with `cgroup_end` (cgroup.kill) and removed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs_fd: int | None = None

    @classmethod
    def make(cls, name: str) -> "Cgroup | None":
        """A new cgroup `name` below this process's own, or None where none can be made."""
        home = cgroup_home()
        if home is None:
            return None
        path = os.path.join(home[1], name)
        try:
            os.mkdir(path)
        except OSError:
            return None
        _remove_stale(home[1], name)
        group = cls(path)
        try:
            group.procs_fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            group.close()
            _remove_cgroup(path, time.monotonic())
            return None
        return group

    def close(self) -> None:
        if self.procs_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.procs_fd)
            self.procs_fd = None

    def end(self, spare: Callable[[int], bool] | None = None, wait: float = CGROUP_WAIT) -> bool:
        self.close()
        return cgroup_end(self.path, spare, wait)


def cgroup_end(path: str, spare: Callable[[int], bool] | None = None, wait: float = CGROUP_WAIT) -> bool:
    """Kill every process in cgroup `path` and below it, wait (up to `wait` seconds) until it is
    empty, remove it. A process for which `spare(pid)` is true is moved out first, into the
    cgroup above, with its descendants: the cgroup is frozen meanwhile, so none of them forks
    a child that stays behind. Callable from any process (the watchdog of a `proctor work`
    killed with SIGKILL calls it). True when the cgroup is gone."""
    deadline = time.monotonic() + wait
    if not os.path.isdir(path):
        return True
    if cgroup_populated(path):
        if spare is not None and any(spare(pid) for pid in cgroup_pids(path)):
            _release(path, spare)
        if not _write(os.path.join(path, "cgroup.kill"), "1"):
            _kill_each(path, deadline)  # a kernel before 5.14: no cgroup.kill
        while cgroup_populated(path) and time.monotonic() < deadline:
            time.sleep(0.005)
    return _remove_cgroup(path, deadline)


def _release(path: str, spare: Callable[[int], bool]) -> None:
    """Freeze cgroup `path`, move the spared processes and their descendants out of it."""
    if _write(os.path.join(path, "cgroup.freeze"), "1"):
        until = time.monotonic() + _FREEZE_WAIT
        while "frozen 1" not in (_read(os.path.join(path, "cgroup.events")) or "frozen 1") and time.monotonic() < until:
            time.sleep(0.002)
    inside = set(cgroup_pids(path))
    children: dict[int, list[int]] = {}
    for pid, (ppid, _state, _start) in _table().items():
        children.setdefault(ppid, []).append(pid)
    moving: list[int] = []
    for pid in sorted(inside):
        if pid in moving or not spare(pid):
            continue
        queue = [pid]
        while queue:
            current = queue.pop()
            if current in inside and current not in moving:
                moving.append(current)
            queue.extend(children.get(current, ()))
    target = os.path.join(os.path.dirname(path), "cgroup.procs")
    for pid in moving:
        _write(target, str(pid))


def _kill_each(path: str, deadline: float) -> None:
    for _ in range(50):
        pids = cgroup_pids(path)
        if not pids or time.monotonic() >= deadline:
            return
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.01)


CGROUP_STALE = 3600.0  # seconds: an empty cgroup of ours older than this was left by a runner that died


def _remove_stale(parent: str, made: str) -> None:
    """Remove the empty cgroups a runner killed with SIGKILL left behind (nobody swept them):
    siblings named as ours are, empty, and made more than CGROUP_STALE seconds ago. One still in
    use is not empty; an empty one being ended by its runner may go twice, which is harmless."""
    prefix = made.split("-", 1)[0] + "-"
    try:
        entries = os.listdir(parent)
    except OSError:
        return
    now = time.time()
    for entry in entries:
        if not entry.startswith(prefix) or entry == made:
            continue
        path = os.path.join(parent, entry)
        try:
            old = now - os.stat(path).st_mtime > CGROUP_STALE
        except OSError:
            continue
        if old and not cgroup_populated(path) and os.path.exists(os.path.join(path, "cgroup.events")):
            _remove_cgroup(path, time.monotonic())


def _remove_cgroup(path: str, deadline: float) -> bool:
    """rmdir `path` and the cgroups below it (a nested `proctor work` may have left its own),
    the deepest first; retried while the kernel still counts a process in one."""
    while True:
        busy = False
        for directory, _subdirs, _files in os.walk(path, topdown=False):
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                pass
            except OSError:
                busy = True
        if not busy or time.monotonic() >= deadline:
            return not os.path.isdir(path)
        time.sleep(0.01)


_PRCTL = None


def _prctl_function():
    """libc's prctl, bound once in the parent: a child between fork and exec loads nothing."""
    global _PRCTL
    if _PRCTL is None:
        try:
            import ctypes

            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _PRCTL = False
    return _PRCTL or None


def child_setup(procs_fd: int | None, mask=None) -> Callable[[], None]:
    """A `preexec_fn` for a worker: in the child, between fork and exec, put back the signal
    mask `mask` (the parent blocks signals while it starts the worker), join a cgroup by
    writing 0 into its cgroup.procs file `procs_fd` (an error is raised, and the worker does
    not start outside its cgroup: the caller starts it again without one), and ask for SIGKILL
    when the parent dies (PR_SET_PDEATHSIG; exiting at once when it is already gone)."""
    prctl = _prctl_function()
    parent = os.getpid()

    def setup() -> None:
        if mask is not None:
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            except BaseException:  # noqa: BLE001 - nothing may stop the child here but the cgroup
                pass
        if procs_fd is not None:
            os.write(procs_fd, b"0")
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the signal was asked for
                os._exit(128 + int(signal.SIGKILL))

    return setup
