"""What every benchmark sets up: an environment whose proctor state and cache live in a
scratch directory, and a real git repository committed in it."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def isolated_env(work: str, **extra: str) -> dict:
    env = dict(
        os.environ,
        PROCTOR_STATE_DIR=os.path.join(work, "state"),
        XDG_CACHE_HOME=os.path.join(work, "cache"),
        GIT_AUTHOR_NAME="b",
        GIT_AUTHOR_EMAIL="b@example.invalid",
        GIT_COMMITTER_NAME="b",
        GIT_COMMITTER_EMAIL="b@example.invalid",
        **extra,
    )
    env.pop("BAGGAGE", None)
    return env


def commit_all(root: str, env: dict) -> None:
    """`git init` in root and commit whatever is there (an empty commit when nothing is)."""
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "--allow-empty", "-m", "init"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)


def timed_proctor(root: str, env: dict, *argv: str, data: str | None = None) -> float:
    """Seconds one `proctor <argv>` process took in `root`; a failure ends the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", *argv], cwd=root, env=env, input=data, capture_output=True, text=True
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"proctor {' '.join(argv)} failed: {proc.stderr}")
    return took
