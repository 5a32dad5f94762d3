"""The round trip: fork, exec, edit, run, exit, wait. It passes and fails exactly where the
spec says, each failure named; a holder's account is a claim, proctor grades evidence."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.support import git

CONFIG = """
[targets.test]
command = "test -f src/a.py && grep -q ok src/a.py"
[targets.lint]
command = "true"
[targets.ci]
command = "make ci"
"""


@pytest.fixture
def world(tmp_path, monkeypatch, new_repo):
    """An orchestrator's checkout and a worktree for the holder."""
    root = new_repo("main", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "src", "a.py"), "w") as handle:
        handle.write("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "src")
    holder = str(tmp_path / "holder")
    git(root, "worktree", "add", "-q", "-b", "holder", holder)
    monkeypatch.chdir(root)
    return root, holder


def fork(proctor, record: dict):
    result = proctor("job", "fork", "--stdin", stdin=json.dumps(record))
    assert result.code == 0, result.err
    return result


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def file_result(proctor, job: str, cwd: str, **fields):
    record = {"schema_version": 2, **fields}
    return proctor("job", "exit", job, "--stdin", stdin=json.dumps(record), cwd=cwd)


def run(proctor, target: str, cwd: str, lease: str | None = None) -> dict:
    args = ["run", target, "-o", "json"] + (["--lease", lease] if lease else [])
    return proctor(*args, cwd=cwd).json()


def cite(done: dict) -> dict:
    """A validation entry naming one run, as proctor run printed it."""
    return {"run": done["id"], "output_ref": done["output_ref"]}


def base_job(**extra):
    return {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py", "src/b.py"], "check": "test", **extra}


def test_round_trip_passes(world, proctor):
    root, holder = world
    fork(proctor, base_job())
    assert proctor("job", "exec", "feat", cwd=holder).code == 0
    write(os.path.join(holder, "src", "a.py"), "x = 1\nok = True\n")
    write(os.path.join(holder, "src", "b.py"), "new\n")
    done = run(proctor, "test", holder)
    assert done["exit_code"] == 0
    filed = file_result(
        proctor,
        "feat",
        holder,
        changed_paths=["src/a.py", "src/b.py"],
        validation=[{"command": "proctor run test", **cite(done)}],
        status="done",
        summary="made a ok",
    )
    assert filed.code == 0, filed.err
    waited = proctor("job", "wait", "feat")
    assert waited.code == 0, waited.out + waited.err
    assert waited.out.startswith("passed feat")
    assert "src/a.py: +1 -0 [lines 2]" in waited.out and "src/b.py: +1 -0 (untracked)" in waited.out
    row = {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}["feat"]
    assert row["state"] == "pass" and row["verdict"]["verdict"] == "pass"
    assert row["result"]["runs"][0]["id"] == done["id"], "the run record is filed beside the result"
    again = proctor("job", "wait", "feat")
    assert again.code == 0 and "verified already: pass" in again.out


def _take_and_edit(proctor, holder, job=None, files=None):
    fork(proctor, job or base_job())
    assert proctor("job", "exec", (job or base_job())["id"], cwd=holder).code == 0
    for rel, text in (files or {}).items():
        write(os.path.join(holder, rel), text)


def _rejected(proctor, job="feat") -> list[str]:
    waited = proctor("job", "wait", job)
    assert waited.code == 1, waited.out + waited.err
    assert waited.out.startswith(f"rejected {job}")
    return [line.strip() for line in waited.out.splitlines()[1:] if line.startswith("  ") and ": " in line]


def test_change_outside_write_paths_and_inside_deny(world, proctor):
    root, holder = world
    _take_and_edit(
        proctor,
        holder,
        base_job(deny_paths=["src/b.py"]),
        files={"src/a.py": "ok\n", "src/b.py": "denied\n", "stray.txt": "x\n"},
    )
    done = run(proctor, "test", holder)
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(done)]).code == 0
    reasons = _rejected(proctor)
    assert any(r.startswith("rule inside-write-paths: stray.txt changed outside") for r in reasons)
    assert any(r.startswith("rule outside-deny-paths: src/b.py changed inside the deny paths") for r in reasons)
    assert {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}["feat"]["state"] == "fail"


