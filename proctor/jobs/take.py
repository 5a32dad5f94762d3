"""Taking and ending a lease: `proctor job exec` and `proctor job exit` (abandon).

exec takes a job in this checkout: it records the base the tree landed on beside the
checkpoint the job was handed (a divergence is a fact, never a refusal), the checkout, and
the checkout's binding. Taking is one-way while the held job is in flight: a caller whose
job is still declared or running may not take a different one; retaking the held job only
records the base.
"""

from __future__ import annotations

import os

from proctor import errors, trail
from proctor.paths import machine_id
from proctor.store import rows
from proctor.jobs.lease import Caller, bind_checkout
from proctor.jobs.model import DECLARED, EXITED, NO_RETURN, RUNNING, TERMINAL, check_job_id
from proctor.timeutil import iso, now
from proctor.vcs import checkpoint as vcs_checkpoint
from proctor.workspace import Workspace
from proctor import jobrecord


def _get_live(conn, job_id: str, verb: str) -> dict:
    job = jobrecord.require(rows.get(conn, job_id), job_id)
    if job["state"] in TERMINAL:
        raise errors.Refused(
            [
                (
                    errors.NOT_LIVE,
                    f"refused {verb} of {job_id}: it has ended ({job['state']}"
                    + (f": {job['end_reason']}" if job.get("end_reason") else "")
                    + ")",
                )
            ]
        )
    return job


def _mint_nonce(job: dict) -> str:
    """The job's secret, handed to the agent that works it: with it the agent manages this
    job's monitors and nothing else. Only its digest is stored."""
    import hashlib

    nonce = os.urandom(18).hex()
    job["nonce_sha256"] = hashlib.sha256(nonce.encode()).hexdigest()
    return nonce


def _retake_diverges(root: str, job: dict, previous: str | None, base: str | None) -> bool:
    """Whether a retake's new base diverges from what the job was handed. The holder's own
    edits and commits on top of where it landed are its work, not a divergence: a base on the
    same revision keeps the first take's answer, and a new revision diverges only when the
    checkpoint's revision is not beneath it."""
    handed = jobrecord.checkpoint_revision(job.get("checkpoint"))
    new_revision = jobrecord.checkpoint_revision(base)
    if not handed or not new_revision:
        return bool(job.get("checkpoint")) and base != job.get("checkpoint")
    if previous and jobrecord.checkpoint_revision(previous) == new_revision:
        return bool(job.get("base_diverges"))
    from proctor.vcs import git

    below = git.run(root, "merge-base", "--is-ancestor", handed, new_revision, check=False).returncode == 0
    return not below or (new_revision == handed and bool(job.get("base_diverges")))


def exec_job(ws: Workspace, job_id: str, caller: Caller, worktree: str | None = None) -> dict:
    """Take `job_id` in this checkout (or, with `worktree`, in a new worktree made at the job's
    checkpoint). The row carries `_nonce` (the job's secret, minted on a first take only) and
    `_notes` (what the caller should know), which the store does not keep."""
    check_job_id(job_id)
    if worktree is not None:
        return _exec_in_worktree(ws, job_id, caller, worktree)
    root = os.path.realpath(ws.root)
    taken = vcs_checkpoint.take(ws.root)
    base = taken.name if taken.revision else None
    from proctor.vcs import git

    sparse = git.run(ws.root, "config", "--bool", "core.sparseCheckout", check=False).stdout.strip() == b"true"
    notes: list[str] = []
    with ws.store.write() as conn:
        job = _get_live(conn, job_id, "exec")
        _refuse_second_lease(conn, job_id, caller)
        if job["state"] == EXITED:
            raise errors.Refused(
                [
                    (
                        errors.NOT_LIVE,
                        f"refused exec of {job_id}: it has exited and waits for verification "
                        f"(proctor job wait {job_id})",
                    )
                ]
            )
        retake = job["state"] == RUNNING and jobrecord.taken_here(job, root)
        if job["state"] == RUNNING and not retake:
            raise errors.Refused(
                [
                    (
                        errors.LEASE_HELD,
                        f"refused exec of {job_id}: it is taken in {jobrecord.where_taken(job)}; end it there "
                        f"(proctor job exit {job_id}) or fork a new job",
                    )
                ]
            )
        at = now()
        nonce = None
        if retake:
            # Taking the lease it already holds only records the base: the secret, when and
            # where it was taken, and everything else stay as they were.
            previous = job.get("base")
            job["base"] = base
            job["base_diverges"] = _retake_diverges(root, job, previous, base)
            if not job.get("nonce_sha256"):
                nonce = _mint_nonce(job)
        else:
            job["base"] = base
            job["base_diverges"] = bool(job.get("checkpoint")) and base != job.get("checkpoint")
            job["checkout_root"] = root
            job["machine"] = machine_id()
            # a sparse checkout leaves files out by design; one made sparse later hides them
            job["sparse"] = sparse
            job["state"] = RUNNING
            job["taken"] = iso(at)
            nonce = _mint_nonce(job)
            if os.path.realpath(job.get("declared_in") or "") == root and job.get("declared_on") in (
                None,
                machine_id(),
            ):
                notes.append(
                    f"{job_id} was declared in this checkout ({root}): until it exits or ends, every caller here "
                    f"that reports no session (the CLI, proctor.api, a host hook without session ids) acts under "
                    f"{job_id}, the orchestrator's own commands included. To keep this checkout the "
                    f"orchestrator's, take jobs in worktrees of their own (proctor job exec {job_id} --worktree "
                    f"../<dir>), or act as the orchestrator here with --orchestrator"
                )
        job["updated"] = iso(at)
        rows.put(conn, job, job["_root"], job["_depth"])
        bind_checkout(conn, root, job_id)
        trail.append(
            conn,
            ws.state_dir,
            "job_exec",
            caller.actor,
            job_id,
            {
                "checkout": root,
                "base": base,
                "checkpoint": job.get("checkpoint"),
                "diverges": job["base_diverges"],
                "retake": retake,
            },
            when=at,
        )
    if nonce is not None:
        job["_nonce"] = nonce
    job["_notes"] = notes
    job["_retake"] = retake
    return job


