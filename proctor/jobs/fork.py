"""Declaring work: `proctor job fork`, and the rules every door shares.

fork records one job and replaces any job with the same id. It refuses, each with its code
and remedy: an existing directory as a write path (PRC3018), a declaration claim nothing
could grade (PRC3031), one literal file shared across checkouts by unrelated live jobs
(PRC3032), a write path on proctor.toml while another job is taken in the same checkout
(PRC3033), max_depth and max_live (PRC3034, PRC3035), a writing job with neither check nor
goal (PRC3036), a check naming no target or the gate (PRC3037, PRC3038), an empty write set
on a job that is neither read-only nor the root (PRC3039), and everything a leased caller
may not do (PRC3042, PRC3043).

One author per job: a caller holding a lease may only shrink its own write paths (how it
releases a path) and fork children of itself inside its own paths. For the holder, a fork
of its own id is a merge: fields it leaves out keep their values, and a field it names must
match the row unless it is write_paths shrinking.

Overlapping write paths are never refused; fork records what it could prove in write_proof
(alone, disjoint, overlapping) against the live jobs bound to the same checkout.
"""

from __future__ import annotations

import hashlib
import os

from proctor import config as config_mod
from proctor import errors, jobrecord, trail
from proctor import claims as jpaths
from proctor import declarations
from proctor.paths import machine_id
from proctor.store import Tx, rows
from proctor.jobs.targets import check_refusals
from proctor.jobs.lease import Caller
from proctor.jobs.model import (
    DECLARED,
    HOLDER_SESSION,
    PATH_FIELDS,
    RECORD_SCHEMA_VERSION,
    TERMINAL,
    is_live,
    normalize_record,
)
from proctor.timeutil import format_duration, iso, now, parse_iso
from proctor.vcs import checkpoint as vcs_checkpoint
from proctor.vcs import git
from proctor.workspace import Workspace

# Files every worker in a checkout must read to load the workspace.
WORKSPACE_LOAD_FILES = (config_mod.CONFIG_NAME,)


def diff_driver(root: str, path: str) -> str | None:
    """The diff driver for a file: .gitattributes' `diff`, else proctor's by extension. A
    file whose `diff` is unset (`*.py -diff`) has none: git diffs it as binary."""
    return declarations.driver_for(git.diff_attribute(root, path), path)


def release_digest(root: str, claim: jpaths.Claim) -> str:
    """What a released path carried: `sha256:<hex>`, or `absent`, `dir`, `unreadable`.

    A glob is digested over the sorted (path, content digest) pairs of what it matches; a
    declaration claim over the lines the declarations it names span now (`absent` when the
    file names none of them), so an edit elsewhere in the file does not change it.
    """
    if claim.declaration is not None and not claim.glob:
        full = os.path.join(root, claim.path)
        if not os.path.isfile(full):  # absent, a directory, a fifo or a dangling link: the file's word
            return vcs_checkpoint.file_digest(full)
        try:
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError:
            return "unreadable"
        reader = declarations.Reader(root)
        found = declarations.named(reader.of(data, reader.driver(claim.path)), claim.declaration)
        return declarations.digest(data, found) if found else "absent"
    if claim.glob:
        matches = _glob_files(root, claim.path)
        if not matches:
            return "absent"
        h = hashlib.sha256()
        for rel in matches:
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            h.update(release_digest(root, jpaths.Claim(rel)).encode() + b"\0")
        return "sha256:" + h.hexdigest()
    return vcs_checkpoint.file_digest(os.path.join(root, claim.path))


def _glob_files(root: str, pattern: str) -> list[str]:
    base = jpaths.claim_key(pattern)
    start = os.path.join(root, base) if base else root
    found = []
    for dirpath, dirnames, filenames in os.walk(start):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
            if jpaths.glob_match(pattern, rel):
                found.append(rel)
    return sorted(found)


