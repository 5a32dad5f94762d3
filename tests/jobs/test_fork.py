"""proctor job fork: declaring work, every refusal the spec names, and the one-author rules."""

from __future__ import annotations

import json
import os
import socket

import jsonschema
import pytest

from tests.support import git


def fork(proctor, *args, **kw):
    return proctor("job", "fork", *args, **kw)


def codes(result) -> list[str]:
    return [line.split(":", 1)[0] for line in result.err.splitlines() if line.startswith("PRC")]


def jobs_by_id(proctor) -> dict:
    return {row["id"]: row for row in proctor("ls", "jobs", "-o", "json").json()["jobs"]}


def test_fork_records_the_row(repo, proctor):
    head = git(repo, "rev-parse", "HEAD").strip()
    result = fork(
        proctor,
        "api/migrate",
        "--criteria",
        "move the store",
        "--write-paths",
        "internal/job/store.go,internal/job/store_test.go",
        "--check",
        "test",
        "--deny-paths",
        "internal/secret",
        "--read-paths",
        "internal",
        "--model",
        "opus",
        "-o",
        "json",
    )
    assert result.code == 0, result.err
    row = result.json()
    assert row["id"] == "api/migrate" and row["state"] == "declared"
    assert row["write_paths"] == ["internal/job/store.go", "internal/job/store_test.go"]
    assert row["deny_paths"] == ["internal/secret"] and row["read_paths"] == ["internal"]
    assert row["check"] == {"target": "test"} and row["model"] == "opus"
    assert row["checkpoint"] == head
    assert row["actor"].startswith("user:") and row["created"].endswith("Z")
    assert row["write_proof"] == "alone" and row["read_only"] is False
    assert jobs_by_id(proctor)["api/migrate"]["criteria"] == "move the store"
    assert fork(proctor, "x", "--check", "test", "-o", "name").out == "x\n"


def test_fork_replaces_same_id(repo, proctor):
    assert fork(proctor, "a", "--criteria", "one", "--check", "test").code == 0
    assert fork(proctor, "a", "--criteria", "two", "--check", "lint").code == 0
    row = jobs_by_id(proctor)["a"]
    assert row["criteria"] == "two" and row["check"] == {"target": "lint"}
    assert len(jobs_by_id(proctor)) == 1


def test_stdin_record_and_schema(repo, proctor):
    schema = fork(proctor, "--schema").json()
    record = {
        "schema_version": 1,
        "id": "api/migrate",
        "criteria": "move",
        "write_paths": ["db/m.go", "api/x.go"],
        "check": {"target": "test"},
        "goals": [
            {"id": "migration", "kind": "paths", "paths": ["db/migrations/**"]},
            {
                "id": "old-gone",
                "kind": "symbol",
                "expect": "absent",
                "symbols": ["Legacy"],
                "depends_on": ["migration"],
            },
        ],
        "timeout": "2h",
    }
    jsonschema.validate(record, schema)
    result = fork(proctor, "--stdin", "-o", "json", stdin=json.dumps(record))
    assert result.code == 0, result.err
    row = result.json()
    assert row["goals"][0] == {
        "id": "migration",
        "kind": "paths",
        "paths": ["db/migrations/**"],
        "expect": "changed",
        "depends_on": [],
    }
    assert row["timeout"] == 7200 and row["deadline"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "x", "passed": True}, schema)
    jsonschema.validate({"id": "x", "created": "now"}, schema)  # output-only: accepted, then ignored


def test_a_listed_row_feeds_back_to_fork(repo, proctor, tmp_path):
    """A row from `ls jobs -o json`, output-only fields and all, is a record fork takes back:
    those fields are ignored with one note on stderr, and the declaration is unchanged."""
    import jsonschema

    assert (
        fork(proctor, "j", "--write-paths", "a.py,b.py", "--check", "test", "--criteria", "c", "--timeout", "2h").code
        == 0
    )
    wt = _worktree(repo, tmp_path, "w1")
    assert proctor("job", "exec", "j", cwd=wt).code == 0
    row = jobs_by_id(proctor)["j"]
    assert {"created", "updated", "actor", "releases", "stale", "age_seconds", "taken"} <= set(row)
    jsonschema.validate(row, proctor("job", "fork", "--schema").json())
    again = fork(proctor, "--stdin", stdin=json.dumps(row))
    assert again.code == 0, again.err
    [note] = [line for line in again.err.splitlines() if "ignored" in line]
    assert "output-only" in note and "created" in note and "age_seconds" in note
    after = jobs_by_id(proctor)["j"]
    for field in ("write_paths", "check", "criteria", "timeout", "state", "checkout_root", "created"):
        assert after[field] == row[field], field


