"""Targets as jobs name them: a check must name a defined target, never the release gate
nor a target whose command runs the gate (`proctor run ci` inside another target)."""

from __future__ import annotations

from proctor import config as config_mod
from proctor import gate as _gate
from proctor import errors
from proctor.jobs.model import goal_list


def gate_chain(cfg: config_mod.Config, target: str) -> str | None:
    """The gate, or the chain of targets by which `target` runs it; None if it does not."""
    return _gate.gate_chain(cfg.gate, {name: t.command for name, t in cfg.targets.items()}, target)


def check_refusals(cfg: config_mod.Config, job_id: str, job: dict) -> list[tuple[str, str]]:
    """A check (or check goal) naming no target, or the gate, or a target chaining to it."""
    reasons = []
    for goal in goal_list(job):
        if goal["kind"] != "check":
            continue
        target = goal["check"]["target"]
        what = "--check" if goal["id"] == "check" else f"goal {goal['id']!r}"
        chain = gate_chain(cfg, target)
        if chain:
            reasons.append(
                (
                    errors.CHECK_IS_GATE,
                    f"refused fork of {job_id}: {what} names the release gate ({chain}); the gate runs "
                    f"once, in the orchestrator's tree, after every job lands; give the job its own "
                    f"narrow target",
                )
            )
        elif target not in cfg.targets:
            known = ", ".join(sorted(t for t in cfg.targets if t != cfg.gate)) or "none defined"
            reasons.append(
                (
                    errors.CHECK_UNKNOWN_TARGET,
                    f"refused fork of {job_id}: {what} names target {target!r}, which proctor.toml "
                    f"does not define (targets: {known}); add [targets.{target}] with a command",
                )
            )
    return reasons
