"""proctor/guard/rules/lease_read_boundary.py: lease-read-boundary, a leased read outside the job's read boundary."""

from __future__ import annotations

import os

from proctor import api
from tests.hook.world import LEASED, advised, denied, event


def test_read_boundary(ws, tmp_path, hook):
    read = lambda path, env: hook(event(ws, "Read", {"file_path": os.path.join(ws, path)}), env=env)  # noqa: E731
    api.fork({"id": "reader", "write_paths": ["src/r.py"], "read_paths": ["docs", "src"], "check": "test"}, cwd=ws)
    assert advised(read("README", LEASED), "lease-read-boundary"), "advisory without a lease taken here"
    assert read("src/a.py", LEASED) == {} and read("src/other.py", LEASED) == {}
    assert api.exec_job("feat", cwd=ws)["state"] == "running"
    assert denied(read("README", LEASED), "lease-read-boundary")
    env = {"BAGGAGE": "proctor.lease=reader"}
    assert read("docs/x.md", env) == {}
    assert advised(read("README", env), "lease-read-boundary")
