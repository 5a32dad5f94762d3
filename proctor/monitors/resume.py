"""Waking a finished `proctor work` worker with a follow-up: its CLI is resumed on the same
session (`claude --resume`, `opencode --session`, `codex exec resume`) with the follow-up as
its next message. A worker still running (its `proctor work` is alive) is left working."""

from __future__ import annotations

import os

from proctor import trail
from proctor.store import followups
from proctor.store import rows
from proctor.workspace import Workspace


def _alive(pid) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def deliver_to_worker(root: str, job_id: str) -> bool:
    from proctor.workers import runner
    from proctor.workers.executors import module as executor_module
    from proctor.workers.work import worker_env

    with Workspace(root, warn=lambda line: None) as ws:
        with ws.store.read() as conn:
            job = rows.get(conn, job_id)
            attempts = trail.events(conn, job=job_id, kind="worker_attempt")
            ready = followups.next_ready(conn, job_id)
        if job is None or not attempts or ready is None or _alive(job.get("worker_pid")):
            return False
        last = attempts[-1]["data"] or {}
        worker = ws.config.workers.get(last.get("worker"))
        session = last.get("session")
        if worker is None or not session:
            return False
        module = executor_module(worker.executor)
        argv = module.argv(worker, ready["text"], resume=session, lease=job_id)
        # a fresh secret for the resumed agent, so it manages its job's monitors as before
        import hashlib

        nonce = os.urandom(18).hex()
        with ws.store.write() as conn:
            row = rows.get(conn, job_id)
            row["nonce_sha256"] = hashlib.sha256(nonce.encode()).hexdigest()
            rows.put(conn, row, row["_root"], row["_depth"])
        limits = runner.Limits(idle=ws.config.idle_limit_seconds, grace=ws.config["jobs.grace_seconds"],
                               wall=worker.wall_minutes * 60 if worker.wall_minutes else None,
                               spend=worker.max_spend_usd)
        # the attempt's worktree is gone once proctor work ended the job: the session is resumed
        # in a fresh one at the same path (a CLI finds a session by its project directory), on the
        # landed tree, and removed after
        from proctor.vcs import git
        from proctor.workers import work as jwork

        where, made = job.get("checkout_root"), None
        if not where or not os.path.isdir(where):
            head = git.head(ws.root)
            made = where = jwork.make_worktree(ws, job_id, head, head)[0] if head else ws.root
        try:
            attempt = runner.run_attempt(argv, module.Parser(), limits, where, worker_env(job_id, nonce, module),
                                         stdin_text=ready["text"] if module.PROMPT_ON_STDIN else None)
        finally:
            if made and made != ws.root:
                jwork.remove_worktree(ws.root, made)
        if attempt.reason.startswith("could not start"):
            return False  # not handed over: it stays ready for the next chance
        with ws.store.write() as conn:
            followups.mark_delivered(conn, ready["id"], f"resume:{worker.name}:{session}")
            data = {"worker": worker.name, "executor": worker.executor, "followup": ready["id"], **attempt.to_json()}
            data.pop("reply", None)
            trail.append(conn, ws.state_dir, "worker_attempt", f"worker:{worker.name}", job_id, data)
            trail.append(conn, ws.state_dir, "worker_claim", f"worker:{worker.name}", job_id, {
                "followup": ready["id"], "status": "unknown", "aborted": attempt.outcome == "aborted",
                "idle_stopped": attempt.stop == "idle"}, payload=(attempt.reply or "").encode("utf-8", "replace"))
        return True
