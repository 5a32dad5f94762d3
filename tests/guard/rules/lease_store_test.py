"""proctor/guard/rules/lease_store.py: lease-store, a leased session's proctor commands and MCP tools on jobs not its own."""

from __future__ import annotations

import json
import os

import pytest

from proctor import api, errors
from tests.guard.guard_lease import denied, job_row, judge, proctor_path, said, take_here
from tests.guard.guard_lease import ws as lease_ws  # noqa: F401 (a fixture, for `ws` below)
from tests.guard.test_guard_adversary import bash, run
from tests.hook.world import LEASED, event, leased_repo, reason


@pytest.fixture
def ws(request, new_repo, monkeypatch):
    """Two worlds answer to `ws` here: a test that calls the `hook` fixture gets the hook's (jobs
    feat and other: tests/hook/world.py), any other guard_lease's (w1, w1/sub, other)."""
    if "hook" in request.fixturenames:
        return leased_repo(new_repo, monkeypatch)
    return request.getfixturevalue("lease_ws")


# -- through the hook, in the hook's world (tests/hook/world.py) ------------------------------


def test_store_commands(ws, hook):
    fork = lambda cmd: hook(event(ws, "Bash", {"command": cmd}), env=LEASED)  # noqa: E731
    assert denied(fork("proctor job fork other --write-paths src/z.py --check test"), "lease-store")
    assert fork("proctor job fork feat/kid --parent feat --write-paths src/a.py --check test") == {}
    assert fork("proctor job fork feat --write-paths src/a.py") == {}
    heredoc_ok = 'proctor job fork --stdin <<\'EOF\'\n{"id": "feat/k2", "parent": "feat", "read_only": true}\nEOF'
    assert fork(heredoc_ok) == {}
    heredoc_bad = 'proctor job fork --stdin <<\'EOF\'\n{"id": "x", "read_only": true}\nEOF'
    assert denied(fork(heredoc_bad), "lease-store")
    assert denied(fork("proctor job wait other"), "lease-store")
    api.fork({"id": "feat/kid", "parent": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=ws)
    assert fork("proctor job wait feat/kid") == {}


def test_store_refuses_widening_and_unreadable_records(ws, hook):
    fork = lambda cmd, **kw: hook(event(ws, "Bash", {"command": cmd}, **kw), env=LEASED)  # noqa: E731
    assert denied(fork("proctor job fork feat --write-paths src/a.py,src/b.py"), "lease-store")
    assert denied(fork("proctor job fork kid --parent feat --write-paths src/b.py --check test"), "lease-store")
    assert denied(fork("cat rec.json | proctor job fork --stdin"), "lease-store")
    assert fork("proctor job fork feat --write-paths src/gen/x.py") == {}, "narrowing by containment"


def test_unbound_checkout_allows_only_read_only_children(ws, hook):
    post = event(
        ws,
        "Agent",
        {"prompt": "lease: feat\ngo", "description": "x"},
        name="PostToolUse",
        tool_response={"status": "async_launched", "agentId": "a1"},
    )
    assert hook(post) == {}
    kid = hook(
        event(
            ws,
            "Bash",
            {"command": "proctor job fork kid --parent feat --write-paths src/a.py --check test"},
            agent_id="a1",
        )
    )
    assert denied(kid, "lease-store") and "bound to nobody" in reason(kid)
    assert hook(event(ws, "Bash", {"command": "proctor job fork look --parent feat --read-only"}, agent_id="a1")) == {}


def test_monitor_commands_need_the_jobs_secret(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "proctor monitor remove 3"}), env=LEASED)
    assert denied(answer, "lease-store") and "PROCTOR_NONCE" in reason(answer)
    assert hook(event(ws, "Bash", {"command": "proctor monitor list"}), env={**LEASED, "PROCTOR_NONCE": "secret"}) == {}
    assert hook(event(ws, "Bash", {"command": "proctor monitor list"})) == {}, "a person uses the token"


