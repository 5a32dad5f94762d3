"""proctor/hosts/claude.py: Claude Code's events through the hook, and its answers' form."""

from __future__ import annotations

import os

from tests.hook.world import LEASED, advised, event, reason


def test_claude_forms(ws, hook):
    deny = hook(
        event(
            ws,
            "Bash",
            {"command": "npm test > src/b.py", "description": "Run", "timeout": 120000, "run_in_background": False},
        ),
        env=LEASED,
    )
    assert set(deny) == {"hookSpecificOutput"}
    assert deny["hookSpecificOutput"]["hookEventName"] == "PreToolUse"
    assert deny["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "deny [lease-write-scope]: src/b.py is outside the write paths of feat" in reason(deny)
    assert "(acting under lease feat, from env)" in reason(deny)
    assert hook(event(ws, "Bash", {"command": "echo ok > src/a.py"}), env=LEASED) == {}
    # npm's own writes cannot be named: advised, never silent (and never refused)
    assert advised(hook(event(ws, "Bash", {"command": "npm test > src/a.py"}), env=LEASED), "lease-write-scope")
    advise = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/b.py"), "content": "x"}))
    assert advised(advise, "lease-unattributed")
