"""claims.walk_glob, the one walk behind a fork's digest of a glob, a paths goal's "exists" and
a sandbox's grants, against find(1) as the oracle of what exists: `find -P` lists every entry
without following a link; the walk must return exactly the ones the glob matches, less what is
inside a .git directory and the checkout's own .git."""

from __future__ import annotations

import os
import subprocess

import pytest

from proctor import claims


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "repo"
    for rel in ("src/a.py", "src/sub/b.py", "src/sub/deep/c.py", "docs/d.md", "vendor/x/y.py", "vendor/x/.git/config"):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    (root / ".git").write_text("gitdir: /elsewhere\n")  # a linked worktree's .git is a file
    (root / "src" / "link_dir").symlink_to(root / "docs")
    (root / "src" / "link_file.py").symlink_to(root / "src" / "a.py")
    (root / "src" / "dangling.py").symlink_to(root / "nowhere.py")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.py").write_text("s\n")
    (root / "src" / "out").symlink_to(tmp_path / "outside")
    return str(root)


def oracle(root: str, pattern: str) -> dict[str, bool]:
    listed = subprocess.run(["find", "-P", ".", "-mindepth", "1"], cwd=root, capture_output=True, text=True, check=True)
    out = {}
    for line in listed.stdout.splitlines():
        rel = line[2:]
        parts = rel.split("/")
        if rel == ".git" or ".git" in parts[:-1] or (parts[-1] == ".git" and os.path.isdir(os.path.join(root, rel))):
            continue
        if claims.glob_match(pattern, rel):
            out[rel] = os.path.isdir(os.path.join(root, rel))
    return out


PATTERNS = [
    "src/**",
    "src/*.py",
    "**/*.py",
    "src/sub/**/c.py",
    "**",
    "vendor/**/config",
    "nothing/**",
    "src/link_dir/*",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_the_walk_finds_what_find_lists(tree, pattern):
    walked = dict(claims.walk_glob(tree, pattern))
    assert walked == oracle(tree, pattern)


def test_no_link_is_followed_and_no_git_directory_entered(tree):
    walked = dict(claims.walk_glob(tree, "**"))
    assert "src/link_dir" in walked and walked["src/link_dir"] is True  # matched, counted as a directory
    assert not any(p.startswith(("src/link_dir/", "src/out/")) for p in walked)  # never followed
    assert "src/dangling.py" in walked and walked["src/dangling.py"] is False
    assert ".git" not in walked and not any(".git" in p.split("/") for p in walked)


def test_a_matched_directory_is_not_entered_when_pruned(tree):
    pruned = sorted(p for p, _ in claims.walk_glob(tree, "src/**", prune_matched=True))
    assert pruned == sorted(p for p in os.listdir(os.path.join(tree, "src")) for p in [f"src/{p}"])
