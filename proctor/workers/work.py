"""`proctor work <job>`: run a job (or its children, in depends_on order) with agent CLIs.

A step is one job worked to its verdict. Its checkpoint is the tree its worker starts on:
the person's checkout as it stands when the step starts, after the steps it depends on have
landed (recorded on the row, the checkpoint it was forked on kept as `forked_checkpoint`).
Each attempt runs in a git worktree of its own made at that checkpoint (the person's
uncommitted work carried over byte for byte), so a failed attempt's changes reach neither the
next attempt nor the person's checkout, and the person's own work is never touched.

For each attempt: render the worker's prompt from `proctor describe job` (the terms, never a
recollection), start the worker with BAGGAGE=proctor.lease=<id> in that worktree, watch and
stop it (runner.py), run the job's check itself, and grade with the code `proctor job wait`
uses. An attempt that committed, amended, reset or moved a ref (HEAD of either checkout, a
branch, a tag), or changed the repository's hooks or config, fails with that named: no commit
a worker made is passed work. A pass is committed by proctor alone (hooks off, its own
message, commit.py) in the person's checkout, on the revision the step started from, with only
the job's changed paths inside its write paths, and only where the person left those paths
as they were; then recorded. Gates failing use an attempt on the rung; an idle, spend or
provider stop moves up the ladder without using one. A later attempt on the same worker
resumes the previous attempt's session (where its CLI can) with the gate failures as its
prompt. Every reply lands on the trail as a `worker_claim`, every attempt's whole stream as a
blob. After every child passed, the root's own check runs and the root is recorded.

Follow-ups from the job's monitors. Each attempt is graded when its CLI ends. One that passes
lands and ends the job, and its monitors go with it (they live only while the job is in an
active column). One that does not pass, whose worker ended its turn (`finished`) on a CLI that
resumes a session (not the plain `command`), while its job has live monitors (and the server
runs them) or a follow-up not yet delivered, is not followed by a blind retry: the job stays
exited (an active column: its monitors live on), its worktree stays (their cwd, and the
worker's work), and this process waits for the job's next follow-up (`_await_followup`), up to
the idle limit (`jobs.idle_minutes`, the longest a worker may be silent; the live line shows
"waiting for the monitors of J: N live"), and never past the worker's wall clock counted from
the first attempt of its session (so monitors that keep printing cannot resume a failing
worker forever). A follow-up that comes resumes the same session, with the follow-up's text as
its next message, as a new attempt in the same worktree: the job reopened (its result kept in
`previous_results`), the same secret, lease, guard hand-over and limits as any attempt, graded
and landed like any; the follow-up is marked delivered (`resume:<worker>:<session>`) once the
CLI was started with it, and the attempt's `worker_attempt` names it (`followup`). The attempt
that waited uses no attempt of its rung: the one the follow-up resumes carries its work on. No
follow-up within the bound (or the monitors gone, or no server running them): the attempt's
failure counts as it would have, and the step goes on as before (a blind retry in a fresh
worktree, the ladder, or the verdict). Once the job has ended (passed, failed, no_return,
released), nothing resumes its worker.

One runner per job: the job's row names the runner's pid (and its start time), and a second
`proctor work` on a job being worked is refused naming it. A watchdog process (watchdog.py)
ends the worker and records the attempt when this process dies without saying goodbye.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable

from proctor import errors, jobrecord, trail
from proctor.jobs import runs
from proctor.claims import covers
from proctor.config import Worker
from proctor.jobs import describe as jdescribe
from proctor.jobs import result as jresult
from proctor.jobs import take, wait
from proctor.jobs.lease import Caller
from proctor.jobrecord import BAGGAGE_KEY, parse_baggage
from proctor.jobs.model import DECLARED, EXITED, FAIL, INPUT_FIELDS, NO_RETURN, PASS, RUNNING, goal_list, is_live
from proctor.jobs.verify import Outcome, grade
from proctor.paths import machine_id
from proctor.process import start_time
from proctor.store import blobs, rows
from proctor.timeutil import iso, now
from proctor.vcs import checkpoint as vcs_checkpoint
from proctor.vcs import git
from proctor.workers import commit as jcommit
from proctor.workers import integrity, runner
from proctor.workers.executors import module as executor_module
from proctor.workspace import Workspace

STATUS_WORDS = ("done", "blocked", "split")
ACTOR = "proctor-work"


class WorkInterrupted(Exception):
    """proctor work was interrupted; what was in flight is recorded and put back."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(message)
        self.signum = signum
        self.message = message


@dataclass
class JobOutcome:
    id: str
    passed: bool
    attempts: list[dict] = field(default_factory=list)
    commit: str | None = None
    reason: str = ""

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "passed": self.passed,
            "attempts": self.attempts,
            "commit": self.commit,
            "reason": self.reason,
        }


# ---------------------------------------------------------------------------------- the plan


def plan(ws: Workspace, job_id: str) -> list[dict]:
    """The jobs `work` runs: the job itself, or its children not yet passed in depends_on order."""
    with ws.store.read() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        every_child = rows.children(conn, job_id)
    children = [c for c in every_child if c["state"] != PASS]
    if every_child and not children:
        return []  # every child passed: only the root's own verdict is left
    if not children:
        if not is_live(job["state"]):
            raise errors.ProctorError(
                f"{job_id} has ended ({job['state']}); nothing to work"
                + (f" (proctor work {job_id} --retry works it again)" if job["state"] in (FAIL, NO_RETURN) else ""),
                errors.NOT_LIVE,
            )
        return [job]
    by_id = {c["id"]: c for c in children}
    ordered: list[dict] = []
    visiting: set[str] = set()

    def visit(child: dict) -> None:
        if child in ordered:
            return
        if child["id"] in visiting:
            raise errors.ProctorError(
                f"the children of {job_id} depend on each other in a cycle (at {child['id']}); fix their depends_on",
                errors.BAD_RECORD,
            )
        visiting.add(child["id"])
        for dep in child.get("depends_on") or ():
            if dep in by_id:
                visit(by_id[dep])
        ordered.append(child)

    for child in sorted(children, key=lambda c: (c["created"], c["id"])):
        visit(child)
    ended = [c["id"] for c in ordered if not is_live(c["state"])]
    if ended:
        raise errors.Refused(
            [
                (
                    errors.NOT_LIVE,
                    f"{job_id} has children that ended without passing ({', '.join(ended)}); their dependents cannot "
                    f"land on them; work them again with proctor work {job_id} --retry, or end {job_id}",
                )
            ]
        )
    return ordered


def retry(ws: Workspace, job_id: str) -> list[str]:
    """`--retry`: the job, or its children, that failed or ended without a return are declared
    again (their verdicts kept in `previous_verdicts`, their history on the trail)."""
    again = []
    with ws.store.write() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        family = [job] + rows.children(conn, job_id)
        for row in family:
            if row["state"] not in (FAIL, NO_RETURN, EXITED):
                continue
            if row.get("verdict"):
                row.setdefault("previous_verdicts", []).append(row.pop("verdict"))
            if row.get("result") is not None:
                row.setdefault("previous_results", []).append(row.pop("result"))
            was = row["state"]
            row.update(state=DECLARED, checkout_root=None, base=None, taken=None, end_reason=None, updated=iso(now()))
            rows.put(conn, row, row["_root"], row["_depth"])
            trail.append(conn, ws.state_dir, "job_retried", ACTOR, row["id"], {"was": was})
            again.append(row["id"])
    return again


# ---------------------------------------------------------------------------------- prompts


def prompt_for(ws: Workspace, job: dict) -> str:
    terms = jdescribe.describe_job(ws, job["id"])
    check = (job.get("check") or {}).get("target")
    lines = [
        f"lease: {job['id']}",
        "",
        "You are working one job under proctor, unattended. Your terms, rendered from the job's row:",
        "",
        terms.rstrip(),
        "",
        "How to work it:",
        "- Write only inside the write paths above; the guard refuses other writes.",
        "- Do not commit, amend, reset or move any git ref: proctor commits what passes. An attempt that "
        "commits fails.",
    ]
    if check:
        lines.append(
            f"- The job's check is `proctor run {check}`. proctor runs it itself when you finish; "
            f"run it yourself first if you like. It prints the run's id (run-...) and its output_ref "
            f"(sha256:...), the pair a result may cite; only a run on your finished tree counts."
        )
    validation = (
        f', "validation": [{{"run": "run-...", "command": "proctor run {check}", "output_ref": "sha256:..."}}]'
        if check
        else ""
    )
    lines += [
        f"- When you are done, file your result: proctor job exit {job['id']} --stdin with "
        '{"schema_version": 2, "changed_paths": [...]'
        + validation
        + ', "status": "done" | "blocked" | "split", "summary": "..."}'
        " (proctor job exit --schema prints what it must satisfy).",
        "- Then end with a short reply saying what you did. Your account is a claim: proctor grades the diff and "
        "the recorded runs.",
    ]
    return "\n".join(lines) + "\n"


