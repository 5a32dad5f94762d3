"""git, through subprocess, with plain functions: how proctor runs git. A few calls elsewhere
run git themselves, without this module's pinned options: paths._root_commits (`git rev-list`)
and store/unheld.py (`git cat-file -e`), both with the two variables below set, and broker.py
(`git --exec-path`, `git config --get-all` of the person's config), with neither.

Every call made here sets GIT_OPTIONAL_LOCKS=0 so a read (git status refreshes the index
otherwise) writes nothing to the repository, GIT_NO_REPLACE_OBJECTS=1 so what proctor reads
is the history itself (a `git replace` made in the tree cannot stand in for a commit or a
file proctor grades or takes its settings from), and pins the diff options a user's config
could change.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

from proctor.errors import ProctorError

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

# Output-shaping config a user may have set, pinned so digests and diffs are stable.
_PINNED = (
    "-c",
    "core.quotePath=true",
    "-c",
    "diff.noprefix=false",
    "-c",
    "diff.mnemonicPrefix=false",
    "-c",
    "diff.relative=false",
    "-c",
    "color.ui=false",
    # and the stat checks that decide whether a file changed: a holder's config must not make
    # git call a rewritten file clean (an mtime set back, with ctime or checkStat turned off)
    "-c",
    "core.trustctime=true",
    "-c",
    "core.checkStat=default",
    # and none of the repository's hooks run on proctor's git calls: a worker can write
    # .git/hooks (shared by every worktree) or set core.hooksPath, and a hook of its choosing
    # would run with proctor's authority (a post-checkout on `worktree add`, a commit-msg
    # adding a trailer to the commit proctor makes)
    "-c",
    "core.hooksPath=/dev/null",
    # nor an fsmonitor: a command git would run on a status or a diff, which any config a holder
    # can write (the repository's, a global one it planted from a sandboxed run) could name
    "-c",
    "core.fsmonitor=false",
)

# Set while a sandboxed run's tree is read back (runs.run_target): every git proctor starts
# meanwhile runs inside the run's own grant, so a filter or a helper the run planted in a
# config outside the checkout (~/.gitconfig) writes nothing the run could not write itself.
CONFINE: Callable[[], None] | None = None


# Set by `proctor work` once a sandboxed worker has run: [(key, value)] of the person's git
# config kept (who commits, the trusted directories), read before any worker ran. proctor's git
# then reads no global or system config, which the worker could write and proctor may not be
# able to put back (a file made immutable, a home made read-only): a filter planted there never
# runs with proctor's rights.
PERSON_CONFIG: list | None = None


def _env() -> dict:
    env = dict(os.environ)
    if PERSON_CONFIG is not None:
        env["GIT_CONFIG_GLOBAL"] = os.devnull
        env["GIT_CONFIG_NOSYSTEM"] = "1"
        count = int(env["GIT_CONFIG_COUNT"]) if env.get("GIT_CONFIG_COUNT", "").isdigit() else 0
        for key, value in PERSON_CONFIG:
            env[f"GIT_CONFIG_KEY_{count}"], env[f"GIT_CONFIG_VALUE_{count}"] = key, value
            count += 1
        env["GIT_CONFIG_COUNT"] = str(count)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    env.pop("GIT_DIR", None)
    env.pop("GIT_WORK_TREE", None)
    env.pop("GIT_INDEX_FILE", None)
    env["LC_ALL"] = "C"
    return env


def run(root: str, *args: str, check: bool = True, input: bytes | None = None) -> subprocess.CompletedProcess:
    try:
        proc = subprocess.run(
            ["git", *_PINNED, *args], cwd=root, input=input, capture_output=True, env=_env(), preexec_fn=CONFINE
        )
    except FileNotFoundError:
        raise ProctorError("git is not installed or not on PATH; install git") from None
    except OSError as exc:
        raise ProctorError(f"cannot run git in {root}: {exc}") from None
    if check and proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise ProctorError(
            f"git {args[0]} failed in {root}: {message[-1] if message else 'exit ' + str(proc.returncode)}"
        )
    return proc


# porcelain v2: ordinary, renamed (unused with --no-renames) and unmerged entries.
_FIELDS_BEFORE_PATH = {b"1 ": 8, b"2 ": 9, b"u ": 10}


def status(root: str) -> tuple[str | None, str, list[bytes], list[bytes]]:
    """(head revision or None when unborn, branch, changed tracked paths, untracked paths)."""
    out = run(
        root,
        "status",
        "--porcelain=v2",
        "-z",
        "--branch",
        "--untracked-files=all",
        "--no-renames",
        "--ignore-submodules=none",
    ).stdout
    revision: str | None = None
    branch = "HEAD"
    changed: list[bytes] = []
    untracked: list[bytes] = []
    for record in out.split(b"\0"):
        if not record:
            continue
        if record.startswith(b"# branch.oid "):
            oid = record[len(b"# branch.oid ") :].decode()
            revision = None if oid == "(initial)" else oid
        elif record.startswith(b"# branch.head "):
            head = record[len(b"# branch.head ") :].decode("utf-8", "surrogateescape")
            branch = "HEAD" if head == "(detached)" else head
        elif record.startswith(b"? "):
            untracked.append(record[2:])
        elif record[:2] in _FIELDS_BEFORE_PATH:
            # Paths may hold spaces: split off exactly the fields that precede the path.
            changed.append(record.split(b" ", _FIELDS_BEFORE_PATH[record[:2]])[-1])
    return revision, branch, changed, untracked


def diff_patch(root: str, revision: str | None) -> bytes:
    """The whole uncommitted patch (staged and unstaged) against `revision`, as bytes."""
    # diff-index, the plumbing, never refreshes the index; `git diff` would rewrite it.
    return run(
        root,
        "diff-index",
        "-p",
        "--binary",
        "--full-index",
        "--no-ext-diff",
        "--no-textconv",
        "--no-color",
        "--no-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        revision or EMPTY_TREE,
        "--",
    ).stdout


def changed_lines(root: str, revision: str, path: str) -> tuple[int, int] | None:
    """(added, removed) lines of `path` in the work tree since `revision`; None if unreadable."""
    proc = run(root, "diff-index", "--numstat", "--no-renames", revision, "--", path, check=False)
    if proc.returncode != 0:
        return None
    added = removed = 0
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            added += int(parts[0]) if parts[0].isdigit() else 0
            removed += int(parts[1]) if parts[1].isdigit() else 0
    return added, removed


def head(root: str) -> str | None:
    proc = run(root, "rev-parse", "--verify", "-q", "HEAD", check=False)
    return proc.stdout.decode().strip() or None if proc.returncode == 0 else None


# What diff_attribute answers for `-diff`: git treats the file as binary, with no diff driver.
DIFF_UNSET = "unset"


def diff_attribute(root: str, path: str) -> str | None:
    """The `diff` attribute .gitattributes gives `path`, in four kinds of answer:

    a driver name (`diff=python`); "default" when set bare (`diff`: git's text diff, no
    driver named); DIFF_UNSET ("unset") when unset (`-diff`: git diffs the file as binary, so
    it has no diff driver at all); None when unspecified (no rule, `!diff`, an empty `diff=`,
    or git could not answer): the caller may fall back to its own guess.

    git prints a driver literally named "unset" as it prints `-diff`, so that name reads as
    unset here too, as git's own output leaves no way to tell them apart.
    """
    return diff_attributes(root, [path])[path]


def diff_attributes(root: str, paths: list[str]) -> dict[str, str | None]:
    """diff_attribute's answer for many paths, from one `git check-attr --stdin`: "unset"
    (DIFF_UNSET) or a driver's name as git prints it, "default" for `set`, None otherwise."""
    proc = run(
        root,
        "check-attr",
        "-z",
        "--stdin",
        "diff",
        input=b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in paths),
        check=False,
    )
    out: dict[str, str | None] = {p: None for p in paths}
    if proc.returncode != 0:
        return out
    fields = proc.stdout.split(b"\0")
    for i in range(0, len(fields) - 2, 3):
        path = fields[i].decode("utf-8", "surrogateescape")
        value = fields[i + 2].decode("utf-8", "replace")
        out[path] = None if value in ("unspecified", "") else "default" if value == "set" else value
    return out