def _refuse_second_lease(conn, job_id: str, caller: Caller) -> None:
    """Taking a lease is one-way while the held job is in flight."""
    if caller.lease and caller.lease != job_id:
        held = rows.get(conn, caller.lease)
        if held is not None and held["state"] in (DECLARED, RUNNING):
            way_out = (
                caller.remedy()[2:]
                if caller.from_checkout
                else f"return it first (proctor job exit {caller.lease} --stdin)"
            )
            raise errors.Refused(
                [
                    (
                        errors.LEASE_HELD,
                        f"refused exec of {job_id}: {caller.whence()}, still {held['state']}, and taking a lease "
                        f"is one-way while a job is in flight; {way_out}",
                    )
                ]
            )


def _exec_in_worktree(ws: Workspace, job_id: str, caller: Caller, path: str) -> dict:
    """Make a worktree at the job's checkpoint and take the job there. A dirty checkpoint's
    uncommitted work is carried over from the checkout it was declared in while that checkout
    still holds exactly it; otherwise the worktree lands on the revision and the divergence is
    recorded, as any exec records it."""
    from proctor.vcs import git
    from proctor.workspace import Workspace as _Workspace

    target = os.path.abspath(path)
    with ws.store.read() as conn:
        job = _get_live(conn, job_id, "exec")
        _refuse_second_lease(conn, job_id, caller)
    if job["state"] != DECLARED:
        raise errors.Refused(
            [
                (
                    errors.NOT_LIVE if job["state"] == EXITED else errors.LEASE_HELD,
                    f"refused exec of {job_id} --worktree: it is {job['state']}"
                    + (f" in {job['checkout_root']}" if job.get("checkout_root") else "")
                    + "; a new worktree takes a job nobody has taken yet",
                )
            ]
        )
    if os.path.lexists(target) and not (os.path.isdir(target) and not os.listdir(target)):
        raise errors.Refused(
            [
                (
                    errors.WORKTREE_UNMADE,
                    f"refused exec of {job_id} --worktree {path}: {target} exists and is not an empty directory; "
                    f"name a new path",
                )
            ]
        )
    real = os.path.realpath(target)
    for git_dir in {os.path.realpath(ws.checkout.common_dir), os.path.realpath(ws.checkout.git_dir)}:
        if real == git_dir or real.startswith(git_dir + os.sep):
            raise errors.Refused(
                [
                    (
                        errors.WORKTREE_UNMADE,
                        f"refused exec of {job_id} --worktree {path}: {target} lies inside the git directory {git_dir}; "
                        f"name a path outside it",
                    )
                ]
            )
    existed = os.path.isdir(target)
    token = job.get("checkpoint") or ""
    recorded, digest = jobrecord.split_checkpoint(token)
    revision = recorded or git.head(ws.root)
    if not revision:
        raise errors.ProctorError(
            f"refused exec of {job_id} --worktree: the job has no checkpoint and this "
            f"repository no commit to make a worktree at",
            errors.WORKTREE_UNMADE,
        )
    made = git.run(ws.root, "worktree", "add", "--detach", target, revision, check=False)
    if made.returncode != 0:
        message = made.stderr.decode("utf-8", "replace").strip().splitlines()
        raise errors.ProctorError(
            f"could not make a worktree for {job_id} at {target}: git worktree add said "
            f"{message[-1] if message else 'exit ' + str(made.returncode)}",
            errors.WORKTREE_UNMADE,
        )
    notes = [f"made a worktree at {target} on {revision[:12]}"]
    try:
        if digest:
            notes.append(carry_uncommitted(job.get("declared_in"), target, revision, token))
        with _Workspace(target, ws.warn) as there:
            taken = exec_job(there, job_id, caller)
    except BaseException:
        git.run(ws.root, "worktree", "remove", "--force", target, check=False)
        if existed:
            os.makedirs(target, exist_ok=True)  # the empty directory the caller named was theirs
        raise
    taken["_notes"] = notes + taken.get("_notes", [])
    return taken


