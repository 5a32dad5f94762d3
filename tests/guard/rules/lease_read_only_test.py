"""proctor/guard/rules/lease_read_only.py: lease-read-only, a write under a read-only job."""

from __future__ import annotations

from proctor import api
from tests.hook.world import denied, event


def test_read_only_job(ws, hook):
    api.fork({"id": "look", "read_only": True}, cwd=ws)
    env = {"BAGGAGE": "proctor.lease=look"}
    assert denied(hook(event(ws, "Bash", {"command": "touch notes.txt"}), env=env), "lease-read-only")
    assert hook(event(ws, "Bash", {"command": "grep -r foo src"}), env=env) == {}
