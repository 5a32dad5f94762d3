"""The leased repository the guard's bypass and adversary tests share: job w1 holds
plan/w1/** (with w1/sub beneath it), `other` holds src/**; and a HOME of the test's own with
hook wiring and a global git config to aim at. Import the fixtures by name."""

from __future__ import annotations

import os

import pytest

from proctor import api
from tests.conftest import git, make_repo

CONFIG = "[targets.test]\ncommand = 'true'\n"


@pytest.fixture
def ws(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", CONFIG)
    for path in ("plan/w1/a.py", "src/b.py", "docs/c.md"):
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as handle:
            handle.write("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "files")
    monkeypatch.chdir(root)
    api.fork({"id": "w1", "write_paths": ["plan/w1/**"], "check": "test"}, cwd=root)
    api.fork({"id": "w1/sub", "parent": "w1", "write_paths": ["plan/w1/sub/**"], "check": "test"}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/**"], "check": "test"}, cwd=root)
    return os.path.realpath(root)


@pytest.fixture
def home(tmp_path, monkeypatch):
    path = tmp_path / "home"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.json").write_text('{"hooks": {"PreToolUse": "proctor hook claude"}}\n')
    (path / ".gitconfig").write_text("[user]\n\tname = t\n")
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return str(path)


def state_dir(root: str) -> str:
    from proctor.paths import find_checkout, repo_state_dir

    return repo_state_dir(find_checkout(root))
