"""The line framer of a worker's stdout: bytes from the pipe in, a read at a time; whole lines
counted and the last one kept (on the attempt: `lines`, `last_line`); a line still arriving held
until its newline (only a whole line counts as output), one longer than MAX_LINE cut there and
counted as a line; and the parser (executors/__init__.py) fed the lines it asks for:

- a parser with TAIL is fed only the last TAIL lines of each read;
- else one with RELEVANT only the lines holding one of its markers (searched in C over the
  whole read: libc's strstr or memmem), the stretches of whole lines between them shown to
  its `skim` when it has one;
- else every line.

A line is fed without its newline; a carriage return before it is kept (the parsers read JSON,
which takes it for white space). `finish()` feeds a last line that never got its newline.
"""

from __future__ import annotations

from typing import Any, Callable

MAX_LINE = 16 << 20  # a longer line is cut here and counted as a line


# ------------------------------------------------------------------------------ fast search

_LIBC: list = []


def _libc():
    """libc's strstr and memmem through ctypes, loaded once, or None."""
    if not _LIBC:
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            strstr, memmem = libc.strstr, libc.memmem
            strstr.restype = memmem.restype = ctypes.c_void_p
            strstr.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
            memmem.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t)
            _LIBC.append((strstr, memmem, ctypes))
        except (OSError, AttributeError):
            _LIBC.append(None)
    return _LIBC[0]


class _Search:
    """`find(data, needle, start, end, terminated)`: data.find(needle, start, end) for a bytes
    `data`, in C over a long stretch: libc's strstr (vectorised: ten to twenty times faster than
    CPython's search on stream text) when `terminated` (no NUL from `start` on: a bytes object
    holds one after its last byte; a match past `end` is none), else memmem."""

    def __init__(self) -> None:
        loaded = _libc()
        # ctypes' foreign functions and the module itself: typed as Any, like everything ctypes calls
        self.strstr: Any
        self.memmem: Any
        self.ctypes: Any
        self.strstr, self.memmem, self.ctypes = loaded if loaded else (None, None, None)

    def find(self, data: bytes, needle: bytes, start: int, end: int, terminated: bool = False) -> int:
        if self.memmem is None or end - start < 4096:
            return data.find(needle, start, end)
        base = self.ctypes.cast(self.ctypes.c_char_p(data), self.ctypes.c_void_p).value
        if terminated:
            found = self.strstr(base + start, needle)
        else:
            found = self.memmem(base + start, end - start, needle, len(needle))
        if found is None or found - base + len(needle) > end:
            return -1
        return found - base

    @staticmethod
    def terminated(data: bytes, start: int) -> bool:
        """Whether data[start:] is a C string: no NUL in it (memchr: microseconds a megabyte)."""
        return data.find(b"\0", start) < 0


class Framer:
    """The worker's stdout, a read at a time: counts whole lines, keeps the last one, hands the
    parser the lines it asks for (RELEVANT markers, or its TAIL), and the rest to its `skim`."""

    DENSE = 32  # bytes a line: below it lines are counted with bytes.count, above by deleting newlines

    def __init__(self, parser, attempt, handle: Callable[[list], None]) -> None:
        self.parser, self.attempt, self.handle = parser, attempt, handle
        self.search = _Search()
        self.tail = getattr(parser, "TAIL", None)
        self.skim = getattr(parser, "skim", None)
        self.held: list[bytes] = []  # pieces of a line still arriving
        self.held_size = 0
        self.dense = False

    def feed(self, raw) -> None:
        self.handle(self.parser.feed(raw.decode("utf-8", "replace")))

    def count(self, data: bytes) -> int:
        """The newlines in `data`. bytes.count tests every byte (about 1.5 GB/s here); replace
        finds each newline with memchr and copies the rest (several times faster for lines of
        stream JSON, slower for very short ones): whichever the last read's lines favour."""
        if self.dense:
            found = data.count(b"\n")
        else:
            found = len(data) - len(data.replace(b"\n", b""))
        self.dense = found * self.DENSE > len(data)
        return found

    def chunk(self, chunk: bytes) -> bool:
        """A read; True when it completed a line."""
        size = len(chunk)
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            self.held.append(chunk)  # only a whole line counts as output
            self.held_size += size
            if self.held_size > MAX_LINE:
                self.cut()
                return True
            return False
        found = self.count(chunk)
        start = 0
        if self.held:  # the line that was arriving ends here: it alone is joined
            start = chunk.find(b"\n") + 1
            self.held.append(chunk[:start])
            block = b"".join(self.held)
            self.held, self.held_size = [], 0
            self.lines(block, 0, len(block), 1)
            found -= 1
        if start < end:
            self.lines(chunk, start, end, found)
        if end < size:
            self.held, self.held_size = [chunk[end:]], size - end
        return True

    def cut(self) -> None:
        """A line longer than MAX_LINE: counted as a line here; what follows is the next one."""
        raw = b"".join(self.held)
        self.held, self.held_size = [], 0
        self.attempt.lines += 1
        self.attempt.last_line = raw[:300].decode("utf-8", "replace")
        if self.tail or getattr(self.parser, "RELEVANT", None) is None or self._relevant(raw, 0, len(raw)):
            self.feed(raw)

    def finish(self) -> None:
        """The stream ended: a last line without its newline still counts."""
        if self.held:
            raw = b"".join(self.held)
            self.held, self.held_size = [], 0
            self.attempt.lines += 1
            self.attempt.last_line = raw[:300].decode("utf-8", "replace")
            self.feed(raw)

    def _relevant(self, data: bytes, start: int, end: int, terminated: bool = False) -> list[bytes]:
        markers = getattr(self.parser, "RELEVANT", None) or ()
        return [m for m in markers if self.search.find(data, m, start, end, terminated) >= 0]

    def lines(self, data: bytes, start: int, end: int, count: int) -> None:
        """`data[start:end]` is `count` whole lines, the last one ending at `end - 1`."""
        attempt = self.attempt
        attempt.lines += count
        last = data.rfind(b"\n", start, end - 1) + 1 or start
        attempt.last_line = data[last : min(end - 1, last + 300)].decode("utf-8", "replace")
        if self.tail:  # only the last lines matter
            cut, fed = end - 1, 0  # cut: the newline before the first line fed
            while fed < self.tail:
                cut = data.rfind(b"\n", start, cut)
                if cut < 0:
                    cut = start - 1
                    break
                fed += 1
            for raw in data[cut + 1 : end - 1].split(b"\n"):
                self.feed(raw)
            return
        markers = getattr(self.parser, "RELEVANT", None)
        if markers is None:  # every line
            for raw in data[start : end - 1].split(b"\n"):
                self.feed(raw)
            return
        terminated = self.search.terminated(data, start)
        found = self._relevant(data, start, end, terminated)
        if not found:
            if self.skim is not None:
                self.skim(data, start, end)
            return
        spans = {}
        for marker in found:
            at = self.search.find(data, marker, start, end, terminated)
            while at >= 0:
                begin = data.rfind(b"\n", start, at) + 1 or start
                stop = data.find(b"\n", at, end)
                spans[begin] = stop
                at = self.search.find(data, marker, stop + 1, end, terminated)
        position = start
        for begin in sorted(spans):
            stop = spans[begin]
            if self.skim is not None and begin > position:
                self.skim(data, position, begin)
            self.feed(data[begin:stop])
            position = stop + 1
        if self.skim is not None and position < end:
            self.skim(data, position, end)
