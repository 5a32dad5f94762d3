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
            other.root,
            other.git_dir,
            other.common_dir,
        )

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
    raise ProctorError(f"{here} is not inside a git checkout; run proctor in a git repository (git init creates one)")


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
    target = first[len("gitdir:") :].strip()
    return os.path.normpath(os.path.join(root, target))


def _common_dir(git_dir: str) -> str:
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
            target = handle.read().strip()
    except OSError:
        return os.path.realpath(git_dir)
    return os.path.realpath(os.path.join(git_dir, target))


def linked_worktree(checkout: str, rel: str) -> bool:
    """Whether `rel` in `checkout` is a linked worktree of the same repository (one made inside
    the tree, `.worktrees/w1`): a checkout of its own, not content of this one."""
    root = os.path.join(checkout, rel)
    dot = os.path.join(root, ".git")
    if not os.path.isfile(dot):
        return False
    git_dir = _read_gitdir_file(dot, root)
    mine = os.path.join(checkout, ".git")
    here = _read_gitdir_file(mine, checkout) if os.path.isfile(mine) else mine
    if not (git_dir and here):
        return False
    return os.path.realpath(_common_dir(git_dir)) == os.path.realpath(_common_dir(here))


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


_MACHINE: list[str] = []


def machine_id() -> str:
    """This machine's name in the store's records: `$PROCTOR_MACHINE`, else the systemd machine
    id (`/etc/machine-id`, stable across reboots and renames), else the host name. Checkout
    paths and pids mean something only on the machine that recorded them."""
    name = os.environ.get("PROCTOR_MACHINE", "").strip()
    if name:
        return name
    if not _MACHINE:
        for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
            try:
                with open(path, encoding="ascii", errors="replace") as handle:
                    name = handle.read().strip()
            except OSError:
                continue
            if name:
                break
        _MACHINE.append(name or os.uname().nodename or "localhost")
    return _MACHINE[0]


def cache_base() -> str:
    """`$XDG_CACHE_HOME/proctor`, else `~/.cache/proctor`."""
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "proctor")


def repo_keys_dir() -> str:
    """Where `repo_key` caches each repository's key: beside the stores the keys name (a
    sandboxed worker's domain denies it with them)."""
    return os.path.join(state_base(), "repo-keys")


def _common_dir_tag(common_dir: str) -> str:
    """A short, stable name for a git dir (two checksums; hashlib's import costs the hook 5 ms)."""
    data = common_dir.encode("utf-8", "surrogateescape")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def repo_key(checkout: Checkout) -> str:
    """The repository's identity on this machine: its root commit.

    A repository with no commit yet is keyed by its common git dir, the directory itself and
    not only its path (`nocommit-<path hash>-<identity hash>`, see `_nocommit_key`); its
    store is carried over to the root-commit key by `repo_state_dir` once a commit exists.

    The answer is cached per common git dir path, since finding the root commit walks history.
    A cached root commit is used only while that commit is an object of this repository: a
    repository made anew at the same path (`rm -rf`, `git init`) has other commits, and gets
    a store of its own instead of inheriting the old one's jobs, leases and bindings. The
    check reads git's object store directly (a loose object, else the pack indexes, else the
    alternates), without running git.
    """
    tag = _common_dir_tag(checkout.common_dir)
    cache_file = os.path.join(repo_keys_dir(), tag)
    try:
        with open(cache_file, encoding="ascii") as handle:
            cached = handle.read().strip()
    except (OSError, ValueError):
        cached = ""
    if cached and has_object(os.path.join(checkout.common_dir, "objects"), cached):
        return cached
    roots = _root_commits(checkout)
    if not roots:
        return _nocommit_key(checkout.common_dir)
    key = min(roots)
    if key != cached and os.path.isdir(state_base()):  # a cache never makes proctor's state (the hook's no-store pass)
        try:
            write_atomic(cache_file, key + "\n")
        except OSError:
            pass  # a cache we cannot write only costs the next call the same walk
    return key


def _nocommit_key(common_dir: str) -> str:
    """The key of a repository with no commit yet: its git dir's path, and that directory's
    identity, so a repository removed and made anew at the same path before any commit gets
    a store of its own. A filesystem hands a freed inode number straight back (ext4 does), so
    the identity holds, beside device and inode, what tells one life of that inode from the
    next: its generation (Linux), else its birth time (macOS, BSD), else the time git wrote
    `description`, which git never writes again. None of them changes while the repository
    lives, so `repo_state_dir` finds this store again after the first commit."""
    tag = _common_dir_tag(common_dir)
    try:
        st = os.stat(common_dir)
    except OSError:
        return f"nocommit-{tag}"
    birth: int | float | str | None = _inode_generation(common_dir)
    if birth is None:
        birth = getattr(st, "st_birthtime_ns", None) or getattr(st, "st_birthtime", None)
    if birth is None:
        try:
            birth = os.stat(os.path.join(common_dir, "description")).st_mtime_ns
        except OSError:
            birth = ""
    identity = f"{st.st_dev}:{st.st_ino}:{birth}".encode()
    return f"nocommit-{tag}-{zlib.crc32(identity):08x}"


