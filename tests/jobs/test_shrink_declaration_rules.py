"""jobs/fork.py records `declaration_rules` (the patterns each claimed file's declarations are
read by: git's config and attributes are the holder's to write, and must not move its
boundary) for every record, the holder shrinking its own row to a declaration claim included:
that branch used to copy only write_paths, leaving the new claim to be graded by whatever
patterns the checkout has then. Found by an adversarial review."""

from __future__ import annotations

from proctor import api
from tests.guard.guard_lease import job_row, ws  # noqa: F401 (fixtures)


def test_a_holder_shrinking_to_a_declaration_records_its_rules(ws):  # noqa: F811
    with open(f"{ws}/plan/w1/a.py", "w") as handle:
        handle.write("def foo():\n    return 1\n\n\ndef bar():\n    return 2\n")
    # the same claim, forked by the orchestrator: its rules are recorded
    api.fork({"id": "fresh", "write_paths": ["plan/w1/a.py#foo"], "check": "test"}, cwd=ws)
    assert "plan/w1/a.py" in (job_row(ws, "fresh").get("declaration_rules") or {})
    api.fork({"id": "fresh", "write_paths": ["docs/**"], "check": "test"}, cwd=ws)  # give the claim back
    # the holder shrinks w1 to the same declaration claim under its lease
    api.fork({"id": "w1", "write_paths": ["plan/w1/a.py#foo"]}, lease="w1", cwd=ws)
    row = job_row(ws, "w1")
    assert row["write_paths"] == ["plan/w1/a.py#foo"]
    assert "plan/w1/a.py" in (row.get("declaration_rules") or {}), (
        f"w1's row: declaration_rules={row.get('declaration_rules')}"
    )
