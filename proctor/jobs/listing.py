"""`proctor ls jobs`: every job as a tree (parents above the jobs they forked), with its
state, age, stale and overdue marks, write_proof, its column on the board, and the overlaps
between live jobs that are not parent and child (a child works inside its parent's paths).

Overlaps are derived on the read and stored nowhere, so they cannot go out of date.
"""

from __future__ import annotations

from proctor.config import Config, column_of_job
from proctor import claims as jpaths
from proctor import declarations, jobrecord
from proctor.store import rows
from proctor.jobrecord import is_live
from proctor.timeutil import format_config_duration, format_duration, now, parse_iso
from proctor.workspace import Workspace


def list_jobs(ws: Workspace) -> dict:
    with ws.store.read() as conn:
        jobs = rows.all_jobs(conn)
    return build(jobs, ws.config, now(), ws.root)


def build(jobs: list[dict], cfg: Config, at: float, root: str | None = None) -> dict:
    stale_after = cfg["jobs.stale_after"]
    by_id = {j["id"]: j for j in jobs}
    children: dict[str | None, list[dict]] = {}
    for job in jobs:
        parent = job.get("parent") if job.get("parent") in by_id else None
        children.setdefault(parent, []).append(job)
    for siblings in children.values():
        siblings.sort(key=lambda j: (j["created"], j["id"]))

    claims = {j["id"]: rows.claims(j) for j in jobs if is_live(j["state"]) and j.get("write_paths")}
    # two declaration claims spelled apart may name one declaration (`def alpha`, `alpha`): the
    # file is read for such a pair only
    overlaps = [
        pair
        for pair in jpaths.find_overlaps(claims, declarations.Resolver(root) if root else None)
        if not _nested(by_id, *pair["jobs"])
    ]
    partners: dict[str, list[str]] = {}
    for pair in overlaps:
        a, b = pair["jobs"]
        partners.setdefault(a, []).append(b)
        partners.setdefault(b, []).append(a)

    ordered: list[dict] = []
    stack = [(j, 0) for j in reversed(children.get(None, []))]
    while stack:
        job, depth = stack.pop()
        row = _row(job, depth, at, stale_after, partners.get(job["id"], []))
        column = column_of_job(cfg, job)
        row["column"] = column[0] if column else None
        ordered.append(row)
        stack.extend((c, depth + 1) for c in reversed(children.get(job["id"], [])))
    return {"jobs": ordered, "overlaps": overlaps}


def _nested(by_id: dict[str, dict], a: str, b: str) -> bool:
    """Whether one of two jobs descends from the other: a child forked inside its parent's
    paths works part of its parent's job, which is no overlap."""
    return _descends(by_id, a, b) or _descends(by_id, b, a)


def _descends(by_id: dict[str, dict], job: str, ancestor: str) -> bool:
    seen = set()
    parent = (by_id.get(job) or {}).get("parent")
    while parent and parent not in seen:
        if parent == ancestor:
            return True
        seen.add(parent)
        parent = (by_id.get(parent) or {}).get("parent")
    return False


def _row(job: dict, depth: int, at: float, stale_after: float, partners: list[str]) -> dict:
    row = jobrecord.public(job)
    live = is_live(job["state"])
    age = at - parse_iso(job["updated"])
    row["depth"] = depth
    row["age_seconds"] = round(age, 3)
    # the server's own jobs are ended by the server itself: quiet is not possibly dead
    row["stale"] = bool(live and stale_after and age > stale_after and job.get("holder") != "server")
    row["overdue"] = live and jobrecord.overdue(job, at)
    row["overlaps_with"] = sorted(partners)
    notes = []
    if row["stale"]:
        notes.append(
            f"stale: not updated for {format_duration(age)} (jobs.stale_after = "
            f"{format_config_duration(stale_after)}); if nobody holds it, end it with "
            f"proctor job exit {job['id']}"
        )
    if row["overdue"]:
        notes.append(
            f"overdue: past its deadline {job['deadline']}; its writes are refused and its paths "
            f"block nobody; end it with proctor job exit {job['id']}"
        )
    row["notes"] = notes
    return row


def render_text(listing: dict) -> str:
    jobs = listing["jobs"]
    if not jobs:
        return "no jobs; declare one with proctor job fork <id> --criteria ... --write-paths ... --check TARGET\n"
    table = []
    for row in jobs:
        indent = "  " * row["depth"] + ("└ " if row["depth"] else "")
        marks = []
        if row["stale"]:
            marks.append("stale")
        if row["overdue"]:
            marks.append("overdue")
        if row["overlaps_with"]:
            marks.append("overlaps " + ",".join(row["overlaps_with"]))
        table.append(
            (
                indent + row["id"],
                row["state"],
                row["holder"],
                format_duration(row["age_seconds"]),
                row.get("write_proof") or "-",
                " ".join(marks),
            )
        )
    headers = ("JOB", "STATE", "HOLDER", "UPDATED", "WRITE_PROOF", "MARKS")
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for r in table:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    notes = [f"{row['id']}: {note}" for row in jobs for note in row["notes"]]
    if notes:
        lines.append("")
        lines.extend(notes)
    if listing["overlaps"]:
        lines.append("")
        lines.append("overlaps:")
        for pair in listing["overlaps"]:
            a, b = pair["jobs"]
            lines.append(
                f"  {a} [{', '.join(pair['paths'][a])}] and {b} [{', '.join(pair['paths'][b])}]: {pair['claims']}"
            )
    return "\n".join(lines) + "\n"