def retry_prompt(job: dict, failures: list[str], checkpoint: str) -> str:
    """What a resumed session is told: why its work did not pass, and that it starts over."""
    shown = "\n".join(f"- {f}" for f in failures[:20]) or "- (no gate named a failure; the attempt ended early)"
    return (
        f"lease: {job['id']}\n\nYour previous attempt at this job did not pass its gates:\n{shown}\n\n"
        f"The tree was put back to the step's checkpoint ({checkpoint[:12]}): none of your previous changes "
        f"are there. Make the change again, within your write paths, run the check, file your result "
        f"(proctor job exit {job['id']} --stdin) and end with a short reply, as your first instructions "
        f"say (proctor describe job {job['id']} prints your terms again).\n"
    )


def followup_prompt(job: dict, followup: dict, failures: list[str]) -> str:
    """What a session resumed by a follow-up is told: the follow-up's text, then where it stands."""
    shown = "\n".join(f"- {f}" for f in failures[:20]) or "- (no gate named a failure)"
    return (
        f"lease: {job['id']}\n\n{followup['text'].rstrip()}\n\n"
        f"That is what the monitors of job {job['id']} printed since your last reply. Your worktree is as you "
        f"left it, and your last attempt did not pass its gates:\n{shown}\n\n"
        f"Carry on from there within your write paths, run the check, file your result again (proctor job exit "
        f"{job['id']} --stdin) and end with a short reply. Remove a monitor you no longer need (proctor monitor "
        f"remove <id>): until the job passes, proctor waits for its live monitors' next follow-up.\n"
    )


def deliverable(ws: Workspace, prompt: str, number: int, job_id: str) -> str:
    """The prompt itself, or, too long for one argument, a short one naming a file that holds it."""
    if runner.fits_argv(prompt):
        return prompt
    path = _prompt_path(ws, job_id, number)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(prompt)
    return (
        f"lease: {job_id}\n\nYour instructions are too long to pass on the command line; they are in the "
        f"file {path}. Read that file whole first, then do what it says.\n"
    )


def _prompt_path(ws: Workspace, job_id: str, number: int) -> str:
    return os.path.join(ws.state_dir, "prompts", f"{_safe(job_id)}-{os.getpid()}-{number}.md")


_EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

# The fields of a job's row that say what its work is and how it is graded. A worker changes
# its row only through proctor's verbs (filing its result); one that wrote these itself (the
# store is a file it can open, under its own user) would grade itself on terms of its choosing.
TERMS = tuple(f for f in INPUT_FIELDS if f not in ("schema_version", "id", "model", "state"))


def _terms(ws: Workspace, job_id: str) -> dict:
    with ws.store.read() as conn:
        job = rows.get(conn, job_id) or {}
    return {key: job.get(key) for key in TERMS}


def _put_back_terms(ws: Workspace, job_id: str, terms: dict) -> list[str]:
    """After an attempt: the job's terms as they stood before it, put back where the attempt
    changed them; a failure naming what changed (the attempt does not pass)."""
    with ws.store.write() as conn:
        job = rows.get(conn, job_id)
        if job is None:
            return []
        changed = [key for key in TERMS if job.get(key) != terms.get(key)]
        if not changed:
            return []
        for key in changed:
            if terms.get(key) is None:
                job.pop(key, None)
            else:
                job[key] = terms[key]
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, "job_terms_restored", ACTOR, job_id, {"changed": changed})
    return [
        f"the attempt changed its job's row ({', '.join(changed)}): put back as declared; a worker changes "
        f"its job only through proctor (its result), never the store itself"
    ]


class _Boxed:
    """A sandboxed worker's two domains: `worker`, the one its CLI starts in, and `brokered`,
    the one its `proctor` commands run in (`broker`, proctor/broker.py)."""

    def __init__(self, ws: Workspace, job_id: str, worker: "runs.Sandboxed", brokered: "runs.Sandboxed") -> None:
        from proctor import broker as broker_mod

        self.worker, self.brokered, self.job_id = worker, brokered, job_id
        self.broker: broker_mod.Broker | None = None
        self.path = broker_mod.socket_for(ws.state_dir, job_id)
        broker_mod.SERVING[job_id] = self.path  # the pinned hook (workers/executors) hands its calls there

    def serve(self, job_id: str, worktree: str, env: dict, allowed) -> dict:
        """Start the broker; the worker's environment (PROCTOR_BROKER set, no store URL)."""
        from proctor import broker as broker_mod

        self.broker = broker_mod.Broker(self.path, job_id, worktree, self.brokered, env, allowed).start()
        out = self.worker.env(env)
        for key in _STORE_VARIABLES:  # the broker holds the store; the worker is handed no way to it
            out.pop(key, None)
        out[broker_mod.ENV] = self.path
        return out

    def record(self) -> dict:
        return dict(self.worker.record(), broker=self.path)

    def finish(self, worker_pids: set[int]) -> None:
        from proctor import broker as broker_mod

        try:
            if self.broker is not None:
                self.broker.close()
        finally:
            broker_mod.SERVING.pop(self.job_id, None)
            self.worker.finish(worker_pids)
            self.brokered.finish(self.broker.pids if self.broker is not None else set())


_STORE_VARIABLES = (
    "PROCTOR_STORE_URL",
    "PROCTOR_STORE_URL_FILE",
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICEFILE",
    "PGSERVICE",
    "PGHOST",
    "PGUSER",
    "PGDATABASE",
    "PGPORT",
)


def _worker_sandbox(ws: Workspace, worktree: str, job_id: str) -> _Boxed | None:
    """With `[sandbox] workers = true`, the grant the worker CLI itself starts in: its job's row
    read in its worktree, as a target run there would get it (runs.sandboxed), less proctor's
    state and what its broker runs from; outside those, the worktree and the repository's own
    checkout, its host's state, config and caches stay writable as they were. And the grant its
    `proctor` commands run in: the same with proctor's state but the streams of the attempt."""
    if not ws.config["sandbox.workers"]:
        return None
    from proctor import broker

    there = Workspace(worktree, warn=lambda line: None)
    there._state_dir, there._store = ws.state_dir, ws.store
    # the streams proctor keeps of the attempt (and its integrity snapshot beside them) are
    # proctor's record of what the worker did: narrowed for its commands too
    streams = os.path.join(ws.state_dir, "streams")
    # nothing new can then be made directly in the state directory: what the worker's commands
    # make there (run outputs, blobs of the trail, the broker's socket) is made first
    for sub in ("streams", "blobs", "prompts", "brokers"):
        os.makedirs(os.path.join(ws.state_dir, sub), exist_ok=True)
    from proctor.paths import repo_keys_dir

    # a directory of PATH that does not exist yet is one the worker could make and fill (a git, a
    # grep proctor or a check would run): proctor's PATH keeps the ones that exist, all narrowed
    kept = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.isabs(d) and os.path.isdir(d)]
    os.environ["PATH"] = os.pathsep.join(kept) if kept else os.defpath
    if git.PERSON_CONFIG is None:  # from now on proctor's git reads none of the person's config but these
        git.PERSON_CONFIG = broker.person_git_config()
    runs_from = tuple(broker.interpreter_regions(keep_writable=(worktree,))) + (
        os.path.join(ws.state_dir, "brokers"),
        # which store a checkout's proctor opens: the repository keys proctor keeps
        repo_keys_dir(),
        # the other jobs' worktrees beside this one: theirs to write, not this worker's
        os.path.dirname(os.path.realpath(worktree)),
    )
    os.makedirs(repo_keys_dir(), exist_ok=True)
    brokered = runs.sandboxed(there, job_id, extra_regions=(streams,) + runs_from, worker=True)
    if brokered is None:
        return None
    try:
        worker = runs.sandboxed(there, job_id, extra_regions=(ws.state_dir,) + runs_from, worker=True)
    except BaseException:
        brokered.finish(set())
        raise
    if worker is None:  # the row changed between the two readings: nothing narrows
        brokered.finish(set())
        return None
    return _Boxed(ws, job_id, worker, brokered)


