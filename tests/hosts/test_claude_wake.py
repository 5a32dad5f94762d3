"""An idle Claude Code session woken by its job's monitors: the real Claude Code 2.1.332, a real
proctor server running a real monitor, a scripted model.

The session adds a monitor and ends its turn. Its Stop is refused once with the command that
waits for the job's next follow-up (`proctor monitor wait`), which the model starts as a
background task; the next Stop goes through and the session is idle. When the monitor's
output is grouped into a follow-up, the wait prints it and exits; Claude Code wakes the idle
session with the task's notification, and runs the UserPromptSubmit hook for that turn: the
follow-up goes to the model as its context, and is delivered then.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from tests.hosts.conftest import fork_and_take, host_binary
from tests.hosts.model import Anthropic, ScriptedModel, Tool, Turn
from tests.hosts.test_claude_guard import run_claude, system_messages

WAIT_COMMAND = re.compile(r"`(proctor monitor wait [^`]*)`")
OUTPUT_FILE = re.compile(r"<output-file>([^<]+)</output-file>")


def _store_rows(repo: str, query: str, params: tuple = ()) -> list[tuple]:
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(repo)))
    try:
        return store.tx.execute(query, params).fetchall()
    finally:
        store.close()


@pytest.fixture
def server(host_env, host_repo):
    """The person's server. fork_and_take binds the repository to the job (proctor job exec
    there), so the person says they act as the orchestrator."""
    proc = host_env.proctor("server", "start", "--orchestrator", cwd=host_repo, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield
    stopped = host_env.proctor("server", "stop", "--orchestrator", cwd=host_repo, timeout=60)
    assert stopped.returncode == 0 and "server stopped" in stopped.stdout, stopped.stdout + stopped.stderr


def _messages(record: dict) -> str:
    return json.dumps(record["body"].get("messages") or [])


def test_idle_session_is_woken_by_its_monitors_followup(host_env, host_repo, server):
    host_binary("claude")
    nonce = fork_and_take(host_env, host_repo, "feat", "src/a.py")
    assert nonce
    wait_tool = Tool("Bash", {"command": "?", "run_in_background": True, "description": "Wait for the monitors"})

    def asked_to_wait(record: dict) -> bool:
        found = WAIT_COMMAND.findall(_messages(record))
        if not found:
            return False
        wait_tool.args["command"] = found[-1].replace('\\"', '"')
        return True

    read_tool = Tool("Read", {"file_path": "?"})

    def woken(record: dict) -> bool:
        found = OUTPUT_FILE.findall(_messages(record).replace("\\n", "\n"))
        if "<task-notification>" not in _messages(record) or not found:
            return False
        read_tool.args["file_path"] = found[-1]
        return True

    told_followup = lambda record: "CI-RED: test_b failed" in _messages(record)  # noqa: E731
    steps = [
        # the first run prints late, so the follow-up cannot be ready before the session is idle
        Turn(
            tools=[
                Tool(
                    "Bash",
                    {
                        "command": "proctor monitor add --cmd 'sleep 4; echo CI-RED: test_b failed' "
                        "--interval 10m --description 'ci watcher' --allow-unsandboxed",
                        "description": "Watch CI",
                    },
                )
            ]
        ),
        Turn(text="I am finished."),
        Turn(tools=[wait_tool], when=asked_to_wait),
        Turn(text="Waiting for the monitors."),
        Turn(tools=[read_tool], when=woken),
        Turn(
            tools=[Tool("Bash", {"command": "proctor monitor remove 1", "description": "Stop watching"})],
            when=told_followup,
        ),
        Turn(text="Handled CI-RED."),
    ]
    started = time.monotonic()
    with ScriptedModel(Anthropic(), steps) as model:
        events = run_claude(
            host_env,
            host_repo,
            model,
            results=2,
            timeout=240,
            extra={"BAGGAGE": "proctor.lease=feat", "PROCTOR_NONCE": nonce},
        )
        assert model.consumed() == len(steps), model.summary()
        woke_with = next((_messages(r) for r in model.main_requests() if "<task-notification>" in _messages(r)), "")
        # the ask reached the model as a Stop block's reason
        assert any("proctor monitor wait --job feat" in m for m in system_messages(model)), system_messages(model)
    results = [e for e in events if e.get("type") == "result"]
    assert results[0].get("result") == "Waiting for the monitors.", results[0]
    assert results[-1].get("result") == "Handled CI-RED.", results[-1]
    # the second turn began from the task's notification: nothing but the wait woke the session
    assert results[-1].get("origin", {}).get("kind") == "task-notification" or len(results) >= 2
    rows = _store_rows(
        host_repo, "SELECT id, text, delivered, via, printed, printed_to FROM followups WHERE job = 'feat'"
    )
    assert len(rows) == 1, rows
    followup_id, text, delivered, via, printed, printed_to = rows[0]
    assert text.startswith(f"Follow-up {followup_id} from the monitors of job feat (1 event)"), text
    assert "CI-RED: test_b failed" in text
    assert printed and printed_to.startswith("claude:"), rows
    session = printed_to.split(":", 1)[1]
    # Claude Code runs UserPromptSubmit for the notification's turn: the follow-up went to the
    # model with the wake itself, as that prompt's context, before the model read the output
    assert delivered and via == f"prompt:claude:{session}", rows
    assert woke_with and "CI-RED: test_b failed" in woke_with, woke_with[-2000:]
    # the session stopped (idle) before the follow-up existed: the wake, not a Stop, handed it over
    activity = _store_rows(
        host_repo,
        "SELECT activity, stop_blocks FROM sessions WHERE host = 'claude' AND session = ? AND subagent = ''",
        (session,),
    )
    assert activity == [("idle", 0)], activity
    assert time.monotonic() - started < 240


ADVISE = """\
[targets.test]
command = "python3 -c 'import sys; sys.exit(0)'"

[guard.rules]
monitor-followup = "advise"
"""


def test_advise_hands_the_followup_to_the_model_with_the_prompt(host_env, host_repo):
    """With advise nothing is refused, and the follow-up still reaches the model: Claude Code's
    UserPromptSubmit hook puts it beside the person's prompt. It is delivered then, not when it
    was only shown to the person."""
    from tests.support import git
    from tests.hosts.conftest import make_followup

    host_binary("claude")
    with open(os.path.join(host_repo, "proctor.toml"), "w", encoding="utf-8") as handle:
        handle.write(ADVISE)
    git(host_repo, "commit", "-qam", "advise")  # a loosening counts once committed, before the job
    fork_and_take(host_env, host_repo, "feat", "src/a.py")
    make_followup(host_repo, "feat", "CI-RED: advise me")
    with ScriptedModel(Anthropic(), [Turn(text="Saw the monitors' news.")]) as model:
        events = run_claude(host_env, host_repo, model, prompt="carry on", extra={"BAGGAGE": "proctor.lease=feat"})
        first = model.main_requests()[0]
        assert "CI-RED: advise me" in _messages(first), _messages(first)[-3000:]
        assert len(model.main_requests()) == 1, model.summary()  # no stop was refused
    assert [e for e in events if e.get("type") == "result"][-1].get("result") == "Saw the monitors' news."
    rows = _store_rows(host_repo, "SELECT delivered, via FROM followups WHERE job = 'feat'")
    assert len(rows) == 1 and rows[0][0] and rows[0][1].startswith("prompt:claude:"), rows
