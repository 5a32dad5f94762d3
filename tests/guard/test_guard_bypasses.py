"""Each way a leased worker was seen to switch the guard off, or to reach past its lease, is
refused: the guard's ground is not the worker's (item 7 of the guard's issue), a lease reaches
aliases of a file, the other work trees of the repository and MCP file tools (items 5 and 6)."""

from __future__ import annotations

import glob
import json
import os

import pytest

from proctor import api
from proctor.hook import run as hook_run
from tests.support import git
from tests.guard.guard_lease import denied, said, state_dir, ws  # noqa: F401 (ws is a fixture)


def call(root, tool, tool_input, lease="w1", session="s1", cwd=None, **extra) -> dict:
    payload = {
        "session_id": session,
        "transcript_path": "/tmp/none.jsonl",
        "cwd": cwd or root,
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
        **extra,
    }
    environ = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    if lease:
        environ["BAGGAGE"] = f"proctor.lease={lease}"
    out, code = hook_run(["claude"], json.dumps(payload).encode(), environ)
    assert code == 0
    return json.loads(out)


def bash(root, command, **kw) -> dict:
    return call(root, "Bash", {"command": command}, **kw)


def reason(answer) -> str:
    spec = answer.get("hookSpecificOutput", {})
    return spec.get("permissionDecisionReason") or spec.get("additionalContext") or ""


# -- the guard's ground ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "printf '#!/bin/sh\\necho Proctor-Job: forged >> \"$1\"\\n' > .git/hooks/commit-msg",
        "cp plan/w1/a.py .git/hooks/commit-msg",
        "chmod +x .git/hooks/pre-commit",
        "echo 0000000000000000000000000000000000000000 > .git/refs/heads/main",
        "tee -a .git/config < plan/w1/a.py",
        "cd .git && echo x > hooks/post-commit",
        "git config core.hooksPath plan/w1/hooks",
        "git config --local core.hooksPath /tmp/hooks",
        "git config set core.fsmonitor 'sh -c evil'",
        "git -C . config filter.x.clean 'sh evil.sh'",
        "git config --global core.hooksPath /tmp/hooks",
        "git config include.path ../plan/w1/gitconfig",
        "echo '[core] hooksPath = /tmp/h' >> ~/.gitconfig",
    ],
)
def test_git_ground_is_refused(ws, command):
    answer = bash(ws, command)
    assert denied(answer, "lease-tamper"), (command, answer)


def test_git_ground_by_file_tools(ws):
    hook_path = os.path.join(ws, ".git", "hooks", "commit-msg")
    assert denied(call(ws, "Write", {"file_path": hook_path, "content": "#!/bin/sh\n"}), "lease-tamper")
    assert denied(
        call(ws, "Edit", {"file_path": os.path.join(ws, ".git/config"), "old_string": "a", "new_string": "b"}),
        "lease-tamper",
    )


@pytest.mark.parametrize(
    "command",
    [
        "git commit -qm 'work' -- plan/w1/a.py",
        "git reset --soft HEAD~1",
        "git config --get core.hooksPath",
        "git config --list",
        "git config user.name worker",
        "git log --oneline",
        "cat .git/HEAD",
    ],
)
def test_gits_own_ref_moves_and_reads_are_not_this_rules(ws, command):
    answer = bash(ws, command)
    assert "lease-tamper" not in reason(answer), (command, answer)


def test_the_store_and_the_settings_cache_are_refused(ws):
    db = os.path.join(state_dir(ws), "proctor.db")
    assert denied(bash(ws, f'sqlite3 {db} "DELETE FROM bindings"'), "lease-tamper")
    assert denied(
        bash(ws, f"python3 -c \"import sqlite3; sqlite3.connect('{db}').execute('DELETE FROM bindings')\""),
        "lease-tamper",
    )
    assert denied(bash(ws, f"rm {db}"), "lease-tamper")
    assert denied(call(ws, "Write", {"file_path": db, "content": ""}), "lease-tamper")
    bash(ws, "ls")  # the guard writes its settings cache
    from proctor.paths import cache_base

    cached = glob.glob(os.path.join(cache_base(), "*", "guard-config-*.json"))
    assert cached
    assert denied(call(ws, "Write", {"file_path": cached[0], "content": "{}"}), "lease-tamper")
    assert denied(bash(ws, f"sed -i s/deny/off/g {cached[0]}"), "lease-tamper")
    assert not denied(bash(ws, f"cat {db} > /dev/null")), "reading the store is no tamper"


def test_a_rewritten_settings_cache_is_ignored_under_a_lease(ws):
    assert denied(bash(ws, "echo x > src/b.py"), "lease-write-scope")
    from proctor.paths import cache_base

    (cached,) = glob.glob(os.path.join(cache_base(), "*", "guard-config-*.json"))
    with open(cached) as handle:
        data = json.load(handle)
    # what `python3 -c` did: the key left as it was, every rule turned off
    data["settings"]["rules"] = {name: "off" for name in data["settings"]["rules"]}
    with open(cached, "w") as handle:
        json.dump(data, handle)
    answer = bash(ws, "echo x > src/b.py")
    assert denied(answer, "lease-write-scope"), answer
    assert call(ws, "Bash", {"command": "echo x > src/b.py"}, lease=None).get("hookSpecificOutput") is not None


