"""Grading a job against evidence: the single code `proctor job wait` records and
`proctor describe job` shows. A holder's account of its work is a claim; this module reads
what proctor observes instead: the diff since the job's checkpoint in the checkout that took
it, the recorded runs of its check, the store's descendants, and the tree for paths goals.

An observation proctor could not make FAILS what depends on it: an unreadable diff, a
checkout that is gone, a file a symbol goal must read that will not parse. A goal that cannot
verify must not certify, or breaking the observation would be the cheapest way past it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from proctor import errors
from proctor import claims as jpaths
from proctor import declarations
from proctor.store import Tx, rows
from proctor.jobs import evidence
from proctor.jobs.model import goal_list, is_live
from proctor.vcs import git
from proctor.vcs.checkpoint import digest_of, hash_paths, tree_entries
from proctor import jobrecord


@dataclass
class Observed:
    checkout: str
    revision: str | None
    changed: list[str] = field(default_factory=list)  # every path that differs, untracked included
    footprint: dict[str, dict] = field(default_factory=dict)
    error: str | None = None  # why the diff could not be read
    tree: evidence.Tree | None = None  # the checkout's tree, its digest read with the diff


@dataclass
class Outcome:
    kind: str  # "rule" or "goal"
    name: str  # the rule's name or the goal's id
    ok: bool
    subjects: list[str]  # each failing subject, or what passed

    @property
    def label(self) -> str:
        return f"rule {self.name}" if self.kind == "rule" else f'goal "{self.name}"'

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "label": self.label, "ok": self.ok, "subjects": self.subjects}


@dataclass
class Grade:
    job: str
    outcomes: list[Outcome]
    observed: Observed | None

    @property
    def passed(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok]

    def to_json(self) -> dict:
        return {
            "job": self.job,
            "verdict": "pass" if self.passed else "fail",
            "outcomes": [o.to_json() for o in self.outcomes],
            "changed": self.observed.changed if self.observed else [],
            "footprint": self.observed.footprint if self.observed else {},
            "checkout": self.observed.checkout if self.observed else None,
            "revision": self.observed.revision if self.observed else None,
        }


def observe(
    checkout: str,
    revision: str | None,
    handed: dict[str, str] | None = None,
    sparse: bool = False,
    rules: dict | None = None,
) -> Observed:
    """The diff of `checkout`'s work tree since `revision`, untracked files included, less the
    uncommitted work the job was HANDED (paths still holding what they held at fork)."""
    seen = Observed(checkout, revision)
    if not revision:
        seen.error = "the job has no checkpoint to diff against"
        return seen
    if not os.path.isdir(checkout):
        seen.error = f"its checkout {checkout} no longer exists"
        return seen
    try:
        # diff-index, the plumbing: it reads the holder's tree without rewriting its index.
        names = git.start(checkout, "diff-index", "--name-only", "-z", "--no-renames", revision, "--")
        patch = git.start(
            checkout,
            "diff-index",
            "-p",
            "-U0",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            revision,
            "--",
        )
        others = git.start(checkout, "ls-files", "--others", "--exclude-standard", "-z")
        tracked = [p.decode("utf-8", "surrogateescape") for p in git.finish(names, "diff").split(b"\0") if p]
        bodies: dict = {}
        hunks = git.parse_hunks(git.finish(patch, "diff"), bodies)
        untracked = [
            p.decode("utf-8", "surrogateescape").rstrip("/") for p in git.finish(others, "ls-files").split(b"\0") if p
        ]
    except errors.ProctorError as exc:
        seen.error = f"the diff since {revision[:12]} could not be read in {checkout}: {exc.message}"
        return seen
    from proctor.paths import linked_worktree

    untracked = [p for p in untracked if not linked_worktree(checkout, p)]
    try:
        tracked = _content_changed(checkout, revision, tracked, hunks)
    except errors.ProctorError as exc:
        seen.error = f"the diff since {revision[:12]} could not be read in {checkout}: {exc.message}"
        return seen
    seen.tree = evidence.Tree(os.path.realpath(checkout))
    hidden = hidden_from_git(checkout, sorted(set(tracked) | set(untracked)), seen.tree, sparse)
    if hidden:
        shown = "; ".join(hidden[:5]) + (f"; and {len(hidden) - 5} more" if len(hidden) > 5 else "")
        seen.error = (
            f"the tree git reports in {checkout} is not the files on disk ({shown}): a check runs on "
            f"the disk, and git's diff and commits would carry something else"
        )
        return seen
    if handed:
        from proctor.vcs.checkpoint import handed_digest

        kept = {
            p
            for p in set(tracked) | set(untracked)
            if p not in handed or handed_digest(os.path.join(checkout, p)) != handed[p]
        }
        tracked = [p for p in tracked if p in kept]
        untracked = [p for p in untracked if p in kept]
    seen.changed = sorted(set(tracked) | set(untracked))
    for path in tracked:
        seen.footprint[path] = hunks.get(path, {"added": 0, "removed": 0, "new": [], "old": [], "binary": True})
    for path in untracked:
        seen.footprint[path] = {
            "added": _line_count(os.path.join(checkout, path)),
            "removed": 0,
            "new": [],
            "old": [],
            "untracked": True,
        }
    place_declarations(checkout, seen.footprint, bodies, rules)
    return seen


def place_declarations(checkout: str, footprint: dict[str, dict], bodies: dict, recorded: dict | None = None) -> None:
    """Each changed line's declaration, old side and new side, into each text file's footprint
    entry (`declarations`: [{text, old, new}], `outside`: a line lands above the first one);
    a file with no diff driver gets `declarations_unread` saying why instead. The old side is
    the file on disk with its hunks (`bodies`, from git.parse_hunks) taken back. A file the
    job claims by declaration is read by the patterns its row recorded at fork (`recorded`),
    not by the attributes and config its holder could have changed since."""
    recorded = recorded if isinstance(recorded, dict) else {}
    paths = [
        p for p, e in footprint.items() if not e.get("binary") and (e.get("new") or e.get("old") or e.get("untracked"))
    ]
    if not paths:
        return
    reader = declarations.Reader(checkout)
    drivers = reader.drivers(paths)
    fixed = {p: declarations.Rules.from_json(r) for p, r in recorded.items() if p in footprint and isinstance(r, dict)}
    for path in paths:
        entry, driver = footprint[path], drivers[path]
        rules = fixed.get(path) or (reader.rules(driver) if driver is not None else None)
        if rules is None:
            entry["declarations_unread"] = "no diff driver for its declarations"
            continue
        if rules.error:
            entry["declarations_unread"] = rules.error
            continue
        full = os.path.join(checkout, path)
        if not os.path.isfile(full):  # a fifo, a device, a link to one: opening it may never return
            entry["declarations_unread"] = "not a regular file"
            continue
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            entry["declarations_unread"] = f"the file could not be read: {exc.strerror}"
            continue
        placed: dict[str, dict] = {}
        new_ranges = [[1, entry["added"]]] if entry.get("untracked") and entry["added"] else entry["new"]
        # an insertion is also placed where it goes on the old side: code inserted into a
        # declaration is that declaration's, whatever the inserted lines declare
        old_ranges = entry["old"] + [[n, n] for n in entry.get("after") or () if n > 0]
        outside = any(n == 0 for n in entry.get("after") or ())
        for side, ranges in (("new", new_ranges), ("old", old_ranges)):
            if not ranges:
                continue
            text = data if side == "new" else git.old_side(data, bodies.get(path) or [])
            hit, above = declarations.locate(text, rules, ranges)
            outside = outside or above
            for line, decl in hit:
                placed.setdefault(decl, {"text": decl, "old": None, "new": None})[side] = line
        entry["declarations"] = list(placed.values())
        entry["outside"] = outside


def _content_changed(checkout: str, revision: str, tracked: list[str], hunks: dict) -> list[str]:
    """The tracked paths whose content or mode differs from `revision`: diff-index names a file
    whose stat data alone moved (a `touch`, a rewrite of the same bytes) until git's index is
    refreshed, and proctor does not rewrite a holder's index. Those without a hunk are held to
    the revision's blob and mode."""
    quiet = [p for p in tracked if p not in hunks and "\n" not in p]
    if not quiet:
        return tracked
    listed = git.run(checkout, "ls-tree", "-r", "-z", "--full-tree", revision).stdout
    recorded: dict[str, tuple[bytes, bytes]] = {}
    wanted = set(quiet)
    for record in listed.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        name = path.decode("utf-8", "surrogateescape")
        if name in wanted:
            mode, _kind, blob = meta.split(b" ")
            recorded[name] = (mode, blob)
    present = [
        p
        for p in quiet
        if p in recorded and os.path.isfile(os.path.join(checkout, p)) and not os.path.islink(os.path.join(checkout, p))
    ]
    blobs = dict(zip(present, hash_paths(checkout, [os.fsencode(p) for p in present]))) if present else {}
    same = set()
    for path in present:
        info = os.lstat(os.path.join(checkout, path))
        mode = b"100755" if info.st_mode & 0o100 else b"100644"
        if recorded[path] == (mode, blobs.get(path)):
            same.add(path)
    return [p for p in tracked if p not in same]


