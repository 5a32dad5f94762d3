"""Shared fixtures: real git repositories in temp dirs, an isolated state and cache dir per
test, and a way to run proctor both in-process (fast) and as a real process. What tests import
by name (git, make_repo, the markers) is tests/support.py's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from proctor.cli import run as cli_run
from proctor.cli import set_output
from tests.hook.world import leased_repo
from tests.support import (  # noqa: F401  (re-exported for the host tests' conftest)
    DEFAULT_CONFIG,
    ENGINE,
    SHARED_FIXTURES,
    Result,
    alive_with,
    call_hook,
    git,
    machine_slots,
    machine_wide,
    make_repo,
    needs_shared_fixtures,
    postgresql_store,
    sqlite_store,
)


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

        from tests.store.pgcluster import require_cluster

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


@pytest.fixture
def new_repo(tmp_path):
    """More real git repositories: new_repo("name", config=None) -> its path under the test's
    temporary directory (a README committed on main; proctor.toml when `config` is given)."""

    def make(name: str = "repo", config: str | None = None) -> str:
        return make_repo(tmp_path / name, config)

    return make


@pytest.fixture
def hook():
    """The guard's hook, called as a host calls it: hook(payload, host="claude", env=None,
    args=()) -> the answer (tests/support.py call_hook; the test's BAGGAGE is never passed on
    unless `env` gives one)."""
    return call_hook


@pytest.fixture
def ws(new_repo, monkeypatch):
    """The hook's world (tests/hook/world.py): job feat holds src/a.py and src/gen/**, job
    `other` src/b.py. A module with a world of its own (tests/guard/guard_lease.py's) names its own."""
    return leased_repo(new_repo, monkeypatch)