def test_a_leased_session_cannot_run_the_hook_to_rebind_itself(ws, hook):
    """A hand-made `proctor hook` event, run by the session itself, would record a `job exec`
    of another job for the session's own id: the session could move itself out of its lease."""
    assert hook(event(ws, "Bash", {"command": "proctor job exec feat"}, session="s9")) == {}
    forged = json.dumps(event(ws, "Bash", {"command": "proctor job exec other"}, session="s9"))
    for command in (
        f"echo '{forged}' | proctor hook claude --lease other",
        f"printf %s '{forged}' | python3 -m proctor hook claude",
    ):
        answer = hook(event(ws, "Bash", {"command": command}, session="s9"))
        assert denied(answer, "lease-store") and "does not run the guard's hook itself" in reason(answer)
    after = hook(event(ws, "Write", {"file_path": os.path.join(ws, "README")}, session="s9"))
    assert "acting under lease feat" in reason(after), "the session still acts under its own job"


# -- proctor's MCP tools, in guard_lease's world --------------------------------------------

# The guard sees proctor's MCP tools: a host reports them to the hook as mcp__proctor__<tool>
# (opencode: proctor_<tool>; Gemini CLI: an mcp_context naming the server), and the lease-store
# rule judges each as it judges the same command in a shell. The session holds w1 (plan/w1/**,
# with w1/sub beneath it); `other` holds src/**.

HOSTS = ["claude", "codex", "gemini", "opencode"]


@pytest.mark.parametrize("host", HOSTS)
def test_a_job_put_that_widens_its_own_paths_is_denied(ws, host):  # noqa: F811
    answer = judge(ws, "job_put", {"id": "w1", "write_paths": ["plan/w1/**", "src/b.py"]}, host)
    assert denied(answer, "lease-store"), said(answer)
    assert "src/b.py widens your write paths" in said(answer)
    assert "job_put w1" in said(answer)


@pytest.mark.parametrize("host", HOSTS)
def test_a_child_inside_its_own_paths_passes(ws, host):  # noqa: F811
    answer = judge(
        ws, "job_put", {"id": "w1/child", "parent": "w1", "write_paths": ["plan/w1/c.py"], "check": "test"}, host
    )
    assert not denied(answer), said(answer)


@pytest.mark.parametrize(
    "record, words",
    [
        ({"id": "fresh", "write_paths": ["plan/w1/x.py"]}, "may fork only children of its own job"),
        ({"id": "w1/c2", "parent": "w1", "write_paths": ["src/b.py"]}, "lies outside w1's write paths"),
        ({"id": "other", "parent": "w1", "write_paths": ["plan/w1/x.py"]}, "exists already"),
        ({"id": "w1", "criteria": "easier now"}, "criteria of w1 are its forking session's"),
        ({"id": "w1", "write_paths": []}, "leaves no boundary at all"),
        ({"id": "w1/c3", "parent": "w1", "write_paths": ["plan/w1/y.py"], "depends_on": ["other"]}, "reaches past"),
        ({"id": "other", "enter": "src/b.py"}, "may fork only children of its own job"),
    ],
)
def test_job_put_is_judged_as_a_fork_record(ws, record, words):  # noqa: F811
    answer = judge(ws, "job_put", record)
    assert denied(answer, "lease-store"), said(answer)
    assert words in said(answer)


def test_shrinking_its_own_paths_passes(ws):  # noqa: F811
    take_here(ws)  # the checkout is bound to w1: the store sees the fork as w1's holder's
    answer = judge(ws, "job_put", {"id": "w1", "write_paths": ["plan/w1/a.py"]})
    assert not denied(answer), said(answer)


def test_shrinking_its_own_paths_where_the_store_cannot_see_the_lease_is_denied(ws):  # noqa: F811
    """The hook's lease (--lease here) need not be the shell's: in a checkout bound to nobody the
    fork's proctor may see no lease and take the record as the forking session's new plan,
    clearing what it leaves out (the one-author cases below put it through bash)."""
    answer = judge(ws, "job_put", {"id": "w1", "write_paths": ["plan/w1/a.py"]})
    assert denied(answer, "lease-store"), said(answer)
    assert "take the job in this checkout first" in said(answer)


