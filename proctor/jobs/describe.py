"""A holder's terms: `proctor describe job <id>`, rendered from the row and nothing else.

The context a delegated agent receives comes from the row, not from an orchestrator's
recollection of it. Sections with nothing in them are dropped, which is how the gate cannot
leak into a holder's terms: nothing renders it. Two renders of one store are byte-identical:
no clock, no ages, stable order everywhere.
"""

from __future__ import annotations

from proctor import errors
from proctor.config import Config
from proctor import claims as jpaths
from proctor.store import rows
from proctor.jobs.targets import gate_chain
from proctor.jobs.verify import grade
from proctor.jobs.model import check_job_id, goal_list
from proctor.workspace import Workspace


def describe_job(ws: Workspace, job_id: str) -> str:
    check_job_id(job_id)
    with ws.store.read() as conn:
        job = rows.get(conn, job_id)
        if job is None:
            raise errors.ProctorError(
                f"no job {job_id}; proctor ls jobs lists the jobs of this repository", errors.UNKNOWN_JOB)
        mine = rows.claims(job) + rows.claims(job, "read_paths")
        near = rows.live_claims_near(conn, [c.key for c in mine], job_id) if mine else {}
        family = set(rows.ancestors(conn, job_id)) | set(rows.descendants(conn, job_id))
        held_by_others = []
        for other_id in sorted(set(near) - family):
            for theirs in near[other_id]:
                if any(jpaths.pair_kind(theirs, m) for m in mine):
                    held_by_others.append(f"{theirs.spelling}  (held by {other_id})")
        refuse_gate(job, ws.config)
        graded = grade(conn, job, ws.root, ws.store)
    goal_lines = []
    for outcome in graded.outcomes:
        if outcome.kind != "goal":
            continue
        status = "met" if outcome.ok else "unmet"
        goal_lines.extend(f"{outcome.name}: {status}: {subject}" for subject in outcome.subjects)
    return render(job, ws.config, held_by_others, goal_lines)


def refuse_gate(job: dict, cfg: Config) -> None:
    """No terms for a job whose check (or a check goal) is the gate or runs it."""
    job_id = job["id"]
    for goal in goal_list(job):
        if goal["kind"] == "check":
            chain = gate_chain(cfg, goal["check"]["target"])
            if chain:
                raise errors.Refused([(errors.CHECK_IS_GATE,
                    f"refused to describe {job_id}: its {'check' if goal['id'] == 'check' else 'goal ' + repr(goal['id'])} "
                    f"is the release gate ({chain}), and nobody may act on terms that run it; fork the "
                    f"job again with its own narrow target")])


def render(job: dict, cfg: Config, held_by_others: list[str], graded_goals: list[str]) -> str:
    job_id = job["id"]
    sections: list[tuple[str, list[str]]] = []
    header = [f"id: {job_id}"]
    if job.get("parent"):
        header.append(f"parent: {job['parent']}")
    if job.get("checkpoint"):
        header.append(f"checkpoint: {job['checkpoint']}")
    if job.get("read_only"):
        header.append("read-only: this job writes nothing")
    if job.get("model"):
        header.append(f"model: {job['model']}")
    if job.get("deadline"):
        header.append(f"deadline: {job['deadline']}")
    sections.append(("Job", header))
    sections.append(("Criteria", (job.get("criteria") or "").splitlines()))
    sections.append(("Write paths", list(job.get("write_paths") or [])))
    sections.append(("Deny paths", list(job.get("deny_paths") or [])))
    sections.append(("Read paths", list(job.get("read_paths") or [])))
    sections.append(("Held by other jobs", held_by_others))
    check_lines = []
    if job.get("check"):
        target = job["check"]["target"]
        spec = cfg.targets.get(target)
        check_lines.append(f"proctor run {target}" + (f"    # {spec.command}" if spec else ""))
    sections.append(("Check", check_lines))
    goal_lines = []
    for goal in job.get("goals") or ():
        subject = (
            f"check {goal['check']['target']}" if goal["kind"] == "check"
            else f"paths {', '.join(goal.get('paths', []))}" if goal["kind"] == "paths"
            else f"symbols {', '.join(goal.get('symbols', []))}"
        )
        deps = f" (after {', '.join(goal['depends_on'])})" if goal.get("depends_on") else ""
        goal_lines.append(f"{goal['id']}: {goal['kind']} {goal['expect']}: {subject}{deps}")
    sections.append(("Goals", goal_lines))
    sections.append(("Graded now", graded_goals))
    sections.append(("Depends on", list(job.get("depends_on") or [])))
    entries = [
        f"{e['path']}  entered {e['entered']} by {e['by']}"
        + (f", consumed {e['consumed']}" if e.get("consumed") else ", open: re-read the file before writing it")
        for e in job.get("entries") or ()
    ]
    sections.append(("Entries", entries))
    releases = [f"{r['path']}  {r['digest']}" for r in job.get("releases") or ()]
    sections.append(("Released paths", releases))
    out = []
    for title, lines in sections:
        if not lines:
            continue
        out.append(f"{title}:")
        out.extend(f"  {line}" if line else "" for line in lines)
        out.append("")
    return "\n".join(out)
