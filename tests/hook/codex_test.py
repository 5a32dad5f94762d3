"""proctor/hosts/codex.py: Codex's events through the hook, and its answers' form."""

from __future__ import annotations

from tests.hook.world import LEASED, event


def test_codex_forms(ws, hook):
    deny = hook(event(ws, "Bash", {"command": "touch src/b.py"}, model="gpt"), host="codex", env=LEASED)
    assert deny == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": deny["hookSpecificOutput"]["permissionDecisionReason"],
        }
    }
    assert deny["hookSpecificOutput"]["permissionDecisionReason"].startswith("deny [lease-write-scope]")
    assert hook(event(ws, "Bash", {"command": "touch src/a.py"}), host="codex", env=LEASED) == {}
    advise = hook(event(ws, "Bash", {"command": "touch src/b.py"}), host="codex")
    # an advisory reaches the model as additionalContext (Codex drops systemMessage)
    assert set(advise) == {"hookSpecificOutput"} and set(advise["hookSpecificOutput"]) == {
        "hookEventName",
        "additionalContext",
    }
    assert "advise [lease-unattributed]" in advise["hookSpecificOutput"]["additionalContext"]
    # argv-form commands are joined and parsed too
    argv = hook(event(ws, "Bash", {"command": ["bash", "-lc", "echo x > src/b.py"]}), host="codex", env=LEASED)
    assert argv["hookSpecificOutput"]["permissionDecision"] == "deny"
