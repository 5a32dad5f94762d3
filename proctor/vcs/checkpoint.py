"""Checkpoints: the identity of the working tree right now. Resolves and records; mints
nothing (no tag, stash, ref or file), so taking one costs the tree nothing.

The digest is the half a revision cannot supply: every worker on a branch shares the
revision, so only the digest says WHICH dirty tree was handed out. It covers the uncommitted
patch against HEAD (staged and unstaged alike) and the content of every untracked,
non-ignored file, so two trees that differ only by a new file differ in digest.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass

from proctor.errors import ProctorError
from proctor.vcs import git

DIGEST_LENGTH = 16


@dataclass(frozen=True)
class Checkpoint:
    revision: str | None
    branch: str
    dirty: bool
    patch_digest: str | None
    vcs: str = "git"

    @property
    def name(self) -> str:
        """The single citable token: the revision, plus `+<digest>` when the tree is dirty."""
        if self.revision is None:
            raise ProctorError(
                "this repository has no commit yet, so a checkpoint has no revision to name; "
                "commit once (git commit --allow-empty -m init)"
            )
        return f"{self.revision}+{self.patch_digest}" if self.dirty else self.revision

    def text(self) -> str:
        revision = self.revision or "(no commit)"
        if self.dirty:
            return f"{revision} {self.branch} dirty {self.patch_digest}"
        return f"{revision} {self.branch} clean"

    def to_json(self) -> dict:
        return asdict(self)


def take(root: str) -> Checkpoint:
    revision, branch, changed, untracked = git.status(root)
    if not changed and not untracked:
        return Checkpoint(revision, branch, False, None)
    return Checkpoint(revision, branch, True, _digest(root, revision, untracked))


def _digest(root: str, revision: str | None, untracked: list[bytes]) -> str:
    h = hashlib.sha256()
    patch = git.diff_patch(root, revision)
    h.update(b"patch %d\0" % len(patch))
    h.update(patch)
    for rel in sorted(untracked):
        h.update(b"untracked\0" + rel + b"\0")
        h.update(_content_digest(os.path.join(os.fsencode(root), rel)))
    return h.hexdigest()[:DIGEST_LENGTH]


def _content_digest(path: bytes) -> bytes:
    try:
        if os.path.islink(path):
            return b"link\0" + hashlib.sha256(os.readlink(path)).digest()
        h = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
        return b"file\0" + h.digest()
    except FileNotFoundError:
        return b"absent\0"  # removed between git's listing and this read
    except OSError:
        return b"unreadable\0"


def _directory_digest(path: bytes) -> bytes:
    """Every file under a directory git does not look into, by path and content (a nested
    repository, a submodule directory that was never checked out)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if d != b".git")  # its files, not git's bookkeeping
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            h.update(os.path.relpath(full, path) + b"\0")
            h.update(_content_digest(full) + b"\0")
    return h.hexdigest()[:32].encode()


def handed_digests(root: str, limit: int = 5000) -> dict[str, str]:
    """For a dirty tree: each uncommitted path with the digest of what it holds now. Stored
    on a job at fork, so verification can tell the uncommitted work that was HANDED OUT from
    what the holder changed since."""

    _revision, _branch, changed, untracked = git.status(root)
    out: dict[str, str] = {}
    for raw in (changed + untracked)[:limit]:
        rel = raw.decode("utf-8", "surrogateescape")
        out[rel] = handed_digest(os.path.join(root, rel))
    return out


def handed_digest(path: str) -> str:
    """What a handed path holds, a symbolic link as its own (its target's text), never the
    file it leads to: `link:<sha256>`, else as file_digest."""
    import hashlib

    try:
        if os.path.islink(path):
            return "link:" + hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()
    except OSError:
        return "unreadable"
    return file_digest(path)


def file_digest(path: str, hashlib=None) -> str:
    """`sha256:<hex>` of a file's content, or `absent`, `dir`, `unreadable`."""
    import hashlib as _hashlib
    import stat

    hashlib = hashlib or _hashlib
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "unreadable" if os.path.islink(path) else "absent"
    except OSError:
        return "unreadable"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if not stat.S_ISREG(info.st_mode):
        return "unreadable"
    try:
        h = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                h.update(chunk)
        return "sha256:" + h.hexdigest()
    except OSError:
        return "unreadable"