def hidden_from_git(checkout: str, changed: list[str], tree=None, sparse: bool = False) -> list[str]:
    """Where the files on disk differ from what git reports for them, each with its remedy. A
    check runs on the disk; a diff and a commit read git's account. Found: entries flagged
    skip-worktree or assume-unchanged whose file differs on disk or is missing from it; with
    core.fileMode false, an executable bit git does not see; and among the `changed` paths, a
    symbolic link that leads out of the checkout (its content is in no tree), and a file a
    clean filter or ident would store as something that does not check out as the file."""
    import stat

    from proctor.paths import linked_worktree

    base = os.fsencode(checkout)
    tagged = git.run(checkout, "ls-files", "-v", "-z").stdout
    flagged = [r[2:] for r in tagged.split(b"\0") if len(r) > 2 and (r[:1] == b"S" or r[:1].islower())]
    mode_blind = git.run(checkout, "config", "--bool", "core.fileMode", check=False).stdout.strip() == b"false"
    found: dict[bytes, str] = {}
    index: dict[bytes, tuple[bytes, bytes]] = {}
    # the tree's digest, read once here for the check goals too; and with it the index, and the
    # files that differ from it
    stale: list[bytes] = []
    digest = digest_of(tree_entries(checkout, stale=stale, index=index))
    if tree is not None:
        tree.known(digest)
    for path, (mode, _blob) in index.items():
        if mode == b"160000":
            inner = os.path.join(base, path)
            if not os.path.lexists(os.path.join(inner, b".git")) and os.path.isdir(inner) and os.listdir(inner):
                found[path] = (
                    "files in a submodule's directory that is not checked out, which no git listing "
                    "shows and no commit carries; remove them, or git submodule update"
                )
    unflag = "clear the flag: git update-index --no-skip-worktree --no-assume-unchanged"
    present = []
    for path in flagged:
        on_disk = os.path.join(base, path)
        if not os.path.lexists(on_disk):
            if not sparse:  # a sparse checkout taken as one leaves files out by design
                found[path] = f"flagged and missing from disk; {unflag}"
        elif path in index and b"\n" not in path and os.path.isfile(on_disk) and not os.path.islink(on_disk):
            present.append(path)
    if present:
        blobs = hash_paths(checkout, present)
        for path, blob in zip(present, blobs):
            if blob != index[path][1]:
                found[path] = f"flagged, and the file differs from git's copy; {unflag}"
    if mode_blind:
        for path, (mode, _blob) in index.items():
            if mode not in (b"100644", b"100755"):
                continue
            try:
                info = os.lstat(os.path.join(base, path))
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and bool(info.st_mode & 0o100) != (mode == b"100755"):
                found[path] = "an executable bit core.fileMode=false hides; git config core.fileMode true"
    real_root = os.path.realpath(checkout)
    regular = []
    for rel in changed:
        full = os.path.join(checkout, rel)
        if os.path.islink(full):
            target = os.path.realpath(full)
            if not (target == real_root or target.startswith(real_root + os.sep)):
                found[os.fsencode(rel)] = (
                    f"a symbolic link out of the checkout, to {target}, whose content no tree holds"
                )
            elif (
                git.run(
                    checkout, "check-ignore", "-q", "--", os.path.relpath(target, real_root), check=False
                ).returncode
                == 0
            ):
                found[os.fsencode(rel)] = (
                    f"a symbolic link to {os.path.relpath(target, real_root)}, which git "
                    f"ignores: its content is in no tree and no commit"
                )
        elif os.path.isfile(full):
            regular.append(rel)
        elif os.path.isdir(full) and os.path.lexists(os.path.join(full, ".git")) and not linked_worktree(checkout, rel):
            found[os.fsencode(rel)] = (
                "an untracked nested repository, whose files a commit of this checkout "
                "would not carry; make it a submodule, or move it out"
            )
    if regular:
        found.update(_not_reproducible(checkout, regular))
    # a rewrite git's stat check cannot see (the same size, an mtime set back within its second,
    # or ctime checks turned off): the file differs from the index, and git says it does not
    if stale:
        seen_by_git = set(git.run(checkout, "diff-files", "--name-only", "-z").stdout.split(b"\0"))
        for path in stale:
            if path not in seen_by_git:
                found[path] = (
                    "rewritten where git's stat check cannot see it; git update-index --really-refresh "
                    "shows git the file"
                )
    return sorted(f"{p.decode('utf-8', 'surrogateescape')}: {why}" for p, why in found.items())


