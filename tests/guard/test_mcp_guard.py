"""The guard sees proctor's MCP tools: a host reports them to the hook as mcp__proctor__<tool>
(opencode: proctor_<tool>; Gemini CLI: an mcp_context naming the server), and the lease-store
rule judges each as it judges the same command in a shell. The session holds w1 (plan/w1/**,
with w1/sub beneath it); `other` holds src/**."""

from __future__ import annotations

import json
import os

import pytest

from proctor.hook import run as hook_run
from tests.guard.guard_lease import denied, said, take_here, ws  # noqa: F401 (fixtures)
from tests.support import call_hook


def payload(host: str, root: str, tool: str, args: dict) -> dict:
    if host == "claude":
        return {
            "session_id": "s1",
            "transcript_path": "/tmp/none.jsonl",
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": f"mcp__proctor__{tool}",
            "tool_input": args,
            "tool_use_id": "toolu_1",
        }
    if host == "codex":
        return {
            "session_id": "s1",
            "transcript_path": None,
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "model": "m",
            "permission_mode": "default",
            "turn_id": "t1",
            "tool_name": f"mcp__proctor__{tool}",
            "tool_input": args,
            "tool_use_id": "call_1",
        }
    if host == "gemini":
        return {
            "session_id": "s1",
            "transcript_path": "/tmp/none.json",
            "cwd": root,
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-12-02T00:00:00Z",
            "tool_name": tool,
            "tool_input": args,
            "mcp_context": {"server_name": "proctor", "tool_name": tool, "command": "proctor"},
        }
    return {
        "session_id": "s1",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": f"proctor_{tool}",
        "tool_input": args,
    }


def judge(root: str, tool: str, args: dict, host: str = "claude", environ_extra: dict | None = None) -> dict:
    return call_hook(
        payload(host, root, tool, args), host, environ_extra, ["--lease", "w1"], drop=("BAGGAGE", "PROCTOR_NONCE")
    )


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
    clearing what it leaves out (tests/guard/test_one_author.py puts it through bash)."""
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


def test_a_job_record_is_not_read_as_a_file_write(ws):  # noqa: F811
    """write_paths name files a job may write, not files this call writes; a monitor's command
    is the server's to run, not a shell command of this call (it would otherwise be judged as one)."""
    from proctor.hosts import claude

    call = claude.parse(payload("claude", ws, "job_put", {"id": "w1/c", "parent": "w1", "write_paths": ["x"]}))
    assert call.proctor_tool == "job_put" and not call.writes and not call.unknown_writes and not call.command
    call = claude.parse(payload("claude", ws, "monitor_add", {"command": "rm -rf src", "interval": "10s"}))
    assert call.proctor_tool == "monitor_add" and call.command is None


def test_another_servers_tool_of_the_same_name_is_not_proctors(ws):  # noqa: F811
    from proctor.hosts import claude

    event = payload("claude", ws, "job_put", {"id": "x"})
    event["tool_name"] = "mcp__elsewhere__job_put"
    assert claude.parse(event).proctor_tool is None
    event["tool_name"] = "mcp__proctor__not_a_tool"
    assert claude.parse(event).proctor_tool is None


def test_an_unleased_session_is_not_judged(ws, tmp_path):  # noqa: F811
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    event = payload("claude", ws, "job_put", {"id": "anything", "write_paths": ["src/**"]})
    out, code = hook_run(["claude"], json.dumps(event).encode(), environ)
    assert code == 0
    answer = json.loads(out) if out.strip() else {}
    assert not denied(answer), said(answer)