def _of_attempt(info: dict, worker_pids: set[int]):
    """Whether process `pid` is the attempt's: in its cgroup, or descended from its worker."""
    from proctor.process import _stat, cgroup_pids

    def allowed(pid: int) -> bool:
        if info.get("cgroup") and pid in cgroup_pids(info["cgroup"]):
            return True
        seen: set[int] = set()
        while pid > 1 and pid not in seen:
            if pid in worker_pids:
                return True
            seen.add(pid)
            stat = _stat(pid)
            if stat is None:
                return False
            pid = stat[0]
        return False

    return allowed


def _record_worker_denials(
    ws: Workspace, job_id: str, number: int, boxed: "runs.Sandboxed", brokered: bool = False
) -> None:
    """The kernel's denials of a sandboxed worker (or of the commands its broker ran), on the
    trail as sandbox_denial."""
    if not boxed.denials:
        return
    with ws.store.write() as conn:
        for denial in boxed.denials:
            trail.append(
                conn,
                ws.state_dir,
                "sandbox_denial",
                ACTOR,
                job_id,
                {
                    "attempt": number,
                    "path": denial["path"],
                    "blockers": denial["blockers"],
                    **({"brokered": True} if brokered else {}),
                },
            )


def _put_back_state_modes(ws: Workspace) -> list[str]:
    """A sandboxed worker cannot write proctor's state, but may change its modes (Landlock does
    not govern chmod): the state directory, the store's files and proctor's directories there
    get back the owner's rights they need."""
    out = []
    entries = [ws.state_dir] + [os.path.join(ws.state_dir, name) for name in os.listdir(ws.state_dir)]
    for path in entries:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        import stat

        if stat.S_ISLNK(st.st_mode):
            continue
        need = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if st.st_mode & need != need:
            try:
                os.chmod(path, stat.S_IMODE(st.st_mode) | need)
                back = "proctor put its rights back"
            except OSError as exc:
                back = f"proctor could not put its rights back ({exc.strerror}); look at it"
            out.append(
                f"the attempt changed the mode of {path} in proctor's state ({back}): a worker never "
                f"touches proctor's files"
            )
    return out


def _record_broker(ws: Workspace, job_id: str, number: int, boxed: _Boxed) -> None:
    """What the broker ran for a sandboxed worker, and what it refused, on the trail."""
    if boxed.broker is None:
        return
    with ws.store.write() as conn:
        trail.append(
            conn,
            ws.state_dir,
            "sandbox_broker",
            ACTOR,
            job_id,
            {"attempt": number, "served": boxed.broker.served, "refused": boxed.broker.refused[:20]},
        )


def worker_env(job_id: str, nonce: str | None = None, module=None) -> dict:
    """The worker's environment: this one, its lease in BAGGAGE, its job's secret, and what its
    executor module adds (`ENV`, e.g. gemini's workspace trust, or `env(lease)`)."""
    env = dict(os.environ)
    env.update(getattr(module, "ENV", {}))
    extra = getattr(module, "env", None)
    if callable(extra):
        env.update(extra(job_id))
    # The worker runs `proctor` (its check, its result) and its host runs `proctor hook`: when
    # no proctor is on PATH, the one running this is put there.
    own = os.path.join(os.path.dirname(sys.executable), "proctor")
    if os.access(own, os.X_OK) and shutil.which("proctor", path=env.get("PATH") or os.defpath) is None:
        env["PATH"] = os.pathsep.join([os.path.dirname(own)] + ([env["PATH"]] if env.get("PATH") else []))
    if nonce:
        env["PROCTOR_NONCE"] = nonce  # the job's secret: with it the agent manages its own monitors
    members = parse_baggage(env.get("BAGGAGE", ""))
    members.pop(BAGGAGE_KEY, None)
    parts = [f"{BAGGAGE_KEY}={job_id}"] + [f"{k}={v}" for k, v in members.items()]
    env["BAGGAGE"] = ",".join(parts)
    return env


def status_of(job: dict | None) -> str:
    """The filed result's status, else unknown: a worker's prose is never read for one."""
    result = (job or {}).get("result") or {}
    return result["status"] if result.get("status") in STATUS_WORDS else "unknown"


# ---------------------------------------------------------------------------------- one runner, slots


def _safe(job_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "~", job_id)


def _runner_alive(job: dict) -> int | None:
    pid = job.get("worker_pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    if job.get("worker_machine") not in (None, machine_id()):
        return pid  # a pid on another machine: not judged from here, so taken as running
    started = start_time(pid)
    if started is None:
        return None
    recorded = job.get("runner_start")
    if recorded is not None and recorded != started:
        return None  # the pid was reused by another process
    return pid


def claim(ws: Workspace, ids: list[str]) -> None:
    """Name this process as the runner of `ids`, or refuse naming the one already running."""
    pid, started = os.getpid(), start_time(os.getpid())
    with ws.store.write() as conn:
        found = [rows.get(conn, i) for i in ids]
        for job in found:
            other = job and _runner_alive(job)
            if job is not None and other and other != pid:  # `other` is falsy when job is None
                where = (
                    "" if job.get("worker_machine") in (None, machine_id()) else f" on machine {job['worker_machine']}"
                )
                raise errors.ProctorError(
                    f"refused: {job['id']} is being worked by proctor work (pid {other}{where}); wait for it to "
                    f"end, or stop it (kill {other}{' there' if where else ''}: its worker is ended and its attempt "
                    f"recorded)",
                    errors.LEASE_HELD,
                )
        for job in found:
            if job is not None:
                job["worker_pid"], job["runner_start"], job["worker_machine"] = pid, started, machine_id()
                rows.put(conn, job, job["_root"], job["_depth"])


def unclaim(ws: Workspace, ids: list[str], pid: int | None = None) -> None:
    pid = pid or os.getpid()
    with ws.store.write() as conn:
        for job_id in ids:
            job = rows.get(conn, job_id)
            if job is not None and job.get("worker_pid") == pid and job.get("worker_machine") in (None, machine_id()):
                job["worker_pid"], job["runner_start"], job["worker_machine"] = None, None, None
                rows.put(conn, job, job["_root"], job["_depth"])


class Slot:
    """One of `[workers.NAME] slots` places for workers of one CLI on this machine: a lock file
    under proctor's state base, held while the worker runs and let go when this process ends,
    however it ends."""

    def __init__(self, worker: Worker, notify) -> None:
        self.worker, self.notify = worker, notify
        self.handle: IO[str] | None = None

    def __enter__(self) -> "Slot":
        count = getattr(self.worker, "slots", None)
        if not count:
            return self
        # one place on the machine for every repository, state directory and TMPDIR: the
        # system's temporary directory, per user
        directory = os.path.join("/tmp", f"proctor-slots-{os.getuid()}", self.worker.executor)
        os.makedirs(directory, exist_ok=True)
        told = False
        while True:
            for index in range(count):
                handle = open(os.path.join(directory, f"{index}.lock"), "a+")
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    handle.close()
                    continue
                handle.seek(0)
                handle.truncate()
                handle.write(f"{os.getpid()}\n")
                handle.flush()
                self.handle = handle
                return self
            if not told:
                holders = []
                for index in range(count):
                    try:
                        with open(os.path.join(directory, f"{index}.lock")) as held:
                            holders.append(held.read().strip() or "?")
                    except OSError:
                        pass
                self.notify(
                    "waiting",
                    {"worker": self.worker.name, "executor": self.worker.executor, "slots": count, "holders": holders},
                )
                told = True
            time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            self.handle.close()  # closing lets go of the lock
            self.handle = None


# ---------------------------------------------------------------------------------- refs and the git dir


def landed_by_proctor(ws: Workspace, old: str | None, new: str | None) -> list[str] | None:
    """The commits from `old` to `new` when every one of them is a commit `proctor work` landed
    (another job's, run beside this one), else None: such a move is no worker's doing."""
    if not old or not new:
        return None
    if git.run(ws.root, "merge-base", "--is-ancestor", old, new, check=False).returncode != 0:
        return None
    between = git.run(ws.root, "rev-list", f"{old}..{new}", check=False).stdout.decode().split()

    def landed() -> set:
        with ws.store.read() as conn:
            return {
                (e["data"] or {}).get("commit")
                for kind in ("job_landed", "job_commit")
                for e in trail.events(conn, kind=kind)
            }

    if not between:
        return None
    if not all(c in landed() for c in between):
        if getattr(_LANDING, "held", None) is not None:
            return None  # this process is the one landing: nothing beside it to wait for
        with _landing_lock(ws):  # a landing beside this one records its commit before it lets go
            if not all(c in landed() for c in between):
                return None
    for sha in between:  # a commit proctor made carries no trailer, whatever a record says
        message = git.run(ws.root, "log", "-1", "--format=%B", sha, check=False).stdout
        if git.run(ws.root, "interpret-trailers", "--parse", check=False, input=message).stdout.strip():
            return None
    return between


# ---------------------------------------------------------------------------------- worktrees


def _worktree_path(ws: Workspace, job_id: str) -> str:
    """Where a job's attempts run: one path per job (a resumed Claude session finds its project
    by its directory), under the temporary directory, never under proctor's state or cache,
    which the guard keeps every leased writer out of."""
    import tempfile

    from proctor.paths import repo_key

    return os.path.join(tempfile.gettempdir(), f"proctor-work-{os.getuid()}", repo_key(ws.checkout), _safe(job_id))


def remove_worktree(root: str, path: str | None) -> None:
    if not path:
        return
    git.run(root, "worktree", "remove", "--force", "--force", path, check=False)
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)
    git.run(root, "worktree", "prune", check=False)
    try:
        os.rmdir(os.path.dirname(path))  # the repository's directory, once no job's worktree is left in it
    except OSError:
        pass