# FS_IOC_GETVERSION, _IOR('v', 1, long), on the architectures whose ioctl numbers follow
# asm-generic's layout; elsewhere the generation is not asked for.
_GETVERSION = {
    "x86_64": 0x80087601,
    "aarch64": 0x80087601,
    "arm64": 0x80087601,
    "riscv64": 0x80087601,
    "s390x": 0x80087601,
    "i386": 0x80047601,
    "i686": 0x80047601,
    "armv7l": 0x80047601,
}


def _inode_generation(path: str) -> int | None:
    """The inode generation of a directory (ext2/3/4, btrfs and others give a fresh one to
    every inode they hand out), or None where the system or filesystem has none."""
    uname = os.uname() if hasattr(os, "uname") else None
    request = _GETVERSION.get(uname.machine) if uname and uname.sysname == "Linux" else None
    if request is None:
        return None
    import fcntl
    import sys

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    try:
        raw = fcntl.ioctl(fd, request, bytes(8))
    except OSError:
        return None
    finally:
        os.close(fd)
    return int.from_bytes(raw[:4], sys.byteorder) or None  # the kernel writes an int


def has_object(objects_dir: str, name: str) -> bool:
    """Whether the object named `name` (40 hex digits, SHA-1, or 64, SHA-256) is in the object
    store `objects_dir`, read without git: a loose object, an entry of a pack index, or the
    same in the stores objects/info/alternates names. False when unsure (an unreadable or
    unknown index): the caller then asks git."""
    if len(name) not in (40, 64) or name.strip("0123456789abcdef"):
        return False
    binary = bytes.fromhex(name)
    seen: set[str] = set()
    pending = [objects_dir]
    while pending and len(seen) < 6:  # git follows alternates 5 deep
        store = os.path.normpath(pending.pop(0))
        if store in seen:
            continue
        seen.add(store)
        if os.path.exists(os.path.join(store, name[:2], name[2:])):
            return True
        pack_dir = os.path.join(store, "pack")
        try:
            indexes = [entry for entry in os.listdir(pack_dir) if entry.endswith(".idx")]
        except OSError:
            indexes = []
        for index in indexes:
            index_path = os.path.join(pack_dir, index)
            if _index_has(index_path, binary) and os.path.exists(index_path[:-4] + ".pack"):
                return True  # an index without its pack is one git ignores too
        pending.extend(_alternates(store))
    return False


def _alternates(store: str) -> list[str]:
    try:
        with open(os.path.join(store, "info", "alternates"), encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith('"'):
            from proctor.vcs.git import unquote_path

            line = unquote_path(line)
        out.append(os.path.join(store, line))  # a relative entry is relative to this store
    return out


_IDX_V2 = b"\377tOc\0\0\0\x02"


def _index_has(path: str, name: bytes) -> bool:
    """Binary search of one pack index (version 2, or the headerless version 1) for `name`,
    reading only the two fanout entries and the names it probes. A short, truncated or
    unknown index answers False."""
    size = len(name)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        head = os.pread(fd, 8, 0)
        if head == _IDX_V2:
            fanout, names, stride, skip = 8, 8 + 1024, size, 0
        elif head[:4] == b"\377tOc":
            return False  # a version this code does not know
        else:
            fanout, names, stride, skip = 0, 1024, size + 4, 4  # v1: (offset, name) entries
        first = name[0]
        if first:
            bounds = os.pread(fd, 8, fanout + 4 * (first - 1))
            if len(bounds) != 8:
                return False
            lo, hi = int.from_bytes(bounds[:4], "big"), int.from_bytes(bounds[4:], "big")
        else:
            bound = os.pread(fd, 4, fanout)
            if len(bound) != 4:
                return False
            lo, hi = 0, int.from_bytes(bound, "big")
        if hi < lo or hi > (1 << 31):
            return False
        while lo < hi:
            mid = (lo + hi) // 2
            probe = os.pread(fd, size, names + mid * stride + skip)
            if len(probe) != size:
                return False
            if probe == name:
                return True
            if probe < name:
                lo = mid + 1
            else:
                hi = mid
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


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
    if (
        not create
        and not os.path.isdir(path)
        and not key.startswith("nocommit-")
        and os.path.isdir(os.path.join(base, _nocommit_key(checkout.common_dir)))
    ):
        create = True  # a store made before the first commit is carried on its first read after it
    if create and not os.path.isdir(path):
        # A store made before the first commit is carried forward to the root-commit key:
        # the store of this very git dir, not of one removed from the same path before it.
        if not key.startswith("nocommit-"):
            provisional = os.path.join(base, _nocommit_key(checkout.common_dir))
            if os.path.isdir(provisional):
                try:
                    os.replace(provisional, path)
                    # a PostgreSQL store keys its schema by the same name: it is carried on first open
                    with open(os.path.join(path, "carried-from"), "w", encoding="ascii") as handle:
                        handle.write(os.path.basename(provisional))
                except OSError:
                    pass
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)  # the person's alone: jobs, secrets' digests, outputs
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