def parse_claims(ws: Workspace, record: dict, job_id: str, reasons: list) -> dict[str, list[jpaths.Claim]]:
    """Parse every path field; canonicalize the record's spellings; collect refusals."""
    parsed: dict[str, list[jpaths.Claim]] = {}
    resolved: dict = {}  # what each probed prefix resolves to, for this record's paths only
    for field in PATH_FIELDS:
        if field not in record:
            continue
        claims: list[jpaths.Claim] = []
        seen: set[str] = set()
        for raw in record[field]:
            claim, found = jpaths.parse(raw, ws.root, field, job_id, resolved)
            reasons.extend(found)
            if claim is not None and claim.spelling not in seen:
                seen.add(claim.spelling)
                claims.append(claim)
        parsed[field] = claims
        record[field] = [c.spelling for c in claims]
    return parsed


def _is_related(conn: Tx, a: dict, b: dict) -> bool:
    if a.get("parent") == b["id"] or b.get("parent") == a["id"]:
        return True
    return b["id"] in (a.get("depends_on") or ()) or a["id"] in (b.get("depends_on") or ())


def _touched(other: dict, path: str) -> str:
    checkout = other.get("checkout_root")
    revision = jobrecord.checkpoint_revision(other.get("checkpoint"))
    if not checkout or not revision or not os.path.isdir(checkout):
        return "what it has touched could not be read"
    counts = git.changed_lines(checkout, revision, path)
    if counts is None:
        return "what it has touched could not be read"
    added, removed = counts
    if not added and not removed and os.path.isfile(os.path.join(checkout, path)):
        if git.run(checkout, "ls-files", "--error-unmatch", "--", path, check=False).returncode != 0:
            with open(os.path.join(checkout, path), "rb") as handle:
                added = handle.read().count(b"\n")
            return f"it has created the file ({added} lines, not yet added to git)"
    if not added and not removed:
        return "it has not changed the file yet"
    return f"it has changed +{added} -{removed} lines of it so far"


