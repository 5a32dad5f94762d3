"""The activity trail: one table of events, and the content-addressed blobs they point to.

Every capability appends here (job forks and ends now; spawns, verdicts, worker claims and
monitor events later). A payload larger than INLINE_LIMIT is written once as a blob named by
its sha256 and the event carries only the reference, so a kilobytes-long prompt or a 50 MB
check output costs the table one short row. The SQL is store/events.py's, the blobs
store/blobs.py's (files beside an embedded store, a table of a PostgreSQL one).
"""

from __future__ import annotations

import json

from proctor.store import Tx, blobs
from proctor.store import events as event_rows
from proctor.timeutil import iso, now

INLINE_LIMIT = 4096
REF_PREFIX = blobs.REF_PREFIX


def _blob_home(conn, state_dir: str | None):
    """Where `append` keeps a payload: the state directory given, on the embedded store (as it
    always has), else the store `conn` is open on."""
    if state_dir and getattr(conn, "dialect", "sqlite") == "sqlite":
        return state_dir
    return conn


def append(
    conn: Tx,
    state_dir: str | None,
    kind: str,
    actor: str,
    job: str | None = None,
    data: dict | None = None,
    payload: bytes | None = None,
    when: float | None = None,
) -> int:
    """Append one event inside the caller's write transaction; return its id. `state_dir` is
    where an embedded store keeps its blobs (None: the store `conn` is open on)."""
    home = _blob_home(conn, state_dir)
    blob = blobs.put(home, payload) if payload is not None else None
    text = json.dumps(data, sort_keys=True, separators=(",", ":")) if data is not None else None
    if text is not None and len(text) > INLINE_LIMIT and blob is None:
        blob = blobs.put(home, text.encode())
        text = json.dumps({"blob": True}, separators=(",", ":"))
    return event_rows.add(conn, iso(when if when is not None else now()), kind, actor, job, text, blob)


def events(conn: Tx, job: str | None = None, kind: str | None = None) -> list[dict]:
    return event_rows.select(conn, job, kind)
