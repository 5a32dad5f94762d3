"""What the worker tests share that is no fixture: the recorded streams they replay and the job
an executor's hooks are pinned to."""

from __future__ import annotations

import os

import pytest

from tests.support import SHARED_FIXTURES

LEASE = "plan/w1"

# Claude Code 2.1.332's captured streams, one directory each (fixtures/hosts/claude-2.1.332)
HOSTS = os.path.join(SHARED_FIXTURES, "hosts", "claude-2.1.332")
needs_hosts = pytest.mark.skipif(
    not os.path.isdir(HOSTS) and os.environ.get("CI") != "true", reason="the shared fixtures are absent"
)

# Gemini CLI's stream-json as 0.61.0 writes it (fixtures/hosts/gemini-0.61.0)
GEMINI = os.path.join(SHARED_FIXTURES, "hosts", "gemini-0.61.0")


def _stream(name: str) -> list[str]:
    with open(os.path.join(HOSTS, name, "stream.jsonl")) as handle:
        return [line.rstrip("\n") for line in handle if line.strip()]
