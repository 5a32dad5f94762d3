"""lease-harness: a leased session rewrites the agent skills."""

from __future__ import annotations

from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "lease-harness"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 100  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a leased session runs proctor agent harness install"
CATCHES = "`proctor agent harness install` by a session acting under a live job, whatever the row says."
WHY = (
    "The skills are what steer every holder; only an unbound caller rewrites them. The command "
    "refuses itself under a checkout binding or a BAGGAGE claim; the guard adds the session and "
    "subagent records a command cannot see."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    if ctx.job is None:
        return []
    for argv in ctx.proctor_commands():
        if argv[:3] == ["agent", "harness", "install"]:
            return [
                (
                    "rule",
                    f"proctor agent harness install rewrites the skills that steer every holder; a "
                    f"session holding {ctx.job['id']} may not; ask the orchestrator",
                )
            ]
    return []
