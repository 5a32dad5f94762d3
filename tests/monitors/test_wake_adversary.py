"""Adversarial review of the wake (proctor/monitors/wake.py, the monitor-followup rule, the
session activity the hook records, `proctor monitor wait`, and the background rules'
is_monitor_wait).

Each test is one attack, driving the real hook (`proctor.hook.run`), the real CLI in a
subprocess and the real SQLite store of a real git repository. A test asserts the promised
behaviour: it FAILS while the attack breaks the promise, and passes where the promise holds.

The promises attacked:
  P1 a follow-up is marked delivered only once the model was given it (a Stop block reason,
     a prompt's additionalContext, or a wait's output the transcript shows the model read);
     never when it only reached the person's screen;
  P2 at most 3 Stop refusals in a row;
  P3 `proctor monitor wait` holds while the session works or waits for the person, prints only
     when it is idle, a leased agent waits only for its own job, and it exits when nothing is
     left to wait for;
  P4 the background rules leave a plain `proctor monitor wait` alone, and nothing else;
  P5 follow-ups go only to sessions bound to that job, never at a subagent's stop.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from proctor import api
from proctor.monitors import wake
from proctor.paths import find_checkout, repo_state_dir
from proctor.store import Store
from proctor.timeutil import iso
from tests.support import call_hook

# the set-up shared with the wake's own tests: its repository, its jobs, its store helpers
from tests.monitors.test_monitor_wake import LEASED, WAITER, add_monitor, sql, ws  # noqa: E402,F401,F811  (ws: the fixture)


def state_dir(root) -> str:
    return repo_state_dir(find_checkout(root))


def add_followup(root, *lines, job="feat") -> int:
    lines = lines or ("CI-RED",)
    fid = sql(
        root,
        "INSERT INTO followups (job, created, text, events) VALUES (?, '2026-01-01T00:00:00Z', '', ?) RETURNING id",
        (job, len(lines)),
    )[0][0]
    count = f"{len(lines)} event{'s' if len(lines) != 1 else ''}"
    text = f"{wake.header(fid, job)} ({count}):\n" + "\n".join(f"[t] ci watcher (monitor 1): {line}" for line in lines)
    sql(root, "UPDATE followups SET text = ? WHERE id = ?", (text, fid))
    return fid


def text_of(root, fid) -> str:
    return sql(root, "SELECT text FROM followups WHERE id = ?", (fid,))[0][0]


def followup(root, fid):
    return sql(root, "SELECT delivered, via, printed, printed_to FROM followups WHERE id = ?", (fid,))[0]


def mark_printed(root, fid, to="claude:s1"):
    sql(root, "UPDATE followups SET printed = 'now', printed_to = ? WHERE id = ?", (to, fid))


def session_row(root, session="s1"):
    rows = sql(
        root,
        "SELECT activity, stop_blocks FROM sessions WHERE host = 'claude' AND session = ? AND subagent = ''",
        (session,),
    )
    return rows[0] if rows else None


def clean_env(extra=None) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    environ.update(extra or {})
    return environ


def hook(payload, env=LEASED, host="claude"):
    return call_hook(payload, host, base=clean_env(env), drop=())


def stop(root, active=False, tasks=(), transcript="/tmp/none.jsonl", session="s1", env=LEASED, **extra):
    return hook(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": root,
            "hook_event_name": "Stop",
            "stop_hook_active": active,
            "last_assistant_message": "done",
            "background_tasks": list(tasks),
            **extra,
        },
        env,
    )


def event(root, name, session="s1", env=LEASED, transcript="/tmp/none.jsonl", **fields):
    return hook(
        {"session_id": session, "transcript_path": str(transcript), "cwd": root, "hook_event_name": name, **fields}, env
    )


def write_transcript(path, lines) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        for line in lines:
            handle.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    return str(path)


def tool_use_line(tid, name, tool_input, ago=5.0, **extra):
    return {
        "type": "assistant",
        "timestamp": iso(time.time() - ago),
        "uuid": tid + "-a",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": name, "input": tool_input}],
        },
        **extra,
    }


def tool_result_line(tid, content, ago=4.0, structured=None, **extra):
    line = {
        "type": "user",
        "timestamp": iso(time.time() - ago),
        "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": content}]},
        **extra,
    }
    if structured is not None:
        line["toolUseResult"] = structured
    return line


def launch(task, command, ago):
    """A background Bash task as Claude Code writes its launch into the transcript."""
    return [
        tool_use_line("tu-" + task, "Bash", {"command": command, "run_in_background": True}, ago),
        tool_result_line(
            "tu-" + task, f"Command running in background with ID: {task}.", ago - 1, {"backgroundTaskId": task}
        ),
    ]


def wait_cli(root, *args, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "monitor", "wait", *args],
        cwd=root,
        env=clean_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# == P1: delivered only once the model was given it ============================================


def test_p1_a_wait_output_read_only_up_to_its_header_is_not_delivered(ws, tmp_path):
    """Attack: the wait printed a follow-up; the model looked only at its first line (`head -n 1`
    on the task's output file; Claude's Read also cuts every line at 2,000 characters, a monitor
    line may be 16 KiB). The transcript holds the header in a tool result, and read_by_model
    looks for nothing else: the events the model never saw are marked delivered via
    monitor-wait, and the Stop does not hand them over."""
    add_monitor(ws)
    assert stop(ws, tasks=[WAITER]) == {} and session_row(ws)[0] == "idle"
    fid = add_followup(ws, "CI-RED: test_b failed", "DEPLOY-BLOCKED: prod gate closed")
    proc = wait_cli(ws, "--job", "feat", "--host", "claude", "--session", "s1", "--timeout", "20s", "-o", "json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    text = json.loads(out)["followup"]["text"]
    assert followup(ws, fid)[3] == "claude:s1"
    output = str(tmp_path / "b1.output")
    transcript = write_transcript(
        tmp_path / "head.jsonl",
        [tool_use_line("t7", "Bash", {"command": f"head -n 1 {output}"}), tool_result_line("t7", text.splitlines()[0])],
    )
    answer = stop(ws, transcript=transcript, tasks=[])
    assert followup(ws, fid)[1] != "monitor-wait:claude:s1", "only the header reached the model"
    assert answer.get("decision") == "block" and "DEPLOY-BLOCKED" in answer["reason"]


def test_p1_a_header_the_model_echoed_itself_is_not_delivery(ws, tmp_path):
    """Attack (forgery, no file tampering): the model never reads the wait's output; it runs
    `echo 'Follow-up N from the monitors of job feat'`. The tool_use is rightly ignored, but
    the echo's tool_result carries the header, so the unread follow-up counts as delivered."""
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: secret-sauce")
    mark_printed(ws, fid)
    mark = wake.header(fid, "feat")
    transcript = write_transcript(
        tmp_path / "echo.jsonl",
        [tool_use_line("t1", "Bash", {"command": f"echo '{mark}'"}), tool_result_line("t1", mark)],
    )
    answer = stop(ws, transcript=transcript, tasks=[WAITER])
    assert followup(ws, fid)[1] != "monitor-wait:claude:s1", "the events were never in any tool result"
    assert answer.get("decision") == "block" and "secret-sauce" in answer["reason"]


