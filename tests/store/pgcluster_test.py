"""tests/store/pgcluster.py, the tests' own PostgreSQL: a cluster whose test process was killed
(its atexit never ran) is stopped and removed when the next session first asks for one; a
cluster whose owner still runs is left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.store import pgcluster

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _postmaster(root: str) -> int:
    with open(os.path.join(root, "data", "postmaster.pid")) as handle:
        return int(handle.readline())


def _alive(pid: int) -> bool:
    return pgcluster._started(pid) != ""


def test_a_killed_sessions_cluster_is_reaped_and_a_live_ones_kept():
    live = pgcluster.require_cluster()
    made = "from tests.store import pgcluster; import time; print(pgcluster.Cluster().start().root, flush=True); time.sleep(300)"
    owner = subprocess.Popen([sys.executable, "-c", made], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        root = owner.stdout.readline().strip()
        assert root.startswith(pgcluster.PREFIX), root
        postmaster = _postmaster(root)
        assert _alive(postmaster)
        assert root not in pgcluster.reap_stale(), "its owner still runs"
    finally:
        owner.kill()
        owner.wait()
    assert _alive(postmaster), "a killed owner leaves its postgres running: what reap_stale is for"
    removed = pgcluster.reap_stale()
    assert root in removed and not os.path.exists(root)
    deadline = time.monotonic() + 60
    while _alive(postmaster) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(postmaster), "the stale cluster's postgres was stopped"
    assert live.root not in removed and os.path.isdir(live.root)
    assert live.execute("SELECT 1") == [(1,)], "the session's own cluster still serves"
