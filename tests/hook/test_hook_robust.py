"""The hook's promises: it never crashes on any input, and its import path stays small."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import ENGINE, make_repo
from proctor import api
from proctor.hook import run as hook_run

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=15), children, max_size=6),
    max_leaves=30,
)
tool_names = st.sampled_from(
    [
        "Bash",
        "Write",
        "Edit",
        "MultiEdit",
        "Read",
        "Glob",
        "Task",
        "Agent",
        "run_shell_command",
        "write_file",
        "apply_patch",
        "Weird",
    ]
)
events = st.sampled_from(["PreToolUse", "PostToolUse", "Stop", "SubagentStop", "BeforeTool", "AfterTool", "X"])
shellish = st.lists(
    st.sampled_from(
        list("ab ./>|&;'\"$()`<-\\\n#*{}=")
        + ["rm ", "cp ", "sed -i ", "bash -c ", "<<EOF\n", "EOF\n", "src/a.py", "proctor job fork ", "--parent "]
    ),
    max_size=25,
).map("".join)


def _envelope(root):
    return st.fixed_dictionaries(
        {
            "hook_event_name": events,
            "tool_name": tool_names,
            "cwd": st.sampled_from([root, "/", "", "rel/dir"]),
            "session_id": st.one_of(st.none(), st.text(max_size=8)),
            "tool_input": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {
                        "command": st.one_of(shellish, json_values),
                        "file_path": st.one_of(st.text(max_size=30), json_values),
                        "prompt": st.one_of(st.none(), st.text(max_size=40)),
                    }
                ),
            ),
        },
        optional={"agent_id": st.text(max_size=8), "tool_response": json_values},
    )


def test_fuzz_hook_never_fails(tmp_path_factory, monkeypatch):
    import proctor.hook as hook_module

    failures: list[str] = []

    def record(env, message, always=False):
        # Failing open on proctor's own errors (not a checkout, an unusable store) is the
        # design; any other exception is a bug the fail-open would otherwise hide.
        if message.startswith("proctor hook: ") and ": " in message[14:]:
            kind = message[14:].split(":", 1)[0]
            if kind not in ("ProctorError", "StoreError", "Refused", "unknown host nope; usage"):
                failures.append(message)

    monkeypatch.setattr(hook_module, "_debug", record)
    root = make_repo(tmp_path_factory.mktemp("fuzz") / "repo", "[targets.test]\ncommand = 'true'\n")
    env = dict(os.environ)
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        payload=st.one_of(_envelope(root), json_values.map(lambda v: v)),
        host=st.sampled_from(["claude", "codex", "gemini"]),
        lease=st.booleans(),
    )
    def check_json(payload, host, lease):
        environ = dict(env, BAGGAGE="proctor.lease=feat") if lease else env
        out, code = hook_run([host], json.dumps(payload).encode(), environ)
        assert code == 0
        answer = json.loads(out)
        assert isinstance(answer, dict)
        if host == "codex":
            allowed = {"hookSpecificOutput", "decision", "reason"}  # never systemMessage: Codex drops it
            assert set(answer) <= allowed
            if "hookSpecificOutput" in answer and "additionalContext" in answer["hookSpecificOutput"]:
                assert set(answer) == {"hookSpecificOutput"}  # an advisory: the context alone
                assert set(answer["hookSpecificOutput"]) == {"hookEventName", "additionalContext"}
                assert answer["hookSpecificOutput"]["additionalContext"]
            elif "hookSpecificOutput" in answer:
                assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
                assert answer["hookSpecificOutput"]["permissionDecisionReason"]

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.binary(max_size=300), host=st.sampled_from(["claude", "codex", "gemini", "nope"]))
    def check_bytes(data, host):
        out, code = hook_run([host], data, env)
        assert code == 0 and isinstance(json.loads(out), dict)

    check_json()
    check_bytes()
    assert failures == []


# What `proctor hook` may import: the standard library modules it needs and proctor's core.
ALLOWED_STDLIB = {
    "json",
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "_json",
    "sqlite3",
    "sqlite3.dbapi2",
    "_sqlite3",
    "os",
    "sys",
    "time",
    "errno",
    "fcntl",
    "stat",
    "_stat",
    "zlib",
    "re",
    "functools",
    "_functools",
    "math",
    "__future__",
    "runpy",
    "encodings.ascii",
    # sqlite3's own imports
    "datetime",
    "_datetime",
    "collections.abc",
}
ALLOWED_PREFIXES = (
    "proctor",
    "proctor.hook",
    "proctor.hosts",
    "proctor.guard",
    "proctor.store",
    "proctor.claims",
    "proctor.paths",
    "proctor.errors",
    "proctor.gate",
    "proctor.timeutil",
    "proctor.trail",
    "proctor.transcript",
    "proctor.jobrecord",
)
FORBIDDEN = (
    "click",
    "rich",
    "asyncio",
    "tomllib",
    "subprocess",
    "dataclasses",
    "typing",
    "inspect",
    "proctor.cli",
    "proctor.jobs",
    "proctor.config",
    "proctor.workspace",
    "proctor.vcs",
    "proctor.api",
    "hashlib",
    "urllib",
    "shlex",
    "selectors",
    "threading",
    "psycopg",
)
# On a PostgreSQL store the hook talks to the database through proctor/store/pgwire.py: a socket,
# and SCRAM-SHA-256's key derivation for a password (the test cluster's TCP login). Nothing else.
if ENGINE == "postgresql":
    ALLOWED_STDLIB |= {"_socket", "binascii", "struct", "_struct", "hmac", "_hashlib", "_blake2"}
    FORBIDDEN = tuple(f for f in FORBIDDEN if f != "hashlib")
    ALLOWED_STDLIB |= {"hashlib"}


def _imports_of_hook(root: str, payload: dict, env: dict, host: str = "claude") -> set[str]:
    baseline = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"], capture_output=True, text=True, env=env, cwd=root
    ).stderr
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "proctor", "hook", host],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout) is not None
    names = lambda text: {line.split("|")[-1].strip() for line in text.splitlines() if line.startswith("import time:")}  # noqa: E731
    _imports_of_hook.answer = json.loads(proc.stdout)
    return names(proc.stderr) - names(baseline) - {"imported package", "package"}


def test_hook_imports_only_the_allow_list(tmp_path):
    root = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    env = dict(os.environ, BAGGAGE="proctor.lease=feat")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    payloads = [
        {
            "session_id": "s",
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "echo x > README && proctor job wait other"},
        },
        {
            "session_id": "s",
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": os.path.join(root, "src/a.py")},
        },
    ]
    # the first call computes the settings cache (tomllib, git); every later call reads it
    subprocess.run(
        [sys.executable, "-m", "proctor", "hook", "claude"],
        input=json.dumps(payloads[0]),
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    # a Claude Code subagent's first call, bound from its own transcript's first line
    transcripts = tmp_path / "transcripts"
    (transcripts / "s" / "subagents").mkdir(parents=True)
    (transcripts / "s.jsonl").write_text("")
    (transcripts / "s" / "subagents" / "agent-a1.jsonl").write_text(
        json.dumps({"type": "user", "message": {"role": "user", "content": "lease: feat\nwrite src/a.py"}}) + "\n"
    )
    subagent = {
        "session_id": "s",
        "agent_id": "a1",
        "agent_type": "general-purpose",
        "cwd": root,
        "transcript_path": str(transcripts / "s.jsonl"),
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": os.path.join(root, "README")},
    }
    gemini = {
        "session_id": "g",
        "cwd": root,
        "hook_event_name": "BeforeTool",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "echo x > README", "dir_path": "."},
    }
    opencode = {
        "session_id": "o",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "bash",
        "tool_input": {"command": "echo x > README"},
    }
    cases = [(p, "claude") for p in payloads] + [(subagent, "claude"), (gemini, "gemini"), (opencode, "opencode")]
    for payload, host in cases:
        loaded = _imports_of_hook(root, payload, dict(env, BAGGAGE="") if payload is subagent else env, host)
        if payload is subagent:  # the first-call binding ran: the subagent is judged under feat
            reason = _imports_of_hook.answer["hookSpecificOutput"]["permissionDecisionReason"]
            assert "lease-write-scope" in reason and "from agent" in reason, reason
        outside = sorted(
            m for m in loaded if m not in ALLOWED_STDLIB and not (m == "proctor" or m.startswith(ALLOWED_PREFIXES[1:]))
        )
        assert outside == [], f"the hook imported {outside}"
        assert not any(m == f or m.startswith(f + ".") for m in loaded for f in FORBIDDEN)


def test_real_process_answers(tmp_path):
    root = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    env = dict(os.environ, BAGGAGE="proctor.lease=feat")
    payload = {
        "session_id": "s",
        "cwd": root,
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "rm README"},
    }
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "hook", "claude"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    assert proc.returncode == 0 and proc.stderr == ""
    answer = json.loads(proc.stdout)
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    help_text = subprocess.run([sys.executable, "-m", "proctor", "hook", "--help"], capture_output=True, text=True)
    assert help_text.returncode == 0 and "proctor hook claude" in help_text.stdout