def test_p1_a_followup_shown_only_to_the_person_is_not_delivered(ws, tmp_path):
    """Attack: every transcript line of type "attachment" counts as given to the model. Claude
    Code 2.1.332 (shared/fixtures/hosts/claude-2.1.332) logs a hook's systemMessage, which only
    the person sees, as a `hook_system_message` attachment, and every hook's stdout as a
    `hook_success` attachment; the lines the model is given carry `rendered`/`renderedRole`.
    A follow-up whose text reached the person's screen through a systemMessage (any Stop or
    Notification hook relaying it, e.g. a desktop notifier running `proctor monitor followups
    --text N`) is marked delivered though the model never had it."""
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: only-on-screen")
    mark_printed(ws, fid)
    text = text_of(ws, fid)
    transcript = write_transcript(
        tmp_path / "system.jsonl",
        [
            {
                "parentUuid": "p1",
                "isSidechain": False,
                "type": "attachment",
                "uuid": "u1",
                "attachment": {
                    "type": "hook_system_message",
                    "content": text,
                    "hookName": "Stop",
                    "hookEvent": "Stop",
                    "toolUseID": "x1",
                },
            },
            {
                "parentUuid": "u1",
                "isSidechain": False,
                "type": "attachment",
                "uuid": "u2",
                "attachment": {
                    "type": "hook_success",
                    "hookName": "Notification",
                    "hookEvent": "Notification",
                    "content": "",
                    "stdout": json.dumps({"systemMessage": text}) + "\n",
                    "stderr": "",
                    "exitCode": 0,
                    "command": "notify-person",
                    "durationMs": 5,
                },
            },
        ],
    )
    answer = stop(ws, transcript=transcript, tasks=[WAITER])
    assert followup(ws, fid)[1] != "monitor-wait:claude:s1", "a systemMessage goes to the person only"
    assert answer.get("decision") == "block" and "only-on-screen" in answer["reason"]


