"""A holder's terms: `proctor describe job <id>`, rendered from the row and nothing else.

The context a delegated agent receives comes from the row, not from an orchestrator's
recollection of it. Sections with nothing in them are dropped, which is how the gate cannot
leak into a holder's terms: nothing renders it. Two renders of one store are byte-identical:
no clock, no ages, stable order everywhere.
"""

from __future__ import annotations

from proctor import errors, jobrecord
from proctor.config import Config
from proctor import claims as jpaths
from proctor import declarations
from proctor.store import rows
from proctor.jobs.targets import gate_chain
from proctor.jobs.verify import grade, render_footprint
from proctor.jobs.model import check_job_id, goal_list
from proctor.workspace import Workspace


def describe_job(ws: Workspace, job_id: str) -> str:
    check_job_id(job_id)
    with ws.store.read() as conn:
        job = jobrecord.require(rows.get(conn, job_id), job_id)
        mine = rows.claims(job) + rows.claims(job, "read_paths")
        near = rows.live_claims_near(conn, [c.key for c in mine], job_id) if mine else {}
        family = set(rows.ancestors(conn, job_id)) | set(rows.descendants(conn, job_id))
        held_by_others = []
        same = declarations.Resolver(ws.root)
        for other_id in sorted(set(near) - family):
            for theirs in near[other_id]:
                kinds = {jpaths.pair_kind(theirs, m, same) for m in mine} - {None}
                if kinds:
                    apart = "; another declaration than this job's" if kinds == {"disjoint"} else ""
                    held_by_others.append(f"{theirs.spelling}  (held by {other_id}{apart})")
        refuse_gate(job, ws.config)
        graded = grade(conn, job, ws.root, ws.store)
    notes = declaration_notes(job, ws.root)
    goal_lines: list[str] = []
    for outcome in graded.outcomes:
        if outcome.kind != "goal":
            continue
        status = "met" if outcome.ok else "unmet"
        goal_lines.extend(f"{outcome.name}: {status}: {subject}" for subject in outcome.subjects)
    footprint = (
        render_footprint(graded.observed, job.get("entries") or ())[1:]
        if graded.observed is not None and graded.observed.footprint
        else []
    )
    return render(job, ws.config, held_by_others, goal_lines, notes, [line.strip() for line in footprint])


def declaration_notes(job: dict, fallback: str) -> dict[str, str]:
    """For each declaration claim among the write paths, what it names in the file as it is in
    the job's checkout: the declaration lines, or that it names none yet (the job may create it)."""
    import os

    from proctor.jobs import evidence

    claims = [(c, c.declaration) for c in rows.claims(job) if c.declaration is not None and not c.glob]
    if not claims:
        return {}
    resolver = declarations.Resolver(evidence.checkout_of(job, fallback))
    notes = {}
    for claim, declaration in claims:
        found = declarations.named(resolver.of(claim.path), declaration)
        if found:
            notes[claim.spelling] = "names " + "; ".join(
                f"line {d.line} {d.text!r} (lines {d.start}-{d.end})" for d in found
            )
        elif os.path.exists(os.path.join(resolver.reader.root, claim.path)):
            notes[claim.spelling] = f"names no declaration of {claim.path} yet (the job may create it)"
        else:
            notes[claim.spelling] = f"{claim.path} does not exist yet (the job may create it)"
    return notes


def refuse_gate(job: dict, cfg: Config) -> None:
    """No terms for a job whose check (or a check goal) is the gate or runs it."""
    job_id = job["id"]
    for goal in goal_list(job):
        if goal["kind"] == "check":
            chain = gate_chain(cfg, goal["check"]["target"])
            if chain:
                raise errors.Refused(
                    [
                        (
                            errors.CHECK_IS_GATE,
                            f"refused to describe {job_id}: its {'check' if goal['id'] == 'check' else 'goal ' + repr(goal['id'])} "
                            f"is the release gate ({chain}), and nobody may act on terms that run it; fork the "
                            f"job again with its own narrow target",
                        )
                    ]
                )


def render(
    job: dict,
    cfg: Config,
    held_by_others: list[str],
    graded_goals: list[str],
    notes: dict[str, str] | None = None,
    footprint: list[str] | None = None,
) -> str:
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
    notes = notes or {}
    sections.append(("Write paths", [f"{p}  ({notes[p]})" if p in notes else p for p in job.get("write_paths") or []]))
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
            f"check {goal['check']['target']}"
            if goal["kind"] == "check"
            else f"paths {', '.join(goal.get('paths', []))}"
            if goal["kind"] == "paths"
            else f"symbols {', '.join(goal.get('symbols', []))}"
        )
        deps = f" (after {', '.join(goal['depends_on'])})" if goal.get("depends_on") else ""
        goal_lines.append(f"{goal['id']}: {goal['kind']} {goal['expect']}: {subject}{deps}")
    sections.append(("Goals", goal_lines))
    sections.append(("Graded now", graded_goals))
    sections.append(("Footprint", footprint or []))
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
