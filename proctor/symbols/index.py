"""proctor's index of definitions and references: per file content, cached by blob id.

A question names symbols ("where is LegacyStore defined, and who names it?") and is asked of
one tree: a checkout's work tree as it is on disk (tracked and untracked files, less what git
ignores), or a commit's tree. Only the files that could answer are read:

- the files whose bytes hold one of the names (`git grep -F`, the work tree and untracked
  files included, binary ones too: an attribute must not hide a file from the question);
- in languages that fold names (Python's NFKC, Rust's NFC, JavaScript's `\\u` escapes), the
  files whose text could spell a name without its bytes. Which files those are is kept per
  path with the file's inode, size, mtime and ctime (a ctime no writer can set back), so a
  second question reads only the files changed since.

Each file read is summarised once per content (languages.summarize) and the summary kept in
`symbols.db` under the repository's cache directory, keyed by the content's git blob id and
the grammar's version: a second grading parses nothing that has not changed. A cache that
cannot be opened or read is worked around, never trusted: the summaries are computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field

from proctor import errors
from proctor.symbols import languages
from proctor.vcs import git

RACY_SECONDS = 2.0  # a file whose status changed this recently may change again unseen

# summaries: a content's definitions (JSON) and parse error; names: the lines naming each name
# in it (a question reads only the names it asks about); seen: per checkout path, the stat data
# it was last read with, and the words its folded text spells that its bytes do not
SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS summaries (blob TEXT NOT NULL, language TEXT NOT NULL, version TEXT NOT NULL,
    defs TEXT NOT NULL, error TEXT, PRIMARY KEY (blob, language, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS names (blob TEXT NOT NULL, language TEXT NOT NULL, version TEXT NOT NULL,
    name TEXT NOT NULL, lines TEXT NOT NULL, PRIMARY KEY (blob, language, version, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen (checkout TEXT NOT NULL, path TEXT NOT NULL, ino INTEGER NOT NULL,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, folded TEXT NOT NULL,
    PRIMARY KEY (checkout, path)) WITHOUT ROWID;
"""


@dataclass
class Mention:
    """One file of the tree that could name a symbol asked about."""
    path: str
    language: str | None  # None: no grammar (prose, binary, or a language proctor cannot read)
    summary: dict | None = None  # languages.summarize's record
    blob: str | None = None
    binary: bool = False
    error: str | None = None  # why the file could not be read or parsed
    named: list[str] = field(default_factory=list)  # with no grammar: the names its bytes hold


@dataclass
class Answer:
    """Every file of one tree that could define or name any of the names asked."""
    names: list[str]
    files: list[Mention] = field(default_factory=list)

    def definitions(self, name: str) -> list[tuple[str, list]]:
        """(path, def record) for each definition of `name` (`Scope.name` names its scope too)."""
        scope, _, bare = name.rpartition(".")
        out = []
        for m in self.files:
            for d in (m.summary or {}).get("defs", ()):
                if d[0] == bare and (not scope or d[4] == scope or d[4].endswith("." + scope)):
                    out.append((m.path, d))
        return out

    def references(self, name: str) -> list[tuple[str, int]]:
        """(path, line) for each place that names `name` other than its definitions."""
        bare = name.rpartition(".")[2]
        out = []
        for m in self.files:
            for line in (m.summary or {}).get("refs", {}).get(bare, ()):
                out.append((m.path, line))
        return out

    def unreadable(self) -> list[Mention]:
        """Files of a language with a grammar that could name a symbol but did not parse."""
        return [m for m in self.files if m.error]

    def unknown(self) -> list[Mention]:
        """Text files with no grammar, not prose, whose bytes hold a name."""
        return [m for m in self.files if m.language is None and not m.binary and not m.error
                and not languages.is_prose(m.path)]

    def prose(self) -> list[Mention]:
        return [m for m in self.files if m.language is None and languages.is_prose(m.path)]


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _as_word(name: str, data: bytes) -> bool:
    """Whether `name` stands in `data` as a word of its own (not inside `LegacyAdapter`)."""
    import re

    return re.search(rb"(?<![\w$])" + re.escape(name.encode()) + rb"(?![\w$])", data) is not None


