"""proctor vcs checkpoint: exact identity of a working tree, and nothing written anywhere."""

from __future__ import annotations

import hashlib
import os

from tests.support import git


def _snapshot(path: str) -> dict:
    state = {}
    for dirpath, _, files in os.walk(path):
        for name in files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            with open(full, "rb") as handle:
                state[full] = (st.st_mtime_ns, hashlib.sha256(handle.read()).hexdigest())
    return state


def test_clean_tree(repo, proctor):
    head = git(repo, "rev-parse", "HEAD").strip()
    text = proctor("vcs", "checkpoint")
    assert text.code == 0
    assert text.out == f"{head} main clean\n"
    assert proctor("vcs", "checkpoint", "-o", "name").out == f"{head}\n"
    record = proctor("vcs", "checkpoint", "-o", "json").json()
    assert record == {"revision": head, "branch": "main", "dirty": False, "patch_digest": None, "vcs": "git"}


def test_dirty_tree_names_revision_plus_digest(repo, proctor):
    head = git(repo, "rev-parse", "HEAD").strip()
    with open(os.path.join(repo, "README"), "a") as handle:
        handle.write("more\n")
    record = proctor("vcs", "checkpoint", "-o", "json").json()
    assert record["dirty"] is True and len(record["patch_digest"]) == 16
    assert proctor("vcs", "checkpoint", "-o", "name").out == f"{head}+{record['patch_digest']}\n"
    assert proctor("vcs", "checkpoint").out == f"{head} main dirty {record['patch_digest']}\n"


def test_staged_and_unstaged_both_count(repo, proctor):
    base = proctor("vcs", "checkpoint", "-o", "json").json()
    with open(os.path.join(repo, "README"), "a") as handle:
        handle.write("staged\n")
    git(repo, "add", "README")
    staged = proctor("vcs", "checkpoint", "-o", "json").json()
    assert staged["dirty"] and staged["patch_digest"]
    with open(os.path.join(repo, "README"), "a") as handle:
        handle.write("unstaged\n")
    both = proctor("vcs", "checkpoint", "-o", "json").json()
    assert both["patch_digest"] != staged["patch_digest"]
    assert base["patch_digest"] is None


def test_trees_differing_only_by_new_file_differ(tmp_path, proctor, new_repo):
    first = new_repo("one")
    second = str(tmp_path / "two")
    git(tmp_path, "clone", "-q", first, second)
    for root in (first, second):
        with open(os.path.join(root, "README"), "a") as handle:
            handle.write("same edit\n")
    a = proctor("vcs", "checkpoint", "-o", "name", cwd=first).out
    b = proctor("vcs", "checkpoint", "-o", "name", cwd=second).out
    assert a == b, "the same dirty tree in two clones has one identity"
    with open(os.path.join(second, "new.txt"), "w") as handle:
        handle.write("new\n")
    c = proctor("vcs", "checkpoint", "-o", "name", cwd=second).out
    assert c != a
    with open(os.path.join(second, "new.txt"), "w") as handle:
        handle.write("other content\n")
    assert proctor("vcs", "checkpoint", "-o", "name", cwd=second).out not in (a, c)


def test_untracked_only_tree_is_dirty(repo, proctor):
    with open(os.path.join(repo, "fresh.txt"), "w") as handle:
        handle.write("x\n")
    record = proctor("vcs", "checkpoint", "-o", "json").json()
    assert record["dirty"] is True and record["patch_digest"]


def test_ignored_files_do_not_count(repo, proctor):
    with open(os.path.join(repo, ".gitignore"), "w") as handle:
        handle.write("*.log\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore logs")
    clean = proctor("vcs", "checkpoint", "-o", "json").json()
    with open(os.path.join(repo, "build.log"), "w") as handle:
        handle.write("noise\n")
    assert proctor("vcs", "checkpoint", "-o", "json").json() == clean