@pytest.mark.parametrize(
    "tool, args, words",
    [
        ("job_wait", {"id": "w1"}, "waits only on jobs forked beneath it"),
        ("job_wait", {"id": "other"}, "waits only on jobs forked beneath it"),
        ("job_exit", {"id": "other"}, "ends only its own job or one forked beneath it"),
        ("job_exit", {"id": "other", "result": {"schema_version": 2}}, "ends only its own job"),
        ("job_exec", {"id": "other"}, "taking a lease is one-way"),
    ],
)
def test_job_tools_on_a_job_not_its_own_are_denied(ws, tool, args, words):  # noqa: F811
    answer = judge(ws, tool, args)
    assert denied(answer, "lease-store"), said(answer)
    assert words in said(answer)


@pytest.mark.parametrize(
    "tool, args",
    [
        ("job_wait", {"id": "w1/sub"}),
        ("job_exit", {"id": "w1", "result": {"schema_version": 2}}),
        ("job_exit", {"id": "w1/sub"}),
        ("job_exec", {"id": "w1"}),
        ("vcs_checkpoint", {}),
        ("jobs_list", {}),
        ("job_describe", {"id": "other"}),
    ],
)
def test_the_holders_own_calls_pass(ws, tool, args):  # noqa: F811
    answer = judge(ws, tool, args)
    assert not denied(answer), said(answer)


@pytest.mark.parametrize("tool", ["monitor_add", "monitor_list", "monitor_remove", "monitor_events"])
def test_monitor_tools_need_the_jobs_secret(ws, tool):  # noqa: F811
    args = (
        {"command": "true", "interval": "10s"}
        if tool == "monitor_add"
        else {"id": 3}
        if tool == "monitor_remove"
        else {}
    )
    answer = judge(ws, tool, args)
    assert denied(answer, "lease-store"), said(answer)
    assert "PROCTOR_NONCE" in said(answer)
    answer = judge(ws, tool, args, environ_extra={"PROCTOR_NONCE": "s3cr3t"})
    assert not denied(answer), said(answer)


# One author per job, judged once: the guard (at the call, the lease-store rule) and the store
# (at the fork) read the same check, jobrecord.one_author, so for every record a leased session
# may put, the two agree. Each case is put both ways in the same repository: through the hook as
# proctor's MCP job_put, and through the store as a fork under the lease. The session holds w1
# (plan/w1/**, with the untaken child w1/sub beneath it); `other` holds src/**.

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


# A holder "shrinks its own write paths, changing nothing else of its row", and
# jobrecord.one_author compares only the fields a record names with the row. A proctor that sees
# no lease (the hook's lease is --lease here, and the shell has no BAGGAGE) takes the same record
# as the forking session's full replacement, where an absent field is cleared: `proctor job fork
# w1 --write-paths 'plan/w1/**' --check test` would drop w1's deny_paths, read_paths and
# deadline, and `proctor job fork w1 --check test` its write paths. The guard therefore refuses a
# holder's fork of its own row in a checkout not bound to its job (take it there first). Each
# command is put through the hook and then run for real, and the row read back. Found by an
# adversarial review.


def test_a_restated_own_row_keeps_what_it_does_not_name(ws, tmp_path):  # noqa: F811
    # the forking session narrows w1: a deny path, explicit reads, a deadline
    api.fork(
        {
            "id": "w1",
            "write_paths": ["plan/w1/**"],
            "deny_paths": ["plan/w1/secret.py"],
            "read_paths": ["plan/w1"],
            "timeout": "1h",
            "check": "test",
        },
        cwd=ws,
    )
    before = job_row(ws, "w1")
    assert before["deny_paths"] == ["plan/w1/secret.py"] and before["deadline"]
    command = "proctor job fork w1 --write-paths 'plan/w1/**' --check test"
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    after = job_row(ws, "w1")
    lost = {
        k: (before.get(k), after.get(k))
        for k in ("deny_paths", "read_paths", "timeout", "deadline")
        if before.get(k) != after.get(k)
    }
    assert denied(answer, "lease-store") or not lost, (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode}; w1 lost {lost}"
    )


