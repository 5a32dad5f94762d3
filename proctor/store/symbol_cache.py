"""The symbol index's cache (`symbols.db`): a SQLite file of its own, apart from the store, that
proctor.symbols.index reads and writes through this class alone.

It keeps, per file content (its git blob id, the language, the grammar's version), what the
content defines (`defs`, JSON text) and the names it holds (`names`: one row per name, its
lines), and per checkout the stat data of its files (`seen`, JSON text). What the rows mean is
the index's; here is only how they are kept.

A file written under another `layout` (the caller's number for its way of writing rows) is
emptied, never read as this one's. A file that cannot be opened gives None; a read or a write
that fails raises `CacheError` (sqlite3.Error), and the caller works around the cache from
then on (it is never trusted to answer).
"""

from __future__ import annotations

import sqlite3

CacheError = sqlite3.Error

SCHEMA = """
CREATE TABLE IF NOT EXISTS summaries (blob TEXT NOT NULL, language TEXT NOT NULL, version TEXT NOT NULL,
    defs TEXT NOT NULL, error TEXT, PRIMARY KEY (blob, language, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS names (blob TEXT NOT NULL, language TEXT NOT NULL, version TEXT NOT NULL,
    name TEXT NOT NULL, lines TEXT NOT NULL, PRIMARY KEY (blob, name, language, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen (checkout TEXT NOT NULL PRIMARY KEY, paths BLOB NOT NULL);
"""

CHUNK = 400  # blobs per query: under any build's limit on a statement's parameters


class SymbolCache:
    """One open `symbols.db`. Use `SymbolCache.open(path, layout)`."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    @classmethod
    def open(cls, path: str, layout: int) -> SymbolCache | None:
        """The cache at `path`, emptied first when another layout wrote it; None when it cannot
        be opened (or made, or emptied)."""
        db = None
        try:
            db = sqlite3.connect(path, timeout=5, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if db.execute("PRAGMA user_version").fetchone()[0] != layout:
                # another version's cache: dropped, never read as this one's
                db.executescript(
                    "DROP TABLE IF EXISTS summaries; DROP TABLE IF EXISTS names; "
                    "DROP TABLE IF EXISTS seen;" + SCHEMA + f"PRAGMA user_version = {int(layout)};"
                )
            return cls(db)
        except (OSError, sqlite3.Error):
            if db is not None:
                try:
                    db.close()
                except sqlite3.Error:
                    pass
            return None

    def close(self) -> None:
        try:
            self._db.close()
        except sqlite3.Error:
            pass

    # -- summaries -------------------------------------------------------------------------------

    def get(
        self, blob: str, language: str, version: str, names: list[str] | None = None
    ) -> tuple[str, str | None, list[tuple[str, str]]] | None:
        """(defs, error, [(name, lines)]) kept for one content, or None when none is; with
        `names`, the name rows of those names only."""
        key = (blob, language, version)
        row = self._db.execute(
            "SELECT defs, error FROM summaries WHERE blob = ? AND language = ? AND version = ?", key
        ).fetchone()
        if not row:
            return None
        if names is None:
            found = self._db.execute(
                "SELECT name, lines FROM names WHERE blob = ? AND language = ? AND version = ?", key
            ).fetchall()
        else:
            found = [
                r
                for n in names
                for r in self._db.execute(
                    "SELECT name, lines FROM names WHERE blob = ? AND language = ? AND version = ? AND name = ?",
                    key + (n,),
                )
            ]
        return row[0], row[1], found

    def put(
        self, blob: str, language: str, version: str, defs: str, error: str | None, names: list[tuple[str, str]]
    ) -> None:
        """Keep one content's summary and its (name, lines) rows, in one transaction."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?)", (blob, language, version, defs, error)
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO names VALUES (?, ?, ?, ?, ?)",
                [(blob, language, version, n, lines) for n, lines in names],
            )

    def many(
        self, blobs: list[str], names: list[str]
    ) -> tuple[list[tuple[str, str, str, str | None]], list[tuple[str, str, str, str, str]]]:
        """For `blobs` at once: (blob, language, version, error) of each summary kept (not its
        defs), and (blob, language, version, name, lines) of the rows of `names`."""
        summaries: list = []
        rows: list = []
        for at in range(0, len(blobs), CHUNK):
            chunk = blobs[at : at + CHUNK]
            marks = ",".join("?" * len(chunk))
            summaries.extend(
                self._db.execute(f"SELECT blob, language, version, error FROM summaries WHERE blob IN ({marks})", chunk)
            )
            rows.extend(
                self._db.execute(
                    f"SELECT blob, language, version, name, lines FROM names WHERE blob IN ({marks}) AND name IN "
                    f"({','.join('?' * len(names))})",
                    chunk + names,
                )
            )
        return summaries, rows

    # -- the stat data of a checkout's files -----------------------------------------------------

    def seen(self, checkout: str) -> str | bytes | None:
        """What `see` kept for `checkout`, or None."""
        row = self._db.execute("SELECT paths FROM seen WHERE checkout = ?", (checkout,)).fetchone()
        return row[0] if row else None

    def see(self, checkout: str, paths: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO seen VALUES (?, ?)", (checkout, paths))