def is_binary(data: bytes) -> bool:
    """git's own test: a NUL in the first 8,000 bytes."""
    return b"\0" in data[:8000]


class Index:
    """The summaries of one repository's files, and the questions asked of its trees.

    `cache_dir` None: the repository's cache directory for `checkout`. `parsed` counts the
    files summarised in this process (a warm question parses none)."""

    def __init__(self, checkout: str, cache_dir: str | None = None) -> None:
        self.checkout = os.path.realpath(checkout)
        self.parsed = 0
        self._ahead: dict[tuple, dict] = {}  # prefetch's summaries
        self._ahead_names: set[str] = set()
        self._db: sqlite3.Connection | None = None
        self._versions: dict[str, str] = {}
        self.cache_path = None
        try:
            if cache_dir is None:
                from proctor.paths import find_checkout, repo_cache_dir

                cache_dir = repo_cache_dir(find_checkout(self.checkout))
            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
            self.cache_path = os.path.join(cache_dir, "symbols.db")
            self._db = sqlite3.connect(self.cache_path, timeout=5, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            layout = SCHEMA_VERSION * 100 + int(languages.QUERY_VERSION)  # a new way to fold moves it too
            if self._db.execute("PRAGMA user_version").fetchone()[0] != layout:
                # another version's cache: dropped, never read as this one's
                self._db.executescript("DROP TABLE IF EXISTS summaries; DROP TABLE IF EXISTS names; "
                                       "DROP TABLE IF EXISTS seen;" + SCHEMA
                                       + f"PRAGMA user_version = {layout};")
        except (OSError, sqlite3.Error, errors.ProctorError):
            self._close()  # questions are still answered, without a cache

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
        self._db = None

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc) -> None:
        self._close()

    # -- summaries -------------------------------------------------------------------------------

    def version(self, language: str) -> str:
        if language not in self._versions:
            import tree_sitter as ts

            lang, _parser, definitions, _names = languages.grammar(language)
            tags = hashlib.sha1((languages.EXTRA_DEFINITIONS.get(language, "") + str(definitions.pattern_count))
                                .encode()).hexdigest()[:12]
            self._versions[language] = (f"{languages.QUERY_VERSION}/{ts.__version__}/{lang.name}/"
                                        f"{'.'.join(map(str, lang.semantic_version or ()))}/{lang.abi_version}/{tags}")
        return self._versions[language]

    def summary(self, data: bytes, language: str, blob: str | None = None, names: set[str] | None = None) -> dict:
        """What `data` (in `language`) defines and names, as languages.summarize records it
        (with `names`, its references to those names only): from the cache by its blob id,
        else parsed now and kept. Raises languages.NoGrammar when the grammar does not load."""
        blob = blob or blob_id(data)
        version = self.version(language)
        ahead = self._ahead.get((blob, language, version))
        if ahead is not None and names is not None and names <= self._ahead_names:
            return dict(ahead, refs={n: v for n, v in ahead["refs"].items() if n in names})
        if self._db is not None:
            try:
                row = self._db.execute("SELECT defs, error FROM summaries WHERE blob = ? AND language = ? AND "
                                       "version = ?", (blob, language, version)).fetchone()
                if row:
                    key = (blob, language, version)
                    if names is None:
                        found = self._db.execute("SELECT name, lines FROM names WHERE blob = ? AND language = ? "
                                                 "AND version = ?", key).fetchall()
                    else:
                        found = [r for n in sorted(names) for r in self._db.execute(
                            "SELECT name, lines FROM names WHERE blob = ? AND language = ? AND version = ? AND "
                            "name = ?", key + (n,))]
                    return {"defs": json.loads(row[0]), "error": row[1],
                            "refs": {n: [int(x) for x in lines.split(",")] for n, lines in found}}
            except (sqlite3.Error, ValueError):
                self._close()
        record = languages.summarize(data, language)
        self.parsed += 1
        if self._db is not None:
            try:
                with self._db:
                    self._db.execute("BEGIN")
                    self._db.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, ?)",
                                     (blob, language, version, json.dumps(record["defs"], separators=(",", ":")),
                                      record["error"]))
                    self._db.executemany("INSERT OR REPLACE INTO names VALUES (?, ?, ?, ?, ?)",
                                         [(blob, language, version, n, ",".join(map(str, lines)))
                                          for n, lines in record["refs"].items()])
            except sqlite3.Error:
                self._close()
        if names is not None:
            record = dict(record, refs={n: v for n, v in record["refs"].items() if n in names})
        return record

    # -- the work tree ---------------------------------------------------------------------------

    def ask(self, names: list[str]) -> Answer:
        """Every file of the checkout's work tree that could define or name one of `names`.
        Raises ProctorError when git cannot read the tree."""
        bare = sorted({n.rpartition(".")[2] for n in names if n})
        answer = Answer(list(names))
        if not bare:
            return answer
        args = ["grep", "-l", "-z", "--untracked", "--no-color", "-F"]
        for name in bare:
            args += ["-e", name]
        # git's grep and the listing of the tree run side by side, each on its own core
        grep = git.start(self.checkout, *args, "--")
        listing = git.start(self.checkout, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
        try:
            listed = git.finish(listing, "ls-files")
            wanted = set(bare)
            folded = {p for p, words in self._folding_files(listed).items() if wanted & words}
        finally:
            out, err = grep.communicate()
        if grep.returncode not in (0, 1):
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise errors.ProctorError(f"git grep failed in {self.checkout}: "
                                      f"{message[-1] if message else 'exit ' + str(grep.returncode)}")
        hits = {p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p}
        read = [(path, self._read(path)) for path in sorted(hits | folded)]
        self.prefetch([blob_id(data) for _path, data in read if isinstance(data, bytes)], wanted)
        for path, data in read:
            if data is None:
                continue
            language = languages.language_of(path)
            mention = Mention(path, language, error=data) if isinstance(data, str) else \
                self.mention(path, data, language, wanted)
            if mention is not None:
                answer.files.append(mention)
        return answer

    def prefetch(self, blobs: list[str], names: set[str]) -> None:
        """The cached summaries of `blobs` (their references to `names`), read in two queries
        for summary() to take; what the cache does not hold is parsed there."""
        self._ahead = {}
        if self._db is None or not blobs:
            return
        try:
            wanted = sorted(names)
            for at in range(0, len(blobs), 400):  # under any build's limit on a statement's parameters
                chunk = blobs[at:at + 400]
                marks = ",".join("?" * len(chunk))
                for blob, language, version, defs, error in self._db.execute(
                        f"SELECT blob, language, version, defs, error FROM summaries WHERE blob IN ({marks})", chunk):
                    self._ahead[(blob, language, version)] = {"defs": json.loads(defs), "error": error, "refs": {}}
                for blob, language, version, name, lines in self._db.execute(
                        f"SELECT blob, language, version, name, lines FROM names WHERE blob IN ({marks}) AND name IN "
                        f"({','.join('?' * len(wanted))})", chunk + wanted):
                    record = self._ahead.get((blob, language, version))
                    if record is not None:
                        record["refs"][name] = [int(x) for x in lines.split(",")]
            self._ahead_names = set(names)
        except (sqlite3.Error, ValueError):
            self._ahead = {}
            self._close()

    def _read(self, path: str) -> bytes | str | None:
        """A file's bytes; None for what is not a regular file (a link's text is its target,
        which is read as itself where it is); why, when it cannot be read."""
        full = os.path.join(self.checkout, path)
        try:
            if os.path.islink(full) or not os.path.isfile(full):
                return None
            with open(full, "rb") as handle:
                return handle.read()
        except OSError as exc:
            return f"it cannot be read ({exc.strerror})"

    def mention(self, path: str, data: bytes, language: str | None, wanted: set[str]) -> Mention | None:
        """`data` at `path` as an answer sees it; None when it cannot name any of `wanted`."""
        if language is None:  # a source file with a NUL in it is still parsed as its language
            named = sorted(n for n in wanted if _as_word(n, data))
            return Mention(path, None, binary=is_binary(data), named=named) if named else None
        if not languages.mentions(data, language, wanted):
            return None
        return self.whole(path, data, names=wanted)

    def _folding_files(self, listed: bytes) -> dict[str, set[str]]:
        """For each file of the tree in a folding language whose text could spell a name other
        than by its bytes (non-ASCII text where names fold, a `\\u` escape in JavaScript), the
        words its folded text spells that its bytes do not. Read only when changed since the
        last question: the stat data and the words are kept per path."""
        folding = {ext for ext, lang in languages.EXTENSIONS.items() if languages.SPECS[lang][3]}
        paths = []
        for raw in dict.fromkeys(listed.split(b"\0")):
            path = raw.decode("utf-8", "surrogateescape")
            dot = path.rfind(".")
            if dot > path.rfind("/") + 1 and path[dot:].lower() in folding:
                paths.append(path)
        known: dict[str, tuple] = {}
        if self._db is not None:
            try:
                for row in self._db.execute("SELECT path, ino, size, mtime_ns, ctime_ns, folded FROM seen "
                                            "WHERE checkout = ?", (self.checkout,)):
                    known[row[0]] = (row[1:5], row[5])
            except (sqlite3.Error, ValueError):
                self._close()
        now = time.time()
        found: dict[str, set[str]] = {}
        fresh = []
        base = self.checkout + os.sep
        lstat = os.lstat
        for path in paths:
            try:
                info = lstat(base + path)
            except OSError:
                continue
            if info.st_mode & 0o170000 != 0o100000:
                continue
            key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
            cached = known.get(path)
            if cached is not None and cached[0] == key:
                if cached[1]:
                    found[path] = set(cached[1].split(" "))
                continue
            try:
                with open(base + path, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            words = languages.folded_words(data, languages.language_of(path))
            if words:
                found[path] = words
            if now - info.st_ctime_ns / 1e9 > RACY_SECONDS:
                fresh.append((self.checkout, path, *key, " ".join(sorted(words))))
        if fresh and self._db is not None:
            try:
                self._db.executemany("INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?, ?, ?, ?)", fresh)
            except sqlite3.Error:
                self._close()
        return found

    # -- a commit's tree -------------------------------------------------------------------------

    def summaries_at(self, revision: str, paths: list[str]) -> dict[str, Mention]:
        """Each of `paths` as `revision` holds it, summarised where its language has a grammar;
        a path the revision does not hold is left out."""
        if not paths:
            return {}
        listed = git.run(self.checkout, "ls-tree", "-z", "--full-tree", revision, "--", *paths).stdout
        blobs: dict[str, str] = {}
        for record in listed.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            parts = meta.split(b" ")
            if len(parts) == 3 and parts[1] == b"blob":
                blobs[name.decode("utf-8", "surrogateescape")] = parts[2].decode()
        contents = read_blobs(self.checkout, list(blobs.values()))
        out = {}
        for path, blob in blobs.items():
            out[path] = self.whole(path, contents.get(blob, b""), blob)
        return out

    def whole(self, path: str, data: bytes, blob: str | None = None, names: set[str] | None = None) -> Mention:
        """`data` at `path`, summarised (its references to `names` only, when given)."""
        language = languages.language_of(path)
        if language is None:
            return Mention(path, None, blob=blob, binary=is_binary(data))
        blob = blob or blob_id(data)
        try:
            summary = self.summary(data, language, blob, names)
        except languages.NoGrammar as exc:
            return Mention(path, language, blob=blob, error=str(exc))
        mention = Mention(path, language, summary, blob)
        if summary.get("error"):
            mention.error = f"it does not parse as {language} ({summary['error']})"
        return mention


def read_blobs(root: str, blobs: list[str]) -> dict[str, bytes]:
    """The contents of `blobs` (`git cat-file --batch`, one process for all)."""
    if not blobs:
        return {}
    unique = list(dict.fromkeys(blobs))
    out = git.run(root, "cat-file", "--batch", input="".join(b + "\n" for b in unique).encode()).stdout
    contents: dict[str, bytes] = {}
    at = 0
    for blob in unique:
        end = out.index(b"\n", at)
        header = out[at:end].split(b" ")
        at = end + 1
        if len(header) < 3:  # "<id> missing"
            continue
        size = int(header[2])
        contents[blob] = out[at:at + size]
        at += size + 1
    return contents
