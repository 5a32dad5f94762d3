"""One author per job, judged once: the guard (at the call, the lease-store rule) and the store
(at the fork) read the same check, jobrecord.one_author, so for every record a leased session
may put, the two agree. Each case is put both ways in the same repository: through the hook as
proctor's MCP job_put, and through the store as a fork under the lease. The session holds w1
(plan/w1/**, with the untaken child w1/sub beneath it); `other` holds src/**."""

from __future__ import annotations

import pytest

from proctor import api, errors
from tests.guard.guard_lease import denied, said, take_here, ws  # noqa: F401 (fixtures)
from tests.guard.test_mcp_guard import judge

CASES = [
    # the holder's own row
    ({"id": "w1", "write_paths": ["plan/w1/a.py"]}, True),
    ({"id": "w1", "write_paths": ["plan/w1/**"], "check": "test"}, True),  # the check it holds, unchanged
    ({"id": "w1", "write_paths": ["plan/w1/**", "src/b.py"]}, False),
    ({"id": "w1", "criteria": "easier now"}, False),
    ({"id": "w1", "write_paths": []}, False),
    # children
    ({"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "check": "test"}, True),
    ({"id": "w1/sub", "parent": "w1", "write_paths": ["plan/w1/sub/x.py"], "check": "test"}, True),  # untaken
    ({"id": "other", "parent": "w1", "write_paths": ["plan/w1/x.py"], "check": "test"}, False),
    ({"id": "w1/c", "parent": "w1", "write_paths": ["src/b.py"], "check": "test"}, False),
    ({"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/../../src/b.py"], "check": "test"}, False),
    ({"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "check": "test", "depends_on": ["other"]}, False),
    ({"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "check": "test", "depends_on": ["w1/sub"]}, True),
    ({"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "check": "test", "read_paths": ["src"]}, False),
    ({"id": "w1/c", "parent": "w1", "write_paths": ["plan/w1/c.py"], "check": "test", "read_paths": ["plan/w1"]}, True),
    ({"id": "fresh", "write_paths": ["plan/w1/x.py"], "check": "test"}, False),
]


def store_allows(root: str, record: dict) -> tuple[bool, str]:
    try:
        api.fork(dict(record), lease="w1", cwd=root)
    except errors.Refused as exc:
        return False, str(exc)
    return True, ""


@pytest.mark.parametrize("record, allowed", CASES, ids=[str(i) for i in range(len(CASES))])
def test_the_guard_and_the_store_agree(ws, record, allowed):  # noqa: F811
    take_here(ws)  # the checkout bound to w1: a proctor run here acts as its holder
    answer = judge(ws, "job_put", record)
    guard = not denied(answer)
    store, why = store_allows(ws, record)
    assert guard == allowed, said(answer)
    assert store == allowed, why


def test_a_child_someone_has_taken_is_not_re_declared_by_either(ws):  # noqa: F811
    api.exec_job("w1/sub", cwd=ws, lease="w1/sub")
    record = {"id": "w1/sub", "parent": "w1", "write_paths": ["plan/w1/sub/x.py"], "check": "test"}
    answer = judge(ws, "job_put", record)
    assert denied(answer, "lease-store"), said(answer)
    assert "re-declares only a child nobody has taken" in said(answer)
    store, why = store_allows(ws, record)
    assert not store and "re-declares only a child nobody has taken" in why
