"""lease-read-boundary: a leased session reads outside what its job was pointed at."""

from __future__ import annotations

from proctor import claims
from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "lease-read-boundary"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 110  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a leased session reads outside its job's read boundary"
CATCHES = (
    "A file tool's read (Read, Glob, Grep, ...) of a repository path outside the job's read "
    "paths; when read_paths is empty, outside the directories of its write paths and of the "
    "jobs it depends on. Refused when the lease was taken on this checkout (proctor job exec); "
    "advised otherwise."
)
WHY = (
    "write_paths stand in for read_paths because a holder leased to edit a place was pointed at "
    "that place. Set read_paths when a holder must READ what it must not WRITE: widening "
    "write_paths to open a read is how two holders end up owning one file. A hard read boundary "
    "needs somebody to have declared one, so without a lease taken on the checkout it only advises."
)


def boundary(ctx, job: dict) -> list[claims.Claim]:
    from proctor.store.rows import read_boundary

    return read_boundary(job, ctx.job_row)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None or not ctx.call.reads:
        return []
    allowed = boundary(ctx, job)
    if not allowed:
        return []
    from proctor.jobrecord import taken_here as _taken_here

    taken_here = _taken_here(job, ctx.root)
    level = "rule" if taken_here else "advise"
    findings = []
    for rel in ctx.read():
        if not any(claims.covers(c, rel) or claims.contains(rel if rel != "." else "", c.key) for c in allowed):
            shown = ", ".join(c.path for c in allowed)
            findings.append(
                (
                    level,
                    f"{rel} is outside what {job['id']} may read ({shown}); ask its forking "
                    f"session to add it to read_paths",
                )
            )
    return findings
