"""Entering a job's path: one write into a live job's path, recorded on its entries."""

from __future__ import annotations

import json

from proctor.jobs import entries
from proctor.paths import find_checkout, repo_state_dir
from proctor.store import Store


def fork(proctor, *args, **kw):
    result = proctor("job", "fork", *args, **kw)
    assert result.code == 0, result.err
    return result


def enter(proctor, job: str, path: str, **kw):
    return proctor("job", "fork", "--stdin", stdin=json.dumps({"id": job, "enter": path}), **kw)


def rows(proctor) -> dict:
    return {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}


def test_entry_recorded_without_moving_updated(repo, proctor):
    fork(proctor, "j", "--write-paths", "src/a.py,src/b.py", "--check", "test")
    before = rows(proctor)["j"]["updated"]
    made = enter(proctor, "j", "src/a.py")
    assert made.code == 0, made.err
    row = rows(proctor)["j"]
    assert row["updated"] == before
    assert row["entries"][0]["path"] == "src/a.py" and row["entries"][0]["consumed"] is None
    assert "src/a.py  entered" in proctor("describe", "job", "j").out


def test_entry_refusals(repo, proctor):
    fork(proctor, "j", "--write-paths", "src/a.py,src/b.py", "--check", "test")
    outside = enter(proctor, "j", "src/c.py")
    assert outside.code == 1 and "PRC3053" in outside.err and "widening" in outside.err
    held = enter(proctor, "j", "src/a.py", env={"BAGGAGE": "proctor.lease=j"})
    assert held.code == 1 and "you hold it" in held.err
    fork(proctor, "k", "--write-paths", "k.py", "--check", "test")
    foreign = enter(proctor, "j", "src/a.py", env={"BAGGAGE": "proctor.lease=k"})
    assert foreign.code == 1 and "not forked beneath your job k" in foreign.err
    assert enter(proctor, "j", "src/a.py").code == 0
    second = enter(proctor, "j", "src/a.py")
    assert second.code == 1 and "open entry already" in second.err
    assert enter(proctor, "j", "src/b.py").code == 0
    third = enter(proctor, "j", "src/b.py")
    assert third.code == 1
    assert proctor("job", "exit", "j").code == 0
    ended = enter(proctor, "j", "src/a.py")
    assert ended.code == 1 and "ended" in ended.err
    extra = proctor("job", "fork", "--stdin", stdin=json.dumps({"id": "k", "enter": "k.py", "criteria": "x"}))
    assert extra.code == 2 and "only id and enter" in extra.err


def test_holder_enters_a_descendant(repo, proctor):
    fork(proctor, "p", "--write-paths", "lib/**", "--check", "test")
    fork(proctor, "p/c", "--parent", "p", "--write-paths", "lib/x.py", "--check", "test")
    assert enter(proctor, "p/c", "lib/x.py", env={"BAGGAGE": "proctor.lease=p"}).code == 0


def test_third_entry_refused_even_after_consumption(repo, proctor):
    fork(proctor, "j", "--write-paths", "a.py", "--check", "test")
    store = Store(repo_state_dir(find_checkout(repo)))
    for _ in range(2):
        assert enter(proctor, "j", "a.py").code == 0
        with store.write() as conn:
            assert entries.open_entry(conn, "j", "a.py") is not None
            assert entries.consume(conn, store.state_dir, "j", "a.py", "guard") is not None
            assert entries.open_entry(conn, "j", "a.py") is None
    store.close()
    third = enter(proctor, "j", "a.py")
    assert third.code == 1 and "2 entries" in third.err
    consumed = rows(proctor)["j"]["entries"]
    assert all(e["consumed"] and e["consumed_by"] == "guard" for e in consumed)