def fork(ws: Workspace, record_in: dict, caller: Caller) -> dict:
    """Record one job; return the stored row. Raises Refused with every reason found.

    A record `{"id": ..., "enter": <path>}` is an entry into that job's path (entries.py).
    """
    from proctor.jobs import entries

    if entries.is_entry_record(record_in):
        return entries.enter(ws, record_in, caller)
    ignored: list[str] = []
    record = normalize_record(record_in, ignored)
    job_id = record["id"]
    if ignored:
        ws.warn(
            f"proctor: ignored {', '.join(ignored)} in the record of {job_id}: output-only, the store "
            f"writes {'it' if len(ignored) == 1 else 'them'}"
        )
    cfg = ws.config
    root = os.path.realpath(ws.root)
    reasons: list[tuple[str, str]] = []
    parsed = parse_claims(ws, record, job_id, reasons)
    for goal in record.get("goals") or ():
        if goal["kind"] != "paths":
            continue
        normalized = []
        for path in goal["paths"]:
            rel = jpaths.normalize(path[2:] if path.startswith("./") else path, ws.root)
            if rel is None:
                reasons.append(
                    (
                        errors.PATH_OUTSIDE_REPO,
                        f"refused fork of {job_id}: goal {goal['id']!r} names {path!r}, outside the repository "
                        f"{ws.root}; a paths goal examines the job's own tree",
                    )
                )
            else:
                normalized.append(rel)
        goal["paths"] = normalized
    declared = [c for c in parsed.get("write_paths", []) if c.declaration and not c.glob]
    attributes = git.diff_attributes(ws.root, sorted({c.path for c in declared})) if declared else {}
    # the patterns each claimed file's declarations are read by, recorded on the row: git's
    # config and attributes are the holder's to write, and must not move its boundary
    patterns = declarations.read_config(ws.root) if declared else {}
    declaration_rules: dict[str, dict] = {}
    for claim in declared:
        driver = declarations.driver_for(attributes.get(claim.path), claim.path)
        if driver is not None:
            declaration_rules[claim.path] = declarations.configured(patterns, driver).to_json()
            continue
        reasons.append(
            (
                errors.CLAIM_UNGRADABLE,
                f"refused fork of {job_id}: {claim.spelling} claims a declaration of {claim.path}, whose "
                f"extension has no diff driver to find declarations by; claim the whole file, or set "
                f"one in .gitattributes ({os.path.splitext(claim.path)[1] or claim.path} diff=<driver>)",
            )
        )
    if reasons:
        raise errors.Refused(reasons)
    if "checkpoint" in record:
        try:
            revision, digest = vcs_checkpoint.parse_name(record["checkpoint"])
        except ValueError as exc:
            raise errors.ProctorError(str(exc), errors.BAD_RECORD) from None
        record["checkpoint"] = f"{revision}+{digest}" if digest else revision

    with ws.store.write() as conn:
        at = now()
        existing = rows.get(conn, job_id)
        holder_merge = False
        if caller.lease:
            holder_merge = _one_author(conn, caller, record, existing, parsed)
        if holder_merge:
            # the holder's own row: _one_author found it (as `held`) before saying True
            assert existing is not None
            job = dict(existing)
            job["write_paths"] = record.get("write_paths", existing.get("write_paths", []))
            parsed = {"write_paths": rows.claims(job)}
        else:
            job = _new_row(ws, record, existing, caller, at)
            parsed.setdefault("write_paths", [])
            if declaration_rules:
                job["declaration_rules"] = declaration_rules
        job["updated"] = iso(at)

        parent = rows.get(conn, job["parent"]) if job.get("parent") else None
        if not holder_merge:
            reasons.extend(_shape_refusals(conn, cfg, job, parent, parsed["write_paths"], root, ws))
        if reasons:
            raise errors.Refused(reasons)

        if existing is not None:
            job["releases"] = list(existing.get("releases") or []) + _releases(ws, existing, job, caller, at)
        depth = parent["_depth"] + 1 if parent else 0
        job_root = parent["_root"] if parent else job_id
        job["write_proof"] = _write_proof(conn, job, parsed["write_paths"], root)
        rows.put(conn, job, job_root, depth)
        if existing is not None and (existing["_root"] != job_root or existing["_depth"] != depth):
            _rebase_subtree(conn, job_id, job_root, depth)
        trail.append(
            conn,
            ws.state_dir,
            "job_fork",
            caller.actor,
            job_id,
            {
                "replaced": existing is not None,
                "write_paths": job.get("write_paths", []),
                "released": [r["path"] for r in job.get("releases", [])[len(existing.get("releases") or []) :]]
                if existing
                else [],
            },
            when=at,
        )
    return job


def _new_row(ws: Workspace, record: dict, existing: dict | None, caller: Caller, at: float) -> dict:
    job: dict = {
        "schema_version": RECORD_SCHEMA_VERSION,
        "id": record["id"],
        "parent": record.get("parent"),
        "criteria": record.get("criteria", ""),
        "write_paths": record.get("write_paths", []),
        "deny_paths": record.get("deny_paths", []),
        "read_paths": record.get("read_paths", []),
        "depends_on": record.get("depends_on", []),
        "model": record.get("model"),
        "check": record.get("check"),
        "goals": record.get("goals", []),
        "read_only": record.get("read_only", False),
        "timeout": record.get("timeout"),
        "actor": caller.actor,
        "holder": HOLDER_SESSION,
        "declared_in": os.path.realpath(ws.root),
        "declared_on": machine_id(),
        "created": existing["created"] if existing else iso(at),
        "releases": [],
        "unattributed": list(existing.get("unattributed") or []) if existing else [],
        "entries": list(existing.get("entries") or []) if existing else [],
        "checkout_root": None,
        "base": None,
        "end_reason": None,
    }
    if "checkpoint" in record:
        job["checkpoint"] = record["checkpoint"]
    else:
        taken = vcs_checkpoint.take(ws.root)
        job["checkpoint"] = taken.name if taken.revision else None
        if taken.dirty and taken.revision:
            job["handed"] = vcs_checkpoint.handed_digests(ws.root)
    # A replacement keeps a live job's state and where it was taken unless the record says.
    if record.get("state"):
        job["state"] = record["state"]
    elif existing is not None and is_live(existing["state"]):
        job["state"] = existing["state"]
    else:
        job["state"] = DECLARED
    if existing is not None and is_live(existing["state"]) and is_live(job["state"]):
        # re-declared while live: what taking it and working it recorded stays (its secret, where
        # and when it was taken, a filed result), or its holder loses its monitors and its result
        for field in (
            "checkout_root",
            "machine",
            "base",
            "base_diverges",
            "taken",
            "nonce_sha256",
            "sparse",
            "result",
            "previous_results",
            "worker_pid",
            "runner_start",
            "worker_machine",
            "observed",
        ):
            if field in existing:
                job[field] = existing[field]
    timeout = record.get("timeout") or ws.config["jobs.default_timeout"]
    job["timeout"] = timeout
    job["deadline"] = iso(at + timeout) if timeout else None
    if (
        existing is not None
        and is_live(existing["state"])
        and existing.get("deadline")
        and existing.get("timeout") == timeout
    ):
        job["deadline"] = existing["deadline"]  # the same timeout re-declared does not move it
    if not is_live(job["state"]):
        job["end_reason"] = f"recorded {job['state']} by {caller.actor}"
    return job


