"""The guard each executor hands its worker, without a host binary: Codex's `-c` overrides
(hooks, their trust, hooks switched on) and Gemini CLI's system settings (written where Gemini
loads them, or not at all). tests/hosts/test_codex.py and test_gemini.py run the real CLIs."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tomllib

import pytest

from proctor.config import Worker

LEASE = "plan/w1"


def toml_value(raw: str):
    """A `-c key=value` value as Codex parses it (`_x_ = <value>` as TOML)."""
    return tomllib.loads(f"_x_ = {raw}")["_x_"]


def overrides(argv: list[str]) -> dict:
    out = {}
    for i, word in enumerate(argv):
        if word == "-c":
            key, _, value = argv[i + 1].partition("=")
            out[key] = toml_value(value)
    return out


def test_pinned_hook_is_claudes_for_every_host():
    from proctor.workers.executors import claude, pinned_hook

    assert pinned_hook(LEASE, "claude") == claude.pinned_hook(LEASE)
    command = pinned_hook(LEASE, "codex")
    assert command.startswith("/usr/bin/env -i ") and command.endswith(" -I -m proctor hook codex --lease plan/w1")


# --- codex -------------------------------------------------------------------------------------


def test_codex_hooks_are_the_printed_wiring_pinned_and_trusted():
    from proctor.hosts import codex as wiring
    from proctor.workers.executors import codex, pinned_hook

    given = overrides(codex.hook_overrides(LEASE))
    assert given["features.hooks"] is True
    command = pinned_hook(LEASE, "codex")
    handler = {"type": "command", "command": command, "timeout": wiring.TIMEOUT}
    state = given["hooks.state"]
    assert set(state) == {f"/<session-flags>/config.toml:{wiring.EVENT_LABELS[e]}:0:0" for e in wiring.WIRED_EVENTS}
    for event in wiring.WIRED_EVENTS:
        assert given[f"hooks.{event}"] == [{"hooks": [handler]}]
        key = f"/<session-flags>/config.toml:{wiring.EVENT_LABELS[event]}:0:0"
        assert state[key] == {"enabled": True, "trusted_hash": wiring.trust_hash(event, handler)}
    # the same events, in the same form, as `proctor describe harness --host codex` prints
    printed = tomllib.loads(wiring.wiring("/nonexistent-home", root=""))
    assert set(printed["hooks"]) - {"state"} == set(wiring.WIRED_EVENTS)
    for event in wiring.WIRED_EVENTS:
        assert printed["hooks"][event] == [{"hooks": [{**handler, "command": wiring.COMMAND}]}]
    # with no job, the plain command
    unpinned = overrides(codex.hook_overrides())
    assert unpinned["hooks.PreToolUse"][0]["hooks"][0]["command"] == "proctor hook codex"


def test_codex_argv_hands_the_hooks_default_custom_and_resumed(tmp_path, monkeypatch):
    from proctor.workers.executors import codex

    monkeypatch.chdir(tmp_path)
    hooks = codex.hook_overrides(LEASE)
    default = codex.argv(Worker("cx", "codex", None, None, None, None), "do it", lease=LEASE)
    custom = codex.argv(
        Worker("cx", "codex", ("codex", "-s", "danger-full-access"), None, None, None), "do it", lease=LEASE
    )
    resumed = codex.argv(Worker("cx", "codex", None, None, None, None), "again", resume="s-1", lease=LEASE)
    for argv in (default, custom, resumed):
        assert any(argv[i : i + len(hooks)] == hooks for i in range(len(argv))), argv
        assert argv[-1] in ("do it", "again")
    assert 'sandbox_mode="workspace-write"' in default
    assert 'sandbox_mode="workspace-write"' not in custom  # a command of one's own keeps its say
    assert resumed[-2:] == ["s-1", "again"]


# --- gemini ------------------------------------------------------------------------------------


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
