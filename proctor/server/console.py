"""The console's side of the server: a job's page, the actions a person takes from it, the
live stream that pushes what changed, and the one-time login links.

Live without a storm: an open tab holds one event stream, and the server pushes on it what
changed, never a "look again" that has every tab refetch everything. The board's rows are
read once per change of the store, whatever the number of tabs (Board), and each stream sends
only the rows that differ from what it sent before; a tab showing one job's page is sent that
page again when it changed. Ages are not in what is pushed (the page counts them from
`updated`), so a quiet board pushes nothing; the marks that turn with time alone (stale,
overdue) are re-read every MARKS_SECONDS.

A login link carries a code (LOGIN_CODE_SECONDS, used once) that `proctor server start` and
`proctor server status` ask for with the token, which the server serves only to a process that
works no job; the page that opens it gets the console's session cookie, as the token would.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import AsyncIterator

from proctor import errors, jobrecord

LOGIN_CODE_SECONDS = 300.0
MAX_LOGIN_CODES = 16
MARKS_SECONDS = 10.0
WATCH_SECONDS = 0.25  # how often an open stream's server looks for another process's write
COALESCE_SECONDS = 0.05  # a burst of changes is one push
PAGE_LIMITS = {"events": 200, "runs": 50, "followups": 50, "trail": 300}
ACTIONS = ("archive", "trash", "delete", "end", "move")
# what the board and the tree need of a row; the rest is on the job's page
ROW_KEYS = (
    "id",
    "parent",
    "depth",
    "state",
    "holder",
    "updated",
    "created",
    "deadline",
    "write_proof",
    "stale",
    "overdue",
    "overlaps_with",
    "notes",
    "column",
    "write_paths",
    "archived",
    "trashed",
    "read_only",
)


# -- login links -------------------------------------------------------------------------------


class LoginCodes:
    """One-time codes, each good for LOGIN_CODE_SECONDS (loop thread only)."""

    def __init__(self) -> None:
        self.codes: dict[str, float] = {}

    def issue(self) -> tuple[str, float]:
        now = time.monotonic()
        self._expire(now)
        while len(self.codes) >= MAX_LOGIN_CODES:
            del self.codes[min(self.codes, key=lambda code: self.codes[code])]
        code = secrets.token_urlsafe(24)
        self.codes[code] = now + LOGIN_CODE_SECONDS
        return code, LOGIN_CODE_SECONDS

    def redeem(self, code: str) -> bool:
        now = time.monotonic()
        self._expire(now)
        for known in list(self.codes):
            if secrets.compare_digest(known.encode(), code.encode("utf-8", "surrogateescape")):
                del self.codes[known]
                return True
        return False

    def _expire(self, now: float) -> None:
        for code, until in list(self.codes.items()):
            if until <= now:
                del self.codes[code]


# -- the board, read once per change -----------------------------------------------------------


def slim(row: dict) -> dict:
    return {key: row.get(key) for key in ROW_KEYS}


class Board:
    """The board's rows as the console pushes them, read once per (change of a job's row,
    MARKS_SECONDS) and shared by every stream: a monitor's output changes the store but no row,
    and costs a digest of the rows, not a listing."""

    def __init__(self) -> None:
        self.key: tuple[str | None, int] | None = None
        self.rows: dict[str, str] = {}  # id -> the row's JSON, as pushed
        self.order: list[str] = []
        self.meta = "{}"  # the board's columns and the overlaps, as JSON
        self.lock = asyncio.Lock()
        self.version: int | None = None  # the scheduler's version the stamp was read at
        self.stamp: str | None = None  # rows.fingerprint then

    async def current(self, state, version: int) -> "Board":
        from proctor.server import app
        from proctor.store import rows

        async with self.lock:
            if version != self.version:  # something changed: the jobs, or only a monitor's output?
                self.version = version
                self.stamp = await app._in_thread(app._reading, state, rows.fingerprint)
            key = (self.stamp, int(time.time() // MARKS_SECONDS))
            if key != self.key:
                listing = await app._in_thread(app._jobs, state)
                self.rows = {row["id"]: json.dumps(slim(row), sort_keys=True) for row in listing["jobs"]}
                self.order = [row["id"] for row in listing["jobs"]]
                self.meta = json.dumps({"board": listing["board"], "overlaps": listing["overlaps"]}, sort_keys=True)
                self.key = key
        return self


async def watch(state) -> None:
    """While a stream is open, look for another process's write every WATCH_SECONDS (the
    scheduler's own look comes every 2 s), so a fork from the CLI shows within a second."""
    scheduler = state.scheduler
    last = None
    while state.streams > 0:
        try:
            token = await scheduler.db.change_token()
            if last is not None and token != last:
                scheduler.bump()
            last = token
        except Exception:  # a busy store: the scheduler's own look reports it
            pass
        await asyncio.sleep(WATCH_SECONDS)
    state.watcher = None


