"""A holder hands a child no more than it may read: a --read-only child that names no read or
write paths used to have an EMPTY read boundary, which the lease-read-boundary rule reads as
"no boundary at all", so its holder read src/ and docs/, which w1 (boundary plan/w1) may not.
A job that names nothing to read by now reads what its parent may (store/rows.read_boundary).
Found by an adversarial review."""

from __future__ import annotations


from proctor import api, claims, errors
from proctor.store import rows
from tests.guard.guard_lease import denied, job_row, judge, read_event, said, ws  # noqa: F401 (fixtures)
from tests.support import call_hook

CHILD = {"id": "w1/peek", "parent": "w1", "read_only": True}


def _within_w1(ws, child: dict) -> bool:
    allowed = rows.read_boundary(job_row(ws, "w1"), lambda j: job_row(ws, j))
    mine = rows.read_boundary(child, lambda j: job_row(ws, j))
    return bool(mine) and all(any(claims.within(c, a) for a in allowed) for c in mine)


def test_a_read_only_child_gets_no_wider_reads_than_its_holder(ws):  # noqa: F811
    # w1 itself may not read src/b.py (its boundary is plan/w1; untaken here, so the rule advises)
    baseline = call_hook(read_event(ws, "src/b.py"), "claude", None, ["--lease", "w1"], drop=("BAGGAGE",))
    assert "lease-read-boundary" in said(baseline), said(baseline)
    guard_passes = not denied(judge(ws, "job_put", dict(CHILD)))
    try:
        api.fork(dict(CHILD), lease="w1", cwd=ws)
    except errors.Refused:
        return  # the store refused: safe
    child = job_row(ws, "w1/peek")
    # the child's holder, taken in this checkout, reads what w1 may not
    api.exec_job("w1/peek", cwd=ws, lease="w1/peek")
    answer = call_hook(read_event(ws, "src/b.py"), "claude", None, ["--lease", "w1/peek"], drop=("BAGGAGE",))
    assert denied(answer, "lease-read-boundary"), (
        f"guard let the fork through: {guard_passes}; store accepted it; the child's read boundary is "
        f"{rows.read_boundary(child, lambda j: job_row(ws, j))!r}, and its holder's Read of src/b.py "
        f"was not denied: {said(answer)}"
    )
    assert _within_w1(ws, child)
