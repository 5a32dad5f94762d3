"""git helpers: hunk parsing checked against real git output, and git's path quoting."""

from __future__ import annotations

import os

from tests.support import git
from proctor.vcs import git as vgit


def test_parse_hunks_skips_bodies_that_look_like_headers():
    patch = (
        b"diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n"
        b"@@ -1,0 +2,3 @@ def f():\n+a\n++++ not a header\n+b\n"
        b"@@ -10,2 +12,0 @@\n--- gone\n-x\n\\ No newline at end of file\n"
    )
    bodies: dict = {}
    assert vgit.parse_hunks(patch, bodies) == {
        "x": {"added": 3, "removed": 2, "new": [[2, 4]], "old": [[10, 11]], "after": [1]}
    }
    assert bodies == {"x": [(2, 3, [], ""), (12, 0, [b"-- gone", b"x"], "-")]}


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
    bodies: dict = {}
    hunks = vgit.parse_hunks(patch, bodies)
    assert hunks["notes.sql"] == {"added": 1, "removed": 2, "new": [[3, 3]], "old": [[3, 3], [6, 6]], "after": []}
    assert hunks["tab\tname.txt"]["new"] == [[1, 1]]
    # the old file, rebuilt from the new one and the hunks, is the one git has at the base
    with open(path, "rb") as handle:
        rebuilt = vgit.old_side(handle.read(), bodies["notes.sql"])
    assert rebuilt == vgit.run(repo, "show", f"{base}:notes.sql").stdout


def test_old_side_rebuilds_what_git_diffed(repo):
    """Random edits of a file, the old side rebuilt from each -U0 patch: git's own blob is the oracle."""
    import random

    path = os.path.join(repo, "f.txt")
    rng = random.Random(7)
    for round_ in range(120):
        lines = [f"line {rng.randrange(6)}" for _ in range(rng.randrange(0, 25))]
        with open(path, "w") as handle:
            handle.write("\n".join(lines) + ("\n" if rng.random() < 0.8 else ""))
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"r{round_}")
        base = git(repo, "rev-parse", "HEAD").strip()
        for _ in range(rng.randrange(1, 6)):
            op = rng.choice(("ins", "del", "rep"))
            at = rng.randrange(len(lines) + 1)
            if op == "ins":
                lines[at:at] = [f"new {rng.randrange(9)}" for _ in range(rng.randrange(1, 4))]
            elif lines and at < len(lines):
                lines[at : at + rng.randrange(1, 3)] = [] if op == "del" else [f"rep {rng.randrange(9)}"]
        with open(path, "w") as handle:
            handle.write("\n".join(lines) + ("\n" if rng.random() < 0.8 else ""))
        patch = vgit.run(repo, "diff-index", "-p", "-U0", "--no-renames", base, "--", "f.txt").stdout
        bodies: dict = {}
        vgit.parse_hunks(patch, bodies)
        with open(path, "rb") as handle:
            rebuilt = vgit.old_side(handle.read(), bodies.get("f.txt", []))
        assert rebuilt == vgit.run(repo, "show", f"{base}:f.txt").stdout, (round_, patch)


def _attributes(repo, text: str) -> None:
    with open(os.path.join(repo, ".gitattributes"), "w") as handle:
        handle.write(text)


def test_diff_attribute_unset_is_not_unspecified(repo):
    # `-diff`: git diffs the file as binary, so it has no driver; no rule: the caller may guess.
    _attributes(repo, "*.py -diff\n*.txt -diff\n")
    assert vgit.diff_attribute(repo, "src/a.py") == vgit.DIFF_UNSET == "unset"
    assert vgit.diff_attribute(repo, "notes.txt") == "unset"
    assert vgit.diff_attribute(repo, "notes.md") is None
    assert vgit.diff_attribute(repo, "dir with space/b.py") == "unset"
    # As git itself reads it: the file diffs as binary.
    with open(os.path.join(repo, "a.py"), "w") as handle:
        handle.write("x = 1\n")
    git(repo, "add", "-N", "a.py")
    assert b"Binary files" in vgit.run(repo, "diff", "--", "a.py").stdout


def test_diff_attribute_driver_set_and_unspecified(repo):
    _attributes(repo, "*.py diff=python\n*.weird diff=golang\n*.c diff\n*.h !diff\n*.e diff=\n")
    assert vgit.diff_attribute(repo, "a.py") == "python"
    assert vgit.diff_attribute(repo, "deep/x.weird") == "golang"
    assert vgit.diff_attribute(repo, "a.c") == "default"
    assert vgit.diff_attribute(repo, "a.h") is None
    assert vgit.diff_attribute(repo, "a.e") is None
    assert vgit.diff_attribute(repo, "a.txt") is None
    _attributes(repo, "*.py diff\n")
    assert vgit.diff_attribute(repo, "a.py") == "default"


def test_diff_attribute_later_and_nested_rules_win(repo):
    _attributes(repo, "*.py diff=python\n*.py -diff\n")
    assert vgit.diff_attribute(repo, "a.py") == "unset"
    os.makedirs(os.path.join(repo, "sub"))
    with open(os.path.join(repo, "sub", ".gitattributes"), "w") as handle:
        handle.write("*.py diff=python\n")
    assert vgit.diff_attribute(repo, "sub/a.py") == "python"
    assert vgit.diff_attribute(repo, "a.py") == "unset"