def test_p1_a_subagents_read_is_not_the_main_threads(ws, tmp_path):
    """Attack: a subagent (a sidechain: isSidechain true, agentId) read the wait's output, in a
    transcript that holds sidechain lines (Claude Code before subagents got their own files; and
    hook calls of subagents carry the parent's transcript_path). The main thread's model never
    had it, yet _given_to_model ignores isSidechain and the follow-up is delivered."""
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: read-by-a-helper")
    mark_printed(ws, fid)
    transcript = write_transcript(
        tmp_path / "side.jsonl",
        [
            tool_use_line("t3", "Read", {"file_path": "/tmp/b1.output"}, isSidechain=True, agentId="a1"),
            tool_result_line("t3", text_of(ws, fid), isSidechain=True, agentId="a1"),
        ],
    )
    answer = stop(ws, transcript=transcript, tasks=[WAITER])
    assert followup(ws, fid)[1] != "monitor-wait:claude:s1"
    assert answer.get("decision") == "block" and "read-by-a-helper" in answer["reason"]


def test_p1_a_stop_reason_past_claudes_10000_character_cap_is_not_delivered_whole(ws):
    """Attack: a follow-up may be 32 KiB (followups.MAX_BYTES). Claude Code caps hook output
    strings at 10,000 characters and replaces a longer one with a preview and a file path
    (reference §1.4). The Stop block hands the whole follow-up over as its reason and marks it
    delivered via stop-hook, though the model got only a preview."""
    add_monitor(ws)
    fid = add_followup(ws, *[f"line {n}: " + "x" * 600 for n in range(40)])
    assert len(text_of(ws, fid)) > 20000
    answer = stop(ws, tasks=[WAITER])
    assert answer.get("decision") == "block"
    delivered = followup(ws, fid)[0]
    assert len(answer["reason"]) <= 10000 or delivered is None, (
        f"a {len(answer['reason'])}-character reason was marked delivered whole"
    )


def test_p1_a_prompt_context_past_claudes_10000_character_cap_is_not_delivered_whole(ws):
    """Attack: as above, through UserPromptSubmit's additionalContext (capped at 10,000
    characters by Claude Code too): a 25 KB follow-up is marked delivered via prompt."""
    fid = add_followup(ws, *[f"line {n}: " + "y" * 600 for n in range(40)])
    answer = event(ws, "UserPromptSubmit", prompt="what next?")
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert len(context) <= 10000 or followup(ws, fid)[0] is None, (
        f"{len(context)} characters of additionalContext were marked delivered whole"
    )


def test_p1_a_missing_transcript_hands_the_printed_followup_over(ws, tmp_path):
    """Probe (holds): a printed follow-up with no transcript to prove it was read (the path
    does not exist, or is a directory) is handed over at the Stop, never assumed delivered."""
    add_monitor(ws)
    for transcript in (tmp_path / "absent.jsonl", tmp_path):
        fid = add_followup(ws, f"CI-RED: {transcript.name}")
        mark_printed(ws, fid)
        answer = stop(ws, transcript=transcript, tasks=[WAITER])
        assert answer.get("decision") == "block" and f"CI-RED: {transcript.name}" in answer["reason"]
        assert followup(ws, fid)[1] == "stop-hook:claude:s1"


