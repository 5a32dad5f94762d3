"""The Claude Code transcript reader: every version's background-task forms, the real fixture
transcripts, and incremental reading from a checkpoint that is never trusted blindly."""

from __future__ import annotations

import json
import os
import time

import pytest

from proctor.timeutil import iso
from proctor.transcript import claude

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "claude", "transcripts")


def ts(ago: float) -> str:
    return iso(time.time() - ago)


def tool_use(tid, name, tool_input, ago, agent=None):
    line = {"type": "assistant", "timestamp": ts(ago), "uuid": tid + "-a",
            "message": {"role": "assistant", "content": [{"type": "tool_use", "id": tid, "name": name,
                                                           "input": tool_input}]}}
    if agent:
        line["agentId"] = agent
        line["isSidechain"] = True
    return line


def tool_result(tid, content, ago, structured=None):
    line = {"type": "user", "timestamp": ts(ago),
            "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": content}]}}
    if structured is not None:
        line["toolUseResult"] = structured
    return line


def notice(tag, task, status, ago, tool_use_id=None, output=None):
    inner = f"<{'shell' if tag == 'bash' else 'task'}-id>{task}</{'shell' if tag == 'bash' else 'task'}-id>\n"
    if tool_use_id:
        inner += f"<tool-use-id>{tool_use_id}</tool-use-id>\n"
    if output:
        inner += f"<output-file>{output}</output-file>\n"
    inner += f"<status>{status}</status>\n<summary>Background command \"x\" {status}</summary>\n"
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
        "b9fbd81": "failed", "b863f4e": "completed", "b6d09ee": "stopped"}
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
    write(path, [
        tool_use("toolu_1", "Bash", {"command": "bun server.ts &", "run_in_background": True}, 600),
        tool_result("toolu_1", "Command running in background with ID: bash_1", 599),
        tool_use("toolu_2", "Bash", {"command": "npm run build", "run_in_background": True}, 500),
        tool_result("toolu_2", "Command running in background with ID: bash_2", 499),
        tool_use("toolu_3", "BashOutput", {"bash_id": "bash_2"}, 300),
        tool_result("toolu_3", "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\nok\n</stdout>", 299),
        tool_use("toolu_4", "Bash", {"command": "tail -f log", "run_in_background": True}, 200),
        tool_result("toolu_4", "Command running in background with ID: bash_3", 199),
        tool_use("toolu_5", "KillBash", {"shell_id": "bash_3"}, 100),
        tool_result("toolu_5", "Successfully killed shell: bash_3 (tail -f log)", 99),
    ])
    found = tasks(path)
    assert {k: v["status"] for k, v in found.items()} == {"bash_1": "running", "bash_2": "completed", "bash_3": "killed"}
    assert found["bash_1"]["command"] == "bun server.ts &"


def test_version_2_0_bash_notification_and_kill_shell(tmp_path):
    path = tmp_path / "t.jsonl"
    out = "/tmp/claude/proj/tasks/bc71365.output"
    write(path, [
        tool_use("toolu_1", "Bash", {"command": "./long.sh", "run_in_background": True}, 900),
        tool_result("toolu_1", f"Command running in background with ID: bc71365. Output is being written to: {out}",
                    899, {"stdout": "", "backgroundTaskId": "bc71365"}),
        tool_use("toolu_2", "TaskOutput", {"task_id": "bc71365", "block": True}, 800),
        tool_result("toolu_2", "<retrieval_status>timeout</retrieval_status>\n<task_id>bc71365</task_id>\n"
                               "<status>running</status>\n<output>\n...", 799),
        tool_use("toolu_3", "KillShell", {"shell_id": "bc71365"}, 700),
        tool_result("toolu_3", json.dumps({"message": "Successfully killed shell: bc71365 (./long.sh)",
                                           "shell_id": "bc71365"}), 699,
                    {"message": "Successfully killed shell: bc71365 (./long.sh)", "shell_id": "bc71365"}),
        {"type": "queue-operation", "operation": "enqueue", "timestamp": ts(650),
         "content": notice("bash", "bc71365", "failed", 650, output=out)},
        {"type": "user", "timestamp": ts(600), "message": {"role": "user",
                                                          "content": notice("bash", "bad0fbb", "completed", 600)}},
    ])
    found = tasks(path)
    assert found["bc71365"]["status"] == "killed" and found["bc71365"]["output_file"] == out
    assert found["bc71365"]["notices"] == 1
    assert found["bad0fbb"]["status"] == "completed", "a notice for a task launched before the reader saw it"


