"""proctor/guard/rules/lease_tamper.py: lease-tamper, a leased session reaching for git's, proctor's or its host's ground."""

from __future__ import annotations

import os

from tests.guard.guard_lease import home, state_dir  # noqa: F401  (home: the fixture)
from tests.hook.world import LEASED, denied, event, reason


def test_writes_into_the_ground_are_refused_whatever_the_write_paths(ws, hook, home):  # noqa: F811
    hooks = os.path.join(ws, ".git", "hooks", "pre-commit")
    answer = hook(event(ws, "Write", {"file_path": hooks, "content": "#!/bin/sh\n"}), env=LEASED)
    assert denied(answer, "lease-tamper") and "the repository's git directory" in reason(answer)
    shell = hook(event(ws, "Bash", {"command": "echo '[core]' >> .git/config"}), env=LEASED)
    assert denied(shell, "lease-tamper"), shell
    wiring = os.path.join(home, ".claude", "settings.json")
    answer = hook(event(ws, "Write", {"file_path": wiring, "content": "{}"}), env=LEASED)
    assert denied(answer, "lease-tamper") and "hook wiring" in reason(answer)


def test_git_settings_that_run_commands_and_the_token_are_refused(ws, hook):
    for command in ("git config core.hooksPath /tmp/h", "git -c x=y config filter.lfs.smudge evil"):
        answer = hook(event(ws, "Bash", {"command": command}), env=LEASED)
        assert denied(answer, "lease-tamper") and "makes git run a command" in reason(answer), command
    replaced = hook(event(ws, "Bash", {"command": "git replace HEAD HEAD~1"}), env=LEASED)
    assert denied(replaced, "lease-tamper"), replaced
    token = os.path.join(state_dir(ws), "server", "token")
    answer = hook(event(ws, "Read", {"file_path": token}), env=LEASED)
    assert denied(answer, "lease-tamper") and "holds the server's token" in reason(answer)


def test_the_jobs_own_work_and_harmless_git_settings_pass(ws, hook):
    write = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src", "a.py"), "content": "A = 1\n"}), env=LEASED)
    assert write == {}
    assert hook(event(ws, "Bash", {"command": "git config user.name someone"}), env=LEASED) == {}
    assert hook(event(ws, "Bash", {"command": "git config --get core.hooksPath"}), env=LEASED) == {}
    assert hook(event(ws, "Bash", {"command": "git replace --list"}), env=LEASED) == {}
    unleased = hook(event(ws, "Bash", {"command": "echo '[core]' >> .git/config"}))
    assert "lease-tamper" not in str(unleased), "no job, nothing of this rule's"
