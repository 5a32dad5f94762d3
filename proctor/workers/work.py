"""`proctor work <job>`: run a job (or its children, in depends_on order) with agent CLIs.

For each job: take its lease here, render the worker's prompt from `proctor describe job`
(the terms, never a recollection), start the worker with BAGGAGE=proctor.lease=<id>, watch
and stop it (runner.py), run the job's check itself, and grade with the code `proctor job
wait` uses. A pass is recorded and committed; a failure tries again: gates failing uses an
attempt on the rung, while an idle, spend or provider stop moves up the ladder of workers
without using one. Every reply lands on the trail as a `worker_claim`.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from typing import Callable

from proctor import errors, runs, trail
from proctor.claims import covers
from proctor.config import Worker
from proctor.jobs import describe as jdescribe
from proctor.jobs import result as jresult
from proctor.jobs import take, wait
from proctor.jobs.lease import Caller, parse_baggage
from proctor.jobs.model import EXITED, PASS, goal_list, is_live
from proctor.jobs.verify import grade
from proctor.store import rows
from proctor.workers import commit as jcommit
from proctor.workers import runner
from proctor.workers.executors import module as executor_module
from proctor.workspace import Workspace

STATUS_WORDS = ("done", "blocked", "split")


@dataclass
class JobOutcome:
    id: str
    passed: bool
    attempts: list[dict] = field(default_factory=list)
    commit: str | None = None
    reason: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "passed": self.passed, "attempts": self.attempts, "commit": self.commit,
                "reason": self.reason}


def plan(ws: Workspace, job_id: str) -> list[dict]:
    """The jobs `work` runs: the job itself, or its live children in depends_on order."""
    with ws.store.read() as conn:
        job = rows.get(conn, job_id)
        if job is None:
            raise errors.ProctorError(f"no job {job_id}; proctor ls jobs lists them", errors.UNKNOWN_JOB)
        every_child = rows.where(conn, "parent = ?", (job_id,))
    children = [c for c in every_child if c["state"] != PASS]
    if every_child and not children:
        return []  # every child passed: nothing left to work
    if not children:
        if not is_live(job["state"]):
            raise errors.ProctorError(f"{job_id} has ended ({job['state']}); nothing to work", errors.NOT_LIVE)
        return [job]
    by_id = {c["id"]: c for c in children}
    ordered: list[dict] = []
    visiting: set[str] = set()

    def visit(child: dict) -> None:
        if child in ordered:
            return
        if child["id"] in visiting:
            raise errors.ProctorError(f"the children of {job_id} depend on each other in a cycle "
                                      f"(at {child['id']}); fix their depends_on", errors.BAD_RECORD)
        visiting.add(child["id"])
        for dep in child.get("depends_on") or ():
            if dep in by_id:
                visit(by_id[dep])
        ordered.append(child)

    for child in sorted(children, key=lambda c: (c["created"], c["id"])):
        visit(child)
    ended = [c["id"] for c in ordered if not is_live(c["state"])]
    if ended:
        raise errors.Refused([(errors.NOT_LIVE,
            f"{job_id} has children that ended without passing ({', '.join(ended)}); their dependents cannot "
            f"land on them; fork them again or end {job_id}")])
    return ordered


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
    ]
    if check:
        lines.append(f"- The job's check is `proctor run {check}`. proctor runs it itself when you finish; "
                     f"run it yourself first if you like. It prints the run's id (run-...) and its output_ref "
                     f"(sha256:...), the pair a result may cite; only a run on your finished tree counts.")
    validation = (f', "validation": [{{"run": "run-...", "command": "proctor run {check}", '
                  f'"output_ref": "sha256:..."}}]' if check else "")
    lines += [
        f"- When you are done, file your result: proctor job exit {job['id']} --stdin with "
        '{"schema_version": 2, "changed_paths": [...]' + validation
        + ', "status": "done" | "blocked" | "split", "summary": "..."}'
        " (proctor job exit --schema prints what it must satisfy).",
        "- Then end with a short reply saying what you did. Your account is a claim: proctor grades the diff and "
        "the recorded runs.",
    ]
    return "\n".join(lines) + "\n"


def worker_env(job_id: str, nonce: str | None = None, module=None) -> dict:
    """The worker's environment: this one, its lease in BAGGAGE, its job's secret, and what its
    executor module adds (`ENV`, e.g. gemini's workspace trust)."""
    env = dict(os.environ)
    env.update(getattr(module, "ENV", {}))
    # The worker runs `proctor` (its check, its result) and its host runs `proctor hook`: when
    # no proctor is on PATH, the one running this is put there.
    own = os.path.join(os.path.dirname(sys.executable), "proctor")
    if os.access(own, os.X_OK) and shutil.which("proctor", path=env.get("PATH") or os.defpath) is None:
        env["PATH"] = os.pathsep.join([os.path.dirname(own)] + ([env["PATH"]] if env.get("PATH") else []))
    if nonce:
        env["PROCTOR_NONCE"] = nonce  # the job's secret: with it the agent manages its own monitors
    members = parse_baggage(env.get("BAGGAGE", ""))
    members.pop("proctor.lease", None)
    parts = [f"proctor.lease={job_id}"] + [f"{k}={v}" for k, v in members.items()]
    env["BAGGAGE"] = ",".join(parts)
    return env


def status_of(job: dict | None, reply: str | None) -> str:
    result = (job or {}).get("result") or {}
    if result.get("status") in STATUS_WORDS:
        return result["status"]
    match = re.search(r"\bstatus\W{0,3}(done|blocked|split)\b", reply or "", re.I)
    if match:
        return match.group(1).lower()
    tail = (reply or "").strip().splitlines()[-1:] if reply else []
    if tail and tail[0].strip().upper() in ("DONE", "BLOCKED", "SPLIT"):
        return tail[0].strip().lower()
    return "unknown"


def work(ws: Workspace, job_id: str, worker_name: str | None = None,
         on_event: Callable[[str, dict], None] | None = None) -> list[JobOutcome]:
    cfg = ws.config
    if worker_name is not None and worker_name not in cfg.workers:
        known = ", ".join(cfg.workers) or "none defined"
        raise errors.ProctorError(f"no worker {worker_name!r} (workers: {known}); define [workers.{worker_name}] "
                                  f"with an executor in proctor.toml")
    rungs = [cfg.workers[worker_name]] if worker_name else [cfg.workers[n] for n in cfg.ladder]
    if not rungs:
        raise errors.ProctorError("no workers are defined; add [workers.NAME] with executor = \"claude\" (or "
                                  "opencode, codex, command) to proctor.toml")
    outcomes = []
    for job in plan(ws, job_id):
        outcome = _run_job(ws, job, rungs, on_event or (lambda kind, data: None))
        outcomes.append(outcome)
        if not outcome.passed:
            break
    return outcomes


def _run_job(ws: Workspace, job: dict, rungs: list[Worker], notify) -> JobOutcome:
    orchestrator = Caller(None, None, "proctor-work")
    job_id = job["id"]
    outcome = JobOutcome(job_id, False)
    try:
        taken = take.exec_job(ws, job_id, orchestrator)
    except errors.Refused as exc:
        raise errors.ProctorError(f"could not start {job_id}: " + "; ".join(exc.lines()), exc.code) from None
    nonce = taken.get("_nonce")
    _set_worker_pid(ws, job_id, os.getpid())
    try:
        return _attempts(ws, job, rungs, notify, orchestrator, outcome, nonce)
    finally:
        _set_worker_pid(ws, job_id, None)


def _set_worker_pid(ws: Workspace, job_id: str, pid: int | None) -> None:
    with ws.store.write() as conn:
        row = rows.get(conn, job_id)
        if row is not None:
            row["worker_pid"] = pid
            rows.put(conn, row, row["_root"], row["_depth"])


def _attempts(ws, job, rungs, notify, orchestrator, outcome, nonce) -> JobOutcome:
    cfg = ws.config
    job_id = job["id"]
    prompt = prompt_for(ws, job)
    started_any = False
    number = 0
    last_failures: list[str] = []
    last_reply, last_status = None, "unknown"
    for rung_index, worker in enumerate(rungs):
        used = 0
        while used < cfg.attempts:
            number += 1
            module = executor_module(worker.executor)
            argv = module.argv(worker, prompt, lease=job["id"])
            if shutil.which(argv[0]) is None and not os.path.exists(argv[0]):
                reason = f"could not start: {argv[0]} is not on PATH"
                notify("skip", {"job": job_id, "worker": worker.name, "reason": reason})
                outcome.attempts.append({"number": number, "worker": worker.name, "outcome": "aborted",
                                         "reason": reason, "counts": False})
                break  # this rung cannot run at all: up the ladder
            started_any = True
            limits = runner.Limits(idle=cfg.idle_limit_seconds, grace=cfg["jobs.grace_seconds"],
                                   wall=worker.wall_minutes * 60 if worker.wall_minutes else None,
                                   spend=worker.max_spend_usd)
            notify("start", {"job": job_id, "worker": worker.name, "executor": worker.executor, "attempt": number,
                             "rung": rung_index + 1, "rungs": len(rungs), "of": cfg.attempts})
            attempt = runner.run_attempt(
                argv, module.Parser(), limits, ws.root, worker_env(job_id, nonce, module),
                stdin_text=prompt if module.PROMPT_ON_STDIN else None, adopt_orphans=True,
                on_event=lambda kind, a: notify(kind, {"job": job_id, "worker": worker.name, "attempt": number,
                                                        "lines": a.lines, "last_line": a.last_line, "cost": a.cost}))
            passed, gates, failures, graded, status = _gates(ws, job_id, attempt, orchestrator)
            record = {"number": number, "worker": worker.name, "executor": worker.executor, **attempt.to_json(),
                      "status": status, "passed": passed, "failures": failures}
            record.pop("reply", None)
            outcome.attempts.append(record)
            _ledger(ws, job_id, worker, number, attempt, status, passed)
            notify("attempt", {"job": job_id, **record})
            if passed:
                with ws.store.read() as conn:
                    current = rows.get(conn, job_id)
                try:
                    # commit first: a job is recorded pass only once what passed is committed
                    outcome.commit = _commit(ws, current, graded, gates, attempt, status)
                except errors.ProctorError:
                    take.reopen(ws, job_id, orchestrator)  # a rerun can pick it up again
                    raise
                finished = wait.wait(ws, job_id, orchestrator)[0]
                outcome.passed = finished["state"] == PASS
                if outcome.passed:
                    _note_commit(ws, job_id, outcome.commit)
                    outcome.reason = "passed its gates"
                    return outcome
            last_failures, last_reply, last_status = failures, attempt.reply, status
            take.reopen(ws, job_id, orchestrator)  # the next attempt starts from running
            if attempt.counts:
                used += 1  # the gates failed this worker: one attempt of its rung used
            else:
                break  # an idle, spend or provider stop: up the ladder without using an attempt
    if not started_any:
        raise errors.ProctorError(
            f"could not start any worker for {job_id}: " + "; ".join(a["reason"] for a in outcome.attempts))
    # Out of attempts and rungs: the last attempt's account is filed and graded as the verdict.
    _ensure_filed(ws, job_id, orchestrator, last_reply, last_status)
    finished, _ = wait.wait(ws, job_id, orchestrator)
    outcome.reason = "out of attempts and rungs: " + ("; ".join(last_failures[:5]) or finished["state"])
    return outcome


def _ensure_filed(ws: Workspace, job_id: str, caller: Caller, reply: str | None, status: str) -> dict:
    with ws.store.read() as conn:
        job = rows.get(conn, job_id)
    if job is not None and job["state"] == EXITED:
        return job
    summary = (reply or "")[:4000]
    return jresult.file_result(ws, job_id, {"schema_version": 2, "status": status if status in STATUS_WORDS else None,
                                            "summary": summary}, caller)


def _gates(ws: Workspace, job_id: str, attempt: runner.Attempt, caller: Caller):
    with ws.store.read() as conn:
        job = rows.get(conn, job_id)
    status = status_of(job, attempt.reply)
    job = _ensure_filed(ws, job_id, caller, attempt.reply, status)
    status = status_of(job, attempt.reply)
    made = [runs.run_target(ws, goal["check"]["target"], Caller(job_id, "flag", caller.user), echo=None)
            for goal in goal_list(job) if goal["kind"] == "check"]
    jresult.add_evidence(ws, job_id, made, caller)
    with ws.store.read() as conn:
        job = rows.get(conn, job_id)
        graded = grade(conn, job, ws.root, ws.state_dir)
    gates = [("check " + g["check"]["target"]) if g["kind"] == "check" else f"goal {g['id']}" for g in goal_list(job)]
    if graded.observed is not None:
        gates.append("diff within the write paths")
    failures = [f"{o.label}: {s}" for o in graded.failures() for s in o.subjects]
    return graded.passed, gates, failures, graded, status


def _ledger(ws: Workspace, job_id: str, worker: Worker, number: int, attempt: runner.Attempt, status: str,
            passed: bool) -> None:
    with ws.store.write() as conn:
        data = {"number": number, "worker": worker.name, "executor": worker.executor, **attempt.to_json(),
                "status": status, "passed": passed}
        data.pop("reply", None)
        trail.append(conn, ws.state_dir, "worker_attempt", f"worker:{worker.name}", job_id, data)
        trail.append(conn, ws.state_dir, "worker_claim", f"worker:{worker.name}", job_id, {
            "attempt": number, "status": status, "aborted": attempt.outcome == "aborted",
            "idle_stopped": attempt.stop == "idle", "reply_kind": attempt.reply_kind,
        }, payload=(attempt.reply or "").encode("utf-8", "replace"))


def _commit(ws: Workspace, job: dict, graded, gates: list[str], attempt: runner.Attempt, status: str) -> str | None:
    if job.get("read_only") or graded.observed is None:
        return None
    mine = rows.claims(job)
    denies = rows.claims(job, "deny_paths")
    paths = [p for p in graded.observed.changed
             if any(covers(c, p) for c in mine) and not any(covers(d, p) for d in denies)]
    # only what is not committed yet (an earlier step may have committed the same path)
    from proctor.vcs import git as vgit

    if paths:
        pending = vgit.run(ws.root, "status", "--porcelain", "-z", "--untracked-files=all", "--", *paths).stdout
        dirty = {entry[3:].decode("utf-8", "surrogateescape") for entry in pending.split(b"\0") if len(entry) > 3}
        paths = [p for p in paths if p in dirty]
    if not paths:
        return None
    summary = ((job.get("result") or {}).get("summary")) or attempt.reply
    kind = "step" if job.get("parent") else "job"
    text = jcommit.message(job, kind, gates, summary, status, ws.config["jobs.commit_body"])
    return jcommit.commit_paths(ws.root, paths, text)


def _note_commit(ws: Workspace, job_id: str, sha: str | None) -> None:
    if not sha:
        return
    with ws.store.write() as conn:
        row = rows.get(conn, job_id)
        if row is not None:
            row["commit"] = sha
            rows.put(conn, row, row["_root"], row["_depth"])
            trail.append(conn, ws.state_dir, "job_commit", "proctor-work", job_id, {"commit": sha})


def attempts_of(ws: Workspace, job_id: str) -> list[dict]:
    with ws.store.read() as conn:
        found = trail.events(conn, job=job_id, kind="worker_attempt")
    return [dict(e["data"] or {}, time=e["time"]) for e in found]
