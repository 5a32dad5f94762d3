"""proctor ls jobs: the tree, marks, write_proof, and overlaps found without comparing all pairs."""

from __future__ import annotations

import json
import time


def fork(proctor, *args, **kw):
    result = proctor("job", "fork", *args, **kw)
    assert result.code == 0, result.err
    return result


def test_empty(repo, proctor):
    listed = proctor("ls", "jobs", "-o", "json")
    assert listed.json() == {"jobs": [], "overlaps": []}
    assert "no jobs" in proctor("ls", "jobs").out


def test_tree_parents_above_children(repo, proctor):
    fork(proctor, "b", "--check", "test")
    fork(proctor, "a", "--check", "test")
    fork(proctor, "a/2", "--parent", "a", "--write-paths", "x.py", "--check", "test")
    fork(proctor, "b/1", "--parent", "b", "--write-paths", "y.py", "--check", "test")
    fork(proctor, "a/1", "--parent", "a", "--write-paths", "z.py", "--check", "test")
    fork(proctor, "a/2/x", "--parent", "a/2", "--write-paths", "x.py", "--check", "test")
    rows = proctor("ls", "jobs", "-o", "json").json()["jobs"]
    order = [r["id"] for r in rows]
    assert order == ["b", "b/1", "a", "a/2", "a/2/x", "a/1"]
    assert [r["depth"] for r in rows] == [0, 1, 0, 1, 2, 1]
    assert proctor("ls", "jobs", "-o", "name").out.split() == order
    lines = proctor("ls", "jobs").out.splitlines()[1:7]
    assert [
        line.split("  ")[0] if not line.startswith(" ") else line.split("declared")[0].rstrip() for line in lines
    ] == ["b", "  └ b/1", "a", "  └ a/2", "    └ a/2/x", "  └ a/1"]


def test_overlaps_by_containment_and_globs(repo, proctor):
    fork(proctor, "dir", "--write-paths", "internal/job", "--check", "test")  # not existing: allowed
    fork(proctor, "file", "--write-paths", "internal/job/store.go", "--check", "test")
    fork(proctor, "glob", "--write-paths", "internal/**/*.go", "--check", "test")
    fork(proctor, "apart", "--write-paths", "web/app.js", "--check", "test")
    fork(proctor, "decl-a", "--write-paths", "run.go#executeStages", "--check", "test")
    fork(proctor, "decl-b", "--write-paths", "run.go#parse", "--check", "test")
    fork(proctor, "decl-c", "--write-paths", "run.go#parse", "--check", "test")
    fork(proctor, "done", "--write-paths", "web/app.js", "--check", "test")
    assert proctor("job", "exit", "done").code == 0
    listed = proctor("ls", "jobs", "-o", "json").json()
    pairs = {tuple(o["jobs"]): o for o in listed["overlaps"]}
    assert pairs[("dir", "file")]["paths"] == {"dir": ["internal/job"], "file": ["internal/job/store.go"]}
    assert pairs[("dir", "file")]["claims"] == "overlapping"
    assert ("dir", "glob") in pairs and ("file", "glob") in pairs
    assert pairs[("decl-a", "decl-b")]["claims"] == "disjoint"
    assert pairs[("decl-b", "decl-c")]["claims"] == "overlapping"
    assert not any("apart" in p or "done" in p for p in pairs), "terminal and disjoint jobs in no pair"
    rows = {r["id"]: r for r in listed["jobs"]}
    assert rows["file"]["overlaps_with"] == ["dir", "glob"]
    text = proctor("ls", "jobs").out
    assert "overlaps:" in text and "decl-a [run.go#executeStages] and decl-b [run.go#parse]: disjoint" in text


def test_root_glob_overlaps_everything(repo, proctor):
    fork(proctor, "all", "--write-paths", "**/*.py", "--check", "test")
    fork(proctor, "one", "--write-paths", "deep/down/x.go", "--check", "test")
    overlaps = proctor("ls", "jobs", "-o", "json").json()["overlaps"]
    assert [o["jobs"] for o in overlaps] == [["all", "one"]]


def test_marks_and_columns(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    fork(proctor, "--stdin", stdin=json.dumps({"id": "quick", "check": "test", "timeout": 0.2}))
    fork(proctor, "slow", "--check", "test", "--timeout", "2h")
    time.sleep(0.3)
    rows = {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}
    assert rows["quick"]["overdue"] is True and rows["slow"]["overdue"] is False
    assert any("proctor job exit quick" in n for n in rows["quick"]["notes"])
    assert rows["quick"]["age_seconds"] >= 0.3
    assert rows["quick"]["holder"] == "session"
    text = proctor("ls", "jobs").out
    assert "overdue" in text and "HOLDER" in text and "WRITE_PROOF" in text


def test_many_jobs_overlaps_are_exact(repo, proctor):
    """A brute-force comparison agrees with the indexed one on a few hundred jobs."""
    from proctor import claims as jpaths
    import random

    rng = random.Random(7)
    dirs = ["a", "a/b", "a/b/c", "d", "d/e", "f"]
    claims = {}
    for i in range(300):
        d = rng.choice(dirs)
        kind = rng.random()
        if kind < 0.6:
            spelling = f"{d}/f{rng.randrange(40)}.py"
        elif kind < 0.8:
            spelling = f"{d}/**"
        else:
            spelling = f"{d}/m.go#fn{rng.randrange(3)}"
        path, decl, _ = jpaths.split_entry(spelling)
        claims[f"j{i}"] = [jpaths.Claim(path, decl)]
    fast = {tuple(p["jobs"]): p["claims"] for p in jpaths.find_overlaps(claims)}
    slow = {}
    ids = sorted(claims)
    for x in range(len(ids)):
        for y in range(x + 1, len(ids)):
            kinds = {jpaths.pair_kind(a, b) for a in claims[ids[x]] for b in claims[ids[y]]} - {None}
            if kinds:
                slow[(ids[x], ids[y])] = "overlapping" if "overlapping" in kinds else "disjoint"
    assert fast == slow and len(slow) > 100
