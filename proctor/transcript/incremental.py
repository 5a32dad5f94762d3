"""The incremental reader of a transcript: an agent host's JSON Lines, read since the last call.

An agent host appends its session's transcript to one file for the whole session, and the hook
reads it on every tool call, so how a transcript is read safely and cheaply is one fact, kept
here for every host; what its lines mean is the host's (`claude.py` for Claude Code), handed in
as a `Meaning`: how a state is made (`new`), saved to a dict and restored from one (`dump`,
`restore`, which returns None for a dict it cannot trust), how one line, a JSON object, is
folded into it (`apply(state, line, before)`), which lines are worth parsing at all (`markers`:
a line holding none of them is skipped at the speed of a substring search; None parses every
line), the version of the saved state and the name of the checkpoint files.

`read(path, checkpoint_dir, meaning, max_line)` reads only the bytes written since the last
call, resuming from a checkpoint (file identity, offset, a digest of the file's head, its first
HEAD_BYTES, and the state so far). A checkpoint that does not match the file (another inode, a
shorter file, a different head, as any growth of a file shorter than HEAD_BYTES is) or whose
state the host does not restore is discarded, never trusted, and the file is read again from
the start. Invalid UTF-8, lines that are not JSON objects, lines of a shape the host does not
expect and a partial last line are tolerated.

Every call costs bounded memory (a few times CHUNK + max_line at worst) and time linear in the
bytes written since the last call. A partial last line is left for the next call, which reads
it back only once it ends; a line longer than max_line is skipped, never held, and a checkpoint
written inside it says so, so the next call goes on to its end without reading its start again.
Only a regular file is read: a FIFO, a device or a directory is refused, and the open never
blocks. A line being applied may look back at the lines before it (`before`), never more than
LOOKBACK bytes.
"""

from __future__ import annotations

import json
import os
import zlib

HEAD_BYTES = 512
CHUNK = 8 << 20  # read in blocks of this size; a call holds at most CHUNK + max_line bytes
NEAR = 64 << 10
LOOKBACK = 2 << 20  # how far back `before` searches from the line being applied


class Meaning:
    """What a host's transcript lines mean to the reader (the module's docstring says each part).

    `apply(state, line, before)` may raise TypeError, AttributeError, ValueError, KeyError or
    RecursionError on a line of a shape it does not expect: that line is passed over. `settle`,
    if given, is called once the new lines are folded, before the state is saved."""

    __slots__ = ("name", "version", "new", "dump", "restore", "apply", "markers", "settle")

    def __init__(self, *, name: str, version: int, new, dump, restore, apply, markers=None, settle=None) -> None:
        self.name = name  # checkpoint files are `<name>-<key of the path>.json`
        self.version = version  # a checkpoint saved with another version is not trusted
        self.new = new
        self.dump = dump
        self.restore = restore
        self.apply = apply
        self.markers: tuple[bytes, ...] | None = markers
        self.settle = settle


def _checkpoint_path(checkpoint_dir: str, path: str, name: str) -> str:
    key = f"{zlib.crc32(path.encode('utf-8', 'surrogateescape')):08x}{zlib.adler32(path.encode('utf-8', 'surrogateescape')):08x}"
    return os.path.join(checkpoint_dir, f"{name}-{key}.json")


def _head_digest(handle) -> int:
    handle.seek(0)
    return zlib.crc32(handle.read(HEAD_BYTES))