def test_nothing_changed(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, base_job(check="lint"))
    run(proctor, "lint", holder)
    assert file_result(proctor, "feat", holder).code == 0
    reasons = _rejected(proctor)
    assert any(r.startswith("rule non-empty: nothing changed") for r in reasons)
    assert any(r.startswith("rule change-inside-write-paths") for r in reasons)


def test_claimed_path_absent_from_diff(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    run(proctor, "test", holder)
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py", "src/b.py", "docs/x.md"]).code == 0
    reasons = _rejected(proctor)
    assert "rule claimed-paths-observed: src/b.py is claimed changed, but the diff since" in "\n".join(reasons)
    assert any("docs/x.md is claimed changed" in r for r in reasons)


def test_check_needs_a_passing_run_after_declaration(world, proctor):
    root, holder = world
    write(os.path.join(holder, "src", "a.py"), "ok\n")
    early = run(proctor, "test", holder)
    assert early["exit_code"] == 0
    _take_and_edit(proctor, holder)
    filed = file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(early)])
    assert filed.code == 1 and "PRC3056" in filed.err and f"run {early['id']} started at" in filed.err
    assert "before feat was declared" in filed.err


def test_newest_cited_run_decides(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    passed = run(proctor, "test", holder)
    assert passed["exit_code"] == 0
    write(os.path.join(holder, "src", "a.py"), "bad\n")
    failed = run(proctor, "test", holder)
    assert failed["exit_code"] == 1
    stale = file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(passed)])
    assert stale.code == 1 and f"changed after run {passed['id']} started" in stale.err
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(failed)]).code == 0
    reasons = _rejected(proctor)
    assert any(f'goal "check": the newest cited run of test ({failed["id"]}) exited 1' in r for r in reasons)


def test_run_in_another_checkout_does_not_count(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    write(os.path.join(root, "src", "a.py"), "ok\n")
    elsewhere = run(proctor, "test", root)
    assert elsewhere["exit_code"] == 0
    filed = file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(elsewhere)])
    assert filed.code == 1 and f"was made in {os.path.realpath(root)}, not in {os.path.realpath(holder)}" in filed.err
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"]).code == 0
    reasons = _rejected(proctor)
    assert any(
        r.startswith('goal "check": the result cites no run of test') and os.path.realpath(holder) in r for r in reasons
    )