def test_version_2_1_forms(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path, [
        # moved to the background by the user: no run_in_background in the input
        tool_use("toolu_1", "Bash", {"command": "make test", "timeout": 120000}, 3600),
        tool_result("toolu_1", "Command running in background with ID: b882beb. Output is being written to: "
                               "/tmp/t/b882beb.output", 3599, {"backgroundTaskId": "b882beb"}),
        {"type": "queue-operation", "operation": "enqueue", "timestamp": ts(3000),
         "content": notice("task", "b882beb", "failed", 3000) + "\nRead the output file to retrieve the result: x"},
        {"type": "user", "timestamp": ts(2999), "message": {"role": "user",
                                                           "content": notice("task", "b882beb", "failed", 2999)}},
        {"type": "attachment", "timestamp": ts(2998), "attachment": {
            "type": "queued_command", "prompt": notice("task", "b882beb", "failed", 2998, "toolu_1"),
            "commandMode": "task-notification"}},
        # a background Agent launch
        tool_use("toolu_2", "Agent", {"prompt": "run tests", "description": "Run MXFP quant tests"}, 2000),
        tool_result("toolu_2", [{"type": "text", "text": "Async agent launched successfully.\nagentId: a49bdb08c902ff81f\n"
                                                         "output_file: /tmp/x/a49bdb08c902ff81f.output"}], 1999,
                    {"isAsync": True, "status": "async_launched", "agentId": "a49bdb08c902ff81f",
                     "description": "Run MXFP quant tests", "outputFile": "/tmp/x/a49bdb08c902ff81f.output"}),
        # a notice wrapped in <system-reminder>
        {"type": "user", "timestamp": ts(1000), "message": {"role": "user", "content": [{"type": "text", "text":
            "<system-reminder>\n" + notice("task", "a49bdb08c902ff81f", "completed", 1000, "toolu_2")
            + "\n</system-reminder>"}]}},
        # TaskStop
        tool_use("toolu_3", "Bash", {"command": "pnpm dev", "run_in_background": True}, 900),
        tool_result("toolu_3", "Command running in background with ID: bv1igczm1. Output is being written to: "
                               "C:\\Temp\\bv1igczm1.output. You will be notified when it completes.", 899,
                    {"backgroundTaskId": "bv1igczm1"}),
        tool_use("toolu_4", "TaskStop", {"task_id": "bv1igczm1"}, 800),
        tool_result("toolu_4", json.dumps({"message": "Successfully stopped task: bv1igczm1 (pnpm dev)"}), 799,
                    {"message": "Successfully stopped task: bv1igczm1 (pnpm dev)", "task_id": "bv1igczm1",
                     "task_type": "local_bash"}),
        # a Monitor watcher with an expiry
        tool_use("toolu_5", "Monitor", {"command": "tail -f ci.log", "description": "CI"}, 500),
        tool_result("toolu_5", "Monitor started (task m1abc, expires in 10m unless the source ends first).", 499,
                    {"taskId": "m1abc", "timeoutMs": 600000}),
        # an unknown line type and a compaction
        {"type": "ai-title", "title": "x"},
        {"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted", "timestamp": ts(400)},
    ])
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
    write(path, [tool_use("toolu_1", "Bash", {"command": "sleep 100", "run_in_background": True}, 60, agent="a7"),
                 tool_result("toolu_1", "Command running in background with ID: b1", 59)])
    assert tasks(path)["b1"]["subagent"] == "a7"


def test_tolerates_bad_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    with open(path, "wb") as handle:
        handle.write(b"not json\n\xff\xfe garbage\n[1,2]\n")
        handle.write(json.dumps(tool_use("t1", "Bash", {"command": "x"}, 10)).encode() + b"\n")
        handle.write(json.dumps({"type": "user", "message": {"content": [{"type": "tool_result",
                                                                          "tool_use_id": "t1", "content": 5}]}}).encode() + b"\n")
        handle.write(json.dumps(tool_result("t1", "Command running in background with ID: bb1", 9)).encode() + b"\n")
        handle.write(b'{"type": "user", "message": {"content": "<task-notif')  # a partial last line
    found = tasks(path)
    assert list(found) == ["bb1"]