def _not_reproducible(checkout: str, changed: list[str]) -> dict[bytes, str]:
    """Changed files git would store as something that does not check out as the file: where
    a clean filter or ident applies and what it stores, smudged back, is not the file's bytes.
    Line-ending conversion alone changes nothing a check reads, and is not looked into."""
    listed = "".join(f"{p}\0" for p in changed).encode("utf-8", "surrogateescape")
    attrs = git.run(checkout, "check-attr", "-z", "--stdin", "filter", "ident", input=listed).stdout.split(b"\0")
    converted = sorted(
        {
            attrs[i].decode("utf-8", "surrogateescape")
            for i in range(0, len(attrs) - 2, 3)
            if attrs[i + 2] not in (b"unspecified", b"unset", b"")
        }
    )
    if not converted:
        return {}
    out: dict[bytes, str] = {}
    for rel in [p for p in converted if "\n" in p]:  # hash-object reads one name per line
        out[os.fsencode(rel)] = (
            "a name holding a newline under a clean filter or ident, which git's filters "
            "cannot be checked on; rename it"
        )
    converted = [p for p in converted if "\n" not in p]
    names = [os.fsencode(p) for p in converted]
    raw = hash_paths(checkout, names, "--no-filters") if names else []
    clean = hash_paths(checkout, names) if names else []
    for rel, a, b in zip(converted, raw, clean):
        if a == b:
            continue
        blob = git.run(checkout, "hash-object", "-w", "--", rel).stdout.strip().decode()
        back = git.run(checkout, "cat-file", "--filters", f"--path={rel}", blob, check=False)
        with open(os.path.join(checkout, rel), "rb") as handle:
            if back.returncode != 0 or _unident(back.stdout) != _unident(handle.read()):
                out[os.fsencode(rel)] = (
                    "a clean filter or ident stores something that does not check out as "
                    "this file; git's commit would not hold what the check ran on"
                )
    return out