def start(root: str, *args: str) -> subprocess.Popen:
    """Start git without waiting, for reads that can run side by side."""
    try:
        return subprocess.Popen(
            ["git", *_PINNED, *args],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
            preexec_fn=CONFINE,
        )
    except FileNotFoundError:
        raise ProctorError("git is not installed or not on PATH; install git") from None
    except OSError as exc:
        raise ProctorError(f"cannot run git in {root}: {exc}") from None


def finish(proc: subprocess.Popen, what: str) -> bytes:
    out, err = proc.communicate()
    if proc.returncode != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        raise ProctorError(f"git {what} failed: {message[-1] if message else 'exit ' + str(proc.returncode)}")
    return out


_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote_path(text: str) -> str:
    """A path as git prints it with core.quotePath: C-quoted when it holds unusual bytes."""
    if not (len(text) >= 2 and text[0] == '"' and text[-1] == '"'):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            digits = body[i + 1 : i + 4]
            if len(digits) == 3 and all(ch in "01234567" for ch in digits):
                out.append(int(digits, 8))
                i += 4
                continue
        out.extend(c.encode("utf-8", "surrogateescape"))
        i += 1
    return out.decode("utf-8", "surrogateescape")


def parse_hunks(patch: bytes, bodies: dict | None = None) -> dict[str, dict]:
    """Per file of a `git diff -U0` patch: added and removed line counts and line ranges, and the
    old line each pure insertion follows (`after`). `bodies`, given, receives per file each
    hunk's (new start, new count, removed lines), from which `old_side` rebuilds the old file.

    Hunk bodies are skipped by their counts, never scanned for headers: a removed line
    `-- x` reads `--- x` in a patch and must not be taken for a file header.
    """
    files: dict[str, dict] = {}
    current: dict | None = None
    old_path = None
    in_header = False
    lines = patch.split(b"\n")
    i, count = 0, len(lines)
    while i < count:
        line = lines[i]
        i += 1
        if line.startswith(b"diff --git "):
            in_header, current, old_path = True, None, None
        elif in_header and line.startswith(b"--- "):
            old_path = line[4:].decode("utf-8", "surrogateescape")
        elif in_header and line.startswith(b"+++ "):
            new_path = line[4:].decode("utf-8", "surrogateescape")
            chosen = unquote_path(new_path if new_path != "/dev/null" else old_path or "")
            name = chosen[2:] if chosen[:2] in ("a/", "b/") else chosen
            current = files.setdefault(name, {"added": 0, "removed": 0, "new": [], "old": [], "after": []})
            in_header = False
        elif line.startswith(b"@@ ") and current is not None:
            header = line[3:].split(b"@@")[0].split()
            old_start, old_count = _range(header[0][1:])
            new_start, new_count = _range(header[1][1:])
            if old_count:
                current["removed"] += old_count
                current["old"].append([old_start, old_start + old_count - 1])
            if new_count:
                current["added"] += new_count
                current["new"].append([new_start, new_start + new_count - 1])
                if not old_count:
                    current["after"].append(old_start)  # inserted after this old line (0: the top)
            body = old_count + new_count
            removed: list[bytes] = []
            unended = ""  # "-" when the old file's last line has no newline, "+" the new's
            while i < count and (body > 0 or lines[i].startswith(b"\\")):
                if lines[i].startswith(b"\\"):  # "\ No newline at end of file", after its line
                    unended += lines[i - 1][:1].decode("ascii", "replace")
                else:
                    body -= 1
                    if bodies is not None and lines[i].startswith(b"-"):
                        removed.append(lines[i][1:])
                i += 1
            if bodies is not None:
                bodies.setdefault(name, []).append((new_start, new_count, removed, unended))
    return files


