"""Jobs proctor ends itself, on every read: a dead ancestor, a vanished checkout, nobody took it."""

from __future__ import annotations

import json
import os
import shutil
import time

from tests.support import git


def fork(proctor, *args, **kw):
    result = proctor("job", "fork", *args, **kw)
    assert result.code == 0, result.err
    return result


def states(proctor) -> dict:
    return {r["id"]: (r["state"], r["end_reason"]) for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}


def test_tree_dies_with_its_root(repo, proctor):
    fork(proctor, "r", "--check", "test")
    fork(proctor, "r/a", "--parent", "r", "--write-paths", "a.py", "--check", "test")
    fork(proctor, "r/a/b", "--parent", "r/a", "--write-paths", "a.py", "--check", "test")
    fork(proctor, "other", "--check", "test")
    assert proctor("job", "exit", "r").code == 0
    listed = proctor("ls", "jobs")
    assert "ended r/a: its parent r ended in no_return" in listed.err
    assert "ended r/a/b: its ancestor r ended in no_return" in listed.err
    now = states(proctor)
    assert now["r/a"][0] == now["r/a/b"][0] == "no_return"
    assert now["other"][0] == "declared"
    assert "ended" not in proctor("ls", "jobs").err, "each job is ended once"


def test_parent_recorded_pass_ends_children(repo, proctor):
    fork(proctor, "r", "--check", "test")
    fork(proctor, "r/a", "--parent", "r", "--write-paths", "a.py", "--check", "test")
    fork(proctor, "--stdin", stdin=json.dumps({"id": "r", "check": "test", "state": "pass"}))
    assert states(proctor)["r/a"] == ("no_return", "its parent r ended in pass")


def test_checkout_gone(repo, proctor, tmp_path):
    wt = str(tmp_path / "w")
    git(repo, "worktree", "add", "-q", "-b", "w", wt)
    fork(proctor, "j", "--write-paths", "a.py", "--check", "test")
    fork(proctor, "k", "--write-paths", "b.py", "--check", "test")
    assert proctor("job", "exec", "j", cwd=wt).code == 0
    wt2 = str(tmp_path / "w2")
    git(repo, "worktree", "add", "-q", "-b", "w2", wt2)
    assert proctor("job", "exec", "k", cwd=wt2).code == 0
    fork(proctor, "--stdin", stdin=json.dumps({"id": "k", "check": "test", "write_paths": ["b.py"], "state": "exited"}))
    shutil.rmtree(wt)
    shutil.rmtree(wt2)
    listed = proctor("ls", "jobs")
    assert f"ended j: taken in {os.path.realpath(wt)}, which no longer exists" in listed.err
    now = states(proctor)
    assert now["j"][0] == "no_return"
    assert now["k"][0] == "exited", "an exited job is spared"


def test_undecidable_checkout_stays_live(repo, proctor, tmp_path, monkeypatch):
    wt = str(tmp_path / "w")
    git(repo, "worktree", "add", "-q", "-b", "w", wt)
    fork(proctor, "j", "--write-paths", "a.py", "--check", "test")
    assert proctor("job", "exec", "j", cwd=wt).code == 0
    real_stat = os.stat

    def unreadable_mount(path, *args, **kwargs):
        if str(path) == os.path.realpath(wt):
            raise PermissionError(13, "Permission denied", path)
        return real_stat(path, *args, **kwargs)

    from proctor.store import unheld

    with monkeypatch.context() as patched:
        patched.setattr(unheld.os, "stat", unreadable_mount)
        assert proctor("ls", "jobs").err == ""
    assert states(proctor)["j"][0] == "running"


def test_nobody_took_it(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[jobs]\nstale_after = '1s'\n[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    fork(proctor, "untaken", "--write-paths", "a.py", "--check", "test")
    fork(proctor, "taken", "--write-paths", "b.py", "--check", "test")
    fork(proctor, "root", "--check", "test")
    fork(proctor, "root/kid", "--parent", "root", "--write-paths", "c.py", "--check", "test")
    wt = str(tmp_path / "w")
    git(root, "worktree", "add", "-q", "-b", "w", wt)
    assert proctor("job", "exec", "taken", cwd=wt).code == 0
    wt2 = str(tmp_path / "w2")
    git(root, "worktree", "add", "-q", "-b", "w2", wt2)
    assert proctor("job", "exec", "root/kid", cwd=wt2).code == 0
    time.sleep(1.3)
    listed = proctor("ls", "jobs", "-o", "json")
    assert "ended untaken: declared" in listed.err and "never taken (jobs.stale_after = 1s)" in listed.err
    rows = {r["id"]: r for r in listed.json()["jobs"]}
    assert rows["untaken"]["state"] == "no_return"
    assert rows["root"]["state"] == "declared", "a root outlives the children still working"
    assert rows["taken"]["state"] == "running" and rows["taken"]["stale"] is True
    assert any("proctor job exit taken" in n for n in rows["taken"]["notes"])
    assert "proctor job exit taken" in proctor("ls", "jobs").out


def test_stale_after_zero_never_ends(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[jobs]\nstale_after = 0\n[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    fork(proctor, "j", "--write-paths", "a.py", "--check", "test")
    time.sleep(0.05)
    listed = proctor("ls", "jobs", "-o", "json")
    assert listed.err == "" and listed.json()["jobs"][0]["stale"] is False


def test_ending_moves_updated_and_is_on_the_trail(repo, proctor):
    fork(proctor, "r", "--check", "test")
    fork(proctor, "r/a", "--parent", "r", "--write-paths", "a.py", "--check", "test")
    before = {r["id"]: r["updated"] for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}
    time.sleep(0.01)
    assert proctor("job", "exit", "r").code == 0
    after = {r["id"]: r["updated"] for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}
    assert after["r/a"] > before["r/a"]
    from proctor import trail
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(repo)))
    with store.read() as conn:
        ended = trail.events(conn, job="r/a", kind="job_ended")
    store.close()
    assert ended and ended[0]["actor"] == "proctor" and ended[0]["data"]["state"] == "no_return"


def test_fork_and_describe_also_reap(repo, proctor):
    fork(proctor, "r", "--check", "test")
    fork(proctor, "r/a", "--parent", "r", "--write-paths", "a.py", "--check", "test")
    assert proctor("job", "exit", "r").code == 0
    described = proctor("describe", "job", "r/a")
    assert "ended r/a: its parent r ended in no_return" in described.err


def test_ending_reaches_a_fixed_point_in_one_read(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[jobs]\nstale_after = '1s'\n[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    fork(proctor, "root", "--check", "test")
    fork(proctor, "root/a", "--parent", "root", "--write-paths", "a.py", "--check", "test")
    fork(proctor, "root/a/b", "--parent", "root/a", "--write-paths", "a.py", "--check", "test")
    wt = str(tmp_path / "w")
    git(root, "worktree", "add", "-q", "-b", "w", wt)
    assert proctor("job", "exec", "root/a/b", cwd=wt).code == 0
    time.sleep(1.2)
    assert "ended" not in proctor("ls", "jobs").err, "root and a are kept alive by b"
    shutil.rmtree(wt)
    listed = proctor("ls", "jobs", "-o", "json")
    assert {r["id"]: r["state"] for r in listed.json()["jobs"]} == {
        "root": "no_return",
        "root/a": "no_return",
        "root/a/b": "no_return",
    }
    assert listed.err.count("ended ") == 3