_IDENT = re.compile(rb"\$Id: [0-9a-f]{40}(?:[0-9a-f]{24})? \$")


def _unident(data: bytes) -> bytes:
    """`$Id: <blob id> $` as git writes it folded back to `$Id$`: an edited file still carries
    its old blob's id until git checks it out again. Anything else inside `$Id: $` is content."""
    return _IDENT.sub(b"$Id$", data)


def _line_count(path: str) -> int:
    try:
        with open(path, "rb") as handle:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 16), b""))
    except OSError:
        return 0


def _revision(job: dict) -> str | None:
    return jobrecord.checkpoint_revision(job.get("checkpoint"))


def grade(conn: Tx, job: dict, fallback_checkout: str, blob_store=None) -> Grade:
    """Every rule and goal for `job`, against what proctor observes now. Writes nothing.

    A check goal is graded on the runs the filed result cites (evidence.py), never on the
    newest run anyone made; `blob_store` given (the store, or the embedded store's state
    directory), each cited output is also reopened and its digest checked."""
    from proctor.jobs import runs

    job_id = job["id"]
    outcomes: list[Outcome] = []
    revision = _revision(job)
    short = revision[:8] if revision else "its checkpoint"
    writes = not job.get("read_only")
    elsewhere = bool(job.get("checkout_root")) and not jobrecord.on_this_machine(job)
    recorded_tree = None
    if elsewhere:
        observed, recorded_tree, note = _observed_elsewhere(job, revision, writes)
        if note:
            outcomes.append(Outcome("rule", "diff-read-where-taken", True, [note]))
    else:
        observed = (
            observe(
                evidence.checkout_of(job, fallback_checkout),
                revision,
                job.get("handed"),
                bool(job.get("sparse")),
                job.get("declaration_rules"),
            )
            if writes
            else None
        )
    result = job.get("result")

    if observed is not None:
        if observed.error:
            outcomes.append(
                Outcome(
                    "rule",
                    "diff-readable",
                    False,
                    [f"{observed.error}; a job is never passed on a diff proctor cannot read"],
                )
            )
        else:
            claims = rows.claims(job)
            denies = rows.claims(job, "deny_paths")
            covered, in_denies = jpaths.Coverage(claims), jpaths.Coverage(denies)
            outside = [p for p in observed.changed if not covered(p)]
            outcomes.append(
                Outcome(
                    "rule",
                    "inside-write-paths",
                    not outside,
                    [
                        f"{p} changed outside the write paths ({', '.join(job.get('write_paths') or []) or 'none'})"
                        for p in outside
                    ]
                    or ["every change is inside the write paths"],
                )
            )
            denied = [p for p in observed.changed if in_denies(p)]
            outcomes.append(
                Outcome(
                    "rule",
                    "outside-deny-paths",
                    not denied,
                    [f"{p} changed inside the deny paths ({', '.join(job['deny_paths'])})" for p in denied]
                    or ["nothing changed inside the deny paths"],
                )
            )
            outcomes.append(
                Outcome(
                    "rule",
                    "non-empty",
                    bool(observed.changed),
                    [f"nothing changed since {short} in {observed.checkout}"]
                    if not observed.changed
                    else [f"{len(observed.changed)} paths changed"],
                )
            )
            inside = [p for p in observed.changed if covered(p)]
            outcomes.append(
                Outcome(
                    "rule",
                    "change-inside-write-paths",
                    bool(inside),
                    [f"no change since {short} falls inside the write paths"]
                    if not inside
                    else [f"{len(inside)} changes inside the write paths"],
                )
            )
            outcomes.extend(_declaration_outcomes(job, claims, observed))
            if result is not None:
                observed_set = set(observed.changed)
                missing = [p for p in result.get("changed_paths") or () if p not in observed_set]
                outcomes.append(
                    Outcome(
                        "rule",
                        "claimed-paths-observed",
                        not missing,
                        [f"{p} is claimed changed, but the diff since {short} does not carry it" for p in missing]
                        or ["every claimed path is in the diff"],
                    )
                )

    stored = rows.descendants(conn, job_id)
    if result is not None:
        claimed = list(dict.fromkeys(result.get("descendants") or ()))
        false = [d for d in claimed if d not in stored]
        unlisted = [d for d in stored if d not in claimed]
        outcomes.append(
            Outcome(
                "rule",
                "descendants-as-stored",
                not false and not unlisted,
                [f"the result lists descendant {d}, which the store does not carry beneath {job_id}" for d in false]
                + [
                    f"the store carries descendant {d} beneath {job_id}, which the result does not list"
                    for d in unlisted
                ]
                or [f"the result lists the {len(stored)} descendants the store carries"],
            )
        )
    live = [d for d in stored if is_live((rows.get(conn, d) or {}).get("state", "pass"))]
    outcomes.append(
        Outcome(
            "rule",
            "descendants-ended",
            not live,
            [f"descendant {d} is still live; wait for it or end it (proctor job exit {d})" for d in live]
            or ["no descendant is live"],
        )
    )

    evidence_runs = evidence.cited(conn, result)
    # a read-only job's run is tied to its checkout's tree too: no diff is graded, but what the
    # check saw must be the tree as it is
    if recorded_tree is not None:
        tree = recorded_tree
    else:
        tree = (
            (observed.tree or evidence.Tree(observed.checkout))
            if observed is not None
            else evidence.Tree(evidence.checkout_of(job, fallback_checkout))
        )
    goal_ok: dict[str, bool] = {}
    for goal in _in_dependency_order(goal_list(job)):
        failed_prereqs = [d for d in goal.get("depends_on") or () if not goal_ok.get(d, False)]
        if failed_prereqs:
            subjects = [f'prerequisite goal "{d}" is unmet, so this goal is unmet' for d in failed_prereqs]
            ok = False
        else:
            ok, subjects = _grade_goal(
                conn, job, goal, observed, short, fallback_checkout, runs, (evidence_runs, tree, blob_store)
            )
        goal_ok[goal["id"]] = ok
        outcomes.append(Outcome("goal", goal["id"], ok, subjects))
    outcomes.extend(_inherited_symbol_goals(conn, job, observed, fallback_checkout))
    return Grade(job_id, outcomes, observed)


