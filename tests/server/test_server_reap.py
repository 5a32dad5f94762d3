"""The server reaps too (jobs/reap.py, "Jobs proctor ends itself"): against a real `proctor
server start` in a real repository, a job whose parent ended, or whose checkout was deleted,
is ended no_return by the server within seconds, with no further proctor command run, and
its monitors are deleted and their commands stop. The server's API reads reap first. The
server's own jobs are never ended this way.

Between the event and the assertions these tests read only the store (its own driver, read-only)
and the server's HTTP API."""

from __future__ import annotations

import json
import os
import shutil
import time
from types import SimpleNamespace

import pytest

from tests.support import git
from tests.store.store_oracle import connect
from tests.server.test_server import Server, cli, wait_for

CONFIG = "[targets.test]\ncommand = 'true'\n"


def _db_path(root: str) -> str:
    from proctor.paths import find_checkout, repo_state_dir

    return os.path.join(repo_state_dir(find_checkout(root)), "proctor.db")


class Reader:
    """The store, read-only, the way any outside tool would read it."""

    def __init__(self, root: str) -> None:
        self.path = _db_path(root)

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        conn = connect(self.path, read_only=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def job(self, job_id: str) -> dict:
        state, live, doc = self._query("SELECT state, live, doc FROM jobs WHERE id = ?", (job_id,))[0]
        return {**json.loads(doc), "state": state, "live": live}

    def monitor_deleted(self, monitor_id: int) -> str | None:
        return self._query("SELECT deleted FROM monitors WHERE id = ?", (monitor_id,))[0][0]

    def runs(self, monitor_id: int) -> list[tuple]:
        return self._query(
            "SELECT started, ended, stderr FROM monitor_runs WHERE monitor = ? ORDER BY id", (monitor_id,)
        )

    def ended_events(self, job_id: str) -> list[tuple]:
        return self._query("SELECT actor, data FROM events WHERE job = ? AND kind = 'job_ended'", (job_id,))


def _ticks(path) -> list[float]:
    try:
        with open(path) as handle:
            return [float(line) for line in handle.read().split()]
    except FileNotFoundError:
        return []


@pytest.fixture
def board(tmp_path, monkeypatch, new_repo):
    """Root P, its child P/C taken in a worktree of its own, a server, and a monitor of P/C
    that appends a timestamp to a file ten times a second for as long as its run lasts (its
    interval, 60 s, bounds the run): the file grows until the run is ended."""
    root = new_repo("repo", CONFIG)
    monkeypatch.chdir(root)
    cli(root, "job", "fork", "P", "--check", "test")
    cli(root, "job", "fork", "P/C", "--parent", "P", "--write-paths", "src/c.py", "--check", "test")
    wt = str(tmp_path / "wt")
    git(root, "worktree", "add", "-q", "-b", "wt", wt)
    taken = json.loads(cli(wt, "job", "exec", "P/C", "-o", "json").stdout)
    cli(root, "server", "start")
    server = Server(root)
    ticks = tmp_path / "ticks"
    command = f"while :; do date +%s.%N >> {ticks}; sleep 0.1; done"
    made = json.loads(
        cli(
            wt,
            "monitor",
            "add",
            "--cmd",
            command,
            "--interval",
            "60s",
            "--allow-unsandboxed",
            "-o",
            "json",
            env={"PROCTOR_NONCE": taken["nonce"]},
        ).stdout
    )
    assert made["job"] == "P/C"
    wait_for(lambda: len(_ticks(ticks)) >= 5, timeout=15)
    yield SimpleNamespace(
        root=root,
        wt=os.path.realpath(wt),
        server=server,
        store=Reader(root),
        ticks=ticks,
        monitor=made["id"],
        log=os.path.join(os.path.dirname(server.token_path), "server.log"),
    )
    cli(root, "server", "stop", check=False)


def _assert_stopped(board, event: float, reason: str) -> dict:
    """P/C ends no_return with `reason`, its monitor is deleted and its command stops, within
    seconds of `event`; return the latencies measured."""
    ended = wait_for(lambda: board.store.job("P/C")["state"] == "no_return" and time.time(), timeout=15)
    row = board.store.job("P/C")
    assert row["end_reason"] == reason and not row["live"]
    actor, data = board.store.ended_events("P/C")[0]
    assert actor == "proctor" and json.loads(data) == {"state": "no_return", "end_reason": reason}
    deleted = wait_for(lambda: board.store.monitor_deleted(board.monitor) and time.time(), timeout=15)
    assert "passive" in board.store.monitor_deleted(board.monitor)
    runs = wait_for(lambda: (lambda r: r if r and r[-1][1] else None)(board.store.runs(board.monitor)), timeout=15)
    assert "run ended early" in runs[-1][2], "the run in flight was ended, not left to finish"
    count = len(_ticks(board.ticks))
    time.sleep(1.5)
    after = _ticks(board.ticks)
    assert len(after) == count, "the monitor's command stopped running"
    last = after[-1]
    latency = {"ended": ended - event, "monitor_deleted": deleted - event, "last_line": last - event}
    assert latency["last_line"] < 10, latency  # without the reap the run goes on for 60 s
    with open(board.log, encoding="utf-8") as handle:
        assert f"ended P/C: {reason}" in handle.read()
    print(f"latency from the event: {latency}")
    return latency


def test_children_of_an_ended_parent_stop_their_monitors(board):
    # The exit reaps at its start, before it abandons P; nothing reads the store after it.
    event = time.time()
    cli(board.root, "job", "exit", "P")
    _assert_stopped(board, event, "its parent P ended in no_return")
    assert board.store.job("P")["state"] == "no_return"


def test_a_deleted_checkout_stops_its_monitors(board):
    event = time.time()
    shutil.rmtree(board.wt)  # no store write at all: the server has to look
    _assert_stopped(board, event, f"taken in {board.wt}, which no longer exists")


def test_the_servers_api_reads_reap_first(board):
    """Straight after the checkout goes, the first API read already sees P/C ended and its
    monitor gone, whatever the server's timer is doing."""
    shutil.rmtree(board.wt)
    status, monitors = board.server.call("GET", "/api/v1/monitors")
    assert status == 200 and monitors["monitors"] == []
    status, listing = board.server.call("GET", "/api/v1/jobs")
    rows = {row["id"]: row for row in listing["jobs"]}
    assert rows["P/C"]["state"] == "no_return" and rows["P/C"]["column"] == "Done"
    assert rows["P/C"]["end_reason"] == f"taken in {board.wt}, which no longer exists"
    count = len(_ticks(board.ticks))
    time.sleep(1.5)
    assert len(_ticks(board.ticks)) == count


def test_the_servers_own_jobs_are_never_ended(board, tmp_path):
    """The server's rows are made to look unheld by every rule (its root ended, a checkout
    that is gone, an untaken row long stale): the server ends the session job beside them and
    none of its own."""
    gone = tmp_path / "gone"
    gone.mkdir()
    with open(os.path.join(board.root, "proctor.toml"), "a") as handle:
        handle.write("[jobs]\nstale_after = '1s'\n")
    conn = connect(_db_path(board.root))
    with conn:
        conn.execute("UPDATE jobs SET live = 0, state = 'no_return' WHERE id = 'proctor-server'")
        conn.execute("UPDATE jobs SET checkout_root = ? WHERE id = 'proctor-server/monitors'", (str(gone),))
        conn.execute(
            "UPDATE jobs SET state = 'declared', checkout_root = NULL, updated = '2000-01-01T00:00:00.000Z' "
            "WHERE id = 'proctor-server/followups'"
        )
    conn.close()
    gone.rmdir()
    shutil.rmtree(board.wt)
    _assert_stopped(board, time.time(), f"taken in {board.wt}, which no longer exists")
    assert board.store.job("proctor-server/monitors")["state"] == "running"
    assert board.store.job("proctor-server/followups")["state"] == "declared"
    for job_id in ("proctor-server", "proctor-server/monitors", "proctor-server/followups"):
        assert board.store.job(job_id)["end_reason"] is None
        assert board.store.ended_events(job_id) == []
    parent = board.store.job("P")
    assert parent["state"] == "no_return", "untaken, stale, and no live job under it any more"
    assert parent["end_reason"].endswith("never taken (jobs.stale_after = 1s)")
