"""proctor's index of definitions and references: per file content, cached by blob id.

A question names symbols ("where is LegacyStore defined, and who names it?") and is asked of
one tree: a checkout's work tree as it is on disk (tracked and untracked files, less what git
ignores), or a commit's tree. Only the files that could answer are read:

- the tracked files whose bytes hold one of the names (`git grep -F` of the tracked files, with
  submodules; binary and attribute-marked files too: an attribute must not hide a file);
- the untracked files, and the tracked ones flagged assume-unchanged or skip-worktree (whose
  content git's grep takes from the index), read from disk here;
- symbolic links, read through (what the language imports is the target);
- the files whose text spells a name other than by its bytes (languages.spelled_words: an
  encoding, a fold, an escape). Which files those are is kept per path with the file's inode,
  size, mtime and ctime (a ctime no writer can set back), so a question reads only the files
  changed since the last one.

What no listing shows (a nested repository, a link to a directory) and what cannot be read are
answered as doubts, which fail a goal rather than pass it. Each file read is summarised once
per content (languages.summarize) and the summary kept in `symbols.db` under the repository's
cache directory, keyed by the content's git blob id and the grammar's version: a second
grading parses nothing that has not changed. A cache that cannot be opened or read is worked
around, never trusted: the summaries are computed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field

from proctor import errors
from proctor.paths import linked_worktree
from proctor.store.symbol_cache import CacheError, SymbolCache
from proctor.symbols import languages
from proctor.vcs import git

RACY_SECONDS = 2.0  # a file whose status changed this recently may change again unseen
PROGRESS_AT = 100  # files to parse for one question past which stderr says so

# summaries: a content's definitions (JSON) and parse error; names: the lines naming each name
# in it (a question reads only the names it asks about); seen: per checkout, each path's stat
# data when it was last read and the words it spells other than by its bytes (one JSON record:
# read in one go, since row by row it was most of a warm question's cost)
SCHEMA_VERSION = 8  # how the rows of symbols.db (proctor/store/symbol_cache.py) are written


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
    read_as_code: list[str] = field(default_factory=list)  # prose a source file names (include!, require)


@dataclass
class Answer:
    """Every file of one tree that could define or name any of the names asked."""

    names: list[str]
    files: list[Mention] = field(default_factory=list)

    def definitions(self, name: str) -> list[tuple[str, list]]:
        """(path, def record) for each definition of `name` (`Scope.name` names its scope too)."""
        return [(m.path, d) for m in self.files for d in (m.summary or {}).get("defs", ()) if names(d, name)]

    def references(self, name: str) -> list[tuple[str, int]]:
        """(path, line) for each place that names `name`. A use inside a definition of that
        name with a body (a recursive call) counts only while another definition of the name
        exists, since which of them it names cannot then be told."""
        bare = name.rpartition(".")[2]
        defs = self.definitions(bare)
        defined_in = {p for p, _d in defs}
        alone = len(defs) == 1
        out: list[tuple[str, int]] = []
        for m in self.files:
            summary = m.summary or {}
            out.extend((m.path, line) for line in summary.get("refs", {}).get(bare, ()))
            if not (alone and m.path in defined_in):
                out.extend((m.path, line) for line in summary.get("inner", {}).get(bare, ()))
        return sorted(set(out))

    def in_macros(self, name: str) -> list[tuple[str, int]]:
        """(path, line) for each use of `name` inside a macro's tokens (Rust), where an item of
        that name may be made."""
        bare = name.rpartition(".")[2]
        return sorted((m.path, line) for m in self.files for line in (m.summary or {}).get("macro", {}).get(bare, ()))

    def unreadable(self) -> list[Mention]:
        """Files that could name a symbol but could not be read or parsed, and directories
        whose files no listing shows."""
        return [m for m in self.files if m.error]

    def unknown(self) -> list[Mention]:
        """Files with no grammar whose text holds a name as a word: text in another language,
        a binary (a .pyc, an object file), and prose that a source file reads as code."""
        return [
            m
            for m in self.files
            if m.language is None and not m.error and (not languages.is_prose(m.path) or m.read_as_code)
        ]

    def prose(self) -> list[Mention]:
        return [
            m
            for m in self.files
            if m.language is None and languages.is_prose(m.path) and not m.read_as_code and not m.error
        ]


@dataclass
class Scan:
    spelled: dict[str, set[str]] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)
    unseen: list[tuple[str, str]] = field(default_factory=list)  # (path, why its files are not read)


# a name's rows in the names table: its references, its uses inside a namesake's body (#),
# inside a macro's tokens (!), and its definitions (=, as JSON)
_KINDS = {"#": "inner", "!": "macro"}


def _keys(names: set[str]) -> list[str]:
    return [prefix + n for prefix in ("", "#", "!", "=") for n in sorted(names)]


def _only(record: dict, names: set[str]) -> dict:
    """`record` with its uses of `names` alone."""
    return dict(
        record,
        **{key: {n: v for n, v in record.get(key, {}).items() if n in names} for key in ("refs", "inner", "macro")},
    )


def _paths(listed: bytes) -> list[str]:
    return [p.decode("utf-8", "surrogateescape") for p in dict.fromkeys(listed.split(b"\0")) if p]


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def names(definition: list, name: str) -> bool:
    """Whether a definition record is the one `name` asks for: `Name`, or `Scope.Name` whose
    scope ends with `Scope`."""
    scope, _, bare = name.rpartition(".")
    return definition[0] == bare and (not scope or definition[4] == scope or definition[4].endswith("." + scope))


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
        self._db: SymbolCache | None = None
        self._versions: dict[str, str] = {}
        self.cache_path = None
        try:
            if cache_dir is None:
                from proctor.paths import find_checkout, repo_cache_dir

                cache_dir = repo_cache_dir(find_checkout(self.checkout))
            os.makedirs(cache_dir, mode=0o700, exist_ok=True)
            self.cache_path = os.path.join(cache_dir, "symbols.db")
            layout = SCHEMA_VERSION * 100 + int(languages.QUERY_VERSION)  # a new way to fold moves it too
            self._db = SymbolCache.open(self.cache_path, layout)  # another layout's cache is emptied first
        except (OSError, CacheError, errors.ProctorError):
            self._close()  # questions are still answered, without a cache

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
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
            tags = hashlib.sha1(
                (languages.EXTRA_DEFINITIONS.get(language, "") + str(definitions.pattern_count)).encode()
            ).hexdigest()[:12]
            self._versions[language] = (
                f"{languages.QUERY_VERSION}/{ts.__version__}/{lang.name}/"
                f"{'.'.join(map(str, lang.semantic_version or ()))}/{lang.abi_version}/{tags}"
            )
        return self._versions[language]

    def summary(self, data: bytes, language: str, blob: str | None = None, names: set[str] | None = None) -> dict:
        """What `data` (in `language`) defines and names, as languages.summarize records it
        (with `names`, its references to those names only): from the cache by its blob id,
        else parsed now and kept. Raises languages.NoGrammar when the grammar does not load."""
        blob = blob or blob_id(data)
        version = self.version(language)
        ahead = self._ahead.get((blob, language, version))
        if ahead is not None and names is not None and names <= self._ahead_names:
            return _only(ahead, names)
        if self._db is not None:
            try:
                wanted = None if names is None else [n for n in _keys(names) if not n.startswith("=")]
                kept = self._db.get(blob, language, version, wanted)
                if kept:
                    defs, error, found = kept
                    record = {"defs": json.loads(defs), "error": error, "refs": {}, "inner": {}, "macro": {}}
                    for n, lines in found:
                        if not n.startswith("="):
                            record[_KINDS.get(n[:1], "refs")][n.lstrip("#!")] = [int(x) for x in lines.split(",")]
                    return record
            except (CacheError, ValueError):
                self._close()
        record = languages.summarize(data, language)
        self.parsed += 1
        if self._db is not None:
            try:
                by_name: dict[str, list] = {}
                for d in record["defs"]:
                    by_name.setdefault(d[0], []).append(d)
                self._db.put(
                    blob,
                    language,
                    version,
                    json.dumps(record["defs"], separators=(",", ":")),
                    record["error"],
                    [(n, ",".join(map(str, lines))) for n, lines in record["refs"].items()]
                    + [("=" + n, json.dumps(ds, separators=(",", ":"))) for n, ds in by_name.items()]
                    + [
                        (prefix + n, ",".join(map(str, lines)))
                        for prefix, key in (("#", "inner"), ("!", "macro"))
                        for n, lines in record[key].items()
                    ],
                )
            except CacheError:
                self._close()
        if names is not None:
            record = _only(record, names)
        return record

    # -- the work tree ---------------------------------------------------------------------------

    def ask(self, names: list[str]) -> Answer:
        """Every file of the checkout's work tree that could define or name one of `names`.
        Raises ProctorError when git cannot read the tree or a file in it."""
        bare = sorted({n.rpartition(".")[2] for n in names if n})
        answer = Answer(list(names))
        if not bare:
            return answer
        args = ["grep", "-l", "-z", "--no-color", "-F", "--recurse-submodules"]
        for name in bare:
            args += ["-e", name]
        # git's grep of the tracked files, and the listings of the tree, side by side. (With
        # --untracked, git's grep passes over tracked files a .gitignore pattern matches.)
        grep = git.start(self.checkout, *args, "--")
        listing = git.start(self.checkout, "ls-files", "-z", "-v", "--cached", "--others", "--exclude-standard")
        try:
            tagged = _paths(git.finish(listing, "ls-files"))
            untracked = [t[2:] for t in tagged if t[:1] == "?"]
            tracked = [t[2:] for t in tagged if t[:1] != "?"]
            # git's grep reads a flagged entry (assume-unchanged, skip-worktree) from the index,
            # not the disk: those are read here, as the untracked are
            flagged = [t[2:] for t in tagged if t[:1] == "S" or t[:1].islower()]
            wanted = set(bare)
            scan = self._scan(tracked + untracked)
        finally:
            out, err = grep.communicate()
        if grep.returncode not in (0, 1) or err.strip():
            message = err.decode("utf-8", "replace").strip().splitlines()
            raise errors.ProctorError(
                f"git grep could not read every file in {self.checkout}: "
                f"{message[-1] if message else 'exit ' + str(grep.returncode)}"
            )
        hits = set(_paths(out))
        for path in untracked + flagged:  # few, and read here: git's grep of them is a second walk of the tree
            data = self._read(path)
            if isinstance(data, str) or isinstance(data, bytes) and any(n.encode() in data for n in wanted):
                hits.add(path)  # (one that cannot be read is a doubt)
        spelled = {p for p, words in scan.spelled.items() if wanted & words}
        candidates = sorted(hits | spelled | scan.links)
        read = [(path, self._read(path, follow=True)) for path in candidates]
        blobs = {path: blob_id(data) for path, data in read if isinstance(data, bytes)}
        self.prefetch(list(blobs.values()), wanted)
        unparsed = len({b for b in blobs.values()} - {key[0] for key in self._ahead})
        if unparsed >= PROGRESS_AT:  # a first question in a large tree takes a while: say why, once
            import sys

            print(
                f"proctor: indexing {unparsed} files that name {', '.join(bare)} (kept for the next question)",
                file=sys.stderr,
                flush=True,
            )
        for path, data in read:
            if data is None:
                continue
            language = languages.language_of(path)
            mention = (
                Mention(path, language, error=data)
                if isinstance(data, str)
                else self.mention(path, data, language, wanted, blobs.get(path))
            )
            if mention is not None:
                answer.files.append(mention)
        for where, why in scan.unseen:
            answer.files.append(Mention(where, None, error=why))
        self._prose_read_as_code(answer)
        return answer

    def _prose_read_as_code(self, answer: Answer) -> None:
        """A prose file some source names (`include!("legacy.md")`, `#[path = "x.txt"]`,
        `require('./x.txt')`) is read as code: its mention is a doubt, not a note."""
        prose = answer.prose()
        if not prose:
            return
        args = ["grep", "-l", "-z", "--no-color", "-F", "--untracked"]
        for m in prose:
            args += ["-e", os.path.basename(m.path)]
        named = git.run(self.checkout, *args, "--", check=False).stdout
        naming = [p for p in _paths(named) if languages.language_of(p)]
        if not naming:
            return
        texts = {p: self._read(p, follow=True) for p in naming}  # each source read once
        for m in prose:
            base = os.path.basename(m.path)
            by = [p for p in naming if isinstance(data := texts[p], bytes) and base.encode() in data]
            if by:
                m.read_as_code = by

    def prefetch(self, blobs: list[str], names: set[str]) -> None:
        """The cached summaries of `blobs` (their references to `names`), read in two queries
        for summary() to take; what the cache does not hold is parsed there."""
        self._ahead = {}
        if self._db is None or not blobs:
            return
        try:
            # the definitions of the names asked only (a large file's full list is not decoded)
            summaries, rows = self._db.many(blobs, _keys(names))
            for blob, language, version, error in summaries:
                self._ahead[(blob, language, version)] = {
                    "defs": [],
                    "error": error,
                    "refs": {},
                    "inner": {},
                    "macro": {},
                }
            for blob, language, version, name, lines in rows:
                record = self._ahead.get((blob, language, version))
                if record is None:
                    continue
                if name.startswith("="):
                    record["defs"].extend(json.loads(lines))
                else:
                    record[_KINDS.get(name[:1], "refs")][name.lstrip("#!")] = [int(x) for x in lines.split(",")]
            self._ahead_names = set(names)
        except (CacheError, ValueError):
            self._ahead = {}
            self._close()

    def _read(self, path: str, follow: bool = False) -> bytes | str | None:
        """A file's bytes; None for what is not a regular file (a link, unless `follow`); why,
        when it cannot be read."""
        full = os.path.join(self.checkout, path)
        try:
            if (not follow and os.path.islink(full)) or not os.path.isfile(full):
                return None
            with open(full, "rb") as handle:
                return handle.read()
        except OSError as exc:
            return f"it cannot be read ({exc.strerror})"

    def mention(
        self, path: str, data: bytes, language: str | None, wanted: set[str], blob: str | None = None
    ) -> Mention | None:
        """`data` at `path` as an answer sees it; None when it cannot name any of `wanted`."""
        if language is None:
            language = languages.by_shebang(data)  # a script with no extension
        if language is None:  # (a source file with a NUL in it is still parsed as its language)
            binary = is_binary(data)
            spelled = languages.spelled_words(data, None)
            # a binary's names sit between length bytes and tags (a .pyc): any occurrence counts
            named = sorted(n for n in wanted if (n.encode() in data if binary else _as_word(n, data)) or n in spelled)
            return Mention(path, None, binary=binary, named=named) if named else None
        if not languages.mentions(data, language, wanted):
            return None
        return self.whole(path, data, blob, names=wanted, language=language)

    def _scan(self, paths: list[str]) -> Scan:
        """What the listing alone does not say about the tree's files: the words each spells
        other than by its bytes (languages.spelled_words), its symbolic links, and directories
        whose files no listing shows (a nested repository, a link to a directory). A file is
        read only when its stat data moved since the last question: the words are kept per path."""
        scan = Scan()
        known: dict = {}
        if self._db is not None:
            try:
                paths_kept = self._db.seen(self.checkout)
                if paths_kept:
                    known = json.loads(paths_kept)  # not marshal: the cache is read, never trusted to load
                    if not isinstance(known, dict):
                        known = {}
            except (CacheError, ValueError, TypeError):
                known = {}
        now = time.time()
        kept: dict = {}
        base = self.checkout + os.sep
        lstat = os.lstat
        dirs = set()
        for path in paths:
            if path.endswith("/"):  # ls-files shows a nested repository as its directory
                if not linked_worktree(self.checkout, path.rstrip("/")):  # (another checkout, not content)
                    scan.unseen.append((path, "a nested repository, whose files no listing of this tree shows"))
                continue
            try:
                info = lstat(base + path)
            except OSError:
                continue
            mode = info.st_mode & 0o170000
            if mode == 0o120000:
                if os.path.isdir(base + path):
                    scan.unseen.append((path, "a symbolic link to a directory, whose files no tree holds"))
                else:
                    scan.links.add(path)
                continue
            if mode != 0o100000:
                continue
            slash = path.rfind("/")
            if slash > 0:
                dirs.add(path[:slash])
            key = [info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns]
            cached = known.get(path)
            if cached is not None and cached[0] == key:
                kept[path] = cached
                if cached[1]:
                    scan.spelled[path] = set(cached[1].split(" "))
                continue
            try:
                with open(base + path, "rb") as handle:
                    data = handle.read()
            except OSError as exc:
                scan.unseen.append((path, f"it cannot be read ({exc.strerror})"))
                continue
            words = languages.spelled_words(data, languages.language_of(path))
            if words:
                scan.spelled[path] = words
            if now - info.st_ctime_ns / 1e9 > RACY_SECONDS:
                kept[path] = [key, " ".join(sorted(words))]
        for directory in sorted(dirs):  # tracked files inside a directory made a repository of its own
            if os.path.lexists(base + directory + "/.git") and not linked_worktree(self.checkout, directory):
                scan.unseen.append(
                    (
                        directory + "/",
                        "a directory holding a repository of its own, whose files git's grep of this tree passes over",
                    )
                )
        if kept != known and self._db is not None:
            try:
                self._db.see(self.checkout, json.dumps(kept, separators=(",", ":")))
            except CacheError:
                self._close()
        return scan

    # -- a commit's tree -------------------------------------------------------------------------

    def summaries_at(self, revision: str, paths: list[str]) -> dict[str, Mention]:
        """Each of `paths` as `revision` holds it, summarised where its language has a grammar
        (a symbolic link as the file it leads to there); a path the revision does not hold is
        left out. Paths are literal: `:legacy.go` is a file's name, not pathspec magic."""
        if not paths:
            return {}
        entries = self._tree_entries(revision, paths)
        links = {p: blob for p, (mode, blob) in entries.items() if mode == b"120000"}
        contents = read_blobs(self.checkout, [blob for _mode, blob in entries.values()])
        targets = {}
        for path, blob in links.items():
            target = os.path.normpath(
                os.path.join(os.path.dirname(path), contents.get(blob, b"").decode("utf-8", "surrogateescape"))
            )
            if not target.startswith(("..", "/")):
                targets[path] = target
        if targets:
            led = self._tree_entries(revision, sorted(set(targets.values())))
            contents.update(read_blobs(self.checkout, [blob for _mode, blob in led.values()]))
            for path, target in targets.items():
                if target in led and led[target][0] != b"120000":
                    entries[path] = led[target]
        out = {}
        for path, (mode, blob) in entries.items():
            if mode == b"120000":
                out[path] = Mention(
                    path,
                    languages.language_of(path),
                    blob=blob,
                    error="a symbolic link at the checkpoint whose file is not in the tree",
                )
                continue
            out[path] = self.whole(path, contents.get(blob, b""), blob)
        return out

    def _tree_entries(self, revision: str, paths: list[str]) -> dict[str, tuple[bytes, str]]:
        listed = git.run(
            self.checkout, "--literal-pathspecs", "ls-tree", "-z", "--full-tree", revision, "--", *paths
        ).stdout
        entries: dict[str, tuple[bytes, str]] = {}
        for record in listed.split(b"\0"):
            meta, _, name = record.partition(b"\t")
            parts = meta.split(b" ")
            if len(parts) == 3 and parts[1] == b"blob":
                entries[name.decode("utf-8", "surrogateescape")] = (parts[0], parts[2].decode())
        return entries

    def whole(
        self,
        path: str,
        data: bytes,
        blob: str | None = None,
        names: set[str] | None = None,
        language: str | None = None,
    ) -> Mention:
        """`data` at `path`, summarised (its references to `names` only, when given)."""
        language = language or languages.language_of(path) or languages.by_shebang(data)
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
        contents[blob] = out[at : at + size]
        at += size + 1
    return contents
