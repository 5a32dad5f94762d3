"""proctor/guard/rules/lease_entry.py: lease-entry, one write let through to a held path by an entry."""

from __future__ import annotations

import os

from proctor import api
from tests.hook.world import advised, denied, event, reason


def test_entry_lets_one_write_through(ws, hook):
    path = os.path.join(ws, "src/b.py")
    # the holder of `other` is working: a tool call graded under it just now
    assert hook(event(ws, "Write", {"file_path": path}, session="holder"), env={"BAGGAGE": "proctor.lease=other"}) == {}
    api.fork({"id": "other", "enter": "src/b.py"}, cwd=ws)
    # the orchestrator (no lease) writes the entered path
    busy = hook(event(ws, "Write", {"file_path": path}, session="orchestrator"))
    assert denied(busy, "lease-entry") and "made a tool call" in reason(busy)
    from proctor.guard.rules import _common

    original = _common.ENTRY_QUIET_SECONDS
    try:
        import proctor.guard.rules.lease_entry as entry_rule

        entry_rule.ENTRY_QUIET_SECONDS = 0.0
        assert hook(event(ws, "Write", {"file_path": path}, session="orchestrator")) == {}
        assert advised(hook(event(ws, "Write", {"file_path": path}, session="orchestrator")), "lease-unattributed"), (
            "the next write needs another entry"
        )
        row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["other"]
        assert row["entries"][0]["consumed"] and row["entries"][0]["written"] == "src/b.py"
        notice = hook(event(ws, "Write", {"file_path": path}, session="holder"), env={"BAGGAGE": "proctor.lease=other"})
        assert advised(notice, "lease-entry") and "re-read it" in reason(notice)
        assert (
            hook(event(ws, "Write", {"file_path": path}, session="holder"), env={"BAGGAGE": "proctor.lease=other"})
            == {}
        ), "told once"
    finally:
        entry_rule.ENTRY_QUIET_SECONDS = original


def test_entry_for_a_leased_writer_and_refused_writes_consume_nothing(ws, hook):
    api.fork({"id": "P", "write_paths": ["src/c.py", "src/d.py"], "check": "test"}, cwd=ws)
    api.fork({"id": "P/K", "parent": "P", "write_paths": ["src/d.py"], "check": "test"}, cwd=ws)
    api.fork({"id": "P/K", "enter": "src/d.py"}, cwd=ws, environ={"BAGGAGE": "proctor.lease=P"})
    env = {"BAGGAGE": "proctor.lease=P"}
    # refused for another reason (a path outside P as well): the entry stays open
    both = hook(event(ws, "Bash", {"command": "touch src/d.py README"}), env=env)
    assert denied(both, "lease-write-scope")
    row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["P/K"]
    assert row["entries"][0]["consumed"] is None
    assert hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/d.py")}), env=env) == {}
    row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["P/K"]
    assert row["entries"][0]["consumed"]
    assert denied(hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/d.py")}), env=env), "lease-foreign-path")
