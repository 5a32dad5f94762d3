"""The store's content read (or set up) as a test's oracle, beside proctor's own store code:
sqlite3 on `<state>/proctor.db`, or, with PROCTOR_STORE_URL set to a postgresql URL (the
PostgreSQL pass, tests/conftest.py), psycopg on the repository's schema.

    conn = connect(state_dir_or_db_path, timeout=30)   # sqlite3.connect's keywords pass through
    conn.execute("SELECT doc FROM jobs WHERE id = ?", (job,)).fetchone()
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3

from proctor.store.postgres import schema_name  # a pure function of the directory's name

_TOKEN = re.compile(r"'(?:[^']|'')*'|\?|%")


def _pg_sql(sql: str) -> str:
    """`?` → `%s` outside string literals, every literal `%` doubled."""
    return _TOKEN.sub(
        lambda m: m.group(0).replace("%", "%%") if m.group(0)[0] == "'" else "%s" if m.group(0) == "?" else "%%", sql
    )


class _Postgres:
    def __init__(self, url: str, schema: str, read_only: bool) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute(psycopg.sql.SQL("SET search_path TO {}").format(psycopg.sql.Identifier(schema)))
        if read_only:
            self._conn.execute("SET default_transaction_read_only = on")

    def execute(self, sql: str, params=()):
        return self._conn.execute(_pg_sql(sql), tuple(params))

    def executemany(self, sql: str, seq) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(_pg_sql(sql), [tuple(params) for params in seq])

    def commit(self) -> None:  # autocommit
        pass

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):  # as sqlite3's: the block commits (here, each statement did); no close
        return self

    def __exit__(self, *exc) -> None:
        pass


def _state(where) -> str:
    where = os.fspath(where)
    return os.path.dirname(where) if os.path.basename(where) == "proctor.db" else where


def _postgresql() -> str | None:
    url = os.environ.get("PROCTOR_STORE_URL", "")
    return url if url.startswith(("postgresql:", "postgres:")) else None


def connect(where: str, read_only: bool = False, **kw):
    """`where`: a repository's state directory, or its proctor.db. `read_only` opens SQLite's
    file with mode=ro; other keywords (timeout, isolation_level, ...) go to sqlite3.connect."""
    state = _state(where)
    if _postgresql():
        return _Postgres(_postgresql(), schema_name(state), read_only)
    db = os.path.join(state, "proctor.db")
    if read_only:
        return sqlite3.connect(f"file:{db}?mode=ro", uri=True, **kw)
    return sqlite3.connect(db, **kw)


def store_size(where) -> int:
    """The bytes the store takes: SQLite's file and its -wal; the schema's tables, their
    indexes and TOAST on PostgreSQL."""
    if not _postgresql():
        db = os.path.join(_state(where), "proctor.db")
        return os.path.getsize(db) + (os.path.getsize(db + "-wal") if os.path.exists(db + "-wal") else 0)
    with contextlib.closing(connect(where)) as conn:
        return int(
            conn.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()[0]
        )


# Blobs (store/blobs.py): files `<state>/blobs/<2 hex>/<62 hex>` beside SQLite's file, rows of
# the `blobs` table on PostgreSQL.


def _blob_file(where, ref: str) -> str:
    digest = ref.split(":", 1)[1]
    return os.path.join(_state(where), "blobs", digest[:2], digest[2:])


def read_blob(where, ref: str) -> bytes:
    if not _postgresql():
        with open(_blob_file(where, ref), "rb") as handle:
            return handle.read()
    with contextlib.closing(connect(where)) as conn:
        row = conn.execute("SELECT data FROM blobs WHERE ref = ?", (ref,)).fetchone()
    assert row is not None, f"no blob {ref}"
    return bytes(row[0])


def write_blob(where, ref: str, data: bytes) -> None:
    """Overwrite a blob's bytes, its name kept (an altered output)."""
    if not _postgresql():
        with open(_blob_file(where, ref), "wb") as handle:
            handle.write(data)
        return
    with contextlib.closing(connect(where)) as conn:
        assert conn.execute("UPDATE blobs SET data = ? WHERE ref = ?", (data, ref)).rowcount == 1, ref


def remove_blob(where, ref: str) -> None:
    if not _postgresql():
        os.remove(_blob_file(where, ref))
        return
    with contextlib.closing(connect(where)) as conn:
        assert conn.execute("DELETE FROM blobs WHERE ref = ?", (ref,)).rowcount == 1, ref
