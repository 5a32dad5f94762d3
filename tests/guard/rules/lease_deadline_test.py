"""proctor/guard/rules/lease_deadline.py: lease-deadline, a write under a job past its deadline."""

from __future__ import annotations

import os
import time

from proctor import api
from tests.hook.world import denied, event, reason


def test_deadline(ws, hook):
    api.fork({"id": "quick", "write_paths": ["src/q.py"], "check": "test", "timeout": 0.2}, cwd=ws)
    env = {"BAGGAGE": "proctor.lease=quick"}
    assert hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/q.py")}), env=env) == {}
    time.sleep(0.3)
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/q.py")}), env=env)
    assert denied(answer, "lease-deadline") and "passed its deadline" in reason(answer)
