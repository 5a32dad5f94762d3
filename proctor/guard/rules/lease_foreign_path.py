"""lease-foreign-path: a leased session writes a path another live job holds."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.guard.rules._common import age
from proctor.jobrecord import overdue

NAME = "lease-foreign-path"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 50  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a leased session writes a path another live job holds"
CATCHES = (
    "A write, under a live job, to a path that another live job's write paths cover (its own "
    "ancestors excepted, which hold what they forked it)."
)
WHY = (
    "Two holders editing one file each believe theirs wins. The denial says how long ago the "
    "other job was updated and names proctor job exit <id>, which releases a job nobody holds "
    "any more; a job past its deadline owns nothing against other jobs."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None:
        return []
    family = set(ctx.ancestors(job["id"])) | {job["id"]}
    entered = ctx.entered
    findings = []
    for rel in ctx.written():
        if rel in entered:
            continue
        for other, claim in ctx.holders_of(rel):
            if other["id"] in family or overdue(other, ctx.now) or claim.declaration is not None:
                continue  # (a claim of one declaration is lease-claimed-declaration's)
            where = f", taken in {other['checkout_root']}" if other.get("checkout_root") else ""
            findings.append(
                (
                    "rule",
                    f"{rel} is held by {other['id']} ({claim.spelling}{where}), updated "
                    f"{age(other, ctx.now)} ago; if nobody holds it any more, end it with "
                    f"proctor job exit {other['id']}, or enter its path",
                )
            )
            break
    return findings