def _declaration_outcomes(job: dict, claims: list, observed: Observed) -> list[Outcome]:
    """For a file the job claims only by declaration: every declaration its diff touched that
    none of those claims names, and a footprint proctor could not place, fail."""
    by_file: dict[str, list] = {}
    for claim in claims:
        if claim.declaration is not None and not claim.glob:
            by_file.setdefault(claim.path, []).append(claim)
    if not by_file:
        return []
    whole = jpaths.Coverage(c for c in claims if c.declaration is None)
    failures: list[str] = []
    for path, mine in sorted(by_file.items()):
        entry = observed.footprint.get(path)
        if entry is None or whole(path):
            continue
        spelled = ", ".join(c.spelling for c in mine)
        if "declarations" not in entry:
            why = entry.get("declarations_unread") or (
                "binary or a mode change" if entry.get("binary") else "its changed lines could not be placed"
            )
            failures.append(
                f"{path}: the footprint cannot be placed in declarations ({why}); the job claims "
                f"only {spelled} of it, and a job is never passed on a footprint proctor cannot read"
            )
            continue
        for decl in entry["declarations"]:
            if not any(declarations.names(c.declaration, decl["text"]) for c in mine):
                at = ", ".join(f"{side} line {decl[side]}" for side in ("new", "old") if decl[side])
                failures.append(
                    f"{path}: the diff touches the declaration {decl['text']!r} ({at}), which none of "
                    f"the job's claims of that file ({spelled}) names"
                )
    return [
        Outcome(
            "rule",
            "inside-claimed-declarations",
            not failures,
            failures
            or ["every change to a file claimed by declaration lands in a claimed declaration or above the first"],
        )
    ]


