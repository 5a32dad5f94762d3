"""Where things live: the checkout a command runs in, and proctor's state and cache dirs.

Owns the mapping from a working directory to (checkout root, git dir, common git dir) and
from a repository to its state directory. Every worktree and clone of one repository on this
machine shares one state directory, keyed by the repository's root commit, so an
orchestrator can declare a plan in its checkout and a holder take its lease from another.

Discovery is done in Python, without running git: the guard's hook calls this on every tool
call and a git subprocess costs more than the rest of the lookup together.
"""

from __future__ import annotations

import os
import zlib

from proctor.errors import ProctorError, StoreError


class Checkout:
    """A git work tree: its top directory, its own git dir (a worktree has one), and the git
    dir shared by all worktrees of the clone. A plain class: the hook imports this module."""

    __slots__ = ("root", "git_dir", "common_dir")

    def __init__(self, root: str, git_dir: str, common_dir: str) -> None:
        self.root, self.git_dir, self.common_dir = root, git_dir, common_dir

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkout) and (self.root, self.git_dir, self.common_dir) == (
            other.root, other.git_dir, other.common_dir)

    def __repr__(self) -> str:
        return f"Checkout({self.root!r})"


def find_checkout(start: str | None = None) -> Checkout:
    """The git checkout containing `start` (default: the current directory)."""
    here = os.path.abspath(start or os.getcwd())
    probe = here
    while True:
        dot_git = os.path.join(probe, ".git")
        if os.path.isdir(dot_git) and _is_git_dir(dot_git):
            return Checkout(probe, dot_git, _common_dir(dot_git))
        if os.path.isfile(dot_git):
            git_dir = _read_gitdir_file(dot_git, probe)
            if git_dir:
                return Checkout(probe, git_dir, _common_dir(git_dir))
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    raise ProctorError(
        f"{here} is not inside a git checkout; run proctor in a git repository (git init creates one)"
    )


def _is_git_dir(path: str) -> bool:
    """A git directory as git itself tells one (setup.c's is_git_directory): a HEAD, and objects
    and refs of its own or through commondir. An empty `.git` made in a tree is not one: git
    walks past it to the repository around it, and so does proctor."""
    if not os.path.isfile(os.path.join(path, "HEAD")):
        return False
    if os.path.isfile(os.path.join(path, "commondir")):
        return True
    return os.path.isdir(os.path.join(path, "objects")) and os.path.isdir(os.path.join(path, "refs"))


def _read_gitdir_file(dot_git: str, root: str) -> str | None:
    try:
        with open(dot_git, encoding="utf-8") as handle:
            first = handle.readline().strip()
    except OSError:
        return None
    if not first.startswith("gitdir:"):
        return None
    target = first[len("gitdir:"):].strip()
    return os.path.normpath(os.path.join(root, target))


def _common_dir(git_dir: str) -> str:
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            target = handle.read().strip()
    except OSError:
        return os.path.realpath(git_dir)
    return os.path.realpath(os.path.join(git_dir, target))


def write_atomic(path: str, text: str, mode: int = 0o644) -> None:
    """Replace `path` with `text` in one step: a reader sees the old file or the new, never
    half of one. Creates the directory. Raises OSError; callers of caches ignore it."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def state_base() -> str:
    """`$PROCTOR_STATE_DIR`, else `$XDG_STATE_HOME/proctor`, else `~/.local/state/proctor`."""
    override = os.environ.get("PROCTOR_STATE_DIR")
    if override:
        return os.path.abspath(override)
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(xdg, "proctor")


def cache_base() -> str:
    """`$XDG_CACHE_HOME/proctor`, else `~/.cache/proctor`."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "proctor")


def _common_dir_tag(common_dir: str) -> str:
    """A short, stable name for a git dir (two checksums; hashlib's import costs the hook 5 ms)."""
    data = common_dir.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def repo_key(checkout: Checkout) -> str:
    """The repository's identity on this machine: its root commit.

    A repository with no commit yet is keyed by its common git dir (`nocommit-<hash>`); its
    store is carried over to the root-commit key by `repo_state_dir` once a commit exists.
    The answer is cached per common git dir, since finding the root commit walks history.
    """
    tag = _common_dir_tag(checkout.common_dir)
    cache_file = os.path.join(cache_base(), "repo-keys", tag)
    try:
        with open(cache_file, encoding="ascii") as handle:
            cached = handle.read().strip()
        if cached:
            return cached
    except OSError:
        pass
    roots = _root_commits(checkout)
    if not roots:
        return f"nocommit-{tag}"
    key = min(roots)
    try:
        write_atomic(cache_file, key + "\n")
    except OSError:
        pass  # a cache we cannot write only costs the next call the same walk
    return key


def _root_commits(checkout: Checkout) -> list[str]:
    import subprocess

    try:
        proc = subprocess.run(
            ["git", "rev-list", "--max-parents=0", "HEAD"],
            cwd=checkout.root,
            capture_output=True,
            text=True,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1"},
        )
    except OSError as exc:
        raise ProctorError(f"cannot run git ({exc}); install git and put it on PATH") from None
    if proc.returncode != 0:
        return []
    return [line for line in proc.stdout.split() if line]


def repo_state_dir(checkout: Checkout, create: bool = True) -> str:
    """The per-repository state directory, created on first use."""
    base = state_base()
    key = repo_key(checkout)
    path = os.path.join(base, key)
    if create and not os.path.isdir(path):
        # A store made before the first commit is carried forward to the root-commit key.
        provisional = os.path.join(base, f"nocommit-{_common_dir_tag(checkout.common_dir)}")
        if not key.startswith("nocommit-") and os.path.isdir(provisional):
            try:
                os.replace(provisional, path)
            except OSError:
                pass
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create proctor's state directory {path}: {exc.strerror}; make it writable "
                f"or point PROCTOR_STATE_DIR at a writable directory"
            ) from None
    return path


def repo_cache_dir(checkout: Checkout) -> str:
    return os.path.join(cache_base(), repo_key(checkout))


def head_revision(checkout: Checkout) -> str | None:
    """HEAD's commit, read from the git files without running git (None when unborn)."""
    try:
        with open(os.path.join(checkout.git_dir, "HEAD"), encoding="utf-8") as handle:
            head = handle.read().strip()
    except OSError:
        return None
    if not head.startswith("ref: "):
        return head or None
    ref = head[5:].strip()
    for base in (checkout.git_dir, checkout.common_dir):
        try:
            with open(os.path.join(base, ref), encoding="utf-8") as handle:
                return handle.read().strip() or None
        except OSError:
            continue
    try:
        with open(os.path.join(checkout.common_dir, "packed-refs"), encoding="utf-8") as handle:
            for line in handle:
                if line.rstrip().endswith(" " + ref):
                    return line.split(" ", 1)[0]
    except OSError:
        pass
    return None