def parse_name(token: str) -> tuple[str, str | None]:
    """`<revision>` or `<revision>+<digest>` as -o name prints it."""
    revision, plus, digest = token.strip().lower().partition("+")
    if not 4 <= len(revision) <= 64 or any(c not in "0123456789abcdef" for c in revision):
        raise ValueError(f"{token!r} is not a checkpoint; pass what `proctor vcs checkpoint -o name` prints")
    if plus and (not digest or any(c not in "0123456789abcdef" for c in digest)):
        raise ValueError(f"{token!r} is not a checkpoint; after + comes the hex digest of the dirty tree")
    return revision, (digest or None)


def tree_digest(root: str) -> str:
    """tree_entries(root), hashed: see there."""
    return digest_of(tree_entries(root))


def digest_of(entries: dict[bytes, bytes]) -> str:
    h = hashlib.sha256()
    for path in sorted(entries):
        h.update(path + b"\0" + entries[path] + b"\0")
    return h.hexdigest()[:32]


# `git ls-files -s --debug -z`: an entry, then its cached stat data.
_INDEX_ENTRY = re.compile(
    rb"(\d{6}) ([0-9a-f]+) (\d)\t([^\0]*)\0  ctime: (\d+):(\d+)\n  mtime: (\d+):(\d+)\n"
    rb"  dev: (\d+)\tino: (\d+)\n  uid: \d+\tgid: \d+\n  size: (\d+)\tflags: [0-9a-f]+\n"
)

# A file whose status changed this recently may change again within the filesystem's timestamp
# granularity without its status moving: its hash is never reused (git's "racily clean").
RACY_SECONDS = 2.0


def hash_paths(root: str, paths: list[bytes], *flags: str) -> list[bytes]:
    """git's blob ids of files named relative to `root`, as `git add` would store them
    (`hash-object --stdin-paths`, run in `root`, nothing written). Relative: an absolute path
    misses every .gitattributes pattern with a slash in it, and with it the filters."""
    listed = b"".join(p + b"\n" for p in paths)
    return git.run(root, "hash-object", *flags, "--stdin-paths", input=listed).stdout.split()