def record_observation(job: dict, fallback_checkout: str) -> dict:
    """What grade() reads from the job's checkout, read where the job is taken and kept in the
    job when its result is filed: a wait on another machine, which cannot read that checkout,
    grades on it and says so."""
    from proctor.paths import machine_id
    from proctor.timeutil import iso, now

    checkout = evidence.checkout_of(job, fallback_checkout)
    revision = _revision(job)
    seen = (
        observe(checkout, revision, job.get("handed"), bool(job.get("sparse")), job.get("declaration_rules"))
        if not job.get("read_only")
        else None
    )
    tree = (seen.tree if seen is not None and seen.tree is not None else None) or evidence.Tree(checkout)
    digest, tree_error = tree.now()
    return {
        "machine": machine_id(),
        "at": iso(now()),
        "checkout": checkout,
        "revision": revision,
        "changed": seen.changed if seen else [],
        "footprint": seen.footprint if seen else {},
        "error": seen.error if seen else None,
        "tree": digest,
        "tree_error": tree_error,
    }


def _observed_elsewhere(job: dict, revision: str | None, writes: bool):
    """(Observed or None, evidence.Tree, a note) for a job taken on another machine: what its
    holder's machine recorded when the result was filed, or an observation that fails."""
    from proctor.paths import machine_id

    checkout = os.path.realpath(job["checkout_root"])
    where, machine = jobrecord.where_taken(job), job.get("machine")
    tree = evidence.Tree(checkout)
    record = job.get("observed")
    if not isinstance(record, dict) or record.get("machine") != machine:
        why = (
            f"its checkout is {where}, which this machine ({machine_id()}) cannot read, and no diff was recorded "
            f"there (one is when the holder files its result there); run proctor job wait {job['id']} on "
            f"machine {machine}"
        )
        tree.unreadable(why)
        return (Observed(checkout, revision, error=why) if writes else None), tree, None
    if record.get("tree"):
        tree.known(record["tree"])
    else:
        tree.unreadable(record.get("tree_error") or f"the tree in {where} was not recorded")
    observed = None
    if writes:
        observed = Observed(
            checkout,
            revision,
            changed=list(record.get("changed") or []),
            footprint=dict(record.get("footprint") or {}),
            error=record.get("error"),
            tree=tree,
        )
    note = (
        f"graded on the diff read on machine {machine} when the result was filed ({record.get('at')}); this "
        f"machine ({machine_id()}) cannot read {checkout}, so a change made there since is not seen here"
    )
    return observed, tree, note


def _in_dependency_order(goals: list[dict]) -> list[dict]:
    by_id = {g["id"]: g for g in goals}
    done: set[str] = set()
    ordered: list[dict] = []

    def visit(goal_id: str) -> None:
        if goal_id in done or goal_id not in by_id:
            return
        done.add(goal_id)
        for dep in by_id[goal_id].get("depends_on") or ():
            visit(dep)
        ordered.append(by_id[goal_id])

    for goal in goals:
        visit(goal["id"])
    return ordered


