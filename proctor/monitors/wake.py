"""Waking an idle agent with its job's follow-up, and knowing when the model has it.

A follow-up is delivered only once it is in the model's context. Three ways get it there:

- the Stop hook refuses the stop with the follow-up as its reason (Claude Code hands a
  block's reason to the model): delivered then;
- the person's next prompt carries it (UserPromptSubmit's additionalContext): delivered then;
- `proctor monitor wait`, started by the agent as a background task, blocks until the job
  has a follow-up ready and the session is idle, prints it and exits: the host wakes the
  idle session with a task notification, and the model reads the task's output. The wait
  records that it printed it (`printed`, `printed_to`); it counts as delivered once the
  session's transcript shows the model was given that output (the follow-up's header in a
  tool result), which the next Stop checks, and otherwise the Stop hands it over itself.

The Stop hook also asks for the wait: a session whose job has live monitors and no wait
among its background tasks is refused its stop once with the command to start. Refusals in a
row are bounded (MAX_STOP_BLOCKS, counted by the hook per session, reset by any stop let
through): a monitor that prints every ten seconds cannot keep a session from ever stopping;
past the bound the stop goes through and the wait takes over.

Only the standard library and the store: the hook imports this at Stop.
"""

from __future__ import annotations

import json
import os

from proctor.store import sessions as _sessions
from proctor.store.followups import mark_delivered  # noqa: F401  (the one writer of "delivered")
from proctor.store.followups import mark_printed  # noqa: F401  (claims a follow-up for a wait)
from proctor.store.followups import undelivered  # noqa: F401
from proctor import jobrecord

MAX_STOP_BLOCKS = 3
WAIT_WORDS = "proctor monitor wait"


def header(followup_id: int, job: str) -> str:
    """The words every follow-up's text starts with (store/followups.py writes them)."""
    return f"Follow-up {followup_id} from the monitors of job {job}"


def wait_command(job: str, host: str | None, session: str | None) -> str:
    import shlex

    words = [WAIT_WORDS, "--job", shlex.quote(job)]
    if session:
        words += ["--host", shlex.quote(host or "claude"), "--session", shlex.quote(session)]
    return " ".join(words)


def ask_text(job: str, live: int, host: str | None, session: str | None) -> str:
    command = wait_command(job, host, session)
    return (
        f"Job {job} has {live} monitor{'s' if live != 1 else ''} running. Before you stop, start "
        f"`{command}` as a background task (Bash with run_in_background: true). It waits until their next "
        f"follow-up is ready and you are idle, prints it and exits; its completion wakes you: read its output "
        f"and act on what the monitors saw. When the job needs them no more, remove them "
        f"(proctor monitor list; proctor monitor remove <id>)."
    )


def live_monitors(conn, job: str) -> int:
    from proctor.store.monitors import count_live

    try:
        return count_live(conn, job)
    except Exception:  # a store older than monitors
        return 0


HOOK_TEXT_CAP = 9000  # Claude Code cuts a hook's string past 10,000 characters to a preview


def fits_a_hook(text: str, extra: int = 0) -> bool:
    return len(text) + extra <= HOOK_TEXT_CAP


def too_long_text(followup: dict, job: str) -> str:
    return (
        f"{header(followup['id'], job)} is ready ({followup.get('events', '?')} events, {len(followup['text'])} "
        f"characters: more than a hook's message carries). Read it whole with Bash: `proctor monitor followups "
        f"--text {followup['id']}`, and act on what the monitors saw."
    )


_WAIT_OPTIONS = {
    "--job": "job",
    "--host": "host",
    "--session": "session",
    "--timeout": "timeout",
    "-o": "output",
    "--output": "output",
}


def parse_wait(command) -> dict | None:
    """The options of a plain `proctor monitor wait` command, or None for anything else: one
    simple command, nothing chained, piped, redirected, substituted or expanded (outside single
    quotes no `$`, backquote or backslash-newline), and only the wait's own options. What
    proctor itself prints in its ask (any session id, quoted) parses."""
    import shlex

    if not isinstance(command, str) or not command.strip() or "\n" in command.strip():
        return None
    quoted = False
    for char in command:
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "$`":
            return None
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return None
    if words[:3] != ["proctor", "monitor", "wait"]:
        return None
    options: dict = {}
    rest = words[3:]
    while rest:
        word = rest.pop(0)
        name, eq, value = word.partition("=")
        if name not in _WAIT_OPTIONS or (not eq and not rest):
            return None  # an operator token (;, |, &&, >) or an option the wait does not take
        if not eq:
            value = rest.pop(0)
        if not value or set(value) <= set(";&|()<>"):
            return None
        options[_WAIT_OPTIONS[name]] = value
    # punctuation a token carries unquoted (`feat;`) was split off by the lexer and refused
    # above; what is left is the argv bash would run
    return options


