"""The store: one database per repository, and the only package that opens it or writes SQL.

Two engines behind one interface. Unset, the store is an embedded SQLite database shared by
every worktree and clone of the repository on this machine (see paths.py). `[store] url =
"postgresql://..."` in proctor.toml, or PROCTOR_STORE_URL, selects PostgreSQL (postgres.py):
one schema per repository, keyed like the SQLite file by the root commit every clone shares,
so agents on several machines work one set of jobs.

Callers hold a `Tx` (a transaction, or the store's own autocommit handle) and pass it to the
verbs of the table modules (rows, runs, events, sessions, monitors, followups, blobs); SQL is
written there, in the subset both engines read (`?` placeholders, `ON CONFLICT`, no rowid),
and nowhere else. `symbol_cache` is the one module here that is not the store: the symbol
index's cache (`symbols.db`), a SQLite file of its own that proctor.symbols.index calls.

The SQLite engine:
WAL mode, `isolation_level=None`, and every write inside `BEGIN IMMEDIATE` under a sidecar
flock: Python's implicit transactions lose concurrent updates, and a plain BEGIN fails with
SQLITE_BUSY when two writers upgrade at once (DESIGN.md has the measurements). Readers take
a deferred transaction so each command sees one snapshot.

Schema changes are forward migrations numbered by `PRAGMA user_version`; a store written by
a newer proctor is refused rather than guessed at.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import time
from collections.abc import Callable, Iterator  # sqlite3 imports it already: free on the hook's path

from proctor.errors import StoreError
from proctor.store.schema import MIGRATIONS, SCHEMA_VERSION

DB_NAME = "proctor.db"
DEFAULT_BUSY_SECONDS = 10.0
URL_ENV = "PROCTOR_STORE_URL"


class DatabaseError(StoreError):
    """A statement the engine refused or could not run (a damaged page, a lost connection, a
    constraint); the message is the engine's, translated into what to do."""


class NoStore(StoreError):
    """The repository has no store on this engine yet (the guard never makes one)."""


class Tx:
    """A handle on the store for the verbs: a write or read transaction, or (`Store.tx`) the
    store's own autocommit handle. `dialect` is "sqlite" or "postgresql"."""

    __slots__ = ("_conn", "store", "dialect")

    def __init__(self, conn, store) -> None:
        self._conn = conn
        self.store = store
        self.dialect = "sqlite"

    def execute(self, sql: str, params=()):
        try:
            return self._conn.execute(sql, params)
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(str(self.store._translate(exc))) from exc

    def executemany(self, sql: str, seq) -> None:
        try:
            self._conn.executemany(sql, seq)
        except sqlite3.DatabaseError as exc:
            raise DatabaseError(str(self.store._translate(exc))) from exc

    def insert(self, sql: str, params=()) -> int:
        """Run an INSERT into a table whose key is `id`; return the new row's id."""
        return int(self.execute(sql, params).lastrowid)

    def one(self, sql: str, params=()):
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params=()) -> list:
        return self.execute(sql, params).fetchall()

    def scalar(self, sql: str, params=(), default=None):
        row = self.execute(sql, params).fetchone()
        return default if row is None or row[0] is None else row[0]

    def json_text(self, column: str, key: str) -> str:
        """An SQL expression for the text of `column`'s JSON member `key` (a literal key)."""
        return f"json_extract({column}, '$.{key}')"


def configured_url(root: str | None) -> str | None:
    """The store URL for a checkout: PROCTOR_STORE_URL, else `[store] url` in its proctor.toml,
    else None (the embedded SQLite store). Cheap enough for the hook: the file is parsed only
    when it mentions a [store] table."""
    url = os.environ.get(URL_ENV)
    if url:
        return url
    pinned = os.environ.get("PROCTOR_STORE_URL_FILE")  # a worker's pinned hook (workers/executors)
    if pinned:
        try:
            with open(pinned, encoding="utf-8") as handle:
                return handle.read().strip() or None
        except OSError:
            return None
    if not root:
        return None
    try:
        with open(os.path.join(root, "proctor.toml"), "rb") as handle:
            raw = handle.read(1 << 20)
    except OSError:
        return None
    if b"[store" not in raw and b"store." not in raw and b"store =" not in raw and b"store=" not in raw:
        return None  # no [store] table: tomllib is not loaded on the hook's path
    import tomllib

    try:
        value = tomllib.loads(raw.decode("utf-8")).get("store", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, AttributeError):
        return None
    url = value.get("url") if isinstance(value, dict) else None
    return url if isinstance(url, str) and url else None