def carry_uncommitted(source: str | None, target: str, revision: str, token: str) -> str:
    """Copy the uncommitted work a dirty checkpoint names into the new worktree, byte for byte
    from `source` (the checkout the job was declared in), if that checkout still holds exactly
    that checkpoint: every changed tracked file (a deleted one deleted) and every untracked one.
    An untracked nested repository is not carried; the note says so."""
    import shutil

    from proctor.vcs import git

    if not source or not os.path.isdir(source):
        return (
            f"the checkpoint {token} carries uncommitted work, and the checkout it was declared in is gone; "
            f"the worktree holds {revision[:12]} alone, and the divergence is recorded"
        )
    try:
        now_there = vcs_checkpoint.take(source)
    except errors.ProctorError:
        now_there = None
    if now_there is None or now_there.name != token:
        return (
            f"the checkpoint {token} carries uncommitted work that {source} no longer holds; the worktree "
            f"holds {revision[:12]} alone, and the divergence is recorded"
        )
    _revision, _branch, changed, untracked = git.status(source)
    skipped = []
    for raw in changed + untracked:
        rel = os.fsdecode(raw).rstrip("/")
        origin, destination = os.path.join(source, rel), os.path.join(target, rel)
        if os.path.isdir(origin) and not os.path.islink(origin):
            skipped.append(rel)  # a nested repository: its own work is not this checkpoint's to copy
            continue
        if os.path.lexists(destination) and (os.path.isdir(destination) and not os.path.islink(destination)):
            shutil.rmtree(destination)
        elif os.path.lexists(destination):
            os.unlink(destination)
        if os.path.lexists(origin):
            os.makedirs(os.path.dirname(destination) or target, exist_ok=True)
            shutil.copy2(origin, destination, follow_symlinks=False)
    landed = vcs_checkpoint.take(target).name
    note = f"; not carried: {', '.join(skipped)} (nested repositories)" if skipped else ""
    if landed == token:
        return f"carried the uncommitted work of {token} over from {source}{note}"
    return (
        f"carried the uncommitted work over from {source}, but the worktree reads {landed}, not {token}; "
        f"the divergence is recorded{note}"
    )


def abandon(ws: Workspace, job_id: str, caller: Caller) -> dict:
    """`proctor job exit <id>` with no result: the job is recorded no_return."""
    check_job_id(job_id)
    with ws.store.write() as conn:
        job = _get_live(conn, job_id, "exit")
        if caller.lease and caller.lease != job_id and job_id not in rows.descendants(conn, caller.lease):
            raise errors.Refused(
                [
                    (
                        errors.NOT_YOUR_JOB,
                        f"refused exit of {job_id}: a session holding lease {caller.lease} may end only its own "
                        f"job and those forked beneath it; ending {job_id} is the forking session's "
                        f"({caller.whence()}){caller.remedy()}",
                    )
                ]
            )
        at = now()
        job["state"] = NO_RETURN
        job["end_reason"] = f"abandoned by {caller.actor}: proctor job exit without a result"
        job["updated"] = iso(at)
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(
            conn, ws.state_dir, "job_exit", caller.actor, job_id, {"state": NO_RETURN, "abandoned": True}, when=at
        )
    return job


