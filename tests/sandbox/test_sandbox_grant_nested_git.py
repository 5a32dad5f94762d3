"""A known limit, found by an adversarial review: a sandbox grant on a directory holds everything
below it (Landlock grants a hierarchy), so for `plan/w1/**` a nested repository's `.git`
(`plan/w1/vendor/.git/hooks`) or a linked worktree's `.git` file made inside the job's tree
(`plan/w1/wt/.git`) is writable by the run. Only the checkout's own `.git` is carved out. What
runs git in such a nested repository later is the person's, as with any script the job writes
in its own paths; proctor runs git only at the checkout's root and in its own worktrees.
Carving each nested `.git` would mean walking every granted directory at each run's start."""

from __future__ import annotations

import os

import pytest

from proctor import sandbox
from tests.support import git


@pytest.mark.xfail(
    strict=True,
    reason="a known limit: a grant on a directory holds a nested repository's .git below it (Landlock "
    "grants a hierarchy); only the checkout's own .git is carved out",
)
def test_no_grant_covers_a_git_directory_or_gitfile_at_any_depth(tmp_path, new_repo):
    root = os.path.realpath(new_repo("repo", "[targets.test]\ncommand = 'true'\n"))
    os.makedirs(os.path.join(root, "plan/w1/vendor/.git/hooks"))
    os.makedirs(os.path.join(root, "plan/w1/src"))
    open(os.path.join(root, "plan/w1/src/a.py"), "w").close()
    git(root, "worktree", "add", "--detach", os.path.join(root, "plan/w1/wt"), "HEAD")
    assert os.path.isfile(os.path.join(root, "plan/w1/wt/.git"))
    job = {"id": "w1/c", "parent": "w1", "state": "running", "write_paths": ["plan/w1/**"]}
    grant = sandbox.plan(job, root, str(tmp_path / "cache"))
    try:
        dot_gits = [os.path.join(root, p) for p in ("plan/w1/vendor/.git", "plan/w1/wt/.git")]
        covering = [(g, d) for g in grant.paths for d in dot_gits if d == g or d.startswith(g.rstrip("/") + "/")]
    finally:
        grant.cleanup()
    assert not covering, f"grants holding a .git: {covering}"
