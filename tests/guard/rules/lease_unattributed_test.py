"""proctor/guard/rules/lease_unattributed.py: lease-unattributed, a write by a session under no live lease to a path a live job owns."""

from __future__ import annotations

from proctor import api
from tests.hook.world import advised, event, reason


def test_unattributed_write_is_recorded(ws, hook):
    before = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["other"]["updated"]
    answer = hook(event(ws, "Bash", {"command": "echo x >> src/b.py"}))
    assert advised(answer, "lease-unattributed") and "proctor job exit other" in reason(answer)
    row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["other"]
    assert row["unattributed"][0]["path"] == "src/b.py" and row["updated"] == before
    assert hook(event(ws, "Bash", {"command": "echo x >> notes.txt"})) == {}


def test_lease_naming_no_live_job_is_an_advisory(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "echo x > src/b.py"}), env={"BAGGAGE": "proctor.lease=ghost"})
    assert advised(answer, "lease-unattributed") and "names no job" in reason(answer)
