"""proctor/guard/rules/lease_base_diverged.py: lease-base-diverged, a write in a checkout that diverges from the job's checkpoint."""

from __future__ import annotations

import os

from proctor import api
from tests.hook.world import advised, event, reason


def test_base_diverged(ws, hook):
    api.fork({"id": "old", "write_paths": ["src/o.py"], "check": "test", "checkpoint": "0" * 40}, cwd=ws)
    api.exec_job("old", cwd=ws)
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/o.py")}), env={"BAGGAGE": "proctor.lease=old"})
    assert advised(answer, "lease-base-diverged") and "diverges from the checkpoint" in reason(answer)
    api.exit_job("old", cwd=ws)
    api.fork({"id": "fresh", "write_paths": ["src/f.py"], "check": "test"}, cwd=ws)
    api.exec_job("fresh", cwd=ws)
    assert (
        hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/f.py")}), env={"BAGGAGE": "proctor.lease=fresh"})
        == {}
    )
