"""lease-entry: an entry into a job's path lets exactly one write through, when its holder is quiet."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.guard.rules._common import ENTRY_QUIET_SECONDS, open_entry

NAME = "lease-entry"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 10  # first: it marks the paths an entry lets through (ctx.entered), which later rules skip
SUMMARY = "a write through an entry while the job's holder is working"
CATCHES = (
    "A write into a path another live job owns, through an open entry of that job, while the "
    "job's holder made a tool call in the last minute. With the holder quiet, the write passes "
    "and the entry is stamped consumed; the next write needs another entry. The holder's own "
    "next write to an entered path is advised to re-read the file first."
)
WHY = (
    "An entry is how a small change reaches a path a live job owns without ending the job; writing "
    "under a holder that is mid-edit would have both write one file at once."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    findings = []
    entered: set[str] = set()
    own_id = ctx.job["id"] if ctx.job else None
    for rel in ctx.written():
        if ctx.job is not None:
            notice = _unread_entry(ctx, ctx.job, rel)
            if notice:
                findings.append(("advise", notice))
        for holder, _claim in ctx.holders_of(rel):
            if holder["id"] == own_id:
                continue
            entry = open_entry(holder, rel)
            if entry is None:
                continue
            last = _last_call(ctx, holder["id"])
            if last is not None and ctx.now - last < ENTRY_QUIET_SECONDS:
                findings.append(
                    (
                        "rule",
                        f"{rel} is entered on {holder['id']}, but its holder made a tool call "
                        f"{int(ctx.now - last)}s ago; wait until it has been quiet for a "
                        f"minute, then write again",
                    )
                )
                break
            entered.add(rel)
            ctx.if_allowed(_consume(holder["id"], rel, ctx))  # a refused write consumes nothing
            break
    ctx.entered = entered
    return findings


def _last_call(ctx, job_id: str) -> float | None:
    if ctx.conn is None:
        return None
    from proctor.store import events

    at = events.last_time(ctx.conn, job_id, "tool_call")
    if not at:
        return None
    from proctor.timeutil import parse_iso

    return parse_iso(at)


def _consume(job_id: str, rel: str, ctx):
    actor = f"session:{ctx.call.host}:{ctx.call.session or '-'}"

    def action(conn, state_dir):
        from proctor.store.entries import consume

        consume(conn, state_dir, job_id, rel, actor)

    return action


def _unread_entry(ctx, job: dict, rel: str) -> str | None:
    for entry in job.get("entries") or ():
        if entry.get("consumed") and not entry.get("acknowledged") and entry.get("written") == rel:
            ctx.later(_acknowledge(job["id"], entry["entered"]))
            return (
                f"{rel} was written through an entry by {entry.get('consumed_by')} at "
                f"{entry['consumed']}; re-read it before you write it"
            )
    return None


def _acknowledge(job_id: str, entered: str):
    def action(conn, state_dir):
        from proctor.store.entries import acknowledge

        acknowledge(conn, job_id, entered)

    return action