@pytest.mark.parametrize(
    "stdin, needle",
    [
        ("{not json", "not a job record in JSON"),
        ("[1, 2]", "one JSON object"),
        ("", "read nothing"),
        ('{"id": "x", "check": "test", "passed": true}', "unknown field 'passed'"),
        ('{"id": "x", "check": "test", "schema_version": 9}', "schema_version 9"),
        ('{"id": "x", "check": "test", "write_paths": [1]}', "must be a list of strings"),
        ('{"id": "x", "check": "test", "timeout": "soon"}', "timeout"),
        ('{"id": "x", "check": "test", "state": "done"}', "state 'done'"),
        ('{"id": "bad id!", "check": "test"}', "cannot be a job id"),
    ],
)
def test_malformed_stdin_changes_nothing(repo, proctor, stdin, needle):
    result = fork(proctor, "--stdin", stdin=stdin)
    assert result.code == 2, result.err
    assert needle in result.err
    assert len(result.err.strip().splitlines()) == 1, "one clear line"
    assert jobs_by_id(proctor) == {}


def test_stdin_conflicts(repo, proctor):
    mixed = fork(proctor, "--stdin", "--criteria", "x", stdin='{"id": "x", "check": "test"}')
    assert mixed.code == 2 and "--stdin reads the whole record" in mixed.err
    other = fork(proctor, "y", "--stdin", stdin='{"id": "x", "check": "test"}')
    assert other.code == 2 and "differs" in other.err
    named = fork(proctor, "y", "--stdin", stdin='{"check": "test"}')
    assert named.code == 0 and "y" in jobs_by_id(proctor)


@pytest.mark.parametrize("job_id", ["", "a b", "../x", "a//b", "/abs", "a/", "x" * 201, "a;rm", "ü"])
def test_bad_job_ids(repo, proctor, job_id):
    result = fork(proctor, job_id, "--check", "test")
    assert result.code == 2 and "PRC3050" in result.err
    assert jobs_by_id(proctor) == {}


def test_directory_write_paths_refused(repo, proctor):
    os.makedirs(os.path.join(repo, "internal", "job"))
    for path in ("internal/job", "internal", ".", "./", repo, "internal/job/"):
        result = fork(proctor, "j", "--write-paths", path, "--check", "test")
        assert result.code == 1, (path, result.err)
        assert codes(result) == ["PRC3018"], (path, result.err)
        assert "is a directory" in result.err and "name the files it writes" in result.err
    assert fork(proctor, "j", "--write-paths", "internal/job/new_file.go", "--check", "test").code == 0


def test_path_outside_repository_refused(repo, proctor, tmp_path):
    for path in ("../elsewhere.txt", str(tmp_path / "other.txt"), "a/../../x"):
        result = fork(proctor, "j", "--write-paths", path, "--check", "test")
        assert result.code == 1 and codes(result) == ["PRC3041"], result.err
    inside = fork(proctor, "j", "--write-paths", os.path.join(repo, "src", "x.py"), "--check", "test", "-o", "json")
    assert inside.json()["write_paths"] == ["src/x.py"]


def test_hash_spellings(repo, proctor):
    os.makedirs(os.path.join(repo, "notes"))
    open(os.path.join(repo, "notes", "a#b.md"), "w").close()
    ambiguous = fork(proctor, "j", "--write-paths", "notes/a#b.md", "--check", "test")
    assert ambiguous.code == 1 and codes(ambiguous) == ["PRC3040"]
    assert "./notes/a#b.md" in ambiguous.err and "notes/a\\#b.md" in ambiguous.err
    dot = fork(proctor, "j", "--write-paths", "./notes/a#b.md", "--check", "test", "-o", "json")
    assert dot.code == 0 and dot.json()["write_paths"] == ["./notes/a#b.md"]
    escaped = fork(proctor, "k", "--write-paths", "notes/a\\#b.md", "--check", "test", "-o", "json")
    assert escaped.json()["write_paths"] == ["./notes/a#b.md"]
    claim = fork(proctor, "m", "--write-paths", "notes/a\\#b.md#Intro", "--check", "test", "-o", "json")
    assert claim.json()["write_paths"] == ["notes/a\\#b.md#Intro"]
    decl = fork(proctor, "n", "--write-paths", "run.go#executeStages", "--check", "test", "-o", "json")
    assert decl.json()["write_paths"] == ["run.go#executeStages"]


def test_ungradable_declaration_claims(repo, proctor):
    for entry in ("run.go#", "run.go#   ", "src/*.go#executeStages"):
        result = fork(proctor, "j", "--write-paths", entry, "--check", "test")
        assert result.code == 1 and codes(result) == ["PRC3031"], result.err


