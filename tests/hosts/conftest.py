"""Real agent hosts against a scripted model on loopback.

The host CLIs come from npm, pinned, installed by `.ci/hosts` into $PROCTOR_HOSTS_DIR
(default ~/.cache/proctor/hosts). Each host runs with a HOME and XDG directories of the
test's own and proxies pointing at a dead loopback port (NO_PROXY for 127.0.0.1), so nothing
leaves the machine. Under CI=true a host that is not installed fails its tests; elsewhere they
skip, saying how to install it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from tests.support import git  # noqa: F401  (the host tests import it from here)


HOSTS_DIR = os.environ.get("PROCTOR_HOSTS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "proctor", "hosts")
VERSIONS = {"claude": "2.1.332", "codex": "0.171.0", "gemini": "0.61.0", "opencode": "1.18.33"}
VENV_BIN = os.path.dirname(sys.executable)


def host_binary(name: str) -> str:
    path = os.path.join(HOSTS_DIR, "node_modules", ".bin", name)
    if os.access(path, os.X_OK):
        return path
    reason = (
        f"{name} {VERSIONS[name]} is not installed in {HOSTS_DIR}; "
        f"run .ci/hosts (npm install of the pinned host CLIs) first"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class HostEnv:
    """The environment one host process runs in: its own HOME, nothing reaching out."""

    home: str
    env: dict = field(default_factory=dict)

    def run(
        self, argv: list[str], cwd: str, timeout: float = 120, stdin: str | None = None, extra: dict | None = None
    ) -> subprocess.CompletedProcess:
        env = dict(self.env)
        env.update(extra or {})
        env["PWD"] = cwd
        return subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def proctor(
        self, *argv: str, cwd: str, stdin: str | None = None, extra: dict | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        return self.run([os.path.join(VENV_BIN, "proctor"), *argv], cwd=cwd, stdin=stdin, extra=extra, timeout=timeout)


@pytest.fixture
def host_env(tmp_path) -> HostEnv:
    home = tmp_path / "home"
    home.mkdir()
    for sub in (".config", ".cache", ".local/share", ".local/state"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    dead = f"http://127.0.0.1:{_dead_port()}"
    env = {
        "HOME": str(home),
        "USER": os.environ.get("USER", "root"),
        "PATH": os.pathsep.join(
            [VENV_BIN, os.path.join(HOSTS_DIR, "node_modules", ".bin"), os.environ.get("PATH", "/usr/bin:/bin")]
        ),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "PROCTOR_STATE_DIR": os.environ["PROCTOR_STATE_DIR"],
        "HTTP_PROXY": dead,
        "HTTPS_PROXY": dead,
        "http_proxy": dead,
        "https_proxy": dead,
        "ALL_PROXY": dead,
        "all_proxy": dead,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if os.environ.get("PROCTOR_STORE_URL"):  # the PostgreSQL pass (tests/conftest.py): the test's own database
        env["PROCTOR_STORE_URL"] = os.environ["PROCTOR_STORE_URL"]
    return HostEnv(str(home), env)


HOST_CONFIG = """\
[targets.test]
command = "python3 -c 'import sys; sys.exit(0)'"
timeout = "5m"

