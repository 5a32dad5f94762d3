"""Leases and evidence, held to what they promise against a holder that tries to get around
them: every cited ref names one run of this job, in its checkout, on its tree; a boundary
cannot shrink to nothing; the checkout's record says it is the one answering; a retake keeps
the secret; the guard's lease lookup reaps; and the small truths of the round trip.

Real git repositories and worktrees, proctor's own CLI and hook; the store is read back with
the database's own driver (tests/store/store_oracle.py).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys

import pytest

from proctor import api
from proctor.hook import run as hook_run
from tests.support import call_hook, git, make_repo
from tests.guard.guard_lease import denied, job_row, said

# `test` prints nothing whether it passes or fails, so a failing run's output is byte for
# byte a passing run's: the ref alone cannot tell them apart. `lint` is another target.
CONFIG = """
[targets.test]
command = "grep -q ok src/a.py"
[targets.lint]
command = "true"
"""


@pytest.fixture
def world(tmp_path, monkeypatch, new_repo):
    """The orchestrator's checkout, and two worktrees: the holder's and a stranger's."""
    root = new_repo("main", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    for name in ("a.py", "b.py"):
        with open(os.path.join(root, "src", name), "w") as handle:
            handle.write("x = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "src")
    holder, stranger = str(tmp_path / "holder"), str(tmp_path / "stranger")
    git(root, "worktree", "add", "-q", "-b", "holder", holder)
    git(root, "worktree", "add", "-q", "-b", "stranger", stranger)
    monkeypatch.chdir(root)
    return os.path.realpath(root), os.path.realpath(holder), os.path.realpath(stranger)


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def run(target: str, cwd: str, lease: str | None = None) -> dict:
    return api.run_target(target, cwd=cwd, lease=lease, warn=lambda _line: None)


def cite(made: dict, ref: str | None = None) -> dict:
    return {"run": made["id"], "output_ref": ref or made["output_ref"]}


def file(job: str, cwd: str, *entries: dict) -> tuple[bool, str]:
    """File a result citing `entries`; (filed, the refusal's text)."""
    from proctor import errors

    try:
        api.exit_job(
            job,
            {"schema_version": 2, "changed_paths": ["src/a.py"], "validation": list(entries)},
            cwd=cwd,
            warn=lambda _line: None,
        )
    except errors.ProctorError as exc:
        return False, "\n".join(exc.lines())
    return True, ""


# -- 1. evidence names one run ----------------------------------------------------------------


def test_a_holder_citing_other_runs_is_refused_each_time_with_the_reason(world):
    """The adversary of item 1: one after another, a ref from another checkout, from another
    target, from a run before the last change, and from a run of the right target whose
    output happens to match a passing one; each refused, the reason named."""
    root, holder, stranger = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    write(os.path.join(stranger, "src", "a.py"), "ok = 1\n")
    elsewhere = run("test", stranger)
    other_target = run("lint", holder)
    before = run("test", holder)
    assert elsewhere["exit_code"] == other_target["exit_code"] == before["exit_code"] == 0
    write(os.path.join(holder, "src", "a.py"), "bad = 1\n")  # the last change: the check fails now
    failing = run("test", holder)
    assert failing["exit_code"] == 1 and failing["output_ref"] == elsewhere["output_ref"], (
        "a failing run whose output is byte for byte a passing run's"
    )

    filed, why = file("feat", holder, cite(elsewhere))
    assert not filed and "PRC3056" in why and f"run {elsewhere['id']} was made in {stranger}, not in {holder}" in why
    filed, why = file("feat", holder, cite(other_target))
    assert not filed and f"run {other_target['id']} is of target lint, which grades nothing of feat" in why
    filed, why = file("feat", holder, cite(before))
    assert not filed and f"the tree in {holder} changed after run {before['id']} started" in why
    filed, why = file("feat", holder, cite(failing, elsewhere["output_ref"]) | {"run": elsewhere["id"]})
    assert not filed and "was made in" in why
    filed, why = file("feat", holder, {"output_ref": failing["output_ref"]})
    assert not filed and "must name one run" in why
    forged = "sha256:" + hashlib.sha256(b"all tests passed\n").hexdigest()
    filed, why = file("feat", holder, cite(failing, forged))
    assert not filed and f"as the output of run {failing['id']}, which printed {failing['output_ref']}" in why
    assert job_row(root, "feat")["state"] == "running", "nothing refused was filed"
    # the honest citation files, and grades on what the run did: it failed
    assert file("feat", holder, cite(failing)) == (True, "")
    waited = api.wait_job("feat", cwd=root)
    assert waited["job"]["state"] == "fail"
    [check] = [o for o in waited["grade"]["outcomes"] if o["name"] == "check"]
    assert check["subjects"] == [
        f"the newest cited run of test ({failing['id']}) exited 1; its output is {failing['output_ref']}"
    ]


def test_no_combination_of_other_runs_makes_a_job_pass(world):
    """Every subset (up to three) of runs from another checkout, another target, before the
    job was declared, before its last change, and the holder's own failing run, each cited with
    its own ref or another's: none is filed as passing evidence, and none grades pass."""
    from proctor import errors
    from proctor.jobs import take
    from proctor.jobs.lease import Caller
    from proctor.jobs.verify import grade
    from proctor.workspace import Workspace

    root, holder, stranger = world
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    early = run("test", holder)  # before the job exists
    api.fork({"id": "feat", "write_paths": ["src/a.py", "src/b.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    write(os.path.join(stranger, "src", "a.py"), "ok = 1\n")
    pool = [early, run("test", stranger), run("lint", holder), run("test", holder)]
    write(os.path.join(holder, "src", "b.py"), "y = 2\n")  # the last change, after the passing runs
    write(os.path.join(holder, "src", "a.py"), "no = 1\n")
    pool.append(run("test", holder))  # the one run on the final tree: it fails
    assert [r["exit_code"] for r in pool] == [0, 0, 0, 0, 1]
    refs = sorted({r["output_ref"] for r in pool})
    entries = [cite(r, ref) for r in pool for ref in refs]
    tried = passed = 0
    for size in (1, 2, 3):
        for combo in itertools.combinations(entries, size):
            tried += 1
            filed, _why = file("feat", holder, *combo)
            if not filed:
                continue
            with Workspace(root) as ws, ws.store.read() as conn:
                from proctor.store import rows

                graded = grade(conn, rows.get(conn, "feat"), ws.root, ws.state_dir)
                passed += graded.passed
            with Workspace(root) as ws:
                take.reopen(ws, "feat", Caller(None, None, "t"))
    assert tried == 25 and passed == 0  # five citable entries (every output is empty: one ref for all)
    with pytest.raises(errors.Refused):
        api.exit_job("feat", {"schema_version": 2, "validation": [cite(pool[1])]}, cwd=holder)


def test_the_tree_not_the_mtime_decides(world):
    """A run stands for the content it saw: a later edit set back in time still makes it stale,
    and committing the very same content does not."""
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    made = run("test", holder)
    git(holder, "commit", "-qam", "the work")  # same content, committed: still the tree the run saw
    assert file("feat", holder, cite(made)) == (True, "")
    write(os.path.join(holder, "src", "a.py"), "ok = 2\n")
    os.utime(os.path.join(holder, "src", "a.py"), (0, 0))
    waited = api.wait_job("feat", cwd=root)
    assert waited["job"]["state"] == "fail"
    [check] = [o for o in waited["grade"]["outcomes"] if o["name"] == "check"]
    assert any(f"changed after run {made['id']} started" in s for s in check["subjects"]), check


def test_an_altered_output_is_not_evidence(world):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "lint"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    made = run("lint", holder)
    assert file("feat", holder, cite(made)) == (True, "")
    from proctor.paths import find_checkout, repo_state_dir
    from tests.store.store_oracle import write_blob

    write_blob(repo_state_dir(find_checkout(root)), made["output_ref"], b"all tests passed\n")
    waited = api.wait_job("feat", cwd=root)
    assert waited["job"]["state"] == "fail"
    assert "no longer matches its digest" in json.dumps(waited["grade"])


# -- 2. a boundary cannot be shrunk to nothing --------------------------------------------------


def hook(payload: dict, env: dict) -> dict:
    return call_hook(payload, env=env)


def bash(root: str, command: str, env: dict, session: str = "s1") -> dict:
    return hook(
        {
            "session_id": session,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "toolu_1",
        },
        env,
    )


def write_call(root: str, path: str, env: dict, session: str = "s1") -> dict:
    return hook(
        {
            "session_id": session,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": path, "content": "x\n"},
            "tool_use_id": "toolu_2",
        },
        env,
    )


def test_shrinking_to_nothing_is_refused_and_the_boundary_holds(world, proctor):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test", "parent": None}, cwd=root)
    api.fork({"id": "feat/c", "parent": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    env = {"BAGGAGE": "proctor.lease=feat/c"}
    api.exec_job("feat/c", cwd=holder, environ={})
    for command in (
        "proctor job fork feat/c --write-paths ''",
        'proctor job fork --stdin <<\'EOF\'\n{"id": "feat/c", "write_paths": []}\nEOF',
    ):
        answer = bash(holder, command, env)
        assert denied(answer, "lease-store") and "no boundary at all" in said(answer), said(answer)
    refused = proctor("job", "fork", "feat/c", "--write-paths", "", cwd=holder, env=env)
    assert refused.code == 1 and "PRC3039" in refused.err
    assert job_row(root, "feat/c")["write_paths"] == ["src/a.py"]
    answer = write_call(holder, os.path.join(holder, "src", "b.py"), env)
    assert denied(answer, "lease-write-scope"), said(answer)


# -- 3. the checkout's record, and the orchestrator --------------------------------------------


def test_the_guard_refuses_the_orchestrator_flag_under_a_lease(world):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    env = {"BAGGAGE": "proctor.lease=feat", "PATH": os.environ["PATH"]}
    for command in (
        "proctor job fork other --criteria mine --orchestrator",
        "proctor job wait other --orchestrator",
        "python3 -m proctor job exit other --orchestrator",
        'F=--orchestrator; proctor job fork other --criteria mine "$F"',
        "proctor job fork other --criteria mine $(printf -- --orchestrator)",
        "proctor monitor list --orchestrator",
    ):
        answer = bash(holder, command, env)
        assert denied(answer, "lease-store"), (command, said(answer))
    # a session under no lease is the orchestrator; the flag is its own to pass
    free = bash(root, "proctor job fork other --criteria theirs --orchestrator", {})
    assert not denied(free), said(free)


def test_exec_worktree_takes_the_job_where_it_belongs(world, proctor, tmp_path):
    """`job exec ID --worktree PATH`: a worktree at the job's checkpoint, the job taken there;
    the orchestrator's checkout stays unbound, and a session running it is not bound."""
    root, holder, _ = world
    write(os.path.join(root, "src", "b.py"), "handed = True\n")  # uncommitted work the job is handed
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    checkpoint = job_row(root, "feat")["checkpoint"]
    assert "+" in checkpoint
    answer = bash(root, f"proctor job exec feat --worktree {tmp_path}/w1", {})
    assert not denied(answer), said(answer)
    made = proctor("job", "exec", "feat", "--worktree", str(tmp_path / "w1"), "-o", "json")
    assert made.code == 0, made.err
    taken = made.json()
    w1 = os.path.realpath(tmp_path / "w1")
    assert taken["checkout_root"] == w1 and taken["base"] == checkpoint and taken["base_diverges"] is False
    assert any("carried the uncommitted work" in n for n in taken["notes"]), taken["notes"]
    with open(os.path.join(w1, "src", "b.py")) as handle:
        assert handle.read() == "handed = True\n"
    assert proctor("vcs", "checkpoint", "-o", "name", cwd=w1).out.strip() == checkpoint
    # the orchestrator's checkout is bound to nobody: it forks as before
    assert proctor("job", "fork", "next", "--write-paths", "src/c.py", "--check", "test").code == 0
    # the session that ran it was not bound to feat
    outside = write_call(root, os.path.join(root, "README"), {})
    assert not denied(outside) and "lease feat" not in said(outside), said(outside)
    # refusals: a path in use, a job already taken, an unknown job; nothing is left behind
    again = proctor("job", "exec", "feat", "--worktree", str(tmp_path / "w2"))
    assert again.code == 1 and "a new worktree takes a job nobody has taken yet" in again.err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    assert proctor("job", "fork", "two", "--write-paths", "src/d.py", "--check", "test").code == 0
    taken_path = proctor("job", "exec", "two", "--worktree", str(busy))
    assert taken_path.code == 1 and "PRC3057" in taken_path.err and "not an empty directory" in taken_path.err
    assert not os.path.exists(tmp_path / "w2")
    assert "two" not in git(root, "worktree", "list")


def test_a_stale_handed_checkpoint_lands_on_its_revision_and_says_so(world, proctor, tmp_path):
    root, _, _ = world
    write(os.path.join(root, "src", "b.py"), "handed = True\n")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    write(os.path.join(root, "src", "b.py"), "moved on\n")  # the declaring checkout no longer holds it
    made = proctor("job", "exec", "feat", "--worktree", str(tmp_path / "w1"), "-o", "json").json()
    assert made["base_diverges"] is True
    assert any("no longer holds" in n for n in made["notes"]), made["notes"]


# -- 4. a retake keeps the secret ---------------------------------------------------------------


def test_a_retake_keeps_the_monitors_secret(tmp_path, monkeypatch, new_repo):
    """With the server up, the worker's PROCTOR_NONCE still manages its monitors after it
    takes its own job again (a retake used to mint a new one: UNAUTHORIZED)."""
    from tests.server.test_server import Server, cli

    root = new_repo("repo", "[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    api.fork({"id": "card", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    wt = str(tmp_path / "wt")
    git(root, "worktree", "add", "-q", "-b", "wt", wt)
    taken = api.exec_job("card", cwd=wt)
    cli(root, "server", "start")
    try:
        Server(root)
        env = {"PROCTOR_NONCE": taken["nonce"]}
        assert cli(wt, "monitor", "list", env=env).returncode == 0
        retaken = cli(wt, "job", "exec", "card")
        assert "PROCTOR_NONCE is unchanged" in retaken.stdout and "export PROCTOR_NONCE" not in retaken.stdout
        after = cli(wt, "monitor", "list", env=env, check=False)
        assert after.returncode == 0, after.stderr
        made = cli(
            wt, "monitor", "add", "--cmd", "true", "--interval", "10s", "--allow-unsandboxed", env=env, check=False
        )
        assert made.returncode == 0 and "on card" in made.stdout, made.stderr
    finally:
        cli(root, "server", "stop", check=False)


# -- 5. every read reaps, the guard's lease lookup included ------------------------------------


def test_a_deleted_checkout_ends_its_job_at_the_next_hook_call(world):
    root, holder, stranger = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork({"id": "feat/c", "parent": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    env = {"BAGGAGE": "proctor.lease=feat"}
    assert denied(write_call(root, os.path.join(root, "src", "b.py"), env), "lease-write-scope")
    shutil.rmtree(holder)
    answer = write_call(root, os.path.join(root, "src", "b.py"), env)
    assert not denied(answer), said(answer)
    assert f"names a job proctor ended now (no_return: taken in {holder}, which no longer exists)" in said(answer)
    # ended in the store by that call, the tree with it, with no CLI command run
    row = job_row(root, "feat")
    assert row["state"] == "no_return" and row["end_reason"] == f"taken in {holder}, which no longer exists"
    child = job_row(root, "feat/c")
    assert child["state"] == "no_return" and child["end_reason"] == "its parent feat ended in no_return"
    # and its path no longer belongs to anyone: another session writes it unadvised
    free = write_call(root, os.path.join(root, "src", "a.py"), {}, session="s2")
    assert "belongs to" not in said(free), said(free)


# -- 7. round trips and small truths ------------------------------------------------------------


def test_wait_lists_entries_and_marks_entered_lines(world, proctor):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py", "src/b.py"], "check": "lint"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    entered = proctor("job", "fork", "--stdin", stdin=json.dumps({"id": "feat", "enter": "src/b.py"}))
    assert entered.code == 0 and entered.out.startswith("entered src/b.py of feat for one write"), entered.out
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    write(os.path.join(holder, "src", "b.py"), "entered = 1\n")
    made = run("lint", holder)
    assert (
        proctor(
            "job",
            "exit",
            "feat",
            "--stdin",
            cwd=holder,
            stdin=json.dumps(
                {"schema_version": 2, "changed_paths": ["src/a.py", "src/b.py"], "validation": [cite(made)]}
            ),
        ).code
        == 0
    )
    waited = proctor("job", "wait", "feat")
    assert waited.code == 0, waited.out
    lines = waited.out.splitlines()
    assert any(line.startswith("  src/b.py: +1 -1") and "(entered by user:" in line for line in lines), waited.out
    assert not any(line.startswith("  src/a.py") and "entered" in line for line in lines)
    assert "entries:" in lines and any(line.startswith("  src/b.py: entered by user:") for line in lines)


def test_nothing_changed_names_the_checkpoint(world, proctor):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "lint"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    made = run("lint", holder)
    assert (
        proctor(
            "job",
            "exit",
            "feat",
            "--stdin",
            cwd=holder,
            stdin=json.dumps({"schema_version": 2, "validation": [cite(made)]}),
        ).code
        == 0
    )
    waited = proctor("job", "wait", "feat")
    revision = job_row(root, "feat")["checkpoint"].split("+")[0]
    assert f"footprint: nothing changed since {revision[:12]}" in waited.out, waited.out


def test_wait_checks_descendants_against_the_store(world, proctor):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py", "src/b.py"], "check": "lint"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    api.fork({"id": "feat/kid", "parent": "feat", "read_only": True}, cwd=holder)
    api.exit_job("feat/kid", cwd=holder, lease="feat/kid")
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    made = run("lint", holder)
    assert (
        proctor(
            "job",
            "exit",
            "feat",
            "--stdin",
            cwd=holder,
            stdin=json.dumps(
                {
                    "schema_version": 2,
                    "changed_paths": ["src/a.py"],
                    "validation": [cite(made)],
                    "descendants": ["feat/ghost"],
                }
            ),
        ).code
        == 0
    )
    waited = proctor("job", "wait", "feat")
    assert waited.code == 1
    assert "the result lists descendant feat/ghost, which the store does not carry beneath feat" in waited.out
    assert "the store carries descendant feat/kid beneath feat, which the result does not list" in waited.out


def test_an_unattributed_write_is_recorded_on_the_job_that_owns_the_path(world):
    root, _, _ = world
    api.fork({"id": "plan", "write_paths": ["src/**"], "check": "test"}, cwd=root)
    api.fork({"id": "plan/a", "parent": "plan", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    answer = write_call(root, os.path.join(root, "src", "a.py"), {})
    assert "src/a.py belongs to plan/a" in said(answer), said(answer)
    assert [u["path"] for u in job_row(root, "plan/a").get("unattributed", [])] == ["src/a.py"]
    assert not job_row(root, "plan").get("unattributed")


# -- an adversary's breaks, each first run for real ---------------------------------------------


def test_a_run_whose_environment_the_holder_changed_is_refused_by_the_guard(world, tmp_path):
    """`PATH=<fake>:$PATH proctor run test` really passes a check that fails (the oracle: the run
    itself); under a lease the guard refuses the call, in every spelling of the change."""
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "grep").write_text("#!/bin/sh\nexit 0\n")
    (fake / "grep").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    proc = subprocess.run(
        [os.sys.executable, "-m", "proctor", "run", "test"], cwd=holder, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, "the fake grep passes a check the tree fails: the attack is real"
    lease = {"BAGGAGE": "proctor.lease=feat"}
    for command in (
        f"PATH={fake}:$PATH proctor run test",
        f"env PATH={fake} proctor run test",
        f"export PATH={fake}:$PATH; proctor run test",
        "LD_PRELOAD=/tmp/x.so python3 -m proctor run test",
    ):
        answer = bash(holder, command, lease)
        assert denied(answer, "lease-store") and "environment it was given" in said(answer), (command, said(answer))
    assert not denied(bash(holder, "proctor run test", lease))


def test_a_flag_that_hides_the_disk_from_git_fails_the_job(world):
    """skip-worktree: the committed file is bad, the disk good; the run reads the disk and passes,
    git's diff reads the index. wait fails the job: the tree git reports is not the disk."""
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    write(os.path.join(holder, "src", "a.py"), "bad = 1\n")
    git(holder, "commit", "-qam", "bad")
    git(holder, "update-index", "--skip-worktree", "src/a.py")
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    made = run("test", holder)
    assert made["exit_code"] == 0
    assert git(holder, "show", "HEAD:src/a.py") == "bad = 1\n", "what would be integrated is the bad file"
    assert file("feat", holder, cite(made)) == (True, "")
    waited = api.wait_job("feat", cwd=root)
    assert waited["job"]["state"] == "fail"
    assert "the tree git reports" in json.dumps(waited["grade"]) and "src/a.py" in json.dumps(waited["grade"])


def test_an_executable_bit_git_is_told_to_ignore_fails_the_job(world):
    root, holder, _ = world
    with open(os.path.join(holder, "proctor.toml"), "a") as handle:
        handle.write('[targets.tool]\ncommand = "./tool.sh"\n')
    write(os.path.join(holder, "tool.sh"), "#!/bin/sh\nexit 0\n")
    git(holder, "add", "-A")
    git(holder, "commit", "-qm", "tool, not executable")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "tool"}, cwd=holder)
    api.exec_job("feat", cwd=holder, environ={})
    git(holder, "config", "core.fileMode", "false")
    os.chmod(os.path.join(holder, "tool.sh"), 0o755)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    made = run("tool", holder)
    assert made["exit_code"] == 0
    assert file("feat", holder, cite(made)) == (True, "")
    waited = api.wait_job("feat", cwd=holder, lease=api.ORCHESTRATOR)
    assert waited["job"]["state"] == "fail" and "tool.sh" in json.dumps(waited["grade"])


def test_a_tree_changed_while_the_run_ran_is_no_evidence(world):
    """A check that writes a file the repository does not ignore: the run says which, it is no
    evidence, and once the file is ignored the same check is."""
    root, holder, _ = world
    with open(os.path.join(holder, "proctor.toml"), "a") as handle:
        handle.write('[targets.cov]\ncommand = "date +%N > .coverage"\n')
    git(holder, "commit", "-qam", "cov")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "cov"}, cwd=holder)
    api.exec_job("feat", cwd=holder, environ={})
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    proc = subprocess.run(
        [os.sys.executable, "-m", "proctor", "run", "cov"], cwd=holder, capture_output=True, text=True
    )
    assert "the tree changed while cov ran (.coverage)" in proc.stderr and ".gitignore" in proc.stderr, proc.stderr
    made = run("cov", holder)
    filed, why = file("feat", holder, cite(made))
    assert not filed and f"changed while run {made['id']} ran" in why
    write(os.path.join(holder, ".gitignore"), ".coverage\n")
    made = run("cov", holder)
    assert made["tree"] == made["tree_end"]
    assert file("feat", holder, cite(made)) == (True, "")


def test_exec_worktree_carries_bytes_and_survives_a_nested_repository(world, tmp_path):
    """Handed work under eol=crlf arrives byte for byte; an untracked nested repository in the
    declaring checkout is left out, said so, with no traceback; a failed exec leaves the empty
    directory the caller named as it was."""
    root, _, _ = world
    write(os.path.join(root, ".gitattributes"), "*.txt text eol=crlf\n")
    git(root, "add", ".gitattributes")
    git(root, "commit", "-qm", "attrs")
    write(os.path.join(root, "src", "b.txt"), "handed\n")  # LF on disk, uncommitted
    make_repo(tmp_path / "main" / "inner")  # an untracked nested repository
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    taken = api.exec_job("feat", cwd=root, worktree=str(tmp_path / "w1"))
    with open(tmp_path / "w1" / "src" / "b.txt", "rb") as handle:
        assert handle.read() == b"handed\n"
    assert any("not carried: inner" in n for n in taken["notes"]), taken["notes"]
    empty = tmp_path / "empty"
    empty.mkdir()
    from proctor import errors

    with pytest.raises(errors.ProctorError):
        api.exec_job("feat", cwd=root, worktree=str(empty))  # taken already: refused before git runs
    assert empty.is_dir() and not list(empty.iterdir())
    inside = api.fork({"id": "two", "write_paths": ["src/c.py"], "check": "test"}, cwd=root)
    assert inside["id"] == "two"
    with pytest.raises(errors.Refused, match="inside the git directory"):
        api.exec_job("two", cwd=root, worktree=os.path.join(root, ".git", "wt"))


def test_a_worktree_inside_the_checkout_is_judged_by_its_own_binding(world, proctor):
    """`job exec --worktree .worktrees/w1` (the spec's own layout): a caller there that reports
    no session acts under that worktree's job, as the CLI there does."""
    root, _, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=root, worktree=os.path.join(root, ".worktrees", "w1"))
    inner = os.path.join(root, ".worktrees", "w1")
    payload = {
        "cwd": inner,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "echo x > src/b.py"},
    }
    out, code = hook_run(
        ["claude"], json.dumps(payload).encode(), {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    )
    answer = json.loads(out)
    assert denied(answer, "lease-write-scope") and "from marker" in said(answer), said(answer)
    refused = proctor("job", "fork", "other", "--check", "test", cwd=inner)
    assert refused.code == 1 and "tier marker" in refused.err


def test_orchestrator_is_refused_to_a_worker_however_it_is_reached(world, proctor, tmp_path):
    """The store's side of --orchestrator, for the spellings the guard cannot read: refused in a
    process whose BAGGAGE names a job in flight, and in a worker's worktree."""
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=root, worktree=str(tmp_path / "w1"))
    script = tmp_path / "escape.sh"
    script.write_text("proctor job fork feat --write-paths '' --check test --orchestrator\n")
    env = {**os.environ, "PATH": f"{os.path.dirname(os.sys.executable)}:{os.environ['PATH']}"}
    worker = subprocess.run(["sh", str(script)], cwd=str(tmp_path / "w1"), capture_output=True, text=True, env=env)
    assert worker.returncode == 1 and "it is that job's worker's" in worker.stderr, worker.stderr
    env["BAGGAGE"] = "proctor.lease=feat"
    claimed = subprocess.run(["sh", str(script)], cwd=root, capture_output=True, text=True, env=env)
    assert claimed.returncode == 1 and "BAGGAGE names lease feat" in claimed.stderr, claimed.stderr
    assert job_row(root, "feat")["write_paths"] == ["src/a.py"]
    # the orchestrator in its own checkout, bound to a job it declared there, may
    api.fork({"id": "here", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    api.exec_job("here", cwd=root)
    assert proctor("job", "fork", "next", "--write-paths", "src/c.py", "--check", "test", "--orchestrator").code == 0


@pytest.mark.parametrize("replacement", ["file", "empty directory"])
def test_a_checkout_replaced_by_something_else_is_gone(world, replacement):
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    shutil.rmtree(holder)
    if replacement == "file":
        open(holder, "w").close()
    else:
        os.mkdir(holder)
    answer = write_call(root, os.path.join(root, "src", "b.py"), {"BAGGAGE": "proctor.lease=feat"})
    assert not denied(answer) and "proctor ended now" in said(answer), said(answer)
    assert job_row(root, "feat")["state"] == "no_return"


def test_the_run_memo_reuses_a_hash_only_while_nothing_moved(world, monkeypatch):
    """A run digests the tree before and after; files hashed before are not hashed again when
    their inode, size, mtime and ctime stand still. An edit of the same size with its mtime set
    back still moves the ctime, so it is hashed again and seen."""
    from proctor.vcs import checkpoint, git as vgit

    root, holder, _ = world
    monkeypatch.setattr(checkpoint, "RACY_SECONDS", -1.0)  # trust any ctime in the past, for the test
    path = os.path.join(holder, "src", "a.py")
    write(path, "ok = 1\n")
    hashed_paths: list[bytes] = []
    real_run = vgit.run

    def counting(root_, *args, **kwargs):
        if "hash-object" in args:
            hashed_paths.extend(kwargs.get("input", b"").split(b"\n")[:-1])
        return real_run(root_, *args, **kwargs)

    monkeypatch.setattr(vgit, "run", counting)
    memo: dict = {}
    first = checkpoint.tree_entries(holder, memo)
    assert hashed_paths and memo
    hashed_paths.clear()
    assert checkpoint.tree_entries(holder, memo) == first and hashed_paths == [], "nothing moved: nothing hashed"
    stat = os.stat(path)
    write(path, "no = 1\n")  # the same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == stat.st_mtime_ns and os.stat(path).st_size == stat.st_size
    assert checkpoint.digest_of(checkpoint.tree_entries(holder, memo)) != checkpoint.digest_of(first)


# -- a second adversary's breaks ------------------------------------------------------------------


def _wait_fails_naming(root: str, needle: str) -> None:
    waited = api.wait_job("feat", cwd=root, lease=api.ORCHESTRATOR)
    assert waited["job"]["state"] == "fail", json.dumps(waited["grade"], indent=1)
    assert needle in json.dumps(waited["grade"]), json.dumps(waited["grade"], indent=1)


def _taken(world) -> tuple[str, str]:
    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=holder)
    return root, holder


def test_a_stat_cache_told_to_look_away_does_not_hide_a_rewrite(world):
    """core.trustctime false, the same size, the mtime set back: git's stat check calls the
    rewritten file clean. proctor's reads pin the checks back on, so the run on the old content
    is stale."""
    root, holder = _taken(world)
    path = os.path.join(holder, "src", "a.py")
    write(path, "ok = 1\n")
    os.utime(path, (os.stat(path).st_atime - 100, os.stat(path).st_mtime - 100))  # not racily clean
    git(holder, "add", "src/a.py")
    made = run("test", holder)
    assert made["exit_code"] == 0
    before = os.stat(path)
    git(holder, "config", "core.trustctime", "false")
    git(holder, "config", "core.checkStat", "minimal")
    write(path, "no = 1\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert subprocess.run(["git", "diff", "--quiet"], cwd=holder).returncode == 0, "git itself is fooled"
    filed, why = file("feat", holder, cite(made))
    assert not filed and f"changed after run {made['id']} started" in why


@pytest.mark.parametrize("how", ["ident", "clean filter"])
def test_content_git_would_store_as_something_else_fails_the_job(world, how):
    root, holder = _taken(world)
    if how == "ident":
        attributes = os.path.join(holder, "..", "attrs")
        write(attributes, "src/a.py ident\n")
        git(holder, "config", "core.attributesFile", attributes)
        write(os.path.join(holder, "src", "a.py"), "# $Id: ok $\n")
    else:
        git(holder, "config", "filter.fold.clean", "sed s/ok/no/")
        info = git(holder, "rev-parse", "--git-path", "info/attributes").strip()
        write(os.path.join(holder, info), "src/a.py filter=fold\n")
        write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    made = run("test", holder)
    assert made["exit_code"] == 0
    git(holder, "add", "src/a.py")
    stored = git(holder, "show", ":src/a.py")
    assert "ok" not in stored, f"what git stores fails the check: {stored!r}"
    assert file("feat", holder, cite(made)) == (True, "")
    _wait_fails_naming(root, "does not check out as this file")


def test_a_flagged_file_missing_from_disk_fails_the_job(world):
    root, holder = _taken(world)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    git(holder, "update-index", "--skip-worktree", "src/b.py")
    os.remove(os.path.join(holder, "src", "b.py"))
    made = run("test", holder)
    assert file("feat", holder, cite(made)) == (True, "")
    _wait_fails_naming(root, "src/b.py: flagged and missing from disk")


def test_a_symlink_out_of_the_checkout_fails_the_job(world, tmp_path):
    root, holder = _taken(world)
    outside = tmp_path / "ext.py"
    outside.write_text("ok = 1\n")
    os.remove(os.path.join(holder, "src", "a.py"))
    os.symlink(outside, os.path.join(holder, "src", "a.py"))
    made = run("test", holder)
    assert made["exit_code"] == 0
    assert file("feat", holder, cite(made)) == (True, "")
    outside.write_text("no = 1\n")  # the content changes where no digest looks
    _wait_fails_naming(root, "a symbolic link out of the checkout")


def _passes(checkout: str, job: str) -> None:
    """The honest finish: src/a.py made to pass, the check run and cited, and wait records pass."""
    write(os.path.join(checkout, "src", "a.py"), "ok = 1\n")
    made = run("test", checkout)
    assert file(job, checkout, cite(made)) == (True, "")
    waited = api.wait_job(job, cwd=checkout, lease=api.ORCHESTRATOR)
    assert waited["job"]["state"] == "pass", json.dumps(waited["grade"], indent=1)


def test_a_handed_symlink_is_not_the_holders_change(world):
    root, _, _ = world
    os.symlink("a.py", os.path.join(root, "src", "lnk"))  # uncommitted, handed with the checkpoint
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=root, environ={})
    _passes(root, "feat")


def test_a_run_where_the_target_was_moved_fails(world):
    root, holder = _taken(world)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    write(os.path.join(holder, "src", "src", "a.py"), "ok = 1\n")
    with open(os.path.join(holder, "proctor.toml"), "a") as handle:
        handle.write('\n[targets.test]\ncommand = "grep -q ok src/a.py"\ncwd = "src"\n')
    text = open(os.path.join(holder, "proctor.toml")).read()
    # one [targets.test] only: the moved one
    write(
        os.path.join(holder, "proctor.toml"),
        text.replace('[targets.test]\ncommand = "grep -q ok src/a.py"\n[targets', "[targets", 1),
    )
    made = run("test", holder)
    assert made["exit_code"] == 0 and made["cwd"].endswith("/src")
    assert file("feat", holder, cite(made)) == (True, "")
    _wait_fails_naming(root, "a check is graded where it was declared")


def test_a_worker_unsetting_its_baggage_still_works_its_job(world):
    """From inside a process started with BAGGAGE (an agent's), a command that empties it and
    runs proctor in the orchestrator's unbound checkout still acts as the holder: the store
    reads the BAGGAGE the ancestor was started with. And the guard refuses the spelling it sees."""
    root, holder = _taken(world)
    env = {
        **os.environ,
        "BAGGAGE": "proctor.lease=feat",
        "PATH": f"{os.path.dirname(os.sys.executable)}:{os.environ['PATH']}",
    }
    escape = subprocess.run(
        ["sh", "-c", "BAGGAGE= proctor job fork feat --write-paths src/a.py,src/b.py --check test; echo rc=$?"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert "rc=1" in escape.stdout and "was started with BAGGAGE proctor.lease=feat" in escape.stderr, escape.stderr
    assert job_row(root, "feat")["write_paths"] == ["src/a.py"]
    orchestrate = subprocess.run(
        ["sh", "-c", "env -u BAGGAGE proctor job fork x --check test --orchestrator"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    assert orchestrate.returncode == 1 and "refused --orchestrator" in orchestrate.stderr, orchestrate.stderr
    answer = bash(
        root, "BAGGAGE= python3 -c \"import os; os.system('proctor ls jobs')\"", {"BAGGAGE": "proctor.lease=feat"}
    )
    assert denied(answer, "lease-store") and "not the session's to change" in said(answer), said(answer)


@pytest.mark.parametrize(
    "replacement", [".git emptied", ".git pointing nowhere", "a new repository", "a symlink to another checkout"]
)
def test_a_checkout_that_is_no_longer_this_repository_is_gone(world, replacement, tmp_path):
    root, holder = _taken(world)
    shutil.rmtree(holder)
    if replacement == ".git emptied":
        os.makedirs(os.path.join(holder, ".git"))
    elif replacement == ".git pointing nowhere":
        write(os.path.join(holder, ".git"), "gitdir: /nonexistent/worktrees/holder\n")
    elif replacement == "a new repository":
        make_repo(__import__("pathlib").Path(holder))
    else:
        os.symlink(root, holder)
    answer = write_call(root, os.path.join(root, "src", "b.py"), {"BAGGAGE": "proctor.lease=feat"})
    assert not denied(answer) and "proctor ended now" in said(answer), said(answer)
    assert job_row(root, "feat")["state"] == "no_return"


def test_a_submodule_is_digested_by_what_it_holds(tmp_path, new_repo):
    from proctor.vcs import checkpoint

    lib = new_repo("lib")
    root = new_repo("app")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
    git(root, "commit", "-qm", "lib")
    git(os.path.join(root, "lib"), "config", "--local", "core.trustctime", "true")
    before = checkpoint.tree_digest(root)
    with open(os.path.join(root, "lib", "README"), "w") as handle:
        handle.write("changed inside the submodule\n")
    git(root, "config", "submodule.lib.ignore", "all")  # git is told to look away
    assert subprocess.run(["git", "diff", "--quiet"], cwd=root).returncode == 0
    assert checkpoint.tree_digest(root) != before


# -- a third adversary's breaks ----------------------------------------------------------------


def _as_worker(cwd: str, script: str, job: str) -> subprocess.CompletedProcess:
    """`script` run by a shell started with BAGGAGE naming `job`, as an agent's is; `; exit $?`
    keeps the shell the parent of what it runs."""
    env = {
        **os.environ,
        "BAGGAGE": f"proctor.lease={job}",
        "PATH": f"{os.path.dirname(os.sys.executable)}:{os.environ['PATH']}",
    }
    return subprocess.run(["sh", "-c", script + "; exit $?"], cwd=cwd, env=env, capture_output=True, text=True)


def test_a_worker_stays_its_job_after_filing(world):
    """Filed (exited), the job still is the worker's: a process beneath it that clears BAGGAGE
    cannot record its own pass, nor act as the orchestrator."""
    root, holder = _taken(world)
    write(os.path.join(holder, "src", "a.py"), "no = 1\n")
    made = run("test", holder)
    assert file("feat", holder, cite(made)) == (True, "")
    record = json.dumps({"id": "feat", "write_paths": ["src/a.py"], "check": "test", "state": "pass"})
    forged = _as_worker(root, f"printf '%s' '{record}' | BAGGAGE= proctor job fork --stdin", "feat")
    assert forged.returncode == 1 and "PRC3042" in forged.stderr, forged.stderr
    orchestrate = _as_worker(root, f"printf '%s' '{record}' | BAGGAGE= proctor job fork --stdin --orchestrator", "feat")
    assert orchestrate.returncode == 1 and "refused --orchestrator" in orchestrate.stderr
    assert job_row(root, "feat")["state"] == "exited"


def test_an_inherited_job_is_not_traded_for_the_checkouts_record(world):
    """A worker of feat in a checkout bound to another job acts as feat there, not as that job."""
    root, holder = _taken(world)
    api.fork({"id": "mine", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    api.exec_job("mine", cwd=root, environ={})
    ended = _as_worker(root, "BAGGAGE= proctor job exit mine", "feat")
    assert ended.returncode == 1 and "PRC3042" in ended.stderr, ended.stderr
    assert job_row(root, "mine")["state"] == "running"


def test_what_git_does_not_list_fails_the_job(world):
    """An untracked nested repository and a submodule directory never checked out hold files no
    git listing shows: they are digested by what they hold, and a job whose tree has them fails."""
    root, holder = _taken(world)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    make_repo(__import__("pathlib").Path(holder) / "src" / "vendor")
    made = run("test", holder)
    assert file("feat", holder, cite(made)) == (True, "")
    _wait_fails_naming(root, "an untracked nested repository")


def test_a_submodule_directory_not_checked_out_holds_no_hidden_files(tmp_path, new_repo):
    from proctor.jobs.verify import hidden_from_git
    from proctor.vcs import checkpoint

    lib = new_repo("lib")
    app = new_repo("app")
    git(app, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
    git(app, "commit", "-qm", "lib")
    wt = str(tmp_path / "wt")
    git(app, "worktree", "add", "-q", wt)  # submodules are not checked out in a new worktree
    assert os.listdir(os.path.join(wt, "lib")) == []
    before = checkpoint.tree_digest(wt)
    write(os.path.join(wt, "lib", "planted.py"), "x = 1\n")
    assert git(wt, "status", "--porcelain") == "", "git lists nothing"
    assert checkpoint.tree_digest(wt) != before
    assert any("not checked out" in h for h in hidden_from_git(wt, []))


def test_links_and_names_the_filters_cannot_check(world, tmp_path):
    root, holder = _taken(world)
    os.remove(os.path.join(holder, "src", "a.py"))
    os.symlink(tmp_path / "gone.py", os.path.join(holder, "src", "a.py"))  # dangling, out of the tree
    info = git(holder, "rev-parse", "--git-path", "info/attributes").strip()
    write(os.path.join(holder, info), "* ident\n")
    write(os.path.join(holder, "src", "x\ny.py"), "# $Id: ok $\n")
    from proctor.jobs.verify import hidden_from_git

    found = "\n".join(hidden_from_git(holder, ["src/a.py", "src/x\ny.py"]))
    assert "a symbolic link out of the checkout" in found and "a name holding a newline" in found, found


def test_honest_sparse_and_ident_checkouts_pass(world, tmp_path):
    """False rejections: a checkout taken sparse leaves files out by design; an edited file under
    `ident` still carries its old blob's id until git checks it out again."""
    root, _, _ = world
    write(os.path.join(root, "lib", "keep.c"), "/* $Id$ */\nint x = 1;\n")
    write(os.path.join(root, ".gitattributes"), "*.c ident\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "c with ident")
    sparse = str(tmp_path / "sparse")
    git(root, "worktree", "add", "-q", "--no-checkout", sparse)
    git(sparse, "sparse-checkout", "set", "src")
    git(sparse, "checkout", "-q")
    assert not os.path.exists(os.path.join(sparse, "lib", "keep.c"))
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("feat", cwd=sparse)
    write(os.path.join(sparse, "src", "a.py"), "ok = 1\n")
    made = run("test", sparse)
    assert file("feat", sparse, cite(made)) == (True, "")
    assert api.wait_job("feat", cwd=root, lease=api.ORCHESTRATOR)["job"]["state"] == "pass"
    # ident: the holder edits another line of an ident file in a full checkout
    full = str(tmp_path / "full")
    git(root, "worktree", "add", "-q", full)
    api.fork({"id": "c", "write_paths": ["lib/keep.c", "src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("c", cwd=full)
    with open(os.path.join(full, "lib", "keep.c")) as handle:
        text = handle.read()
    assert "$Id: " in text
    write(os.path.join(full, "lib", "keep.c"), text.replace("int x = 1;", "int x = 2;"))
    write(os.path.join(full, "src", "a.py"), "ok = 1\n")
    made = run("test", full)
    assert file("c", full, {"run": made["id"], "output_ref": made["output_ref"]}) == (True, "")
    waited = api.wait_job("c", cwd=root, lease=api.ORCHESTRATOR)
    assert waited["job"]["state"] == "pass", json.dumps(waited["grade"], indent=1)


# -- a fourth adversary's breaks -----------------------------------------------------------------


def test_deep_nesting_and_an_ended_job_leave_a_worker_a_worker(world, tmp_path):
    """Nesting 150 shells beneath the worker, or its job ending in fail, does not turn a
    process started under the job into the orchestrator."""
    root, holder = _taken(world)
    record = json.dumps({"id": "feat", "write_paths": ["src/a.py"], "check": "test", "state": "pass"})
    bottom = tmp_path / "bottom.sh"
    bottom.write_text(f"printf '%s' '{record}' | proctor job fork --stdin\n")
    for level in range(150):
        nxt = tmp_path / f"n{level}.sh"
        nxt.write_text(f"sh {bottom}; exit $?\n")
        bottom = nxt
    deep = _as_worker(root, f"env -u BAGGAGE sh {bottom}", "feat")
    assert deep.returncode == 1 and "was started with BAGGAGE proctor.lease=feat" in deep.stderr, deep.stderr[-500:]
    api.exit_job("feat", cwd=holder, lease="feat")  # ended: no_return
    ended = _as_worker(root, f"printf '%s' '{record}' | BAGGAGE= proctor job fork --stdin", "feat")
    assert ended.returncode == 1 and "PRC3047" in ended.stderr, ended.stderr
    assert job_row(root, "feat")["state"] == "no_return"


def test_lease_flag_cannot_name_a_job_outside_the_inherited_one(world):
    root, holder = _taken(world)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    ended = _as_worker(root, "proctor job exit other --lease other", "feat")
    assert ended.returncode == 1 and "PRC3042" in ended.stderr, ended.stderr
    assert job_row(root, "other")["state"] == "declared"


def test_a_file_swapped_during_the_run_and_back_makes_it_no_evidence(world):
    root, holder, _ = world
    for checkout in (root, holder):
        with open(os.path.join(checkout, "proctor.toml"), "a") as handle:
            handle.write('[targets.slow]\ncommand = "sleep 1.5; grep -q ok src/a.py; r=$?; sleep 2; exit $r"\n')
        git(checkout, "commit", "-qam", "slow")
    api.fork({"id": "slow", "write_paths": ["src/a.py"], "check": "slow"}, cwd=root)
    api.exec_job("slow", cwd=holder)
    path = os.path.join(holder, "src", "a.py")
    write(path, "no = 1\n")
    # good from 0.5 s to 2.5 s of a run that reads it at 1.5 s and ends at 3.5 s: a second each side
    swapper = subprocess.Popen(
        ["sh", "-c", f"sleep 0.5; printf 'ok = 1\\n' > {path}; sleep 2; printf 'no = 1\\n' > {path}"]
    )
    made = run("slow", holder)
    swapper.wait()
    assert made["exit_code"] == 0, "the check saw the good file"
    assert made["tree_moved"] == ["src/a.py"] and made["tree"] != made["tree_end"]
    filed, why = file("slow", holder, cite(made))
    assert not filed and "changed while run" in why


def test_a_symlink_to_an_ignored_file_fails_the_job(world):
    root, holder = _taken(world)
    write(os.path.join(holder, ".gitignore"), "build/\n")
    write(os.path.join(holder, "build", "a.py"), "ok = 1\n")
    os.remove(os.path.join(holder, "src", "a.py"))
    os.symlink("../build/a.py", os.path.join(holder, "src", "a.py"))
    made = run("test", holder)
    assert made["exit_code"] == 0
    assert file("feat", holder, cite(made)) == (True, "")
    _wait_fails_naming(root, "which git ignores")


def test_a_read_only_jobs_run_is_tied_to_its_tree(world):
    root, holder, _ = world
    api.fork({"id": "look", "read_only": True, "check": "test"}, cwd=root)
    api.exec_job("look", cwd=holder)
    path = os.path.join(holder, "src", "a.py")
    write(path, "ok = 1\n")
    made = run("test", holder)
    git(holder, "checkout", "--", "src/a.py")  # reverted: the check fails on the tree there is
    filed, why = file("look", holder, cite(made))
    assert not filed and "changed after run" in why


# -- a fifth review: what an honest user hit -----------------------------------------------------


def test_redeclaring_a_running_job_keeps_what_taking_it_recorded(world, proctor):
    import hashlib

    root, holder, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test", "timeout": "2h"}, cwd=root)
    taken = api.exec_job("feat", cwd=holder)
    before = job_row(root, "feat")
    row = {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}["feat"]
    again = proctor("job", "fork", "--stdin", stdin=json.dumps({**row, "criteria": "clearer now"}))
    assert again.code == 0, again.err
    after = job_row(root, "feat")
    assert after["criteria"] == "clearer now"
    for field in ("nonce_sha256", "taken", "checkout_root", "base", "sparse", "deadline"):
        assert after.get(field) == before.get(field), field
    assert after["nonce_sha256"] == hashlib.sha256(taken["nonce"].encode()).hexdigest()


def test_a_file_touched_but_unchanged_is_no_change(world):
    root, holder = _taken(world)
    write(os.path.join(holder, "src", "a.py"), "ok = 1\n")
    import time as _time

    _time.sleep(1.1)  # past the index's own second: git trusts its stat data, and sees it moved
    readme = os.path.join(holder, "README")
    with open(readme + ".new", "w") as handle:
        handle.write(open(readme).read())
    os.replace(readme + ".new", readme)  # as sed -i does: the same bytes, a new inode
    made = run("test", holder)
    assert file("feat", holder, cite(made)) == (True, "")
    waited = api.wait_job("feat", cwd=root, lease=api.ORCHESTRATOR)
    assert waited["job"]["state"] == "pass", json.dumps(waited["grade"], indent=1)
    assert waited["grade"]["changed"] == ["src/a.py"]


def test_a_worktree_inside_the_checkout_is_not_its_content(world):
    """A job taken with --worktree .worktrees/w1 does not make the orchestrator's own checkout
    carry an "untracked nested repository"."""
    root, _, _ = world
    write(os.path.join(root, ".gitignore"), "")  # not ignored: the worktree shows as untracked
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "ignore nothing")
    api.fork({"id": "far", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    api.exec_job("far", cwd=root, worktree=os.path.join(root, ".worktrees", "w1"))
    api.fork({"id": "here", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("here", cwd=root, environ={})
    _passes(root, "here")


def test_a_holder_ends_a_job_beneath_its_own(world, proctor):
    root, holder = _taken(world)
    api.fork({"id": "feat/c", "parent": "feat", "read_only": True}, cwd=holder)
    assert proctor("job", "exit", "feat/c", cwd=holder).code == 0
    assert job_row(root, "feat/c")["state"] == "no_return"


def test_exec_prints_shell_lines_that_eval_safely(world, proctor, tmp_path):
    root, _, _ = world
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    target = tmp_path / "a dir;echo pwned"
    took = proctor("job", "exec", "feat", "--worktree", str(target))
    assert took.code == 0, took.err
    lines = [line for line in took.out.splitlines() if line.startswith(("cd ", "export "))]
    script = "\n".join(lines) + "\npwd\nprintf '%s\\n' \"$BAGGAGE\"\n"
    done = subprocess.run(["sh", "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and "pwned" not in done.stdout.replace(str(target), ""), done.stdout
    assert done.stdout.splitlines()[-2:] == [os.path.realpath(target), "proctor.lease=feat"]


def test_the_server_is_nobodys_worker(world):
    """A server started under a lease would hand it to every job's monitors: a leased caller is
    refused, and so is one claiming to be the orchestrator with the lease in its environment; a
    server the person starts carries no lease."""
    from tests.server.test_server import Server, cli

    root, holder = _taken(world)
    env = {"BAGGAGE": "proctor.lease=feat"}
    for argv in (("server", "start"), ("server", "start", "--orchestrator"), ("server", "start", "--foreground")):
        refused = cli(root, *argv, env=env, check=False)
        assert refused.returncode != 0 and (
            "SERVER_LEASED_CALLER" in refused.stdout + refused.stderr or "PRC3042" in refused.stdout + refused.stderr
        ), refused
    assert cli(root, "server", "status", check=False).returncode != 0, "no server was started"
    person = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    subprocess.run(
        [sys.executable, "-m", "proctor", "server", "start"],
        cwd=root,
        env=person,
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        pid = Server(root).pid
        with open(f"/proc/{pid}/environ", "rb") as handle:
            assert b"BAGGAGE=" not in handle.read()
    finally:
        cli(root, "server", "stop", check=False)