def _unleased_only(caller: Caller, what: str, does: str) -> None:
    """The runner's and the forking session's moves: a leased caller is refused them."""
    if caller.lease:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused to {what}: only its forking session (an unleased caller) {does} "
                    f"({caller.whence()}){caller.remedy()}",
                )
            ]
        )


def release(ws: Workspace, job_id: str, caller: Caller, reason: str) -> dict:
    """Hand a job `proctor work` took back to declared, for its next attempt in a fresh checkout:
    a filed result goes to `previous_results`, the checkout it was taken in is forgotten (its
    binding with it), its secret and history stay. The runner's move, an unleased caller's."""
    check_job_id(job_id)
    _unleased_only(caller, f"release {job_id}", "puts it back")
    with ws.store.write() as conn:
        job = rows.get(conn, job_id)
        if job is None or job["state"] not in (RUNNING, EXITED):
            return job or {}
        if job.get("result") is not None:
            job.setdefault("previous_results", []).append(job.pop("result"))
        old = job.get("checkout_root")
        if old:
            rows.unbind(conn, rows.checkout_scope(old), job_id)
        at = now()
        job.update(
            state=DECLARED,
            checkout_root=None,
            machine=None,
            observed=None,
            base=None,
            base_diverges=False,
            taken=None,
            updated=iso(at),
        )
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(
            conn, ws.state_dir, "job_released", caller.actor, job_id, {"checkout": old, "reason": reason}, when=at
        )
    return job


def reopen(ws: Workspace, job_id: str, caller: Caller) -> dict:
    """Put an exited job back to work for another attempt (the runner's move, an unleased
    caller's): its filed result is kept in `previous_results`, its state is running again."""
    check_job_id(job_id)
    _unleased_only(caller, f"reopen {job_id}", "puts it back to work")
    with ws.store.write() as conn:
        job = rows.get(conn, job_id)
        if job is None or job["state"] != EXITED:
            return job or {}
        job.setdefault("previous_results", []).append(job.pop("result", None))
        job["state"] = RUNNING
        job["updated"] = iso(now())
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, "job_reopened", caller.actor, job_id, {})
    return job


def put_away(ws: Workspace, job_id: str, how: str, caller: Caller) -> dict | None:
    """Archive, trash or delete a job (the forking session's move). Its monitors are deleted
    for good by the server; a deleted row is gone with its paths."""
    check_job_id(job_id)
    if caller.lease:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused to {how} {job_id}: a session holding lease {caller.lease} may not; it is the forking "
                    f"session's ({caller.whence()}){caller.remedy()}",
                )
            ]
        )
    with ws.store.write() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        at = iso(now())
        if how == "delete":
            rows.delete(conn, job_id)
        else:
            job["archived" if how == "archive" else "trashed"] = at
            rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, f"job_{how}", caller.actor, job_id, {})
    return None if how == "delete" else job


def move(ws: Workspace, job_id: str, column: str, caller: Caller) -> dict:
    """Move a job's card to another column of the board (the person's move, an unleased
    caller's). The move holds while the job stays in the state it was moved in; a move to the
    column its state already puts it in clears any earlier move. A passive column ends the
    job's monitors: the server deletes them for good on its next look (monitors/store.prune)."""
    from proctor import config as config_mod

    check_job_id(job_id)
    if caller.lease:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"refused to move {job_id}: a session holding lease {caller.lease} may not; moving a card is the "
                    f"person's ({caller.whence()}){caller.remedy()}",
                )
            ]
        )
    names = [name for name, _states, _active in ws.config.board]
    if column not in names:
        raise errors.Refused(
            [
                (
                    errors.UNKNOWN_COLUMN,
                    f"no column {column!r} on the board; [board] in proctor.toml declares {', '.join(names)}",
                )
            ]
        )
    with ws.store.write() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        if job.get("archived") or job.get("trashed"):
            raise errors.Refused(
                [
                    (
                        errors.NOT_LIVE,
                        f"refused to move {job_id}: it is {'archived' if job.get('archived') else 'trashed'}, off the board",
                    )
                ]
            )
        was = config_mod.column_of_job(ws.config, job)
        at = now()
        by_state = config_mod.column_of(ws.config, job["state"])
        if by_state is not None and by_state[0] == column:
            job.pop("moved", None)
        else:
            job["moved"] = {"column": column, "state": job["state"], "at": iso(at), "by": caller.actor}
        job["updated"] = iso(at)
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(
            conn,
            ws.state_dir,
            "job_moved",
            caller.actor,
            job_id,
            {"from": was[0] if was else None, "to": column},
            when=at,
        )
    return job