[targets.ci]
command = "make ci"
"""


@pytest.fixture
def host_repo(tmp_path, monkeypatch) -> str:
    """A repository with proctor initialised: src/a.py and src/b.py, a `test` target."""
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "src" / "a.py").write_text("A = 1\n")
    (root / "src" / "b.py").write_text("B = 1\n")
    (root / "proctor.toml").write_text(HOST_CONFIG)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    proc = subprocess.run(
        [os.path.join(VENV_BIN, "proctor"), "init", "--force"], cwd=root, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    # proctor init may rewrite proctor.toml; keep ours and commit, so the tree starts clean
    (root / "proctor.toml").write_text(HOST_CONFIG)
    git(root, "add", "-A")
    subprocess.run(["git", "commit", "-q", "-m", "proctor"], cwd=root, capture_output=True)
    monkeypatch.chdir(root)
    return str(root)


def wiring_json(host: str) -> dict:
    """The JSON wiring `proctor describe harness --host <host>` prints (comment lines dropped)."""
    out = subprocess.run(
        [os.path.join(VENV_BIN, "proctor"), "describe", "harness", "--host", host, "--part", "hooks"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads("\n".join(line for line in out.splitlines() if not line.startswith("#")))


def wiring_text(host: str) -> str:
    return subprocess.run(
        [os.path.join(VENV_BIN, "proctor"), "describe", "harness", "--host", host, "--part", "hooks"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def fork_and_take(env: HostEnv, repo: str, job: str, write_paths: str, check: str = "test") -> str:
    """Declare a job and take its lease in `repo`; returns the job's secret (PROCTOR_NONCE)."""
    proc = env.proctor(
        "job", "fork", job, "--criteria", "scripted", "--write-paths", write_paths, "--check", check, cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = env.proctor("job", "exec", job, cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for line in (proc.stdout + proc.stderr).splitlines():
        if "PROCTOR_NONCE=" in line:
            return line.split("PROCTOR_NONCE=", 1)[1].split()[0].strip("'\"")
    return ""


def tree_unchanged(repo: str, path: str, content: str) -> bool:
    full = os.path.join(repo, path)
    return os.path.exists(full) and open(full).read() == content


def which(name: str) -> str | None:
    return shutil.which(name)


def make_followup(repo: str, job: str, line: str) -> None:
    """A monitor of `job` that saw `line`, grouped into a follow-up as the server does."""
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store, followups
    from proctor.timeutil import iso, now

    store = Store(repo_state_dir(find_checkout(repo)))
    try:
        with store.write() as conn:
            monitor = conn.insert(
                "INSERT INTO monitors (job, command, interval, description, cwd, created, created_by) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (job, "echo", 60, "ci watcher", repo, iso(now()), "test"),
            )
            run = conn.insert("INSERT INTO monitor_runs (monitor, started) VALUES (?, ?)", (monitor, iso(now())))
            conn.execute(
                "INSERT INTO monitor_events (monitor, run, job, time, line, truncated) VALUES (?, ?, ?, ?, ?, 0)",
                (monitor, run, job, iso(now()), line),
            )
            assert followups.batch(conn, job)
    finally:
        store.close()


# `python -c ADD_FOLLOW_UP <root> <job> <text>`: a ready follow-up for the job, in its own process
ADD_FOLLOW_UP = r"""
import sys
from proctor.paths import find_checkout, repo_state_dir
from proctor.store import Store
from proctor.timeutil import iso, now
root, job, text = sys.argv[1:4]
store = Store(repo_state_dir(find_checkout(root)))
with store.write() as conn:
    conn.execute("INSERT INTO followups (job, created, text, events) VALUES (?, ?, ?, 1)", (job, iso(now()), text))
store.close()
"""

# A `proctor work` worker's monitor, as a model adds it: a real one, run by the real server,
# printing CI_EVENT on its first run only (`mark` records that run); its follow-up resumes the
# worker inside `proctor work` (the event line is asserted, never the follow-up's header).
CI_EVENT = "CI-RED: test_b failed on main"


def monitor_command(mark: str) -> str:
    return f"test -e {mark} || {{ touch {mark}; echo {CI_EVENT}; }}"


def monitor_add(mark: str) -> str:
    """The shell command a worker runs to add the monitor (its job's secret is in its environment)."""
    return (
        f"proctor monitor add --cmd '{monitor_command(mark)}' --interval 10s --description 'ci watcher' "
        f"--allow-unsandboxed"
    )


def add_monitor_for(env: "HostEnv", repo: str, job: str, mark: str) -> subprocess.CompletedProcess:
    """The same monitor added by the person (the server token, --job), from the repository."""
    return env.proctor(
        "monitor",
        "add",
        "--job",
        job,
        "--cmd",
        monitor_command(mark),
        "--interval",
        "10s",
        "--description",
        "ci watcher",
        "--allow-unsandboxed",
        cwd=repo,
    )


@contextlib.contextmanager
def server(env: "HostEnv", repo: str):
    """The repository's `proctor server`, started by the person (no lease), stopped after as the
    orchestrator: a plain `proctor server stop` is refused once a test has bound the checkout to
    a job, and would leave the server running."""
    proc = env.proctor("server", "start", cwd=repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        yield
    finally:
        proc = env.proctor("server", "stop", "--orchestrator", cwd=repo)
    assert proc.returncode == 0 and "server stopped" in proc.stdout, proc.stdout + proc.stderr


def followup_rows(repo: str, job: str) -> list[dict]:
    """The job's follow-ups as the store holds them."""
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(repo)))
    try:
        with store.read() as conn:
            found = conn.execute(
                "SELECT id, text, delivered, via FROM followups WHERE job = ? ORDER BY id", (job,)
            ).fetchall()
    finally:
        store.close()
    return [{"id": f[0], "text": f[1], "delivered": f[2], "via": f[3]} for f in found]


def json_lines(text: str) -> list[dict]:
    """The JSON lines of a host's stream-json output; anything else (warnings) is skipped."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def pytest_collection_modifyitems(config, items):
    """Every test under tests/hosts runs a real agent host CLI: marked slow (make test-fast
    leaves them out)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here + os.sep):
            item.add_marker(pytest.mark.slow)
