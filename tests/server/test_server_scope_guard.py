"""The guard's half of "no leased agent reaches around its scope" (issue 14, item 7): a session
under a lease does not start or stop the server, and does not run a `proctor monitor`
command with its job's secret removed, which would make the CLI reach for the server token.
The CLI and the server refuse these too (tests/server/test_server_scope.py); the guard refuses them
at the call, for the sessions whose lease only the guard knows (nothing in their environment)."""

from __future__ import annotations

import json
import os

import pytest

from proctor.hook import run as hook_run
from tests.guard.guard_lease import denied, said, ws  # noqa: F401 (fixtures)


def bash(root, command, environ_extra=None) -> dict:
    payload = {
        "session_id": "s1",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "toolu_1",
    }
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(environ_extra or {})
    out, code = hook_run(["claude", "--lease", "w1"], json.dumps(payload).encode(), environ)
    assert code == 0
    return json.loads(out)


WITH_SECRET = {"PROCTOR_NONCE": "s3cr3t"}


@pytest.mark.parametrize(
    "command",
    [
        "env -u PROCTOR_NONCE proctor monitor remove 3",
        "env -uPROCTOR_NONCE proctor monitor remove 3",
        "env --unset=PROCTOR_NONCE proctor monitor list",
        "env -u BAGGAGE -u PROCTOR_NONCE proctor monitor remove 3",
        "unset PROCTOR_NONCE; proctor monitor remove 3",
        "(unset PROCTOR_NONCE && proctor monitor remove 3)",
        "export -n PROCTOR_NONCE; proctor monitor list",
        "env -i PATH=/usr/bin proctor monitor list",
        "PROCTOR_NONCE= proctor monitor add --cmd true --interval 10s --allow-unsandboxed",
        "bash -c 'env -u PROCTOR_NONCE proctor monitor list'",
        "sudo -E env -u PROCTOR_NONCE proctor monitor list",
    ],
)
def test_a_monitor_command_with_the_secret_removed_is_denied(ws, command):  # noqa: F811
    answer = bash(ws, command, WITH_SECRET)
    assert denied(answer, "lease-store"), said(answer)


@pytest.mark.parametrize(
    "command",
    [
        "proctor server start",
        "proctor server start --foreground",
        "proctor server stop",
        "cd /tmp && proctor server start --port 9999",
    ],
)
def test_starting_or_stopping_the_server_is_denied(ws, command):  # noqa: F811
    answer = bash(ws, command, WITH_SECRET)
    assert denied(answer, "lease-store"), said(answer)
    assert "a person" in said(answer)


def test_baggage_unset_in_the_attached_form_is_denied(ws):  # noqa: F811
    answer = bash(ws, "env -uBAGGAGE proctor ls jobs", WITH_SECRET)
    assert denied(answer, "lease-store"), said(answer)


@pytest.mark.parametrize(
    "command, extra",
    [
        ("proctor monitor list", WITH_SECRET),
        ("PROCTOR_NONCE=s3cr3t proctor monitor list", {}),  # a session whose environment lacks it names it
        ("export PROCTOR_NONCE=s3cr3t; proctor monitor remove 3", {}),
        ("proctor monitor wait --job w1", {}),  # reads its own job's follow-ups, no token involved
        ("proctor server status", {}),
    ],
)
def test_the_holders_own_calls_pass(ws, command, extra):  # noqa: F811
    answer = bash(ws, command, extra)
    assert not denied(answer, "lease-store"), said(answer)


def test_without_the_secret_a_monitor_command_is_denied(ws):  # noqa: F811
    answer = bash(ws, "proctor monitor list")
    assert denied(answer, "lease-store"), said(answer)
