"""Path claims: how an entry is spelled, what it names, and when two collide.

Core, because the job store (fork, verify) and the guard (on every tool call) read claims the
same way; it imports only the standard library's cheapest modules, for the hook's sake.

An entry names a repository-relative file (`internal/job/store.go`), a glob
(`db/migrations/**`), or one declaration of a file (`run.go#executeStages`). A path that
itself holds `#` is spelled `./notes/a#b.md` (a leading ./ makes the whole entry the path)
or `notes/a\\#b.md` (escaped, which also allows `notes/a\\#b.md#Intro`).

Overlap is by containment on a directory key: a literal path is its own key, a glob is
judged by the directories it names before its first wildcard, which over-reports rather
than misses a pair. Finding overlaps walks each key's ancestors in a dict, so it is linear
in the number of paths (times their depth), never quadratic in the number of jobs.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from proctor import errors

# Only * and ? make an entry a glob: `[` is common in real paths (app/[id]/page.tsx), and a
# character class is still honoured inside an entry that is a glob for another reason.
_GLOB = re.compile(r"[*?]")


class Claim:
    """One claim: a repository-relative, "/"-separated path ("." is the root), and optionally
    one declaration of that file. Immutable and hashable."""

    __slots__ = ("path", "declaration")
    # Declared for the type checker; set once, through object.__setattr__, in __init__.
    path: str
    declaration: str | None

    def __init__(self, path: str, declaration: str | None = None) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "declaration", declaration)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Claim is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Claim) and (self.path, self.declaration) == (other.path, other.declaration)

    def __hash__(self) -> int:
        return hash((self.path, self.declaration))

    def __repr__(self) -> str:
        return f"Claim({self.path!r}, {self.declaration!r})"

    @property
    def glob(self) -> bool:
        return _GLOB.search(self.path) is not None

    @property
    def spelling(self) -> str:
        """The canonical way to write this claim back."""
        if self.declaration is not None:
            return self.path.replace("#", "\\#") + "#" + self.declaration
        if "#" in self.path:
            return "./" + self.path
        return self.path

    @property
    def key(self) -> str:
        """The directory key overlap is judged on ("" is the repository root)."""
        return claim_key(self.path)


def claim_key(path: str) -> str:
    if path == ".":
        return ""
    if _GLOB.search(path) is None:
        return path
    literal: list[str] = []
    for part in path.split("/"):
        if _GLOB.search(part):
            break
        literal.append(part)
    return "/".join(literal)


def split_entry(raw: str) -> tuple[str, str | None, bool]:
    """(path text, declaration or None, whether an unescaped # split it)."""
    if raw.startswith("./"):
        return raw[2:] or ".", None, False
    if "#" not in raw:
        return raw, None, False
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw) and raw[i + 1] == "#":
            out.append("#")
            i += 2
            continue
        if c == "#":
            return "".join(out), raw[i + 1 :].replace("\\#", "#"), True
        out.append(c)
        i += 1
    return "".join(out), None, False


def normalize(path_text: str, root: str) -> str | None:
    """Repository-relative, normalized; None when the path leaves the repository."""
    text = path_text.replace("\\", "/") if os.sep == "\\" else path_text
    if os.path.isabs(text):
        real_root = os.path.realpath(root)
        candidate = os.path.normpath(text)
        for base in (os.path.normpath(root), real_root):
            if candidate == base:
                return "."
            if candidate.startswith(base.rstrip("/") + "/"):
                return candidate[len(base.rstrip("/")) + 1 :]
        return None
    rel = os.path.normpath(text) if text else "."
    if rel == ".." or rel.startswith("../"):
        return None
    return rel


def escapes_by_link(path: str, root: str, seen: dict | None = None) -> bool:
    """Whether the deepest existing part of `path` resolves outside `root` (a symlink out).
    `seen` (one dict for one record's paths) keeps each prefix's answer, so a record naming
    many files under a few directories resolves each directory once."""
    seen = {} if seen is None else seen
    if root not in seen:
        seen[root] = os.path.realpath(root)
    real_root = seen[root]
    probe = claim_key(path)
    walked = []
    answer = False
    while probe:
        if probe in seen:
            answer = seen[probe]
            break
        walked.append(probe)
        full = os.path.join(root, probe)
        if os.path.lexists(full):
            real = os.path.realpath(full)
            answer = not (real == real_root or real.startswith(real_root.rstrip("/") + "/"))
            break
        probe = os.path.dirname(probe)
    for prefix in walked:
        seen[prefix] = answer
    return answer


