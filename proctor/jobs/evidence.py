"""Evidence: the recorded runs a job is graded on, and whether a run can speak for a job.

A validation entry names ONE run: its id, with its output digest checked against it. A run
speaks for a job only when it was made in the job's own checkout, after the job was
declared, under no other job's lease (its own and its descendants' are its own), of a
target the job is graded by, and, for a job that writes, on the very tree that checkout
holds now (the run's recorded tree digest, `vcs.checkpoint.tree_digest`, against the tree's
digest now: content, so committing the same work changes nothing and an mtime set back
fools nothing). The same checks refuse a result at `proctor job exit` and fail a check goal
at `proctor job wait`, since the tree can change between the two.
"""

from __future__ import annotations

import os

from proctor import errors
from proctor.jobs.model import goal_list
from proctor.store import Tx, blobs, rows


def checkout_of(job: dict, fallback: str) -> str:
    """Where the job is held: the checkout `proctor job exec` recorded, else `fallback`."""
    return os.path.realpath(job.get("checkout_root") or fallback)


def check_targets(job: dict) -> list[str]:
    """Every target that grades the job: its check and its check goals'."""
    out: list[str] = []
    for goal in goal_list(job):
        if goal["kind"] == "check" and goal["check"]["target"] not in out:
            out.append(goal["check"]["target"])
    return out


class Tree:
    """The digest of a checkout's tree, read once and only when a rule asks for it."""

    def __init__(self, checkout: str) -> None:
        self.checkout = checkout
        self._read = False
        self.digest: str | None = None
        self.error: str | None = None

    def known(self, digest: str) -> None:
        """The digest, read already by whoever read the tree for another reason."""
        self._read, self.digest, self.error = True, digest, None

    def unreadable(self, error: str) -> None:
        """The tree cannot be read from here (a checkout on another machine, nothing recorded)."""
        self._read, self.digest, self.error = True, None, error

    def now(self) -> tuple[str | None, str | None]:
        if not self._read:
            self._read = True
            from proctor.vcs import checkpoint as vcs_checkpoint

            if not os.path.isdir(self.checkout):
                self.error = f"the checkout {self.checkout} no longer exists"
            else:
                try:
                    self.digest = vcs_checkpoint.tree_digest(self.checkout)
                except errors.ProctorError as exc:
                    self.error = f"the tree in {self.checkout} could not be read ({exc.message})"
        return self.digest, self.error


def blob_problem(store, run: dict) -> str | None:
    """Why the run's recorded output cannot be reopened as what its ref names, or None. `store`
    is the store (or a Tx on it)."""
    ref = run["output_ref"]
    try:
        found = blobs.rehash(store, ref)
    except (blobs.Missing, FileNotFoundError):
        return f"the output of run {run['id']} ({ref}) is missing from the store; run the target again"
    except OSError as exc:
        return f"the output of run {run['id']} ({ref}) cannot be read ({exc.strerror}); run the target again"
    except errors.ProctorError as exc:  # a ref that is no blob reference at all
        return f"the output of run {run['id']} cannot be read: {exc.message}"
    if found != ref:
        return (
            f"the output of run {run['id']} no longer matches its digest {ref}: the store's copy was "
            f"altered; run the target again"
        )
    return None


def provenance(conn: Tx, job: dict, run: dict, checkout: str, tree: Tree | None) -> list[str]:
    """Every reason `run` cannot speak for `job` (whatever its exit code). `tree` is the job's
    checkout's tree, read-only jobs' included: a run speaks for the tree it ran on."""
    job_id, run_id = job["id"], run["id"]
    reasons = []
    if run.get("machine") and job.get("machine") and run["machine"] != job["machine"]:
        reasons.append(
            f"run {run_id} was made on machine {run['machine']}, not on {job['machine']}, where "
            f"{job_id} is held; evidence is a run in the holder's own checkout"
        )
    elif os.path.realpath(run["checkout"]) != checkout:
        reasons.append(
            f"run {run_id} was made in {run['checkout']}, not in {checkout}, where {job_id} is held; "
            f"evidence is a run in the holder's own checkout"
        )
    targets = check_targets(job)
    if run["target"] not in targets:
        reasons.append(
            f"run {run_id} is of target {run['target']}, which grades nothing of {job_id} (graded by "
            f"{', '.join(targets) or 'no check'}); cite a run of its check"
        )
    if run["started"] < job["created"]:
        reasons.append(
            f"run {run_id} started at {run['started']}, before {job_id} was declared "
            f"({job['created']}); run the check again"
        )
    lease = run.get("lease")
    if lease and lease != job_id and job_id not in rows.ancestors(conn, lease):
        reasons.append(f"run {run_id} ran under lease {lease}, another job's; it is that job's evidence")
    if tree is not None:
        now, error = tree.now()
        if run.get("tree") and run.get("tree_end") and run["tree_end"] != run["tree"]:
            reasons.append(
                f"the tree in {run['checkout']} changed while run {run_id} ran (proctor run named the "
                f"paths), so it is evidence for no tree; if the target writes them itself, ignore them "
                f"(.gitignore), then run proctor run {run['target']} again"
            )
        elif not run.get("tree") or not run.get("tree_end"):
            reasons.append(
                f"run {run_id} recorded no tree, so it cannot be tied to the tree graded; run "
                f"proctor run {run['target']} again"
            )
        elif error:
            reasons.append(f"{error}, so run {run_id} cannot be tied to it")
        elif run["tree"] != now:
            reasons.append(
                f"the tree in {checkout} changed after run {run_id} started: it is evidence for a tree "
                f"that is gone; run proctor run {run['target']} again on the finished tree"
            )
    return reasons


def cited(conn: Tx, result: dict | None) -> tuple[list[dict], list[str]]:
    """The runs a filed result cites, read again from the store by id (the store is the truth,
    not the copy filed beside the result), and why any could not be."""
    from proctor.jobs import runs

    found, problems = [], []
    for entry in (result or {}).get("validation") or ():
        run = runs.get(conn, entry.get("run") or "")
        if run is None:
            problems.append(f"run {entry.get('run')!r}, cited by the result, is not recorded")
        elif run["output_ref"] != entry.get("output_ref"):
            problems.append(
                f"the result cites {entry.get('output_ref')} as run {run['id']}'s output, but run "
                f"{run['id']} printed {run['output_ref']}"
            )
        else:
            found.append(run)
    return found, problems