def _one_author(conn: Tx, caller: Caller, record: dict, existing: dict | None, parsed: dict) -> bool:
    """Hold a leased caller to its rights. True when this is the holder shrinking its own row."""
    lease = caller.lease
    assert lease is not None  # called only for a leased caller
    held = rows.get(conn, lease)
    remedy = (
        f"that change is the forking session's: ask the session that forked {lease} to make it "
        f"({caller.whence()}){caller.remedy()}"
    )
    if held is None:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused fork of {record['id']}: your lease {lease} names no job ({caller.whence()}); "
                    f"a leased session may only change its own job and fork children of it{caller.remedy()}",
                )
            ]
        )
    if record["id"] == lease:
        if not is_live(held["state"]):
            raise errors.Refused(
                [
                    (
                        errors.NOT_LIVE,
                        f"refused fork of {lease}: your job has ended ({held['state']}); take the next job "
                        f"with proctor job exec <id> ({caller.whence()}){caller.remedy()}",
                    )
                ]
            )
        changed = []
        for field, value in record.items():
            if field in ("id", "write_paths"):
                continue
            current = held.get(field)
            if field in PATH_FIELDS or field in ("depends_on", "goals"):
                current = current or []
            if value != current:
                changed.append(field)
        reasons = [
            (
                errors.NOT_YOUR_JOB,
                f"refused fork of {lease}: a holder may only shrink its write paths; {field} is "
                f"the forking session's to change; {remedy}",
            )
            for field in changed
        ]
        if (
            "write_paths" in record
            and not record["write_paths"]
            and held.get("write_paths")
            and not held.get("read_only")
        ):
            reasons.append(
                (
                    errors.EMPTY_WRITE_SET,
                    f"refused fork of {lease}: it would shrink your write paths to none, and an empty write set "
                    f"is no boundary at all (it scopes nothing, so every path nobody else holds would be yours); "
                    f"keep the paths you still write, or return the job (proctor job exit {lease} --stdin) "
                    f"({caller.whence()}){caller.remedy()}",
                )
            )
        if "write_paths" in record:
            own = rows.claims(held)
            widened = [
                c.spelling for c in parsed.get("write_paths", []) if not any(jpaths.within(c, mine) for mine in own)
            ]
            if widened:
                reasons.append(
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused fork of {lease}: {', '.join(widened)} widens your write paths, and a "
                        f"holder may only shrink them; {remedy}",
                    )
                )
        if reasons:
            raise errors.Refused(reasons)
        return True
    is_child = record.get("parent") == lease and (existing is None or existing.get("parent") == lease)
    if not is_child:
        what = "replace" if existing is not None else "fork"
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused {what} of {record['id']}: a session holding lease {lease} may only shrink its own "
                    f"write paths and fork children of {lease} (--parent {lease}) inside them; {remedy}",
                )
            ]
        )
    if not is_live(held["state"]):
        raise errors.Refused(
            [
                (
                    errors.NOT_LIVE,
                    f"refused fork of {record['id']}: your job {lease} has ended ({held['state']}), so it "
                    f"cannot take children ({caller.whence()}){caller.remedy()}",
                )
            ]
        )
    if "state" in record:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused fork of {record['id']}: a holder may not set a child's state; a child starts "
                    f"declared and its own holder moves it",
                )
            ]
        )
    if existing is not None and existing["state"] != DECLARED:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused replace of {record['id']}: it is {existing['state']}, so its terms are its own holder's "
                    f"now; a holder re-declares only a child nobody has taken ({caller.whence()}){caller.remedy()}",
                )
            ]
        )
    family = {lease, *rows.descendants(conn, lease)}
    beyond = [d for d in record.get("depends_on") or () if d not in family]
    if beyond:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused fork of {record['id']}: depends_on {', '.join(map(str, beyond))} reaches past {lease}'s "
                    f"own jobs, and would widen what the child may read; {remedy}",
                )
            ]
        )
    allowed = rows.read_boundary(held, lambda job_id: rows.get(conn, job_id))
    wider = _outside(parsed.get("read_paths", []), allowed)
    if wider:
        raise errors.Refused(
            [
                (
                    errors.CHILD_EXCEEDS_PARENT,
                    f"refused fork of {record['id']}: read_paths {', '.join(wider)} reach past what {lease} may read "
                    f"({', '.join(c.spelling for c in allowed) or 'nothing'}); a holder hands a child no more than it "
                    f"holds ({caller.whence()}){caller.remedy()}",
                )
            ]
        )
    outside = _outside(parsed.get("write_paths", []), rows.claims(held))
    if outside:
        raise errors.Refused(
            [
                (
                    errors.CHILD_EXCEEDS_PARENT,
                    f"refused fork of {record['id']}: {', '.join(outside)} lies outside your job {lease}'s "
                    f"write paths ({', '.join(held.get('write_paths') or []) or 'none'}); a child may claim only "
                    f"what its parent holds ({caller.whence()}){caller.remedy()}",
                )
            ]
        )
    return False


