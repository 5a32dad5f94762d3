"""proctor/workers/executors/opencode.py: its argv and its stream Parser, fed what opencode 1.18.33 printed."""

from __future__ import annotations

import json
import os

from proctor.workers.executors import opencode
from tests.support import SHARED_FIXTURES, needs_shared_fixtures

CAPTURES = os.path.join(SHARED_FIXTURES, "hosts", "opencode-1.18.33")


class Worker:
    command: list[str] | None = None
    model: str | None = None


def _feed(lines) -> tuple[opencode.Parser, list]:
    parser = opencode.Parser()
    events = [event for line in lines for event in parser.feed(line)]
    return parser, events + parser.close(0)


def _capture(name: str) -> list[str]:
    with open(os.path.join(CAPTURES, name)) as handle:
        return handle.read().splitlines()


def _kinds(events, kind: str) -> list:
    return [event for event in events if event.kind == kind]


def test_argv_default_runs_unattended_and_passes_model_session_and_prompt_last():
    assert opencode.argv(Worker(), "do it") == ["opencode", "run", "--format", "json", "--auto", "do it"]
    worker = Worker()
    worker.model, worker.command = "fake/m1", ["/opt/oc/bin/opencode"]
    # a command of one's own is run as given: --auto is only added to the default command
    assert opencode.argv(worker, "go on", resume="ses_1") == [
        "/opt/oc/bin/opencode",
        "run",
        "--format",
        "json",
        "--model",
        "fake/m1",
        "--session",
        "ses_1",
        "go on",
    ]
    assert opencode.PROMPT_ON_STDIN is False and opencode.SPEND == "usd"


@needs_shared_fixtures
def test_a_text_reply_is_final_with_its_session():
    _, events = _feed(_capture("run-text.jsonl"))
    assert {event.value for event in _kinds(events, "session")} == {"ses_dcf4e1fe3ffefuWZJYK4H3v91s"}
    [final] = _kinds(events, "final")
    assert final.text == "Hello from the fake chat model.\n\nDONE" and final.value == "stop"


@needs_shared_fixtures
def test_steps_ending_in_tool_calls_are_not_final_and_the_last_step_is():
    parser, events = _feed(_capture("run-tools.jsonl"))
    [final] = _kinds(events, "final")  # three steps, two of them ending in tool-calls
    assert final.text == "Edited src/a.py.\n\nDONE" and final.value == "stop"
    assert events.index(final) == len(events) - 1
    assert [event.value for event in _kinds(events, "cost")] == [0.0, 0.0, 0.0]
    assert parser.partial() == "Edited src/a.py.\n\nDONE"


@needs_shared_fixtures
def test_an_api_error_is_fatal_and_names_the_providers_message_and_status():
    _, events = _feed(_capture("run-error-400.jsonl"))
    [fatal] = _kinds(events, "fatal")
    assert fatal.text == "APIError: fake: bad request (scripted) (HTTP 400)"
    assert _kinds(events, "final") == []


def _line(kind: str, **part) -> str:
    return json.dumps({"type": kind, "sessionID": "ses_x", "part": part})


def test_costs_add_up_and_a_step_after_a_final_reply_means_the_worker_carried_on():
    lines = [
        _line("step_start"),
        _line("text", text="first answer"),
        _line("step_finish", reason="stop", cost=0.25),
        _line("step_start"),
        _line("tool_use"),
        _line("step_finish", reason="tool-calls", cost=0.5),
    ]
    _, events = _feed(lines)
    assert [event.value for event in _kinds(events, "cost")] == [0.25, 0.75]
    assert [event.kind for event in events if event.kind in ("final", "step")] == ["final", "step"]


def test_a_step_with_text_and_no_tool_and_no_reason_is_final_and_done_is_authoritative():
    _, events = _feed([_line("step_start"), _line("text", text="all done"), _line("step_finish")])
    assert [(event.text, event.value) for event in _kinds(events, "final")] == [("all done", None)]
    _, events = _feed([_line("step_start"), _line("tool_use"), _line("step_finish")])
    assert _kinds(events, "final") == [], "a step that called a tool, with no reason, is not a reply"
    _, events = _feed([_line("text", text="bye"), json.dumps({"type": "done"})])
    assert [(event.text, event.value) for event in _kinds(events, "final")] == [("bye", "done")]


def test_error_text_reads_every_shape_opencode_has_printed():
    assert (
        opencode.error_text({"name": "APIError", "data": {"message": "m", "statusCode": 429}})
        == "APIError: m (HTTP 429)"
    )
    assert opencode.error_text({"message": "older"}) == "older"
    assert opencode.error_text("plain") == "plain"
    assert opencode.error_text(None) == "opencode error"
    assert opencode.error_text({"name": "ProviderAuthError", "data": "x"}) == "ProviderAuthError"


def test_lines_that_are_not_events_are_skipped():
    _, events = _feed(["", "not json", "[1, 2]", json.dumps({"type": "text", "part": "nope"})])
    assert events == []
