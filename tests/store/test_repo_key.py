"""One store per repository: the root-commit key, its cache checked against the repository's
own objects (loose, packed, through alternates), and the no-commit key of a git dir made
anew at an old path. Real git repositories; the CLI as a real process where a store's
contents decide the answer."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from proctor import paths
from tests.support import DEFAULT_CONFIG, git, make_repo


def _state_dir(root) -> str:
    return paths.repo_state_dir(paths.find_checkout(str(root)))


def _key(root) -> str:
    return paths.repo_key(paths.find_checkout(str(root)))


def _root_commit(root) -> str:
    return git(root, "rev-list", "--max-parents=0", "HEAD").split()[0]


def _cache_file(root) -> str:
    checkout = paths.find_checkout(str(root))
    return os.path.join(paths.repo_keys_dir(), paths._common_dir_tag(checkout.common_dir))


@pytest.fixture(autouse=True)
def state_base_exists():
    """The cache lives beside the stores and is kept once proctor's state exists (a hook that
    finds no store makes none, not even a cache): these tests read it, so the state is there."""
    os.makedirs(paths.state_base(), exist_ok=True)


@pytest.fixture
def no_git(tmp_path, monkeypatch):
    """A `git` first on PATH that fails and leaves a mark: a call made while it is in place
    ran git. Returns a function that tells whether it was called."""
    bin_dir = tmp_path / "failing-git"
    bin_dir.mkdir()
    mark = tmp_path / "git-was-run"
    script = bin_dir / "git"
    script.write_text(f"#!/bin/sh\necho \"$@\" >> '{mark}'\nexit 97\n")
    script.chmod(0o755)

    def install():
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return lambda: mark.exists()

    return install


def _recreate(path, message: str) -> None:
    """rm -rf, git init and a first commit at the same path (another commit than make_repo's,
    which made in the same second would be the very same commit)."""
    shutil.rmtree(path)
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text(message + "\n")
    (path / "proctor.toml").write_text(DEFAULT_CONFIG)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", message)


def test_recreated_repository_gets_its_own_store(tmp_path, proctor_process):
    repo = tmp_path / "repo"
    make_repo(repo, DEFAULT_CONFIG)
    old_root, old_state = _root_commit(repo), _state_dir(repo)
    assert os.path.basename(old_state) == old_root
    assert proctor_process("job", "fork", "a", "--write-paths", "src/a.py", "--check", "test", cwd=str(repo)).code == 0
    assert proctor_process("job", "exec", "a", cwd=str(repo)).code == 0
    # The old repository's binding refuses another job in its checkout, as it should.
    assert proctor_process("job", "fork", "b", "--write-paths", "src/b.py", "--check", "test", cwd=str(repo)).code == 1

    _recreate(repo, "a new repository")
    new_root = _root_commit(repo)
    assert new_root != old_root
    assert _state_dir(repo) != old_state and os.path.basename(_state_dir(repo)) == new_root
    with open(_cache_file(repo)) as handle:
        assert handle.read().strip() == new_root, "the cache is rewritten"
    forked = proctor_process("job", "fork", "b", "--write-paths", "src/b.py", "--check", "test", cwd=str(repo))
    assert forked.code == 0, forked.err
    jobs = proctor_process("ls", "jobs", "-o", "json", cwd=str(repo)).json()["jobs"]
    assert [job["id"] for job in jobs] == ["b"], "none of the old repository's jobs"


def test_clone_shares_the_store(tmp_path, no_git, new_repo):
    repo = new_repo("repo")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", repo, str(clone))
    assert _state_dir(clone) == _state_dir(repo)
    assert _key(clone) == _root_commit(repo)
    ran_git = no_git()
    assert _state_dir(clone) == _state_dir(repo) and not ran_git(), "both cached keys accepted"


def test_cached_key_accepted_from_a_pack_without_running_git(tmp_path, no_git):
    repo = tmp_path / "repo"
    make_repo(repo)
    (repo / "more").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "second")
    root = _root_commit(repo)
    assert _key(repo) == root
    git(repo, "gc", "-q", "--prune=now")
    objects = repo / ".git" / "objects"
    assert not (objects / root[:2] / root[2:]).exists(), "the root commit is packed, not loose"
    assert list((objects / "pack").glob("*.idx"))
    ran_git = no_git()
    assert _key(repo) == root and not ran_git()


def test_cached_key_accepted_through_alternates(tmp_path, no_git, new_repo):
    repo = new_repo("repo")
    git(repo, "gc", "-q", "--prune=now")  # and once more with the origin's objects packed
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", repo, str(shared))
    root = _root_commit(repo)
    own = shared / ".git" / "objects"
    assert (own / "info" / "alternates").is_file()
    assert not (own / root[:2]).exists() and not list((own / "pack").glob("*.idx"))
    assert _key(shared) == root
    ran_git = no_git()
    assert _key(shared) == root and not ran_git()
    assert paths.has_object(str(own), root)
    assert not paths.has_object(str(own), "0" * 40)


def test_cached_key_accepted_through_a_relative_alternate(tmp_path, no_git, new_repo):
    repo = new_repo("repo")
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", repo, str(shared))
    alternates = shared / ".git" / "objects" / "info" / "alternates"
    alternates.write_text("# the origin\n../../../repo/.git/objects\n")
    root = _root_commit(repo)
    assert _key(shared) == root
    ran_git = no_git()
    assert _key(shared) == root and not ran_git()


def test_garbage_and_truncated_indexes_fall_back_to_git(tmp_path):
    repo = tmp_path / "repo"
    make_repo(repo)
    git(repo, "gc", "-q", "--prune=now")
    old_root = _root_commit(repo)
    assert _key(repo) == old_root
    (real_idx,) = (repo / ".git" / "objects" / "pack").glob("*.idx")
    idx = real_idx.read_bytes()
    _recreate(repo, "after the garbage")
    pack_dir = repo / ".git" / "objects" / "pack"
    bad = {
        "truncated": idx[:1040],
        "header-only": idx[:8],
        "empty": b"",
        "garbage": bytes(range(256)) * 9,
        "v3": b"\377tOc\0\0\0\x03" + idx[8:],
        "huge-fanout": b"\xff" * 2048,
    }
    for name, data in bad.items():
        (pack_dir / f"pack-{name}.idx").write_bytes(data)
        assert not paths._index_has(str(pack_dir / f"pack-{name}.idx"), bytes.fromhex(old_root))
    # The old index whole, but no pack beside it: git reads no object from it, nor does proctor.
    (pack_dir / "pack-orphan.idx").write_bytes(idx)
    assert paths._index_has(str(pack_dir / "pack-orphan.idx"), bytes.fromhex(old_root))
    assert not paths.has_object(str(repo / ".git" / "objects"), old_root)
    assert _key(repo) == _root_commit(repo) != old_root, "recomputed"
    # An index cut anywhere answers, without raising, for every name it held.
    names = [bytes.fromhex(line.split()[0]) for line in git(repo, "rev-list", "--objects", "--all").splitlines()]
    for cut in range(0, len(idx), 97):
        (pack_dir / "pack-truncated.idx").write_bytes(idx[:cut])
        for name in names + [bytes.fromhex(old_root)]:
            assert paths._index_has(str(pack_dir / "pack-truncated.idx"), name) in (True, False)
    assert not paths.has_object(str(repo / ".git" / "objects"), "not hex" + "0" * 33)


def test_version_one_index_and_sha256(tmp_path, no_git):
    v1 = tmp_path / "v1"
    make_repo(v1)
    git(v1, "-c", "pack.indexVersion=1", "gc", "-q", "--prune=now")
    (idx,) = (v1 / ".git" / "objects" / "pack").glob("*.idx")
    assert not idx.read_bytes().startswith(b"\377tOc")
    root1 = _root_commit(v1)
    assert _key(v1) == root1
    sha256 = tmp_path / "sha256"
    sha256.mkdir()
    git(sha256, "init", "-q", "--object-format=sha256")
    (sha256 / "f").write_text("x\n")
    git(sha256, "add", "-A")
    git(sha256, "commit", "-q", "-m", "one")
    root256 = _root_commit(sha256)
    assert len(root256) == 64 and _key(sha256) == root256
    git(sha256, "gc", "-q", "--prune=now")
    ran_git = no_git()
    assert _key(v1) == root1
    assert _key(sha256) == root256 and not ran_git()


def test_no_commit_repository_made_anew_gets_its_own_store(tmp_path, proctor_process):
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "proctor.toml").write_text(DEFAULT_CONFIG)
    first = _state_dir(repo)
    assert os.path.basename(first).startswith("nocommit-")
    assert proctor_process("job", "fork", "a", "--write-paths", "src/a.py", "--check", "test", cwd=str(repo)).code == 0
    # The key holds while the repository lives: objects written, config and HEAD rewritten.
    git(repo, "add", "proctor.toml")
    git(repo, "config", "user.name", "someone")
    git(repo, "checkout", "-q", "-b", "other")
    assert _state_dir(repo) == first

    shutil.rmtree(repo)
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "proctor.toml").write_text(DEFAULT_CONFIG)
    second = _state_dir(repo)
    assert second != first and os.path.basename(second).startswith("nocommit-")
    jobs = proctor_process("ls", "jobs", "-o", "json", cwd=str(repo)).json()["jobs"]
    assert jobs == [], "none of the removed repository's jobs"
    assert proctor_process("job", "fork", "b", "--write-paths", "src/b.py", "--check", "test", cwd=str(repo)).code == 0

    # The first commit carries this repository's provisional store forward, not the other's.
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first")
    assert os.path.basename(_state_dir(repo)) == _root_commit(repo)
    jobs = proctor_process("ls", "jobs", "-o", "json", cwd=str(repo)).json()["jobs"]
    assert [job["id"] for job in jobs] == ["b"]
    assert not os.path.exists(second) and os.path.isdir(first)


def test_store_lookup_without_create_after_recreation(tmp_path):
    """The guard looks a store up with create=False (guard/context.py): a re-created
    repository has none until it makes one."""
    repo = tmp_path / "repo"
    make_repo(repo)
    old = _state_dir(repo)
    open(os.path.join(old, "proctor.db"), "w").close()
    _recreate(repo, "anew")
    looked_up = paths.repo_state_dir(paths.find_checkout(str(repo)), create=False)
    assert looked_up != old and not os.path.exists(looked_up)


@pytest.mark.parametrize("without", ["generation", "generation and description"])
def test_no_commit_key_where_the_filesystem_gives_no_generation(tmp_path, monkeypatch, without):
    """tmpfs and others answer no inode generation: the key falls back to the time git wrote
    `description` (git never writes it again), and past that to device and inode alone."""
    monkeypatch.setattr(paths, "_inode_generation", lambda path: None)
    repo = tmp_path / "empty"

    def init():
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        if "description" in without:
            os.remove(repo / ".git" / "description")
        return _key(repo)

    first = init()
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "f").write_text("x\n")
    git(repo, "add", "f")
    assert _key(repo) == first, "stable while the repository lives"
    shutil.rmtree(repo)
    time.sleep(0.05)  # past the filesystem clock's tick
    second = init()
    if "description" in without:
        assert second.startswith("nocommit-")  # device and inode only: the same if the inode is reused
    else:
        assert second != first
