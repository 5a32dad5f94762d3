"""Taking and ending a lease: `proctor job exec` and `proctor job exit` (abandon).

exec takes a job in this checkout: it records the base the tree landed on beside the
checkpoint the job was handed (a divergence is a fact, never a refusal), the checkout, and
the checkout's binding. Taking is one-way while the held job is in flight: a caller whose
job is still declared or running may not take a different one; retaking the held job only
records the base.
"""

from __future__ import annotations

import os

from proctor import errors, trail
from proctor.store import rows
from proctor.jobs.lease import Caller, bind_checkout
from proctor.jobs.model import DECLARED, EXITED, NO_RETURN, RUNNING, TERMINAL, check_job_id
from proctor.timeutil import iso, now
from proctor.vcs import checkpoint as vcs_checkpoint
from proctor.workspace import Workspace


def _get_live(conn, job_id: str, verb: str) -> dict:
    job = rows.get(conn, job_id)
    if job is None:
        raise errors.ProctorError(
            f"no job {job_id}; proctor ls jobs lists the jobs of this repository", errors.UNKNOWN_JOB)
    if job["state"] in TERMINAL:
        raise errors.Refused([(errors.NOT_LIVE,
            f"refused {verb} of {job_id}: it has ended ({job['state']}"
            + (f": {job['end_reason']}" if job.get("end_reason") else "") + ")")])
    return job


def exec_job(ws: Workspace, job_id: str, caller: Caller) -> dict:
    check_job_id(job_id)
    root = os.path.realpath(ws.root)
    taken = vcs_checkpoint.take(ws.root)
    base = taken.name if taken.revision else None
    with ws.store.write() as conn:
        job = _get_live(conn, job_id, "exec")
        if caller.lease and caller.lease != job_id:
            held = rows.get(conn, caller.lease)
            if held is not None and held["state"] in (DECLARED, RUNNING):
                raise errors.Refused([(errors.LEASE_HELD,
                    f"refused exec of {job_id}: you hold {caller.lease} ({held['state']}, from "
                    f"{caller.lease_from}), and taking a lease is one-way while a job is in flight; "
                    f"return it first (proctor job exit {caller.lease})")])
        if job["state"] == EXITED:
            raise errors.Refused([(errors.NOT_LIVE,
                f"refused exec of {job_id}: it has exited and waits for verification "
                f"(proctor job wait {job_id})")])
        retake = job["state"] == RUNNING and os.path.realpath(job.get("checkout_root") or "") == root
        if job["state"] == RUNNING and not retake:
            raise errors.Refused([(errors.LEASE_HELD,
                f"refused exec of {job_id}: it is taken in {job['checkout_root']}; end it there "
                f"(proctor job exit {job_id}) or fork a new job")])
        at = now()
        if not retake or not job.get("base"):
            # the tree this checkout LANDED on; a retake keeps it, since the holder's own edits
            # since then are not a divergence from what it was handed
            job["base"] = base
            job["base_diverges"] = bool(job.get("checkpoint")) and base != job.get("checkpoint")
        job["checkout_root"] = root
        job["state"] = RUNNING
        job["updated"] = iso(at)
        job.setdefault("taken", iso(at))
        if not retake:
            job["taken"] = iso(at)
        # the job's secret, handed to the agent that works it: with it the agent manages this
        # job's monitors and nothing else. Only its digest is stored.
        import hashlib

        nonce = os.urandom(18).hex()
        job["nonce_sha256"] = hashlib.sha256(nonce.encode()).hexdigest()
        rows.put(conn, job, job["_root"], job["_depth"])
        bind_checkout(conn, root, job_id)
        trail.append(conn, ws.state_dir, "job_exec", caller.actor, job_id,
                     {"checkout": root, "base": base, "checkpoint": job.get("checkpoint"),
                      "diverges": job["base_diverges"], "retake": retake}, when=at)
    job["_nonce"] = nonce
    return job


def abandon(ws: Workspace, job_id: str, caller: Caller) -> dict:
    """`proctor job exit <id>` with no result: the job is recorded no_return."""
    check_job_id(job_id)
    with ws.store.write() as conn:
        job = _get_live(conn, job_id, "exit")
        if caller.lease and caller.lease != job_id:
            raise errors.Refused([(errors.NOT_YOUR_JOB,
                f"refused exit of {job_id}: a session holding lease {caller.lease} may end only its own "
                f"job; ending {job_id} is the forking session's")])
        at = now()
        job["state"] = NO_RETURN
        job["end_reason"] = f"abandoned by {caller.actor}: proctor job exit without a result"
        job["updated"] = iso(at)
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, "job_exit", caller.actor, job_id,
                     {"state": NO_RETURN, "abandoned": True}, when=at)
    return job


def reopen(ws: Workspace, job_id: str, caller: Caller) -> dict:
    """Put an exited job back to work for another attempt (the runner's move, an unleased
    caller's): its filed result is kept in `previous_results`, its state is running again."""
    check_job_id(job_id)
    if caller.lease:
        raise errors.Refused([(errors.NOT_YOUR_JOB,
            f"refused to reopen {job_id}: only its forking session (an unleased caller) puts it back to work")])
    with ws.store.write() as conn:
        job = rows.get(conn, job_id)
        if job is None or job["state"] != EXITED:
            return job or {}
        job.setdefault("previous_results", []).append(job.pop("result", None))
        job["state"] = RUNNING
        job["updated"] = iso(now())
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, "job_reopened", caller.actor, job_id, {})
    return job


def put_away(ws: Workspace, job_id: str, how: str, caller: Caller) -> dict | None:
    """Archive, trash or delete a job (the forking session's move). Its monitors are deleted
    for good by the server; a deleted row is gone with its paths."""
    check_job_id(job_id)
    if caller.lease:
        raise errors.Refused([(errors.NOT_YOUR_JOB,
            f"refused to {how} {job_id}: a session holding lease {caller.lease} may not; it is the forking "
            f"session's")])
    with ws.store.write() as conn:
        job = rows.get(conn, job_id)
        if job is None:
            raise errors.ProctorError(f"no job {job_id}; proctor ls jobs lists them", errors.UNKNOWN_JOB)
        at = iso(now())
        if how == "delete":
            conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
            conn.execute("DELETE FROM job_paths WHERE job = ?", (job_id,))
        else:
            job["archived" if how == "archive" else "trashed"] = at
            rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, f"job_{how}", caller.actor, job_id, {})
    return None if how == "delete" else job
