"""lease-base-diverged: a holder writes its own path from a base that diverges from its checkpoint."""

from __future__ import annotations

from proctor import claims
from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context
from proctor.guard.rules._common import own_claims

NAME = "lease-base-diverged"
DEFAULT = "advise"
EVENTS = (PRE_TOOL,)
ORDER = 120  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a holder writes its own path from a base that diverges from the checkpoint it was handed"
CATCHES = (
    "A write to one of the job's own paths when proctor job exec recorded that this checkout "
    "landed on a different tree than the checkpoint the job was handed."
)
WHY = (
    "Hosts that isolate workers often branch them from an older revision than the tree that was "
    "partitioned. The divergence is a fact, not a refusal: the holder should know its edits are "
    "made against a tree its orchestrator never saw."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None or not job.get("base_diverges"):
        return []
    mine = own_claims(job)
    own = [rel for rel in ctx.written() if any(claims.covers(c, rel) for c in mine)]
    if not own:
        return []
    return [
        (
            "rule",
            f"you are writing {', '.join(own)} on base {job.get('base')}, which diverges from the "
            f"checkpoint {job.get('checkpoint')} that {job['id']} was handed",
        )
    ]
