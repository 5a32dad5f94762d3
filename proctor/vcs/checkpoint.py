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


def handed_digests(root: str, limit: int = 5000) -> dict[str, str]:
    """For a dirty tree: each uncommitted path with the digest of what it holds now. Stored
    on a job at fork, so verification can tell the uncommitted work that was HANDED OUT from
    what the holder changed since."""
    import hashlib

    _revision, _branch, changed, untracked = git.status(root)
    out: dict[str, str] = {}
    for raw in (changed + untracked)[:limit]:
        rel = raw.decode("utf-8", "surrogateescape")
        out[rel] = file_digest(os.path.join(root, rel), hashlib)
    return out


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
