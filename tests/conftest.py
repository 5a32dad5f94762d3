"""Shared fixtures: real git repositories in temp dirs, an isolated state and cache dir per
test, and a way to run proctor both in-process (fast) and as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass

import pytest

from proctor.cli import run as cli_run
from proctor.cli import set_output


SHARED_FIXTURES = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures"))
# The captures live in shared/, beside the checkout (CI lays a copy there). Elsewhere a test
# that reads them skips when they are absent; under CI=true it runs, and fails if they are.
needs_shared_fixtures = pytest.mark.skipif(
    not os.path.isdir(SHARED_FIXTURES) and os.environ.get("CI") != "true",
    reason=f"the shared fixtures ({SHARED_FIXTURES}) are absent; CI runs these tests",
)


def git(cwd, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


# PROCTOR_TEST_STORE=postgresql (.ci/run's second pass) runs every test on a PostgreSQL store:
# a throwaway cluster for the session (tests/pgcluster.py) and a database of its own per test,
# selected through PROCTOR_STORE_URL as a person would select it. Unset, the embedded store.
ENGINE = "postgresql" if os.environ.get("PROCTOR_TEST_STORE") == "postgresql" else "sqlite"
# A test of the embedded engine itself (it opens the SQLite file, or counts on its locking):
# it runs on the embedded store in either pass, and .ci/run's PostgreSQL pass deselects it.
sqlite_store = pytest.mark.sqlite_store
# A PostgreSQL twin of such a test: it runs on PostgreSQL (a database of its own) in either pass.
postgresql_store = pytest.mark.postgresql_store
# Tests that use a machine-wide resource other tests would see: `machine_wide("slots")` (the
# claude worker slots under /tmp/proctor-slots-<uid>), `machine_wide("kernel-audit")` (the
# kernel's audit switch). Each holds an exclusive lock on the resource's name for its whole run,
# so under pytest-xdist (`-n 4`) two such tests never overlap, whichever workers run them.
machine_wide = pytest.mark.machine_wide
machine_slots = machine_wide("slots")


@pytest.fixture(autouse=True)
def _machine_wide(request):
    marks = [m.args[0] for m in request.node.iter_markers("machine_wide")]
    if not marks:
        yield
        return
    import fcntl
    import tempfile

    handles = []
    for name in sorted(set(marks)):
        handle = open(os.path.join(tempfile.gettempdir(), f"proctor-tests-{os.getuid()}-{name}.lock"), "a")
        fcntl.flock(handle, fcntl.LOCK_EX)  # waits for the test on another worker that holds it
        handles.append(handle)
    try:
        yield
    finally:
        for handle in handles:
            handle.close()


@pytest.fixture(autouse=True)
def isolated_state(tmp_path, monkeypatch, request):
    database = cluster = None
    marked = request.node.get_closest_marker
    if (ENGINE == "postgresql" and marked("sqlite_store") is None) or marked("postgresql_store") is not None:
        import re

        from tests.pgcluster import require_cluster

        cluster = require_cluster()
        database = "t_" + re.sub(r"[^a-z0-9]", "_", request.node.name.lower())[:40] + "_" + os.urandom(4).hex()
        cluster.create_database(database)
        monkeypatch.setenv("PROCTOR_STORE_URL", cluster.url(database))
    else:
        monkeypatch.delenv("PROCTOR_STORE_URL", raising=False)
    monkeypatch.setenv("PROCTOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.delenv("BAGGAGE", raising=False)
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    # a committer of its own per test: two tests that make the same repository in the same second
    # (parallel workers) get different root commits, so the repository keys proctor derives from
    # them (its worktrees under /tmp/proctor-work-<uid>/<key>/) never meet
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", f"t.{os.urandom(4).hex()}@example.invalid")
    yield
    if database:
        cluster.drop_database(database)


def make_repo(path, config: str | None = None) -> str:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    if config is not None:
        (path / "proctor.toml").write_text(config)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return str(path)


DEFAULT_CONFIG = """\
[targets.test]
command = "true"
timeout = "5m"

[targets.lint]
command = "true"

[targets.ci]
command = "make ci"
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", DEFAULT_CONFIG)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def proctor(capsys, monkeypatch):
    """Run the CLI in this process: proctor("ls", "jobs", cwd=..., stdin=...)."""

    def invoke(*argv: str, cwd: str | None = None, stdin: str | None = None, env: dict | None = None) -> Result:
        import io

        capsys.readouterr()
        set_output("text")
        with monkeypatch.context() as m:
            if cwd:
                m.chdir(cwd)
            for key, value in (env or {}).items():
                if value is None:
                    m.delenv(key, raising=False)
                else:
                    m.setenv(key, value)
            if stdin is not None:
                m.setattr(sys, "stdin", io.StringIO(stdin))
            code = cli_run(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke


@pytest.fixture
def proctor_process():
    """Run proctor as a real process with the test's environment."""

    def invoke(*argv: str, cwd: str, stdin: str | None = None, env: dict | None = None) -> Result:
        full_env = dict(os.environ)
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "proctor", *argv],
            cwd=cwd,
            input=stdin,
            capture_output=True,
            text=True,
            env=full_env,
            timeout=120,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return invoke


def alive_with(marker: str) -> list[int]:
    """The pids of every process whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if marker.encode() in handle.read():
                        found.append(int(entry))
            except OSError:
                pass
    return found