def test_incremental_reading_resumes_from_the_checkpoint(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, [tool_use("t1", "Bash", {"command": "serve"}, 100),
                 tool_result("t1", "Command running in background with ID: b1", 99)])
    assert tasks(path, checkpoints)["b1"]["status"] == "running"
    saved = json.load(open(next(checkpoints.iterdir())))
    assert saved["offset"] == os.path.getsize(path)
    # A partial line is left for the next call; its completion is read then.
    with open(path, "a") as handle:
        handle.write(json.dumps({"type": "queue-operation", "operation": "enqueue", "timestamp": ts(5),
                                 "content": notice("task", "b1", "completed", 5)})[:30])
    assert tasks(path, checkpoints)["b1"]["status"] == "running"
    with open(path, "a") as handle:
        full = json.dumps({"type": "queue-operation", "operation": "enqueue", "timestamp": ts(5),
                           "content": notice("task", "b1", "completed", 5)})
        handle.write(full[30:] + "\n")
    assert tasks(path, checkpoints)["b1"]["status"] == "completed"


def test_checkpoint_of_another_file_is_discarded(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, [tool_use("t1", "Bash", {"command": "a"}, 100),
                 tool_result("t1", "Command running in background with ID: old1", 99)])
    assert "old1" in tasks(path, checkpoints)
    # replaced by another file (new inode): start again
    replacement = tmp_path / "new.jsonl"
    write(replacement, [tool_use("t2", "Bash", {"command": "b"}, 50),
                        tool_result("t2", "Command running in background with ID: new2", 49)])
    os.replace(replacement, path)
    assert set(tasks(path, checkpoints)) == {"new2"}
    # truncated in place and rewritten shorter: start again
    write(path, [tool_use("t3", "Bash", {"command": "c"}, 10),
                 tool_result("t3", "Command running in background with ID: c3", 9)])
    assert set(tasks(path, checkpoints)) == {"c3"}
    # rewritten in place, same length or longer, different head: start again
    write(path, [tool_use("t4", "Bash", {"command": "dddd"}, 10),
                 tool_result("t4", "Command running in background with ID: d4", 9),
                 tool_use("t5", "Bash", {"command": "e"}, 10),
                 tool_result("t5", "Command running in background with ID: e5", 9)])
    assert set(tasks(path, checkpoints)) == {"d4", "e5"}


def test_a_corrupt_checkpoint_is_not_trusted(tmp_path):
    path, checkpoints = tmp_path / "t.jsonl", tmp_path / "cache"
    write(path, [tool_use("t1", "Bash", {"command": "a"}, 100),
                 tool_result("t1", "Command running in background with ID: b1", 99)])
    tasks(path, checkpoints)
    saved = next(checkpoints.iterdir())
    saved.write_text("{not json")
    assert set(tasks(path, checkpoints)) == {"b1"}
    saved.write_text(json.dumps({"v": 2, "path": str(path), "offset": 10 ** 9}))
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
    write(path, [
        tool_use("t1", "Bash", {"command": "make slow"}, 300),
        tool_result("t1", "Command did not complete within its 120s timeout and was moved to the background.", 299,
                    {"backgroundTaskId": "mv1"}),
        tool_use("t2", "Monitor", {"command": "tail -f ci.log"}, 200),
        tool_result("t2", "ok", 199, {"taskId": "mon9", "timeoutMs": 600000}),
        tool_use("t3", "Bash", {"command": "sleep 1000", "run_in_background": True}, 100),
        tool_result("t3", "Command running in background with ID: old7", 99),
        tool_use("t4", "TaskStop", {"task_id": "old7"}, 50),
        {"type": "user", "timestamp": ts(49), "message": {"role": "user", "content": [
            {"tool_use_id": "t4", "type": "tool_result", "is_error": True,
             "content": "<tool_use_error>No task found with ID: old7</tool_use_error>"}]}},
    ])
    found = tasks(path)
    assert found["mv1"]["status"] == "running" and found["mv1"]["command"] == "make slow"
    assert found["mon9"]["watcher"] is True
    assert found["old7"]["status"] == "gone"
