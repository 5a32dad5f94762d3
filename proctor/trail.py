"""The activity trail: one table of events, and the content-addressed blobs they point to.

Every capability appends here (job forks and ends now; spawns, verdicts, worker claims and
monitor events later). A payload larger than INLINE_LIMIT is written once as a blob file
named by its sha256 and the event carries only the reference, so a kilobytes-long prompt or
a 50 MB check output costs the table one short row.
"""

from __future__ import annotations

import json
import os
import sqlite3

from proctor.errors import ProctorError
from proctor.timeutil import iso, now

INLINE_LIMIT = 4096
REF_PREFIX = "sha256:"


def blob_dir(state_dir: str) -> str:
    return os.path.join(state_dir, "blobs")


def blob_path(state_dir: str, ref: str) -> str:
    if not ref.startswith(REF_PREFIX):
        raise ProctorError(f"{ref!r} is not a blob reference (sha256:<hex>)")
    digest = ref[len(REF_PREFIX):]
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ProctorError(f"{ref!r} is not a blob reference (sha256:<64 hex digits>)")
    return os.path.join(blob_dir(state_dir), digest[:2], digest[2:])


def put_blob(state_dir: str, data: bytes) -> str:
    """Store `data` once; return its reference. Writing the same bytes twice is free."""
    import hashlib

    ref = REF_PREFIX + hashlib.sha256(data).hexdigest()
    path = blob_path(state_dir, ref)
    if os.path.exists(path):
        return ref
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return ref


class BlobWriter:
    """Stream bytes into the blob store: hashed as they arrive, named by their digest at the end."""

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        import hashlib

        self.size = 0
        self._hash = hashlib.sha256()
        directory = blob_dir(state_dir)
        os.makedirs(directory, exist_ok=True)
        self._tmp = os.path.join(directory, f".tmp-{os.getpid()}-{os.urandom(6).hex()}")
        self._handle = open(self._tmp, "xb")

    def write(self, data: bytes) -> None:
        self._hash.update(data)
        self._handle.write(data)
        self.size += len(data)

    def close(self) -> str:
        """Finish the blob; return its reference."""
        self._handle.close()
        ref = REF_PREFIX + self._hash.hexdigest()
        path = blob_path(self.state_dir, ref)
        if os.path.exists(path):
            os.unlink(self._tmp)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.replace(self._tmp, path)
        return ref

    def abandon(self) -> None:
        self._handle.close()
        try:
            os.unlink(self._tmp)
        except OSError:
            pass


def adopt_blob(state_dir: str, path: str) -> str:
    """Move the file at `path` into the blob store (a stream written as it arrived); return its
    reference. The file is read once to hash it, then renamed, never copied."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    ref = REF_PREFIX + digest.hexdigest()
    target = blob_path(state_dir, ref)
    if os.path.exists(target):
        os.unlink(path)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(path, target)
    return ref


def has_blob(state_dir: str, ref: str) -> bool:
    try:
        return os.path.exists(blob_path(state_dir, ref))
    except ProctorError:
        return False


def get_blob(state_dir: str, ref: str) -> bytes:
    path = blob_path(state_dir, ref)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise ProctorError(f"blob {ref} is not in the store ({path} is missing)") from None


def append(
    conn: sqlite3.Connection,
    state_dir: str,
    kind: str,
    actor: str,
    job: str | None = None,
    data: dict | None = None,
    payload: bytes | None = None,
    when: float | None = None,
) -> int:
    """Append one event inside the caller's write transaction; return its id."""
    blob = put_blob(state_dir, payload) if payload is not None else None
    text = json.dumps(data, sort_keys=True, separators=(",", ":")) if data is not None else None
    if text is not None and len(text) > INLINE_LIMIT and blob is None:
        blob = put_blob(state_dir, text.encode())
        text = json.dumps({"blob": True}, separators=(",", ":"))
    cursor = conn.execute(
        "INSERT INTO events (time, kind, actor, job, data, blob) VALUES (?, ?, ?, ?, ?, ?)",
        (iso(when if when is not None else now()), kind, actor, job, text, blob),
    )
    return int(cursor.lastrowid)


def events(conn: sqlite3.Connection, job: str | None = None, kind: str | None = None) -> list[dict]:
    clauses, params = [], []
    if job is not None:
        clauses.append("job = ?")
        params.append(job)
    if kind is not None:
        clauses.append("kind = ?")
        params.append(kind)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = conn.execute(
        f"SELECT id, time, kind, actor, job, data, blob FROM events {where} ORDER BY id", params
    ).fetchall()
    return [
        {
            "id": r[0], "time": r[1], "kind": r[2], "actor": r[3], "job": r[4],
            "data": json.loads(r[5]) if r[5] else None, "blob": r[6],
        }
        for r in rows
    ]
