"""The Claude Code transcript reader: every version's background-task forms, the real fixture
transcripts, and incremental reading from a checkpoint that is never trusted blindly."""

from __future__ import annotations

import json
import os
import time

import pytest

from proctor.timeutil import iso
from proctor.transcript import claude, incremental
from tests.support import REPO_ROOT, SHARED_FIXTURES

FIXTURES = os.path.join(SHARED_FIXTURES, "claude", "transcripts")


def ts(ago: float) -> str:
    return iso(time.time() - ago)


def tool_use(tid, name, tool_input, ago, agent=None):
    line = {
        "type": "assistant",
        "timestamp": ts(ago),
        "uuid": tid + "-a",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}],
        },
    }
    if agent:
        line["agentId"] = agent
        line["isSidechain"] = True
    return line


def tool_result(tid, content, ago, structured=None):
    line = {
        "type": "user",
        "timestamp": ts(ago),
        "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": content}]},
    }
    if structured is not None:
        line["toolUseResult"] = structured
    return line


def notice(tag, task, status, ago, tool_use_id=None, output=None):
    inner = f"<{'shell' if tag == 'bash' else 'task'}-id>{task}</{'shell' if tag == 'bash' else 'task'}-id>\n"
    if tool_use_id:
        inner += f"<tool-use-id>{tool_use_id}</tool-use-id>\n"
    if output:
        inner += f"<output-file>{output}</output-file>\n"
    inner += f'<status>{status}</status>\n<summary>Background command "x" {status}</summary>\n'
    return f"<{tag}-notification>\n{inner}</{tag}-notification>"


def write(path, lines, mode="w"):
    with open(path, mode) as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


def tasks(path, checkpoints=None):
    return claude.read(str(path), str(checkpoints) if checkpoints else None).tasks


@pytest.mark.skipif(not os.path.isdir(FIXTURES), reason="shared fixtures are absent")
def test_real_transcript_2_1_27():
    found = tasks(os.path.join(FIXTURES, "4ee0e48e-16e0-4f55-9548-e31cca6f4846.jsonl"))
    assert {k: v["status"] for k, v in found.items()} == {
        "b9fbd81": "failed",
        "b863f4e": "completed",
        "b6d09ee": "stopped",
    }
    assert found["b863f4e"]["command"] == "pnpm install" and found["b9fbd81"]["notices"] == 2
    assert found["b6d09ee"]["output_file"].endswith("/tasks/b6d09ee.output")
    assert found["b863f4e"]["tool_use_id"] == "toolu_01Nm42fxpJqr1RqYmik7KLJg"


@pytest.mark.skipif(not os.path.isdir(FIXTURES), reason="shared fixtures are absent")
def test_real_transcript_2_1_140():
    found = tasks(os.path.join(FIXTURES, "0bb41191-afd4-434c-ad68-3fc063789392.jsonl"))
    assert set(found) == {"bv1igczm1", "b4lwifxa1", "b6b3ag858"}
    assert all(t["status"] == "completed" for t in found.values())
    assert all(t["notices"] == 2 for t in found.values()), "queue-operation and attachment: one task each"
    assert found["bv1igczm1"]["output_file"].endswith("tasks\\bv1igczm1.output")
    assert found["bv1igczm1"]["tool_use_id"] == "call_00_teyi5SgVp04AERT5NarB0304"