def read(path: str, checkpoint_dir: str | None, meaning: Meaning, max_line: int):
    """The state `meaning` folds the file at `path` into, now. Raises OSError when the file
    cannot be read.

    At most CHUNK + max_line bytes are held whatever the file holds, and each byte is searched
    for a line end once across calls: the checkpoint records the offset of the first byte not
    yet applied, how many bytes after it are already known to hold no newline (a partial last
    line, left for the next call and read back only once it ends), and whether those bytes
    belong to a line longer than max_line, which is skipped to its end without being held."""
    with open_regular(path) as handle:
        info = os.fstat(handle.fileno())
        size = info.st_size  # bytes appended while reading are the next call's
        head = _head_digest(handle)
        state, offset, partial, skipping, loaded = None, 0, 0, False, None
        saved_path = _checkpoint_path(checkpoint_dir, path, meaning.name) if checkpoint_dir else None
        if saved_path:
            saved = load_json(saved_path, max_line)
            resumed = _resume(saved, path, info, head, meaning, max_line) if saved else None
            if resumed is not None:
                state, offset, partial, skipping = resumed
                loaded = (offset, partial, skipping)
        if state is None:
            state = meaning.new()
        position = offset  # the file offset of the first byte not yet applied (or skipped)
        held = partial  # bytes from `position` on with no newline: a partial line, or skipped
        lazy = partial  # the first `lazy` of them are still in the file, not in memory
        parts: list[bytes] = []
        at = offset + partial  # the next byte to read
        handle.seek(at)
        while at < size:
            block = handle.read(min(CHUNK, size - at))
            if not block:
                break  # the file shrank while being read
            at += len(block)
            if skipping:
                newline = block.find(b"\n")
                if newline == -1:
                    position = at
                    continue
                skipping = False
                position = at - len(block) + newline + 1
                block = block[newline + 1 :]
            newline = block.rfind(b"\n")
            if newline == -1:
                parts.append(block)
                held += len(block)
                if held > max_line:  # an over-long line: let go of it, skip to its end
                    parts, held, lazy, skipping, position = [], 0, 0, True, at
                continue
            if lazy:  # the partial line left by the last call, read once, now that it ends
                handle.seek(position)
                parts.insert(0, handle.read(lazy))
                handle.seek(at)
                lazy = 0
            data = b"".join(parts + [block]) if parts else block
            end = len(data) - len(block) + newline + 1
            _fold(meaning, state, data, end, _Before(handle, data, position), max_line)
            position += end
            rest = block[newline + 1 :]
            parts, held = ([rest] if rest else []), len(rest)
    if meaning.settle is not None:
        meaning.settle(state)
    if saved_path and (position, held, skipping) != (loaded or (0, 0, False)):
        _save(
            saved_path,
            {
                "v": meaning.version,
                "path": path,
                "ino": info.st_ino,
                "dev": info.st_dev,
                "head": head,
                "offset": position,
                "partial": held,
                "skip": skipping,
                "state": meaning.dump(state),
            },
        )
    return state


def _resume(saved: dict, path: str, info, head: int, meaning: Meaning, max_line: int) -> tuple | None:
    """Where a checkpoint says to go on from (state, offset, partial, skipping), or None when it
    does not match the file or the host does not restore its state."""
    offset, partial, skipping = saved.get("offset"), saved.get("partial", 0), saved.get("skip", False)
    if not (
        saved.get("v") == meaning.version
        and saved.get("path") == path
        and saved.get("ino") == info.st_ino
        and saved.get("dev") == info.st_dev
        and saved.get("head") == head
        and type(offset) is int
        and type(partial) is int
        and type(skipping) is bool
        and 0 <= offset
        and 0 <= partial <= max_line
        and offset + partial <= info.st_size
        and not (skipping and partial)
    ):
        return None
    data = saved.get("state")
    state = meaning.restore(data if isinstance(data, dict) else {})
    if state is None:
        return None
    return state, offset, partial, skipping


def _starts(data: bytes, end: int, markers: tuple[bytes, ...] | None) -> list[int]:
    """Where the complete lines of data[:end] that are worth parsing start, in file order."""
    if markers is None:
        starts = [0]
        found = data.find(b"\n", 0, end - 1)
        while found != -1:
            starts.append(found + 1)
            found = data.find(b"\n", found + 1, end - 1)
        return starts
    marked: set[int] = set()
    for marker in markers:
        found = data.find(marker, 0, end)
        while found != -1:
            start = data.rfind(b"\n", 0, found) + 1
            marked.add(start)
            stop = data.find(b"\n", found, end)
            if stop == -1:
                break
            found = data.find(marker, stop, end)
    return sorted(marked)


