"""The watchdog of one `proctor work`: a process of its own that outlives the runner's death.

`proctor work` catches SIGINT, SIGTERM and SIGHUP itself, ends its worker and records the
attempt. Nothing catches SIGKILL, and a runner killed that way would leave its worker running
and its job `running` under a dead pid. So each run starts this watchdog (its own session,
no BAGGAGE, nobody's worker) and tells it, line by line on a pipe, what is in flight: the
job, the attempt's worktree, and the spawned worker (`runner.run_attempt`'s `on_spawn`:
pid, group, tag, cgroup). The pipe closes when the runner ends, however it ends. After a
goodbye line the watchdog just exits; without one it ends the worker (`runner.sweep`), records
the attempt `interrupted` with what the worker had said (read back from its stream file),
hands the job back (declared, for `proctor work` to start again), lets go of the runner's
claim on its jobs and removes the worktree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ACTOR = "proctor-work-watchdog"


class Watchdog:
    def __init__(self, proc: subprocess.Popen | None) -> None:
        self.proc = proc
        self.state: dict = {}

    @classmethod
    def start(cls, ws, claimed: list[str]) -> "Watchdog":
        env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE", "PROCTOR_LEASE")}
        try:
            proc = subprocess.Popen([sys.executable, "-m", "proctor.workers.watchdog"], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ws.root, env=env,
                                    start_new_session=True)
        except OSError as exc:
            ws.warn(f"proctor: no watchdog ({exc.strerror}): if this process is killed with SIGKILL its worker "
                    f"runs on")
            return cls(None)
        dog = cls(proc)
        dog._send({"hello": {"root": ws.root, "runner": os.getpid(), "claimed": claimed}})
        return dog

    def tell(self, **state) -> None:
        self.state.update(state)
        self._send({"state": self.state})

    def close(self) -> None:
        if self.proc is None:
            return
        self._send({"goodbye": True})
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc = None

    def _send(self, message: dict) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:
            pass


def main() -> int:
    hello: dict = {}
    state: dict = {}
    goodbye = False
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "hello" in message:
            hello = message["hello"]
        elif "state" in message:
            state = message["state"]
        elif message.get("goodbye"):
            goodbye = True
    if goodbye or not hello:
        return 0
    clean_up(hello, state)
    return 0


def clean_up(hello: dict, state: dict) -> None:
    """The runner died: end its worker, record the attempt, put the job back."""
    from proctor.workers import runner

    attempt = state.get("attempt")
    if attempt:
        try:
            runner.sweep(attempt)
        except Exception:
            pass
    gates = state.get("gates")
    if gates:
        from proctor.process import kill_tagged

        try:
            kill_tagged(runner.TAG, gates["tag"])  # the check proctor was running
        except Exception:
            pass
    if state.get("worktree"):
        _end_inside(state["worktree"])  # what left every group, tree and tag but still works there
    from proctor import trail
    from proctor.jobs import take
    from proctor.jobs.lease import Caller
    from proctor.workers import work
    from proctor.workspace import Workspace

    root, job_id, runner_pid = hello["root"], state.get("job"), hello.get("runner")
    with Workspace(root, warn=lambda line: None) as ws:
        landing = state.get("landing")
        if landing:
            from proctor.vcs import git

            if git.head(landing["root"]) == landing["head"]:  # not committed: the person's files go back
                work.restore_landing(landing["root"], landing["saved"], landing["paths"])
            import shutil

            shutil.rmtree(landing.get("kept") or "", ignore_errors=True)
        changed: list[str] = []
        if attempt and attempt.get("before"):
            from proctor.workers import integrity

            try:
                changed = integrity.Snapshot.load(attempt["before"]).settle(
                    lambda old, new: bool(work._landed_by_proctor(ws, old, new)))
            except (OSError, ValueError, KeyError):
                pass
            work._forget(attempt["before"])
        if attempt and job_id:
            reply = _said(attempt)
            stream = attempt.get("stream")
            ref = work._keep_stream(ws, stream) if stream else None
            data = {"number": attempt.get("number"), "worker": attempt.get("worker"),
                    "executor": attempt.get("executor"), "outcome": "interrupted", "stop": "interrupted",
                    "reason": f"stopped: proctor work (pid {runner_pid}) died without ending its worker; its "
                              f"watchdog ended it", "counts": False, "passed": False, "status": "unknown",
                    "failures": changed, "stream": ref, "claim": (reply or "")[:500], "reply_kind":
                    "partial" if reply else None}
            with ws.store.write() as conn:
                trail.append(conn, ws.state_dir, "worker_attempt", f"worker:{attempt.get('worker')}", job_id, data)
                trail.append(conn, ws.state_dir, "worker_claim", f"worker:{attempt.get('worker')}", job_id, {
                    "attempt": attempt.get("number"), "status": "unknown", "aborted": True, "idle_stopped": False,
                    "reply_kind": data["reply_kind"], "interrupted": True}, payload=(reply or "").encode())
        if job_id:
            try:
                take.release(ws, job_id, Caller(None, None, ACTOR),
                             f"proctor work (pid {runner_pid}) died; its watchdog handed the job back")
            except Exception:
                pass
        work.unclaim(ws, hello.get("claimed") or [], runner_pid)
        if state.get("worktree"):
            work._remove_worktree(ws.root, state["worktree"])


def _end_inside(worktree: str) -> None:
    """Kill every process whose working directory is inside the attempt's worktree: the
    worktree is removed next, and nothing of the attempt works there any more."""
    import signal

    real = os.path.realpath(worktree)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd == real or cwd.startswith(real + os.sep):
            try:
                os.kill(int(entry), signal.SIGKILL)
            except OSError:
                pass


def _said(attempt: dict) -> str | None:
    """What the worker had said, read back from its stream file by its executor's parser."""
    from proctor.workers.executors import module as executor_module

    stream = attempt.get("stream")
    try:
        parser = executor_module(attempt.get("executor") or "command").Parser()
        reply = None
        with open(stream, "rb") as handle:
            for raw in handle:
                for event in parser.feed(raw.rstrip(b"\n").decode("utf-8", "replace")):
                    if event.kind == "final":
                        reply = event.text
        if reply is None:
            partial = getattr(parser, "partial", None)
            reply = partial() if callable(partial) else None
            if reply is None:
                for event in parser.close(None):
                    if event.kind == "final":
                        reply = event.text
        return reply
    except Exception:
        return None


if __name__ == "__main__":
    sys.exit(main())
