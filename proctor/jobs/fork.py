"""Declaring work: `proctor job fork`, and the rules every door shares (what it refuses is
written in fork_refusals.py; this module records the job).

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

from proctor import errors, jobrecord, trail
from proctor import claims as jpaths
from proctor import declarations
from proctor.paths import machine_id
from proctor.store import Tx, rows
from proctor.jobs import fork_refusals
from proctor.jobs.lease import Caller
from proctor.jobs.model import (
    DECLARED,
    HOLDER_SESSION,
    PATH_FIELDS,
    RECORD_SCHEMA_VERSION,
    is_live,
    normalize_record,
)
from proctor.timeutil import format_duration, iso, now, parse_iso
from proctor.vcs import checkpoint as vcs_checkpoint
from proctor.vcs import git
from proctor.workspace import Workspace


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
        matches = sorted(rel for rel, is_dir in jpaths.walk_glob(root, claim.path) if not is_dir)
        if not matches:
            return "absent"
        h = hashlib.sha256()
        for rel in matches:
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            h.update(release_digest(root, jpaths.Claim(rel)).encode() + b"\0")
        return "sha256:" + h.hexdigest()
    return vcs_checkpoint.file_digest(os.path.join(root, claim.path))


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
            holder_merge = fork_refusals.one_author(conn, caller, record, existing, parsed)
        if holder_merge:
            # the holder's own row: one_author found it (as `held`) before saying True
            assert existing is not None
            job = dict(existing)
            job["write_paths"] = record.get("write_paths", existing.get("write_paths", []))
            parsed = {"write_paths": rows.claims(job)}
            if declaration_rules:
                # a declaration it now claims is read by today's rules, as a fork records them; a
                # rule the row recorded already stands (the forking session's, taken earlier)
                job["declaration_rules"] = {**declaration_rules, **(existing.get("declaration_rules") or {})}
        else:
            job = _new_row(ws, record, existing, caller, at)
            parsed.setdefault("write_paths", [])
            if declaration_rules:
                job["declaration_rules"] = declaration_rules
        job["updated"] = iso(at)

        parent = rows.get(conn, job["parent"]) if job.get("parent") else None
        if not holder_merge:
            reasons.extend(fork_refusals.shape_refusals(conn, cfg, job, parent, parsed["write_paths"], root, ws))
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