def test_version_1_0_bash_output_and_kill_bash(tmp_path):
    path = tmp_path / "t.jsonl"
    write(
        path,
        [
            tool_use("toolu_1", "Bash", {"command": "bun server.ts &", "run_in_background": True}, 600),
            tool_result("toolu_1", "Command running in background with ID: bash_1", 599),
            tool_use("toolu_2", "Bash", {"command": "npm run build", "run_in_background": True}, 500),
            tool_result("toolu_2", "Command running in background with ID: bash_2", 499),
            tool_use("toolu_3", "BashOutput", {"bash_id": "bash_2"}, 300),
            tool_result(
                "toolu_3", "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\nok\n</stdout>", 299
            ),
            tool_use("toolu_4", "Bash", {"command": "tail -f log", "run_in_background": True}, 200),
            tool_result("toolu_4", "Command running in background with ID: bash_3", 199),
            tool_use("toolu_5", "KillBash", {"shell_id": "bash_3"}, 100),
            tool_result("toolu_5", "Successfully killed shell: bash_3 (tail -f log)", 99),
        ],
    )
    found = tasks(path)
    assert {k: v["status"] for k, v in found.items()} == {
        "bash_1": "running",
        "bash_2": "completed",
        "bash_3": "killed",
    }
    assert found["bash_1"]["command"] == "bun server.ts &"


def test_version_2_0_bash_notification_and_kill_shell(tmp_path):
    path = tmp_path / "t.jsonl"
    out = "/tmp/claude/proj/tasks/bc71365.output"
    write(
        path,
        [
            tool_use("toolu_1", "Bash", {"command": "./long.sh", "run_in_background": True}, 900),
            tool_result(
                "toolu_1",
                f"Command running in background with ID: bc71365. Output is being written to: {out}",
                899,
                {"stdout": "", "backgroundTaskId": "bc71365"},
            ),
            tool_use("toolu_2", "TaskOutput", {"task_id": "bc71365", "block": True}, 800),
            tool_result(
                "toolu_2",
                "<retrieval_status>timeout</retrieval_status>\n<task_id>bc71365</task_id>\n"
                "<status>running</status>\n<output>\n...",
                799,
            ),
            tool_use("toolu_3", "KillShell", {"shell_id": "bc71365"}, 700),
            tool_result(
                "toolu_3",
                json.dumps({"message": "Successfully killed shell: bc71365 (./long.sh)", "shell_id": "bc71365"}),
                699,
                {"message": "Successfully killed shell: bc71365 (./long.sh)", "shell_id": "bc71365"},
            ),
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": ts(650),
                "content": notice("bash", "bc71365", "failed", 650, output=out),
            },
            {
                "type": "user",
                "timestamp": ts(600),
                "message": {"role": "user", "content": notice("bash", "bad0fbb", "completed", 600)},
            },
        ],
    )
    found = tasks(path)
    assert found["bc71365"]["status"] == "killed" and found["bc71365"]["output_file"] == out
    assert found["bc71365"]["notices"] == 1
    assert found["bad0fbb"]["status"] == "completed", "a notice for a task launched before the reader saw it"