def _outside(claims: list[jpaths.Claim], allowed: list[jpaths.Claim]) -> list[str]:
    """The spellings of the claims no allowed claim holds."""
    return [c.spelling for c in claims if not any(jpaths.within(c, mine) for mine in allowed)]


def _shape_refusals(
    conn: Tx,
    cfg: config_mod.Config,
    job: dict,
    parent: dict | None,
    write_claims: list[jpaths.Claim],
    root: str,
    ws: Workspace,
) -> list[tuple[str, str]]:
    job_id = job["id"]
    reasons: list[tuple[str, str]] = []
    if job.get("parent"):
        if parent is None:
            reasons.append(
                (
                    errors.UNKNOWN_JOB,
                    f"refused fork of {job_id}: parent {job['parent']} is not a job; fork the parent first "
                    f"(proctor ls jobs lists them)",
                )
            )
        elif parent["state"] in TERMINAL:
            reasons.append(
                (
                    errors.NOT_LIVE,
                    f"refused fork of {job_id}: parent {parent['id']} has ended ({parent['state']}); fork "
                    f"under a live job",
                )
            )
        elif parent["id"] == job_id or job_id in rows.ancestors(conn, parent["id"]):
            reasons.append(
                (
                    errors.BAD_RECORD,
                    f"refused fork of {job_id}: parent {parent['id']} descends from {job_id}, which would make "
                    f"a cycle; name a parent outside this job's subtree",
                )
            )
    for dep in job.get("depends_on") or ():
        if dep == job_id:
            reasons.append((errors.BAD_RECORD, f"refused fork of {job_id}: a job cannot depend on itself"))
        elif rows.get(conn, dep) is None:
            reasons.append(
                (
                    errors.UNKNOWN_JOB,
                    f"refused fork of {job_id}: depends_on names {dep}, which is not a job; fork it first",
                )
            )
    if parent is not None and parent["state"] not in TERMINAL:
        depth = parent["_depth"] + 1
        max_depth = cfg["jobs.max_depth"]
        if max_depth is not None and depth > max_depth:
            reasons.append(
                (
                    errors.MAX_DEPTH,
                    f"refused fork of {job_id}: it would sit {depth} levels below its root "
                    f"{parent['_root']}, past jobs.max_depth = {max_depth} in proctor.toml; fold the work "
                    f"into a shallower job or raise the limit",
                )
            )
        max_live = cfg["jobs.max_live"]
        if max_live is not None:
            live = rows.live_under_root(conn, parent["_root"], job_id)
            if live + 1 > max_live:
                reasons.append(
                    (
                        errors.MAX_LIVE,
                        f"refused fork of {job_id}: root {parent['_root']} already has {live} live jobs "
                        f"under it, the limit jobs.max_live = {max_live} in proctor.toml; wait for some to "
                        f"end or raise the limit",
                    )
                )
    read_only = job.get("read_only")
    if read_only:
        if job.get("write_paths") or job.get("deny_paths"):
            reasons.append(
                (
                    errors.READ_ONLY_WITH_PATHS,
                    f"refused fork of {job_id}: a read-only job carries no write or deny paths; drop "
                    f"--read-only or the paths",
                )
            )
    else:
        if not job.get("check") and not job.get("goals"):
            reasons.append(
                (
                    errors.NOTHING_TO_GRADE,
                    f"refused fork of {job_id}: a job that writes needs a check or a goal, or proctor job "
                    f"wait has nothing to grade it by; add --check TARGET, goals, or --read-only",
                )
            )
        if not job.get("write_paths") and job.get("parent"):
            reasons.append(
                (
                    errors.EMPTY_WRITE_SET,
                    f"refused fork of {job_id}: it is neither read-only nor a root, and an empty write set "
                    f"scopes nothing; name the files it writes (--write-paths) or add --read-only",
                )
            )
    reasons.extend(check_refusals(cfg, job_id, job))
    for claim in write_claims:
        if claim.glob:
            continue
        full = os.path.join(ws.root, claim.path) if claim.path != "." else ws.root
        if os.path.isdir(full):
            shown = claim.path if claim.path != "." else ". (the repository root)"
            reasons.append(
                (
                    errors.WRITE_PATH_IS_DIRECTORY,
                    f'refused fork of {job_id}: write path "{shown}" is a directory, which claims every '
                    f"file under it and overlaps every other job there; name the files it writes",
                )
            )
    if reasons:
        return reasons
    reasons.extend(_workspace_load_refusals(conn, job, write_claims, root))
    reasons.extend(_shared_file_refusals(conn, job, write_claims, root, ws))
    return reasons