def parse(
    raw: object, root: str, field: str, job_id: str, seen: dict | None = None
) -> tuple[Claim | None, list[tuple[str, str]]]:
    """One entry of a path list: the claim, or the refusals it earns (`seen`: escapes_by_link's)."""
    if not isinstance(raw, str):
        raise errors.ProctorError(f"{field} entries must be strings, got {raw!r}", errors.BAD_RECORD)
    entry = raw.strip()
    if not entry:
        raise errors.ProctorError(f"{field} has an empty entry; remove it or name a path", errors.BAD_RECORD)
    path_text, declaration, split = split_entry(entry)
    refusals: list[tuple[str, str]] = []
    if split:
        unsplit = normalize(entry.replace("\\#", "#"), root)
        if unsplit is not None and os.path.lexists(os.path.join(root, unsplit)):
            escaped = unsplit.replace("#", "\\#")
            refusals.append(
                (
                    errors.HASH_AMBIGUOUS,
                    f"refused fork of {job_id}: {field} entry {entry!r} names the existing path "
                    f"{unsplit!r}, but an unescaped # starts a declaration claim; write ./{unsplit} "
                    f"or {escaped} for the file",
                )
            )
            return None, refusals
    path = normalize(path_text, root)
    if path is None:
        refusals.append(
            (
                errors.PATH_OUTSIDE_REPO,
                f"refused fork of {job_id}: {field} entry {entry!r} is outside the repository {root}; "
                f"name paths inside it, relative to its root",
            )
        )
        return None, refusals
    if escapes_by_link(path, root, seen):
        refusals.append(
            (
                errors.PATH_OUTSIDE_REPO,
                f"refused fork of {job_id}: {field} entry {entry!r} leads outside the repository through "
                f"a symbolic link; name the real path inside {root}",
            )
        )
        return None, refusals
    claim = Claim(path, declaration.strip() if declaration is not None else None)
    if declaration is not None:
        if not claim.declaration:
            refusals.append(
                (
                    errors.CLAIM_UNGRADABLE,
                    f"refused fork of {job_id}: {field} entry {entry!r} claims an empty declaration; "
                    f"name the declaration after # (run.go#executeStages) or drop the # to claim the file",
                )
            )
        elif claim.glob:
            refusals.append(
                (
                    errors.CLAIM_UNGRADABLE,
                    f"refused fork of {job_id}: {field} entry {entry!r} claims a declaration of a glob, "
                    f"which nothing can grade; claim a declaration of one literal file",
                )
            )
    return claim, refusals


def contains(outer: str, inner: str) -> bool:
    """Whether directory key `outer` contains (or equals) `inner`."""
    return outer == "" or inner == outer or inner.startswith(outer + "/")


def ancestors(key: str) -> list[str]:
    """`a/b/c` -> ["", "a", "a/b", "a/b/c"]."""
    if key == "":
        return [""]
    parts = key.split("/")
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


def pair_kind(a: Claim, b: Claim, same=None) -> str | None:
    """ "overlapping", "disjoint" (different declarations of one file) or None (no overlap).
    `same(path, a, b)`, given, says whether two differently spelled declaration claims name
    one declaration of the file as it is (`def alpha` and `alpha`): then they overlap."""
    if not (contains(a.key, b.key) or contains(b.key, a.key)):
        return None
    return _contained_kind(a, b, same)


def _contained_kind(a: Claim, b: Claim, same=None) -> str:
    """The kind of a pair already known to overlap by key."""
    if (
        a.declaration is not None
        and b.declaration is not None
        and a.path == b.path
        and a.declaration != b.declaration
        and not a.glob
        and not (same is not None and same(a.path, a.declaration, b.declaration))
    ):
        return "disjoint"
    return "overlapping"