def waiter_running(background_tasks, job: str, host: str | None = None, session: str | None = None) -> bool:
    """Whether the Stop payload's background tasks include a running `proctor monitor wait`
    for this job, held for this session when one is named (Claude Code lists each task with
    its command). A wait for another job, another session, or a command that only mentions
    the wait, is not this session's wake."""
    if not isinstance(background_tasks, list):
        return False
    for task in background_tasks:
        if not isinstance(task, dict) or task.get("status") not in (None, "running"):
            continue
        options = parse_wait(task.get("command"))
        if options is None or options.get("job") != job:
            continue
        if session and (options.get("session") != session or options.get("host", "claude") != (host or "claude")):
            continue
        return True
    return False


TRANSCRIPT_READ_CAP = 64 << 20


def read_by_model(transcript: str | None, followups: dict[int, tuple[str, str]]) -> set[int]:
    """The follow-ups ({id: (header, text)}) whose every line the model was given, in the
    results of the main thread's tool calls from the one that first shows the header on: the
    wait's output read whole, or in parts. Never what the model wrote itself, a subagent's
    reads, what only the person saw (hook messages), or a read cut short (`head`, a Read that
    truncates a long line): a line missing is a follow-up not delivered."""
    if not transcript or not followups:
        return set()
    needed = {
        fid: {line.rstrip() for line in text.splitlines() if line.strip()} for fid, (_h, text) in followups.items()
    }
    marks = {
        fid: json.dumps(header, ensure_ascii=False)[1:-1].encode("utf-8") for fid, (header, _t) in followups.items()
    }
    started: set[int] = set()
    done: set[int] = set()
    try:
        size = os.path.getsize(transcript)
        with open(transcript, "rb") as handle:
            if size > TRANSCRIPT_READ_CAP:
                handle.seek(size - TRANSCRIPT_READ_CAP)
            for line in handle:
                started.update(fid for fid, mark in marks.items() if fid not in started and mark in line)
                if not started - done or b'"tool_result"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                text = _tool_result_text(record)
                if text is None:
                    continue
                for fid in started - done:
                    needed[fid] = {want for want in needed[fid] if want not in text}
                    if not needed[fid]:
                        done.add(fid)
                if done == set(followups):
                    break
    except OSError:
        return done
    return done


def _tool_result_text(record) -> str | None:
    """The text of the tool results in a main-thread user line, or None."""
    if not isinstance(record, dict) or record.get("type") != "user":
        return None
    if record.get("isSidechain") is True or record.get("agentId"):
        return None
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return None
    parts = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        inner = block.get("content")
        if isinstance(inner, str):
            parts.append(inner)
        elif isinstance(inner, list):
            parts.extend(b.get("text", "") for b in inner if isinstance(b, dict) and isinstance(b.get("text"), str))
    return "\n".join(parts) if parts else None


def session_state(conn, host: str, session: str, checkout=None) -> tuple[str | None, str | None]:
    """(activity, since) of a session's main thread, as its hook last recorded it: in the store,
    or in the session's activity file when the hook could not write the store (another writer
    held it) and that is newer."""
    try:
        row = _sessions.activity(conn, host, session)
    except Exception:
        row = None
    best = (row[0], row[1]) if row else (None, None)
    if checkout is not None:
        try:
            with open(activity_path(checkout, host, session), encoding="utf-8") as handle:
                spilled = json.load(handle)
            if (
                isinstance(spilled, dict)
                and isinstance(spilled.get("at"), str)
                and (best[1] is None or spilled["at"] > best[1])
            ):
                best = (spilled.get("activity"), spilled["at"])
        except (OSError, ValueError):
            pass
    return best