def test_file_in_untracked_directory_counts(repo, proctor):
    os.makedirs(os.path.join(repo, "newdir", "deep"))
    with open(os.path.join(repo, "newdir", "deep", "f.txt"), "w") as handle:
        handle.write("1\n")
    first = proctor("vcs", "checkpoint", "-o", "name").out
    with open(os.path.join(repo, "newdir", "deep", "f.txt"), "w") as handle:
        handle.write("2\n")
    assert proctor("vcs", "checkpoint", "-o", "name").out != first


def test_path_argument_is_refused(repo, proctor):
    for args in (("src",), (".",), ("-o", "name", "README")):
        result = proctor("vcs", "checkpoint", *args)
        assert result.code == 2
        assert "takes no path" in result.err and "whole" in result.err
        assert result.err.startswith("PRC3055: "), result.err


def test_path_argument_refusal_carries_its_code_in_json(repo, proctor_process):
    for args in (("-o", "json", "src"), ("src", "-o", "json"), ("-o", "json", "--", "-x")):
        result = proctor_process("vcs", "checkpoint", *args, cwd=repo)
        assert result.code == 2, result.err
        error = result.json()["error"]
        assert error["code"] == "PRC3055" and "takes no path" in error["message"]
        assert result.err.startswith("PRC3055: ") and "Traceback" not in result.err


def test_writes_nothing_anywhere(repo, proctor, tmp_path):
    # A stale index (a file touched, content unchanged) is what `git status` and `git diff`
    # would rewrite; an untracked file and a real change make the tree dirty.
    with open(os.path.join(repo, "proctor.toml"), "rb") as handle:
        content = handle.read()
    with open(os.path.join(repo, "proctor.toml"), "wb") as handle:
        handle.write(content)
    os.utime(os.path.join(repo, "proctor.toml"), (1, 1))
    with open(os.path.join(repo, "README"), "a") as handle:
        handle.write("dirty\n")
    with open(os.path.join(repo, "untracked.txt"), "w") as handle:
        handle.write("u\n")
    before = _snapshot(repo)
    refs_before = git(repo, "for-each-ref")
    stash_before = git(repo, "stash", "list")
    for output in ("text", "name", "json"):
        assert proctor("vcs", "checkpoint", "-o", output).code == 0
    assert _snapshot(repo) == before
    assert git(repo, "for-each-ref") == refs_before
    assert git(repo, "stash", "list") == stash_before
    assert not os.path.exists(tmp_path / "state")


def test_worktree_checkpoint(repo, proctor, tmp_path):
    wt = str(tmp_path / "wt")
    git(repo, "worktree", "add", "-q", "-b", "side", wt)
    head = git(repo, "rev-parse", "HEAD").strip()
    assert proctor("vcs", "checkpoint", cwd=wt).out == f"{head} side clean\n"


def test_detached_head(repo, proctor):
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "--detach")
    assert proctor("vcs", "checkpoint").out == f"{head} HEAD clean\n"


def test_no_commit_yet(tmp_path, proctor):
    root = tmp_path / "empty"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    assert proctor("vcs", "checkpoint", cwd=str(root)).out == "(no commit) main clean\n"
    named = proctor("vcs", "checkpoint", "-o", "name", cwd=str(root))
    assert named.code == 2 and "no commit yet" in named.err


def test_outside_a_repository(tmp_path, proctor):
    outside = tmp_path / "plain"
    outside.mkdir()
    result = proctor("vcs", "checkpoint", cwd=str(outside))
    assert result.code == 2 and "not inside a git checkout" in result.err


def test_binary_change_changes_digest(repo, proctor):
    path = os.path.join(repo, "blob.bin")
    with open(path, "wb") as handle:
        handle.write(bytes(range(256)))
    git(repo, "add", "blob.bin")
    git(repo, "commit", "-q", "-m", "bin")
    with open(path, "wb") as handle:
        handle.write(bytes(range(255, -1, -1)))
    first = proctor("vcs", "checkpoint", "-o", "name").out
    with open(path, "wb") as handle:
        handle.write(bytes(range(128)) * 2)
    assert proctor("vcs", "checkpoint", "-o", "name").out != first
