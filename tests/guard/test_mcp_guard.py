"""The guard sees proctor's MCP tools: a host reports them to the hook as mcp__proctor__<tool>
(opencode: proctor_<tool>; Gemini CLI: an mcp_context naming the server); a call is read as the
tool's, never as a file write or a shell command, and only proctor's own tools are; an unleased
session's are not judged. How the lease-store rule judges each, as it judges the same command in
a shell: tests/guard/rules/lease_store_test.py."""

from __future__ import annotations

import json
import os


from proctor.hook import run as hook_run
from tests.guard.guard_lease import denied, payload, said, ws  # noqa: F401 (fixtures)


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