def test_a_restatement_that_names_no_write_paths_does_not_empty_them(ws, tmp_path):  # noqa: F811
    """`proctor job fork w1 --check test`: no field changed as the guard reads it (write_paths is
    not named, so neither "empty" nor "widens" is found); as a full replacement it leaves w1, a
    root job, with NO write paths, "no boundary at all", and its holder then writes docs/."""
    assert denied(bash(ws, "echo x > docs/c.md"), "lease-write-scope") or denied(bash(ws, "echo x > docs/c.md"))
    command = "proctor job fork w1 --check test"
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    after = job_row(ws, "w1")
    write_after = bash(ws, "echo x > docs/c.md")
    assert denied(answer, "lease-store"), (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode} {ran.stderr[-200:]}; w1's "
        f"write_paths now {after.get('write_paths')}; its holder's write of docs/c.md: {said(write_after)}"
    )


# lease-store judges a `proctor job fork --stdin` record by what that fork itself reads on
# standard input: its own here-document or here-string, when nothing in it expands
# (shell.Writes.stdins). It used to judge "the command's one here-document" as written: an
# unquoted one that bash expands (<<EOF with $(...)), another command's (`cat >/dev/null <<'EOF'
# ...; echo ... | proctor job fork --stdin`) and one a later here-string overrides (`<<'EOF'
# <<<'...'`) each let the fork read a record the guard never saw. A read path is read as the
# store reads it (split at `#` first). Each command is put through the hook and then run for
# real, as a worker whose shell carries no BAGGAGE, and the row the store keeps is read back.
# Found by an adversarial review.

BENIGN = '{"id": "w1/esc", "parent": "w1", "write_paths": ["plan/w1/x.py"], "check": "test"}'
EVIL = '{"id": "w1/esc", "parent": "w1", "write_paths": ["docs/**"], "check": "test"}'


COMMANDS = {
    # an unquoted here-document: the guard reads plan/w1/$(echo ..)/../docs/** as plan/w1/docs/**,
    # bash hands proctor plan/w1/../../docs/**, which the store reads as docs/**
    "unquoted-heredoc": (
        "proctor job fork --stdin <<EOF\n"
        '{"id": "w1/esc", "parent": "w1", "write_paths": ["plan/w1/$(echo ..)/../docs/**"], "check": "test"}\n'
        "EOF"
    ),
    # the one heredoc belongs to cat; the fork reads the pipe
    "heredoc-of-another-command": f"cat >/dev/null <<'EOF'\n{BENIGN}\nEOF\necho '{EVIL}' | proctor job fork --stdin",
    # the fork's own heredoc, then a here-string after it: the last redirection of stdin wins
    "here-string-after-heredoc": f"proctor job fork --stdin <<'EOF' <<<'{EVIL}'\n{BENIGN}\nEOF",
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_guard_judges_the_record_the_fork_reads(ws, tmp_path, name):  # noqa: F811
    command = COMMANDS[name]
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    kept = job_row(ws, "w1/esc")["write_paths"] if ran.returncode == 0 else None
    assert denied(answer, "lease-store"), (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode} {ran.stderr[-300:]}; "
        f"w1/esc's stored write_paths: {kept}"
    )


def test_the_guard_reads_a_read_path_as_the_store_does(ws, tmp_path):  # noqa: F811
    """The guard used to normalise a read entry whole (`src#x/../plan/w1/y` -> plan/w1/y,
    inside w1's boundary); the store splits it at # first (claims.split_entry: the path `src`,
    a "declaration" x/../plan/w1/y), and a read boundary of `src` covers all of src/."""
    command = (
        "proctor job fork w1/esc --parent w1 --write-paths plan/w1/x.py --check test --read-paths 'src#x/../plan/w1/y'"
    )
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    kept = job_row(ws, "w1/esc").get("read_paths") if ran.returncode == 0 else None
    from proctor.store import rows

    boundary = rows.read_boundary(job_row(ws, "w1/esc"), lambda j: None) if ran.returncode == 0 else None
    peek = None
    if ran.returncode == 0:
        from proctor import api
        from tests.guard.guard_lease import read_event
        from tests.support import call_hook

        api.exec_job("w1/esc", cwd=ws, lease="w1/esc")
        peek = said(call_hook(read_event(ws, "src/b.py"), "claude", None, ["--lease", "w1/esc"], drop=("BAGGAGE",)))
    assert denied(answer, "lease-store"), (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode} {ran.stderr[-300:]}; "
        f"w1/esc's stored read_paths: {kept}, its read boundary {boundary}; its holder's Read of src/b.py: {peek}"
    )
