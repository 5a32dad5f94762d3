"""The symbol view of a change.

- `graph_diff(checkout, revision)`: per changed file since `revision` (the work tree,
  untracked files included), the definitions added, removed and changed (its text differs).
- `annotate(checkout, patch)`: a unified diff (`git diff <revision> | proctor diff -`), each
  file with the declarations its hunks touch, on the old side (removed lines) and the new
  (added lines), and the files of the work tree that name each one.
"""

from __future__ import annotations

import os
import re

from proctor import errors
from proctor.jobrecord import split_checkpoint
from proctor.symbols import languages
from proctor.symbols.index import Index, Mention, blob_id, read_blobs
from proctor.vcs import git

SHOWN = 5  # referring places listed per declaration


def resolve(checkout: str, revision: str) -> str:
    """`revision` (a checkpoint token's revision half too) as a commit id."""
    rev = split_checkpoint(revision)[0]
    proc = (
        git.run(checkout, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}", check=False)
        if rev and not rev.startswith("-")
        else None
    )
    if proc is None or proc.returncode != 0:
        raise errors.ProctorError(
            f"{revision!r} names no commit in {checkout}; give a revision (a commit, a branch, "
            f"or the revision half of a checkpoint token)",
            errors.NOT_A_REVISION,
        )
    return proc.stdout.decode().strip()


def graph_diff(checkout: str, revision: str, index: Index) -> dict:
    """{"revision": commit, "files": [{path, language, added, removed, changed, error}]}, each
    definition as {name, kind, scope, lines: [first, last]} (lines on its own side)."""
    commit = resolve(checkout, revision)
    names = git.run(
        checkout, "--literal-pathspecs", "diff-index", "--name-only", "-z", "--no-renames", commit, "--"
    ).stdout
    others = git.run(checkout, "ls-files", "--others", "--exclude-standard", "-z").stdout
    paths = sorted({p.decode("utf-8", "surrogateescape") for p in (names + others).split(b"\0") if p})
    sources = [p for p in paths if languages.language_of(p)]
    before = index.summaries_at(commit, sources)
    files = []
    for path in sources:
        full = os.path.join(checkout, path)
        after = None
        if os.path.isfile(full):  # through a link: what the language reads there
            with open(full, "rb") as handle:
                after = index.whole(path, handle.read())
        old, new = before.get(path), after
        entry = {
            "path": path,
            "language": languages.language_of(path),
            "added": [],
            "removed": [],
            "changed": [],
            "error": "; ".join(m.error for m in (old, new) if m is not None and m.error) or None,
        }
        old_defs = _by_key(old)
        new_defs = _by_key(new)
        for key in sorted(set(old_defs) | set(new_defs)):
            o, n = old_defs.get(key, []), new_defs.get(key, [])
            if not o:
                entry["added"].extend(_shown(d) for d in n)
            elif not n:
                entry["removed"].extend(_shown(d) for d in o)
            elif sorted(d[5] for d in o) != sorted(d[5] for d in n):
                entry["changed"].extend(_shown(d) for d in n)
        if entry["added"] or entry["removed"] or entry["changed"] or entry["error"]:
            files.append(entry)
    return {"revision": commit, "files": files, "unindexed": [p for p in paths if not languages.language_of(p)]}


def _by_key(mention: Mention | None) -> dict[tuple, list]:
    out: dict[tuple, list] = {}
    for d in (mention.summary or {}).get("defs", ()) if mention else ():
        out.setdefault((d[4], d[0], d[1]), []).append(d)
    return out


def _shown(d: list) -> dict:
    return {"name": d[0], "kind": d[1], "scope": d[4], "lines": [d[2], d[3]], "public": bool(d[6])}


# -- a unified diff ------------------------------------------------------------------------------

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(rb"^index ([0-9a-f]+)\.\.([0-9a-f]+)")


def parse_patch(patch: bytes) -> list[dict]:
    """Each file of a unified diff: {old, new (paths, None for /dev/null), old_blob, new_blob
    (abbreviated ids from its index line), removed, added (line numbers on each side)}."""
    files: list[dict] = []
    current: dict | None = None
    old_line = new_line = old_left = new_left = 0  # where a hunk is, and how many lines of it are left

    def fresh(header: str) -> dict:
        entry: dict = {
            "old": None,
            "new": None,
            "old_blob": None,
            "new_blob": None,
            "removed": [],
            "added": [],
            "header": header,
            "hunks": 0,
        }
        files.append(entry)
        return entry

    for raw in patch.split(b"\n"):
        if old_left > 0 or new_left > 0:  # inside a hunk: a line starting --- is a removed line
            assert current is not None  # a hunk's counts are set only once a file has begun
            if raw.startswith(b"-"):
                current["removed"].append(old_line)
                old_line, old_left = old_line + 1, old_left - 1
            elif raw.startswith(b"+"):
                current["added"].append(new_line)
                new_line, new_left = new_line + 1, new_left - 1
            elif raw.startswith(b" ") or raw == b"":
                old_line, new_line, old_left, new_left = old_line + 1, new_line + 1, old_left - 1, new_left - 1
            continue  # "\ No newline at end of file"
        if raw.startswith(b"diff --git "):
            current = fresh(raw[11:].decode("utf-8", "surrogateescape"))
        elif raw.startswith((b"diff --cc ", b"diff --combined ")):  # a merge's combined diff
            current = fresh("")
            current["old"] = current["new"] = raw.split(b" ", 2)[2].decode("utf-8", "surrogateescape")
            current["combined"] = True
        elif raw.startswith(b"--- "):
            if current is None or current["hunks"]:  # diff -u: files with no `diff --git` line
                current = fresh("")
            current["old"] = _side(raw[4:], b"a/")
        elif current is None:
            continue
        elif raw.startswith(b"index "):
            match = _INDEX.match(raw)
            if match:
                current["old_blob"], current["new_blob"] = (g.decode() for g in match.groups())
        elif raw.startswith(b"+++ "):
            current["new"] = _side(raw[4:], b"b/")
        elif raw.startswith(b"@@"):
            match = _HUNK.match(raw)
            if match:
                old_line, new_line = int(match.group(1)), int(match.group(3))
                old_left = int(match.group(2)) if match.group(2) is not None else 1
                new_left = int(match.group(4)) if match.group(4) is not None else 1
                current["hunks"] += 1
    for entry in files:
        if entry["old"] is None and entry["new"] is None and entry["header"]:
            left, _, right = entry["header"].partition(" b/")
            entry["old"] = entry["new"] = right or left[2:]
    return files