def tree_entries(
    root: str,
    hashed: dict | None = None,
    stale: list | None = None,
    ctimes: dict | None = None,
    index: dict | None = None,
) -> dict[bytes, bytes]:
    """The identity of the work tree's CONTENT: every tracked and untracked, non-ignored
    file's path, mode and git blob id, hashed together. Unlike a checkpoint it does not move
    when the same content is committed, and unlike a file's mtime it cannot be set back: a
    run recorded on one digest was run on exactly that tree.

    A tracked file whose stat data matches its index entry, nanoseconds included, is taken
    from the index; changed and untracked ones are hashed as `git add` would (hash_paths).
    Raises ProctorError when git cannot read the tree. `stale`, given, receives the tracked
    paths whose file differs from the index's blob; `ctimes`, given, each listed file's
    status-change time (ns), which no writer can set back; `index`, given, each stage-0
    entry's (mode, blob) as the index holds it.

    `hashed`, given, is a memo shared by calls on one tree (a run's before and after): a file
    whose inode, size, mtime and ctime are unchanged since it was hashed, and whose status
    changed more than RACY_SECONDS before, keeps its blob id. Setting an mtime back moves the
    ctime, so the memo cannot be fooled the way a stat cache keyed on mtime alone can."""
    import stat
    import time

    staged = git.start(root, "ls-files", "-s", "--debug", "-z")
    others = git.start(root, "ls-files", "--others", "--exclude-standard", "-z")
    entries: dict[bytes, bytes] = {}
    index_blobs: dict[bytes, bytes] = {}
    rehash: list[bytes] = []
    base = os.fsencode(root)
    prefix = base.rstrip(b"/") + b"/"
    looked: dict[bytes, os.stat_result] = {}  # what the stat check read, not read twice
    # git's own stat check is not trusted: a checkout's config can turn parts of it off
    # (core.trustctime, core.checkStat, core.fileMode, a flag on the entry), and without
    # nanoseconds it cannot see a rewrite of the same size within the second its mtime is
    # set back to. Every entry's stat data, nanoseconds included, is held to the file's here,
    # and an entry as new as the index itself is racy and hashed again, as git would.
    try:
        from proctor.paths import find_checkout

        index_mtime = os.stat(os.path.join(find_checkout(root).git_dir, "index")).st_mtime_ns
    except (OSError, ProctorError):
        index_mtime = 0
    listing = git.finish(staged, "ls-files")
    matches = list(_INDEX_ENTRY.finditer(listing))
    if len(matches) != listing.count(b"\0  ctime: "):
        raise ProctorError(f"the index of {root} could not be read entry by entry (git ls-files --debug)")
    for match in matches:
        mode, blob, stage, path = match.group(1), match.group(2), match.group(3), match.group(4)
        if stage != b"0":
            rehash.append(path)
            continue
        entries[path] = mode + b" " + blob
        index_blobs[path] = blob
        if index is not None:
            index[path] = (mode, blob)
        if mode == b"160000":
            continue
        ctime = int(match.group(5)) * 1_000_000_000 + int(match.group(6))
        mtime = int(match.group(7)) * 1_000_000_000 + int(match.group(8))
        try:
            info = os.lstat(prefix + path)
        except OSError:
            rehash.append(path)
            continue
        if ctimes is not None:
            ctimes[path] = info.st_ctime_ns
        on_disk = (
            b"120000"
            if stat.S_ISLNK(info.st_mode)
            else b"100755"
            if stat.S_ISREG(info.st_mode) and info.st_mode & 0o100
            else b"100644"
            if stat.S_ISREG(info.st_mode)
            else b"other"
        )
        if (
            on_disk != mode
            or info.st_ctime_ns != ctime
            or info.st_mtime_ns != mtime
            or info.st_ino % 2**32 != int(match.group(10))
            or info.st_size % 2**32 != int(match.group(11))
            or mtime >= index_mtime
        ):
            rehash.append(path)
            looked[path] = info
    rehash += [p for p in git.finish(others, "ls-files").split(b"\0") if p]
    files: list[bytes] = []
    for path in dict.fromkeys(rehash):
        full = prefix + path
        try:
            info = looked.get(path) or os.lstat(full)
            if ctimes is not None:
                ctimes[path] = info.st_ctime_ns
        except FileNotFoundError:
            entries.pop(path, None)  # deleted from the work tree
            continue
        except OSError:
            entries[path] = b"unreadable"
            continue
        if stat.S_ISLNK(info.st_mode):
            target = os.readlink(full)
            entries[path] = b"120000 " + hashlib.sha1(b"blob %d\0" % len(target) + target).hexdigest().encode()
        elif stat.S_ISREG(info.st_mode):
            entries[path] = b"100755" if info.st_mode & 0o100 else b"100644"
            key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            memo = hashed.get(path) if hashed is not None else None
            if memo is not None and memo[0] == key:
                entries[path] += b" " + memo[1]
            else:
                files.append(path)
                if hashed is not None and time.time() - info.st_ctime_ns / 1e9 > RACY_SECONDS:
                    hashed[path] = (key, None)  # filled once hashed below
        elif stat.S_ISDIR(info.st_mode) and entries.get(path, b"").startswith(b"160000"):
            continue  # a submodule: read below, whether git calls it changed or not
        elif stat.S_ISDIR(info.st_mode):
            from proctor.paths import linked_worktree

            if linked_worktree(root, os.fsdecode(path.rstrip(b"/"))):
                continue  # a worktree of this repository made inside the tree: a checkout of its own
            # an untracked nested repository (git lists it, not what it holds): what it holds
            entries[path.rstrip(b"/")] = b"repository " + _directory_digest(full.rstrip(b"/"))
        else:
            entries[path] = b"special"
    for path, entry in list(entries.items()):
        if not entry.startswith(b"160000"):
            continue
        # a submodule: what it holds, not only the commit recorded for it (its own config can
        # tell git to ignore its changes); one not checked out holds nothing, or files no git
        # listing shows
        inner = os.path.join(base, path)
        if os.path.lexists(os.path.join(inner, b".git")):
            try:
                entries[path] = (
                    entry
                    + b" "
                    + (git.head(os.fsdecode(inner)) or "").encode()
                    + b" "
                    + digest_of(tree_entries(os.fsdecode(inner))).encode()
                )
            except ProctorError:
                entries[path] = entry + b" unreadable"
        elif os.path.isdir(inner) and os.listdir(inner):
            entries[path] = entry + b" files " + _directory_digest(inner)
    if files:
        named = [p for p in files if b"\n" not in p]
        for path, blob in zip(named, hash_paths(root, named)):
            if stale is not None and path in index_blobs and index_blobs[path] != blob:
                stale.append(path)
            entries[path] += b" " + blob
            if hashed is not None and path in hashed and hashed[path][1] is None:
                hashed[path] = (hashed[path][0], blob)
        for path in files:
            if b"\n" in path:  # hash-object reads one path per line: hash this one as git would, unfiltered
                with open(os.path.join(base, path), "rb") as handle:
                    data = handle.read()
                entries[path] += b" " + hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest().encode()
    return entries
