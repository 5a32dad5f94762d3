"""sandbox: a grant's path is checked for links when it is listed (walk_glob, then _safe), and
opened later, in Ruleset._add, with O_NOFOLLOW, which guards only the last component. A
directory on the way swapped for a link between the two (the job's own tree: its holder may
rename and link inside plan/w1/** while proctor builds a run's rules) would carry the rule to
the link's target: here the child claims `plan/w1/*/hooks` and `plan/w1/d` becomes a link to
the checkout's `.git`. _add now grants a planned path only if what it opened is that path still
(/proc/self/fd). The swap is done deterministically between `sandbox.plan` and
`sandbox.Ruleset`, the two calls jobs/runs.py makes one after the other; in the field it is a
race a looping process could win. Found by an adversarial review."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from proctor import sandbox

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(ABI == 0, reason="this kernel offers no Landlock")


def test_a_directory_swapped_for_a_link_after_planning_grants_nothing_beyond_it(tmp_path, new_repo):
    root = os.path.realpath(new_repo("repo", "[targets.test]\ncommand = 'true'\n"))
    os.makedirs(os.path.join(root, "plan/w1/d/hooks"))
    job = {"id": "w1/c", "parent": "w1", "state": "running", "write_paths": ["plan/w1/*/hooks"]}
    grant = sandbox.plan(job, root, str(tmp_path / "cache"))
    assert os.path.join(root, "plan/w1/d/hooks") in grant.paths
    # the swap: plan/w1/d becomes a link to the checkout's .git
    shutil.rmtree(os.path.join(root, "plan/w1/d"))
    os.symlink("../../.git", os.path.join(root, "plan/w1/d"))
    ruleset = sandbox.Ruleset(grant, ABI)
    target = os.path.join(root, ".git/hooks/pre-commit")
    try:
        done = subprocess.run(
            ["sh", "-c", f"echo 'echo pwned' > {target} && echo wrote"],
            preexec_fn=ruleset.preexec,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        ruleset.close()
        grant.cleanup()
    assert not os.path.exists(target), f"the sandboxed run wrote {target}: {done.stdout!r} {done.stderr!r}"


def test_control_without_the_swap_the_same_grant_keeps_git_hooks_out(tmp_path, new_repo):
    """The control (passes): the same grant, no swap; the run cannot write .git/hooks."""
    root = os.path.realpath(new_repo("repo", "[targets.test]\ncommand = 'true'\n"))
    os.makedirs(os.path.join(root, "plan/w1/d/hooks"))
    job = {"id": "w1/c", "parent": "w1", "state": "running", "write_paths": ["plan/w1/*/hooks"]}
    grant = sandbox.plan(job, root, str(tmp_path / "cache"))
    ruleset = sandbox.Ruleset(grant, ABI)
    target = os.path.join(root, ".git/hooks/pre-commit")
    inside = os.path.join(root, "plan/w1/d/hooks/x")
    try:
        done = subprocess.run(
            ["sh", "-c", f"echo x > {inside}; echo 'echo pwned' > {target}"],
            preexec_fn=ruleset.preexec,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        ruleset.close()
        grant.cleanup()
    assert os.path.exists(inside), done.stderr
    assert not os.path.exists(target), done.stderr