def old_side(new: bytes, hunks: list[tuple]) -> bytes:
    """The file a -U0 patch was made from, rebuilt from the file it made and its hunks (each
    (new start, new count, removed lines, unended) from parse_hunks, in order): no second read
    of the old tree."""
    ended = new.endswith(b"\n")
    lines = (new[:-1] if ended else new).split(b"\n") if new else []
    out: list[bytes] = []
    cursor = 0
    last = (False, -1)  # where the old file's last line came from: (removed, unended) or (False, new index)
    for new_start, new_count, removed, unended in hunks:
        before = new_start - 1 if new_count else new_start  # new lines ahead of the hunk
        if before > cursor:
            last = (False, before - 1)
        out.extend(lines[cursor:before])
        out.extend(removed)
        if removed:
            last = (True, "-" in unended)
        cursor = before + new_count
    if len(lines) > cursor:
        last = (False, len(lines) - 1)
    out.extend(lines[cursor:])
    if not out:
        return b""
    removed_last, where = last
    # a removed last line ends as the patch says; a kept one as it does in the new file, where
    # only the new file's last line can lack its newline
    unended_old = where if removed_last else (where == len(lines) - 1 and not ended)
    return b"\n".join(out) + (b"" if unended_old else b"\n")


def _range(spec: bytes) -> tuple[int, int]:
    start, _, count = spec.partition(b",")
    return int(start), int(count) if count else 1
