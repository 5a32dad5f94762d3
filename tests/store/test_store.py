"""The store: one SQLite database per repository, shared by worktrees and clones; refuses a
locked, corrupt or newer store with one clear line and leaves it as it was."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.support import git
from proctor.paths import find_checkout, repo_state_dir
from proctor.store.schema import SCHEMA_VERSION


def db_path(root: str) -> str:
    return os.path.join(repo_state_dir(find_checkout(root)), "proctor.db")


def fork(proctor, *args, **kw):
    return proctor("job", "fork", *args, **kw)


# SQLite's engine itself: the file's journal mode and PRAGMA user_version
@pytest.mark.sqlite_store
def test_fresh_store_is_wal_at_current_schema(repo, proctor):
    assert fork(proctor, "j", "--check", "test").code == 0
    conn = sqlite3.connect(db_path(repo))
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


# SQLite's engine itself: where the proctor.db file lies
@pytest.mark.sqlite_store
def test_location_honours_xdg_state_home(repo, proctor, tmp_path, monkeypatch):
    monkeypatch.delenv("PROCTOR_STATE_DIR")
    assert fork(proctor, "j", "--check", "test").code == 0
    root_commit = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    assert os.path.exists(tmp_path / "xdg-state" / "proctor" / root_commit / "proctor.db")


def test_shared_by_worktrees_and_clones(repo, proctor, tmp_path, new_repo):
    wt = str(tmp_path / "wt")
    git(repo, "worktree", "add", "-q", "-b", "side", wt)
    clone = str(tmp_path / "clone")
    git(tmp_path, "clone", "-q", repo, clone)
    assert fork(proctor, "from-wt", "--check", "test", cwd=wt).code == 0
    assert fork(proctor, "from-clone", "--check", "test", cwd=clone).code == 0
    ids = {r["id"] for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}
    assert ids == {"from-wt", "from-clone"}
    other = new_repo("unrelated")
    assert proctor("ls", "jobs", "-o", "json", cwd=other).json()["jobs"] == []


def test_store_before_first_commit_is_carried_forward(tmp_path, proctor):
    root = tmp_path / "new"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "proctor.toml").write_text("[targets.test]\ncommand = 'true'\n")
    assert fork(proctor, "early", "--check", "test", cwd=str(root)).code == 0
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    # the cached key of the commit-less repository must not outlive its first commit
    import shutil

    shutil.rmtree(tmp_path / "cache", ignore_errors=True)
    ids = [r["id"] for r in proctor("ls", "jobs", "-o", "json", cwd=str(root)).json()["jobs"]]
    assert ids == ["early"]


# SQLite's engine itself: a corrupt proctor.db file
@pytest.mark.sqlite_store
def test_corrupt_store(repo, proctor):
    assert fork(proctor, "j", "--check", "test").code == 0
    path = db_path(repo)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with open(path, "wb") as handle:
        handle.write(b"this is not sqlite" * 100)
    before = open(path, "rb").read()
    for args in (("ls", "jobs"), ("job", "fork", "k", "--check", "test"), ("describe", "job", "j")):
        result = proctor(*args)
        assert result.code == 2, args
        assert "not a readable SQLite database" in result.err and "move it aside" in result.err
        assert len(result.err.strip().splitlines()) == 1
    assert open(path, "rb").read() == before


# SQLite's engine itself: PRAGMA user_version set past the schema proctor knows
@pytest.mark.sqlite_store
def test_newer_schema_refused(repo, proctor):
    assert fork(proctor, "j", "--check", "test").code == 0
    path = db_path(repo)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    result = proctor("ls", "jobs")
    assert result.code == 2 and "schema version 99, newer" in result.err and "upgrade proctor" in result.err
    assert fork(proctor, "k", "--check", "test").code == 2
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 1
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99
    conn.close()


# SQLite's engine itself: BEGIN IMMEDIATE held from another connection (twin below for PostgreSQL)
@pytest.mark.sqlite_store
def test_locked_by_sqlite_writer(repo, proctor, monkeypatch):
    assert fork(proctor, "j", "--check", "test").code == 0
    monkeypatch.setenv("PROCTOR_BUSY_TIMEOUT", "0.3")
    holder = sqlite3.connect(db_path(repo), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        result = fork(proctor, "k", "--check", "test")
        assert result.code == 2 and "locked" in result.err and "retry" in result.err
        assert time.monotonic() - started < 10
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [r["id"] for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]] == ["j"]


@pytest.mark.postgresql_store  # the twin of test_locked_by_sqlite_writer
def test_locked_by_a_postgresql_writer(repo, proctor, monkeypatch):
    """The repository's advisory lock, which every write transaction takes, held in a
    transaction another connection keeps open."""
    import psycopg

    from proctor.store.postgres import _lock_key, schema_name

    assert fork(proctor, "j", "--check", "test").code == 0
    monkeypatch.setenv("PROCTOR_BUSY_TIMEOUT", "0.3")
    holder = psycopg.connect(os.environ["PROCTOR_STORE_URL"])
    holder.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(schema_name(os.path.dirname(db_path(repo)))),))
    try:
        started = time.monotonic()
        result = fork(proctor, "k", "--check", "test")
        assert result.code == 2 and "locked" in result.err and "retry" in result.err
        assert time.monotonic() - started < 10
    finally:
        holder.rollback()
        holder.close()
    assert [r["id"] for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]] == ["j"]


# SQLite's engine itself: the proctor.db.lock sidecar flock held by another process
@pytest.mark.sqlite_store
def test_locked_by_another_proctor(repo, proctor, monkeypatch):
    assert fork(proctor, "j", "--check", "test").code == 0
    monkeypatch.setenv("PROCTOR_BUSY_TIMEOUT", "0.3")
    lock = db_path(repo) + ".lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl, sys, time\n"
                f"f = open({lock!r}, 'a')\n"
                "fcntl.flock(f, fcntl.LOCK_EX)\n"
                "print('held', flush=True)\n"
                "time.sleep(30)\n"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        result = fork(proctor, "k", "--check", "test")
        assert result.code == 2 and "locked by another proctor" in result.err
    finally:
        holder.kill()
        holder.wait()
    assert fork(proctor, "k", "--check", "test").code == 0


def test_state_dir_not_writable(repo, proctor, tmp_path, monkeypatch):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    monkeypatch.setenv("PROCTOR_STATE_DIR", str(blocker / "state"))
    result = proctor("ls", "jobs")
    assert result.code == 2 and "state" in result.err.lower()
    assert "Traceback" not in result.err


# SQLite's engine itself: a WAL checkpoint, then the file's pages past its header overwritten
@pytest.mark.sqlite_store
def test_corrupt_pages_after_a_good_header(repo, proctor):
    for n in range(30):
        assert fork(proctor, f"j{n}", "--check", "test", "--criteria", "x" * 2000).code == 0
    path = db_path(repo)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(path, "r+b") as handle:
        handle.seek(4096)
        handle.write(os.urandom(os.path.getsize(path) - 4096))
    for args in (("ls", "jobs"), ("job", "fork", "k", "--check", "test")):
        result = proctor(*args)
        assert result.code == 2, (args, result.err)
        assert "Traceback" not in result.err and "move it aside" in result.err