def test_version_2_1_forms(tmp_path):
    path = tmp_path / "t.jsonl"
    write(
        path,
        [
            # moved to the background by the user: no run_in_background in the input
            tool_use("toolu_1", "Bash", {"command": "make test", "timeout": 120000}, 3600),
            tool_result(
                "toolu_1",
                "Command running in background with ID: b882beb. Output is being written to: /tmp/t/b882beb.output",
                3599,
                {"backgroundTaskId": "b882beb"},
            ),
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": ts(3000),
                "content": notice("task", "b882beb", "failed", 3000)
                + "\nRead the output file to retrieve the result: x",
            },
            {
                "type": "user",
                "timestamp": ts(2999),
                "message": {"role": "user", "content": notice("task", "b882beb", "failed", 2999)},
            },
            {
                "type": "attachment",
                "timestamp": ts(2998),
                "attachment": {
                    "type": "queued_command",
                    "prompt": notice("task", "b882beb", "failed", 2998, "toolu_1"),
                    "commandMode": "task-notification",
                },
            },
            # a background Agent launch
            tool_use("toolu_2", "Agent", {"prompt": "run tests", "description": "Run MXFP quant tests"}, 2000),
            tool_result(
                "toolu_2",
                [
                    {
                        "type": "text",
                        "text": "Async agent launched successfully.\nagentId: a49bdb08c902ff81f\n"
                        "output_file: /tmp/x/a49bdb08c902ff81f.output",
                    }
                ],
                1999,
                {
                    "isAsync": True,
                    "status": "async_launched",
                    "agentId": "a49bdb08c902ff81f",
                    "description": "Run MXFP quant tests",
                    "outputFile": "/tmp/x/a49bdb08c902ff81f.output",
                },
            ),
            # a notice wrapped in <system-reminder>
            {
                "type": "user",
                "timestamp": ts(1000),
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "text",
                            "text": "<system-reminder>\n"
                            + notice("task", "a49bdb08c902ff81f", "completed", 1000, "toolu_2")
                            + "\n</system-reminder>",
                        }
                    ],
                },
            },
            # TaskStop
            tool_use("toolu_3", "Bash", {"command": "pnpm dev", "run_in_background": True}, 900),
            tool_result(
                "toolu_3",
                "Command running in background with ID: bv1igczm1. Output is being written to: "
                "C:\\Temp\\bv1igczm1.output. You will be notified when it completes.",
                899,
                {"backgroundTaskId": "bv1igczm1"},
            ),
            tool_use("toolu_4", "TaskStop", {"task_id": "bv1igczm1"}, 800),
            tool_result(
                "toolu_4",
                json.dumps({"message": "Successfully stopped task: bv1igczm1 (pnpm dev)"}),
                799,
                {
                    "message": "Successfully stopped task: bv1igczm1 (pnpm dev)",
                    "task_id": "bv1igczm1",
                    "task_type": "local_bash",
                },
            ),
            # a Monitor watcher with an expiry
            tool_use("toolu_5", "Monitor", {"command": "tail -f ci.log", "description": "CI"}, 500),
            tool_result(
                "toolu_5",
                "Monitor started (task m1abc, expires in 10m unless the source ends first).",
                499,
                {"taskId": "m1abc", "timeoutMs": 600000},
            ),
            # an unknown line type and a compaction
            {"type": "ai-title", "title": "x"},
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "timestamp": ts(400),
            },
        ],
    )
    state = claude.read(str(path), None)
    found = state.tasks
    assert found["b882beb"]["status"] == "failed" and found["b882beb"]["notices"] == 3
    assert found["b882beb"]["moved"] is True, "backgrounded without run_in_background"
    assert found["a49bdb08c902ff81f"]["kind"] == "agent" and found["a49bdb08c902ff81f"]["status"] == "completed"
    assert found["bv1igczm1"]["status"] == "stopped"
    assert found["m1abc"]["watcher"] is True and found["m1abc"]["expires"]
    assert [t["id"] for t in state.running()] == []
    assert [t["id"] for t in state.running(include_watchers=True)] == ["m1abc"]


def test_subagent_of_a_task_is_recorded(tmp_path):
    path = tmp_path / "t.jsonl"
    write(
        path,
        [
            tool_use("toolu_1", "Bash", {"command": "sleep 100", "run_in_background": True}, 60, agent="a7"),
            tool_result("toolu_1", "Command running in background with ID: b1", 59),
        ],
    )
    assert tasks(path)["b1"]["subagent"] == "a7"