def _workspace_load_refusals(conn: Tx, job: dict, write_claims: list[jpaths.Claim], root: str) -> list[tuple[str, str]]:
    load_files = [f for f in WORKSPACE_LOAD_FILES if any(jpaths.covers(c, f) for c in write_claims)]
    if not load_files:
        return []
    taken = rows.taken_with_paths(conn, job["id"])
    holders = [
        j
        for j in taken
        if jobrecord.bound_here(rows.get(conn, j) or {}, root) and not jobrecord.overdue(rows.get(conn, j) or {}, now())
    ]
    if not holders:
        return []
    return [
        (
            errors.WORKSPACE_LOAD_FILE,
            f"refused fork of {job['id']}: it writes {load_files[0]}, the file every worker in this checkout "
            f"must read to load the workspace, while {holders[0]} is taken in this checkout ({root}); "
            f"half-saved, it would stop every worker here at once; take this job in a worktree of its own "
            f"(git worktree add ../{job['id'].replace('/', '-')}) and fork it from there",
        )
    ]


def _shared_file_refusals(
    conn: Tx, job: dict, write_claims: list[jpaths.Claim], root: str, ws: Workspace
) -> list[tuple[str, str]]:
    literal = [c for c in write_claims if not c.glob]
    if not literal:
        return []
    near = rows.live_claims_near(conn, [c.path for c in literal], job["id"])
    reasons = []
    drivers: dict[str, str | None] = {}
    same = None
    for other_id in sorted(near):
        other = rows.get(conn, other_id)
        if other is None or not other.get("checkout_root") or other.get("state") in TERMINAL:
            continue
        if jobrecord.overdue(other, now()):
            continue  # a job past its deadline owns nothing against other jobs
        if jobrecord.taken_here(other, root) or _is_related(conn, job, other):
            continue
        for mine in literal:
            for theirs in near[other_id]:
                if theirs.glob or theirs.path != mine.path:
                    continue
                if mine.declaration is not None and theirs.declaration is not None:
                    if same is None:
                        same = declarations.Resolver(ws.root)
                    if not same(mine.path, mine.declaration, theirs.declaration):
                        continue  # two declarations of one file: each graded on its own
                    reasons.append(
                        (
                            errors.FILE_SHARED_ACROSS_CHECKOUTS,
                            f"refused fork of {job['id']}: {mine.spelling} and {theirs.spelling}, claimed by "
                            f"{other_id} held in another checkout ({other['checkout_root']}), name one declaration "
                            f"of {mine.path}; claim a different declaration, add --depends-on {other_id}, or fold "
                            f"the work into {other_id}",
                        )
                    )
                    continue
                if mine.path not in drivers:
                    drivers[mine.path] = diff_driver(ws.root, mine.path)
                if drivers[mine.path] is None:
                    continue  # no diff driver: only depends_on could help, so it is recorded
                reasons.append(
                    (
                        errors.FILE_SHARED_ACROSS_CHECKOUTS,
                        f"refused fork of {job['id']}: {mine.path} is also claimed ({theirs.spelling}) by "
                        f"{other_id}, held in another checkout ({other['checkout_root']}), and "
                        f"{_touched(other, mine.path)}; claim different declarations on both rows "
                        f"({mine.path}#<declaration>), add --depends-on {other_id}, or fold the work into "
                        f"{other_id}",
                    )
                )
    return reasons


