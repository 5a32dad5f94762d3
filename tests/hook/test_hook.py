"""proctor hook: each host's real input in, the right verdict in the form that host honours
out; every lease row denies or advises, and passes where it should; the hook fails open."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support import call_hook, git
from proctor import api
from proctor.hook import run as hook_run

CONFIG = """
[targets.test]
command = "true"
[targets.full]
command = "proctor run ci"
[targets.ci]
command = "make ci"
"""


@pytest.fixture
def ws(new_repo, monkeypatch):
    root = new_repo("repo", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    monkeypatch.chdir(root)
    api.fork(
        {"id": "feat", "write_paths": ["src/a.py", "src/gen/**"], "deny_paths": ["src/gen/secret.py"], "check": "test"},
        cwd=root,
    )
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    return root


def event(root, tool, tool_input, name="PreToolUse", session="s1", **extra):
    return {
        "session_id": session,
        "transcript_path": "/tmp/none.jsonl",
        "cwd": root,
        "permission_mode": "default",
        "hook_event_name": name,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_01",
        **extra,
    }


LEASED = {"BAGGAGE": "proctor.lease=feat"}


def reason(answer) -> str:
    return (
        answer["hookSpecificOutput"].get("permissionDecisionReason")
        or answer["hookSpecificOutput"]["additionalContext"]
    )


def denied(answer, rule) -> bool:
    spec = answer.get("hookSpecificOutput", {})
    return spec.get("permissionDecision") == "deny" and f"deny [{rule}]:" in spec["permissionDecisionReason"]


def advised(answer, rule) -> bool:
    spec = answer.get("hookSpecificOutput", {})
    return "permissionDecision" not in spec and f"advise [{rule}]:" in spec.get("additionalContext", "")


# -- host forms -------------------------------------------------------------------------------


def test_claude_forms(ws, hook):
    deny = hook(
        event(
            ws,
            "Bash",
            {"command": "npm test > src/b.py", "description": "Run", "timeout": 120000, "run_in_background": False},
        ),
        env=LEASED,
    )
    assert set(deny) == {"hookSpecificOutput"}
    assert deny["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert deny["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "deny [lease-write-scope]: src/b.py is outside the write paths of feat" in reason(deny)
    assert "(acting under lease feat, from env)" in reason(deny)
    assert hook(event(ws, "Bash", {"command": "echo ok > src/a.py"}), env=LEASED) == {}
    # npm's own writes cannot be named: advised, never silent (and never refused)
    assert advised(hook(event(ws, "Bash", {"command": "npm test > src/a.py"}), env=LEASED), "lease-write-scope")
    advise = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/b.py"), "content": "x"}))
    assert advised(advise, "lease-unattributed")


def test_codex_forms(ws, hook):
    deny = hook(event(ws, "Bash", {"command": "touch src/b.py"}, model="gpt"), host="codex", env=LEASED)
    assert deny == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": deny["hookSpecificOutput"]["permissionDecisionReason"],
        }
    }
    assert deny["hookSpecificOutput"]["permissionDecisionReason"].startswith("deny [lease-write-scope]")
    assert hook(event(ws, "Bash", {"command": "touch src/a.py"}), host="codex", env=LEASED) == {}
    advise = hook(event(ws, "Bash", {"command": "touch src/b.py"}), host="codex")
    # an advisory reaches the model as additionalContext (Codex drops systemMessage)
    assert set(advise) == {"hookSpecificOutput"} and set(advise["hookSpecificOutput"]) == {
        "hookEventName",
        "additionalContext",
    }
    assert "advise [lease-unattributed]" in advise["hookSpecificOutput"]["additionalContext"]
    # argv-form commands are joined and parsed too
    argv = hook(event(ws, "Bash", {"command": ["bash", "-lc", "echo x > src/b.py"]}), host="codex", env=LEASED)
    assert argv["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_gemini_forms(ws, hook):
    base = {
        "session_id": "g1",
        "transcript_path": None,
        "cwd": ws,
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-11-30T00:00:00Z",
    }
    deny = hook(
        {**base, "tool_name": "run_shell_command", "tool_input": {"command": "echo x > src/b.py"}},
        host="gemini",
        env=LEASED,
    )
    assert deny["decision"] == "deny" and deny["reason"].startswith("deny [lease-write-scope]")
    write = hook(
        {**base, "tool_name": "write_file", "tool_input": {"file_path": os.path.join(ws, "README")}},
        host="gemini",
        env=LEASED,
    )
    assert write["decision"] == "deny"
    assert (
        hook(
            {
                **base,
                "tool_name": "replace",
                "tool_input": {"file_path": os.path.join(ws, "src/a.py"), "old_string": "a", "new_string": "b"},
            },
            host="gemini",
            env=LEASED,
        )
        == {}
    )


def test_stop_events_are_read_and_pass(ws, hook):
    stop = {
        "session_id": "s1",
        "transcript_path": "/tmp/x.jsonl",
        "cwd": ws,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "done",
        "background_tasks": [],
    }
    assert hook(stop) == {}
    assert hook({**stop, "hook_event_name": "SubagentStop", "agent_id": "a1", "agent_type": "Explore"}) == {}


@pytest.mark.parametrize(
    "payload",
    [
        {"hook_event_name": "PreToolUse"},
        {},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": None},
        {"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": 5}},
        {"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": {"file_path": ["x"]}},
        {
            "hook_event_name": "PreToolUse",
            "cwd": "/nonexistent/dir",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
        },
    ],
)
def test_missing_fields_pass(ws, payload, hook):
    assert hook(payload, env=LEASED) == {}


def test_not_json_passes(ws, hook):
    for data in (b"", b"garbage", b"\xff\xfe", b"[1,2]", b"null", b"{" * 100000):
        assert hook(data) == {}


def test_unknown_host_passes(ws):
    out, code = hook_run(["vim"], b"{}", dict(os.environ))
    assert code == 0 and json.loads(out) == {}


# -- the lease rows ---------------------------------------------------------------------------


def test_write_scope_and_deny_paths(ws, hook):
    assert denied(hook(event(ws, "Bash", {"command": "cp src/a.py README"}), env=LEASED), "lease-write-scope")
    secret = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/gen/secret.py")}), env=LEASED)
    assert denied(secret, "lease-write-scope") and "inside the deny paths" in reason(secret)
    assert hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/gen/x/y.py")}), env=LEASED) == {}
    assert hook(event(ws, "Bash", {"command": "echo '> README' && cat README"}), env=LEASED) == {}
    unknown = hook(event(ws, "Bash", {"command": "rm -rf $TARGET"}), env=LEASED)
    assert advised(unknown, "lease-write-scope")
    outside_repo = hook(event(ws, "Bash", {"command": "echo x > /tmp/scratch.txt"}), env=LEASED)
    assert outside_repo == {}, "paths outside the repository are not judged"


def test_foreign_path_names_age_and_exit(ws, hook):
    answer = hook(
        event(ws, "Edit", {"file_path": os.path.join(ws, "src/b.py"), "old_string": "a", "new_string": "b"}), env=LEASED
    )
    assert denied(answer, "lease-foreign-path")
    assert "held by other" in reason(answer) and "ago" in reason(answer)
    assert "proctor job exit other" in reason(answer)


def test_foreign_path_past_deadline_owns_nothing(ws, hook):
    api.fork({"id": "late", "write_paths": ["src/a.py"], "check": "test", "timeout": 0.2}, cwd=ws)
    time.sleep(0.3)
    assert not denied(
        hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/a.py")}), env=LEASED), "lease-foreign-path"
    )


def test_read_only_job(ws, hook):
    api.fork({"id": "look", "read_only": True}, cwd=ws)
    env = {"BAGGAGE": "proctor.lease=look"}
    assert denied(hook(event(ws, "Bash", {"command": "touch notes.txt"}), env=env), "lease-read-only")
    assert hook(event(ws, "Bash", {"command": "grep -r foo src"}), env=env) == {}


def test_deadline(ws, hook):
    api.fork({"id": "quick", "write_paths": ["src/q.py"], "check": "test", "timeout": 0.2}, cwd=ws)
    env = {"BAGGAGE": "proctor.lease=quick"}
    assert hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/q.py")}), env=env) == {}
    time.sleep(0.3)
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/q.py")}), env=env)
    assert denied(answer, "lease-deadline") and "passed its deadline" in reason(answer)


def test_gate(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "proctor run ci"}), env=LEASED)
    assert denied(answer, "lease-gate") and "proctor run test" in reason(answer)
    chained = hook(event(ws, "Bash", {"command": "cd src && proctor run full -o json"}), env=LEASED)
    assert denied(chained, "lease-gate") and "full -> ci" in reason(chained)
    assert hook(event(ws, "Bash", {"command": "proctor run test"}), env=LEASED) == {}
    assert hook(event(ws, "Bash", {"command": "proctor run ci"})) == {}, "an unleased caller runs the gate"


def test_read_boundary(ws, tmp_path, hook):
    read = lambda path, env: hook(event(ws, "Read", {"file_path": os.path.join(ws, path)}), env=env)  # noqa: E731
    api.fork({"id": "reader", "write_paths": ["src/r.py"], "read_paths": ["docs", "src"], "check": "test"}, cwd=ws)
    assert advised(read("README", LEASED), "lease-read-boundary"), "advisory without a lease taken here"
    assert read("src/a.py", LEASED) == {} and read("src/other.py", LEASED) == {}
    assert api.exec_job("feat", cwd=ws)["state"] == "running"
    assert denied(read("README", LEASED), "lease-read-boundary")
    env = {"BAGGAGE": "proctor.lease=reader"}
    assert read("docs/x.md", env) == {}
    assert advised(read("README", env), "lease-read-boundary")


def test_base_diverged(ws, hook):
    api.fork({"id": "old", "write_paths": ["src/o.py"], "check": "test", "checkpoint": "0" * 40}, cwd=ws)
    api.exec_job("old", cwd=ws)
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/o.py")}), env={"BAGGAGE": "proctor.lease=old"})
    assert advised(answer, "lease-base-diverged") and "diverges from the checkpoint" in reason(answer)
    api.exit_job("old", cwd=ws)
    api.fork({"id": "fresh", "write_paths": ["src/f.py"], "check": "test"}, cwd=ws)
    api.exec_job("fresh", cwd=ws)
    assert (
        hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/f.py")}), env={"BAGGAGE": "proctor.lease=fresh"})
        == {}
    )


def test_harness_install_under_a_lease(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "proctor agent harness install"}), env=LEASED)
    assert denied(answer, "lease-harness")
    assert hook(event(ws, "Bash", {"command": "proctor agent harness install"})) == {}


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


def test_entry_lets_one_write_through(ws, hook):
    path = os.path.join(ws, "src/b.py")
    # the holder of `other` is working: a tool call graded under it just now
    assert hook(event(ws, "Write", {"file_path": path}, session="holder"), env={"BAGGAGE": "proctor.lease=other"}) == {}
    api.fork({"id": "other", "enter": "src/b.py"}, cwd=ws)
    # the orchestrator (no lease) writes the entered path
    busy = hook(event(ws, "Write", {"file_path": path}, session="orchestrator"))
    assert denied(busy, "lease-entry") and "made a tool call" in reason(busy)
    from proctor.guard.rules import _common

    original = _common.ENTRY_QUIET_SECONDS
    try:
        import proctor.guard.rules.lease_entry as entry_rule

        entry_rule.ENTRY_QUIET_SECONDS = 0.0
        assert hook(event(ws, "Write", {"file_path": path}, session="orchestrator")) == {}
        assert advised(hook(event(ws, "Write", {"file_path": path}, session="orchestrator")), "lease-unattributed"), (
            "the next write needs another entry"
        )
        row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["other"]
        assert row["entries"][0]["consumed"] and row["entries"][0]["written"] == "src/b.py"
        notice = hook(event(ws, "Write", {"file_path": path}, session="holder"), env={"BAGGAGE": "proctor.lease=other"})
        assert advised(notice, "lease-entry") and "re-read it" in reason(notice)
        assert (
            hook(event(ws, "Write", {"file_path": path}, session="holder"), env={"BAGGAGE": "proctor.lease=other"})
            == {}
        ), "told once"
    finally:
        entry_rule.ENTRY_QUIET_SECONDS = original


def test_unattributed_write_is_recorded(ws, hook):
    before = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["other"]["updated"]
    answer = hook(event(ws, "Bash", {"command": "echo x >> src/b.py"}))
    assert advised(answer, "lease-unattributed") and "proctor job exit other" in reason(answer)
    row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["other"]
    assert row["unattributed"][0]["path"] == "src/b.py" and row["updated"] == before
    assert hook(event(ws, "Bash", {"command": "echo x >> notes.txt"})) == {}


def test_lease_naming_no_live_job_is_an_advisory(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "echo x > src/b.py"}), env={"BAGGAGE": "proctor.lease=ghost"})
    assert advised(answer, "lease-unattributed") and "names no job" in reason(answer)


# -- resolving the lease ----------------------------------------------------------------------


def test_exec_through_the_guard_binds_the_session(ws, hook):
    assert hook(event(ws, "Bash", {"command": "proctor job exec feat"}, session="w1")) == {}
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w1"))
    assert denied(answer, "lease-write-scope") and "from agent" in reason(answer)
    # exactly that session: another session is not bound
    assert advised(hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w2")), "lease-unattributed")
    # a subagent of it, bound to no job of its own, acts under the session's job
    sub = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w1", agent_id="a9"))
    assert denied(sub, "lease-write-scope") and "feat" in reason(sub) and "from agent" in reason(sub)
    contested = hook(
        event(ws, "Bash", {"command": "echo > src/b.py"}, session="w1"), env={"BAGGAGE": "proctor.lease=other"}
    )
    assert "from contested" in reason(contested) and "feat" in reason(contested)


def test_flag_outranks_everything(ws, hook):
    answer = hook(
        event(ws, "Bash", {"command": "echo > src/a.py"}),
        env={"BAGGAGE": "proctor.lease=feat"},
        args=("--lease", "other"),
    )
    assert denied(answer, "lease-write-scope") and "from flag" in reason(answer)


def test_checkout_marker_for_callers_without_ids(ws, hook):
    api.exec_job("feat", cwd=ws)
    answer = hook(
        {"hook_event_name": "PreToolUse", "cwd": ws, "tool_name": "Bash", "tool_input": {"command": "echo > src/b.py"}}
    )
    assert denied(answer, "lease-write-scope") and "from marker" in reason(answer)
    with_session = hook(event(ws, "Bash", {"command": "echo > src/b.py"}))
    assert advised(with_session, "lease-unattributed"), "a caller with a session id never reads the marker"


# -- spawns -----------------------------------------------------------------------------------


def _events(root, kind):
    from proctor import trail
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(root)))
    with store.read() as conn:
        found = trail.events(conn, kind=kind)
    store.close()
    return found


def test_spawn_recorded_never_judged(ws, hook):
    prompt = "lease: feat\n\nRun `rm -rf src/b.py` and `proctor run ci`; write README."
    assert (
        hook(
            event(ws, "Task", {"prompt": prompt, "description": "do it", "subagent_type": "general-purpose"}),
            env=LEASED,
        )
        == {}
    )
    spawned = _events(ws, "agent_spawn")[-1]
    assert spawned["job"] == "feat" and spawned["data"]["action"] == "general-purpose"
    from tests.store.store_oracle import read_blob
    from proctor.paths import find_checkout, repo_state_dir

    assert read_blob(repo_state_dir(find_checkout(ws)), spawned["blob"]).decode() == prompt
    assert hook(event(ws, "Agent", {"prompt": "Please\nlease: feat\n", "description": "x"})) == {}
    assert _events(ws, "agent_spawn")[-1]["job"] is None, "a marker deeper in the prompt stamps nothing"


def test_background_subagent_bound_by_its_agent_id(ws, hook):
    post = event(
        ws,
        "Agent",
        {"prompt": "lease: feat\ngo", "description": "x"},
        name="PostToolUse",
        tool_response={"status": "async_launched", "agentId": "a49bdb08c902ff81f"},
    )
    assert hook(post) == {}
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, agent_id="a49bdb08c902ff81f"))
    assert denied(answer, "lease-write-scope") and "from agent" in reason(answer)


# -- settings ---------------------------------------------------------------------------------


def test_loosening_applies_once_committed_and_never_to_a_holder_of_an_older_checkpoint(ws, hook):
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('\n[guard.rules]\nlease-write-scope = "advise"\nlease-base-diverged = "deny"\n')
    command = event(ws, "Bash", {"command": "echo > README"})
    assert denied(hook(command, env=LEASED), "lease-write-scope"), "an uncommitted loosening waits"
    git(ws, "commit", "-qam", "loosen")
    # feat was handed the checkpoint before the loosening: its holder cannot loosen its own rules
    assert denied(hook(command, env=LEASED), "lease-write-scope"), "a holder's commit loosens nothing for it"
    rules = {r["name"]: r["decision"] for r in api.describe_rules(cwd=ws)}
    assert rules["lease-write-scope"] == "advise" and rules["lease-base-diverged"] == "deny"
    api.fork({"id": "later", "write_paths": ["src/a.py"], "check": "test"}, cwd=ws)
    later = {"BAGGAGE": "proctor.lease=later"}
    assert advised(hook(command, env=later), "lease-write-scope"), "a job handed the loosened checkpoint"
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('lease-gate = "off"\n')
    # TOML: the appended key lands in [guard.rules]; a rule turned off is not evaluated at all
    git(ws, "commit", "-qam", "off")
    api.fork({"id": "latest", "write_paths": ["src/a.py"], "check": "test"}, cwd=ws)
    assert hook(event(ws, "Bash", {"command": "proctor run ci"}), env={"BAGGAGE": "proctor.lease=latest"}) == {}
    assert denied(hook(event(ws, "Bash", {"command": "proctor run ci"}), env=LEASED), "lease-gate")


def test_tightening_applies_at_once(ws, hook):
    api.fork({"id": "old", "write_paths": ["src/o.py"], "check": "test", "checkpoint": "0" * 40}, cwd=ws)
    api.exec_job("old", cwd=ws)
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('\n[guard.rules]\nlease-base-diverged = "deny"\n')
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/o.py")}), env={"BAGGAGE": "proctor.lease=old"})
    assert denied(answer, "lease-base-diverged")


def test_no_store_passes(tmp_path, new_repo, hook):
    root = new_repo("bare", CONFIG)
    answer = hook(event(root, "Bash", {"command": "rm -rf src"}), env=LEASED)
    assert "permissionDecision" not in answer.get("hookSpecificOutput", {}), "at most an advisory"
    assert hook(event(root, "Bash", {"command": "rm -rf src"})) == {}
    assert not os.path.exists(tmp_path / "state"), "the hook does not create a store to pass"


# SQLite's engine itself: a corrupt proctor.db file
@pytest.mark.sqlite_store
def test_corrupt_store_fails_open(ws, hook):
    from proctor.paths import find_checkout, repo_state_dir

    path = os.path.join(repo_state_dir(find_checkout(ws)), "proctor.db")
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with open(path, "wb") as handle:
        handle.write(b"garbage" * 1000)
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}), env=LEASED)
    assert advised(answer, "lease-unattributed") and "is not a readable SQLite database" in reason(answer)
    assert hook(event(ws, "Bash", {"command": "echo > src/b.py"})) == {}, "no lease claimed: nothing to say"


def test_entry_for_a_leased_writer_and_refused_writes_consume_nothing(ws, hook):
    api.fork({"id": "P", "write_paths": ["src/c.py", "src/d.py"], "check": "test"}, cwd=ws)
    api.fork({"id": "P/K", "parent": "P", "write_paths": ["src/d.py"], "check": "test"}, cwd=ws)
    api.fork({"id": "P/K", "enter": "src/d.py"}, cwd=ws, environ={"BAGGAGE": "proctor.lease=P"})
    env = {"BAGGAGE": "proctor.lease=P"}
    # refused for another reason (a path outside P as well): the entry stays open
    both = hook(event(ws, "Bash", {"command": "touch src/d.py README"}), env=env)
    assert denied(both, "lease-write-scope")
    row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["P/K"]
    assert row["entries"][0]["consumed"] is None
    assert hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/d.py")}), env=env) == {}
    row = {r["id"]: r for r in api.ls_jobs(cwd=ws)["jobs"]}["P/K"]
    assert row["entries"][0]["consumed"]
    assert denied(hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/d.py")}), env=env), "lease-foreign-path")


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


def test_options_are_not_read_as_names(ws, hook):
    assert denied(hook(event(ws, "Bash", {"command": "proctor run -o json ci"}), env=LEASED), "lease-gate")
    assert denied(hook(event(ws, "Bash", {"command": "proctor run --lease x ci"}), env=LEASED), "lease-gate")
    assert hook(event(ws, "Bash", {"command": "proctor job exec -o json feat"}, session="w5")) == {}
    answer = hook(event(ws, "Bash", {"command": "echo > src/b.py"}, session="w5"))
    assert denied(answer, "lease-write-scope") and "from agent" in reason(answer)


def test_refused_exec_binds_nobody(ws, tmp_path, hook):
    wt = str(tmp_path / "wt")
    git(ws, "worktree", "add", "-q", "-b", "wt", wt)
    api.exec_job("feat", cwd=wt)
    assert hook(event(ws, "Bash", {"command": "proctor job exec feat"}, session="sZ")) == {}
    answer = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/a.py")}, session="sZ"))
    assert "lease-unattributed" in reason(answer), "not bound to a job taken elsewhere"


def test_symlinked_write_is_judged_where_it_leads(ws, hook):
    os.symlink("b.py", os.path.join(ws, "src", "a.py"))
    answer = hook(event(ws, "Bash", {"command": "echo pwned > src/a.py"}), env=LEASED)
    assert denied(answer, "lease-write-scope") and "src/b.py" in reason(answer)


def test_monitor_commands_need_the_jobs_secret(ws, hook):
    answer = hook(event(ws, "Bash", {"command": "proctor monitor remove 3"}), env=LEASED)
    assert denied(answer, "lease-store") and "PROCTOR_NONCE" in reason(answer)
    assert hook(event(ws, "Bash", {"command": "proctor monitor list"}), env={**LEASED, "PROCTOR_NONCE": "secret"}) == {}
    assert hook(event(ws, "Bash", {"command": "proctor monitor list"})) == {}, "a person uses the token"


# -- subagents bound from their first call (Claude Code 2.1.332's own files) ---------------------

from tests.support import SHARED_FIXTURES, needs_shared_fixtures as needs_host_fixtures  # noqa: E402

HOSTS_FIXTURES = os.path.join(SHARED_FIXTURES, "hosts", "claude-2.1.332")


def _captured(scenario: str) -> list[dict]:
    with open(os.path.join(HOSTS_FIXTURES, scenario, "hook-calls.jsonl"), encoding="utf-8") as handle:
        return [json.loads(line)["in"] for line in handle if line.strip()]


def _lay_out(scenario: str, root: str, home: str, with_subagent_file: bool = True) -> list[dict]:
    """The captured hook payloads of a scenario, pointed at `root` (the repository) and at a
    transcript directory under `home` laid out as Claude Code lays it out: the session's
    transcript, and beside it <session>/subagents/agent-<id>.jsonl (and .meta.json)."""
    calls = _captured(scenario)
    session = calls[0]["session_id"]
    projects = os.path.join(home, "projects", "p")
    subagents = os.path.join(projects, session, "subagents")
    os.makedirs(subagents)
    transcript = os.path.join(projects, session + ".jsonl")
    with (
        open(os.path.join(HOSTS_FIXTURES, scenario, "transcript.jsonl"), "rb") as source,
        open(transcript, "wb") as target,
    ):
        target.write(source.read())
    for name in os.listdir(os.path.join(HOSTS_FIXTURES, scenario)):
        if name.startswith("subagent-agent-") and with_subagent_file:
            with (
                open(os.path.join(HOSTS_FIXTURES, scenario, name), "rb") as source,
                open(os.path.join(subagents, name[len("subagent-") :]), "wb") as target,
            ):
                target.write(source.read())
    spawn = next(c for c in calls if c.get("tool_name") == "Agent" and c["hook_event_name"] == "PreToolUse")
    for call in calls:
        if call.get("agent_id"):
            # the meta file, shaped as 2.1.332 writes it
            with open(os.path.join(subagents, f"agent-{call['agent_id']}.meta.json"), "w", encoding="utf-8") as meta:
                json.dump(
                    {
                        "agentType": "general-purpose",
                        "description": "Edit the files",
                        "toolUseId": spawn["tool_use_id"],
                        "spawnDepth": 1,
                    },
                    meta,
                )
            break
    text = json.dumps(calls)
    old_root = calls[0]["cwd"]
    text = text.replace(json.dumps(old_root)[1:-1], root).replace(
        json.dumps(calls[0]["transcript_path"])[1:-1], transcript
    )
    return json.loads(text)


@pytest.fixture
def planned(new_repo, monkeypatch):
    root = new_repo("repo", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    monkeypatch.chdir(root)
    api.fork({"id": "plan/w1", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork({"id": "feat", "write_paths": ["src/c.py"], "check": "test"}, cwd=root)
    return root


def _job(root: str, job_id: str) -> dict:
    return {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}[job_id]


@needs_host_fixtures
def test_foreground_subagent_is_bound_by_its_first_call(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    sub = [c for c in calls if c.get("agent_id")]
    first = sub[0]  # a Read: it binds, and passes
    assert hook(first) == {}
    job = _job(planned, "plan/w1")
    assert job["state"] == "running" and job["checkout_root"] == os.path.realpath(planned)
    assert job["base"] == git(planned, "rev-parse", "HEAD").strip() and job["base_diverges"] is False
    write_b = next(
        c
        for c in sub
        if c["hook_event_name"] == "PreToolUse"
        and c["tool_input"].get("file_path", "").endswith("src/b.py")
        and c["tool_name"] == "Write"
    )
    answer = hook(write_b)
    assert denied(answer, "lease-write-scope") and "plan/w1" in reason(answer) and "from agent" in reason(answer)
    write_a = next(
        c
        for c in sub
        if c["hook_event_name"] == "PreToolUse"
        and c["tool_name"] == "Write"
        and c["tool_input"]["file_path"].endswith("src/a.py")
    )
    assert hook(write_a) == {}
    # the parent itself is not bound by its subagent
    parent = dict(write_b)
    parent.pop("agent_id")
    parent.pop("agent_type")
    assert "permissionDecision" not in hook(parent).get("hookSpecificOutput", {})


@needs_host_fixtures
def test_subagent_bound_through_its_meta_file_when_its_transcript_is_missing(planned, tmp_path, hook):
    calls = _lay_out("f_bg_first", planned, str(tmp_path / "claude"), with_subagent_file=False)
    spawn = next(c for c in calls if c.get("tool_name") == "Agent" and c["hook_event_name"] == "PreToolUse")
    assert hook(spawn) == {}  # recorded on the trail, with its job and tool_use_id
    first = next(c for c in calls if c.get("agent_id"))
    assert first["tool_name"] == "Write" and first["tool_input"]["file_path"].endswith("src/c.py")
    answer = hook(first)
    assert denied(answer, "lease-write-scope") and "plan/w1" in reason(answer)


@needs_host_fixtures
def test_subagent_without_a_job_acts_under_its_sessions_job(planned, tmp_path, hook):
    calls = _lay_out("e2", planned, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    root_call = event(planned, "Bash", {"command": "proctor job exec feat"}, session=session)
    assert hook(root_call) == {}
    sub = next(c for c in calls if c.get("agent_id"))  # spawned with "MARKER-SUB run a helper"
    write = dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(planned, "src/a.py")})
    answer = hook(write)
    assert denied(answer, "lease-write-scope") and "src/a.py is outside the write paths of feat" in reason(answer)
    assert hook(dict(write, tool_input={"file_path": os.path.join(planned, "src/c.py")})) == {}


@needs_host_fixtures
def test_subagent_spawned_for_a_job_beneath_the_session_is_bound_to_it(tmp_path, new_repo, monkeypatch, hook):
    root = new_repo("repo", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    monkeypatch.chdir(root)
    api.fork({"id": "plan", "write_paths": ["src/a.py", "src/c.py"], "check": "test"}, cwd=root)
    api.fork({"id": "plan/w1", "parent": "plan", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    calls = _lay_out("f_fg", root, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    assert hook(event(root, "Bash", {"command": "proctor job exec plan"}, session=session)) == {}
    sub = next(c for c in calls if c.get("agent_id"))
    write = dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(root, "src/c.py")})
    answer = hook(write)
    assert denied(answer, "lease-write-scope") and "outside the write paths of plan/w1" in reason(answer)
    assert hook(dict(write, tool_input={"file_path": os.path.join(root, "src/a.py")})) == {}


# A spawn is a claim by whoever wrote the prompt: it must not lift a leased agent out of its lease.


def _subagent_write(calls, root, rel):
    sub = next(c for c in calls if c.get("agent_id"))
    return dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(root, rel)})


@needs_host_fixtures
def test_leased_session_cannot_spawn_its_way_into_a_sibling_job(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    assert hook(event(planned, "Bash", {"command": "proctor job exec feat"}, session=session)) == {}
    answer = hook(_subagent_write(calls, planned, "src/a.py"))  # plan/w1's path; the prompt says plan/w1
    assert denied(answer, "lease-write-scope") and "outside the write paths of feat" in reason(answer)
    assert "not the spawner's job feat nor beneath it" in reason(answer)
    assert _job(planned, "plan/w1")["state"] == "declared", "the sibling job was not taken"
    own = hook(_subagent_write(calls, planned, "src/c.py"))  # feat's own path: the subagent acts under feat
    assert not denied(own, "lease-write-scope") and "acting under lease feat" in reason(own)


@needs_host_fixtures
@pytest.mark.parametrize("baggage", [False, True])
def test_spawn_naming_an_ended_job_leaves_the_session_lease(planned, tmp_path, baggage, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    session = calls[0]["session_id"]
    env = {"BAGGAGE": "proctor.lease=feat"} if baggage else None
    assert hook(event(planned, "Bash", {"command": "proctor job exec feat"}, session=session), env=env) == {}
    api.exit_job("plan/w1", cwd=planned)
    answer = hook(_subagent_write(calls, planned, "src/b.py"), env=env)
    assert denied(answer, "lease-write-scope") and "outside the write paths of feat" in reason(answer)
    assert "which has ended (no_return); it binds nothing" in reason(answer)


@needs_host_fixtures
def test_spawn_naming_no_job_leaves_the_inherited_claim(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    # the subagent's prompt names a job nobody declared
    subagents = os.path.join(str(tmp_path / "claude"), "projects", "p", calls[0]["session_id"], "subagents")
    for name in os.listdir(subagents):
        if name.endswith(".jsonl"):
            with open(os.path.join(subagents, name), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
            first = json.loads(lines[0])
            first["message"]["content"] = "lease: no-such-job\nwrite src/b.py"
            with open(os.path.join(subagents, name), "w", encoding="utf-8") as handle:
                handle.write("\n".join([json.dumps(first)] + lines[1:]) + "\n")
    answer = hook(_subagent_write(calls, planned, "src/b.py"), env={"BAGGAGE": "proctor.lease=feat"})
    assert denied(answer, "lease-write-scope") and "outside the write paths of feat" in reason(answer)
    assert "names no job; it binds nothing" in reason(answer)


@needs_host_fixtures
def test_spawn_cannot_take_a_job_running_in_another_checkout(planned, tmp_path, hook):
    other = str(tmp_path / "other")
    git(planned, "worktree", "add", "-q", other)
    assert api.exec_job("plan/w1", cwd=other) is not None
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    answer = hook(_subagent_write(calls, planned, "src/a.py"))
    assert "is taken in another checkout" in reason(answer)
    assert not (answer == {}), "the subagent is not let through as plan/w1's holder"
    assert os.path.realpath(_job(planned, "plan/w1")["checkout_root"]) == os.path.realpath(other)


def _nested_spawn(calls, root, home, prompt: str, nested_id: str = "anested01") -> dict:
    """Subagent A of the captured session spawns B with `prompt`, as Claude Code 2.1.332 would:
    A's Agent call reaches the hook (recorded as a spawn by A), B's transcript and meta file lie
    beside A's. Returns B's first call, a Write to src/z.py."""
    a = next(c for c in calls if c.get("agent_id"))
    spawn = dict(
        a,
        tool_name="Agent",
        tool_use_id="toolu_nested_spawn",
        tool_input={"prompt": prompt, "description": "nested", "subagent_type": "general-purpose"},
    )
    assert call_hook(spawn) == {}, "a spawn is recorded, never judged"
    subagents = os.path.join(home, "projects", "p", a["session_id"], "subagents")
    with open(os.path.join(subagents, f"agent-{nested_id}.jsonl"), "w", encoding="utf-8") as handle:
        handle.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
    with open(os.path.join(subagents, f"agent-{nested_id}.meta.json"), "w", encoding="utf-8") as handle:
        json.dump({"agentType": "general-purpose", "toolUseId": "toolu_nested_spawn", "spawnDepth": 2}, handle)
    return dict(
        a,
        agent_id=nested_id,
        tool_name="Write",
        tool_input={"file_path": os.path.join(root, "src", "z.py"), "content": "z"},
    )


@needs_host_fixtures
def test_a_subagents_subagent_is_bounded_by_its_spawner_not_the_session(planned, tmp_path, hook):
    api.fork({"id": "other", "write_paths": ["src/z.py"], "check": "test"}, cwd=planned)
    home = str(tmp_path / "claude")
    calls = _lay_out("f_fg", planned, home)  # the session is unleased; A is spawned with lease: plan/w1
    a_write = _subagent_write(calls, planned, "src/c.py")
    assert denied(hook(a_write), "lease-write-scope"), "A acts under plan/w1 from its first call"
    b_write = _nested_spawn(calls, planned, home, "lease: other\nwrite src/z.py")
    answer = hook(b_write)
    assert denied(answer, "lease-write-scope") and "outside the write paths of plan/w1" in reason(answer)
    assert "not the spawner's job plan/w1 nor beneath it" in reason(answer)
    assert _job(planned, "other")["state"] == "declared", "B did not take a job outside its spawner's"


@needs_host_fixtures
def test_a_subagents_subagent_with_no_lease_line_acts_under_its_spawner(planned, tmp_path, hook):
    home = str(tmp_path / "claude")
    calls = _lay_out("f_fg", planned, home)
    assert denied(hook(_subagent_write(calls, planned, "src/c.py")), "lease-write-scope")
    answer = hook(_nested_spawn(calls, planned, home, "write src/z.py please"))
    assert denied(answer, "lease-write-scope") and "outside the write paths of plan/w1" in reason(answer)


@needs_host_fixtures
def test_subagent_naming_an_ended_job_binds_nothing(planned, tmp_path, hook):
    calls = _lay_out("f_fg", planned, str(tmp_path / "claude"))
    api.exit_job("plan/w1", cwd=planned)
    sub = next(c for c in calls if c.get("agent_id"))
    write = dict(sub, tool_name="Write", tool_input={"file_path": os.path.join(planned, "src/b.py")})
    answer = hook(write)
    assert advised(answer, "lease-unattributed") and "which has ended (no_return); it binds nothing" in reason(answer)
    assert _job(planned, "plan/w1")["state"] == "no_return"


# -- Gemini CLI 0.61.0: its tool arguments, where its answers reach the model, its trust ---------


def gemini_event(root, tool, tool_input, name="BeforeTool", session="g-1", **extra):
    """A payload shaped as Gemini CLI 0.61.0 sends it (fixtures/hosts/gemini-0.61.0): no call id."""
    return {
        "session_id": session,
        "transcript_path": "/tmp/none.json",
        "cwd": root,
        "hook_event_name": name,
        "timestamp": "2026-12-01T08:21:20.206Z",
        "tool_name": tool,
        "tool_input": tool_input,
        **extra,
    }


def test_gemini_dir_path_is_where_a_shell_command_runs(ws, hook):
    def deny_text(tool_input):
        answer = hook(gemini_event(ws, "run_shell_command", tool_input), host="gemini", env=LEASED)
        return answer.get("reason", "") if answer.get("decision") == "deny" else ""

    assert (
        hook(
            gemini_event(ws, "run_shell_command", {"command": "echo x > a.py", "dir_path": "src"}),
            host="gemini",
            env=LEASED,
        )
        == {}
    )
    for directory in ("src", os.path.join(ws, "src")):
        reason_text = deny_text({"command": "echo x > b.py", "dir_path": directory, "description": "d"})
        assert reason_text.startswith("deny [lease-write-scope]: src/b.py is outside the write paths of feat")
    assert deny_text({"command": "echo x > a.py"}).startswith("deny [lease-write-scope]: a.py is outside")


def test_gemini_tool_arguments_are_read():
    from proctor.hosts import gemini

    def parsed(tool, tool_input):
        return gemini.parse(gemini_event("/r", tool, tool_input))

    assert parsed("list_directory", {"dir_path": "src"}).reads == ["src"]
    assert parsed("glob", {"pattern": "*.py", "dir_path": "/r/src"}).reads == ["/r/src"]
    grep = parsed("grep_search", {"pattern": "TODO", "dir_path": "lib"})
    assert grep.reads == ["lib"] and not grep.writes and grep.command is None
    assert parsed("read_file", {"file_path": "src/a.py"}).reads == ["src/a.py"]
    assert parsed("read_many_files", {"include": ["src/*.py"]}).reads == ["src/*.py"]
    fetch = parsed("web_fetch", {"prompt": "summarise https://example.invalid"})
    assert fetch.prompt is None and fetch.spawn_label is None, "web_fetch is not a delegation"
    agent = parsed("invoke_agent", {"agent_name": "codebase_investigator", "prompt": "lease: feat\nlook"})
    assert agent.prompt == "lease: feat\nlook" and agent.spawn_label == "codebase_investigator"
    shell = parsed("run_shell_command", {"command": "ls", "dir_path": "sub", "is_background": True})
    assert shell.cwd == "/r/sub" and shell.background is True


def test_gemini_advisory_is_carried_to_the_after_tool_answer(ws, hook):
    command = {"command": "T=src/a.py; echo 'A = 2' > \"$T\"", "description": "scripted command"}
    before = hook(gemini_event(ws, "run_shell_command", command), host="gemini", env=LEASED)
    assert set(before) == {"systemMessage"}  # the person's terminal; Gemini drops it for the model
    assert "advise [lease-write-scope]: cannot tell what this writes" in before["systemMessage"]
    response = {"llmContent": "Output: (empty)", "returnDisplay": ""}
    other = hook(
        gemini_event(ws, "run_shell_command", command, name="AfterTool", session="g-2", tool_response=response),
        host="gemini",
        env=LEASED,
    )
    assert other == {}, "another session's call does not take it"
    after = hook(
        gemini_event(ws, "run_shell_command", command, name="AfterTool", tool_response=response),
        host="gemini",
        env=LEASED,
    )
    assert set(after) == {"hookSpecificOutput"} and after["hookSpecificOutput"]["hookEventName"] == "AfterTool"
    assert after["hookSpecificOutput"]["additionalContext"] == before["systemMessage"]
    again = hook(
        gemini_event(ws, "run_shell_command", command, name="AfterTool", tool_response=response),
        host="gemini",
        env=LEASED,
    )
    assert again == {}, "each carry is delivered once"


def test_gemini_after_tool_advisory_and_after_agent_deny_forms():
    from proctor.guard.call import POST_TOOL, STOP, Call
    from proctor.guard.engine import Verdict
    from proctor.hosts import gemini

    advise = Verdict([("lease-unattributed", "advise", "src/b.py is held by other")], "feat", "env")
    answer = gemini.render(Call("gemini", POST_TOOL), advise)
    assert answer == {"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": advise.text()}}
    followup = Verdict([("monitor-followup", "deny", "Follow-up from the monitors of job feat")], "feat", "env")
    assert gemini.render(Call("gemini", STOP), followup) == {"decision": "deny", "reason": followup.text()}
    assert gemini.render(Call("gemini", STOP), Verdict([])) == {}


def _gemini_home(tmp_path, monkeypatch):
    for name in (
        "GEMINI_CLI_TRUST_WORKSPACE",
        "GEMINI_RESTRICTED_MODE",
        "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
        "GEMINI_CLI_HOME",
    ):
        monkeypatch.delenv(name, raising=False)
    root, home = tmp_path / "work" / "repo", tmp_path / "home"
    (root / ".gemini").mkdir(parents=True)
    (home / ".gemini").mkdir(parents=True)
    return str(root), str(home)


def _write(path, value) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


def _printed_wiring() -> dict:
    from proctor.hosts import gemini

    return json.loads("\n".join(line for line in gemini.wiring().splitlines() if not line.startswith("#")))


def test_gemini_wired_reads_trust(tmp_path, monkeypatch):
    from proctor.hosts.gemini import wired

    root, home = _gemini_home(tmp_path, monkeypatch)
    ok, text = wired(root, home)
    assert not ok and text.startswith("missing")
    _write(os.path.join(root, ".gemini", "settings.json"), _printed_wiring())
    ok, text = wired(root, home)
    assert not ok and "only in a trusted folder" in text and "GEMINI_CLI_TRUST_WORKSPACE=true" in text
    assert "exits 55" in text and "--skip-trust" in text
    trusted = os.path.join(home, ".gemini", "trustedFolders.json")
    _write(trusted, {os.path.realpath(root): "TRUST_FOLDER"})
    ok, text = wired(root, home)
    assert ok and "TRUST_FOLDER" in text
    # TRUST_PARENT on the repository trusts its parent, and so the repository; the longest rule wins
    _write(trusted, {os.path.join(os.path.dirname(root), "sibling"): "TRUST_PARENT"})
    assert wired(root, home)[0]
    _write(trusted, {os.path.dirname(root): "TRUST_FOLDER", root: "DO_NOT_TRUST"})
    ok, text = wired(root, home)
    assert not ok and "DO_NOT_TRUST" in text
    monkeypatch.setenv("GEMINI_CLI_TRUST_WORKSPACE", "true")
    ok, text = wired(root, home)
    assert ok and "trusted by GEMINI_CLI_TRUST_WORKSPACE=true" in text
    monkeypatch.delenv("GEMINI_CLI_TRUST_WORKSPACE")
    # folder trust turned off in the user's settings: every folder is trusted
    _write(os.path.join(home, ".gemini", "settings.json"), {"security": {"folderTrust": {"enabled": False}}})
    assert wired(root, home)[0]


def test_gemini_wired_in_user_settings_always_loads(tmp_path, monkeypatch):
    from proctor.hosts.gemini import wired

    root, home = _gemini_home(tmp_path, monkeypatch)
    user = os.path.join(home, ".gemini", "settings.json")
    text = json.dumps(_printed_wiring(), indent=2)
    # Gemini reads its settings with comments and trailing commas
    _write(user, "// proctor's guard\n" + text.replace('"AfterAgent"', '/* stop */ "AfterAgent"')[:-1] + ",\n}")
    ok, where = wired(root, home)
    assert ok and where == f"present in {user}"
    partial = _printed_wiring()
    del partial["hooks"]["AfterTool"]
    _write(user, partial)
    ok, where = wired(root, home)
    assert not ok and "AfterTool not wired" in where
    _write(user, {**_printed_wiring(), "hooksConfig": {"enabled": False}})
    ok, where = wired(root, home)
    assert not ok and "hooksConfig.enabled = false" in where
    _write(user, {**_printed_wiring(), "hooksConfig": {"disabled": ["proctor hook gemini"]}})
    assert not wired(root, home)[0]


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