def test_tolerates_bad_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    with open(path, "wb") as handle:
        handle.write(b"not json\n\xff\xfe garbage\n[1,2]\n")
        handle.write(json.dumps(tool_use("t1", "Bash", {"command": "x"}, 10)).encode() + b"\n")
        handle.write(
            json.dumps(
                {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": 5}]}}
            ).encode()
            + b"\n"
        )
        handle.write(json.dumps(tool_result("t1", "Command running in background with ID: bb1", 9)).encode() + b"\n")
        handle.write(b'{"type": "user", "message": {"content": "<task-notif')  # a partial last line
    found = tasks(path)
    assert list(found) == ["bb1"]


def test_incremental_reading_resumes_from_the_checkpoint(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(
        path,
        [
            tool_use("t1", "Bash", {"command": "serve"}, 100),
            tool_result("t1", "Command running in background with ID: b1", 99),
        ],
    )
    assert tasks(path, checkpoints)["b1"]["status"] == "running"
    saved = json.load(open(next(checkpoints.iterdir())))
    assert saved["offset"] == os.path.getsize(path)
    # A partial line is left for the next call; its completion is read then.
    with open(path, "a") as handle:
        handle.write(
            json.dumps(
                {
                    "type": "queue-operation",
                    "operation": "enqueue",
                    "timestamp": ts(5),
                    "content": notice("task", "b1", "completed", 5),
                }
            )[:30]
        )
    assert tasks(path, checkpoints)["b1"]["status"] == "running"
    with open(path, "a") as handle:
        full = json.dumps(
            {
                "type": "queue-operation",
                "operation": "enqueue",
                "timestamp": ts(5),
                "content": notice("task", "b1", "completed", 5),
            }
        )
        handle.write(full[30:] + "\n")
    assert tasks(path, checkpoints)["b1"]["status"] == "completed"


def test_checkpoint_of_another_file_is_discarded(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(
        path,
        [
            tool_use("t1", "Bash", {"command": "a"}, 100),
            tool_result("t1", "Command running in background with ID: old1", 99),
        ],
    )
    assert "old1" in tasks(path, checkpoints)
    # replaced by another file (new inode): start again
    replacement = tmp_path / "new.jsonl"
    write(
        replacement,
        [
            tool_use("t2", "Bash", {"command": "b"}, 50),
            tool_result("t2", "Command running in background with ID: new2", 49),
        ],
    )
    os.replace(replacement, path)
    assert set(tasks(path, checkpoints)) == {"new2"}
    # truncated in place and rewritten shorter: start again
    write(
        path,
        [
            tool_use("t3", "Bash", {"command": "c"}, 10),
            tool_result("t3", "Command running in background with ID: c3", 9),
        ],
    )
    assert set(tasks(path, checkpoints)) == {"c3"}
    # rewritten in place, same length or longer, different head: start again
    write(
        path,
        [
            tool_use("t4", "Bash", {"command": "dddd"}, 10),
            tool_result("t4", "Command running in background with ID: d4", 9),
            tool_use("t5", "Bash", {"command": "e"}, 10),
            tool_result("t5", "Command running in background with ID: e5", 9),
        ],
    )
    assert set(tasks(path, checkpoints)) == {"d4", "e5"}


def test_a_corrupt_checkpoint_is_not_trusted(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(
        path,
        [
            tool_use("t1", "Bash", {"command": "a"}, 100),
            tool_result("t1", "Command running in background with ID: b1", 99),
        ],
    )
    tasks(path, checkpoints)
    saved = next(checkpoints.iterdir())
    saved.write_text("{not json")
    assert set(tasks(path, checkpoints)) == {"b1"}
    saved.write_text(json.dumps({"v": 2, "path": str(path), "offset": 10**9}))
    assert set(tasks(path, checkpoints)) == {"b1"}


def test_not_a_regular_file(tmp_path):
    import pytest as _pytest

    with _pytest.raises(OSError):
        claude.read(str(tmp_path), None)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with _pytest.raises(OSError):
        claude.read(str(fifo), None)  # never blocks on a FIFO
    with _pytest.raises(OSError):
        claude.read(str(tmp_path / "missing.jsonl"), None)


def test_call_read_by_an_earlier_call_is_found_in_the_file(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, [tool_use("t1", "Bash", {"command": "npm run dev", "run_in_background": True}, 100)])
    assert tasks(path, checkpoints) == {}
    write(path, [tool_result("t1", "Command running in background with ID: b1", 99)], mode="a")
    found = tasks(path, checkpoints)
    assert found["b1"]["command"] == "npm run dev", "the launch's command, from before the checkpoint"


def test_moved_by_timeout_structured_monitor_and_gone_tasks(tmp_path):
    path = tmp_path / "t.jsonl"
    write(
        path,
        [
            tool_use("t1", "Bash", {"command": "make slow"}, 300),
            tool_result(
                "t1",
                "Command did not complete within its 120s timeout and was moved to the background.",
                299,
                {"backgroundTaskId": "mv1"},
            ),
            tool_use("t2", "Monitor", {"command": "tail -f ci.log"}, 200),
            tool_result("t2", "ok", 199, {"taskId": "mon9", "timeoutMs": 600000}),
            tool_use("t3", "Bash", {"command": "sleep 1000", "run_in_background": True}, 100),
            tool_result("t3", "Command running in background with ID: old7", 99),
            tool_use("t4", "TaskStop", {"task_id": "old7"}, 50),
            {
                "type": "user",
                "timestamp": ts(49),
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "tool_use_id": "t4",
                            "type": "tool_result",
                            "is_error": True,
                            "content": "<tool_use_error>No task found with ID: old7</tool_use_error>",
                        }
                    ],
                },
            },
        ],
    )
    found = tasks(path)
    assert found["mv1"]["status"] == "running" and found["mv1"]["command"] == "make slow"
    assert found["mon9"]["watcher"] is True
    assert found["old7"]["status"] == "gone"


# -- bounded work: long and unterminated lines, hostile paths --------------------------------

import contextlib  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

ROOT = REPO_ROOT


class Blocked(Exception):
    """Not an OSError, so that no `pytest.raises(OSError)` takes a hang for a refusal."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail, instead of hanging the suite, when the body blocks (an open() of a FIFO would)."""

    def expired(signum, frame):
        raise Blocked(f"still blocked after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def checkpoint(checkpoints):
    [saved] = list(checkpoints.iterdir())
    return json.load(open(saved))


def launch_lines(task, command="serve", ago=100):
    return [
        tool_use("tu-" + task, "Bash", {"command": command, "run_in_background": True}, ago),
        tool_result("tu-" + task, f"Command running in background with ID: {task}", ago - 1),
    ]


def finished_line(task, status="completed", ago=5, **extra):
    return {
        "type": "queue-operation",
        "operation": "enqueue",
        "timestamp": ts(ago),
        "content": notice("task", task, status, ago),
        **extra,
    }


@pytest.fixture
def bytes_read(monkeypatch):
    """How many bytes of the transcript (not of the checkpoint) the reader has read."""
    counted = {"bytes": 0}
    opener = incremental.open_regular

    class Counting:
        def __init__(self, handle):
            self.handle = handle

        def read(self, size=-1):
            data = self.handle.read(size)
            counted["bytes"] += len(data)
            return data

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

    def counting(path):
        handle = opener(path)
        return handle if os.path.basename(path).startswith("transcript-") else Counting(handle)

    monkeypatch.setattr(incremental, "open_regular", counting)

    def take() -> int:
        value, counted["bytes"] = counted["bytes"], 0
        return value

    return take


_MEASURE = r"""
import json, os, resource, stat, sys, time
import proctor.paths
from proctor.transcript import claude

def rchar():
    try:
        with open("/proc/self/io") as handle:
            return int(next(l for l in handle if l.startswith("rchar:")).split()[1])
    except (OSError, StopIteration):
        return None

rss, io = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, rchar()
start = time.monotonic()
state = claude.read(sys.argv[1], sys.argv[2])
seconds, after = time.monotonic() - start, rchar()
growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss) / 1024
print(json.dumps({"seconds": seconds, "rss_growth_mb": growth, "read": None if io is None else after - io,
                  "tasks": {k: v["status"] for k, v in state.tasks.items()}}))
"""


def measure(path, checkpoints) -> dict:
    """One read in a fresh interpreter: its time, peak RSS growth and bytes read."""
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(checkpoints)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


LONG = 512 << 20  # held whole, as the reader once did, this shows as 0.5-2 GB of RSS and ~15 s


def test_an_unterminated_last_line_costs_bounded_memory_and_time(tmp_path):
    """A 512 MB last line with no newline (sparse, so nothing reaches the disk): the first call
    holds no more than a few blocks and leaves a checkpoint past it; the second, once the line
    ends and an event follows, reads only the bytes written since."""
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, launch_lines("b1"))
    with open(path, "ab") as handle:
        handle.write(b'{"type":"user","message":{"content":"Command running in background with ID: never ')
    end = os.path.getsize(path) + LONG
    os.truncate(path, end)
    first = measure(path, checkpoints)
    assert first["tasks"] == {"b1": "running"}
    assert first["seconds"] < 10, first
    assert first["rss_growth_mb"] < 64, first
    saved = checkpoint(checkpoints)
    assert (saved["offset"], saved["partial"], saved["skip"]) == (end, 0, True), "inside an over-long line"
    with open(path, "ab") as handle:
        handle.write(b' ok"}}\n' + json.dumps(finished_line("b1")).encode() + b"\n")
    second = measure(path, checkpoints)
    assert second["tasks"] == {"b1": "completed"}, "the event after the long line is seen"
    if second["read"] is not None:
        assert second["read"] < os.path.getsize(path) - end + (256 << 10), second
    assert second["seconds"] < 2, second
    saved = checkpoint(checkpoints)
    assert (saved["offset"], saved["partial"], saved["skip"]) == (os.path.getsize(path), 0, False)
    third = measure(path, checkpoints)
    assert third["tasks"] == {"b1": "completed"}
    if third["read"] is not None:
        assert third["read"] < 256 << 10, "nothing new: nothing of the transcript read but its head"


def test_a_partial_last_line_is_read_back_only_once_it_ends(tmp_path, bytes_read):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, launch_lines("b1"))
    base = os.path.getsize(path)
    line = (json.dumps(finished_line("b1", pad="x" * 1_000_000)) + "\n").encode()
    half, more = len(line) // 2, len(line) * 3 // 4
    with open(path, "ab") as handle:
        handle.write(line[:half])
    assert tasks(path, checkpoints)["b1"]["status"] == "running"
    assert bytes_read() == claude.HEAD_BYTES + base + half
    saved = checkpoint(checkpoints)
    assert (saved["offset"], saved["partial"], saved["skip"]) == (base, half, False)
    with open(path, "ab") as handle:
        handle.write(line[half:more])
    assert tasks(path, checkpoints)["b1"]["status"] == "running"
    assert bytes_read() == claude.HEAD_BYTES + (more - half), "the partial line is not read again"
    assert (checkpoint(checkpoints)["offset"], checkpoint(checkpoints)["partial"]) == (base, more)
    with open(path, "ab") as handle:
        handle.write(line[more:])
    assert tasks(path, checkpoints)["b1"]["status"] == "completed"
    assert bytes_read() == claude.HEAD_BYTES + (len(line) - more) + more, "read back once, now that it ended"
    saved = checkpoint(checkpoints)
    assert (saved["offset"], saved["partial"], saved["skip"]) == (os.path.getsize(path), 0, False)
    assert tasks(path, checkpoints)["b1"]["status"] == "completed"
    assert bytes_read() == claude.HEAD_BYTES


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(claude, "MAX_LINE", 4096)
    monkeypatch.setattr(incremental, "CHUNK", 1000)


