"""The wake: a session bound to a job is handed its monitors' follow-ups at its Stop, asked to
start `proctor monitor wait` when nothing would wake it, refused at most MAX_STOP_BLOCKS times
in a row; with advise the follow-up still reaches the model (the next prompt); a follow-up a
wait printed counts as delivered only once the transcript shows the model was given it; the
session's activity (working, idle, person, plan) holds the wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import call_hook
from proctor import api
from proctor.hook import run as hook_run
from proctor.monitors import wake
from proctor.paths import find_checkout, repo_state_dir
from proctor.store import Store

CONFIG = """
[targets.test]
command = "true"

# the jobs here are declared and never taken: their column is active, so their monitors live
[board]
columns = [
  {name = "Open", states = ["declared", "running", "exited"], active = true},
  {name = "Done", states = ["pass", "fail", "no_return"], active = false},
]
"""
LEASED = {"BAGGAGE": "proctor.lease=feat"}


@pytest.fixture
def ws(tmp_path, monkeypatch, new_repo):
    root = new_repo("repo", CONFIG)
    monkeypatch.chdir(root)
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    return root


def store(root) -> Store:
    return Store(repo_state_dir(find_checkout(root)))


def sql(root, query, params=()):
    s = store(root)
    try:
        with s.write() as conn:
            return conn.execute(query, params).fetchall()
    finally:
        s.close()


def add_monitor(root, job="feat") -> int:
    return sql(
        root,
        "INSERT INTO monitors (job, command, interval, description, cwd, created, created_by) "
        "VALUES (?, 'echo', 60, 'ci watcher', ?, '2026-01-01T00:00:00Z', 'test') RETURNING id",
        (job, root),
    )[0][0]


def add_followup(root, line="CI-RED", job="feat") -> int:
    fid = sql(
        root,
        "INSERT INTO followups (job, created, text, events) VALUES (?, '2026-01-01T00:00:00Z', '', 1) RETURNING id",
        (job,),
    )[0][0]
    text = f"{wake.header(fid, job)} (1 event):\n[t] ci watcher (monitor 1): {line}"
    sql(root, "UPDATE followups SET text = ? WHERE id = ?", (text, fid))
    return fid


def followup(root, fid):
    return sql(root, "SELECT delivered, via, printed, printed_to FROM followups WHERE id = ?", (fid,))[0]


def session_row(root, session="s1"):
    rows = sql(
        root,
        "SELECT activity, stop_blocks FROM sessions WHERE host = 'claude' AND session = ? AND subagent = ''",
        (session,),
    )
    return rows[0] if rows else None


def hook(payload, env=None):
    return call_hook(payload, env=env, drop=("BAGGAGE", "PROCTOR_NONCE"))


def stop(root, active=False, tasks=(), transcript="/tmp/none.jsonl", session="s1", **extra):
    return hook(
        {
            "session_id": session,
            "transcript_path": transcript,
            "cwd": root,
            "hook_event_name": "Stop",
            "stop_hook_active": active,
            "last_assistant_message": "done",
            "background_tasks": list(tasks),
            **extra,
        },
        LEASED,
    )


def event(root, name, session="s1", **fields):
    return hook(
        {"session_id": session, "transcript_path": "/tmp/none.jsonl", "cwd": root, "hook_event_name": name, **fields},
        LEASED,
    )


WAITER = {
    "id": "b1",
    "type": "shell",
    "status": "running",
    "description": "Wait",
    "command": "proctor monitor wait --job feat --host claude --session s1",
}


def test_a_session_with_live_monitors_and_no_wait_is_asked_once_to_start_one(ws):
    add_monitor(ws)
    first = stop(ws)
    assert first["decision"] == "block"
    assert "`proctor monitor wait --job feat --host claude --session s1`" in first["reason"]
    assert "run_in_background: true" in first["reason"]
    assert session_row(ws) == ("working", 1)
    # the model did not start it: not asked again in this row of refusals; the person is told
    second = stop(ws, active=True)
    assert "decision" not in second and "nothing will wake this session" in second["systemMessage"]
    assert session_row(ws) == ("idle", 0)
    # a wait among its background tasks: nothing to ask
    assert stop(ws, tasks=[WAITER]) == {}
    # another job's wait does not count
    other = dict(WAITER, command="proctor monitor wait --job other")
    assert stop(ws, tasks=[other])["decision"] == "block"
    # a finished wait does not count either (a prompt starts a new row of refusals)
    event(ws, "UserPromptSubmit", prompt="again")
    assert stop(ws, tasks=[dict(WAITER, status="completed")])["decision"] == "block"
    # a wait held for another session, or one that only mentions the wait, is not this session's
    for command in (
        "proctor monitor wait --job feat --host claude --session s2",
        "proctor monitor wait --job feat-2 --host claude --session s1",
        "sleep 99999 # proctor monitor wait --job feat --host claude --session s1",
        "proctor monitor wait --job feat --host claude --session s1; sleep 9999",
    ):
        event(ws, "UserPromptSubmit", prompt="again")
        assert stop(ws, tasks=[dict(WAITER, command=command)])["decision"] == "block", command


def test_no_monitors_no_followups_no_refusal(ws):
    assert stop(ws) == {}
    assert session_row(ws) == ("idle", 0)


def test_a_ready_followup_is_handed_over_at_stop_with_the_ask(ws):
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: test_b failed")
    answer = stop(ws)
    assert answer["decision"] == "block"
    assert f"deny [monitor-followup]: Follow-up {fid} from the monitors of job feat (1 event)" in answer["reason"]
    assert "CI-RED: test_b failed" in answer["reason"] and "proctor monitor wait --job feat" in answer["reason"]
    delivered, via, _, _ = followup(ws, fid)
    assert delivered and via == "stop-hook:claude:s1"
    # handed over once: the next stop has nothing of it
    assert "CI-RED" not in json.dumps(stop(ws, active=True, tasks=[WAITER]))


def test_a_monitor_that_always_has_something_cannot_keep_a_session_from_stopping(ws):
    add_monitor(ws)
    refused, made = 0, []
    for turn in range(6):
        made.append(add_followup(ws, f"tick {turn}"))
        answer = stop(ws, active=turn > 0, tasks=[WAITER])
        if answer.get("decision") != "block":
            break
        refused += 1
    assert refused == wake.MAX_STOP_BLOCKS, refused
    assert "the stop goes through after 3 refusals in a row" in answer["systemMessage"]
    # what the last stop let through was not handed to the model: still undelivered
    assert followup(ws, made[-1])[0] is None
    assert [followup(ws, f)[0] is not None for f in made] == [True] * refused + [False]
    assert session_row(ws) == ("idle", 0)
    # a new row of refusals (the stop went through; the session was woken) may refuse again
    assert stop(ws, tasks=[WAITER])["decision"] == "block"


def test_advise_never_refuses_and_the_next_prompt_carries_the_followup_to_the_model(tmp_path, monkeypatch, new_repo):
    # a loosening counts once committed, and before the job's checkpoint (a holder cannot loosen its own rules)
    ws = new_repo("advised", CONFIG + '\n[guard.rules]\nmonitor-followup = "advise"\n')
    monkeypatch.chdir(ws)
    api.fork({"id": "feat", "write_paths": ["src/a.py"], "check": "test"}, cwd=ws)
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED")
    answer = stop(ws)
    assert "decision" not in answer and "with the next prompt" in answer["systemMessage"]
    assert followup(ws, fid)[0] is None, "shown to the person only: not delivered"
    prompt = event(ws, "UserPromptSubmit", prompt="what next?")
    context = prompt["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit" and "CI-RED" in context["additionalContext"]
    delivered, via, _, _ = followup(ws, fid)
    assert delivered and via == "prompt:claude:s1"


def test_a_prompt_carries_a_ready_followup_in_deny_mode_too(ws):
    fid = add_followup(ws, "CI-GREEN")
    answer = event(ws, "UserPromptSubmit", prompt="go")
    assert "CI-GREEN" in answer["hookSpecificOutput"]["additionalContext"]
    assert followup(ws, fid)[1] == "prompt:claude:s1"
    assert event(ws, "UserPromptSubmit", prompt="again") == {}


def _transcript(path, lines):
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    return str(path)


def test_a_printed_followup_counts_as_delivered_only_once_the_model_was_given_it(ws, tmp_path):
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED")
    text = sql(ws, "SELECT text FROM followups WHERE id = ?", (fid,))[0][0]
    wake_mark = wake.header(fid, "feat")
    sql(ws, "UPDATE followups SET printed = 'now', printed_to = 'claude:s1' WHERE id = ?", (fid,))
    # the model only quoted the header in its own tool call: not given the output
    quoted = _transcript(
        tmp_path / "quoted.jsonl",
        [
            {
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": f"echo '{wake_mark}'"}}
                    ],
                },
            }
        ],
    )
    answer = stop(ws, transcript=quoted, tasks=[WAITER])
    assert answer["decision"] == "block" and "CI-RED" in answer["reason"]
    assert followup(ws, fid)[1] == "stop-hook:claude:s1"
    # read from the wait's output: delivered by the wait, no refusal
    fid2 = add_followup(ws, "CI-AGAIN")
    text = sql(ws, "SELECT text FROM followups WHERE id = ?", (fid2,))[0][0]
    sql(ws, "UPDATE followups SET printed = 'now', printed_to = 'claude:s1' WHERE id = ?", (fid2,))
    read = _transcript(
        tmp_path / "read.jsonl",
        [
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t2",
                            "content": "     1\t" + text.replace("\n", "\n     2\t"),
                        }
                    ],
                },
            }
        ],
    )
    assert stop(ws, transcript=read, tasks=[WAITER]) == {}
    delivered, via, printed, printed_to = followup(ws, fid2)
    assert delivered and via == "monitor-wait:claude:s1" and printed_to == "claude:s1"


def test_a_subagents_stop_hands_nothing_over(ws):
    add_monitor(ws)
    fid = add_followup(ws)
    answer = hook(
        {
            "session_id": "s1",
            "transcript_path": "/tmp/none.jsonl",
            "cwd": ws,
            "hook_event_name": "SubagentStop",
            "stop_hook_active": False,
            "agent_id": "a1",
            "agent_type": "Explore",
            "background_tasks": [],
        },
        LEASED,
    )
    assert "Follow-up" not in json.dumps(answer)
    assert followup(ws, fid)[0] is None


def test_activity_follows_the_hook_events(ws):
    event(ws, "UserPromptSubmit", prompt="go")
    assert session_row(ws)[0] == "working"
    event(ws, "PreToolUse", tool_name="ExitPlanMode", tool_input={"plan": "x"}, tool_use_id="t1")
    assert session_row(ws)[0] == "plan"
    event(ws, "PostToolUse", tool_name="ExitPlanMode", tool_input={"plan": "x"}, tool_use_id="t1", tool_response={})
    assert session_row(ws)[0] == "working"
    event(ws, "Notification", message="Claude needs your permission to use Bash", notification_type="permission_prompt")
    assert session_row(ws)[0] == "person"
    event(ws, "PreToolUse", tool_name="AskUserQuestion", tool_input={"questions": []}, tool_use_id="t2")
    assert session_row(ws)[0] == "person"
    stop(ws)
    assert session_row(ws)[0] == "idle"
    event(ws, "Notification", message="Claude is waiting for your input", notification_type="idle_prompt")
    assert session_row(ws)[0] == "idle"
    event(ws, "Notification", message="auth", notification_type="auth_success")
    assert session_row(ws)[0] == "idle", "a notice that says nothing about waiting changes nothing"
    # a subagent's calls leave the main thread's activity alone
    event(ws, "PreToolUse", tool_name="Bash", tool_input={"command": "ls"}, agent_id="a1", agent_type="Explore")
    assert session_row(ws)[0] == "idle"


def test_notification_and_prompt_are_wired():
    from proctor.hosts import claude

    printed = json.loads("\n".join(line for line in claude.wiring().splitlines() if not line.startswith("#")))
    assert {"UserPromptSubmit", "Notification", "Stop"} <= set(printed["hooks"])


# -- proctor monitor wait ---------------------------------------------------------------------


def wait_cli(root, *args, env=None, timeout=30):
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "monitor", "wait", *args],
        cwd=root,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_wait_holds_until_the_session_is_idle_then_prints_once(ws):
    add_monitor(ws)
    event(ws, "UserPromptSubmit", prompt="go")  # working
    fid = add_followup(ws, "CI-RED: held")
    proc = wait_cli(ws, "--job", "feat", "--session", "s1", "-o", "json")
    try:
        for activity in ("working", "person", "plan"):
            sql(ws, "UPDATE sessions SET activity = ? WHERE session = 's1'", (activity,))
            time.sleep(1.5)
            assert proc.poll() is None, f"printed while the session was {activity}"
    except BaseException:
        proc.kill()
        raise
    assert followup(ws, fid)[2] is None
    event(ws, "Notification", message="Claude is waiting for your input", notification_type="idle_prompt")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    printed = json.loads(out)
    assert printed["status"] == "printed" and printed["followup"]["id"] == fid
    assert "CI-RED: held" in printed["followup"]["text"]
    _, _, when, to = followup(ws, fid)
    assert when and to == "claude:s1"
    # printed once for this session: its next wait waits for the next follow-up
    proc = wait_cli(ws, "--job", "feat", "--session", "s1", "--timeout", "2s")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 4 and "within 2s" in err
    # a wait for nobody in particular (a person's) is another reader: it is not used up by the session's
    proc = wait_cli(ws, "--job", "feat", "--timeout", "5s")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "CI-RED: held" in out, err


def test_wait_ends_when_there_is_nothing_left_to_wait_for(ws):
    proc = wait_cli(ws, "--job", "feat")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 3 and "no live monitors" in err
    mid = add_monitor(ws)
    proc = wait_cli(ws, "--job", "feat")
    time.sleep(1.5)
    if proc.poll() is not None:
        raise AssertionError(f"the wait ended with a live monitor: {proc.communicate()}")
    sql(ws, "UPDATE monitors SET deleted = 'now removed' WHERE id = ?", (mid,))
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 3, err
    proc = wait_cli(ws, "--job", "nosuch")
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 3 and "no job nosuch" in err


def test_a_leased_caller_waits_only_for_its_own_job(ws):
    add_monitor(ws, "other")
    proc = wait_cli(ws, "--job", "other", env=LEASED)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode != 0 and "own job" in err
    add_followup(ws, "mine")
    add_monitor(ws)
    proc = wait_cli(ws, env=LEASED)  # --job defaults to the caller's lease
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "mine" in out, err


def test_a_host_that_never_says_stop_hook_active_is_bounded_too_and_never_asked_to_wait(ws):
    """Gemini CLI's AfterAgent carries no stop_hook_active: the refusals in a row are counted
    from the store, which a stop let through resets; and nothing wakes an idle Gemini session
    from a background task, so it is never asked to start the wait."""
    add_monitor(ws)
    refused = 0
    for turn in range(6):
        add_followup(ws, f"tick {turn}")
        environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
        environ.update(LEASED)
        out, _ = hook_run(
            ["gemini"],
            json.dumps(
                {
                    "session_id": "g1",
                    "cwd": ws,
                    "hook_event_name": "AfterAgent",
                    "prompt": "go",
                    "prompt_response": "done",
                }
            ).encode(),
            environ,
        )
        answer = json.loads(out)
        if answer.get("decision") != "deny":
            break
        refused += 1
        assert "proctor monitor wait" not in answer["reason"]
    assert refused == wake.MAX_STOP_BLOCKS
    # with nothing ready and live monitors, a Gemini session is let stop without an ask
    sql(ws, "UPDATE followups SET delivered = 'x'")
    out, _ = hook_run(
        ["gemini"], json.dumps({"session_id": "g1", "cwd": ws, "hook_event_name": "AfterAgent"}).encode(), environ
    )
    assert json.loads(out).get("decision") != "deny"


def test_doctor_names_the_events_an_older_wiring_lacks(tmp_path):
    from proctor.hosts import claude

    root, home = tmp_path / "r", tmp_path / "h"
    (root / ".claude").mkdir(parents=True)
    home.mkdir()
    older = {
        "hooks": {
            e: [{"matcher": "*", "hooks": [{"type": "command", "command": "proctor hook claude"}]}]
            for e in ("PreToolUse", "PostToolUse", "Stop", "SubagentStop")
        }
    }
    (root / ".claude" / "settings.json").write_text(json.dumps(older))
    ok, what = claude.wired(str(root), str(home))
    assert not ok and "not for UserPromptSubmit, Notification" in what
    printed = json.loads("\n".join(line for line in claude.wiring().splitlines() if not line.startswith("#")))
    (root / ".claude" / "settings.json").write_text(json.dumps(printed))
    assert claude.wired(str(root), str(home))[0]


@pytest.mark.parametrize("marker", [{"PROCTOR_WORKER_TAG": "w-1"}, {"PROCTOR_WORKER_HOOK": "1"}])
def test_a_proctor_work_worker_is_never_asked_to_start_the_wait(ws, marker):
    """proctor work resumes its worker with the follow-up itself; a waiter in the background
    would only keep `claude -p` alive past its reply. Its hook is pinned under env -i with
    PROCTOR_WORKER_HOOK (or, wired otherwise, inherits the runner's tag)."""
    add_monitor(ws)
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(LEASED, **marker)
    payload = {
        "session_id": "w1",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": ws,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "background_tasks": [],
    }
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), environ)
    assert json.loads(out) == {}
    fid = add_followup(ws, "CI-RED for the worker")
    out, _ = hook_run(["claude"], json.dumps(payload).encode(), environ)
    answer = json.loads(out)
    assert answer["decision"] == "block" and "CI-RED for the worker" in answer["reason"]
    assert "proctor monitor wait" not in answer["reason"]
    assert followup(ws, fid)[1] == "stop-hook:claude:w1"


