"""Entries on a job row, as the guard consumes them: core, so the hook can stamp an entry
without loading the job store's rules (jobs/entries.py records entries and refuses them)."""

from __future__ import annotations

import time

from proctor import claims, trail
from proctor.store import rows
from proctor.timeutil import iso

TYPE_CHECKING = False
if TYPE_CHECKING:
    from proctor.store import Tx


def entry_covering(job: dict, path: str) -> dict | None:
    """The open (unconsumed) entry of a job row covering repository-relative file `path`."""
    for entry in job.get("entries") or ():
        if entry.get("consumed"):
            continue
        spelled, declaration, _ = claims.split_entry(entry["path"])
        if claims.covers(claims.Claim(spelled, declaration), path):
            return entry
    return None


def open_entry(conn: Tx, job_id: str, path: str) -> dict | None:
    """The open entry of `job_id` covering repository-relative file `path`, if any."""
    job = rows.get(conn, job_id)
    return entry_covering(job, path) if job is not None else None


def consume(conn: Tx, state_dir: str, job_id: str, path: str, actor: str) -> dict | None:
    """Stamp the open entry covering `path` consumed (inside the caller's write transaction).
    The job's `updated` does not move: an entry is not the holder's own write."""
    job = rows.get(conn, job_id)
    entry = open_entry(conn, job_id, path)
    if job is None or entry is None:
        return None
    at = iso(time.time())
    for candidate in job["entries"]:
        if candidate["path"] == entry["path"] and not candidate.get("consumed"):
            candidate["consumed"] = at
            candidate["consumed_by"] = actor
            candidate["written"] = path
            break
    rows.put(conn, job, job["_root"], job["_depth"])
    trail.append(conn, state_dir, "job_entry_consumed", actor, job_id, {"path": path})
    return entry


def acknowledge(conn: Tx, job_id: str, entered: str) -> None:
    """The holder was told of a consumed entry; tell it once."""
    job = rows.get(conn, job_id)
    if job is None:
        return
    for entry in job.get("entries") or ():
        if entry.get("entered") == entered:
            entry["acknowledged"] = iso(time.time())
    rows.put(conn, job, job["_root"], job["_depth"])
