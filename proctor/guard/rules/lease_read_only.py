"""lease-read-only: any write by a session acting under a read-only job."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "lease-read-only"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 30  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a session acting under a read-only job writes"
CATCHES = "Any repository write, by a file tool or a shell command, under a job declared --read-only."
WHY = (
    "A read-only job was forked to look, not to change: its empty write paths are deliberate. "
    "A write under it is a write nobody will verify."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None or not job.get("read_only"):
        return []
    written = ctx.written()
    if written:
        return [
            (
                "rule",
                f"{job['id']} is read-only, and this writes {', '.join(written)}; report what you "
                f"found in the job's result instead",
            )
        ]
    if ctx.unknown_writes:
        return [("advise", f"{job['id']} is read-only, and this may write ({ctx.unknown_writes[0]})")]
    return []
