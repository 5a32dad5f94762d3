"""The hooks `proctor work` hands a Claude worker: the printed wiring, with each command pinned
to this proctor, its store and the worker's job, whatever environment runs it."""

from __future__ import annotations

import json
import os
import subprocess

from proctor import api
from proctor.hosts import claude as claude_hook
from proctor.workers.executors import claude
from tests.support import make_repo


class Worker:
    command = None
    model = None


def _settings(argv: list[str]) -> dict:
    return json.loads(argv[argv.index("--settings") + 1])


def test_pinned_hooks_cover_the_printed_events():
    printed = json.loads("\n".join(line for line in claude_hook.wiring().splitlines() if not line.startswith("#")))
    pinned = _settings(claude.argv(Worker(), "p", lease="feat"))
    assert pinned["disableAllHooks"] is False
    assert sorted(pinned["hooks"]) == sorted(printed["hooks"])
    for groups in pinned["hooks"].values():
        command = groups[0]["hooks"][0]["command"]
        assert command.startswith("/usr/bin/env -i ") and command.endswith(" -m proctor hook claude --lease feat")


def test_pinned_hook_judges_under_the_job_in_a_hostile_environment(tmp_path, monkeypatch):
    root = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    command = _settings(claude.argv(Worker(), "p", lease="feat"))["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    empty = tmp_path / "empty"
    empty.mkdir()
    hostile = {
        "PATH": "/nonexistent",
        "PROCTOR_STATE_DIR": str(empty),
        "XDG_CACHE_HOME": str(empty),
        "BAGGAGE": "proctor.lease=other",
        "PYTHONPATH": str(empty),
        "HOME": str(empty),
    }
    payload = {
        "session_id": "s",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": os.path.join(root, "src", "b.py"), "content": "x"},
    }
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=hostile,
        cwd=root,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    reason = json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "lease-write-scope" in reason and "outside the write paths of feat" in reason, reason
    # the printed, unpinned command in the same environment finds no proctor at all
    plain = subprocess.run(
        ["/bin/sh", "-c", "proctor hook claude"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=hostile,
        cwd=root,
        timeout=60,
    )
    assert plain.returncode != 0 and "deny" not in plain.stdout
