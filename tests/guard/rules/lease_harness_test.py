"""proctor/guard/rules/lease_harness.py: lease-harness, a leased session installing the agent harness."""

from __future__ import annotations

from tests.hook.world import LEASED, denied, event


def test_harness_install_under_a_lease(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "proctor agent harness install"}), env=LEASED)
    assert denied(answer, "lease-harness")
    assert hook(event(ws, "Bash", {"command": "proctor agent harness install"})) == {}
