"""proctor's MCP tools with the real Claude Code 2.1.332 against a scripted model.

Claude Code starts `proctor mcp` as the project's MCP server, wired exactly as `proctor
describe harness --host claude --part mcp` prints it (.mcp.json, approved with
enableAllProjectMcpServers), beside the guard's hooks. The scripted model calls
mcp__proctor__vcs_checkpoint and mcp__proctor__job_put; the test asserts what the model was
told and what the store holds. Under a lease, a job_put that widens the session's own paths is
denied by the guard before it reaches the server; with the hooks unwired, the server refuses
it itself (PRC3042), since it reads the lease from the environment Claude Code started it in.
"""

from __future__ import annotations

import json
import os

from tests.hosts.conftest import fork_and_take, wiring_json
from tests.hosts.model import Anthropic, ScriptedModel, Tool, Turn
from tests.hosts.test_claude_guard import jobs, run_claude

CHECKPOINT = "mcp__proctor__vcs_checkpoint"
JOB_PUT = "mcp__proctor__job_put"


def wire(repo: str, hooks: bool = True) -> None:
    """The printed MCP wiring in .mcp.json, its approval and (with `hooks`) the printed hooks in
    .claude/settings.json."""
    import subprocess

    from tests.hosts.conftest import VENV_BIN

    printed = subprocess.run(
        [os.path.join(VENV_BIN, "proctor"), "describe", "harness", "--host", "claude", "--part", "mcp"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with open(os.path.join(repo, ".mcp.json"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(line for line in printed.splitlines() if not line.startswith("#")))
    settings = wiring_json("claude") if hooks else {}
    settings["enableAllProjectMcpServers"] = True
    os.makedirs(os.path.join(repo, ".claude"), exist_ok=True)
    with open(os.path.join(repo, ".claude", "settings.json"), "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)


def offered(model: ScriptedModel) -> set[str]:
    return {tool.get("name") for r in model.main_requests() for tool in r["body"].get("tools") or []}


def test_the_model_takes_a_checkpoint_and_declares_a_job(host_env, host_repo):
    wire(host_repo)
    revision = host_env.run(["git", "rev-parse", "HEAD"], cwd=host_repo).stdout.strip()
    record = {"id": "mcp/w1", "criteria": "scripted", "write_paths": ["src/a.py"], "check": "test"}
    with ScriptedModel(
        Anthropic(),
        [
            Turn(tools=[Tool(CHECKPOINT, {})]),
            Turn(tools=[Tool(JOB_PUT, record)]),
            Turn(text="done"),
        ],
    ) as model:
        run_claude(host_env, host_repo, model, extra={"ENABLE_TOOL_SEARCH": "false"})
        assert {CHECKPOINT, JOB_PUT} <= offered(model), sorted(offered(model))
        told = model.told_after(0)
        assert revision in told and '"dirty"' in told, told
        told = model.told_after(1)
        assert '"mcp/w1"' in told and '"declared"' in told, told
    row = jobs(host_env, host_repo)["mcp/w1"]
    assert row["write_paths"] == ["src/a.py"] and row["check"] == {"target": "test"}


def widen(host_env, host_repo) -> tuple[ScriptedModel, dict]:
    nonce = fork_and_take(host_env, host_repo, "mcp/w2", "src/a.py")
    model = ScriptedModel(
        Anthropic(),
        [
            Turn(tools=[Tool(JOB_PUT, {"id": "mcp/w2", "write_paths": ["src/a.py", "src/b.py"]})]),
            Turn(text="done"),
        ],
    )
    return model, {"BAGGAGE": "proctor.lease=mcp/w2", "PROCTOR_NONCE": nonce, "ENABLE_TOOL_SEARCH": "false"}


def test_a_leased_sessions_job_put_that_widens_its_paths_is_denied_by_the_guard(host_env, host_repo):
    wire(host_repo)
    model, extra = widen(host_env, host_repo)
    with model:
        run_claude(host_env, host_repo, model, extra=extra)
        told = model.told_after(0)
    assert "deny [lease-store]" in told and "job_put mcp/w2: src/b.py widens your write paths" in told, told
    assert "PRC3042" not in told, "the guard denied it before the server was asked"
    assert jobs(host_env, host_repo)["mcp/w2"]["write_paths"] == ["src/a.py"]


def test_without_the_guard_the_server_refuses_it_itself(host_env, host_repo):
    wire(host_repo, hooks=False)
    model, extra = widen(host_env, host_repo)
    with model:
        run_claude(host_env, host_repo, model, extra=extra)
        told = model.told_after(0)
    assert "PRC3042" in told and "src/b.py widens your write paths" in told, told
    assert jobs(host_env, host_repo)["mcp/w2"]["write_paths"] == ["src/a.py"]
