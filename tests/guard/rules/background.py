"""What the background-* rules' tests share that is not a fixture: a background task's launch
in a Claude Code transcript."""

from __future__ import annotations

from tests.transcript.test_transcript import tool_result, tool_use


def launch(task, command, ago, output=None, agent=None):
    text = f"Command running in background with ID: {task}."
    if output:
        text += f" Output is being written to: {output}"
    return [
        tool_use("tu-" + task, "Bash", {"command": command, "run_in_background": True}, ago, agent=agent),
        tool_result("tu-" + task, text, ago - 1, {"backgroundTaskId": task}),
    ]