def test_an_over_long_line_is_skipped(tmp_path, small_blocks):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    too_long = tool_result("tu-x", "Command running in background with ID: skipped " + "y" * 5000, 50)
    at_the_cap = tool_result("tu-y", "Command running in background with ID: kept ", 40)
    at_the_cap["pad"] = ""
    at_the_cap["pad"] = "z" * (4096 - len(json.dumps(at_the_cap)))
    assert len(json.dumps(at_the_cap)) == 4096
    write(path, launch_lines("b1") + [too_long, at_the_cap] + launch_lines("b2"))
    assert set(tasks(path, checkpoints)) == {"b1", "kept", "b2"}, "over the cap skipped, at the cap read"
    assert set(tasks(path)) == {"b1", "kept", "b2"}, "the same without a checkpoint"
    # an over-long partial line: the checkpoint says the reader is inside it, past what it saw
    with open(path, "a") as handle:
        handle.write(json.dumps(finished_line("b2"))[:-1] + ', "pad": "' + "p" * 6000)
    assert tasks(path, checkpoints)["b2"]["status"] == "running"
    saved = checkpoint(checkpoints)
    assert (saved["offset"], saved["partial"], saved["skip"]) == (os.path.getsize(path), 0, True)
    with open(path, "a") as handle:
        handle.write("p" * 3000)
    assert tasks(path, checkpoints)["b2"]["status"] == "running"
    assert checkpoint(checkpoints)["offset"] == os.path.getsize(path)
    with open(path, "a") as handle:
        handle.write('"}\n')
    write(path, [finished_line("b1")], mode="a")
    found = tasks(path, checkpoints)
    assert found["b2"]["status"] == "running", "the over-long notice is skipped, never half-read"
    assert found["b1"]["status"] == "completed", "the line after it is read"
    assert checkpoint(checkpoints)["skip"] is False