def is_postgres(url: str | None) -> bool:
    """`sqlite:` names the embedded store explicitly (over PROCTOR_STORE_URL, e.g. to migrate)."""
    if not url:
        return False
    return url.split(":", 1)[0] in ("postgresql", "postgres")


def open_store(
    state_dir: str,
    url: str | None = None,
    busy_seconds: float | None = None,
    for_guard: bool = False,
    root: str | None = None,
):
    """The repository's store on the engine its configuration selects (see configured_url)."""
    url = url or configured_url(root)
    if url and not url.startswith("sqlite"):
        if not is_postgres(url):
            raise StoreError(
                f"the store URL {redact(url)} is not postgresql://...; set [store] url in "
                f"proctor.toml (or {URL_ENV}) to a PostgreSQL URL, or unset it for the embedded store"
            )
        from proctor.store.postgres import PgStore

        return PgStore(state_dir, url, busy_seconds=busy_seconds, for_guard=for_guard)
    return Store(state_dir, busy_seconds=busy_seconds, for_guard=for_guard, url="sqlite:")


def redact(url: str) -> str:
    """A URL as it may be shown: its password replaced by ***, wherever it is written (user:pw@,
    with an @ of its own inside, or ?password=). Too much hidden beats a password shown."""
    import re

    scheme, sep, rest = url.partition("://")
    if sep:
        at = rest.rfind("@")
        if at > 0 and ":" in rest[:at]:
            rest = rest[:at].split(":", 1)[0] + ":***" + rest[at:]
        url = scheme + sep + rest
    return re.sub(r"(?i)([?&](?:ssl)?password=)[^&]*", r"\1***", url)


# A bound on every store wait, under PROCTOR_BUSY_TIMEOUT's: a callable the MCP door installs
# (its context variable's get; mcp_server.py), so the library calls it makes for a request wait
# no longer than the API's STORE_SECONDS. None elsewhere, and the hook never loads contextvars.
busy_limit: Callable[[], float | None] | None = None


def _busy_seconds() -> float:
    limit = busy_limit() if busy_limit is not None else None
    if limit is not None:
        return min(limit, _configured_busy_seconds())
    return _configured_busy_seconds()


def _configured_busy_seconds() -> float:
    raw = os.environ.get("PROCTOR_BUSY_TIMEOUT")
    if raw:
        try:
            return max(0.0, float(raw))
        except ValueError:
            pass
    return DEFAULT_BUSY_SECONDS