def test_a_committed_loosening_does_not_loosen_the_holders_own_rules(ws):
    with open(os.path.join(ws, "proctor.toml"), "a") as handle:
        handle.write('\n[guard.rules]\nlease-write-scope = "off"\nlease-tamper = "off"\n')
    git(ws, "commit", "-qam", "relax")
    assert denied(bash(ws, "echo x > src/b.py"), "lease-write-scope")
    assert denied(bash(ws, "echo x > .git/hooks/commit-msg"), "lease-tamper")


def test_hook_wiring_is_refused(ws):
    for path in (
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".codex/hooks.json",
        ".gemini/settings.json",
        ".opencode/plugins/proctor.js",
    ):
        assert denied(call(ws, "Write", {"file_path": os.path.join(ws, path), "content": "{}"}), "lease-tamper"), path
    home = os.path.expanduser("~")
    assert denied(bash(ws, f"echo '{{}}' > {home}/.claude/settings.json"), "lease-tamper")


def test_the_server_token_is_not_read(ws):
    token = os.path.join(state_dir(ws), "server", "token")
    assert denied(call(ws, "Read", {"file_path": token}), "lease-tamper")
    assert denied(bash(ws, f"cat {token}"), "lease-tamper")
    assert denied(bash(ws, f"cat {os.path.dirname(os.path.dirname(token))}/*/token"), "lease-tamper")
    assert not denied(call(ws, "Read", {"file_path": token}, lease=None)), "a person reads their own token"


# -- what a holder may run on the store ---------------------------------------------------------


def test_server_stop_and_other_jobs_are_refused(ws):
    assert denied(bash(ws, "proctor server stop"), "lease-store")
    assert denied(bash(ws, "proctor job exit other"), "lease-store")
    assert denied(bash(ws, "proctor job delete other"), "lease-store")
    assert denied(bash(ws, "proctor job trash other"), "lease-store")
    assert denied(bash(ws, "proctor job exec other"), "lease-store")
    assert denied(bash(ws, "proctor ls jobs --lease other"), "lease-store")
    assert not denied(bash(ws, "proctor job exit w1/sub")), "beneath its own job"
    assert not denied(bash(ws, "proctor job exit w1")), "its own"
    assert not denied(bash(ws, "proctor job exec w1")), "retaking its own records the base"
    assert not denied(bash(ws, "proctor server stop", lease=None, session="person")), "a person stops their server"


def test_moving_a_card_is_the_persons(ws):
    assert denied(bash(ws, "proctor job move w1 Done"), "lease-store"), (
        "not even its own: a passive column ends monitors"
    )
    assert denied(bash(ws, "proctor job move other Running"), "lease-store")
    assert not denied(bash(ws, "proctor job move other Running", lease=None, session="person"))


def test_a_guard_bound_session_cannot_take_another_job(ws):
    assert bash(ws, "proctor job exec w1", lease=None, session="worker") == {}
    answer = bash(ws, "proctor job exec other", lease=None, session="worker")
    assert denied(answer, "lease-store") and "one-way" in reason(answer)
    # a subagent of the bound session is held to the session's job too
    sub = bash(ws, "proctor job exec other", lease=None, session="worker", agent_id="a7")
    assert denied(sub, "lease-store")
    from proctor.store import Store
    from proctor.store.rows import agent_scope, bound_job

    store = Store(state_dir(ws))
    try:
        assert bound_job(store.tx, agent_scope("claude", "worker", None)) == "w1"
    finally:
        store.close()


# -- aliases of a leased file -----------------------------------------------------------------


def test_a_hard_link_made_earlier_is_its_target(ws):
    os.link(os.path.join(ws, "src/b.py"), os.path.join(ws, "plan/w1/alias.py"))
    answer = call(ws, "Write", {"file_path": os.path.join(ws, "plan/w1/alias.py"), "content": "y"})
    assert denied(answer, "lease-write-scope") and "src/b.py" in reason(answer)
    answer = bash(ws, "echo y > plan/w1/alias.py")
    assert denied(answer, "lease-write-scope") and "src/b.py" in reason(answer)
    assert not denied(bash(ws, "echo y > plan/w1/a.py")), "a file with one name is itself"


def test_a_hard_link_outside_the_repository_is_its_target(ws, tmp_path):
    outside = tmp_path / "elsewhere.py"
    os.link(os.path.join(ws, "src/b.py"), outside)
    assert denied(bash(ws, f"echo y > {outside}"), "lease-write-scope")


def test_a_symlink_made_earlier_and_proc_self_cwd(ws):
    os.symlink(os.path.join(ws, "src/b.py"), os.path.join(ws, "plan/w1/link.py"))
    assert denied(bash(ws, "echo y > plan/w1/link.py"), "lease-write-scope")
    assert denied(call(ws, "Write", {"file_path": "/proc/self/cwd/src/b.py", "content": "y"}), "lease-write-scope")
    assert denied(bash(ws, "echo y > /proc/self/cwd/src/b.py"), "lease-write-scope")
    assert not denied(bash(ws, "echo y > /proc/self/cwd/plan/w1/a.py"))


