"""The release gate: the one target that runs once, in the orchestrator's tree, after every
job lands. A target "reaches" the gate when it is the gate or its command runs
`proctor run <target>` that reaches it. Core, because the job store refuses such checks and
the guard refuses a leased session running them; both ask here."""

from __future__ import annotations

import re

_RUNS = re.compile(r"\bproctor\s+run\s+([A-Za-z0-9][A-Za-z0-9_.-]*)")


def gate_chain(gate: str, commands: dict[str, str], target: str, seen: frozenset = frozenset()) -> str | None:
    """The gate, or the chain (`full -> ci`) by which `target` runs it; None if it does not."""
    if target == gate:
        return gate
    command = commands.get(target)
    if command is None or target in seen:
        return None
    for match in _RUNS.finditer(command):
        found = gate_chain(gate, commands, match.group(1), seen | {target})
        if found:
            return f"{target} -> {found}"
    return None
