"""proctor/guard/rules/lease_foreign_path.py: lease-foreign-path, a leased write to a path another live job holds."""

from __future__ import annotations

import os
import time

from proctor import api
from tests.hook.world import LEASED, denied, event, reason


def test_foreign_path_names_age_and_exit(ws, hook):
    answer = hook(
        event(ws, "Edit", {"file_path": os.path.join(ws, "src/b.py"), "old_string": "a", "new_string": "b"}), env=LEASED
    )
    assert denied(answer, "lease-foreign-path")
    assert "held by other" in reason(answer) and "ago" in reason(answer)
    assert "proctor job exit other" in reason(answer)


def test_foreign_path_past_deadline_owns_nothing(ws, hook):
    api.fork({"id": "late", "write_paths": ["src/a.py"], "check": "test", "timeout": 0.2}, cwd=ws)
    time.sleep(0.3)
    assert not denied(
        hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/a.py")}), env=LEASED), "lease-foreign-path"
    )