def stream_body(state, request, job: str | None):
    """The generator of one tab's event stream: `jobs` (all rows first, then what changed),
    `job` (the page of `job`, whenever it changed) and keep-alives."""
    from proctor.server import app

    scheduler = state.scheduler

    async def gen() -> AsyncIterator[str]:
        sent: dict[str, str] = {}
        sent_order: list[str] | None = None
        sent_meta = None
        sent_page = None
        terms_cache: dict = {}
        yield "retry: 2000\n\n"
        first = True
        while True:
            if await request.is_disconnected():
                break
            version = scheduler.version
            board = await state.board.current(state, version)
            upsert = [text for job_id, text in board.rows.items() if sent.get(job_id) != text]
            remove = [job_id for job_id in sent if job_id not in board.rows]
            parts = []
            if upsert or remove or board.order != sent_order or board.meta != sent_meta or first:
                parts.append(f'"upsert":[{",".join(upsert)}],"remove":{json.dumps(remove)}')
                if board.order != sent_order:
                    parts.append(f'"order":{json.dumps(board.order)}')
                if board.meta != sent_meta:
                    parts.append(f'"meta":{board.meta}')
                parts.append(f'"now":{time.time():.3f},"full":{"true" if first else "false"}')
                yield f"event: jobs\ndata: {{{','.join(parts)}}}\n\n"
                sent = dict(board.rows)
                sent_order, sent_meta = list(board.order), board.meta
            if job is not None:
                try:
                    page = await app._in_thread(job_page, state, job, terms_cache)
                    text = json.dumps(page, sort_keys=True, default=str)
                except errors.ProctorError as exc:
                    text = json.dumps({"id": job, "missing": True, "error": exc.to_json()["error"]})
                if text != sent_page:
                    sent_page = text
                    yield f"event: job\ndata: {text}\n\n"
            first = False
            try:
                async with scheduler.changed:
                    if scheduler.version == version:
                        await asyncio.wait_for(scheduler.changed.wait(), timeout=MARKS_SECONDS)
            except asyncio.TimeoutError:
                yield ": keep-alive\n\n"
            await asyncio.sleep(COALESCE_SECONDS)

    return gen()


# -- a job's page ------------------------------------------------------------------------------


