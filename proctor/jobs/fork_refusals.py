"""What a fork refuses: the one-author rule a leased caller is held to (a holder may only
shrink its own write paths and fork children of itself inside them), and the shape of the
plan (parent and depends_on, max_depth and max_live, a check or goal, targets, the
workspace's load files while another job is taken in the checkout, a literal file shared by
unrelated live jobs across checkouts). fork.py records a job; these say why it will not.
"""

from __future__ import annotations

import os

from proctor import claims as jpaths
from proctor import config as config_mod
from proctor import declarations, errors, jobrecord
from proctor.jobs.lease import Caller
from proctor.jobs.model import TERMINAL
from proctor.jobs.targets import check_refusals
from proctor.store import Tx, rows
from proctor.timeutil import now
from proctor.vcs import git
from proctor.workspace import Workspace

# Files every worker in a checkout must read to load the workspace.
WORKSPACE_LOAD_FILES = (config_mod.CONFIG_NAME,)


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


def one_author(conn: Tx, caller: Caller, record: dict, existing: dict | None, parsed: dict) -> bool:
    """Hold a leased caller to its rights (jobrecord.one_author judges; this says it in the
    store's words). True when this is the holder shrinking its own row."""
    lease = caller.lease
    assert lease is not None  # called only for a leased caller
    held = rows.get(conn, lease)
    whence = f"({caller.whence()}){caller.remedy()}"
    remedy = f"that change is the forking session's: ask the session that forked {lease} to make it {whence}"
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
    own = record["id"] == lease
    found = jobrecord.one_author(
        held,
        record,
        existing,
        lambda: {lease, *rows.descendants(conn, lease)},
        lambda: rows.read_boundary(held, lambda job_id: rows.get(conn, job_id)),
        [(c.spelling, c) for c in parsed.get("write_paths", [])],
        [(c.spelling, c) for c in parsed.get("read_paths", [])],
    )
    job_id = record["id"]
    said = {
        "not-child": lambda _: (
            errors.NOT_YOUR_JOB,
            f"refused {'replace' if existing is not None else 'fork'} of {job_id}: a session holding lease "
            f"{lease} may only shrink its own write paths and fork children of {lease} (--parent {lease}) "
            f"inside them; {remedy}",
        ),
        "ended": lambda state: (
            errors.NOT_LIVE,
            f"refused fork of {lease}: your job has ended ({state}); take the next job with proctor job exec "
            f"<id> {whence}"
            if own
            else f"refused fork of {job_id}: your job {lease} has ended ({state}), so it cannot take children {whence}",
        ),
        "empty": lambda _: (
            errors.EMPTY_WRITE_SET,
            f"refused fork of {lease}: it would shrink your write paths to none, and an empty write set "
            f"is no boundary at all (it scopes nothing, so every path nobody else holds would be yours); "
            f"keep the paths you still write, or return the job (proctor job exit {lease} --stdin) {whence}",
        ),
        "widens": lambda widened: (
            errors.NOT_YOUR_JOB,
            f"refused fork of {lease}: {', '.join(widened)} widens your write paths, and a "
            f"holder may only shrink them; {remedy}",
        ),
        "state": lambda _: (
            errors.NOT_YOUR_JOB,
            f"refused fork of {job_id}: a holder may not set a child's state; a child starts "
            f"declared and its own holder moves it",
        ),
        "taken": lambda state: (
            errors.NOT_YOUR_JOB,
            f"refused replace of {job_id}: it is {state}, so its terms are its own holder's now; a holder "
            f"re-declares only a child nobody has taken {whence}",
        ),
        "depends": lambda beyond: (
            errors.NOT_YOUR_JOB,
            f"refused fork of {job_id}: depends_on {', '.join(map(str, beyond))} reaches past {lease}'s "
            f"own jobs, and would widen what the child may read; {remedy}",
        ),
        "reads": lambda detail: (
            errors.CHILD_EXCEEDS_PARENT,
            f"refused fork of {job_id}: read_paths {', '.join(detail[0])} reach past what {lease} may read "
            f"({', '.join(c.spelling for c in detail[1]) or 'nothing'}); a holder hands a child no more than it "
            f"holds {whence}",
        ),
        "writes": lambda outside: (
            errors.CHILD_EXCEEDS_PARENT,
            f"refused fork of {job_id}: {', '.join(outside)} lies outside your job {lease}'s "
            f"write paths ({', '.join(held.get('write_paths') or []) or 'none'}); a child may claim only "
            f"what its parent holds {whence}",
        ),
    }
    reasons: list[tuple[str, str]] = []
    for finding, detail in found:
        if finding == "fields":
            reasons.extend(
                (
                    errors.NOT_YOUR_JOB,
                    f"refused fork of {lease}: a holder may only shrink its write paths; {field} is "
                    f"the forking session's to change; {remedy}",
                )
                for field in detail
            )
        else:
            reasons.append(said[finding](detail))
    if reasons:
        raise errors.Refused(reasons)
    return own


def shape_refusals(
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
                    drivers[mine.path] = declarations.driver_at(ws.root, mine.path)
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
