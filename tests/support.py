"""What the tests share that is not a fixture: real git repositories, where the shared
captures and the stand-in worker are, the store engine this run uses and the markers that
choose one, and how to find a process by its command line. Import it (`from tests.support
import git, make_repo`); conftest.py holds only fixtures and imports these for them."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(TESTS)  # the checkout proctor is tested from
STANDIN = os.path.join(TESTS, "standins", "standin.py")  # a scripted agent CLI for the worker tests


SHARED_FIXTURES = os.path.normpath(os.path.join(REPO_ROOT, "..", "shared", "fixtures"))
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
# a throwaway cluster for the session (tests/store/pgcluster.py) and a database of its own per test,
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


def call_hook(
    payload, host: str = "claude", env: dict | None = None, args=(), drop=("BAGGAGE",), base: dict | None = None
) -> dict:
    """The hook as a host calls it, in this process: `proctor hook <host> <args>` with the event
    on stdin, in this process's environment (or `base`) less `drop` (a lease the test did not
    give) plus `env`. The answer as JSON, {} when it is empty (a host reads nothing as allow).
    The hook never fails a host's call: exit 0 is asserted."""
    from proctor.hook import run as hook_run

    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    environ = {k: v for k, v in (os.environ if base is None else base).items() if k not in drop}
    environ.update(env or {})
    out, code = hook_run([host, *args], data, environ)
    assert code == 0
    return json.loads(out) if out.strip() else {}