class Store:
    """A handle on one repository's database. Cheap to open; one per command.

    `busy_seconds` bounds every wait for another writer (default: PROCTOR_BUSY_TIMEOUT, else
    10 s). The guard's hook opens with `for_guard=True`: a short wait, and a store it cannot
    write (a read-only file or directory, a `-shm` it may not touch, a schema it would have to
    migrate) is opened read-only instead, so the guard still reads the jobs it judges against;
    `self.writable` then says its records are skipped.
    """

    dialect = "sqlite"
    engine = "sqlite"

    def __new__(
        cls, state_dir: str, busy_seconds: float | None = None, for_guard: bool = False, url: str | None = None
    ):
        url = url or os.environ.get(URL_ENV)
        if cls is Store and url and not url.startswith("sqlite"):
            return open_store(state_dir, url, busy_seconds, for_guard)
        return super().__new__(cls)

    def __init__(
        self, state_dir: str, busy_seconds: float | None = None, for_guard: bool = False, url: str | None = None
    ) -> None:
        self.state_dir = state_dir
        self.url = None
        self.path = os.path.join(state_dir, DB_NAME)
        self.busy_seconds = _busy_seconds() if busy_seconds is None else busy_seconds
        self._lock_path = self.path + ".lock"
        self.writable = True
        if not os.path.exists(self.path):
            # the person's alone; SQLite gives -wal and -shm the database file's mode
            with contextlib.suppress(OSError):
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        # self.conn and self.tx are set here, or by _open_read_only below, or __init__ raises
        conn: sqlite3.Connection | None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=self.busy_seconds, check_same_thread=False)
        except sqlite3.Error as exc:
            if not for_guard:
                raise StoreError(f"cannot open the store {self.path}: {exc}") from None
            conn = None
        if conn is not None:
            self.conn = conn
            self.tx = Tx(conn, self)
        try:
            if conn is None:
                raise sqlite3.OperationalError("unable to open database file")
            self._prepare()
            if for_guard and not os.access(self.path, os.W_OK):
                self.writable = False
        except (sqlite3.DatabaseError, StoreError) as exc:
            if conn is not None:
                conn.close()
            if not for_guard or "newer than this proctor" in str(exc):
                raise (exc if isinstance(exc, StoreError) else self._translate(exc)) from None
            self._open_read_only()

    def _open_read_only(self) -> None:
        """Read what can be read: the file read-only, else as immutable (no locks, no -shm: a
        store nobody may write cannot change under the reader either)."""
        self.writable = False
        uri = self.path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        last: Exception | None = None
        for flags in ("mode=ro", "immutable=1"):
            try:
                conn = sqlite3.connect(
                    f"file:{uri}?{flags}",
                    uri=True,
                    isolation_level=None,
                    timeout=self.busy_seconds,
                    check_same_thread=False,
                )
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                last = exc
                continue
            if version > SCHEMA_VERSION:
                conn.close()
                raise StoreError(
                    f"the store {self.path} has schema version {version}, newer than this proctor "
                    f"understands ({SCHEMA_VERSION}); upgrade proctor (pip install -U proctor)"
                )
            self.conn = conn
            self.tx = Tx(conn, self)
            return
        raise self._translate(last if isinstance(last, sqlite3.Error) else sqlite3.OperationalError("unreadable"))

    def describe(self) -> str:
        return self.path

    def change_token(self):
        """A value that changes when another connection has written the store since the last
        call (SQLite's data_version): the server looks again only then."""
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def _translate(self, exc: Exception) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        text = str(exc)
        # "locking protocol" (SQLITE_PROTOCOL): another process holds the WAL's read marks
        if "locked" in text or "busy" in text or "locking protocol" in text:
            return StoreError(
                f"the store {self.path} stayed locked by another process for "
                f"{self.busy_seconds:g}s; retry, or find the process holding it (fuser {self.path})"
            )
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return StoreError(
                f"the store {self.path} is not a readable SQLite database ({text}); "
                f"move it aside (mv {self.path} {self.path}.broken) and proctor starts a new one"
            )
        return StoreError(f"the store {self.path} failed: {text}")

    def _prepare(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.path} has schema version {version}, newer than this proctor "
                f"understands ({SCHEMA_VERSION}); upgrade proctor (pip install -U proctor)"
            )
        if version < SCHEMA_VERSION:
            if version == 0:
                # WAL is a property of the file; it cannot be switched inside a transaction.
                self.conn.execute("PRAGMA journal_mode=WAL")
            self._migrate()

    def _migrate(self) -> None:
        with self.write() as conn:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"the store {self.path} has schema version {version}, newer than this proctor "
                    f"understands ({SCHEMA_VERSION}); upgrade proctor"
                )
            for target, statements in MIGRATIONS:
                if target <= version:
                    continue
                for statement in statements:
                    if callable(statement):
                        statement(conn)
                    else:
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={target}")

    @contextlib.contextmanager
    def _flock(self) -> Iterator[None]:
        """The sidecar lock: writers queue here instead of spinning on SQLITE_BUSY."""
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.busy_seconds
            delay = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError as exc:
                    if exc.errno not in (errno.EAGAIN, errno.EACCES):
                        raise
                    if time.monotonic() >= deadline:
                        raise StoreError(
                            f"the store {self.path} stayed locked by another proctor for "
                            f"{self.busy_seconds:g}s; retry, or find the process holding it "
                            f"(fuser {self._lock_path})"
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    @contextlib.contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction: all of it lands, or none of it."""
        with self._flock():
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._translate(exc) from None
            try:
                yield self.tx
            except DatabaseError:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
            except sqlite3.DatabaseError as exc:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise self._translate(exc) from None
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise self._translate(exc) from None

    @contextlib.contextmanager
    def read(self) -> Iterator[Tx]:
        """One read snapshot."""
        try:
            self.conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self._translate(exc) from None
        try:
            yield self.tx
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc) from None
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("COMMIT")

    def lead(self, role: str) -> bool:
        """One machine's store: the server's own lock (server/daemon.py) already makes it the one."""
        return True

    def broken(self) -> bool:
        return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