def _grade_goal(
    conn, job: dict, goal: dict, observed: Observed | None, short: str, fallback: str, runs, cited
) -> tuple[bool, list[str]]:
    kind = goal["kind"]
    if kind == "check":
        (cited_runs, problems), tree, blob_store = cited
        target = goal["check"]["target"]
        checkout = evidence.checkout_of(job, fallback)
        mine = [r for r in cited_runs if r["target"] == target]
        if not mine:
            why = (
                "no result is filed, so no run is cited"
                if job.get("result") is None
                else f"the result cites no run of {target}"
            )
            from proctor.paths import machine_id

            machine = job.get("machine") if job.get("checkout_root") else machine_id()
            hint = runs.latest(conn, target, job["created"], checkout, machine)
            remedy = (
                f"the latest run of {target} there is {hint['id']} (exit {hint['exit_code']}, output_ref "
                f"{hint['output_ref']})"
                if hint
                else f"run proctor run {target} there"
            )
            where = jobrecord.where_taken(job) if job.get("checkout_root") else checkout
            return False, [f"{why}; a check passes only on a cited run of {target} in {where}; {remedy}"] + problems
        run = max(mine, key=lambda r: (r["started"], r["id"]))
        reasons = evidence.provenance(conn, job, run, checkout, tree)
        blob = evidence.blob_problem(blob_store, run) if blob_store else None
        if blob:
            reasons.append(blob)
        if reasons:
            late = _changed_after(observed, run)
            if late and any("changed after run" in r for r in reasons):
                reasons.append(f"written since run {run['id']} started: {', '.join(late[:5])}")
            return False, reasons
        if run["timed_out"]:
            return False, [
                f"the newest cited run of {target} ({run['id']}) timed out; its output is {run['output_ref']}"
            ]
        if run["exit_code"] != 0:
            return False, [
                f"the newest cited run of {target} ({run['id']}) exited {run['exit_code']}; its output is "
                f"{run['output_ref']}"
            ]
        declared = _target_spec(job, target, fallback)
        if declared is not None and run["command"] != declared.command:
            return False, [
                f"run {run['id']} ran `{run['command']}`, but target {target} is `{declared.command}` in "
                f"the proctor.toml of the job's checkpoint; a check is graded on the declared command"
            ]
        if declared is not None:
            where = os.path.realpath(os.path.join(checkout, declared.cwd) if declared.cwd else checkout)
            if os.path.realpath(run["cwd"]) != where:
                return False, [
                    f"run {run['id']} ran in {run['cwd']}, but target {target} runs in {where} by the "
                    f"proctor.toml of the job's checkpoint; a check is graded where it was declared"
                ]
        return True, [f"{target} passed in run {run['id']} ({run['output_ref']}), on the tree graded"]
    if kind == "paths":
        expect = goal["expect"]
        checkout = evidence.checkout_of(job, fallback)
        failing = []
        if expect == "changed":
            if observed is None:
                if job.get("read_only"):
                    return False, ["a read-only job changes nothing, so a changed goal cannot be met"]
                return False, ["the diff could not be observed"]
            if observed.error:
                return False, [observed.error]
            for pattern in goal["paths"]:
                if not any(_matches(pattern, p) for p in observed.changed):
                    failing.append(f'nothing matching "{pattern}" changed since {short}, so this goal is unmet')
        else:
            if not os.path.isdir(checkout):
                return False, [f"the checkout {checkout} no longer exists, so the tree cannot be read"]
            for pattern in goal["paths"]:
                exists = _exists(checkout, pattern)
                if expect == "present" and not exists:
                    failing.append(f'nothing matching "{pattern}" exists in {checkout}, so this goal is unmet')
                if expect == "absent" and exists:
                    failing.append(f'"{pattern}" still exists in {checkout}, so this goal is unmet')
        return not failing, failing or [f"every path is {expect}"]
    return _symbol_goal(job, goal, observed, fallback)


def _symbol_goal(
    job: dict, goal: dict, observed: Observed | None, fallback: str, scope: list | None = None
) -> tuple[bool, list[str]]:
    """A symbol goal on the tree the job's checkout holds (proctor.symbols.goals); `scope`,
    given, narrows it to those claims (an ancestor's goal graded on a descendant)."""
    checkout = evidence.checkout_of(job, fallback)
    if job.get("checkout_root") and not jobrecord.on_this_machine(job):
        return False, [
            f"the tree is in {jobrecord.where_taken(job)}, which this machine cannot read; symbol goals are "
            f"graded where the job is taken: run proctor job wait {job['id']} on machine {job.get('machine')}"
        ]
    if not os.path.isdir(checkout):
        return False, [f"the checkout {checkout} no longer exists, so the tree cannot be read"]
    from proctor.symbols import goals as symbol_goals
    from proctor.symbols.index import Index

    changed = diff_error = None
    if observed is not None:
        changed, diff_error = observed.changed, observed.error
    elif (goal.get("expect") or "changed") == "changed":
        diff_error = "a read-only job changes nothing" if job.get("read_only") else "the diff could not be observed"
    try:
        with Index(checkout) as index:
            return symbol_goals.grade(
                index, goal, _revision(job), changed, diff_error, scope, sorted(job.get("handed") or ())
            )
    except errors.ProctorError as exc:
        return False, [
            f"the symbol index could not read {checkout}: {exc.message}; an observation proctor could "
            f"not make fails the goal rather than pass it"
        ]


def _inherited_symbol_goals(conn: Tx, job: dict, observed: Observed | None, fallback: str) -> list[Outcome]:
    """Each ancestor's absent and unreferenced symbol goals, graded within this job's write
    paths (proctor.symbols.goals says why those two)."""
    if job.get("read_only"):
        return []
    out = []
    scope = rows.claims(job)
    for ancestor_id in rows.ancestors(conn, job["id"]):
        ancestor = rows.get(conn, ancestor_id)
        for goal in goal_list(ancestor or {}):
            if goal["kind"] != "symbol" or goal.get("expect") not in ("absent", "unreferenced"):
                continue
            ok, subjects = _symbol_goal(job, goal, observed, fallback, scope)
            out.append(Outcome("goal", f"{ancestor_id}:{goal['id']}", ok, subjects))
    return out


