"""The leased repository the guard's bypass and adversary tests share: job w1 holds
plan/w1/** (with w1/sub beneath it), `other` holds src/**; and a HOME of the test's own with
hook wiring and a global git config to aim at; and the hook called with one of proctor's MCP
tools under lease w1 (payload, judge). Import the fixtures by name."""

from __future__ import annotations

import json
import os
import sys

import pytest

from proctor import api
from tests.support import call_hook, git, make_repo
from tests.store.store_oracle import connect

CONFIG = "[targets.test]\ncommand = 'true'\n"


@pytest.fixture
def ws(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", CONFIG)
    for path in ("plan/w1/a.py", "src/b.py", "docs/c.md"):
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as handle:
            handle.write("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "files")
    monkeypatch.chdir(root)
    api.fork({"id": "w1", "write_paths": ["plan/w1/**"], "check": "test"}, cwd=root)
    api.fork({"id": "w1/sub", "parent": "w1", "write_paths": ["plan/w1/sub/**"], "check": "test"}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/**"], "check": "test"}, cwd=root)
    return os.path.realpath(root)


@pytest.fixture
def home(tmp_path, monkeypatch):
    path = tmp_path / "home"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.json").write_text('{"hooks": {"PreToolUse": "proctor hook claude"}}\n')
    (path / ".gitconfig").write_text("[user]\n\tname = t\n")
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return str(path)


def take_here(root: str, job_id: str = "w1") -> None:
    """The holder takes its job in this checkout: the checkout is bound to it, so a proctor run
    here acts as its holder whatever its environment says (the store sees the lease)."""
    api.exec_job(job_id, cwd=root, lease=job_id)


def state_dir(root: str) -> str:
    from proctor.paths import find_checkout, repo_state_dir

    return repo_state_dir(find_checkout(root))


def job_row(root: str, job_id: str) -> dict:
    """A job's row as the store holds it, read with the database's own driver (store_oracle)."""
    conn = connect(state_dir(root))
    try:
        row = conn.execute("SELECT doc FROM jobs WHERE id = ?", (job_id,)).fetchone()
    finally:
        conn.close()
    assert row is not None, f"no job {job_id}"
    return json.loads(row[0])


def denied(answer: dict, rule: str | None = None) -> bool:
    """Whether an answer is a deny (by `rule`, when named): Claude Code's form, or the
    `decision`/`reason` of Gemini CLI and opencode."""
    spec = answer.get("hookSpecificOutput", {})
    if spec:
        text = spec.get("permissionDecisionReason") or ""
        return spec.get("permissionDecision") == "deny" and (rule is None or f"deny [{rule}]" in text)
    return answer.get("decision") == "deny" and (rule is None or f"deny [{rule}]" in answer.get("reason", ""))


def said(answer: dict) -> str:
    """What an answer tells the model, for an assertion's message."""
    spec = answer.get("hookSpecificOutput", {})
    return (
        spec.get("permissionDecisionReason")
        or spec.get("additionalContext")
        or answer.get("reason")
        or answer.get("advisory")
        or "pass ({})"
    )


def read_event(root: str, path: str) -> dict:
    """A Claude Code PreToolUse Read of `path` under `root`, by session s-peek."""
    return {
        "session_id": "s-peek",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Read",
        "tool_input": {"file_path": os.path.join(root, path)},
        "tool_use_id": "toolu_peek",
    }


def proctor_path(tmp_path) -> str:
    """PATH with this checkout's proctor first, as a worker's shell has it."""
    directory = tmp_path / "bin"
    directory.mkdir(exist_ok=True)
    script = directory / "proctor"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -m proctor "$@"\n')
    script.chmod(0o755)
    return str(directory) + os.pathsep + os.environ["PATH"]


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
