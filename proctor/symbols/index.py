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
            self._db.execute("CREATE TABLE IF NOT EXISTS summaries (blob TEXT NOT NULL, language TEXT NOT NULL, "
                             "version TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (blob, language, version))")
            self._db.execute("CREATE TABLE IF NOT EXISTS seen (checkout TEXT NOT NULL, path TEXT NOT NULL, "
                             "stat TEXT NOT NULL, blob TEXT NOT NULL, folds INTEGER NOT NULL, "
                             "PRIMARY KEY (checkout, path))")
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

    def summary(self, data: bytes, language: str, blob: str | None = None) -> dict:
        """What `data` (in `language`) defines and names: from the cache by its blob id, else
        parsed now and kept. Raises languages.NoGrammar when the grammar does not load."""
        blob = blob or blob_id(data)
        version = self.version(language)
        if self._db is not None:
            try:
                row = self._db.execute("SELECT data FROM summaries WHERE blob = ? AND language = ? AND version = ?",
                                       (blob, language, version)).fetchone()
                if row:
                    record = json.loads(row[0])
                    if isinstance(record, dict) and {"defs", "refs", "error"} <= set(record):
                        return record
            except (sqlite3.Error, ValueError):
                self._close()
        record = languages.summarize(data, language)
        self.parsed += 1
        if self._db is not None:
            try:
                self._db.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?)",
                                 (blob, language, version, json.dumps(record, separators=(",", ":"))))
            except sqlite3.Error:
                self._close()
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
        grep = git.start(self.checkout, *args, "--")
        try:
            folding = self._folding_files()
        finally:
            out, err = grep.communicate()
        if grep.returncode not in (0, 1):
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise errors.ProctorError(f"git grep failed in {self.checkout}: "
                                      f"{message[-1] if message else 'exit ' + str(grep.returncode)}")
        hits = {p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p}
        wanted = set(bare)
        for path in sorted(hits | set(folding)):
            mention = self._read(path, wanted, path in hits)
            if mention is not None:
                answer.files.append(mention)
        return answer

    def _read(self, path: str, wanted: set[str], hit: bool) -> Mention | None:
        language = languages.language_of(path)
        full = os.path.join(self.checkout, path)
        try:
            if os.path.islink(full) or not os.path.isfile(full):
                return None  # a link's text is its target, which is read as itself where it is
            with open(full, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            return Mention(path, language, error=f"it cannot be read ({exc.strerror})")
        return self.mention(path, data, language, wanted)

    def mention(self, path: str, data: bytes, language: str | None, wanted: set[str]) -> Mention | None:
        """`data` at `path` as an answer sees it; None when it cannot name any of `wanted`."""
        if language is None:  # a source file with a NUL in it is still parsed as its language
            named = sorted(n for n in wanted if n.encode() in data)
            return Mention(path, None, binary=is_binary(data), named=named) if named else None
        if not languages.mentions(data, language, wanted):
            return None
        return self.whole(path, data)

    def _folding_files(self) -> list[str]:
        """The work tree's files in a folding language whose text could spell a name other
        than by its bytes, read only when changed since the last question."""
        listed = git.run(self.checkout, "ls-files", "-z", "--cached", "--others", "--exclude-standard").stdout
        paths = [p.decode("utf-8", "surrogateescape") for p in dict.fromkeys(listed.split(b"\0")) if p]
        paths = [p for p in paths if (lang := languages.language_of(p)) and languages.SPECS[lang][3]]
        known: dict[str, tuple[str, str, int]] = {}
        if self._db is not None:
            try:
                known = {row[0]: (row[1], row[2], row[3]) for row in self._db.execute(
                    "SELECT path, stat, blob, folds FROM seen WHERE checkout = ?", (self.checkout,))}
            except sqlite3.Error:
                self._close()
        now = time.time()
        found, fresh = [], []
        for path in paths:
            full = os.path.join(self.checkout, path)
            try:
                info = os.lstat(full)
            except OSError:
                continue
            if not (info.st_mode & 0o170000 == 0o100000):
                continue
            key = f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}"
            cached = known.get(path)
            if cached is not None and cached[0] == key:
                if cached[2]:
                    found.append(path)
                continue
            try:
                with open(full, "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            folds = languages.may_fold(data, languages.language_of(path))
            if folds:
                found.append(path)
            if now - info.st_ctime_ns / 1e9 > RACY_SECONDS:
                fresh.append((self.checkout, path, key, blob_id(data), int(folds)))
        if fresh and self._db is not None:
            try:
                self._db.executemany("INSERT OR REPLACE INTO seen VALUES (?, ?, ?, ?, ?)", fresh)
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

    def whole(self, path: str, data: bytes, blob: str | None = None) -> Mention:
        """`data` at `path`, summarised whatever names it holds."""
        language = languages.language_of(path)
        if language is None:
            return Mention(path, None, blob=blob, binary=is_binary(data))
        blob = blob or blob_id(data)
        try:
            summary = self.summary(data, language, blob)
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
