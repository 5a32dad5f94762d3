"""background-silent on real Claude Code transcripts, cut where a background task is running.

No transcript in the shared fixtures ends with a task still running, so each is cut (a prefix
ending at a line end) while one is: proctor's reader, fed one line more at a time, finds 12
running tasks of a root session in 8 transcripts (the 2 real sessions in claude/transcripts/
and the d, d2, d3, f_bg, f_bg_first and f_wt captures of hosts/claude-2.1.332/), 213 cuts in
all. A task is cut just after its launch, halfway through its run and at its last line before
it ends: 30 cuts, fewer for a task that ends on the line after its launch. Subagent transcripts
are not cut: a subagent's tasks are background-left's at its stop.

At each cut the clock (the guard context's `now`) is set a minute past deny_minutes (60) after
the latest of the task's start, its newest notice and its output file's last write, and the
real hook is run with a PreToolUse Bash call on that cut: `npm install left-pad` three times
in a row is refused every time, naming the task and its TaskStop call; reads pass; `npm test`,
`make`, `pytest`, `pip install x` and `git push` are refused, for none of them is known to
only read.
"""

from __future__ import annotations

import glob
import json
import os
import tempfile

import pytest

from proctor.hook import run as hook_run
from proctor.transcript import claude
from tests.support import SHARED_FIXTURES, make_repo, needs_shared_fixtures

DENY_MINUTES = 60
RUNNING_TASKS = 12  # what the fixtures hold (see the docstring)
MIN_CUTS = 30

REFUSED = ("npm install left-pad", "npm test", "make", "pytest", "pip install x", "git push")
READS = ("ls", "cat file", "git status")


def _transcripts() -> list[str]:
    return sorted(glob.glob(os.path.join(SHARED_FIXTURES, "claude", "transcripts", "*.jsonl"))) + sorted(
        glob.glob(os.path.join(SHARED_FIXTURES, "hosts", "claude-*", "*", "transcript.jsonl"))
    )


def _judged(state: claude.State) -> tuple[str, ...]:
    """The running tasks background-silent judges: a root session's, not watchers."""
    return tuple(sorted(t["id"] for t in state.running() if not t.get("subagent")))


def _runs() -> list[tuple[str, tuple[str, ...], list[int]]]:
    """Each stretch of a transcript over which the same tasks run: (file, tasks, the offsets
    of the line ends within it), read the way the hook reads a growing transcript."""
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for number, source in enumerate(_transcripts()):
            with open(source, "rb") as handle:
                data = handle.read()
            grown = os.path.join(scratch, f"{number}.jsonl")
            open(grown, "wb").close()
            done, previous = 0, ()
            while (end := data.find(b"\n", done) + 1) > 0:
                with open(grown, "ab") as handle:
                    handle.write(data[done:end])
                done = end
                running = _judged(claude.read(grown, scratch))
                if running and running == previous:
                    runs[-1][2].append(end)
                elif running:
                    runs.append((source, running, [end]))
                previous = running
    return runs


RUNS = _runs() if os.path.isdir(SHARED_FIXTURES) else []
CUTS = [(source, end) for source, _, ends in RUNS for end in sorted({ends[0], ends[len(ends) // 2], ends[-1]})]


def _name(cut) -> str:
    source, end = cut
    return f"{os.path.relpath(source, SHARED_FIXTURES)}@{end}"


@needs_shared_fixtures
def test_the_fixtures_hold_the_cuts():
    assert len(RUNS) == RUNNING_TASKS, [(os.path.relpath(s, SHARED_FIXTURES), t) for s, t, _ in RUNS]
    assert sum(len(ends) for _, _, ends in RUNS) == 213
    assert len(CUTS) >= MIN_CUTS


@pytest.fixture
def clock(monkeypatch):
    """The guard context's `now`, set by the test."""
    from proctor.guard import context

    original = context.Context.__init__
    setting: dict = {}

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if "now" in setting:
            self.now = setting["now"]

    monkeypatch.setattr(context.Context, "__init__", init)
    return setting


def _silent_since(task: dict) -> float:
    marks = [t for t in (task.get("started"), task.get("newest_notice")) if isinstance(t, (int, float))]
    if task.get("output_file"):
        try:
            marks.append(os.stat(os.path.expanduser(task["output_file"])).st_mtime)
        except (OSError, ValueError):
            pass
    assert marks, f"task {task['id']} has no time to measure its silence from"
    return max(marks)


def _decision(answer: dict) -> tuple[str | None, str]:
    spec = answer.get("hookSpecificOutput") or {}
    return spec.get("permissionDecision"), spec.get("permissionDecisionReason") or ""


@needs_shared_fixtures
@pytest.mark.parametrize("cut", CUTS, ids=[_name(c) for c in CUTS])
def test_a_silent_task_refuses_every_call_that_is_not_a_read(cut, tmp_path, monkeypatch, clock):
    source, end = cut
    with open(source, "rb") as handle:
        data = handle.read(end)
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_bytes(data)
    state = claude.read(str(transcript), None)
    running = [t for t in state.running() if not t.get("subagent")]
    assert running, "the cut was made where a task runs"
    root = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    monkeypatch.chdir(root)
    clock["now"] = max(_silent_since(t) for t in running) + DENY_MINUTES * 60 + 60

    def call(command: str) -> dict:
        payload = {
            "session_id": "fixture-session",
            "transcript_path": str(transcript),
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_use_id": "toolu_fixture",
            "tool_input": {"command": command, "description": "x"},
        }
        out, code = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
        assert code == 0
        return json.loads(out)

    def assert_refused(command: str) -> None:
        decision, reason = _decision(call(command))
        assert decision == "deny", f"{command!r}: {decision} {reason}"
        assert "deny [background-silent]" in reason, reason
        for task in running:
            assert f"task {task['id']} (" in reason, (task["id"], reason)
            assert 'TaskStop {"task_id": "' + task["id"] + '"}' in reason, reason
            if task.get("command"):
                assert task["command"] in reason
            if task.get("output_file"):
                assert task["output_file"] in reason

    for _ in range(3):  # every call, not only the first
        assert_refused("npm install left-pad")
        clock["now"] += 30
    for command in READS:
        decision, reason = _decision(call(command))
        assert decision != "deny", f"{command!r} reads, and passes: {reason}"
    for command in REFUSED:
        assert_refused(command)
