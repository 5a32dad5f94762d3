"""lease-gate: a leased session runs the release gate, or a target that runs it."""

from __future__ import annotations

from proctor.gate import gate_chain
from proctor.guard.call import PRE_TOOL
from proctor.guard.context import Context

NAME = "lease-gate"
DEFAULT = "deny"
EVENTS = (PRE_TOOL,)
ORDER = 70  # where it is judged among the rules (proctor/guard/rules/__init__.py)
SUMMARY = "a leased session runs the release gate instead of its own check"
CATCHES = (
    "`proctor run <gate>` (jobs.gate, ci by default), or a target whose command runs it, by a "
    "session acting under a job whose own check is not the gate."
)
WHY = (
    "The gate runs ONCE per branch, in the orchestrator's tree, after every job lands. A job's "
    "check is the narrow target it was assigned, so a holder reaching for the whole pipeline is "
    "refused and handed its own check instead. A job whose check names the gate owns it."
)


def check(ctx: Context) -> list[tuple[str, str]]:
    job = ctx.job
    if job is None:
        return []
    gate = ctx.settings.get("gate", "ci")
    targets = ctx.settings.get("targets", {})
    own = (job.get("check") or {}).get("target")
    if own and gate_chain(gate, targets, own):
        return []
    findings = []
    for argv in ctx.proctor_commands():
        if len(argv) >= 2 and argv[0] == "run":
            target = next(iter(ctx.positional(argv[1:])), None)
            chain = gate_chain(gate, targets, target) if target else None
            if chain:
                instead = (
                    f"run your own check instead: proctor run {own}"
                    if own
                    else "your job names no check; ask its forking session"
                )
                findings.append(
                    (
                        "rule",
                        f"proctor run {target} runs the release gate ({chain}), which runs "
                        f"once in the orchestrator's tree after every job lands; {instead}",
                    )
                )
    return findings