# -- the lease reaches the other work trees and MCP tools ----------------------------------------


def test_a_holder_in_a_linked_worktree_writing_the_main_checkout(ws, tmp_path):
    tree = str(tmp_path / "tree")
    git(ws, "worktree", "add", "-q", tree)
    main_file = os.path.join(ws, "src/b.py")
    assert denied(call(ws, "Write", {"file_path": main_file, "content": "y"}, cwd=tree), "lease-write-scope")
    assert denied(bash(ws, f"echo y > {main_file}", cwd=tree), "lease-write-scope")
    assert not denied(call(ws, "Write", {"file_path": os.path.join(ws, "plan/w1/a.py"), "content": "y"}, cwd=tree))
    # and from the main checkout, a sibling worktree's file is the same repository path
    assert denied(call(ws, "Write", {"file_path": os.path.join(tree, "src/b.py"), "content": "y"}), "lease-write-scope")


def test_a_job_taken_in_a_worktree_writes_there_and_not_in_another_checkout(ws, tmp_path):
    """proctor work takes each attempt's job in a worktree of its own: its worker may write its
    write paths there, never the same paths in the person's checkout (or another worktree)."""
    tree = str(tmp_path / "tree")
    git(ws, "worktree", "add", "-q", "--detach", tree)
    api.exec_job("w1", cwd=tree)
    inside_main = os.path.join(ws, "plan/w1/a.py")
    answer = call(ws, "Write", {"file_path": inside_main, "content": "y"}, cwd=tree)
    assert denied(answer, "lease-write-scope") and "another checkout of the repository" in said(answer)
    assert denied(bash(ws, f"echo y > {inside_main}", cwd=tree), "lease-write-scope")
    assert not denied(call(ws, "Write", {"file_path": os.path.join(tree, "plan/w1/a.py"), "content": "y"}, cwd=tree))
    assert not denied(bash(ws, "echo y > plan/w1/a.py", cwd=tree))


@pytest.mark.parametrize(
    "tool, tool_input, rule",
    [
        ("mcp__filesystem__write_file", {"path": "src/b.py", "content": "y"}, "lease-write-scope"),
        ("mcp__filesystem__edit_file", {"path": "src/b.py", "edits": []}, "lease-write-scope"),
        ("mcp__filesystem__move_file", {"source": "plan/w1/a.py", "destination": "src/moved.py"}, "lease-write-scope"),
        ("mcp__filesystem__create_directory", {"path": "docs/new"}, "lease-write-scope"),
        ("mcp__fs__writeFile", {"filePath": "docs/c.md"}, "lease-write-scope"),
    ],
)
def test_mcp_file_tools_are_file_tools(ws, tool, tool_input, rule):
    assert denied(call(ws, tool, tool_input), rule), tool


def test_mcp_reads_and_writes_inside_the_lease(ws):
    assert not denied(call(ws, "mcp__filesystem__write_file", {"path": "plan/w1/new.py", "content": "y"}))
    api.exec_job("w1", cwd=ws)  # taken here: the read boundary is hard
    answer = call(ws, "mcp__filesystem__read_file", {"path": "docs/c.md"})
    assert denied(answer, "lease-read-boundary")
    assert call(ws, "mcp__memory__create_entities", {"entities": []}) == {}, "a tool naming no path"


def test_gemini_mcp_tool_is_a_file_tool(ws):
    payload = {
        "session_id": "g1",
        "transcript_path": "/tmp/none.json",
        "cwd": ws,
        "hook_event_name": "BeforeTool",
        "tool_name": "write_file_fs",
        "mcp_context": {"server_name": "fs"},
        "tool_input": {"path": os.path.join(ws, "src/b.py"), "content": "y"},
    }
    out, _ = hook_run(["gemini", "--lease", "w1"], json.dumps(payload).encode(), dict(os.environ))
    assert json.loads(out).get("decision") == "deny"


@pytest.mark.parametrize(
    "command",
    [
        "PROCTOR_MACHINE=beta proctor ls jobs",
        "export PROCTOR_MACHINE=beta; proctor doctor",
        "env PROCTOR_STORE_URL=postgresql://me@elsewhere/empty proctor job exit w1 --stdin",
        "unset PROCTOR_STORE_URL_FILE && proctor ls jobs",
        "env -u PROCTOR_STORE_URL python3 -m proctor ls jobs",
        "PROCTOR_STORE_URL_FILE=/tmp/mine sh -c 'proctor ls jobs'",
    ],
)
def test_the_store_and_the_machine_are_not_a_leased_sessions_to_change(ws, command):
    """Another machine's name would judge that machine's checkouts as gone from here (ending its
    jobs); another store holds none of the lease's rules."""
    assert denied(bash(ws, command), "lease-store"), command


def test_reading_the_machine_name_is_not_changing_it(ws):
    assert not denied(bash(ws, "echo $PROCTOR_MACHINE; proctor ls jobs"))
