"""proctor/guard/rules/lease_gate.py: lease-gate, a leased session running a target that is not its job's check."""

from __future__ import annotations

from tests.hook.world import LEASED, denied, event, reason


def test_gate(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "proctor run ci"}), env=LEASED)
    assert denied(answer, "lease-gate") and "proctor run test" in reason(answer)
    chained = hook(event(ws, "Bash", {"command": "cd src && proctor run full -o json"}), env=LEASED)
    assert denied(chained, "lease-gate") and "full -> ci" in reason(chained)
    assert hook(event(ws, "Bash", {"command": "proctor run test"}), env=LEASED) == {}
    assert hook(event(ws, "Bash", {"command": "proctor run ci"})) == {}, "an unleased caller runs the gate"