@pytest.mark.parametrize("seed", range(6))
def test_any_cut_and_block_size_gives_the_same_state(tmp_path, monkeypatch, seed):
    """Read in one call with the default blocks, or appended piece by piece at random cuts
    (mid-line too) with small blocks and a checkpoint between: the same tasks."""
    rng = random.Random(seed)
    lines = []
    for n in range(40):
        task = f"t{n}"
        lines += launch_lines(task, command=f"cmd {n}", ago=1000 - n)
        if rng.random() < 0.3:
            lines[-1]["pad"] = "q" * rng.choice([10, 3000, 4096, 5000, 20000])
        if rng.random() < 0.5:
            line = finished_line(task, rng.choice(["completed", "failed"]), ago=900 - n)
            if rng.random() < 0.3:
                line["pad"] = "r" * rng.choice([100, 4500, 9000])
            lines.append(line)
        if rng.random() < 0.2:
            lines.append("not json " + "g" * rng.choice([0, 2000, 7000]))
    data = b"".join((line if isinstance(line, str) else json.dumps(line)).encode() + b"\n" for line in lines)
    monkeypatch.setattr(claude, "MAX_LINE", 4096)
    whole = tmp_path / "whole.jsonl"
    whole.write_bytes(data)
    expected = claude.read(str(whole), None).tasks
    assert any(t["status"] == "running" for t in expected.values())
    monkeypatch.setattr(incremental, "CHUNK", rng.choice([97, 1000, 4096, 5003]))
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    cuts = sorted(rng.sample(range(1, len(data)), 60)) + [len(data)]
    done = 0
    for cut in cuts:
        with open(path, "ab") as handle:
            handle.write(data[done:cut])
        done = cut
        claude.read(str(path), str(checkpoints))
    assert claude.read(str(path), str(checkpoints)).tasks == expected


