"""proctor/guard/rules/monitor_followup.py: monitor-followup, a job's session stopping while its monitors' follow-up waits, or with nothing to wake it."""

from __future__ import annotations

from tests.monitors.test_monitor_wake import WAITER, add_followup, add_monitor, event, followup, hook, stop
from tests.monitors.test_monitor_wake import ws  # noqa: F401  (the fixture: jobs feat and other, monitors live)


def test_a_waiting_followup_refuses_the_stop_and_is_handed_over(ws):  # noqa: F811
    fid = add_followup(ws, "CI-RED: test_b failed")
    answer = stop(ws)
    assert answer["decision"] == "block", answer
    assert answer["reason"].startswith(f"deny [monitor-followup]: Follow-up {fid} from the monitors of job feat")
    assert "CI-RED: test_b failed" in answer["reason"]
    assert followup(ws, fid)[1] == "stop-hook:claude:s1"


def test_live_monitors_with_no_wait_refuse_the_stop_once_with_the_command(ws):  # noqa: F811
    add_monitor(ws)
    answer = stop(ws)
    assert answer["decision"] == "block" and answer["reason"].startswith("deny [monitor-followup]:")
    assert "`proctor monitor wait --job feat --host claude --session s1`" in answer["reason"]


def test_a_prompt_carries_the_followup_to_the_model(ws):  # noqa: F811
    fid = add_followup(ws, "CI-GREEN")
    context = event(ws, "UserPromptSubmit", prompt="go")["hookSpecificOutput"]["additionalContext"]
    assert "advise [monitor-followup]:" in context and "CI-GREEN" in context
    assert followup(ws, fid)[1] == "prompt:claude:s1"


def test_a_stop_with_nothing_to_hand_over_or_a_running_wait_passes(ws):  # noqa: F811
    assert stop(ws) == {}, "no monitor, no follow-up"
    add_monitor(ws)
    assert stop(ws, tasks=[WAITER]) == {}, "a running wait will wake the session"


def test_another_jobs_followup_or_an_unbound_session_is_not_refused(ws):  # noqa: F811
    fid = add_followup(ws, "CI-RED", job="other")
    assert stop(ws) == {}, "another job's follow-up is not for feat's session"
    mine = add_followup(ws, "CI-RED")
    payload = {"session_id": "s9", "transcript_path": "/tmp/none.jsonl", "cwd": ws, "hook_event_name": "Stop"}
    assert "monitor-followup" not in str(hook(payload)), "a session bound to no job"
    assert followup(ws, fid)[0] is None and followup(ws, mine)[0] is None
