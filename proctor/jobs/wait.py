"""`proctor job wait`: verify a filed result against its job and record pass or fail.

Grading reads the tree and runs git, so it happens outside the store's write lock; the
verdict is then recorded only if the job still holds the very result that was graded.
Exit 0 pass; 1 rejected (every failing rule and goal subject named); 2 proctor cannot
answer (no such job, nothing filed, a job that ended without a result).
"""

from __future__ import annotations

from proctor import errors, jobrecord, trail
from proctor.store import rows
from proctor.jobs.lease import Caller
from proctor.jobs.model import EXITED, FAIL, NO_RETURN, PASS, check_job_id
from proctor.jobs.verify import Grade, grade
from proctor.timeutil import iso, now
from proctor.workspace import Workspace


def _load(conn, job_id: str) -> dict:
    job = jobrecord.require(rows.get(conn, job_id), job_id)
    return job


def wait(ws: Workspace, job_id: str, caller: Caller, also: list | None = None) -> tuple[dict, Grade | None]:
    """The job after verification, and the grade made now (None when it was already decided).
    `also`: outcomes the caller observed itself (`proctor work`: an attempt that moved a ref),
    graded with the job's own rules and goals."""
    check_job_id(job_id)
    with ws.store.read() as conn:
        job = _load(conn, job_id)
        if caller.lease and job_id not in rows.descendants(conn, caller.lease):
            raise errors.Refused(
                [
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused wait on {job_id}: a session holding lease {caller.lease} may wait only on "
                        f"jobs forked beneath its own; verifying {job_id} is the forking session's ({caller.whence()})"
                        f"{caller.remedy()}",
                    )
                ]
            )
        if job["state"] in (PASS, FAIL):
            return job, None
        if job["state"] == NO_RETURN:
            raise errors.ProctorError(
                f"{job_id} ended no_return ({job.get('end_reason') or 'no reason recorded'}); nothing was "
                f"filed to verify",
                errors.NOT_FILED,
            )
        if job["state"] != EXITED or not job.get("result"):
            raise errors.ProctorError(
                f"nothing was filed for {job_id} (it is {job['state']}); its holder returns it with "
                f"proctor job exit {job_id} --stdin",
                errors.NOT_FILED,
            )
        graded = grade(conn, job, ws.root, ws.store)
        graded.outcomes.extend(also or ())
    filed = job["result"]["filed"]
    with ws.store.write() as conn:
        job = _load(conn, job_id)
        if job["state"] != EXITED or (job.get("result") or {}).get("filed") != filed:
            raise errors.ProctorError(
                f"{job_id} changed while it was being verified (now {job['state']}); run proctor job "
                f"wait {job_id} again"
            )
        at = now()
        verdict = PASS if graded.passed else FAIL
        job["state"] = verdict
        job["verdict"] = {
            "verdict": verdict,
            "graded": iso(at),
            "by": caller.actor,
            "failures": [o.to_json() for o in graded.failures()],
            "changed": graded.observed.changed if graded.observed else [],
        }
        if verdict == FAIL:
            job["end_reason"] = f"rejected by proctor job wait: {len(graded.failures())} rules or goals failed"
        job["updated"] = iso(at)
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(
            conn,
            ws.state_dir,
            "job_wait",
            caller.actor,
            job_id,
            {"verdict": verdict, "failures": [o.label for o in graded.failures()]},
            when=at,
        )
    return job, graded