def test_p1_a_huge_transcript_is_read_from_its_tail_in_time(ws, tmp_path):
    """Probe (holds): a 70 MB transcript (past the 64 MiB read cap, cut mid-line) whose last
    lines show the model read the wait's output: delivered via monitor-wait, no refusal, and
    the Stop hook answers within a few seconds."""
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: at-the-tail")
    mark_printed(ws, fid)
    path = tmp_path / "huge.jsonl"
    filler = (
        json.dumps(
            {
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "f", "content": "z" * 9000}],
                },
            }
        )
        + "\n"
    )
    with open(path, "w", encoding="utf-8") as handle:
        for _ in range(70 * 1024 * 1024 // len(filler) + 1):
            handle.write(filler)
        handle.write(json.dumps(tool_result_line("t9", text_of(ws, fid))) + "\n")
    assert os.path.getsize(path) > wake.TRANSCRIPT_READ_CAP
    started = time.monotonic()
    answer = stop(ws, transcript=path, tasks=[WAITER])
    took = time.monotonic() - started
    assert answer == {} and followup(ws, fid)[1] == "monitor-wait:claude:s1"
    assert took < 10, took


# SQLite's engine itself: a proctor.db file of schema 5 written by hand (PRAGMA user_version)
@pytest.mark.sqlite_store
def test_p1_a_store_of_the_previous_schema_is_migrated_and_the_followup_handed_over(ws):
    """Probe (holds): a store written by the proctor before the wake (schema 5: no printed,
    printed_to, activity or stop_blocks columns) with a pending follow-up. The hook migrates it
    and hands the follow-up over; nothing crashes, nothing is marked delivered unseen."""
    import sqlite3

    from proctor.store import rows
    from proctor.store.schema import MIGRATIONS

    s = Store(state_dir(ws))
    try:
        with s.read() as conn:
            jobs = [rows.get(conn, j) for j in ("feat", "other")]
    finally:
        s.close()
    db = os.path.join(state_dir(ws), "proctor.db")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(db + suffix)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    for target, statements in MIGRATIONS:
        if target <= 5:
            for statement in statements:
                conn.execute(statement)
    conn.execute("PRAGMA user_version=5")
    for job in jobs:  # the rows as a schema-5 proctor wrote them (no machine column then)
        doc = {k: v for k, v in job.items() if not k.startswith("_")}
        conn.execute(
            "INSERT INTO jobs (id, parent, root, depth, state, live, holder, checkout_root, declared_in, "
            "created, updated, doc) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)",
            (
                doc["id"],
                doc.get("parent"),
                job["_root"],
                job["_depth"],
                doc["state"],
                doc.get("holder", "session"),
                doc.get("checkout_root"),
                doc.get("declared_in"),
                doc["created"],
                doc["updated"],
                json.dumps(doc, sort_keys=True, separators=(",", ":")),
            ),
        )
        conn.executemany(
            "INSERT INTO job_paths (job, spelling, key) VALUES (?, ?, ?)",
            [(doc["id"], c.spelling, c.key) for c in rows.claims(doc)],
        )
    conn.execute(
        "INSERT INTO monitors (job, command, interval, description, cwd, created, created_by) "
        "VALUES ('feat', 'echo', 60, 'ci watcher', ?, '2026-01-01T00:00:00Z', 'test')",
        (ws,),
    )
    conn.execute(
        "INSERT INTO followups (job, created, text, events) VALUES ('feat', '2026-01-01T00:00:00Z', ?, 1)",
        (wake.header(1, "feat") + " (1 event):\n[t] ci watcher (monitor 1): OLD-SCHEMA",),
    )
    conn.close()
    answer = stop(ws, tasks=[WAITER])
    assert answer.get("decision") == "block" and "OLD-SCHEMA" in answer["reason"], answer
    assert followup(ws, 1)[1] == "stop-hook:claude:s1"


# == P2: at most three Stop refusals in a row ==================================================


@contextlib.contextmanager
def store_held(root):
    """Another proctor writer holding the store: the sidecar flock every write takes on
    SQLite, the repository's advisory lock every write transaction takes on PostgreSQL."""
    if os.environ.get("PROCTOR_STORE_URL", "").startswith("postgres"):
        import psycopg

        from proctor.store.postgres import _lock_key, schema_name

        conn = psycopg.connect(os.environ["PROCTOR_STORE_URL"])  # its transaction open until the rollback
        try:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(schema_name(state_dir(root))),))
            yield
        finally:
            conn.rollback()
            conn.close()
        return
    fd = os.open(os.path.join(state_dir(root), "proctor.db.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_p2_a_busy_store_cannot_turn_one_followup_into_endless_refusals(ws):
    """Attack: the store is held by another writer (the server storing monitor events, a wait,
    another hook) for more than the hook's 0.25 s while the session stops. The verdict is
    reached from reads, then its records are skipped: neither the refusal count (stop_blocks)
    nor the follow-up's delivery is written. Every Stop in the chain is refused again with the
    same follow-up: more than three refusals in a row, the same text handed over each time."""
    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: once")
    refusals, handed = 0, 0
    with store_held(ws):
        for turn in range(6):
            answer = stop(ws, active=turn > 0, tasks=[WAITER])
            if answer.get("decision") != "block":
                break
            refusals += 1
            handed += "CI-RED: once" in answer["reason"]
    assert refusals <= wake.MAX_STOP_BLOCKS, f"{refusals} refusals in a row"
    assert handed <= 1, f"follow-up {fid} handed over {handed} times"


def test_p2_a_host_that_says_stop_hook_active_false_on_every_stop_is_still_bounded(ws):
    """Attack (host-dependent): the bound trusts the payload: stop_hook_active false sets the
    count to 0 whatever the store says. A host that reports false on a Stop that follows a
    refused one (not flagging its continuation; Codex 0.171's captured Stops all say false, none
    shows a continued Stop) is refused forever by a monitor that always has something."""
    add_monitor(ws)
    refusals = 0
    for turn in range(6):
        add_followup(ws, f"tick {turn}")
        answer = stop(ws, active=False, tasks=[WAITER])
        if answer.get("decision") != "block":
            break
        refusals += 1
    assert refusals <= wake.MAX_STOP_BLOCKS, f"{refusals} refusals in a row"


def test_p2_a_stop_hook_active_that_is_no_boolean_is_counted_from_the_store(ws):
    """Probe (holds): stop_hook_active as the string "false", 0 or null is not `False`: the
    refusals are counted from the store and stop at three."""
    add_monitor(ws)
    refusals = 0
    for turn, active in enumerate(("false", 0, None, "false", 0, None)):
        add_followup(ws, f"tick {turn}")
        answer = stop(ws, active=active, tasks=[WAITER])
        if answer.get("decision") != "block":
            break
        refusals += 1
    assert refusals == wake.MAX_STOP_BLOCKS


# == P3: proctor monitor wait ===================================================================


def test_p3_a_wait_for_an_archived_job_exits(ws):
    """Attack: the job is archived (`proctor job archive`), which leaves its state as it was
    (running/declared) and sets `archived`; its monitors are deleted only when a server prunes
    them. wake.wait checks only jobrecord.is_live(state) and live monitor rows, so with no server
    running the wait lingers for a job that will never have a follow-up again."""
    add_monitor(ws)
    proc = wait_cli(ws, "--job", "feat", "--timeout", "8s")
    time.sleep(1.5)
    archived = subprocess.run(
        [sys.executable, "-m", "proctor", "job", "archive", "feat"],
        cwd=ws,
        env=clean_env(),
        capture_output=True,
        text=True,
    )
    assert archived.returncode == 0, archived.stderr
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == wake.NOTHING_LEFT, f"exit {proc.returncode}: {err.strip()}"


def test_p3_a_wait_exits_when_its_job_ends(ws):
    """Probe (holds): the job's state turns terminal while the wait blocks: it exits 3."""
    add_monitor(ws)
    proc = wait_cli(ws, "--job", "feat", "--timeout", "20s")
    time.sleep(1.5)
    assert proc.poll() is None
    from proctor.store import rows

    s = Store(state_dir(ws))
    try:
        with s.write() as conn:
            job = rows.get(conn, "feat")
            job["state"] = "pass"
            rows.put(conn, job, job["_root"], job["_depth"])
    finally:
        s.close()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == wake.NOTHING_LEFT and "has ended" in err, err


def test_p3_a_prompt_the_hook_could_not_record_does_not_let_the_wait_print_while_the_session_works(ws):
    """Attack: the session went idle, then the person's prompt starts a turn while another
    writer holds the store past the hook's 0.25 s: the prompt's activity record (working) is
    skipped, the store still says idle, and the wait prints the next follow-up into the busy
    session. (Same root cause as the busy-store refusals: records the wake depends on are
    best-effort.)"""
    add_monitor(ws)
    stop(ws, tasks=[WAITER])
    assert session_row(ws)[0] == "idle"
    with store_held(ws):
        event(ws, "UserPromptSubmit", prompt="start the migration")  # the session works from here on
    fid = add_followup(ws, "CI-RED: mid-turn")
    proc = wait_cli(ws, "--job", "feat", "--host", "claude", "--session", "s1", "--timeout", "6s")
    try:
        time.sleep(3)
        assert proc.poll() is None, f"printed while the session worked: {followup(ws, fid)}"
    finally:
        proc.communicate(timeout=60)


def test_p3_two_waits_for_one_session_print_a_followup_once(ws):
    """Attack: two waits for the same session (the model started it twice, or a second one
    after a resume) both see the follow-up unprinted: wait() reads it in one transaction and
    records it printed in another, with nothing that makes the claim exclusive
    (mark_printed's UPDATE has no `printed IS NULL`). Both print it. Made deterministic by
    letting both reads happen before either write."""
    from proctor.workspace import Workspace

    add_monitor(ws)
    fid = add_followup(ws, "CI-RED: twice?")
    barrier = threading.Barrier(2, timeout=5)
    results = []

    def one():
        workspace = Workspace(ws)
        real_write = workspace.store.write

        @contextlib.contextmanager
        def write_after_both_read():
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
            with real_write() as conn:
                yield conn

        workspace.store.write = write_after_both_read
        try:
            results.append(wake.wait(workspace, "feat", "claude", "s1", 6))
        finally:
            workspace.close()

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    printed = [f["id"] for code, f, _ in results if code == 0 and f]
    assert printed.count(fid) == 1, f"follow-up {fid} printed {printed.count(fid)} times: {results}"


def test_p3_a_stop_accepts_a_wait_that_is_held_for_another_session(ws):
    """Attack: the Stop takes any running `proctor monitor wait` naming the job as this
    session's wake, whatever --session it names. A wait held for session s2 prints as soon as
    s2 is idle, into s1 (whose background task it is) while s1 works; s1 is not asked for its
    own wait."""
    add_monitor(ws)
    event(ws, "UserPromptSubmit", session="s2", prompt="x")
    stop(ws, session="s2", tasks=[dict(WAITER, command="proctor monitor wait --job feat --host claude --session s2")])
    assert session_row(ws, "s2")[0] == "idle"
    foreign = dict(WAITER, command="proctor monitor wait --job feat --host claude --session s2")
    answer = stop(ws, tasks=[foreign])
    assert answer.get("decision") == "block" and "--session s1" in answer.get("reason", ""), (
        "a wait held for s2 was taken as s1's wake"
    )


def test_p3_a_followup_printed_to_someone_else_still_wakes_the_bound_session(ws):
    """Attack: any wait for the job claims a follow-up for good (printed IS NULL is the only
    test): a person's `proctor monitor wait --job feat` (no session), or one for another
    session, prints it, and the bound session's own wait skips it and never wakes the idle
    session for it (it reaches the model only if something else wakes the session)."""
    add_monitor(ws)
    stop(ws, tasks=[WAITER])
    assert session_row(ws)[0] == "idle"
    fid = add_followup(ws, "CI-RED: for s1")
    person = wait_cli(ws, "--job", "feat", "--timeout", "10s", "-o", "json")
    out, err = person.communicate(timeout=60)
    assert person.returncode == 0 and json.loads(out)["followup"]["id"] == fid, err
    own = wait_cli(ws, "--job", "feat", "--host", "claude", "--session", "s1", "--timeout", "4s", "-o", "json")
    out, err = own.communicate(timeout=60)
    assert own.returncode == 0 and json.loads(out)["followup"]["id"] == fid, (
        f"s1's wait: exit {own.returncode} {err.strip()}; followup {followup(ws, fid)}"
    )


def test_p3_the_asked_command_survives_a_session_id_with_quotes_and_shell(ws):
    """Probe (holds): a session id with a quote, a semicolon and a substitution. The command the
    Stop prints, run by a real shell, waits for exactly that session (printed_to matches) and
    runs nothing else."""
    session = "s'1; touch pwned $(touch pwned2)"
    add_monitor(ws)
    answer = stop(ws, session=session)
    assert answer.get("decision") == "block"
    command = re.search(r"`(proctor monitor wait [^`]*)`", answer["reason"]).group(1)
    stop(ws, session=session, active=True, tasks=[dict(WAITER, command=command)])  # let through: idle
    fid = add_followup(ws, "CI-RED: quoted")
    runner = f"{sys.executable} -m {command} --timeout 20s"
    done = subprocess.run(["bash", "-c", runner], cwd=ws, env=clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "CI-RED: quoted" in done.stdout
    assert followup(ws, fid)[3] == f"claude:{session}"
    assert not os.path.exists(os.path.join(ws, "pwned")) and not os.path.exists(os.path.join(ws, "pwned2"))


def test_p3_a_leased_caller_cannot_wait_for_another_job_by_unsetting_baggage(ws):
    """Probe (holds): an agent whose process tree was started under feat (the shell stands in
    for the host process carrying BAGGAGE) runs `env -u BAGGAGE proctor monitor wait --job
    other`: the lease is read from the ancestor's environment and the wait is refused."""
    add_monitor(ws, "other")
    fid = add_followup(ws, "OTHER-SECRET", job="other")
    done = subprocess.run(
        ["sh", "-c", f"env -u BAGGAGE {sys.executable} -m proctor monitor wait --job other --timeout 3s; echo rc=$?"],
        cwd=ws,
        env=clean_env(LEASED),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "OTHER-SECRET" not in done.stdout and followup(ws, fid)[2] is None, done.stdout + done.stderr


def test_p3_a_subagent_leased_by_its_spawn_cannot_wait_for_another_jobs_followups(ws):
    """Attack: a subagent spawned with `lease: feat` is bound by the hook (agent scope); the
    CLI it runs sees no BAGGAGE and no checkout record, so `proctor monitor wait --job other`
    resolves no lease and is not refused; the guard's lease-store exempts `monitor wait`
    (relying on the CLI). The leased agent reads another job's follow-up and claims it
    (printed), so other's own wait never prints it."""
    add_monitor(ws, "other")
    fid = add_followup(ws, "OTHER-SECRET", job="other")
    sql(
        ws,
        "INSERT INTO bindings (scope, job, recorded) VALUES ('agent:claude:s9:a1', 'feat', ?) "
        "ON CONFLICT (scope) DO UPDATE SET job = excluded.job, recorded = excluded.recorded",
        (iso(time.time()),),
    )
    command = "proctor monitor wait --job other --timeout 5s"
    answer = hook(
        {
            "session_id": "s9",
            "transcript_path": "/tmp/none.jsonl",
            "cwd": ws,
            "hook_event_name": "PreToolUse",
            "agent_id": "a1",
            "agent_type": "general-purpose",
            "tool_name": "Bash",
            "tool_input": {"command": command, "run_in_background": True},
            "tool_use_id": "t1",
        },
        env=None,
    )
    refused_by_guard = answer.get("hookSpecificOutput", {}).get("permissionDecision") == "deny"
    # the set-up is sound: the guard does see the subagent under feat (it refuses it another
    # monitor command without the job's secret)
    sanity = hook(
        {
            "session_id": "s9",
            "transcript_path": "/tmp/none.jsonl",
            "cwd": ws,
            "hook_event_name": "PreToolUse",
            "agent_id": "a1",
            "agent_type": "general-purpose",
            "tool_name": "Bash",
            "tool_input": {"command": "proctor monitor list --job other"},
            "tool_use_id": "t2",
        },
        env=None,
    )
    assert "a session holding feat" in json.dumps(sanity), sanity
    done = subprocess.run(
        [sys.executable, "-m", "proctor", "monitor", "wait", "--job", "other", "--timeout", "5s"],
        cwd=ws,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    leaked = "OTHER-SECRET" in done.stdout
    assert refused_by_guard or not leaked, (
        f"guard answer {answer}; the CLI printed other's follow-up {fid} to feat's subagent"
    )


# == P4: the background rules leave a plain wait alone, and nothing else ========================


def pre_tool(root, transcript, command, session="s1"):
    return hook(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": root,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": command},
            "tool_use_id": "tx",
        },
        env=None,
    )


def silent_denied(answer) -> bool:
    spec = answer.get("hookSpecificOutput", {})
    return spec.get("permissionDecision") == "deny" and "background-silent" in spec.get("permissionDecisionReason", "")


def test_p4_the_wait_proctor_itself_asks_for_is_left_alone_whatever_the_session_id(ws, tmp_path):
    """Attack: a session id that needs quoting (a quote here; `$`, `(`, `;`, `&`, `<`, `>` or a
    backslash would do as well). wait_command quotes it correctly ('s'\\''1'), and the
    quoting puts a backslash in the very command the Stop asked for; is_monitor_wait refuses
    any command holding a backslash, so after an hour of silence background-silent refuses
    every shell write of the session because of proctor's own wait."""
    add_monitor(ws)
    session = "s'1"
    answer = stop(ws, session=session)
    command = re.search(r"`(proctor monitor wait [^`]*)`", answer["reason"]).group(1)
    transcript = write_transcript(tmp_path / "q.jsonl", launch("bq1", command, 2 * 3600))
    plain = write_transcript(tmp_path / "p.jsonl", launch("bp1", wake.wait_command("feat", "claude", "s1"), 2 * 3600))
    assert not silent_denied(pre_tool(ws, plain, "touch x")), "control: a plain wait is left alone"
    assert not silent_denied(pre_tool(ws, transcript, "touch x", session=session)), (
        f"background-silent judged proctor's own `{command}`"
    )


@pytest.mark.parametrize(
    "command",
    [
        "proctor monitor wait --job feat; python3 -",
        "proctor monitor wait --job feat && sleep 100000",
        "proctor monitor wait --job feat || python3 -",
        "proctor monitor wait --job feat | python3 -",
        "proctor monitor wait --job feat & python3 -",
        "proctor monitor wait --job feat\npython3 -",
        "proctor monitor wait --job $(python3 -)",
        "proctor monitor wait --job `python3 -`",
        "proctor monitor wait --job feat < /dev/stdin",
        "proctor monitor wait --job feat > /dev/null; sleep 99999",
        "proctor monitor wait --job feat \\\n; python3 -",
        "sleep 100000 # proctor monitor wait --job feat",
    ],
)
def test_p4_a_task_disguised_as_a_wait_is_still_judged(ws, tmp_path, command):
    """Probe (holds): anything chained to, wrapped around or substituted into the wait is a task
    like any other: silent for two hours, every shell write is refused by background-silent."""
    transcript = write_transcript(tmp_path / "d.jsonl", launch("bd1", command, 2 * 3600))
    assert silent_denied(pre_tool(ws, transcript, "touch x"))


# == P5: only sessions bound to that job; never at a subagent's stop ============================


def test_p5_a_wait_for_a_job_whose_id_extends_this_ones_is_not_this_jobs_wake(ws):
    """Attack: waiter_running accepts a task whose command merely contains the job id
    (`job in command`): a wait for job feat-2 (or feat/w1, a child) counts as feat's wake, so
    the session of feat is never asked to start its own and nothing wakes it for feat's
    follow-ups."""
    api.fork({"id": "feat-2", "write_paths": ["src/c.py"], "check": "test"}, cwd=ws)
    add_monitor(ws)
    add_monitor(ws, "feat-2")
    for command in ("proctor monitor wait --job feat-2", "proctor monitor wait --job feat/w1"):
        answer = stop(ws, tasks=[dict(WAITER, command=command)])
        assert answer.get("decision") == "block" and "proctor monitor wait --job feat " in answer["reason"], (
            f"`{command}` was taken as feat's wake"
        )
        stop(ws, active=False, tasks=[WAITER])  # reset the chain


def test_p5_a_task_that_only_mentions_the_wait_is_not_the_wake(ws):
    """Attack: waiter_running is a substring test (`"proctor monitor wait" in command`), unlike
    is_monitor_wait: a running `sleep 99999 # proctor monitor wait --job feat`, or a `grep` for
    the words, is taken as the session's wake; it is never asked to start the real one, and
    nothing wakes it."""
    add_monitor(ws)
    for command in (
        "sleep 99999 # proctor monitor wait --job feat",
        "tail -f log | grep 'proctor monitor wait --job feat'",
    ):
        answer = stop(ws, tasks=[dict(WAITER, command=command)])
        assert answer.get("decision") == "block" and "Before you stop" in answer["reason"], (
            f"`{command}` was taken as the wake"
        )
        stop(ws, active=False, tasks=[WAITER])


def test_p5_no_followup_at_a_subagents_stop_nor_for_another_jobs_session(ws):
    """Probe (holds): a SubagentStop without agent_id (hosts before agent_id was sent), a Stop
    payload carrying an agent_id, a prompt of a session bound to another job and an unbound
    session's prompt get nothing of feat's follow-up, and it stays undelivered."""
    add_monitor(ws)
    fid = add_followup(ws, "FEAT-ONLY")
    answers = [
        hook(
            {
                "session_id": "s1",
                "transcript_path": "/tmp/none.jsonl",
                "cwd": ws,
                "hook_event_name": "SubagentStop",
                "stop_hook_active": False,
                "background_tasks": [],
            }
        ),
        stop(ws, agent_id="a1", agent_type="Explore"),
        event(ws, "UserPromptSubmit", session="s5", env={"BAGGAGE": "proctor.lease=other"}, prompt="x"),
        event(ws, "UserPromptSubmit", session="s6", env=None, prompt="x"),
    ]
    assert "FEAT-ONLY" not in json.dumps(answers)
    assert followup(ws, fid)[0] is None
