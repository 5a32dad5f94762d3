"""The store: one SQLite database per repository, and the only module that opens it.

Shared by every worktree and clone of the repository on this machine (see paths.py).
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
from collections.abc import Iterator  # sqlite3 imports it already: free on the hook's path

from proctor.errors import StoreError
from proctor.store.schema import MIGRATIONS, SCHEMA_VERSION

DB_NAME = "proctor.db"
DEFAULT_BUSY_SECONDS = 10.0


def _busy_seconds() -> float:
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

    def __init__(self, state_dir: str, busy_seconds: float | None = None, for_guard: bool = False) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, DB_NAME)
        self.busy_seconds = _busy_seconds() if busy_seconds is None else busy_seconds
        self._lock_path = self.path + ".lock"
        self.writable = True
        if not os.path.exists(self.path):
            # the person's alone; SQLite gives -wal and -shm the database file's mode
            with contextlib.suppress(OSError):
                os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        try:
            self.conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=self.busy_seconds, check_same_thread=False
            )
        except sqlite3.Error as exc:
            if not for_guard:
                raise StoreError(f"cannot open the store {self.path}: {exc}") from None
            self.conn = None
        try:
            if self.conn is None:
                raise sqlite3.OperationalError("unable to open database file")
            self._prepare()
            if for_guard and not os.access(self.path, os.W_OK):
                self.writable = False
        except (sqlite3.DatabaseError, StoreError) as exc:
            if self.conn is not None:
                self.conn.close()
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
                conn = sqlite3.connect(f"file:{uri}?{flags}", uri=True, isolation_level=None,
                                       timeout=self.busy_seconds, check_same_thread=False)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                last = exc
                continue
            if version > SCHEMA_VERSION:
                conn.close()
                raise StoreError(f"the store {self.path} has schema version {version}, newer than this proctor "
                                 f"understands ({SCHEMA_VERSION}); upgrade proctor (pip install -U proctor)")
            self.conn = conn
            return
        raise self._translate(last if isinstance(last, sqlite3.Error) else sqlite3.OperationalError("unreadable"))

    def _translate(self, exc: sqlite3.Error) -> StoreError:
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
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it lands, or none of it."""
        with self._flock():
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._translate(exc) from None
            try:
                yield self.conn
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
    def read(self) -> Iterator[sqlite3.Connection]:
        """One read snapshot."""
        try:
            self.conn.execute("BEGIN")
        except sqlite3.Error as exc:
            raise self._translate(exc) from None
        try:
            yield self.conn
        except sqlite3.DatabaseError as exc:
            raise self._translate(exc) from None
        finally:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()
