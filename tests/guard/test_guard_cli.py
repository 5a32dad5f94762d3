"""The guard's commands for people: describe rules/rule/harness, agent harness install,
doctor and session ls."""

from __future__ import annotations

import json
import os

from proctor.hook import run as hook_run


def test_describe_rules_deny_first(repo, proctor):
    listed = proctor("describe", "rules", "-o", "json").json()["rules"]
    decisions = [r["decision"] for r in listed]
    assert decisions == sorted(decisions, key=lambda d: {"deny": 0, "advise": 1, "off": 2}[d])
    names = {r["name"] for r in listed}
    assert {"lease-write-scope", "lease-gate", "lease-unattributed"} <= names
    text = proctor("describe", "rules").out
    assert text.splitlines()[0].startswith("deny")


def test_describe_rule_entry(repo, proctor):
    entry = proctor("describe", "rule", "lease-gate").out
    for heading in ("What it catches", "Why", "Default and override", "Seeing it"):
        assert f"\n{heading}\n" in entry
    assert "deny [lease-gate]: ..." in entry and "[guard.rules]" in entry
    missing = proctor("describe", "rule", "nope")
    assert missing.code == 2 and "describe rules" in missing.err


def test_unknown_rule_in_config_is_reported(repo, proctor):
    with open(os.path.join(repo, "proctor.toml"), "a") as handle:
        handle.write('\n[guard.rules]\nlease-writes = "off"\nlease-gate = "maybe"\n')
    problems = proctor("config", "show", "-o", "json").json()["problems"]
    assert any("lease-gate" in p and "deny, advise or off" in p for p in problems)
    assert any("lease-writes is not a rule" in p for p in problems)
    from proctor.guard import settings
    from proctor.paths import find_checkout

    computed = settings.compute(find_checkout(repo), None)
    assert any("lease-writes is not a rule" in p for p in computed["problems"])


def test_describe_harness(repo, proctor):
    claude = proctor("describe", "harness", "--host", "claude", "--part", "hooks").out
    wiring = json.loads(claude.split("\n", 1)[1])
    assert wiring["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "proctor hook claude"
    assert "SubagentStop" in wiring["hooks"]
    everything = proctor("describe", "harness").out
    assert "proctor hook codex" in everything and "proctor hook gemini" in everything
    # and the MCP wiring of each: Claude Code's and Gemini CLI's mcpServers, Codex's table, opencode's mcp
    assert everything.count('"mcpServers"') == 2 and "[mcp_servers.proctor]" in everything
    assert '"type": "local"' in everything
    mcp = proctor("describe", "harness", "--host", "claude", "--part", "mcp").out
    server = json.loads("\n".join(line for line in mcp.splitlines() if not line.startswith("#")))
    assert server["mcpServers"]["proctor"] == {"type": "stdio", "command": "proctor", "args": ["mcp"]}
    opencode = proctor("describe", "harness", "--host", "opencode", "--part", "mcp").out
    config = json.loads("\n".join(line for line in opencode.splitlines() if not line.startswith("//")))
    assert config["mcp"]["proctor"]["command"] == ["proctor", "mcp"]
    import tomllib

    codex = tomllib.loads(proctor("describe", "harness", "--host", "codex", "--part", "mcp").out)
    assert (
        codex["mcp_servers"]["proctor"]["args"] == ["mcp"]
        and "PROCTOR_NONCE" in codex["mcp_servers"]["proctor"]["env_vars"]
    )
    assert not os.path.exists(os.path.join(repo, ".claude")), "proctor writes no hook wiring"


def test_agent_harness_install(repo, proctor):
    made = proctor("agent", "harness", "install")
    assert made.code == 0
    skill = open(os.path.join(repo, ".claude", "skills", "proctor-multi-agent", "SKILL.md")).read()
    assert "BAGGAGE=proctor.lease=<id>" in skill and "lease: <id>" in skill
    assert proctor("job", "fork", "j", "--write-paths", "a.py", "--check", "test").code == 0
    refused = proctor("agent", "harness", "install", env={"BAGGAGE": "proctor.lease=j"})
    assert refused.code == 1 and "only an unbound caller" in refused.err


def test_doctor(repo, proctor):
    healthy = proctor("doctor")
    assert "store:" in healthy.out and "bound lease: none" in healthy.out
    assert proctor("job", "fork", "j", "--write-paths", "a.py", "--check", "test").code == 0
    unjudged = proctor("doctor", env={"BAGGAGE": "proctor.lease=j"})
    assert unjudged.code == 1 and "never taken" in unjudged.out
    assert proctor("job", "exec", "j").code == 0
    judged = proctor("doctor")
    assert "bound lease: j (from marker) is live and judged" in judged.out
    ghost = proctor("doctor", env={"BAGGAGE": "proctor.lease=ghost"})
    assert "bound lease: j (from contested) is live and judged" in ghost.out, "the record wins over the claim"
    with open(os.path.join(repo, "proctor.toml"), "a") as handle:
        handle.write("[jobs]\nmax_depth = -3\n")
    assert "FAIL config" in proctor("doctor").out


def test_session_ls(repo, proctor):
    assert proctor("job", "fork", "j", "--write-paths", "a.py", "--check", "test").code == 0
    event = {
        "session_id": "abc",
        "cwd": repo,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
    }
    env = dict(
        os.environ,
        BAGGAGE="proctor.lease=j,proctor.spawner=planner",
        TRACEPARENT="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    )
    hook_run(["claude"], json.dumps(event).encode(), env)
    hook_run(["claude"], json.dumps(event).encode(), env)
    seen = proctor("session", "ls", "-o", "json").json()["sessions"]
    assert seen[0]["session"] == "abc" and seen[0]["lease"] == "j" and seen[0]["lease_from"] == "env"
    assert seen[0]["spawner"] == "planner" and seen[0]["trace"].startswith("00-0af7") and seen[0]["calls"] == 2
    assert "spawner=planner" in proctor("session", "ls").out
