"""The activity trail's table, `events`: one row per thing that happened. Only this module
writes it; proctor/trail.py shapes what goes in (inline JSON or a blob reference)."""

from __future__ import annotations

import json

from proctor.store import Tx

_COLUMNS = "id, time, kind, actor, job, data, blob"


def add(tx: Tx, time: str, kind: str, actor: str, job: str | None, data: str | None, blob: str | None) -> int:
    """Append one event; return its id."""
    return tx.insert(
        "INSERT INTO events (time, kind, actor, job, data, blob) VALUES (?, ?, ?, ?, ?, ?)",
        (time, kind, actor, job, data, blob),
    )


def select(tx: Tx, job: str | None = None, kind: str | None = None) -> list[dict]:
    """Events of `job` and/or of `kind`, oldest first, their data parsed."""
    clauses, params = [], []
    if job is not None:
        clauses.append("job = ?")
        params.append(job)
    if kind is not None:
        clauses.append("kind = ?")
        params.append(kind)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = tx.all(f"SELECT {_COLUMNS} FROM events {where} ORDER BY id", params)
    return [
        {
            "id": r[0],
            "time": r[1],
            "kind": r[2],
            "actor": r[3],
            "job": r[4],
            "data": json.loads(r[5]) if r[5] else None,
            "blob": r[6],
        }
        for r in rows
    ]


def recent(tx: Tx, kind: str, limit: int) -> list[tuple[str | None, str | None]]:
    """(job, data as stored) of the newest `limit` events of `kind`, newest first."""
    return [
        (r[0], r[1])
        for r in tx.all("SELECT job, data FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?", (kind, int(limit)))
    ]


def last_time(tx: Tx, job: str, kind: str) -> str | None:
    """The time of `job`'s newest event of `kind`, or None."""
    row = tx.one("SELECT time FROM events WHERE job = ? AND kind = ? ORDER BY id DESC LIMIT 1", (job, kind))
    return row[0] if row else None