def test_truncated_or_rotated_under_a_long_line_checkpoint(tmp_path, small_blocks):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, launch_lines("b1"))
    base = os.path.getsize(path)
    with open(path, "a") as handle:
        handle.write('{"type": "user", "pad": "' + "s" * 9000)
    assert set(tasks(path, checkpoints)) == {"b1"} and checkpoint(checkpoints)["skip"] is True
    # truncated back to before the long line, then written on, shorter than the checkpoint
    os.truncate(path, base)
    write(path, launch_lines("b2"), mode="a")
    assert set(tasks(path, checkpoints)) == {"b1", "b2"}, "read again from the start, not skipped"
    assert checkpoint(checkpoints)["offset"] == os.path.getsize(path)
    # a partial line cut shorter under the checkpoint, then ended otherwise
    line = json.dumps(finished_line("b2"))
    with open(path, "a") as handle:
        handle.write(line[:200])
    tasks(path, checkpoints)
    assert checkpoint(checkpoints)["partial"] == 200
    os.truncate(path, os.path.getsize(path) - 100)
    with open(path, "a") as handle:
        handle.write(line[100:] + "\n")
    assert tasks(path, checkpoints)["b2"]["status"] == "completed", "the checkpoint's partial no longer fits"
    # rotated: another file (inode) at the path
    rotated = tmp_path / "rotated.jsonl"
    write(rotated, launch_lines("b3"))
    os.replace(rotated, path)
    assert set(tasks(path, checkpoints)) == {"b3"}