def test_check_rules(repo, proctor):
    nothing = fork(proctor, "j", "--write-paths", "a.py")
    assert nothing.code == 1 and codes(nothing) == ["PRC3036"]
    unknown = fork(proctor, "j", "--write-paths", "a.py", "--check", "nope")
    assert unknown.code == 1 and codes(unknown) == ["PRC3037"] and "[targets.nope]" in unknown.err
    gate = fork(proctor, "j", "--write-paths", "a.py", "--check", "ci")
    assert gate.code == 1 and codes(gate) == ["PRC3038"]
    goal_gate = fork(
        proctor,
        "--stdin",
        stdin=json.dumps({"id": "j", "write_paths": ["a.py"], "goals": [{"id": "g", "check": "ci"}]}),
    )
    assert goal_gate.code == 1 and codes(goal_gate) == ["PRC3038"] and "goal 'g'" in goal_gate.err
    goal_only = fork(
        proctor,
        "--stdin",
        stdin=json.dumps({"id": "j", "write_paths": ["a.py"], "goals": [{"id": "p", "paths": ["a.py"]}]}),
    )
    assert goal_only.code == 0, goal_only.err
    assert fork(proctor, "r", "--read-only").code == 0, "a read-only job needs no check"


def test_target_chaining_to_gate_refused(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo(
        "r",
        """
[targets.ci]
command = "make all"
[targets.full]
command = "proctor run ci"
[targets.wrapper]
command = "echo go && proctor run full"
""",
    )
    monkeypatch.chdir(root)
    result = fork(proctor, "j", "--write-paths", "a.py", "--check", "wrapper")
    assert result.code == 1 and codes(result) == ["PRC3038"]
    assert "wrapper -> full -> ci" in result.err


def test_empty_write_set(repo, proctor):
    assert fork(proctor, "root", "--criteria", "orchestrate", "--check", "test").code == 0, "a root may"
    child = fork(proctor, "root/c", "--parent", "root", "--check", "test")
    assert child.code == 1 and codes(child) == ["PRC3039"]
    ro = fork(proctor, "root/r", "--parent", "root", "--read-only")
    assert ro.code == 0
    both = fork(proctor, "root/x", "--parent", "root", "--read-only", "--write-paths", "a.py")
    assert both.code == 1 and codes(both) == ["PRC3046"]


def test_unknown_parent_and_dependency(repo, proctor):
    orphan = fork(proctor, "a/b", "--parent", "a", "--write-paths", "x.py", "--check", "test")
    assert orphan.code == 1 and codes(orphan) == ["PRC3045"]
    dep = fork(proctor, "b", "--depends-on", "zzz", "--write-paths", "x.py", "--check", "test")
    assert dep.code == 1 and codes(dep) == ["PRC3045"]


def test_max_depth_and_max_live(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[jobs]\nmax_depth = 2\nmax_live = 3\n[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    assert fork(proctor, "r", "--check", "test").code == 0
    assert fork(proctor, "r/1", "--parent", "r", "--write-paths", "a/x.py", "--check", "test").code == 0
    assert fork(proctor, "r/1/1", "--parent", "r/1", "--write-paths", "a/x.py", "--check", "test").code == 0
    deep = fork(proctor, "r/1/1/1", "--parent", "r/1/1", "--write-paths", "a/x.py", "--check", "test")
    assert deep.code == 1 and codes(deep) == ["PRC3034"] and "jobs.max_depth = 2" in deep.err
    assert fork(proctor, "r/2", "--parent", "r", "--write-paths", "b.py", "--check", "test").code == 0
    full = fork(proctor, "r/3", "--parent", "r", "--write-paths", "c.py", "--check", "test")
    assert full.code == 1 and codes(full) == ["PRC3035"] and "jobs.max_live = 3" in full.err
    # Replacing a job already counted is not a new live job.
    assert fork(proctor, "r/2", "--parent", "r", "--write-paths", "b2.py", "--check", "test").code == 0
    assert proctor("job", "exit", "r/2").code == 0
    assert fork(proctor, "r/3", "--parent", "r", "--write-paths", "c.py", "--check", "test").code == 0


def test_timeout_and_default_timeout(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo("r", "[jobs]\ndefault_timeout = '30m'\n[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    a = fork(proctor, "a", "--check", "test", "-o", "json").json()
    assert a["timeout"] == 1800 and a["deadline"]
    b = fork(proctor, "b", "--check", "test", "--timeout", "2h", "-o", "json").json()
    assert b["timeout"] == 7200
    bad = fork(proctor, "c", "--check", "test", "--timeout", "-5m")
    assert bad.code == 2


def test_write_proof(repo, proctor):
    assert (
        fork(proctor, "a", "--write-paths", "src/a.py", "--check", "test", "-o", "json").json()["write_proof"]
        == "alone"
    )
    assert (
        fork(proctor, "b", "--write-paths", "src/b.py", "--check", "test", "-o", "json").json()["write_proof"]
        == "disjoint"
    )
    assert (
        fork(proctor, "c", "--write-paths", "src/**", "--check", "test", "-o", "json").json()["write_proof"]
        == "overlapping"
    )
    assert fork(proctor, "d", "--write-paths", "run.go#A", "--check", "test").code == 0
    assert (
        fork(proctor, "e", "--write-paths", "run.go#B", "--check", "test", "-o", "json").json()["write_proof"]
        == "disjoint"
    )


def _worktree(repo, tmp_path, name):
    path = str(tmp_path / name)
    git(repo, "worktree", "add", "-q", "-b", name, path)
    return path


def test_shared_literal_file_across_checkouts(repo, proctor, tmp_path):
    wt = _worktree(repo, tmp_path, "w1")
    os.makedirs(os.path.join(wt, "src"), exist_ok=True)
    assert fork(proctor, "a", "--write-paths", "src/store.py,notes.txt", "--check", "test").code == 0
    assert proctor("job", "exec", "a", cwd=wt).code == 0
    with open(os.path.join(wt, "src", "store.py"), "w") as handle:
        handle.write("one\ntwo\n")
    git(wt, "add", "-N", "src/store.py")
    refused = fork(proctor, "b", "--write-paths", "src/store.py", "--check", "test")
    assert refused.code == 1 and codes(refused) == ["PRC3032"], refused.err
    assert "a, held in another checkout" in refused.err and wt in refused.err
    assert "+2 -0" in refused.err, "names what the holder has touched"
    assert "--depends-on a" in refused.err
    # The fixes the refusal names each work.
    assert fork(proctor, "b", "--write-paths", "src/store.py", "--check", "test", "--depends-on", "a").code == 0
    assert fork(proctor, "c", "--write-paths", "src/store.py#Store", "--check", "test").code == 1
    # A file with no diff driver is recorded, not refused.
    assert fork(proctor, "d", "--write-paths", "notes.txt", "--check", "test").code == 0
    # A child of the holder may share it.
    assert fork(proctor, "a/x", "--parent", "a", "--write-paths", "src/store.py", "--check", "test").code == 0


def test_shared_file_with_declaration_claims_passes(repo, proctor, tmp_path):
    wt = _worktree(repo, tmp_path, "w1")
    assert fork(proctor, "a", "--write-paths", "run.go#A", "--check", "test").code == 0
    assert proctor("job", "exec", "a", cwd=wt).code == 0
    assert fork(proctor, "b", "--write-paths", "run.go#B", "--check", "test").code == 0
    assert fork(proctor, "c", "--write-paths", "run.go", "--check", "test").code == 1


def test_shared_file_in_same_checkout_is_advisory(repo, proctor):
    assert fork(proctor, "a", "--write-paths", "src/store.py,src/other.py", "--check", "test").code == 0
    assert proctor("job", "exec", "a").code == 0
    # The holder, bound to this checkout, forks a child sharing its file: recorded, not refused.
    same = fork(proctor, "a/b", "--parent", "a", "--write-paths", "src/store.py", "--check", "test", "-o", "json")
    assert same.code == 0 and same.json()["write_proof"] == "overlapping"
    apart = fork(proctor, "a/c", "--parent", "a", "--write-paths", "src/other.py", "--check", "test", "-o", "json")
    assert apart.json()["write_proof"] == "overlapping", "src/other.py is a's too"


def test_binding_frees_the_checkout_once_its_job_ended(repo, proctor):
    assert fork(proctor, "a", "--write-paths", "src/a.py", "--check", "test").code == 0
    assert proctor("job", "exec", "a").code == 0
    assert fork(proctor, "b", "--write-paths", "src/b.py", "--check", "test").code == 1
    assert proctor("job", "exit", "a").code == 0
    assert fork(proctor, "b", "--write-paths", "src/b.py", "--check", "test").code == 0


def test_gitattributes_driver_counts(repo, proctor, tmp_path):
    with open(os.path.join(repo, ".gitattributes"), "w") as handle:
        handle.write("*.weird diff=python\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attrs")
    wt = _worktree(repo, tmp_path, "w1")
    assert fork(proctor, "a", "--write-paths", "x.weird,y.other", "--check", "test").code == 0
    assert proctor("job", "exec", "a", cwd=wt).code == 0
    assert fork(proctor, "b", "--write-paths", "x.weird", "--check", "test").code == 1
    assert fork(proctor, "c", "--write-paths", "y.other", "--check", "test").code == 0


def test_gitattributes_unset_diff_means_no_driver(repo, proctor, tmp_path):
    """`*.py -diff`: git diffs Python as binary, so no declaration of one can be graded, and a
    .py file shared across checkouts is recorded like any file without a driver."""
    with open(os.path.join(repo, ".gitattributes"), "w") as handle:
        handle.write("*.py -diff\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "attrs")
    claim = fork(proctor, "d", "--write-paths", "src/a.py#main", "--check", "test")
    assert claim.code == 1 and "PRC3031" in claim.err and "no diff driver" in claim.err, claim.err
    wt = _worktree(repo, tmp_path, "w1")
    assert fork(proctor, "a", "--write-paths", "src/a.py", "--check", "test").code == 0
    assert proctor("job", "exec", "a", cwd=wt).code == 0
    shared = fork(proctor, "b", "--write-paths", "src/a.py", "--check", "test")
    assert shared.code == 0 and "PRC3032" not in shared.err, shared.err


def test_workspace_load_file(repo, proctor, tmp_path):
    assert fork(proctor, "a", "--write-paths", "src/a.py,proctor.toml,*.toml", "--check", "test").code == 0
    assert fork(proctor, "cfg", "--write-paths", "proctor.toml", "--check", "test").code == 0, (
        "nothing is taken in this checkout yet"
    )
    assert proctor("job", "exec", "a").code == 0
    # The holder of a, bound to this checkout, forks a child that would rewrite proctor.toml.
    refused = fork(proctor, "a/cfg", "--parent", "a", "--write-paths", "proctor.toml", "--check", "test")
    assert refused.code == 1 and codes(refused) == ["PRC3033"], refused.err
    assert "proctor.toml" in refused.err and "a is taken in this checkout" in refused.err
    assert "worktree" in refused.err
    glob = fork(proctor, "a/cfg3", "--parent", "a", "--write-paths", "*.toml", "--check", "test")
    assert codes(glob) == ["PRC3033"]
    assert fork(proctor, "a/src", "--parent", "a", "--write-paths", "src/a.py", "--check", "test").code == 0
    # From a worktree of its own, the same job is fine.
    wt = _worktree(repo, tmp_path, "w2")
    assert fork(proctor, "cfg4", "--write-paths", "proctor.toml", "--check", "test", cwd=wt).code == 0


def test_leased_holder_shrinks_and_releases(repo, proctor):
    with open(os.path.join(repo, "kept.py"), "w") as handle:
        handle.write("print(1)\n")
    sock_path = os.path.join(repo, "sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(sock_path)
    try:
        assert fork(proctor, "j", "--write-paths", "kept.py,gone.py,sock,later", "--check", "test").code == 0
        os.makedirs(os.path.join(repo, "later"))
        env = {"BAGGAGE": "other=1,proctor.lease=j;p=1"}
        shrink = fork(proctor, "j", "--write-paths", "later", env=env, stdin=None)
        assert shrink.code == 0, shrink.err
        row = jobs_by_id(proctor)["j"]
        assert row["write_paths"] == ["later"]
        digests = {r["path"]: r["digest"] for r in row["releases"]}
        import hashlib

        assert digests["kept.py"] == "sha256:" + hashlib.sha256(b"print(1)\n").hexdigest()
        assert digests["gone.py"] == "absent"
        assert digests["sock"] == "unreadable"
        assert all(r["by"] == "job:j" for r in row["releases"])
        # Shrinking to nothing would be no boundary at all (an empty write set scopes nothing):
        # refused (PRC3039) in every spelling, and the row keeps its last path.
        for spelling in (("--write-paths", ""), ("--write-paths", " , ")):
            release_all = fork(proctor, "j", *spelling, env=env)
            assert release_all.code == 1 and codes(release_all) == ["PRC3039"], release_all.err
        as_record = fork(proctor, "--stdin", env=env, stdin=json.dumps({"id": "j", "write_paths": []}))
        assert as_record.code == 1 and codes(as_record) == ["PRC3039"], as_record.err
        row = jobs_by_id(proctor)["j"]
        assert row["write_paths"] == ["later"] and [r["path"] for r in row["releases"]] == [
            "kept.py",
            "gone.py",
            "sock",
        ]
    finally:
        server.close()


def test_holder_may_not_widen_or_reshape(repo, proctor):
    assert fork(proctor, "j", "--write-paths", "a.py,b.py", "--check", "test", "--criteria", "c").code == 0
    lease = ("--lease", "j")
    widen = fork(proctor, "j", "--write-paths", "a.py,c.py", *lease)
    assert widen.code == 1 and codes(widen) == ["PRC3042"] and "c.py widens" in widen.err
    reshape = fork(proctor, "j", "--criteria", "other", "--check", "lint", *lease)
    assert reshape.code == 1 and codes(reshape) == ["PRC3042", "PRC3042"]
    assert "criteria" in reshape.err and "check" in reshape.err
    same = fork(proctor, "j", "--criteria", "c", "--write-paths", "a.py", *lease)
    assert same.code == 0, same.err
    assert jobs_by_id(proctor)["j"]["write_paths"] == ["a.py"]


def test_holder_forks_children_inside_its_paths_only(repo, proctor):
    assert fork(proctor, "j", "--write-paths", "src/a.py,lib/**", "--check", "test").code == 0
    env = {"BAGGAGE": "proctor.lease=j"}
    assert fork(proctor, "j/1", "--parent", "j", "--write-paths", "src/a.py", "--check", "test", env=env).code == 0
    assert fork(proctor, "j/2", "--parent", "j", "--write-paths", "lib/x/y.py", "--check", "test", env=env).code == 0
    assert fork(proctor, "j/3", "--parent", "j", "--read-only", env=env).code == 0
    outside = fork(proctor, "j/4", "--parent", "j", "--write-paths", "src/b.py", "--check", "test", env=env)
    assert outside.code == 1 and codes(outside) == ["PRC3043"] and "src/b.py" in outside.err
    unrelated = fork(proctor, "k", "--write-paths", "src/a.py", "--check", "test", env=env)
    assert unrelated.code == 1 and codes(unrelated) == ["PRC3042"]
    assert "ask the session that forked j" in unrelated.err
    assert fork(proctor, "k", "--check", "test").code == 0
    foreign = fork(proctor, "k", "--criteria", "mine now", "--check", "test", env=env)
    assert foreign.code == 1 and codes(foreign) == ["PRC3042"]
    stateful = fork(
        proctor, "--stdin", env=env, stdin=json.dumps({"id": "j/5", "parent": "j", "read_only": True, "state": "pass"})
    )
    assert stateful.code == 1 and codes(stateful) == ["PRC3042"]


def test_lease_sources(repo, proctor):
    assert fork(proctor, "j", "--write-paths", "a.py", "--check", "test").code == 0
    assert fork(proctor, "k", "--write-paths", "b.py", "--check", "test").code == 0
    # The checkout's binding, recorded by exec, makes this checkout's caller j's holder, and
    # every refusal that comes from it says so: which checkout, which job, which tier, and the
    # ways out that hurt nobody (a worktree, or --orchestrator).
    assert proctor("job", "exec", "j").code == 0
    bound = fork(proctor, "k", "--criteria", "x", "--check", "test")
    assert bound.code == 1 and "tier marker" in bound.err, bound.err
    assert (
        f"because this checkout ({os.path.realpath(repo)}) is bound to it: proctor job exec j was run here" in bound.err
    )
    assert "--worktree" in bound.err and "--orchestrator" in bound.err
    # An explicit --lease outranks it; a BAGGAGE claim that disagrees with the record loses.
    flagged = fork(proctor, "k", "--criteria", "x", "--check", "test", "--lease", "k")
    assert flagged.code == 1 and "named by --lease" in flagged.err and "--orchestrator" not in flagged.err
    contested = fork(proctor, "k", "--criteria", "x", "--check", "test", env={"BAGGAGE": "proctor.lease=k"})
    assert contested.code == 1 and "you act under lease j because" in contested.err
    assert "tier contested; it overrules BAGGAGE's claim proctor.lease=k" in contested.err
    # the orchestrator says who it is; the record does not answer for it
    assert fork(proctor, "k", "--criteria", "x", "--check", "test", "--orchestrator").code == 0
    both = fork(proctor, "k", "--check", "test", "--orchestrator", "--lease", "j")
    assert both.code == 2 and "contradict" in both.err
    # with no record, the claim answers
    assert proctor("job", "exit", "j").code == 0
    env = fork(proctor, "k", "--criteria", "y", "--check", "test", env={"BAGGAGE": "proctor.lease=k"})
    assert env.code == 1 and "criteria" in env.err and "claimed by BAGGAGE" in env.err
    unknown = fork(proctor, "k", "--check", "test", "--lease", "nope")
    assert unknown.code == 1 and "names no job" in unknown.err


def test_orchestrator_in_a_taken_checkout(repo, proctor):
    """After `proctor job exec A` in the orchestrator's own checkout: exec says what it did to
    every caller there; the orchestrator's refusals name the record and the remedies; with
    --orchestrator it forks, waits and is refused PRC3033 (not masked by PRC3042); and a
    second exec's PRC3049 no longer tells a stranger to end A."""
    assert fork(proctor, "a", "--write-paths", "a.py", "--check", "test").code == 0
    assert fork(proctor, "b", "--write-paths", "b.py", "--check", "test").code == 0
    taken = proctor("job", "exec", "a")
    assert taken.code == 0
    assert (
        "note: a was declared in this checkout" in taken.err
        and "every caller here that reports no session" in taken.err
        and "--worktree" in taken.err
    ), taken.err
    as_json = proctor("job", "exec", "a", "-o", "json").json()
    assert as_json["retake"] is True and as_json["notes"] == [] and "nonce" not in as_json
    second = proctor("job", "exec", "b")
    assert second.code == 1 and codes(second) == ["PRC3049"]
    assert "proctor job exit a" not in second.err and "--worktree" in second.err, second.err
    cfg = fork(proctor, "cfg", "--write-paths", "proctor.toml", "--check", "test")
    assert codes(cfg) == ["PRC3042"] and "tier marker" in cfg.err
    cfg = fork(proctor, "cfg", "--write-paths", "proctor.toml", "--check", "test", "--orchestrator")
    assert codes(cfg) == ["PRC3033"], cfg.err
    waited = proctor("job", "wait", "b", "--orchestrator")
    assert waited.code == 2 and "nothing was filed for b" in waited.err
    from proctor import api

    assert api.fork({"id": "c", "write_paths": ["c.py"], "check": "test"}, lease=api.ORCHESTRATOR, cwd=repo)[
        "actor"
    ].startswith("user:")


def test_unleased_caller_writes_anything(repo, proctor):
    assert fork(proctor, "j", "--write-paths", "a.py", "--check", "test").code == 0
    assert fork(proctor, "j", "--write-paths", "a.py,b.py,c.py", "--check", "lint", "--criteria", "more").code == 0
    row = jobs_by_id(proctor)["j"]
    assert row["write_paths"] == ["a.py", "b.py", "c.py"]
    assert fork(proctor, "j", "--write-paths", "b.py", "--check", "lint").code == 0
    assert [r["path"] for r in jobs_by_id(proctor)["j"]["releases"]] == ["a.py", "c.py"]


def test_every_reason_named_at_once(repo, proctor):
    os.makedirs(os.path.join(repo, "dir"))
    result = fork(proctor, "root/c", "--parent", "root", "--write-paths", "dir", "--check", "ci")
    assert result.code == 1
    assert set(codes(result)) >= {"PRC3045", "PRC3038", "PRC3018"}


def test_trail_records_forks(repo, proctor):
    from proctor.store import Store
    from proctor.paths import find_checkout, repo_state_dir
    from proctor import trail

    assert fork(proctor, "j", "--write-paths", "a.py", "--check", "test").code == 0
    store = Store(repo_state_dir(find_checkout(repo)))
    with store.read() as conn:
        kinds = [e["kind"] for e in trail.events(conn, job="j")]
    store.close()
    assert kinds == ["job_fork"]


def test_release_digest_of_fifo_and_dangling_link(repo, proctor):
    os.mkfifo(os.path.join(repo, "pipe"))
    os.symlink("nowhere", os.path.join(repo, "dangling"))
    assert fork(proctor, "j", "--write-paths", "pipe,dangling,x.py", "--check", "test").code == 0
    assert fork(proctor, "j", "--write-paths", "x.py", "--check", "test", "--lease", "j").code == 0
    digests = {r["path"]: r["digest"] for r in jobs_by_id(proctor)["j"]["releases"]}
    assert digests == {"pipe": "unreadable", "dangling": "unreadable"}


def test_release_digest_of_glob(repo, proctor):
    os.makedirs(os.path.join(repo, "gen"))
    for name in ("a.txt", "b.txt"):
        with open(os.path.join(repo, "gen", name), "w") as handle:
            handle.write(name)
    assert fork(proctor, "j", "--write-paths", "gen/*.txt,none/*.md,x.py", "--check", "test").code == 0
    assert fork(proctor, "j", "--write-paths", "x.py", "--check", "test", "--lease", "j").code == 0
    digests = {r["path"]: r["digest"] for r in jobs_by_id(proctor)["j"]["releases"]}
    assert digests["gen/*.txt"].startswith("sha256:") and digests["none/*.md"] == "absent"


def test_huge_durations_are_bad_values_not_crashes(tmp_path, proctor, monkeypatch, new_repo):
    root = new_repo(
        "r",
        "[jobs]\nstale_after = '99999999999h'\ndefault_timeout = '9999999999h'\n[targets.test]\ncommand = 'true'\n",
    )
    monkeypatch.chdir(root)
    listed = proctor("ls", "jobs")
    assert listed.code == 0 and "stale_after" in listed.err and "default_timeout" in listed.err
    assert fork(proctor, "a", "--check", "test").code == 0
    assert fork(proctor, "b", "--check", "test", "--timeout", "99999999999h").code == 2
    assert fork(proctor, "--stdin", stdin='{"id": "c", "check": "test", "timeout": 1e300}').code == 2


@pytest.mark.parametrize(
    "stdin",
    [
        '{"id": "evil\\n", "check": "test"}',
        '{"id": "n", "check": "test", "write_paths": ["a\\u0000b"]}',
        '{"id": "s", "check": "test", "criteria": "x \\ud800 y"}',
    ],
)
def test_unstorable_text_is_refused(repo, proctor, stdin):
    result = fork(proctor, "--stdin", stdin=stdin)
    assert result.code == 2 and "Traceback" not in result.err
    assert jobs_by_id(proctor) == {}


def test_declaration_of_a_file_without_diff_driver(repo, proctor):
    refused = fork(proctor, "d", "--write-paths", "notes.txt#Intro", "--check", "test")
    assert refused.code == 1 and codes(refused) == ["PRC3031"] and "diff driver" in refused.err
    assert fork(proctor, "m", "--write-paths", "docs/scope.md#The knobs", "--check", "test").code == 0


def test_brackets_are_path_characters(repo, proctor):
    os.makedirs(os.path.join(repo, "app", "[id]"))
    with open(os.path.join(repo, "app", "[id]", "page.tsx"), "w") as handle:
        handle.write("export default 1\n")
    directory = fork(proctor, "a", "--write-paths", "app/[id]", "--check", "test")
    assert directory.code == 1 and codes(directory) == ["PRC3018"]
    assert fork(proctor, "a", "--write-paths", "app/[id]/page.tsx,x.py", "--check", "test").code == 0
    assert fork(proctor, "a", "--write-paths", "x.py", "--check", "test", "--lease", "a").code == 0
    digest = jobs_by_id(proctor)["a"]["releases"][0]["digest"]
    assert digest.startswith("sha256:")


def test_overdue_holder_owns_nothing_against_others(repo, proctor, tmp_path):
    import time

    wt = _worktree(repo, tmp_path, "w1")
    assert (
        fork(
            proctor,
            "--stdin",
            stdin=json.dumps({"id": "a", "write_paths": ["src/a.py"], "check": "test", "timeout": 0.3}),
        ).code
        == 0
    )
    assert proctor("job", "exec", "a", cwd=wt).code == 0
    time.sleep(0.4)
    assert fork(proctor, "b", "--write-paths", "src/a.py", "--check", "test").code == 0


def test_shared_file_refusal_names_a_file_the_holder_created(repo, proctor, tmp_path):
    wt = _worktree(repo, tmp_path, "w1")
    assert fork(proctor, "a", "--write-paths", "src/new.py", "--check", "test").code == 0
    assert proctor("job", "exec", "a", cwd=wt).code == 0
    os.makedirs(os.path.join(wt, "src"), exist_ok=True)
    with open(os.path.join(wt, "src", "new.py"), "w") as handle:
        handle.write("1\n2\n3\n")
    refused = fork(proctor, "b", "--write-paths", "src/new.py", "--check", "test")
    assert codes(refused) == ["PRC3032"] and "created the file (3 lines" in refused.err


def test_holder_narrows_by_containment(repo, proctor):
    assert fork(proctor, "g", "--write-paths", "lib/**,run.go", "--check", "test").code == 0
    narrowed = fork(proctor, "g", "--write-paths", "lib/x.py,run.go#main", "--lease", "g")
    assert narrowed.code == 0, narrowed.err
    assert jobs_by_id(proctor)["g"]["write_paths"] == ["lib/x.py", "run.go#main"]


def test_symlink_out_of_the_repository(repo, proctor, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(str(outside), os.path.join(repo, "escape"))
    refused = fork(proctor, "j", "--write-paths", "escape/file.txt", "--check", "test")
    assert refused.code == 1 and codes(refused) == ["PRC3041"] and "symbolic link" in refused.err
    os.symlink("README", os.path.join(repo, "inside-link"))
    assert fork(proctor, "k", "--write-paths", "inside-link", "--check", "test").code == 0


def test_checkpoint_tokens(repo, proctor):
    assert fork(proctor, "a", "--check", "test", "--checkpoint", "ABCD+").code == 2
    assert fork(proctor, "a", "--check", "test", "--checkpoint", "xyz").code == 2
    stored = fork(proctor, "a", "--check", "test", "--checkpoint", "ABCDEF0+00FF", "-o", "json")
    assert stored.json()["checkpoint"] == "abcdef0+00ff"
