"""One run of a monitor command, with its limits.

Each stdout line is an event; stderr is drained and kept as the run's diagnostic. A line is
cut at 16 KiB and a run's events at 1 MiB, each with an explicit truncation marker. The run
is timed out at the smaller of its interval and 60 s. The command runs in a session of its
own and is ended as a group (SIGTERM, a short wait, SIGKILL, reaped), descendants included;
a descendant holding the pipe after the command exits is given a second, then killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Callable

LINE_CAP = 16 << 10
RUN_CAP = 1 << 20
STDERR_CAP = 64 << 10
RUN_TIMEOUT_CAP = 60.0
DRAIN_AFTER_EXIT = 1.0
TERM_GRACE = 1.0
LINE_MARKER = " [proctor: line cut at 16 KiB]"
RUN_MARKER = "[proctor: output past 1 MiB of this run dropped]"


class RunResult:
    __slots__ = ("exit_code", "timed_out", "truncated", "capped", "bytes", "stderr")

    def __init__(self) -> None:
        self.exit_code: int | None = None
        self.timed_out = False
        self.truncated = False
        self.capped = False
        self.bytes = 0
        self.stderr = ""


async def kill_group(proc: asyncio.subprocess.Process) -> None:
    for sig, wait in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if wait is not None:
            try:
                await asyncio.wait_for(proc.wait(), wait)
            except asyncio.TimeoutError:
                pass
    try:
        await asyncio.wait_for(proc.wait(), 5)
    except asyncio.TimeoutError:
        pass


async def run_once(command: str, cwd: str, timeout: float,
                   emit: Callable[[list[tuple[str, bool]]], None], env: dict | None = None) -> RunResult:
    """Run `command`; `emit` receives each batch of (line, truncated) as it is read."""
    result = RunResult()
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)

    async def read_stdout() -> None:
        pending = b""
        dropping = False  # inside a line already cut at the cap
        while True:
            chunk = await proc.stdout.read(1 << 16)
            if not chunk:
                break
            batch: list[tuple[str, bool]] = []
            pending += chunk
            while True:
                cut = pending.find(b"\n")
                if cut == -1:
                    if len(pending) > LINE_CAP and not dropping:
                        batch.append(_event(pending[:LINE_CAP], True, result))
                        dropping = True
                    if dropping:
                        pending = b""
                    break
                line, pending = pending[:cut], pending[cut + 1:]
                if dropping:
                    dropping = False
                    continue
                if len(line) > LINE_CAP:
                    batch.append(_event(line[:LINE_CAP], True, result))
                else:
                    batch.append(_event(line, False, result))
            kept = [e for e in batch if e is not None]
            if kept:
                emit(kept)
        if pending and not dropping:
            tail = _event(pending[:LINE_CAP], len(pending) > LINE_CAP, result)
            if tail is not None:
                emit([tail])

    async def read_stderr() -> None:
        kept = bytearray()
        while True:
            chunk = await proc.stderr.read(1 << 16)
            if not chunk:
                break
            if len(kept) < STDERR_CAP:
                kept.extend(chunk[: STDERR_CAP - len(kept)])
        result.stderr = kept.decode("utf-8", "replace")

    readers = [asyncio.ensure_future(read_stdout()), asyncio.ensure_future(read_stderr())]
    # The command's own exit, seen on a pidfd: asyncio's wait() would also wait for the pipes,
    # which a descendant may hold open long after the command itself ended.
    waiter = asyncio.ensure_future(_exited(proc))
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
        if not done:
            result.timed_out = True
            await kill_group(proc)
        else:
            # the command exited: whatever it left holding the pipes gets a second
            _, still = await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT)
            if still:
                await kill_group(proc)
        await asyncio.wait(readers, timeout=2)
    except asyncio.CancelledError:
        await kill_group(proc)
        raise
    finally:
        for reader in readers:
            if not reader.done():
                reader.cancel()
        if not waiter.done():
            waiter.cancel()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of the run outlives it
        except (ProcessLookupError, PermissionError):
            pass
    result.exit_code = None if result.timed_out else await _exit_code(proc)
    return result


async def _exited(proc: asyncio.subprocess.Process) -> None:
    loop = asyncio.get_running_loop()
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return  # already exited and reaped by asyncio's child watcher
    except (AttributeError, OSError):
        await proc.wait()
        return
    done = loop.create_future()
    loop.add_reader(fd, lambda: done.done() or done.set_result(None))
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def _exit_code(proc: asyncio.subprocess.Process) -> int | None:
    """The exit status, once asyncio's child watcher has reaped the process (it does so just
    after the pidfd turned readable); reaping it here would race that watcher."""
    for _ in range(100):
        if proc.returncode is not None:
            return proc.returncode
        await asyncio.sleep(0.01)
    return proc.returncode


def _event(raw: bytes, cut: bool, result: RunResult):
    if result.bytes >= RUN_CAP:
        if result.capped:
            return None
        result.capped = result.truncated = True
        return (RUN_MARKER, True)
    result.bytes += len(raw) + 1
    text = raw.decode("utf-8", "replace").rstrip("\r")
    if cut:
        result.truncated = True
        text += LINE_MARKER
    return (text, cut)