def test_a_checkpoint_with_bad_positions_is_not_trusted(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, launch_lines("b1"))
    tasks(path, checkpoints)
    good = checkpoint(checkpoints)
    [saved] = list(checkpoints.iterdir())
    trusted = dict(good, state={"tasks": {}, "pending": {}})
    saved.write_text(json.dumps(trusted))
    assert tasks(path, checkpoints) == {}, "a matching checkpoint is trusted (the test's control)"
    for bad in (
        {"partial": -1},
        {"partial": claude.MAX_LINE + 1},
        {"skip": "yes"},
        {"skip": True, "partial": 3},
        {"offset": float(good["offset"])},
        {"offset": -5},
        {"partial": 1},
        {"state": {"tasks": [["b9", 1]], "pending": {}}},
        {"state": {"tasks": {"b9": 5}}},
        {"v": 3},
    ):
        saved.write_text(json.dumps(dict(trusted, **bad)))
        assert set(tasks(path, checkpoints)) == {"b1"}, bad


def test_hostile_paths_never_block(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    with deadline(5):
        for path in (tmp_path, fifo, "/dev/zero", link, "/dev/null"):
            with pytest.raises(OSError):
                claude.read(str(path), str(tmp_path / "cache"))
        # a path that turns into a FIFO between the check and the open
        regular = incremental._regular
        lied = []
        monkeypatch.setattr(incremental, "_regular", lambda info: bool(lied.append(1)) if not lied else regular(info))
        with pytest.raises(OSError):
            claude.read(str(fifo), None)
        assert lied, "the first check was passed"
        monkeypatch.setattr(incremental, "_regular", regular)
        # a subagent's transcript and meta file beside the parent's, as FIFOs
        agent, meta = claude.subagent_files(str(tmp_path / "root.jsonl"), "s1", "a1")
        os.makedirs(os.path.dirname(agent))
        os.mkfifo(agent)
        os.mkfifo(meta)
        assert claude.subagent_prompt(str(tmp_path / "root.jsonl"), "s1", "a1") is None
        assert claude.subagent_spawn_call(str(tmp_path / "root.jsonl"), "s1", "a1") is None
    assert not os.path.exists(tmp_path / "cache")


def test_binary_garbage(tmp_path, bytes_read):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    noise = random.Random(7).randbytes(6 << 20)
    path.write_bytes(noise)
    assert tasks(path, checkpoints) == {}
    assert bytes_read() == claude.HEAD_BYTES + len(noise)
    assert checkpoint(checkpoints)["offset"] + checkpoint(checkpoints)["partial"] == len(noise)
    assert tasks(path, checkpoints) == {}
    assert bytes_read() == claude.HEAD_BYTES, "not read again"
    # deep nesting on a line the reader parses, and NUL bytes without end
    with open(path, "ab") as handle:
        handle.write(b"\n" + b"[" * 200_000 + b'"running in background with ID: deep"\n')
        handle.write(b'{"a": [' * 50_000 + b'"<status>completed</status>"\n')
        for line in launch_lines("b1"):
            handle.write(json.dumps(line).encode() + b"\n")
        handle.write(b"\0" * (3 << 20))
    assert set(tasks(path, checkpoints)) == {"b1"}
    assert set(tasks(path)) == {"b1"}
