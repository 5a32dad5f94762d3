"""The fixtures the rules' tests share: `root`, the repository the background-* rules' tests
work in. Most lease-* tests work in the hook's world instead (`ws`: tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def root(new_repo, monkeypatch):
    path = new_repo("repo", "[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(path)
    return path