def test_live_descendant_refuses_pass(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    env = {"BAGGAGE": "proctor.lease=feat"}
    assert (
        proctor(
            "job",
            "fork",
            "feat/child",
            "--parent",
            "feat",
            "--write-paths",
            "src/b.py",
            "--check",
            "lint",
            env=env,
            cwd=holder,
        ).code
        == 0
    )
    run(proctor, "test", holder)
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"], descendants=["feat/child"]).code == 0
    reasons = _rejected(proctor)
    assert "rule descendants-ended: descendant feat/child is still live" in "\n".join(reasons)


def test_unreadable_diff_fails(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    run(proctor, "test", holder)
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"]).code == 0
    shutil.rmtree(holder)
    reasons = _rejected(proctor)
    assert any(r.startswith("rule diff-readable:") and "no longer exists" in r for r in reasons)


def test_goals_graded_on_observation(world, proctor):
    root, holder = world
    job = base_job(
        write_paths=["src/a.py", "db/**", "old.py"],
        goals=[
            {"id": "migration", "kind": "paths", "paths": ["db/migrations/**"]},
            {"id": "kept", "paths": ["src/a.py"], "expect": "present"},
            {"id": "gone", "paths": ["README"], "expect": "absent"},
            {"id": "after", "paths": ["src/a.py"], "depends_on": ["gone"]},
            {"id": "sym", "kind": "symbol", "expect": "absent", "symbols": ["Legacy"]},
        ],
    )
    _take_and_edit(
        proctor, holder, job, files={"src/a.py": "ok\n", "db/schema.sql": "x\n", "old.py": "class Legacy:\n    pass\n"}
    )
    done = run(proctor, "test", holder)
    assert (
        file_result(
            proctor, "feat", holder, changed_paths=["src/a.py", "db/migrations/001.sql"], validation=[cite(done)]
        ).code
        == 0
    )
    reasons = _rejected(proctor)
    text = "\n".join(reasons)
    assert 'goal "migration": nothing matching "db/migrations/**" changed since' in text
    assert 'goal "gone": "README" still exists' in text
    assert 'goal "after": prerequisite goal "gone" is unmet' in text
    assert 'goal "sym": Legacy is still defined in ' in text and "old.py:1 (class)" in text
    assert "db/migrations/001.sql is claimed changed" in text
    assert 'goal "kept"' not in text and 'goal "check"' not in text


def test_describe_grades_now_and_writes_nothing(world, proctor):
    root, holder = world
    job = base_job(goals=[{"id": "b", "paths": ["src/b.py"]}])
    fork(proctor, job)
    first = proctor("describe", "job", "feat")
    assert "Graded now:\n  check: unmet: no result is filed, so no run is cited" in first.out
    assert '  b: unmet: nothing matching "src/b.py" changed since' in first.out
    assert proctor("job", "exec", "feat", cwd=holder).code == 0
    write(os.path.join(holder, "src", "b.py"), "b\n")
    write(os.path.join(holder, "src", "a.py"), "ok\n")
    done = run(proctor, "test", holder)
    unfiled = proctor("describe", "job", "feat")
    assert (
        f"check: unmet: no result is filed, so no run is cited; a check passes only on a cited run of test in "
        f"{os.path.realpath(holder)}; the latest run of test there is {done['id']}" in unfiled.out
    )
    assert file_result(proctor, "feat", holder, validation=[cite(done)]).code == 0
    from proctor.paths import find_checkout, repo_state_dir
    from tests.store.store_oracle import connect

    db = repo_state_dir(find_checkout(root))
    count = lambda: connect(db).execute("SELECT COUNT(*), MAX(id) FROM events").fetchone()  # noqa: E731
    before = count()
    now = proctor("describe", "job", "feat")
    assert now.out == proctor("describe", "job", "feat").out
    assert "check: met: test passed in run" in now.out and "b: met: every path is changed" in now.out
    assert count() == before
    assert {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}["feat"]["state"] == "exited"


def test_read_only_job_has_no_diff_to_check(world, proctor):
    root, holder = world
    fork(proctor, {"id": "survey", "read_only": True, "check": "lint"})
    assert proctor("job", "exec", "survey", cwd=holder).code == 0
    write(os.path.join(holder, "notes.txt"), "scratch\n")
    done = run(proctor, "lint", holder)
    assert file_result(proctor, "survey", holder, validation=[cite(done)]).code == 0
    waited = proctor("job", "wait", "survey")
    assert waited.code == 0, waited.out
    assert "footprint: none (a read-only job)" in waited.out


def test_wait_cannot_answer(world, proctor):
    root, holder = world
    unknown = proctor("job", "wait", "nope")
    assert unknown.code == 2
    fork(proctor, base_job())
    nothing = proctor("job", "wait", "feat")
    assert nothing.code == 2 and "nothing was filed for feat" in nothing.err
    assert proctor("job", "exit", "feat").code == 0
    ended = proctor("job", "wait", "feat")
    assert ended.code == 2 and "ended no_return" in ended.err


@pytest.mark.parametrize(
    "result, code, needle",
    [
        ({"schema_version": 1, "changed_paths": ["../outside.py"]}, 1, "PRC3041"),
        ({"schema_version": 2, "validation": [{"run": "run-nope", "output_ref": "sha256:" + "a" * 64}]}, 1, "PRC3051"),
        ({"schema_version": 2, "validation": [{"output_ref": "sha256:" + "a" * 64}]}, 2, "must name one run"),
        ({"schema_version": 1, "validation": [{"output_ref": "sha256:" + "a" * 64}]}, 2, "version 2 names each run"),
        ({"schema_version": 1, "passed": True}, 2, "no passed field"),
        ({"schema_version": 1, "verdict": "ok"}, 2, "unknown result field 'verdict'"),
        ({"changed_paths": []}, 2, "needs schema_version"),
        ({"schema_version": 1, "status": "finished"}, 2, "status 'finished'"),
    ],
)
def test_bad_results_record_nothing(world, proctor, result, code, needle):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    filed = proctor("job", "exit", "feat", "--stdin", stdin=json.dumps(result), cwd=holder)
    assert filed.code == code and needle in filed.err, filed.err
    row = {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}["feat"]
    assert row["state"] == "running" and "result" not in row


def test_result_citing_a_run_whose_output_is_gone(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    done = run(proctor, "test", holder)
    from proctor.paths import find_checkout, repo_state_dir
    from tests.store.store_oracle import remove_blob

    remove_blob(repo_state_dir(find_checkout(root)), done["output_ref"])
    filed = file_result(proctor, "feat", holder, validation=[cite(done)])
    assert filed.code == 1 and "PRC3052" in filed.err


def test_undecodable_result(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder)
    filed = proctor("job", "exit", "feat", "--stdin", stdin="{oops", cwd=holder)
    assert filed.code == 2 and "not a result in JSON" in filed.err


def test_result_schema_matches(world, proctor):
    import jsonschema

    schema = proctor("job", "exit", "--schema").json()
    jsonschema.validate(
        {
            "schema_version": 2,
            "changed_paths": ["a"],
            "validation": [{"run": "run-1", "command": "proctor run test", "output_ref": "sha256:" + "0" * 64}],
            "status": "done",
        },
        schema,
    )
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": 2, "passed": True}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"schema_version": 2, "validation": [{"output_ref": "sha256:" + "0" * 64}]}, schema)


def test_leased_wait_only_on_descendants(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    env = {"BAGGAGE": "proctor.lease=feat"}
    assert proctor("job", "fork", "feat/c", "--parent", "feat", "--read-only", env=env, cwd=holder).code == 0
    fork(proctor, {"id": "other", "check": "lint"})
    refused = proctor("job", "wait", "other", env=env, cwd=holder)
    assert refused.code == 1 and "PRC3042" in refused.err
    own = proctor("job", "wait", "feat/c", env=env, cwd=holder)
    assert own.code == 2 and "nothing was filed" in own.err, "allowed past the rule; nothing filed yet"


def test_refiling_is_refused(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    assert file_result(proctor, "feat", holder).code == 0
    again = file_result(proctor, "feat", holder)
    assert again.code == 1 and "filed already" in again.err


def test_wait_json(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    done = run(proctor, "test", holder)
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(done)]).code == 0
    waited = proctor("job", "wait", "feat", "-o", "json")
    assert waited.code == 0
    payload = waited.json()
    assert payload["state"] == "pass" and payload["grade"]["verdict"] == "pass"
    assert payload["grade"]["footprint"]["src/a.py"]["new"] == [[1, 1]]


def test_goal_paths_outside_the_repository_are_refused(world, proctor):
    root, holder = world
    for path in ("../../etc/passwd", "/etc"):
        refused = proctor(
            "job",
            "fork",
            "--stdin",
            stdin=json.dumps(
                {"id": "g", "write_paths": ["a.py"], "goals": [{"id": "x", "paths": [path], "expect": "absent"}]}
            ),
        )
        assert refused.code == 1 and "PRC3041" in refused.err


def test_retake_records_the_new_base_and_keeps_the_secret(world, proctor):
    """Taking the lease already held only records the base the tree is on now: the job's
    secret, when and where it was taken stay, and the holder's own edits are no divergence."""
    import hashlib

    from tests.guard.guard_lease import job_row

    root, holder = world
    fork(proctor, base_job())
    first = proctor("job", "exec", "feat", "-o", "json", cwd=holder, env={})
    assert first.code == 0
    taken = first.json()
    write(os.path.join(holder, "src", "a.py"), "edited\n")
    again = proctor("job", "exec", "feat", cwd=holder)
    assert again.code == 0 and "diverges" not in again.out
    assert again.out.startswith("retook feat") and "PROCTOR_NONCE is unchanged" in again.out
    assert "export PROCTOR_NONCE" not in again.out
    row = {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}["feat"]
    now = proctor("vcs", "checkpoint", "-o", "name", cwd=holder).out.strip()
    assert row["base"] == now and "+" in now and row["base"] != taken["base"], "the new base is recorded"
    assert row["base_diverges"] is False
    assert "nonce_sha256" not in row, "the listing shows no digest of the job's secret"
    assert job_row(root, "feat")["nonce_sha256"] == hashlib.sha256(taken["nonce"].encode()).hexdigest(), (
        "the secret is kept"
    )
    assert row["taken"] == taken["taken"] and row["checkout_root"] == taken["checkout_root"]


def test_handed_dirty_work_is_not_the_holders(world, proctor):
    root, holder = world
    write(os.path.join(root, "src", "a.py"), "x = 1\nok = 'already, uncommitted'\n")
    fork(proctor, base_job(id="lazy"))
    assert proctor("job", "exec", "lazy").code == 0
    run(proctor, "test", root)
    assert file_result(proctor, "lazy", root, changed_paths=[]).code == 0
    reasons = _rejected(proctor, "lazy")
    assert any(r.startswith("rule non-empty: nothing changed") for r in reasons), (
        "the uncommitted edit it was handed is not its work"
    )


def test_check_run_must_be_the_declared_command(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    toml = os.path.join(holder, "proctor.toml")
    original = open(toml).read()
    with open(toml, "w") as handle:
        handle.write(original.replace('command = "test -f src/a.py && grep -q ok src/a.py"', 'command = "true"'))
    loose = run(proctor, "test", holder)
    assert loose["exit_code"] == 0
    with open(toml, "w") as handle:
        handle.write(original)
    restored = file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(loose)])
    assert restored.code == 1 and f"changed after run {loose['id']} started" in restored.err, (
        "the tree the loose run saw (its proctor.toml included) is not the tree filed"
    )
    with open(toml, "w") as handle:
        handle.write(original.replace('command = "test -f src/a.py && grep -q ok src/a.py"', 'command = "true"'))
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(loose)]).code == 0
    reasons = _rejected(proctor)
    assert any('goal "check": run' in r and "ran `true`" in r for r in reasons)


def test_check_run_must_see_the_final_tree(world, proctor):
    root, holder = world
    _take_and_edit(proctor, holder, files={"src/a.py": "ok\n"})
    done = run(proctor, "test", holder)
    assert done["exit_code"] == 0
    write(os.path.join(holder, "src", "b.py"), "later\n")
    refused = file_result(proctor, "feat", holder, changed_paths=["src/a.py", "src/b.py"], validation=[cite(done)])
    assert refused.code == 1 and f"changed after run {done['id']} started" in refused.err
    # filed on the right tree, changed afterwards: wait grades the tree as it is then
    os.remove(os.path.join(holder, "src", "b.py"))
    assert file_result(proctor, "feat", holder, changed_paths=["src/a.py"], validation=[cite(done)]).code == 0
    write(os.path.join(holder, "src", "b.py"), "later\n")
    os.utime(os.path.join(holder, "src", "b.py"), (0, 0))  # set back: the mtime is not what decides
    reasons = _rejected(proctor)
    assert any(f"changed after run {done['id']} started" in r for r in reasons)


def test_claim_cannot_undo_the_one_way_rule(world, proctor):
    root, holder = world
    fork(proctor, base_job())
    fork(proctor, {"id": "other", "write_paths": ["src/z.py"], "check": "lint"})
    assert proctor("job", "exec", "feat", cwd=holder).code == 0
    second = proctor("job", "exec", "other", cwd=holder, env={"BAGGAGE": "proctor.lease=other"})
    assert second.code == 1 and "PRC3049" in second.err and "contested" in second.err
