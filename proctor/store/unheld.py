"""The jobs proctor can PROVE nobody holds, found and ended: core, so the guard's lease lookup
reaps as every other read of the store does (the spec's "jobs magus ends itself").

Three rules: an ancestor ended (pass, fail or no_return), and the tree dies with it; the
checkout `proctor job exec` recorded no longer exists (an exited job is spared; judged only on
the machine that took it, since the path means nothing elsewhere); nobody took
it (declared, never taken, not updated within jobs.stale_after, no live job under it). A
checkout that cannot be read is not a checkout that is gone. The server's own jobs are never
ended. `candidates` only reads; `end` writes, to a fixed point, inside the caller's write
transaction.
"""

from __future__ import annotations

import os

from proctor.jobrecord import DECLARED, HOLDER_SESSION, NO_RETURN, RUNNING
from proctor.paths import machine_id
from proctor.store import Tx, rows
from proctor.timeutil import format_config_duration, format_duration, iso, parse_iso


def checkout_gone(path: str, cache: dict[str, bool | None], repository: str | None = None) -> bool | None:
    """True gone, False present, None undecidable. A checkout is gone when nothing is at its
    path, or something else is: not a directory (a file, a symbolic link), a directory with no
    git directory (`.git` missing, empty, or naming one that is not there), or a checkout of
    another repository (its objects do not hold `repository`, this store's root commit). A
    path that cannot be read (a mount, a permission) is undecidable."""
    if path not in cache:
        try:
            cache[path] = _gone(path, repository)
        except (FileNotFoundError, NotADirectoryError):
            cache[path] = True
        except OSError:
            cache[path] = None
    return cache[path]


def _gone(path: str, repository: str | None) -> bool:
    import stat

    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        return True  # a file or a symbolic link where the checkout was: nobody works there
    dot = os.path.join(path, ".git")
    dot_info = os.lstat(dot)
    if stat.S_ISDIR(dot_info.st_mode):
        git_dir = dot
    elif stat.S_ISREG(dot_info.st_mode):
        with open(dot, encoding="utf-8", errors="replace") as handle:
            first = handle.readline().strip()
        if not first.startswith("gitdir:"):
            return True
        git_dir = os.path.normpath(os.path.join(path, first[len("gitdir:") :].strip()))
    else:
        return True
    if not os.path.isfile(os.path.join(git_dir, "HEAD")):
        return True
    if repository is None:
        return False
    from proctor.paths import _common_dir, has_object

    if has_object(os.path.join(_common_dir(git_dir), "objects"), repository):
        return False
    import subprocess

    asked = subprocess.run(
        ["git", "cat-file", "-e", repository],
        cwd=path,
        capture_output=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_NO_REPLACE_OBJECTS": "1"},
    )
    return asked.returncode != 0


def repository_of(state_dir: str) -> str | None:
    """The root commit a store is keyed by, from its directory's name (None before a commit)."""
    name = os.path.basename(os.path.normpath(state_dir))
    return name if len(name) in (40, 64) and not name.strip("0123456789abcdef") else None


def candidates(conn: Tx, stale_after: float, at: float, repository: str | None = None) -> list[tuple[str, str]]:
    """(job id, reason) for every job the rules end now, cascade included."""
    ended: dict[str, str] = {}
    gone_cache: dict[str, bool | None] = {}
    for job_id, checkout in conn.execute(
        "SELECT id, checkout_root FROM jobs WHERE live = 1 AND state = ? AND checkout_root IS NOT NULL "
        "AND holder = ? AND (machine IS NULL OR machine = ?)",
        (RUNNING, HOLDER_SESSION, machine_id()),
    ):
        if checkout_gone(checkout, gone_cache, repository):
            ended[job_id] = f"taken in {checkout}, which no longer exists"
    if stale_after > 0:
        cutoff = iso(at - stale_after)
        untaken = conn.execute(
            "SELECT id, updated FROM jobs j WHERE live = 1 AND state = ? AND checkout_root IS NULL "
            "AND holder = ? AND updated < ? AND NOT EXISTS "
            "(SELECT 1 FROM jobs c WHERE c.parent = j.id AND c.live = 1)",
            (DECLARED, HOLDER_SESSION, cutoff),
        ).fetchall()
        for job_id, updated in untaken:
            ended.setdefault(
                job_id,
                (
                    f"declared {format_duration(at - parse_iso(updated))} ago and never taken "
                    f"(jobs.stale_after = {format_config_duration(stale_after)})"
                ),
            )
    # Rule 1, cascading: a live job whose parent ended (or is ending now). Found from the
    # live jobs, few, to their parents by key: a store keeps every job that ever ended, and
    # the server runs this every two seconds.
    ended_parents: dict[str, str] = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT DISTINCT p.id, p.state FROM jobs c JOIN jobs p ON p.id = c.parent WHERE c.live = 1 AND p.live = 0"
        )
    }
    frontier = dict(ended_parents)
    for job_id in ended:
        frontier[job_id] = NO_RETURN
    origin = {job_id: job_id for job_id in frontier}
    while frontier:
        marks = ",".join("?" * len(frontier))
        children = conn.execute(
            f"SELECT id, parent FROM jobs WHERE live = 1 AND holder = ? AND parent IN ({marks})",
            (HOLDER_SESSION, *frontier),
        ).fetchall()
        next_frontier: dict[str, str] = {}
        for child, parent in children:
            if child in ended:
                continue
            ancestor = origin[parent]
            state = ended_parents.get(ancestor, NO_RETURN)
            ended[child] = (
                f"its parent {parent} ended in {state}"
                if ancestor == parent
                else f"its ancestor {ancestor} ended in {state}"
            )
            origin[child] = ancestor
            next_frontier[child] = NO_RETURN
        frontier = next_frontier
    return list(ended.items())


def end(conn: Tx, state_dir: str, stale_after: float, at: float) -> list[tuple[str, str]]:
    """End, as no_return with its reason, every job the rules prove unheld, in `conn`'s write
    transaction; the cascade runs to a fixed point (ending a child can leave its untaken
    parent with no live job under it). Returns (job id, reason) for each."""
    from proctor import trail

    found: list[tuple[str, str]] = []
    while True:
        batch = candidates(conn, stale_after, at, repository_of(state_dir))
        if not batch:
            return found
        for job_id, reason in batch:
            job = rows.get(conn, job_id)
            if job is None:
                continue
            job["state"] = NO_RETURN
            job["end_reason"] = reason
            job["updated"] = iso(at)
            rows.put(conn, job, job["_root"], job["_depth"])
            trail.append(
                conn, state_dir, "job_ended", "proctor", job_id, {"state": NO_RETURN, "end_reason": reason}, when=at
            )
        found.extend(batch)
