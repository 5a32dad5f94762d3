"""git helpers: hunk parsing checked against real git output, and git's path quoting."""

from __future__ import annotations

import os

from tests.conftest import git
from proctor.vcs import git as vgit


def test_parse_hunks_skips_bodies_that_look_like_headers():
    patch = (b"diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n"
             b"@@ -1,0 +2,3 @@ def f():\n+a\n++++ not a header\n+b\n"
             b"@@ -10,2 +12,0 @@\n--- gone\n-x\n\\ No newline at end of file\n")
    assert vgit.parse_hunks(patch) == {"x": {"added": 3, "removed": 2, "new": [[2, 4]], "old": [[10, 11]]}}


def test_unquote_path():
    assert vgit.unquote_path('"a\\tb"') == "a\tb"
    assert vgit.unquote_path('"caf\\303\\251.txt"') == "café.txt"
    assert vgit.unquote_path("plain.txt") == "plain.txt"


def test_footprint_against_real_git(repo):
    path = os.path.join(repo, "notes.sql")
    with open(path, "w") as handle:
        handle.write("".join(f"-- comment {i}\nselect {i};\n" for i in range(10)))
    git(repo, "add", "notes.sql")
    git(repo, "commit", "-q", "-m", "sql")
    base = git(repo, "rev-parse", "HEAD").strip()
    lines = open(path).read().splitlines()
    lines[2] = "++ changed"  # an added line "++ x" reads "+++ x" in the patch
    del lines[5]  # a removed line "-- comment" reads "--- comment"
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    with open(os.path.join(repo, "tab\tname.txt"), "w") as handle:
        handle.write("x\n")
    git(repo, "add", "-A")
    patch = vgit.run(repo, "diff-index", "-p", "-U0", "--no-renames", base, "--").stdout
    hunks = vgit.parse_hunks(patch)
    assert hunks["notes.sql"] == {"added": 1, "removed": 2, "new": [[3, 3]], "old": [[3, 3], [6, 6]]}
    assert hunks["tab\tname.txt"]["new"] == [[1, 1]]