def job_page(state, job_id: str, terms_cache: dict | None = None) -> dict:
    """Everything the console shows of one job: its terms as `describe job` renders them, the
    filed result, the last verdict, footprint and entries, releases, every attempt, its
    monitors (each with its last run and next), its follow-ups, its monitors' latest output and
    its trail. `terms_cache` keeps the terms of an unchanged row (they read the checkout)."""
    from proctor.jobs import describe
    from proctor.jobs.model import check_job_id
    from proctor.monitors import store as mstore
    from proctor.server.app import _opened
    from proctor.store import rows
    from proctor import trail
    from proctor.workers.work import attempts_of

    check_job_id(job_id)
    with _opened(state) as ws:
        with ws.store.read() as conn:
            job = jobrecord.require(rows.get(conn, job_id), job_id)
            events = trail.events(conn, job_id)[-PAGE_LIMITS["trail"] :]
            monitors = mstore.live(conn, job_id)
            runs = mstore.runs(conn, job_id, None, PAGE_LIMITS["runs"])
            followups = mstore.followups(conn, job_id, PAGE_LIMITS["followups"])
            output = mstore.events(conn, job_id, PAGE_LIMITS["events"])
        row_text = json.dumps(job, sort_keys=True, default=str)
        if terms_cache is not None and terms_cache.get("row") == row_text:
            terms = terms_cache["terms"]
        else:
            try:
                terms = {"text": describe.describe_job(ws, job_id)}
            except errors.ProctorError as exc:
                terms = {"refused": "\n".join(exc.lines())}
            if terms_cache is not None:
                terms_cache.update(row=row_text, terms=terms)
        attempts = attempts_of(ws, job_id)
        from proctor import config as config_mod

        column = config_mod.column_of_job(ws.config, job)
        columns = [{"name": n, "active": a} for n, _s, a in ws.config.board]
    last_run: dict[int, dict] = {}
    for run in runs:
        last_run[run["monitor"]] = run  # oldest first: the last one wins
    from proctor.timeutil import iso, parse_iso

    for monitor in monitors:
        latest = last_run.get(monitor["id"])
        monitor["last"] = latest
        started = (latest or {}).get("started") or monitor.get("last_run")
        monitor["next"] = iso(parse_iso(started) + float(monitor["interval"])) if started else None
        monitor["running"] = bool(latest and not latest.get("ended"))
    for run in runs:
        if run.get("started") and run.get("ended"):
            run["duration"] = round(parse_iso(run["ended"]) - parse_iso(run["started"]), 3)
    footprint = None
    seen = job.get("observed")
    if isinstance(seen, dict):  # what the filing read in the job's checkout, as `job wait` prints it
        from proctor.jobs.verify import Observed, render_footprint

        footprint = render_footprint(
            Observed(
                seen.get("checkout") or "",
                seen.get("revision"),
                seen.get("changed") or [],
                seen.get("footprint") or {},
                seen.get("error"),
            ),
            job.get("entries") or [],
        )
        footprint.append(f"(read in {seen.get('checkout')} at {seen.get('at')})")
    public = jobrecord.public(job)
    public["column"] = column[0] if column else None
    return {
        "id": job_id,
        "job": public,
        "terms": terms,
        "result": job.get("result"),
        "verdict": job.get("verdict"),
        "footprint": footprint,
        "entries": job.get("entries") or [],
        "releases": job.get("releases") or [],
        "attempts": attempts,
        "monitors": monitors,
        "runs": list(reversed(runs)),
        "followups": list(reversed(followups)),
        "output": list(reversed(output)),
        "trail": list(reversed(events)),
        "columns": columns,
    }


# -- actions -----------------------------------------------------------------------------------


def act(state, body: dict, actor: str) -> dict:
    """One of ACTIONS on one job, as the person (no lease), by the rules the CLI follows."""
    from proctor.jobs import lease as jlease
    from proctor.jobs import take
    from proctor.jobs.model import check_job_id
    from proctor.server.app import _opened

    action, job_id = body.get("action"), body.get("job")
    if action not in ACTIONS:
        raise errors.ProctorError(
            f"action must be one of {', '.join(ACTIONS)} (a monitor is removed with DELETE /api/v1/monitors/<id>)",
            errors.BAD_ACTION,
        )
    if not isinstance(job_id, str):
        raise errors.ProctorError('name the job: {"job": ID}', errors.BAD_ACTION)
    check_job_id(job_id)
    # the server let only the person in (the token or a console session, from a process that
    # works no job): the console acts as the orchestrator, recorded as user:console
    caller = jlease.Caller(None, "orchestrator", actor)
    with _opened(state) as ws:
        if action in ("archive", "trash", "delete"):
            job = take.put_away(ws, job_id, action, caller)
        elif action == "end":
            job = take.abandon(ws, job_id, caller)
        else:
            column = body.get("column")
            if not isinstance(column, str):
                raise errors.ProctorError('name the column: {"column": NAME}', errors.BAD_ACTION)
            job = take.move(ws, job_id, column, caller)
        # off the board, ended or in a passive column: its monitors go now, not at the next look
        from proctor.monitors import store as mstore

        with ws.store.write() as conn:
            pruned = mstore.prune(conn, ws.config)
    return {
        "job": job_id,
        "action": action,
        "state": (job or {}).get("state"),
        "deleted": job is None,
        "monitors_deleted": [monitor_id for monitor_id, _why in pruned],
    }