def make_worktree(ws: Workspace, job_id: str, revision: str, token: str) -> tuple[str, str | None]:
    """A fresh worktree at the step's checkpoint, the person's uncommitted work carried over."""
    path = _worktree_path(ws, job_id)
    remove_worktree(ws.root, path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    made = git.run(ws.root, "worktree", "add", "--detach", path, revision, check=False)
    if made.returncode != 0:
        message = made.stderr.decode("utf-8", "replace").strip().splitlines()
        raise errors.ProctorError(
            f"could not make a worktree for {job_id} at {path}: git worktree add said "
            f"{message[-1] if message else 'exit ' + str(made.returncode)}",
            errors.WORKTREE_UNMADE,
        )
    note = None
    if "+" in token:
        note = take.carry_uncommitted(ws.root, path, revision, token)
    return path, note


def _set_checkpoint(ws: Workspace, job_id: str, token: str, handed: dict | None) -> None:
    with ws.store.write() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        if job.get("checkpoint") == token and (job.get("handed") or None) == (handed or None):
            return
        job.setdefault("forked_checkpoint", job.get("checkpoint"))
        previous = job.get("checkpoint")
        job["checkpoint"] = token
        if handed:
            job["handed"] = handed
        else:
            job.pop("handed", None)
        job["updated"] = iso(now())
        rows.put(conn, job, job["_root"], job["_depth"])
        trail.append(conn, ws.state_dir, "job_checkpoint", ACTOR, job_id, {"from": previous, "to": token})


# ---------------------------------------------------------------------------------- work


def work(
    ws: Workspace,
    job_id: str,
    worker_name: str | None = None,
    on_event: Callable[[str, dict], None] | None = None,
    again: bool = False,
) -> list[JobOutcome]:
    with _pinned_store(ws):
        return _work(ws, job_id, worker_name, on_event, again)


@contextlib.contextmanager
def _pinned_store(ws: Workspace):
    """The store this runner works, pinned (PROCTOR_STORE_URL) for its workers and, through the
    pinned hook, their guard: a worker that writes `[store] url` into its checkout's proctor.toml
    points neither its own proctor commands nor its hook at another store. `sqlite:` pins the
    embedded one."""
    from proctor.store import URL_ENV

    saved = os.environ.get(URL_ENV)
    os.environ[URL_ENV] = ws.store_url or "sqlite:"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(URL_ENV, None)
        else:
            os.environ[URL_ENV] = saved


def _work(
    ws: Workspace, job_id: str, worker_name: str | None, on_event: Callable[[str, dict], None] | None, again: bool
) -> list[JobOutcome]:
    cfg = ws.config
    if worker_name is not None and worker_name not in cfg.workers:
        known = ", ".join(cfg.workers) or "none defined"
        raise errors.ProctorError(
            f"no worker {worker_name!r} (workers: {known}); define [workers.{worker_name}] "
            f"with an executor in proctor.toml"
        )
    rungs = [cfg.workers[worker_name]] if worker_name else [cfg.workers[n] for n in cfg.ladder]
    if not rungs:
        from proctor.config import EXECUTORS

        raise errors.ProctorError(
            f'no workers are defined; add [workers.NAME] with executor = "claude" (or '
            f"{', '.join(e for e in EXECUTORS if e != 'claude')}) to proctor.toml"
        )
    notify = on_event or (lambda kind, data: None)
    with ws.store.read() as conn:
        named = rows.get(conn, job_id)
    if named is not None and _runner_alive(named) not in (None, os.getpid()):
        claim(ws, [job_id])  # refuses, naming the runner, before --retry touches anything
    if again:
        for retried in retry(ws, job_id):
            notify("retry", {"job": retried})
    steps = plan(ws, job_id)
    claimed = [job_id] + [s["id"] for s in steps if s["id"] != job_id]
    claim(ws, claimed)
    from proctor.workers.watchdog import Watchdog

    dog = Watchdog.start(ws, claimed)
    outcomes: list[JobOutcome] = []
    try:
        for step in steps:
            outcome = _run_step(ws, step, rungs, notify, dog)
            outcomes.append(outcome)
            if not outcome.passed:
                break
        if all(o.passed for o in outcomes) and not (len(steps) == 1 and steps[0]["id"] == job_id):
            root = _grade_root(ws, job_id, notify, dog)
            if root is not None:
                outcomes.append(root)
    finally:
        unclaim(ws, claimed)
        dog.close()
    return outcomes


def _run_step(ws: Workspace, job: dict, rungs: list[Worker], notify, dog) -> JobOutcome:
    job_id = job["id"]
    orchestrator = Caller(None, None, ACTOR)
    outcome = JobOutcome(job_id, False)
    with ws.store.read() as conn:
        current = jobrecord.require(rows.get(conn, job_id), job_id)
    if current["state"] in (RUNNING, EXITED) and os.path.realpath(
        current.get("checkout_root") or ""
    ) != os.path.realpath(_worktree_path(ws, job_id)):
        raise errors.ProctorError(
            f"could not start {job_id}: it is {current['state']} in {current.get('checkout_root')}, taken there by "
            f"its holder; end it there (proctor job exit {job_id}) or fork a new job",
            errors.LEASE_HELD,
        )
    if current["state"] in (RUNNING, EXITED):
        take.release(ws, job_id, orchestrator, "proctor work starts it again from a fresh worktree")
    start = vcs_checkpoint.take(ws.root)
    if not start.revision:
        raise errors.ProctorError(
            f"could not start {job_id}: proctor work needs a commit to start a worktree on (git commit first)"
        )
    digests = vcs_checkpoint.handed_digests(ws.root) if start.dirty else None
    _set_checkpoint(ws, job_id, start.name, digests)
    notify("step", {"job": job_id, "checkpoint": start.name})
    cfg = ws.config
    first_prompt: str | None = None
    started_any = False
    number = len(attempts_of(ws, job_id))
    last: dict = {}
    worktree: str | None = None
    taken: dict = {}
    try:
        for rung_index, worker in enumerate(rungs):
            used = 0
            session: str | None = None  # the previous attempt's, on this rung
            failures: list[str] = []
            followup: dict | None = None  # the follow-up the next attempt resumes the session with
            session_ends = 0.0  # (monotonic) the worker's wall clock from its session's first attempt
            while used < cfg.attempts:
                module = executor_module(worker.executor)
                probe = module.argv(worker, "x", lease=job_id)
                if shutil.which(probe[0]) is None and not os.path.exists(probe[0]):
                    reason = f"could not start: {probe[0]} is not on PATH"
                    notify("skip", {"job": job_id, "worker": worker.name, "reason": reason})
                    outcome.attempts.append(
                        {
                            "number": number + 1,
                            "worker": worker.name,
                            "outcome": "aborted",
                            "reason": reason,
                            "counts": False,
                        }
                    )
                    break  # this rung cannot run at all: up the ladder
                number += 1
                if followup is None:
                    if worktree is not None:  # the previous attempt's tree: gone before the next starts
                        take.release(ws, job_id, orchestrator, f"attempt {number - 1} did not pass")
                        remove_worktree(ws.root, worktree)
                        worktree = None
                    worktree, note = make_worktree(ws, job_id, start.revision, start.name)
                    dog.tell(job=job_id, worktree=worktree, attempt=None)
                    with Workspace(worktree, ws.warn) as there:
                        taken = take.exec_job(there, job_id, orchestrator)
                    session_ends = time.monotonic() + worker.wall_minutes * 60
                else:
                    # the same tree, the same take and secret: the job goes back to work for the follow-up
                    note = None
                    take.reopen(ws, job_id, orchestrator)
                # a follow-up resumes the tree of the attempt before it, made on an earlier pass
                assert worktree is not None
                if first_prompt is None:
                    first_prompt = prompt_for(ws, job)
                resume = session if session and _resumable(module) else None
                if followup is not None:
                    prompt = followup_prompt(job, followup, failures)
                else:
                    prompt = retry_prompt(job, failures, start.revision) if resume else first_prompt
                    if failures and not resume:
                        prompt = (
                            first_prompt
                            + "\nA previous attempt at this job did not pass:\n"
                            + "\n".join(f"- {f}" for f in failures[:20])
                            + "\nThe tree is back at the checkpoint.\n"
                        )
                prompt = deliverable(ws, prompt, number, job_id)
                started_any = True
                limits = runner.Limits(
                    idle=cfg.idle_limit_seconds,
                    grace=cfg["jobs.grace_seconds"],
                    wall=worker.wall_minutes * 60 if worker.wall_minutes else None,
                    spend=worker.max_spend_usd,
                )
                stream = os.path.join(ws.state_dir, "streams", f"{os.getpid()}-{_safe(job_id)}-{number}.out")
                before = integrity.Snapshot.take(ws.root, ws.checkout.common_dir, worktree)
                terms = _terms(ws, job_id)  # what the attempt is graded on, as it stood before it
                dog.tampered = None
                before.save(stream + ".before.json")  # for the watchdog, should this process die
                handed = _Handover(ws, followup, f"resume:{worker.name}:{resume}")

                worker_pids: set[int] = set()
                attempt_info: dict = {}

                def spawned(info: dict) -> None:
                    attempt_info.update(info)  # the broker serves the processes of this attempt alone
                    worker_pids.add(info["pid"])
                    dog.tell(
                        job=job_id,
                        worktree=worktree,
                        attempt=dict(
                            info,
                            number=number,
                            worker=worker.name,
                            executor=worker.executor,
                            stream=stream,
                            before=stream + ".before.json",
                            followup=followup["id"] if followup else None,
                        ),
                    )
                    handed.started()  # the CLI was started with the follow-up: it is delivered

                with Slot(worker, lambda kind, data: notify(kind, dict(data, job=job_id))):
                    notify(
                        "start",
                        {
                            "job": job_id,
                            "worker": worker.name,
                            "executor": worker.executor,
                            "attempt": number,
                            "rung": rung_index + 1,
                            "rungs": len(rungs),
                            "of": cfg.attempts,
                            "worktree": worktree,
                            "resumed": bool(resume),
                            "followup": followup["id"] if followup else None,
                            "note": note,
                            "idle": limits.idle,
                            "grace": limits.grace,
                            "wall": limits.wall,
                            "spend": limits.spend,
                        },
                    )
                    boxed = _worker_sandbox(ws, worktree, job_id)
                    try:
                        # with the sandbox, the hook pinned in argv (and in a host's settings) hands its
                        # calls to the broker, which is serving by the time the worker starts
                        argv = module.argv(worker, prompt, resume=resume, lease=job_id)
                        env = worker_env(job_id, taken.get("_nonce"), module)
                        if boxed is not None:
                            env = boxed.serve(job_id, worktree, env, _of_attempt(attempt_info, worker_pids))
                            notify(
                                "sandbox",
                                {"job": job_id, "worker": worker.name, "attempt": number, "sandbox": boxed.record()},
                            )
                        attempt = runner.run_attempt(
                            argv,
                            module.Parser(),
                            limits,
                            worktree,
                            env,
                            stdin_text=prompt if module.PROMPT_ON_STDIN else None,
                            adopt_orphans=True,
                            stream_path=stream,
                            on_spawn=spawned,
                            on_event=lambda kind, a: notify(
                                kind, {"job": job_id, "worker": worker.name, "attempt": number, "data": a}
                            ),
                            confine=boxed.worker.preexec if boxed is not None else None,
                        )
                    finally:
                        if boxed is not None:
                            boxed.finish(worker_pids)
                            _record_worker_denials(ws, job_id, number, boxed.worker)
                            _record_worker_denials(ws, job_id, number, boxed.brokered, brokered=True)
                            _record_broker(ws, job_id, number, boxed)
                handed.settle()
                stream_ref, stderr_ref = keep_stream(ws, stream)
                forged = [
                    f"the {what} proctor kept of the attempt is not what the worker printed: changed while it "
                    f"ran (a worker never writes proctor's files)"
                    for what, kept, read in (
                        ("stream", stream_ref, attempt.kept_digests[0]),
                        ("stderr stream", stderr_ref, attempt.kept_digests[1]),
                    )
                    if read is not None and (kept or "sha256:" + _EMPTY_SHA256) != read
                ]
                forget(_prompt_path(ws, job_id, number))  # a prompt too long for argv, read by now
                moved = before.settle(lambda old, new: bool(landed_by_proctor(ws, old, new)))
                moved += _put_back_terms(ws, job_id, terms) + forged
                if boxed is not None:
                    moved += _put_back_state_modes(ws)
                if dog.tampered:
                    moved.append(f"{dog.tampered}: a worker never touches proctor's own processes")
                noticed = before.noticed()
                forget(stream + ".before.json")
                dog.tell(job=job_id, worktree=worktree, attempt=None)
                if attempt.outcome == "interrupted":
                    _record(
                        ws,
                        job_id,
                        worker,
                        number,
                        attempt,
                        "unknown",
                        False,
                        moved,
                        stream_ref,
                        stderr_ref=stderr_ref,
                        followup=handed.record(),
                    )
                    raise WorkInterrupted(attempt.interrupted_by or 0, attempt.reason)
                ran = dict(
                    attempt.to_json(),
                    number=number,
                    worker=worker.name,
                    executor=worker.executor,
                    stream=stream_ref,
                    stderr_stream=stderr_ref,
                    failures=moved,
                    noticed=noticed,
                    **handed.record(),
                )
                dog.tell(finished=dict(ran, reply=(attempt.reply or "")[:4000]))
                try:
                    passed, gates, failures, graded, status = _gates(
                        ws, worktree, job_id, attempt, orchestrator, moved, dog
                    )
                except (KeyboardInterrupt, runner.Interrupted) as exc:
                    signum = _signum_of(exc)
                    _record(
                        ws,
                        job_id,
                        worker,
                        number,
                        attempt,
                        "unknown",
                        False,
                        moved
                        + [
                            f"proctor was interrupted ({_signal_name(signum)}) while it ran the check: "
                            f"the attempt was not graded"
                        ],
                        stream_ref,
                        noticed,
                        stderr_ref,
                        followup=handed.record(),
                    )
                    dog.tell(finished=None)
                    raise WorkInterrupted(
                        signum, f"proctor work was interrupted ({_signal_name(signum)}) while it ran {job_id}'s check"
                    ) from None
                record = _record(
                    ws,
                    job_id,
                    worker,
                    number,
                    attempt,
                    status,
                    passed,
                    failures,
                    stream_ref,
                    noticed,
                    stderr_ref,
                    followup=handed.record(),
                )
                dog.tell(finished=None)
                outcome.attempts.append(record)
                notify("attempt", {"job": job_id, **record})
                last = {"moved": moved, "failures": failures}
                if passed:
                    with ws.store.read() as conn:
                        current = jobrecord.require(rows.get(conn, job_id), job_id)
                    try:
                        # commit first: a job is recorded pass only once what passed is committed; the
                        # landing is on the trail before the lock goes, so a runner beside this one
                        # never takes proctor's commit for its worker's (landed_by_proctor)
                        with _landing_lock(ws):
                            outcome.commit = _land(ws, worktree, current, graded, gates, attempt, status, start, dog)
                            _note_landed(ws, job_id, outcome.commit)
                    except errors.ProctorError as exc:
                        # not the worker's doing: the job goes back to declared for a later run
                        notify("landing", {"job": job_id, "reason": exc.message})
                        _note_unlanded(ws, job_id, number, exc.message)
                        raise errors.ProctorError(
                            f"{job_id} passed its gates but was not landed: {exc.message}", exc.code
                        ) from None
                    if passed:
                        with Workspace(worktree, ws.warn) as there:
                            finished = wait.wait(there, job_id, orchestrator)[0]
                        outcome.passed = finished["state"] == PASS
                        if outcome.passed:
                            _note_commit(ws, job_id, outcome.commit)
                            outcome.reason = "passed its gates"
                            return outcome
                session = attempt.session if attempt.session and not attempt.provider_error else None
                followup = None
                if session and _resumable(module) and attempt.outcome == "finished":
                    # its job's monitors may have more to say: their follow-up resumes this session here
                    followup = _await_followup(
                        ws, job_id, min(time.monotonic() + cfg.idle_limit_seconds, session_ends), notify
                    )
                    if followup is not None:
                        continue  # the attempt that follows carries its work on: no attempt of the rung used
                if attempt.counts:
                    used += 1  # the gates failed this worker: one attempt of its rung used
                else:
                    break  # an idle, spend or provider stop: up the ladder without using an attempt
        if not started_any:
            raise errors.ProctorError(
                f"could not start any worker for {job_id}: " + "; ".join(a["reason"] for a in outcome.attempts)
            )
        # Out of attempts and rungs: the last attempt's account is the verdict, graded where it was made.
        also = [Outcome("rule", "attempt-kept-refs", False, last["moved"])] if last.get("moved") else []
        with Workspace(worktree, ws.warn) as there:
            _ensure_filed(there, job_id, orchestrator, None)
            finished, _ = wait.wait(there, job_id, orchestrator, also=also)
        outcome.reason = "out of attempts and rungs: " + (
            "; ".join((last.get("failures") or [])[:5]) or finished["state"]
        )
        return outcome
    except (KeyboardInterrupt, runner.Interrupted) as exc:
        signum = _signum_of(exc)
        raise WorkInterrupted(signum, f"proctor work was interrupted ({_signal_name(signum)})") from None
    except WorkInterrupted:
        raise
    finally:
        _hand_back(ws, job_id, worktree, dog, "proctor work ended before a verdict")


FOLLOWUP_POLL = 1.0  # seconds between two looks at the store while waiting for a follow-up


def _await_followup(ws: Workspace, job_id: str, until: float, notify) -> dict | None:
    """The job's next follow-up, once one is ready and before `until` (monotonic), else None.

    Waited for only while the job is exited in an active column of the board (its monitors
    live; a job that ended, was released, archived or trashed has none and is never resumed)
    and has live monitors a running server runs; a follow-up already ready is taken at once,
    unless `until` has passed (the worker's wall clock for its session is spent). The job's
    row and the follow-ups are read again every FOLLOWUP_POLL seconds."""
    from proctor.monitors import store as mstore
    from proctor.server import daemon
    from proctor.store import followups

    started = time.monotonic()
    shown: int | None = None
    bound = max(0.0, until - started)
    while True:
        with ws.store.read() as conn:
            job = rows.get(conn, job_id)
            if job is None or job["state"] != EXITED or not mstore.job_is_active(ws.config, job):
                ready, live = None, 0
            else:
                ready = followups.next_ready(conn, job_id)
                live = len(mstore.live(conn, job_id))
        at = time.monotonic()
        if ready is None and not live:
            if shown is not None:
                notify("wait_over", {"job": job_id, "reason": "its monitors are gone"})
            return None
        if at >= until:
            notify(
                "wait_over",
                {
                    "job": job_id,
                    "reason": (
                        f"no follow-up from its monitors within {bound:.0f} s"
                        if bound > 0
                        else "its worker's wall clock, counted from its session's first attempt, is spent: no follow-up "
                        "resumes it"
                    ),
                },
            )
            return None
        if ready is not None:
            notify("followup", {"job": job_id, "id": ready["id"], "events": ready["events"]})
            return ready
        if shown is None and daemon.info(ws) is None:
            notify(
                "wait_over",
                {
                    "job": job_id,
                    "reason": f"{live} live monitor{'s' if live > 1 else ''}, but no "
                    f"server runs them (proctor server start), so no wait",
                },
            )
            return None
        if live != shown:
            notify("monitors", {"job": job_id, "live": live, "bound": bound, "since": started})
            shown = live
        time.sleep(min(FOLLOWUP_POLL, until - at))


class _Handover:
    """The follow-up an attempt resumes its session with: marked delivered (`via`) once the
    CLI was started with it; a CLI that could not start leaves it ready."""

    def __init__(self, ws: Workspace, followup: dict | None, via: str) -> None:
        self.ws, self.followup, self.via = ws, followup, via
        self.spawned = self.marked = False

    def started(self) -> None:
        self.spawned = True
        self._mark()

    def settle(self) -> None:
        if self.spawned and not self.marked:
            self._mark(quiet=False)  # what could not be written while the worker started

    def _mark(self, quiet: bool = True) -> None:
        if self.followup is None or self.marked:
            return
        from proctor.store import followups

        try:
            with self.ws.store.write() as conn:
                followups.mark_delivered(conn, self.followup["id"], self.via)
            self.marked = True
        except Exception:
            if not quiet:
                raise

    def record(self) -> dict:
        """What the attempt's record says of it: the follow-up's id, and whether it was handed over."""
        if self.followup is None:
            return {}
        return {"followup": self.followup["id"], "followup_delivered": self.marked}


def _hand_back(ws: Workspace, job_id: str, worktree: str | None, dog, reason: str) -> None:
    """The step is over, however it ended: a job still taken (no verdict) is declared again,
    and its worktree removed."""
    take.release(ws, job_id, Caller(None, None, ACTOR), reason)  # a job with a verdict stays as it is
    remove_worktree(ws.root, worktree)
    dog.tell(job=None, worktree=None, attempt=None)


def _signum_of(exc: BaseException) -> int:
    import signal

    if isinstance(exc, runs.Terminated):
        return signal.SIGTERM
    return getattr(exc, "signum", None) or signal.SIGINT


def _signal_name(signum: int) -> str:
    import signal

    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _resumable(module) -> bool:
    """Whether the executor's CLI resumes a session: every one but a plain command."""
    return module.__name__.rsplit(".", 1)[-1] != "command"


def forget(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def keep_stream(ws: Workspace, path: str) -> tuple[str | None, str | None]:
    """The attempt's whole stdout and stderr, moved into the blob store; their references (an
    empty stderr is no blob)."""
    refs: list[str | None] = []
    for kept in (path, path + ".stderr"):
        ref = None
        try:
            if os.path.getsize(kept) > 0 or kept == path:
                ref = blobs.adopt(ws.store, kept)
            else:
                os.unlink(kept)
        except OSError:
            pass
        refs.append(ref)
    return refs[0], refs[1]


def _ensure_filed(ws: Workspace, job_id: str, caller: Caller, reply: str | None) -> dict:
    with ws.store.read() as conn:
        job = rows.get(conn, job_id)
    if job is not None and job["state"] == EXITED:
        return job
    # what a stream held need not be text proctor can store (a lone surrogate from a cut emoji)
    summary = (reply or "")[:4000].encode("utf-8", "replace").decode("utf-8")
    return jresult.file_result(ws, job_id, {"schema_version": 2, "status": None, "summary": summary}, caller)


def _gates(ws: Workspace, worktree: str, job_id: str, attempt, caller: Caller, moved: list[str], dog):
    with Workspace(worktree, ws.warn) as there:
        job = _ensure_filed(there, job_id, caller, attempt.reply)
        status = status_of(job)
        made = [
            _tagged_run(there, goal["check"]["target"], Caller(job_id, "flag", caller.user), dog, worktree)
            for goal in goal_list(job)
            if goal["kind"] == "check"
        ]
        jresult.add_evidence(there, job_id, made, caller)
        with there.store.read() as conn:
            job = jobrecord.require(rows.get(conn, job_id), job_id)
            graded = grade(conn, job, there.root, there.store)
    gates = [("check " + g["check"]["target"]) if g["kind"] == "check" else f"goal {g['id']}" for g in goal_list(job)]
    if graded.observed is not None:
        gates.append("diff within the write paths")
    failures = [f"{o.label}: {s}" for o in graded.failures() for s in o.subjects] + moved
    return graded.passed and not moved, gates, failures, graded, status


def _tagged_run(ws: Workspace, target: str, caller: Caller, dog, worktree: str) -> dict:
    """A check proctor runs itself, its processes tagged (PROCTOR_WORKER_TAG in their
    environment) so the watchdog can end them should this process die while they run."""
    import secrets

    tag = secrets.token_hex(12)
    previous = os.environ.get(runner.TAG)
    os.environ[runner.TAG] = tag
    dog.tell(attempt=None, gates={"tag": tag, "worktree": worktree})
    try:
        return runs.run_target(ws, target, caller, echo=None)
    finally:
        from proctor.process import kill_tagged

        kill_tagged(runner.TAG, tag)  # what the check started and left running (code the worker wrote)
        if previous is None:
            os.environ.pop(runner.TAG, None)
        else:
            os.environ[runner.TAG] = previous
        dog.tell(gates=None)


def _record(
    ws: Workspace,
    job_id: str,
    worker: Worker,
    number: int,
    attempt,
    status: str,
    passed: bool,
    failures: list[str],
    stream_ref: str | None,
    noticed: list[str] | None = None,
    stderr_ref: str | None = None,
    followup: dict | None = None,
) -> dict:
    data = {
        "number": number,
        "worker": worker.name,
        "executor": worker.executor,
        **attempt.to_json(),
        "status": status,
        "passed": passed,
        "failures": failures[:50],
        "stream": stream_ref,
        "claim": (attempt.reply or "")[:500],
        "stderr_stream": stderr_ref,
        **(followup or {}),
    }
    if noticed:
        data["noticed"] = [
            f"your checkout changed while the attempt ran: {', '.join(noticed[:10])}"
            + (f" and {len(noticed) - 10} more" if len(noticed) > 10 else "")
            + "; proctor did not write it, and lands nothing over it (if you did not, the worker did)"
        ]
    data.pop("reply", None)
    data.pop("stream_path", None)  # moved into the blob store: `stream` names it
    with ws.store.write() as conn:
        trail.append(conn, ws.state_dir, "worker_attempt", f"worker:{worker.name}", job_id, data)
        trail.append(
            conn,
            ws.state_dir,
            "worker_claim",
            f"worker:{worker.name}",
            job_id,
            {
                "attempt": number,
                "status": status,
                "aborted": attempt.outcome != "finished",
                "idle_stopped": attempt.stop == "idle",
                "reply_kind": attempt.reply_kind,
                "interrupted": attempt.outcome == "interrupted",
                **({"followup": followup["followup"]} if followup else {}),
            },
            payload=(attempt.reply or "").encode("utf-8", "replace"),
        )
    return data


def _land(
    ws: Workspace, worktree: str, job: dict, graded, gates: list[str], attempt, status: str, start, dog
) -> str | None:
    """Commit what passed in the person's checkout: the job's changed paths inside its write
    paths, copied byte for byte from the attempt's worktree, on the revision the step started
    from, where the person left those paths as they were. None when there is nothing to commit."""
    if job.get("read_only") or graded.observed is None:
        return None
    mine = rows.claims(job)
    denies = rows.claims(job, "deny_paths")
    paths = [
        p for p in graded.observed.changed if any(covers(c, p) for c in mine) and not any(covers(d, p) for d in denies)
    ]
    if not paths:
        return None
    head = git.head(ws.root)
    beside = landed_by_proctor(ws, start.revision, head) if head != start.revision else None
    if beside and head is not None:  # (beside is None when head is)
        # other jobs landed meanwhile: this one lands on top only where they touched none of its paths
        theirs = set(
            git.run(ws.root, "diff", "--name-only", "--no-renames", start.revision, head)
            .stdout.decode("utf-8", "surrogateescape")
            .splitlines()
        )
        overlap = sorted(theirs & set(paths))
        if overlap:
            raise errors.ProctorError(
                f"{', '.join(overlap[:5])} changed on your branch since {start.revision[:12]} (proctor landed "
                f"{len(beside)} other job commit(s) meanwhile); the job is not landed on a tree it was not graded "
                f"on (proctor work {job['id']} works it again on the new one)"
            )
    elif head != start.revision:
        raise errors.ProctorError(
            f"your checkout's HEAD moved from {start.revision[:12]} to {(head or 'nothing')[:12]} while the job "
            f"ran; proctor lands a job only on the revision it started from (proctor work {job['id']} "
            f"works it again on the new one)"
        )
    handed = job.get("handed") or {}
    _revision, _branch, changed, untracked = git.status(ws.root)
    dirty = {os.fsdecode(p).rstrip("/") for p in changed + untracked}
    touched = [
        p
        for p in paths
        if p in dirty and (p not in handed or vcs_checkpoint.handed_digest(os.path.join(ws.root, p)) != handed[p])
    ]
    if touched:
        raise errors.ProctorError(
            f"you changed {', '.join(touched[:5])} in your checkout while the job ran; proctor never overwrites "
            f"your work (commit or stash it, then proctor work {job['id']})"
        )
    summary = ((job.get("result") or {}).get("summary")) or attempt.reply
    kind = "step" if job.get("parent") else "job"
    text = jcommit.message(job, kind, gates, summary, status, ws.config["jobs.commit_body"])
    graded = _graded_objects(worktree, paths)
    for rel in paths:
        destination = os.path.join(ws.root, rel)
        if os.path.lexists(destination) and os.path.isdir(destination) and not os.path.islink(destination):
            raise errors.ProctorError(f"{rel} is a directory in your checkout; proctor does not replace it")
    kept = os.path.join(ws.state_dir, "landing", f"{os.getpid()}-{_safe(job['id'])}")
    shutil.rmtree(kept, ignore_errors=True)
    os.makedirs(kept)
    saved = {}
    head = git.head(ws.root)
    if head is None:  # it resolved just above; a checkout whose HEAD stopped resolving is not landed on
        raise errors.ProctorError(
            f"your checkout's HEAD names no commit any more; proctor work {job['id']} works the job again"
        )
    try:
        for index, rel in enumerate(paths):
            destination = os.path.join(ws.root, rel)
            if os.path.lexists(destination):
                saved[rel] = os.path.join(kept, str(index))
                shutil.copy2(destination, saved[rel], follow_symlinks=False)
        dog.tell(landing={"root": ws.root, "head": head, "saved": saved, "paths": paths, "kept": kept})
        for rel in paths:
            origin, destination = os.path.join(worktree, rel), os.path.join(ws.root, rel)
            if os.path.lexists(destination):
                os.unlink(destination)
            if os.path.lexists(origin):
                os.makedirs(os.path.dirname(destination) or ws.root, exist_ok=True)
                shutil.copy2(origin, destination, follow_symlinks=False)
        sha = jcommit.commit_paths(ws.root, paths, text)
        wrong = _committed_differs(ws.root, sha, graded)
        if wrong:
            # what git stored is not what was graded: the commit is taken back before anyone builds on it
            git.run(
                ws.root,
                "update-ref",
                "-m",
                "proctor work: a commit that does not hold the graded bytes",
                "HEAD",
                head,
                sha,
            )
            git.run(ws.root, "reset", "-q", head, "--", *paths, check=False)
            raise errors.ProctorError(
                f"the commit git made does not hold the graded bytes ({'; '.join(wrong[:3])}); it was taken back"
            )
        dog.tell(landing=None)
        return sha
    except BaseException as exc:
        # not landed: the person's checkout holds exactly what it held before
        restore_landing(ws.root, saved, paths)
        dog.tell(landing=None)
        if isinstance(exc, OSError):
            raise errors.ProctorError(f"could not land the work in your checkout: {exc}") from None
        raise
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def restore_landing(root: str, saved: dict[str, str], paths: list[str]) -> None:
    """Put the person's files back as they were before a landing that did not happen."""
    for rel in paths:
        destination = os.path.join(root, rel)
        try:
            if os.path.lexists(destination):
                if os.path.isdir(destination) and not os.path.islink(destination):
                    shutil.rmtree(destination)
                else:
                    os.unlink(destination)
            if rel in saved and os.path.lexists(saved[rel]):
                os.makedirs(os.path.dirname(destination) or root, exist_ok=True)
                shutil.copy2(saved[rel], destination, follow_symlinks=False)
        except OSError:
            continue
    git.run(root, "reset", "-q", "--", *paths, check=False)  # the index entries too


def _graded_objects(worktree: str, paths: list[str]) -> dict[str, tuple[str, str] | None]:
    """Each path as graded: (mode, blob id of its bytes, no filter applied), None when deleted.
    A directory or a symbolic link leading into the worktree cannot be landed as graded."""
    out: dict[str, tuple[str, str] | None] = {}
    real = os.path.realpath(worktree)
    for rel in paths:
        full = os.path.join(worktree, rel)
        if not os.path.lexists(full):
            out[rel] = None
        elif os.path.islink(full):
            target = os.readlink(full)
            if os.path.isabs(target) and (os.path.realpath(target) + os.sep).startswith(real + os.sep):
                raise errors.ProctorError(
                    f"{rel} is a link into the attempt's worktree ({target}), which is gone "
                    f"once the attempt ends: it cannot be landed as graded"
                )
            blob = git.run(worktree, "hash-object", "--stdin", input=os.fsencode(target)).stdout.decode().strip()
            out[rel] = ("120000", blob)
        elif os.path.isdir(full):
            raise errors.ProctorError(f"{rel} is a directory in the attempt's worktree; proctor lands files")
        else:
            blob = git.run(worktree, "hash-object", "--no-filters", "--", full).stdout.decode().strip()
            out[rel] = ("100755" if os.stat(full).st_mode & 0o100 else "100644", blob)
    return out


def _committed_differs(root: str, sha: str, graded: dict[str, tuple[str, str] | None]) -> list[str]:
    """Paths whose entry in commit `sha` is not the graded bytes and mode, each object read
    back and hashed (a planted object with a borrowed name does not pass)."""
    listed = git.run(root, "ls-tree", "-z", "--full-tree", sha, "--", *graded).stdout
    found = {}
    for entry in listed.split(b"\0"):
        if entry:
            meta, _, path = entry.partition(b"\t")
            mode, _kind, blob = meta.decode().split()
            found[os.fsdecode(path)] = (mode, blob)
    touched = git.run(root, "diff-tree", "-r", "-z", "--name-only", "--no-renames", f"{sha}^", sha, check=False).stdout
    wrong = [
        f"{os.fsdecode(p)} is in the commit but was not graded"
        for p in touched.split(b"\0")
        if p and os.fsdecode(p) not in graded
    ]
    modes = git.run(root, "config", "--bool", "core.fileMode", check=False).stdout.strip() != b"false"
    for rel, want in graded.items():
        have = found.get(rel)
        if not modes and have is not None and want is not None:
            want = (have[0], want[1])  # core.fileMode=false: git keeps the mode it had
        if want is None:
            if have is not None:
                wrong.append(f"{rel} is still in the commit")
            continue
        graded_blob = want[1]  # taken before `have != want`, past which mypy widens `want` to `have`'s type
        if have != want:
            wrong.append(f"{rel} is {have[1][:12] if have else 'absent'}, graded {graded_blob[:12]}")
            continue
        data = git.run(root, "cat-file", "blob", graded_blob, check=False).stdout
        again = git.run(root, "hash-object", "--no-filters", "--stdin", input=data).stdout.decode().strip()
        if again != graded_blob:
            wrong.append(f"{rel}: object {graded_blob[:12]} does not hold what its name says")
    return wrong


def _note_unlanded(ws: Workspace, job_id: str, number: int, reason: str) -> None:
    with ws.store.write() as conn:
        trail.append(conn, ws.state_dir, "job_unlanded", ACTOR, job_id, {"attempt": number, "reason": reason})


@contextlib.contextmanager
def _landing_lock(ws: Workspace, wait: float = 60.0):
    """One landing at a time in this repository on this machine, held from the commit until the
    trail records it (flock on <state>/landing.lock); False when it was not had within `wait`."""
    fd = os.open(os.path.join(ws.state_dir, "landing.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = True
                break
            except OSError:
                if time.monotonic() >= deadline:
                    held = False
                    break
                time.sleep(0.05)
        _LANDING.held = held
        try:
            yield held
        finally:
            _LANDING.held = None
    finally:
        os.close(fd)


_LANDING = threading.local()  # this thread is inside _landing_lock (it never waits for itself)


def _note_landed(ws: Workspace, job_id: str, sha: str | None) -> None:
    if sha:
        with ws.store.write() as conn:
            trail.append(conn, ws.state_dir, "job_landed", ACTOR, job_id, {"commit": sha})


def _note_commit(ws: Workspace, job_id: str, sha: str | None) -> None:
    if not sha:
        return
    with ws.store.write() as conn:
        row = rows.get(conn, job_id)
        if row is not None:
            row["commit"] = sha
            rows.put(conn, row, row["_root"], row["_depth"])
            trail.append(conn, ws.state_dir, "job_commit", ACTOR, job_id, {"commit": sha})


def _grade_root(ws: Workspace, job_id: str, notify, dog) -> JobOutcome | None:
    """Every child passed: the root's own check runs on the landed tree, and the root is
    recorded pass or fail. A root someone took is theirs to file and wait on."""
    orchestrator = Caller(None, None, ACTOR)
    with ws.store.read() as conn:
        root = rows.get(conn, job_id)
    if root is None or root["state"] in (PASS, FAIL, NO_RETURN):
        return None
    if root["state"] != DECLARED:
        notify(
            "root",
            {
                "job": job_id,
                "skipped": f"{job_id} is {root['state']} in {root.get('checkout_root')}; "
                f"its holder files and waits on it",
            },
        )
        return None
    outcome = JobOutcome(job_id, False)
    head = git.head(ws.root)
    if head is None:
        raise errors.ProctorError(
            f"could not grade {job_id}: proctor work needs a commit to start a worktree on (git commit first)"
        )
    path = make_worktree(ws, job_id, head, root.get("checkpoint") or "")[0]
    dog.tell(job=job_id, worktree=path, attempt=None)
    try:
        with Workspace(path, ws.warn) as there:
            take.exec_job(there, job_id, orchestrator)
            with there.store.read() as conn:
                children = rows.children(conn, job_id)
                beneath = rows.descendants(conn, job_id)
            summary = "proctor work: every step passed: " + ", ".join(
                f"{c['id']} ({(c.get('commit') or 'no commit')[:12]})" for c in children
            )
            jresult.file_result(
                there,
                job_id,
                {"schema_version": 2, "status": "done", "summary": summary, "descendants": beneath},
                orchestrator,
            )
            made = [
                runs.run_target(there, goal["check"]["target"], Caller(job_id, "flag", orchestrator.user), echo=None)
                for goal in goal_list(root)
                if goal["kind"] == "check"
            ]
            jresult.add_evidence(there, job_id, made, orchestrator)
            finished, graded = wait.wait(there, job_id, orchestrator)
        outcome.passed = finished["state"] == PASS
        failures = [f"{o.label}: {s}" for o in graded.failures() for s in o.subjects] if graded else []
        outcome.reason = (
            "its own check passed on the landed steps"
            if outcome.passed
            else "the landed steps fail the root: " + "; ".join(failures[:5])
        )
        notify("root", {"job": job_id, "passed": outcome.passed, "failures": failures})
        return outcome
    finally:
        _hand_back(ws, job_id, path, dog, "proctor work ended before the root's verdict")


def attempts_of(ws: Workspace, job_id: str) -> list[dict]:
    with ws.store.read() as conn:
        found = trail.events(conn, job=job_id, kind="worker_attempt")
    return [dict(e["data"] or {}, time=e["time"]) for e in found]
