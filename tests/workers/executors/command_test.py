"""proctor/workers/executors/command.py: any line-printing program; its last lines and its exit are its reply."""

from __future__ import annotations

from proctor.workers.executors import command


class Worker:
    command = ["./agent.sh", "--fast"]
    model = "ignored"


def test_argv_is_the_command_as_given_and_the_prompt_goes_on_stdin():
    worker = Worker()
    argv = command.argv(worker, "the prompt", resume="ignored", lease="w1")
    assert argv == ["./agent.sh", "--fast"] and argv is not worker.command
    assert command.PROMPT_ON_STDIN is True and command.SPEND == "none"


def test_the_reply_is_the_last_lines_and_the_exit_code():
    parser = command.Parser()
    for n in range(1, 31):
        assert parser.feed(f"line {n}") == []
    [final] = parser.close(3)
    assert final.kind == "final" and final.value == "exit 3"
    assert final.text.splitlines() == [f"line {n}" for n in range(31 - command.TAIL, 31)]


def test_a_killed_program_reports_no_exit_code():
    parser = command.Parser()
    parser.feed("half way")
    [final] = parser.close(None)
    assert (final.text, final.value) == ("half way", "exit None")