def find_overlaps(claims_by_job: dict[str, list[Claim]], same=None) -> list[dict]:
    """Every pair of jobs whose claims intersect, each side's own spellings kept apart.

    Each claim looks up only its own key's ancestors (and itself) in a dict, so the work is
    the number of claims times their depth plus the pairs found, never all pairs of jobs.
    """
    keyed = [(job, claim, claim.key) for job, claims in claims_by_job.items() for claim in claims]
    by_key: dict[str, list[tuple[str, Claim]]] = {}
    for job, claim, key in keyed:
        by_key.setdefault(key, []).append((job, claim))
    pairs: dict[tuple[str, str], dict] = {}
    for job, claim, key in keyed:
        for anc in ancestors(key):
            for other_job, other in by_key.get(anc, ()):
                if other_job == job:
                    continue
                kind = _contained_kind(claim, other, same)
                a, b = (job, other_job) if job < other_job else (other_job, job)
                entry = pairs.get((a, b))
                if entry is None:
                    entry = pairs[(a, b)] = {"jobs": [a, b], "paths": {a: set(), b: set()}, "claims": kind}
                entry["paths"][job].add(claim.spelling)
                entry["paths"][other_job].add(other.spelling)
                if kind == "overlapping":
                    entry["claims"] = "overlapping"
    result = []
    for a, b in sorted(pairs):
        entry = pairs[(a, b)]
        entry["paths"] = {job: sorted(paths) for job, paths in entry["paths"].items()}
        result.append(entry)
    return result


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def glob_match(pattern: str, path: str) -> bool:
    """Whether repository-relative `path` matches `pattern` (`*` stays in one directory, `**` spans)."""
    return _glob_regex(pattern).match(path) is not None


def walk_glob(root: str, pattern: str, prune_matched: bool = False):
    """What exists under `root` that the glob `pattern` matches: (repository-relative path,
    whether it is a directory, a link to one counted as one). The walk starts at the pattern's
    literal prefix, enters no symbolic link (one is matched, never followed; a prefix through one
    matches nothing) and no `.git`
    directory at any depth, and skips the checkout's own `.git` (a linked worktree's is a file).
    With `prune_matched`, a matched directory is not entered (the sandbox grants all below it).
    The one walk behind a fork's digest of a glob, a paths goal's "exists" and a sandbox's grants.
    """
    key = claim_key(pattern)
    if key and os.path.realpath(os.path.join(root, key)) != os.path.join(os.path.realpath(root), key):
        return  # the literal prefix is, or passes through, a link: nothing under it is the checkout's own
    stack = [key]
    while stack:
        rel_dir = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel_dir) if rel_dir else root))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            real_dir = entry.is_dir(follow_symlinks=False)
            if entry.name == ".git" and (real_dir or not rel_dir):
                continue
            matched = glob_match(pattern, rel)
            if matched:
                yield rel, real_dir or entry.is_dir()
            if real_dir and not (matched and prune_matched):
                stack.append(rel)


def covers(claim: Claim, path: str) -> bool:
    """Whether `claim` covers the literal file `path` (a declaration claim covers its file)."""
    if claim.glob:
        return glob_match(claim.path, path)
    return contains(claim.key, path)


def within(child: Claim, parent: Claim) -> bool:
    """Whether a child's claim stays inside one of its parent's claims."""
    if parent.declaration is not None:
        return child.path == parent.path and child.declaration == parent.declaration
    if parent.glob:
        if not child.glob:
            return glob_match(parent.path, child.path)
        if child.path == parent.path:
            return True
        if parent.path.endswith("/**") or parent.path == "**":
            return contains(parent.key, child.key)
        return False
    if child.glob:
        return contains(parent.key, child.key) and child.key != ""
    return contains(parent.key, child.path)


class Coverage:
    """Whether any of many claims covers a path, in the time of the path's depth rather than
    the number of claims: literal keys are looked up by the path's ancestors, globs (few)
    tried one by one. The same answer as any(covers(c, path) for c in claims)."""

    __slots__ = ("keys", "globs")

    def __init__(self, claims) -> None:
        self.keys: set[str] = set()
        self.globs: list[str] = []
        for claim in claims:
            if claim.glob:
                self.globs.append(claim.path)
            else:
                self.keys.add(claim.key)

    def __call__(self, path: str) -> bool:
        keys = self.keys
        if keys:
            if "" in keys or path in keys:
                return True
            at = path.find("/")
            while at != -1:
                if path[:at] in keys:
                    return True
                at = path.find("/", at + 1)
        return any(glob_match(pattern, path) for pattern in self.globs)