def test_a_workers_pinned_hook_lets_its_monitor_commands_through_but_not_a_stripped_secret(ws):
    """A `proctor work` worker's hook runs under env -i (PROCTOR_WORKER_HOOK): it cannot see the
    secret the runner gave the worker, so `proctor monitor add` is not refused for lacking it;
    stripping it is refused all the same."""
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(PROCTOR_WORKER_HOOK="1")

    def pre(command):
        out, _ = hook_run(
            ["claude", "--lease", "feat"],
            json.dumps(
                {
                    "session_id": "w1",
                    "transcript_path": "/tmp/none.jsonl",
                    "cwd": ws,
                    "hook_event_name": "PreToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": command},
                    "tool_use_id": "t1",
                }
            ).encode(),
            environ,
        )
        return json.loads(out).get("hookSpecificOutput", {}).get("permissionDecision")

    assert pre("proctor monitor add --cmd 'echo hi' --interval 10s --allow-unsandboxed") != "deny"
    assert pre("env -u PROCTOR_NONCE proctor monitor add --cmd 'echo hi' --interval 10s --allow-unsandboxed") == "deny"
    assert pre("proctor monitor wait --job other") == "deny"
    del environ["PROCTOR_WORKER_HOOK"]
    assert pre("proctor monitor add --cmd 'echo hi' --interval 10s --allow-unsandboxed") == "deny"


def test_a_wait_whose_checkout_is_gone_ends(ws):
    """A wait left running after its checkout was removed does not wait for ever."""
    import shutil

    add_monitor(ws)
    proc = wait_cli(ws, "--job", "feat")
    try:
        time.sleep(1.5)
        assert proc.poll() is None
        shutil.rmtree(ws)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3 and "is gone" in err, err
