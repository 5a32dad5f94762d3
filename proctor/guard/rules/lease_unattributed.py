"""lease-unattributed: a writer proctor cannot attribute writes a path a live job owns."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.guard.rules._common import age

NAME = "lease-unattributed"
DEFAULT = "advise"
EVENTS = (PRE_TOOL,)
ORDER = 130  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a session under no live lease writes a path a live job owns"
CATCHES = (
    "A write by a session that names no live job (no --lease, no record, no BAGGAGE, or one "
    "naming a job that has ended) to a path a live job's write paths cover. The write is recorded "
    "on that job's unattributed paths."
)
WHY = (
    "proctor never blocks a writer it cannot attribute: a person in their own checkout names no "
    "job either. It tells the writer whose path this is, and records the write on the job, whose "
    "holder and verifier would otherwise find a change nobody explains."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    findings = []
    if ctx.store_note:
        findings.append(("advise", ctx.store_note))
    if ctx.lease_note:
        findings.append(("advise", ctx.lease_note))
    if ctx.job is not None:
        return findings
    entered = ctx.entered
    for rel in ctx.written():
        if rel in entered:
            continue
        # the live job that owns the path: of a root and the child it handed the path to, the
        # child (the one whose holder will be asked about it), then the narrowest claim
        owners = sorted(
            ctx.holders_of(rel),
            key=lambda pair: (-len(ctx.ancestors(pair[0]["id"])), pair[1].glob, -len(pair[1].path), pair[0]["id"]),
        )
        for other, claim in owners:
            findings.append(
                (
                    "rule",
                    f"{rel} belongs to {other['id']} ({claim.spelling}), updated "
                    f"{age(other, ctx.now)} ago; this write is recorded as unattributed "
                    f"on it; enter its path, or end it with proctor job exit {other['id']}",
                )
            )
            ctx.later(_record(other["id"], rel, ctx))
            break
    return findings


def _record(job_id: str, rel: str, ctx):
    who = f"{ctx.call.host}:{ctx.call.session or '-'}"
    when = ctx.now

    def action(conn, state_dir):
        from proctor.store import rows
        from proctor.timeutil import iso

        job = rows.get(conn, job_id)
        if job is None:
            return
        job.setdefault("unattributed", []).append({"path": rel, "by": who, "time": iso(when)})
        rows.put(conn, job, job["_root"], job["_depth"])  # `updated` stays: not the holder's write

    return action