def _fold(meaning: Meaning, state, data: bytes, end: int, before: _Before, max_line: int) -> None:
    """Apply every complete line of data[:end] worth parsing, in file order."""
    apply = meaning.apply
    for start in _starts(data, end, meaning.markers):
        before.at = start
        stop = data.find(b"\n", start, end)
        stop = stop if stop != -1 else end
        if stop - start > max_line:
            continue  # skipped wherever it falls in the blocks read, as a partial one would be
        try:
            line = json.loads(data[start:stop].decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            continue
        if isinstance(line, dict):
            try:
                apply(state, line, before)
            except (TypeError, AttributeError, ValueError, KeyError, RecursionError):
                continue  # a line of an unexpected shape costs that line, never the reader


class _Before:
    """`before(needles)`: the nearest line before the one being applied that holds one of
    `needles`, parsed, or None (none found, or that line is not a JSON object). It is searched
    for back from the line: in the bytes at hand, else in the file just before them; never more
    than LOOKBACK bytes."""

    __slots__ = ("handle", "data", "offset", "at")

    def __init__(self, handle, data: bytes, offset: int) -> None:
        self.handle = handle
        self.data = data
        self.offset = offset  # the file offset of data[0]
        self.at = 0  # where in data the line being applied starts

    def __call__(self, needles: tuple[bytes, ...]) -> dict | None:
        here, data = self.at, self.data
        at = _rfind(data, needles, max(0, here - NEAR), here)  # what is sought is usually just above
        if at == -1 and here > NEAR:
            longest = max((len(needle) for needle in needles), default=0)
            at = _rfind(data, needles, max(0, here - LOOKBACK), here - NEAR + longest)
        source = data
        if at == -1 and here < LOOKBACK and self.offset > 0:
            window_start = max(0, self.offset - (LOOKBACK - here))
            position = self.handle.tell()
            self.handle.seek(window_start)
            source = self.handle.read(self.offset - window_start)
            self.handle.seek(position)
            at = _rfind(source, needles, 0, len(source))
        if at == -1:
            return None
        start = source.rfind(b"\n", 0, at) + 1
        stop = source.find(b"\n", at)
        try:
            line = json.loads(source[start : stop if stop != -1 else len(source)].decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return None
        return line if isinstance(line, dict) else None


def _rfind(source: bytes, needles: tuple[bytes, ...], start: int, stop: int) -> int:
    return max((source.rfind(needle, start, stop) for needle in needles), default=-1)


def _regular(info) -> bool:
    import stat

    return stat.S_ISREG(info.st_mode)


def open_regular(path: str):
    """`path` opened for reading in binary, if it is a regular file; else OSError. A FIFO
    (whose open would wait for a writer), a device such as /dev/zero or a directory is
    refused before it is opened; should the path turn into one between the check and the
    open, O_NONBLOCK makes the open return at once and the check of the open file refuses it."""
    if not _regular(os.stat(path)):
        raise IsADirectoryError(path)
    fd = os.open(
        path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        if not _regular(os.fstat(fd)):
            raise IsADirectoryError(path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def load_json(path: str, limit: int) -> dict | None:
    """The JSON object in the regular file at `path` (its first `limit` bytes), or None."""
    try:
        with open_regular(path) as handle:
            data = json.loads(handle.read(limit).decode("utf-8", "replace"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError, RecursionError):
        return None


def _save(path: str, data: dict) -> None:
    from proctor.paths import write_atomic

    try:
        write_atomic(path, json.dumps(data, separators=(",", ":")))
    except OSError:
        pass  # without a checkpoint the next call reads the file again; nothing is lost
