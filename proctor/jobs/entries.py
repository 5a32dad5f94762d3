"""Entering a job's path: a small change to a path a live job owns, without a new worker.

`{"id": <job>, "enter": <path>}` through `fork --stdin` or the library door records an entry
on the job; the guard then lets ONE write into that path through and stamps the entry
consumed (`consume`). Refused: a job that is not live, a caller that holds the job, a holder
entering a job not forked beneath its own, a path outside the job's write paths (that wants
widening), a second open entry for one path, and a third entry on one job. An entry does
not move the job's `updated`.
"""

from __future__ import annotations


from proctor import errors, jobrecord, trail
from proctor import claims as jpaths
from proctor.store import rows
from proctor.jobs.lease import Caller
from proctor.jobs.model import RECORD_SCHEMA_VERSION, check_job_id, is_live
from proctor.timeutil import iso, now
from proctor.workspace import Workspace

MAX_ENTRIES = 2


def is_entry_record(record: object) -> bool:
    return isinstance(record, dict) and "enter" in record


def enter(ws: Workspace, record: dict, caller: Caller) -> dict:
    from proctor.jobs.model import check_text

    check_text(record)
    extra = sorted(set(record) - {"id", "enter", "schema_version"})
    if extra:
        raise errors.ProctorError(f"an entry record carries only id and enter; remove {extra[0]!r}", errors.BAD_RECORD)
    if record.get("schema_version", RECORD_SCHEMA_VERSION) != RECORD_SCHEMA_VERSION:
        raise errors.ProctorError(f"schema_version {record['schema_version']!r} is not supported", errors.BAD_RECORD)
    job_id = check_job_id(record.get("id"), "id")
    raw = record.get("enter")
    if not isinstance(raw, str) or not raw.strip():
        raise errors.ProctorError("enter must name one path of the job's write paths", errors.BAD_RECORD)
    claim, reasons = jpaths.parse(raw, ws.root, "enter", job_id)
    if reasons:
        raise errors.Refused(reasons)
    assert claim is not None  # parse gives a claim whenever it gives no refusals
    refuse = lambda why: errors.Refused([(errors.BAD_ENTRY, f"refused entry into {job_id}: {why}")])  # noqa: E731
    with ws.store.write() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        if not is_live(job["state"]):
            raise refuse(f"it has ended ({job['state']}); an ended job owns nothing to enter")
        if caller.lease == job_id:
            raise refuse("you hold it; write the path directly")
        if caller.lease and job_id not in rows.descendants(conn, caller.lease):
            raise refuse(
                f"it was not forked beneath your job {caller.lease}; ask its forking session "
                f"({caller.whence()}){caller.remedy()}"
            )
        if not any(jpaths.covers(c, claim.path) if claim.declaration is None else c == claim for c in rows.claims(job)):
            raise refuse(
                f"{claim.spelling} is outside its write paths "
                f"({', '.join(job.get('write_paths') or []) or 'none'}); that wants widening the job, "
                f"which is its forking session's"
            )
        entries = list(job.get("entries") or [])
        if any(e["path"] == claim.spelling and not e.get("consumed") for e in entries):
            raise refuse(f"{claim.spelling} has an open entry already; one write consumes it")
        if len(entries) >= MAX_ENTRIES:
            raise refuse(
                f"it has had {len(entries)} entries; a job entered this often wants its holder, or a job of its own"
            )
        at = now()
        entry = {
            "path": claim.spelling,
            "by": caller.actor,
            "lease": caller.lease,
            "entered": iso(at),
            "consumed": None,
        }
        entries.append(entry)
        job["entries"] = entries
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, "job_enter", caller.actor, job_id, {"path": claim.spelling}, when=at)
    return job


# The guard's side of an entry (open_entry, consume) is core: proctor/store/entries.py.
from proctor.store.entries import consume, open_entry  # noqa: E402,F401
