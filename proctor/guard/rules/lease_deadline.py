"""lease-deadline: a write under a job past its deadline."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.jobrecord import overdue

NAME = "lease-deadline"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 40  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a session writes under a job past its deadline"
CATCHES = (
    "Any write graded under a job whose --timeout deadline has passed; a command whose writes "
    "proctor cannot name is advised."
)
WHY = (
    "A deadline is the forking session's bound on the job; past it the job's paths stop "
    "blocking other jobs, so its holder writing on would race whoever takes them next. The row "
    "stays live: end it with proctor job exit, or ask for a new job."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None or not overdue(job, ctx.now):
        return []
    message = (
        f"{job['id']} passed its deadline {job['deadline']}; return it (proctor job exit "
        f"{job['id']} --stdin) or ask its forking session for a new job"
    )
    if ctx.written():
        return [("rule", message)]
    if ctx.unknown_writes:  # a write proctor cannot name is advised, never refused
        return [("advise", f"this may write ({ctx.unknown_writes[0]}), and {message}")]
    return []