def activity_path(checkout, host: str, session: str) -> str:
    """Where the hook spills a session's activity when the store is held past its wait."""
    import zlib

    from proctor.paths import repo_cache_dir

    key = f"{host}:{session or '-'}:"
    return os.path.join(
        repo_cache_dir(checkout), "sessions", f"activity-{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}.json"
    )


def spill_activity(checkout, host: str, session: str, activity: str, at: str) -> None:
    from proctor.paths import write_atomic

    path = activity_path(checkout, host, session)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps({"activity": activity, "at": at}))


def stop_blocks(conn, host: str, session: str) -> int:
    try:
        return _sessions.stop_blocks(conn, host, session)
    except Exception:
        return 0


# -- proctor monitor wait ---------------------------------------------------------------------

NOTHING_LEFT, TIMED_OUT = 3, 4
POLL_SECONDS = 0.5


def job_to_wait(ws, job: str | None) -> str:
    """The job a `proctor monitor wait` waits on: the one named, else the caller's lease. A
    caller under a lease waits for its own job's follow-ups only (NOT_YOUR_JOB); an unleased
    caller names the job."""
    from proctor import errors
    from proctor.jobs.lease import resolve

    with ws.store.read() as conn:
        caller = resolve(conn, ws.root)
    if caller.lease and job and job != caller.lease:
        raise errors.Refused(
            [
                (
                    errors.NOT_YOUR_JOB,
                    f"{caller.whence()}; you wait for your own job's follow-ups (--job {caller.lease}){caller.remedy()}",
                )
            ]
        )
    job = job or caller.lease
    if not job:
        raise errors.ProctorError("name the job (--job ID): you act under no lease")
    return job


def wait(
    ws, job: str, host: str | None, session: str | None, timeout: float | None, clock=None, sleep=None
) -> tuple[int, dict | None, str]:
    """Block until `job` has a follow-up not delivered and not yet printed for this reader (the
    session, when named, else anyone) and the session is idle; claim it printed for that
    reader and return (0, follow-up, ""). Returns (NOTHING_LEFT, None, why) once there is
    nothing left to wait for (the job is gone, ended, archived or trashed, or has neither
    live monitors nor a follow-up to come), (TIMED_OUT, None, why) after `timeout` seconds.
    Reads the store when it changed (its change_token), and every few seconds regardless."""
    import time

    from proctor.monitors.store import job_is_active
    from proctor.store import followups, rows

    reader = f"{host or 'claude'}:{session}" if session else "-"
    clock = clock or time.monotonic
    sleep = sleep or time.sleep
    deadline = None if timeout is None else clock() + timeout
    version = None
    last_look = 0.0
    while True:
        found = None
        now_version = ws.store.change_token()  # before the snapshot: a change after it is seen next time
        with ws.store.read() as conn:
            look = now_version != version or clock() - last_look >= 5
            if look:
                version, last_look = now_version, clock()
                if not os.path.isdir(ws.root):
                    return NOTHING_LEFT, None, f"the checkout {ws.root} is gone"
                row = rows.get(conn, job)
                if row is None:
                    return NOTHING_LEFT, None, f"no job {job}"
                if not jobrecord.is_live(row["state"]):
                    return NOTHING_LEFT, None, f"job {job} has ended ({row.get('state')})"
                if not job_is_active(ws.config, row):
                    return (
                        NOTHING_LEFT,
                        None,
                        (f"job {job} is archived, trashed or in a passive column: its monitors are deleted"),
                    )
                # what no wait printed for this reader yet (a person's wait does not use up a session's)
                found = followups.next_unprinted(conn, job, reader)
                if found is None:
                    coming = live_monitors(conn, job) or followups.has_pending(conn, job)
                    if not coming:
                        return NOTHING_LEFT, None, f"job {job} has no live monitors and no follow-up to come"
                elif session:
                    activity, _since = session_state(conn, host or "claude", session, ws.checkout)
                    if activity not in (None, "idle"):
                        found = None  # held while the session works or waits for the person
        if found is not None:
            with ws.store.write() as conn:
                taken = mark_printed(conn, found["id"], reader)
            if taken:
                return 0, {**found, "job": job}, ""
            version = None  # another wait took it first: look again at once
            continue
        if deadline is not None and clock() >= deadline:
            return TIMED_OUT, None, f"no follow-up for job {job} within {timeout:g}s"
        sleep(POLL_SECONDS)
