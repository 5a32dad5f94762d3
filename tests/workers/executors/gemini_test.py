"""proctor/workers/executors/gemini.py: its argv, its stream Parser and the system settings that hand it hooks."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from tests.support import needs_shared_fixtures as needs_fixtures
from tests.workers.world import GEMINI, LEASE


def _gemini_feed(name: str):
    from proctor.workers.executors import gemini

    parser = gemini.Parser()
    with open(os.path.join(GEMINI, name)) as handle:
        events = [e for line in handle for e in parser.feed(line)]
    return parser, events


# --- argv and the stream -----------------------------------------------------------------------


@needs_fixtures  # as in tests/workers/test_work.py, whose tests all need the shared captures
def test_gemini_argv_unattended_trusted_and_resumed():
    from proctor.config import Worker
    from proctor.workers.executors import gemini, module

    assert module("gemini") is gemini and gemini.PROMPT_ON_STDIN is False
    plain = gemini.argv(Worker("g", "gemini", None, None, None, None), "lease: feat\ndo it")
    assert plain == ["gemini", "-p", "lease: feat\ndo it", "--output-format", "stream-json", "--approval-mode", "yolo"]
    resumed = gemini.argv(Worker("g", "gemini", None, "gemini-2.5-pro", None, None), "again", resume="s-1")
    assert resumed[-4:] == ["-m", "gemini-2.5-pro", "--resume", "s-1"] and resumed[1:3] == ["-p", "again"]
    custom = gemini.argv(Worker("g", "gemini", ("./g.sh", "--x"), None, None, None), "p")
    assert custom == ["./g.sh", "--x", "-p", "p", "--output-format", "stream-json"]
    # --skip-trust would run without the project's settings (and so without its hooks)
    assert gemini.ENV == {"GEMINI_CLI_TRUST_WORKSPACE": "true"} and "--skip-trust" not in plain


@needs_fixtures  # as in tests/workers/test_work.py, whose tests all need the shared captures
def test_gemini_stream_session_reply_and_no_cost():
    parser, events = _gemini_feed("stream-tools.jsonl")
    kinds = [(e.kind, e.value) for e in events]
    assert kinds == [("session", "0c93bc11-d58a-4856-9dcb-c948d0da5967"), ("final", "success")]
    assert events[-1].text == "Edited src/a.py.\n\nDONE"  # the text after the last tool call, deltas joined
    assert parser.tokens == 390 and not any(e.kind == "cost" for e in events)  # tokens only, never dollars


@needs_fixtures  # as in tests/workers/test_work.py, whose tests all need the shared captures
def test_gemini_stream_after_agent_retry_is_the_reply():
    _, events = _gemini_feed("probe-afteragent-deny-stream.jsonl")
    assert events[-1].kind == "final" and events[-1].text == "second answer after follow-up"


@needs_fixtures  # as in tests/workers/test_work.py, whose tests all need the shared captures
def test_gemini_api_error_is_a_provider_error():
    _, events = _gemini_feed("stream-error-400.jsonl")
    assert [e.kind for e in events] == ["session", "provider_error", "final"]
    assert "API key not valid" in events[1].text and events[-1].value == "error"
    from proctor.workers.executors import gemini

    untrusted = gemini.Parser()
    assert [e.kind for e in untrusted.close(55)] == ["provider_error"]
    turn_limit = gemini.Parser()
    limited = turn_limit.feed(
        json.dumps(
            {
                "type": "result",
                "status": "error",
                "error": {"type": "FatalTurnLimitedError", "message": "Reached max session turns for this session."},
            }
        )
    )
    assert [e.kind for e in limited] == ["final"], "the worker's own limit is no provider's fault"


# --- the hooks handed over: Gemini CLI's system settings ---------------------------------------


def test_gemini_settings_are_the_printed_wiring_pinned_named_and_on():
    from proctor.hosts import gemini as wiring
    from proctor.workers.executors import gemini, pinned_hook

    printed = json.loads("\n".join(line for line in wiring.wiring().splitlines() if not line.startswith("#")))
    first = gemini.hooks_settings(LEASE)
    second = gemini.hooks_settings(LEASE)
    assert set(first["hooks"]) == set(printed["hooks"]) == set(wiring.WIRED_EVENTS)
    assert first["hooksConfig"] == {"enabled": True}
    names = set()
    for event, groups in first["hooks"].items():
        [group] = groups
        [hook] = group["hooks"]
        [wired] = printed["hooks"][event]
        assert group["matcher"] == wired["matcher"] and group["sequential"] is True
        assert {k: v for k, v in hook.items() if k != "name"} == {
            **wired["hooks"][0],
            "command": pinned_hook(LEASE, "gemini"),
        }
        names.add(hook["name"])
    assert len(names) == 1 and names.pop().startswith("proctor-guard-")
    # named afresh for each start
    assert first["hooks"]["BeforeTool"][0]["hooks"][0]["name"] != second["hooks"]["BeforeTool"][0]["hooks"][0]["name"]
    assert gemini.hooks_settings()["hooks"]["BeforeTool"][0]["hooks"][0]["command"] == "proctor hook gemini"


def test_gemini_settings_merge_into_the_system_settings():
    from proctor.workers.executors import gemini

    theirs = {
        "model": {"name": "x"},
        "hooks": {"BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "audit"}]}]},
    }
    merged = gemini.hooks_settings(LEASE, theirs)
    assert merged["model"] == {"name": "x"}
    before = merged["hooks"]["BeforeTool"]
    assert before[0] == theirs["hooks"]["BeforeTool"][0] and before[1]["sequential"] is True
    assert theirs["hooks"]["BeforeTool"] == [before[0]]  # the base is not changed in place
    # proctor's hooks from an earlier start are replaced, not piled up
    again = gemini.hooks_settings(LEASE, merged)
    assert len(again["hooks"]["BeforeTool"]) == 2 and again["hooks"]["BeforeTool"][0] == before[0]
    # an administrator who turned hooks off keeps the last word
    off = gemini.hooks_settings(LEASE, {"hooksConfig": {"enabled": False}})
    assert off["hooksConfig"]["enabled"] is False


def test_gemini_hands_nothing_when_not_root(tmp_path, monkeypatch):
    from proctor.workers.executors import gemini

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    handed, why = gemini.hooks_handed()
    assert not handed and "root" in why
    assert gemini.env(LEASE) == gemini.ENV
    assert not any(name.startswith("gemini-system-settings") for _, _, files in os.walk(tmp_path) for name in files)


def test_gemini_hands_nothing_where_gemini_would_not_load_it(tmp_path, monkeypatch):
    """Under a directory others may write (such as /tmp), Gemini would skip the file with a
    security warning: proctor writes none."""
    from proctor.workers.executors import gemini

    monkeypatch.chdir(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("PROCTOR_STATE_DIR", str(shared / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared / "cache"))
    assert not gemini._root_secure(str(shared / "cache" / "proctor" / "x.json"))
    assert not gemini.hooks_handed()[0]
    assert gemini.env(LEASE) == gemini.ENV


def _cannot(reason: str) -> None:
    """Outside CI a machine that cannot run these (not root) skips them, saying why; CI runs as
    root, so there it is a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def root_place(monkeypatch, tmp_path):
    """A directory root owns all the way up, closed to group and others; only as root."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        _cannot("Gemini CLI loads proctor's system settings only for a worker run as root")
    home_cache = os.path.join(os.path.expanduser("~"), ".cache")
    os.makedirs(home_cache, exist_ok=True)
    base = tempfile.mkdtemp(prefix="proctor-executor-hooks-", dir=home_cache)
    from proctor.workers.executors import gemini

    if not gemini._root_secure(os.path.join(base, "x.json")):
        shutil.rmtree(base, ignore_errors=True)
        _cannot(f"{home_cache} is not owned by root all the way up")
    monkeypatch.setenv("PROCTOR_STATE_DIR", os.path.join(base, "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", os.path.join(base, "cache"))
    monkeypatch.chdir(tmp_path)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_gemini_env_writes_the_settings_where_gemini_loads_them(root_place, monkeypatch):
    from proctor.workers.executors import gemini, pinned_hook

    admin = os.path.join(root_place, "admin-settings.json")
    with open(admin, "w", encoding="utf-8") as handle:
        handle.write('{\n  // the administrator\'s\n  "model": {"name": "x"},\n}\n')
    monkeypatch.setenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH", admin)
    env = gemini.env(LEASE)
    path = env["GEMINI_CLI_SYSTEM_SETTINGS_PATH"]
    assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    assert path.startswith(os.path.join(root_place, "cache", "proctor")) and gemini._root_secure(path)
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    with open(path, encoding="utf-8") as handle:
        settings = json.load(handle)
    assert settings["model"] == {"name": "x"}  # what Gemini would have read is kept
    assert settings["hooks"]["BeforeTool"][0]["hooks"][0]["command"] == pinned_hook(LEASE, "gemini")
    # one file per job, rewritten for each start; another job has its own
    assert gemini.env(LEASE)["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] == path
    assert gemini.env("plan/w2")["GEMINI_CLI_SYSTEM_SETTINGS_PATH"] != path
