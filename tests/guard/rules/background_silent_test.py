"""proctor/guard/rules/background_silent.py: background-silent, a background task silent too long."""

from __future__ import annotations

import glob
import json
import os
import tempfile
import time

import pytest

from proctor.hook import run as hook_run
from proctor.transcript import claude
from tests.guard.rules.background import launch
from tests.support import SHARED_FIXTURES, git, make_repo, needs_shared_fixtures
from tests.transcript.test_transcript import deadline, notice, tool_result, tool_use, ts, write


def call(root, transcript, command, session="s1", name="PreToolUse", **extra):
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": root,
        "hook_event_name": name,
        "tool_name": "Bash",
        "tool_input": {"command": command},
        **extra,
    }
    out, code = hook_run(["claude"], json.dumps(payload).encode(), dict(os.environ))
    assert code == 0
    return json.loads(out)


def text_of(answer) -> str:
    spec = answer.get("hookSpecificOutput", {})
    return (
        spec.get("permissionDecisionReason")
        or spec.get("additionalContext")
        or answer.get("reason")
        or answer.get("systemMessage")
        or ""
    )


def test_silent_task_denies_writes_but_passes_reads(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b1", "python3 - < /dev/stdin", 2 * 3600, output=str(tmp_path / "b1.output")))
    answer = call(root, transcript, "make build > out.txt")
    spec = answer["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    reason = spec["permissionDecisionReason"]
    assert reason.startswith("deny [background-silent]: 1 background task silent past 60 minutes")
    for part in (
        "task b1 (shell)",
        "running 1h",
        "silent 1h",
        "python3 - < /dev/stdin",
        str(tmp_path / "b1.output"),
        'TaskStop {"task_id": "b1"}',
        "proctor never stops a task",
        "the output file stays on disk",
        "run it bounded: timeout 120m python3 - < /dev/stdin",
    ):
        assert part in reason, part
    for read in ("cat out.txt | grep error", "ls -la", "tail -n 50 " + str(tmp_path / "b1.output")):
        answer = call(root, transcript, read)
        assert "permissionDecision" not in answer.get("hookSpecificOutput", {}), "reads still pass"


def test_output_file_writes_keep_a_task_alive(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    output = tmp_path / "b2.output"
    output.write_text("progress\n")
    write(transcript, launch("b2", "make long", 2 * 3600, output=str(output)))
    assert call(root, transcript, "touch x") == {}, "the output file was written just now"
    old = time.time() - 45 * 60
    os.utime(output, (old, old))
    advised = call(root, transcript, "touch x")
    assert (
        "advise [background-silent]" in text_of(advised) and "permissionDecision" not in advised["hookSpecificOutput"]
    )
    assert call(root, transcript, "touch x") == {}, "advised once per task per session"
    again = call(root, transcript, "touch x", session="s2")
    assert "advise [background-silent]" in text_of(again), "another session is advised too"


def test_notices_and_final_status(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    lines = launch("b3", "server", 3 * 3600)
    lines.append(
        {
            "type": "queue-operation",
            "operation": "enqueue",
            "timestamp": ts(60),
            "content": notice("task", "b3", "running", 60),
        }
    )
    write(transcript, lines)
    assert call(root, transcript, "touch x") == {}, "a recent notice is a sign of life"
    write(
        transcript,
        launch("b4", "stuck", 3 * 3600)
        + [
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": ts(10),
                "content": notice("task", "b4", "completed", 10),
            }
        ],
    )
    assert call(root, transcript, "touch x") == {}, "a finished task is not silent"


def test_watchers_and_subagent_calls_are_not_judged(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    write(
        transcript,
        [
            tool_use("m", "Monitor", {"command": "tail -f log"}, 5 * 3600),
            tool_result(
                "m",
                "Monitor started (task mon1, expires in 10m unless the source ends first).",
                5 * 3600 - 1,
                {"taskId": "mon1", "timeoutMs": 600000},
            ),
        ],
    )
    assert call(root, transcript, "touch x") == {}
    write(transcript, launch("b5", "sleep 99999", 3 * 3600))
    assert call(root, transcript, "touch x", agent_id="sub1") == {}, "on shell calls of a root session"


def test_thresholds_from_config(root, tmp_path):
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write("[guard.background-silent]\nadvise_minutes = 1\ndeny_minutes = 2.5\n")
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b6", "x", 3 * 60))
    assert "deny [background-silent]" in text_of(call(root, transcript, "touch x"))
    write(transcript, launch("b7", "x", 90))
    assert "advise [background-silent]" in text_of(call(root, transcript, "touch x"))


def test_bad_threshold_pair_keeps_defaults(root, tmp_path, proctor):
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write(
            "[guard.background-silent]\nadvise_minutes = 40\ndeny_minutes = 20\n"
            "[guard.background-unbounded]\nceiling_minutes = inf\n"
        )
    problems = proctor("config", "show", "-o", "json").json()["problems"]
    assert any("deny_minutes (20) must be more than advise_minutes (40)" in p for p in problems)
    assert any("ceiling_minutes" in p and "using the default (120)" in p for p in problems)
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b8", "x", 45 * 60))
    assert "advise [background-silent]" in text_of(call(root, transcript, "touch x")), "defaults 30/60 kept"


def test_rule_set_to_advise_or_off(root, tmp_path):
    transcript = tmp_path / "s.jsonl"
    write(transcript, launch("b9", "x", 3 * 3600))
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('[guard.rules]\nbackground-silent = "advise"\n')
    git(root, "commit", "-qam", "advise")
    assert "advise [background-silent]" in text_of(call(root, transcript, "touch x"))
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('background-unbounded = "off"\n')
    with open(os.path.join(root, "proctor.toml")) as handle:
        text = handle.read().replace('background-silent = "advise"', 'background-silent = "off"')
    with open(os.path.join(root, "proctor.toml"), "w") as handle:
        handle.write(text)
    git(root, "commit", "-qam", "off")
    assert call(root, transcript, "touch x", session="s9") == {}


def test_unreadable_transcripts_pass(root, tmp_path):
    for path in (tmp_path / "missing.jsonl", tmp_path, "relative/none.jsonl"):
        assert call(root, path, "touch x") == {}
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage\n" * 100)
    assert call(root, binary, "touch x") == {}


def test_hostile_transcript_paths_pass_without_blocking(root, tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    with deadline(30):
        for path in (fifo, "/dev/zero", zero):
            assert call(root, path, "touch x") == {}
        # a line nested past the JSON parser's depth, then a real silent task: the task is seen
        deep = tmp_path / "deep.jsonl"
        deep.write_bytes(b"[" * 200_000 + b'"Command running in background with ID: deep"\n')
        write(deep, launch("b10", "sleep 99999", 2 * 3600), mode="a")
        reason = text_of(call(root, deep, "touch x"))
        assert reason.startswith("deny [background-silent]") and "task b10 " in reason and "deep" not in reason


# -- on real Claude Code transcripts --------------------------------------------------------
#
# background-silent on real Claude Code transcripts, cut where a background task is running.
#
# No transcript in the shared fixtures ends with a task still running, so each is cut (a prefix
# ending at a line end) while one is: proctor's reader, fed one line more at a time, finds 12
# running tasks of a root session in 8 transcripts (the 2 real sessions in claude/transcripts/
# and the d, d2, d3, f_bg, f_bg_first and f_wt captures of hosts/claude-2.1.332/), 213 cuts in
# all. A task is cut just after its launch, halfway through its run and at its last line before
# it ends: 30 cuts, fewer for a task that ends on the line after its launch. Subagent transcripts
# are not cut: a subagent's tasks are background-left's at its stop.
#
# At each cut the clock (the guard context's `now`) is set a minute past deny_minutes (60) after
# the latest of the task's start, its newest notice and its output file's last write, and the
# real hook is run with a PreToolUse Bash call on that cut: `npm install left-pad` three times
# in a row is refused every time, naming the task and its TaskStop call; reads pass; `npm test`,
# `make`, `pytest`, `pip install x` and `git push` are refused, for none of them is known to
# only read.

DENY_MINUTES = 60
RUNNING_TASKS = 12  # what the fixtures hold (see the comment above)
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