def _write_proof(conn: Tx, job: dict, write_claims: list[jpaths.Claim], root: str) -> str | None:
    if not write_claims:
        return None
    near = rows.live_claims_near(conn, [c.key for c in write_claims], job["id"])
    bound_here = [j for j in near if jobrecord.bound_here(rows.get(conn, j) or {}, root)]
    if not rows.any_live_with_paths_in(conn, root, job["id"]):
        return "alone"
    same = declarations.Resolver(root)
    for other_id in bound_here:
        if any(jpaths.pair_kind(a, b, same) == "overlapping" for a in write_claims for b in near[other_id]):
            return "overlapping"
    return "disjoint"


def _releases(ws: Workspace, old: dict, new: dict, caller: Caller, at: float) -> list[dict]:
    kept = set(new.get("write_paths") or [])
    dropped = [p for p in old.get("write_paths") or [] if p not in kept]
    if not dropped:
        return []
    where = old.get("checkout_root")
    if not where or not os.path.isdir(where):
        where = ws.root
    out = []
    for spelling in dropped:
        path, declaration, _ = jpaths.split_entry(spelling)
        out.append(
            {
                "path": spelling,
                "digest": release_digest(where, jpaths.Claim(path, declaration)),
                "released": iso(at),
                "by": caller.actor,
            }
        )
    return out


def _rebase_subtree(conn: Tx, job_id: str, job_root: str, depth: int) -> None:
    """A replaced job moved in the tree: its descendants follow it."""
    for child_id in rows.descendants(conn, job_id):
        child = rows.get(conn, child_id)
        assert child is not None  # a descendant is a row this same transaction just listed
        chain = rows.ancestors(conn, child_id)
        child_depth = depth + chain.index(job_id) + 1 if job_id in chain else child["_depth"]
        rows.put(conn, child, job_root, child_depth)


def age_of(job: dict, at: float) -> str:
    return format_duration(at - parse_iso(job["updated"]))
