"""proctor/workers/executors/codex.py: the `-c` overrides that hand Codex its hooks, and its argv."""

from __future__ import annotations

import tomllib

from proctor.config import Worker
from tests.workers.world import LEASE


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
