"""Content-addressed blobs: run outputs, worker streams, trail payloads too large for a row.

A blob is named by the sha256 of its bytes (`sha256:<64 hex>`), so writing the same bytes
twice is free and a reader can check what it got against its name.

Where they are kept depends on the engine. The embedded (SQLite) store keeps each blob as a
file beside the database, `<state_dir>/blobs/<2 hex>/<62 hex>`, written to a temporary name
and renamed into place. A PostgreSQL store keeps them in its `blobs` table (schema 7), so a
wait on one machine reads evidence recorded on another; rows are inserted with
`ON CONFLICT (ref) DO NOTHING`, through the caller's transaction when it passes one (a Tx),
else through the store's autocommit handle.

Every verb takes `where`: the store, or a Tx on it (its `.store` is the store). A bare state
directory (a str) is still read as the embedded store's blob directory, for callers that
have no store at hand.
"""

from __future__ import annotations

import os

from proctor.errors import ProctorError
from proctor.store import Tx

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO

REF_PREFIX = "sha256:"
DIR_NAME = "blobs"
CHUNK = 1 << 20


class Missing(ProctorError):
    """The store has no blob by that reference."""


# -- where they are kept -----------------------------------------------------------------------


def _home(where) -> tuple[Tx | None, str | None]:
    """(the Tx to reach the blobs table through, None) on PostgreSQL, (None, state dir) for files."""
    if isinstance(where, str):
        return None, where
    if isinstance(where, Tx):
        tx, store = where, where.store
    else:
        tx, store = None, where
    if getattr(store, "dialect", "sqlite") == "sqlite":
        return None, store.state_dir
    return (tx if tx is not None else store.tx), None


def check_ref(ref: str) -> str:
    """The hex digest a reference names; ProctorError when it names none."""
    if not isinstance(ref, str) or not ref.startswith(REF_PREFIX):
        raise ProctorError(f"{ref!r} is not a blob reference (sha256:<hex>)")
    digest = ref[len(REF_PREFIX) :]
    if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ProctorError(f"{ref!r} is not a blob reference (sha256:<64 hex digits>)")
    return digest


def directory(state_dir: str) -> str:
    """The embedded store's blob directory."""
    return os.path.join(state_dir, DIR_NAME)


def path(state_dir: str, ref: str) -> str:
    """The file an embedded store keeps blob `ref` in (whether or not it is there)."""
    digest = check_ref(ref)
    return os.path.join(directory(state_dir), digest[:2], digest[2:])


def file_path(where, ref: str) -> str | None:
    """The file blob `ref` is kept in, or None when the store keeps blobs in its table."""
    tx, state_dir = _home(where)
    if tx is not None:
        return None
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    return path(state_dir, ref)


def _as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.startswith("\\x"):  # bytea in text form
        return bytes.fromhex(value[2:])
    return bytes(value)


def _now_iso() -> str:
    from proctor.timeutil import iso, now

    return iso(now())


def _insert(tx: Tx, ref: str, data: bytes) -> None:
    if tx.one("SELECT 1 FROM blobs WHERE ref = ?", (ref,)) is not None:
        return
    tx.execute(
        "INSERT INTO blobs (ref, bytes, created, data) VALUES (?, ?, ?, ?) ON CONFLICT (ref) DO NOTHING",
        (ref, len(data), _now_iso(), data),
    )


# -- writing -----------------------------------------------------------------------------------


def put(where, data: bytes) -> str:
    """Store `data` once; return its reference. Writing the same bytes twice is free."""
    import hashlib

    ref = REF_PREFIX + hashlib.sha256(data).hexdigest()
    tx, state_dir = _home(where)
    if tx is not None:
        _insert(tx, ref, bytes(data))
        return ref
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    target = path(state_dir, ref)
    if os.path.exists(target):
        return ref
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = f"{target}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return ref


class Writer:
    """Stream bytes into the blob store: hashed as they arrive, named by their digest at the end
    (`finish()` returns the reference). Spooled to a temporary file either way: on the embedded
    store it is renamed into place, on PostgreSQL inserted at the end."""

    def __init__(self, where) -> None:
        import hashlib

        self._tx, self._state_dir = _home(where)
        self.size = 0
        self._hash = hashlib.sha256()
        self._handle: IO[bytes]
        if self._tx is None:
            assert self._state_dir is not None  # _home gives a state dir whenever it gives no Tx
            folder = directory(self._state_dir)
            os.makedirs(folder, exist_ok=True)
            self._tmp: str | None = os.path.join(folder, f".tmp-{os.getpid()}-{os.urandom(6).hex()}")
            self._handle = open(self._tmp, "xb")
        else:
            import tempfile

            self._tmp = None
            self._handle = tempfile.TemporaryFile(prefix="proctor-blob-")

    def write(self, data: bytes) -> None:
        self._hash.update(data)
        self._handle.write(data)
        self.size += len(data)

    def finish(self) -> str:
        """Finish the blob; return its reference."""
        ref = REF_PREFIX + self._hash.hexdigest()
        if self._tx is not None:
            try:
                self._handle.seek(0)
                _insert(self._tx, ref, self._handle.read())
            finally:
                self._handle.close()
            return ref
        self._handle.close()
        # with no Tx, __init__ set both
        assert self._state_dir is not None and self._tmp is not None
        target = path(self._state_dir, ref)
        if os.path.exists(target):
            os.unlink(self._tmp)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(self._tmp, target)
        return ref

    close = finish

    def abandon(self) -> None:
        self._handle.close()
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass


def writer(where) -> Writer:
    return Writer(where)


def adopt(where, source: str) -> str:
    """Move the file at `source` into the blob store (a stream written as it arrived); return its
    reference. The file is read once to hash it, then renamed, never copied (on PostgreSQL it is
    inserted and removed)."""
    import hashlib

    digest = hashlib.sha256()
    with open(source, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    ref = REF_PREFIX + digest.hexdigest()
    tx, state_dir = _home(where)
    if tx is not None:
        with open(source, "rb") as handle:
            _insert(tx, ref, handle.read())
        os.unlink(source)
        return ref
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    target = path(state_dir, ref)
    if os.path.exists(target):
        os.unlink(source)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(source, target)
    return ref


# -- reading -----------------------------------------------------------------------------------


def has(where, ref: str) -> bool:
    try:
        check_ref(ref)
    except ProctorError:
        return False
    tx, state_dir = _home(where)
    if tx is not None:
        return tx.one("SELECT 1 FROM blobs WHERE ref = ?", (ref,)) is not None
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    return os.path.exists(path(state_dir, ref))


def _missing(tx: Tx, ref: str) -> Missing:
    return Missing(f"blob {ref} is not in the store ({tx.store.describe()} has no such blob: it is missing)")


def get(where, ref: str) -> bytes:
    """The bytes of blob `ref`; Missing when the store has none by that name."""
    tx, state_dir = _home(where)
    if tx is not None:
        check_ref(ref)
        row = tx.one("SELECT data FROM blobs WHERE ref = ?", (ref,))
        if row is None:
            raise _missing(tx, ref)
        return _as_bytes(row[0])
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    target = path(state_dir, ref)
    try:
        with open(target, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise Missing(f"blob {ref} is not in the store ({target} is missing)") from None


def reader(where, ref: str):
    """A binary file open on blob `ref`, to be read in chunks and closed; Missing when absent,
    OSError when its file cannot be opened."""
    tx, state_dir = _home(where)
    if tx is not None:
        import io

        return io.BytesIO(get(tx, ref))
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    target = path(state_dir, ref)
    try:
        return open(target, "rb")
    except FileNotFoundError:
        raise Missing(f"blob {ref} is not in the store ({target} is missing)") from None


def rehash(where, ref: str) -> str:
    """The reference the bytes the store keeps as `ref` hash to now: `ref` itself unless they
    were altered. Missing when absent, OSError when unreadable, ProctorError for a bad ref."""
    import hashlib

    h = hashlib.sha256()
    handle = reader(where, ref)
    with handle:
        while chunk := handle.read(CHUNK):
            h.update(chunk)
    return REF_PREFIX + h.hexdigest()


def refs(where):
    """Every blob reference the store holds (in order)."""
    tx, state_dir = _home(where)
    if tx is not None:
        for row in tx.all("SELECT ref FROM blobs ORDER BY ref"):
            yield row[0]
        return
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    folder = directory(state_dir)
    try:
        prefixes = sorted(os.listdir(folder))
    except FileNotFoundError:
        return
    hexdigits = set("0123456789abcdef")
    for prefix in prefixes:
        if len(prefix) != 2 or not set(prefix) <= hexdigits:
            continue
        try:
            names = sorted(os.listdir(os.path.join(folder, prefix)))
        except (NotADirectoryError, FileNotFoundError):
            continue
        for name in names:
            if len(name) == 62 and set(name) <= hexdigits:
                yield REF_PREFIX + prefix + name


def clear(where) -> None:
    """Remove every blob the store holds (a move into it with --replace)."""
    tx, state_dir = _home(where)
    if tx is not None:
        tx.execute("DELETE FROM blobs")
        return
    assert state_dir is not None  # _home gives a state dir whenever it gives no Tx
    for ref in list(refs(state_dir)):
        try:
            os.unlink(path(state_dir, ref))
        except FileNotFoundError:
            pass
