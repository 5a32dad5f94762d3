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
    """The runner's side. Every message carries a token only this process and its watchdog know,
    so a line a worker writes into the watchdog's stdin (through /proc/<pid>/fd/0) is ignored.
    Sends never block: a watchdog that is gone, stopped, or whose pipe is full is replaced by a
    new one handed the whole state, and `tampered` says so (the attempt that did it fails)."""

    def __init__(self, ws, claimed: list[str]) -> None:
        import secrets

        self.ws, self.claimed = ws, claimed
        self.token = secrets.token_hex(16)
        self.state: dict = {}
        self.tampered: str | None = None
        self.proc: subprocess.Popen | None = None
        import threading

        self.lock = threading.RLock()
        self.closing = False

    @classmethod
    def start(cls, ws, claimed: list[str]) -> "Watchdog":
        import threading

        dog = cls(ws, claimed)
        with dog.lock:
            dog._spawn()
        threading.Thread(target=dog._keep, daemon=True, name="proctor-watchdog-keeper").start()
        return dog

    def _keep(self) -> None:
        """Wait on the watchdog; one that dies before goodbye (killed by a worker) is replaced
        at once, so the runner is never without one for longer than it takes to start."""
        while True:
            proc = self.proc
            if proc is None:
                return
            proc.wait()
            with self.lock:
                if self.closing or self.proc is None:
                    return
                if self.proc is proc:
                    self._replace("proctor's watchdog was killed while the attempt ran")

    def _spawn(self) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE", "PROCTOR_LEASE")}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "proctor.workers.watchdog"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=self.ws.root,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            self.ws.warn(
                f"proctor: no watchdog ({exc.strerror}): if this process is killed with SIGKILL its worker runs on"
            )
            self.proc = None
            return
        assert self.proc.stdin is not None  # started with stdin=PIPE
        os.set_blocking(self.proc.stdin.fileno(), False)
        hello = {"hello": {"root": self.ws.root, "runner": os.getpid(), "claimed": self.claimed}}
        if self.state:
            hello["state"] = self.state
        self._write(hello)

    def tell(self, **state) -> None:
        with self.lock:
            self.state.update(state)
            self._send({"state": self.state})

    def close(self) -> None:
        with self.lock:
            self.closing = True
        if self.proc is None:
            return
        with self.lock:
            self._send({"goodbye": True})
        assert self.proc.stdin is not None  # started with stdin=PIPE
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def _send(self, message: dict) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            self._replace("proctor's watchdog was killed while the attempt ran")
            return
        if not self._write(message):
            self._replace("proctor's watchdog stopped reading (stopped, or its pipe filled) while the attempt ran")

    def _write(self, message: dict) -> bool:
        data = (json.dumps(dict(message, token=self.token)) + "\n").encode()
        # its callers (_spawn, _send) write only to a watchdog started, with stdin=PIPE
        assert self.proc is not None and self.proc.stdin is not None
        try:
            written = os.write(self.proc.stdin.fileno(), data)
        except (BlockingIOError, BrokenPipeError, OSError):
            return False
        return written == len(data)

    def _replace(self, why: str) -> None:
        import signal

        self.tampered = self.tampered or why
        old = self.proc
        # its callers saw it set, under the lock; it was started with stdin=PIPE
        assert old is not None and old.stdin is not None
        try:
            os.killpg(old.pid, signal.SIGKILL)  # its own session: nothing else is in the group
        except OSError:
            pass
        try:
            old.stdin.close()
        except OSError:
            pass
        old.wait()
        self._spawn()  # a new one, handed the whole state


def main() -> int:
    hello: dict = {}
    state: dict = {}
    goodbye = False
    token = None
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if token is None and "hello" in message:  # the first line, written before any worker ran
            hello, token = message["hello"], message.get("token")
            state = message.get("state") or {}
            continue
        if token is None or message.get("token") != token:
            continue  # not the runner's: a worker writing into this pipe
        if "state" in message:
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
                    lambda old, new: bool(work.landed_by_proctor(ws, old, new))
                )
            except (OSError, ValueError, KeyError):
                pass
            work.forget(attempt["before"])
        finished = state.get("finished")
        if finished and job_id and not attempt:
            # the worker had finished; proctor died while it graded the attempt
            data = {k: v for k, v in finished.items() if k != "reply"}
            data.update(
                passed=False,
                status="unknown",
                claim=(finished.get("reply") or "")[:500],
                failures=list(finished.get("failures") or [])
                + [f"proctor work (pid {runner_pid}) died while it ran the check: the attempt was not graded"],
            )
            with ws.store.write() as conn:
                trail.append(conn, ws.state_dir, "worker_attempt", f"worker:{finished.get('worker')}", job_id, data)
                trail.append(
                    conn,
                    ws.state_dir,
                    "worker_claim",
                    f"worker:{finished.get('worker')}",
                    job_id,
                    {
                        "attempt": finished.get("number"),
                        "status": "unknown",
                        "aborted": finished.get("outcome") != "finished",
                        "idle_stopped": finished.get("stop") == "idle",
                        "reply_kind": finished.get("reply_kind"),
                        "interrupted": True,
                    },
                    payload=(finished.get("reply") or "").encode("utf-8", "replace"),
                )
        if attempt and job_id:
            reply = _said(attempt)
            stream = attempt.get("stream")
            ref, stderr_ref = work.keep_stream(ws, stream) if stream else (None, None)
            data = {
                "number": attempt.get("number"),
                "worker": attempt.get("worker"),
                "executor": attempt.get("executor"),
                "outcome": "interrupted",
                "stop": "interrupted",
                "reason": f"stopped: proctor work (pid {runner_pid}) died without ending its worker; its "
                f"watchdog ended it",
                "counts": False,
                "passed": False,
                "status": "unknown",
                "failures": changed,
                "stream": ref,
                "stderr_stream": stderr_ref,
                "claim": (reply or "")[:500],
                "reply_kind": "partial" if reply else None,
            }
            if attempt.get("followup") is not None:  # a session a follow-up resumed
                from proctor.store import followups

                with ws.store.read() as conn:
                    delivered = followups.delivered_at(conn, attempt["followup"])
                data.update(followup=attempt["followup"], followup_delivered=bool(delivered))
            with ws.store.write() as conn:
                trail.append(conn, ws.state_dir, "worker_attempt", f"worker:{attempt.get('worker')}", job_id, data)
                trail.append(
                    conn,
                    ws.state_dir,
                    "worker_claim",
                    f"worker:{attempt.get('worker')}",
                    job_id,
                    {
                        "attempt": attempt.get("number"),
                        "status": "unknown",
                        "aborted": True,
                        "idle_stopped": False,
                        "reply_kind": data["reply_kind"],
                        "interrupted": True,
                    },
                    payload=(reply or "").encode(),
                )
        if job_id:
            try:
                take.release(
                    ws,
                    job_id,
                    Caller(None, None, ACTOR),
                    f"proctor work (pid {runner_pid}) died; its watchdog handed the job back",
                )
            except Exception:
                pass
        work.unclaim(ws, hello.get("claimed") or [], runner_pid)
        if state.get("worktree"):
            work.remove_worktree(ws.root, state["worktree"])


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
    if stream is None:  # nothing to read back (open(None) raised, and was caught below, before)
        return None
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