def _target_spec(job: dict, target: str, fallback: str):
    """The target as the job's checkpoint declared it (its committed proctor.toml), else as
    the working tree's proctor.toml has it now; None when neither declares it."""
    from proctor import config as config_mod

    checkout = evidence.checkout_of(job, fallback)
    revision = _revision(job)
    if revision and os.path.isdir(checkout):
        proc = git.run(checkout, "show", f"{revision}:{config_mod.CONFIG_NAME}", check=False)
        if proc.returncode == 0:
            spec = config_mod.parse(proc.stdout, config_mod.CONFIG_NAME).targets.get(target)
            if spec is not None:
                return spec
    return config_mod.load(checkout).targets.get(target) if os.path.isdir(checkout) else None


def _changed_after(observed: Observed | None, run: dict) -> list[str]:
    """Changed files last written after the run started: the run did not see the final tree."""
    from proctor.timeutil import parse_iso

    if observed is None or observed.error:
        return []
    started = parse_iso(run["started"])
    late = []
    for path in observed.changed:
        try:
            if os.stat(os.path.join(observed.checkout, path)).st_mtime > started:
                late.append(path)
        except OSError:
            continue
    return late


def _matches(pattern: str, path: str) -> bool:
    normalized = pattern[2:] if pattern.startswith("./") else pattern
    return jpaths.covers(jpaths.Claim(normalized.rstrip("/") or "."), path)


def _exists(checkout: str, pattern: str) -> bool:
    normalized = pattern[2:] if pattern.startswith("./") else pattern
    claim = jpaths.Claim(normalized.rstrip("/") or ".")
    if not claim.glob:
        # the path itself, never one reached through a link on the way (a linked directory's
        # files are not the checkout's), as a glob's walk follows none
        full = os.path.join(checkout, claim.path)
        parent = os.path.dirname(claim.path)
        real_parent = os.path.join(os.path.realpath(checkout), parent) if parent else os.path.realpath(checkout)
        return os.path.realpath(os.path.dirname(full)) == os.path.normpath(real_parent) and os.path.lexists(full)
    return next(jpaths.walk_glob(checkout, claim.path), None) is not None


def render_footprint(observed: Observed | None, entries: list[dict] | tuple = ()) -> list[str]:
    """The footprint, one line per changed file; a file in an entered path (an entry let one
    write of someone else's into it) is marked with the entry."""
    if observed is None:
        return ["footprint: none (a read-only job)"]
    if observed.error:
        return [f"footprint: unreadable ({observed.error})"]
    if not observed.footprint:
        return [f"footprint: nothing changed since {(observed.revision or 'its checkpoint')[:12]}"]
    lines = ["footprint:"]
    for path in sorted(observed.footprint):
        entry = observed.footprint[path]
        where = []
        if entry.get("new"):
            where.append("lines " + ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in entry["new"]))
        if entry.get("old") and not entry.get("new"):
            where.append("removed at old " + ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in entry["old"]))
        note = " (untracked)" if entry.get("untracked") else " (binary or mode change)" if entry.get("binary") else ""
        detail = f" [{'; '.join(where)}]" if where else ""
        placed = [d["text"] for d in entry.get("declarations") or ()]
        if entry.get("outside"):
            placed.insert(0, "(above the first declaration)")
        if placed:
            shown = placed[:8] + ([f"and {len(placed) - 8} more"] if len(placed) > 8 else [])
            detail += " in " + "; ".join(shown)
        entered = [e for e in entries if _entered(e, path)]
        marks = "".join(
            f" (entered by {e['by']} at {e['entered']}, "
            f"{'written ' + e['consumed'] if e.get('consumed') else 'not written yet'})"
            for e in entered
        )
        lines.append(f"  {path}: +{entry['added']} -{entry['removed']}{note}{detail}{marks}")
    return lines


def _entered(entry: dict, path: str) -> bool:
    claim_path, declaration, _ = jpaths.split_entry(entry["path"])
    return jpaths.covers(jpaths.Claim(claim_path, declaration), path)


def render_entries(entries: list[dict] | tuple) -> list[str]:
    """The job's entries: who entered which path, when, and whether the one write was made."""
    if not entries:
        return []
    return ["entries:"] + [
        f"  {e['path']}: entered by {e['by']} at {e['entered']}, "
        + (f"written {e['consumed']}" if e.get("consumed") else "not written yet")
        for e in entries
    ]