def _side(raw: bytes, prefix: bytes) -> str | None:
    name = raw.split(b"\t")[0].rstrip(b"\r")
    if name == b"/dev/null":
        return None
    text = name.decode("utf-8", "surrogateescape")
    if text.startswith('"'):
        try:
            text = git.unquote_path(text)
        except ValueError:  # an escape no path holds (\\777): the name as written
            text = text.strip('"')
    # a/ and b/, or diff.mnemonicPrefix's c/, i/, w/, o/ (1/ and 2/ for --no-index)
    if len(text) > 2 and text[1] == "/" and text[0] in (prefix.decode()[0] + "ciwo12"):
        return text[2:]
    return text


def annotate(checkout: str, patch: bytes, index: Index) -> dict:
    """{"files": [{path, language, touched: [{name, kind, scope, lines, side, public,
    referenced_by, references}], outside: {old: [...], new: [...]}, note}]}: each changed line
    placed in the innermost declaration holding it; lines in none (imports, a package clause)
    under outside. `public`: on its module's public surface (languages._exported);
    `referenced_by`: the files of the work tree that name it, its reach."""
    entries = parse_patch(patch)
    files = []
    wanted_names: set[str] = set()
    for entry in entries:
        path = entry["new"] or entry["old"]
        if path is None:
            continue
        language = languages.language_of(path)
        record = {"path": path, "language": language, "touched": [], "outside": {"old": [], "new": []}, "note": None}
        files.append(record)
        if language is None:
            record["note"] = "no grammar for its language: its declarations are not placed"
            continue
        if entry.get("combined"):
            record["note"] = (
                "a combined diff of a merge (diff --cc), whose lines are not placed; pipe in git diff "
                "against one parent"
            )
            continue
        sides = (
            ("old", entry["old"], entry["old_blob"], entry["removed"]),
            ("new", entry["new"], entry["new_blob"], entry["added"]),
        )
        seen = set()
        for side, side_path, abbrev, lines in sides:
            if not lines or side_path is None:
                continue
            data, why = _content(checkout, side_path, abbrev, side)
            if data is None:
                record["note"] = (record["note"] + "; " if record["note"] else "") + why
                continue
            mention = index.whole(side_path, data)
            if mention.error:
                record["note"] = (record["note"] + "; " if record["note"] else "") + f"its {side} side: {mention.error}"
            defs = (mention.summary or {}).get("defs", ())
            for line in lines:
                holding = [d for d in defs if d[2] <= line <= d[3]]
                if not holding:
                    record["outside"][side].append(line)
                    continue
                d = min(holding, key=lambda d: d[3] - d[2])
                key = (d[4], d[0], d[1], side)
                if key in seen:
                    continue
                seen.add(key)
                record["touched"].append(
                    {
                        "name": d[0],
                        "kind": d[1],
                        "scope": d[4],
                        "lines": [d[2], d[3]],
                        "side": side,
                        "public": bool(d[6]) if len(d) > 6 else None,
                    }
                )
                wanted_names.add(d[0])
    if wanted_names:
        answer = index.ask(sorted(wanted_names))
        for record in files:
            for touched in record["touched"]:
                refs = answer.references(touched["name"])
                touched["referenced_by"] = sorted({p for p, _ in refs})
                touched["references"] = [f"{p}:{line}" for p, line in refs]
    return {"files": files}


def _content(checkout: str, path: str, abbrev: str | None, side: str) -> tuple[bytes | None, str]:
    """One side of a file: the blob its index line names where the repository holds it, else
    the work tree's file when it is that blob (or when the diff names no blob, on the new side)."""
    full = os.path.join(checkout, path)
    if abbrev and set(abbrev) != {"0"}:
        proc = git.run(checkout, "rev-parse", "--verify", "--quiet", f"{abbrev}^{{blob}}", check=False)
        if proc.returncode == 0:
            blob = proc.stdout.decode().strip()
            return read_blobs(checkout, [blob]).get(blob), ""
    if side == "new" and os.path.isfile(full) and not os.path.islink(full):
        with open(full, "rb") as handle:
            data = handle.read()
        if not abbrev or blob_id(data).startswith(abbrev):
            return data, ""
        return None, f"the new side of {path} ({abbrev}) is neither in this repository nor the file on disk"
    return None, f"the {side} side of {path} ({abbrev or 'no index line'}) is not in this repository"
