"""The judge: walks the parsed commands of a script in order, carrying the shell's state, and
records what they write on a proctor.guard.shell.Writes.

_Judge expands each simple command (braces, ~, $PWD and $HOME), unwraps it (_WRAPPERS), runs
builtins (_BUILTINS) and shell functions, follows cd, links made in the same call, /proc/self/cwd
and /dev/fd/N, and looks the program up in the writer tables (proctor.guard.shell_writers):
the read list, a handler that names what it writes, or `unknown` with a short reason. It parses
every substitution and nested shell where it runs (proctor.guard.shell_lexer).
Core: the standard library only, and cheap at import, because the hook runs it on every tool call.
"""

from __future__ import annotations

import os

from proctor.guard.shell_lexer import (
    _MAX_NESTING,
    _MAX_STEPS,
    Command,
    ParseError,
    Word,
    _braces,
    _Budget,
    _is_assignment,
    _Parser,
    _quote,
    _r,
    _subscript_code,
    _TooLarge,
    _unquoted_glob,
    _why,
)
from proctor.guard.shell_writers import (
    _BUILDERS,
    _BUILTINS,
    _CODE_VARIABLES,
    _COMMAND_VARIABLES,
    _INTERPRETERS,
    _PROGRAMS,
    _READS,
    _WRAPPERS,
    _Break,
    _Exit,
    _program,
    _Return,
)

# true only for the type checker (mypy reads a name TYPE_CHECKING as true): no import at run time
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal

    from proctor.guard.shell import Writes


_MAX_UNKNOWN = 12  # unknown writes described; past it they are counted
_MAX_GLOB = 256  # paths a glob of a directory part may name
_MAX_NAMED = 2000  # paths Writes.named keeps
_MAX_LINK_SCAN = 2000  # entries a copy of a tree is searched for symbolic links

_OUTPUT_REDIRECTS = frozenset((">", ">>", ">|", "&>", "&>>", "<>"))
_DEVICES = frozenset(
    (
        "/dev/null",
        "/dev/stdout",
        "/dev/stderr",
        "/dev/stdin",
        "/dev/tty",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
    )
)
_SHELLS = frozenset(("sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "yash", "fish", "rbash", "tcsh", "csh"))


_OWN_PROCESS = frozenset(("self", "thread-self", "$$", "${$}", "$BASHPID", "${BASHPID}"))


def _through_fd(text: str) -> tuple[bool, str, str] | None:
    """A path through a descriptor (/dev/fd/N/..., /dev/stdin/..., /proc/self/fd/N/...): whether
    the descriptor is the shell's own, its number, and the rest of the path ("" for none)."""
    if not text.startswith(("/dev", "/proc", "//", "/.")):
        return None
    parts = [p for p in text.split("/") if p and p != "."]
    if ".." in parts[: 3 if parts[:1] == ["proc"] else 2]:  # a `..` before the descriptor's number
        return _through_fd(os.path.normpath("/" + "/".join(parts)))
    if len(parts) < 2:
        return None
    if parts[0] == "dev":
        if parts[1] == "fd" and len(parts) >= 3:
            return True, parts[2], "/".join(parts[3:])
        if parts[1] in ("stdin", "stdout", "stderr"):
            return True, str(("stdin", "stdout", "stderr").index(parts[1])), "/".join(parts[2:])
        return None
    if parts[0] == "proc" and len(parts) >= 4 and parts[2] == "fd":
        return parts[1] in _OWN_PROCESS, parts[3], "/".join(parts[4:])
    return None


class _Judge:
    """Judges parsed commands in order, carrying the shell's state: the directory each scope is
    in, functions, aliases, links made so far, and the exit status of true, false and cd."""

    def __init__(self, found: Writes) -> None:
        self.found = found
        self.budget = _Budget(_MAX_STEPS)
        self.functions: dict[str, list[Command]] = {}
        self.aliases: dict[str, tuple[str, bool, int, int]] = {}  # name -> (value, dynamic, script, line)
        self.expand_aliases = False
        self.expanding: set[str] = set()
        self.links: dict[str, list[str]] = {}  # a path made a link in this call -> what it is another name for
        self.made: set[str] = set()  # directories that writes so far create or write into
        self.home: str | None = os.path.expanduser("~")
        self.cdpath = False
        self.dirstack: list[str | None] = []
        self.depth = 0
        self.scripts = 0  # ids of the scripts judged, for alias expansion
        self.script_id = 0
        self.status: bool | None = None  # the last command's exit status, when it is known
        self.acts = 0  # writes, unknowns and non-reads so far
        self.positional: list[str] | None = None  # $1... when known
        self.prefix: dict[str, Word] = {}  # the assignments prefixed to the command being judged
        self.extglob = False  # a script seen names extglob: its patterns are words
        self.fds: dict[str, str] = {}  # a descriptor opened for reading (`exec 3<dir`) -> what it opened
        self.physical = False  # set -P: cd resolves links
        self.disabled: set[str] = set()  # builtins turned off by enable -n
        self.unset_maybe: set[str] = set()  # functions `unset NAME` may have removed (or a variable)
        self.tmpdir: str | None | Literal[False] = False  # TMPDIR as this script set it; False: as it was
        self.in_function = 0  # function bodies being run
        self.loops = 0  # loops open around the command being judged (in this function, this shell)
        self.copied_trees: list[str] = []  # trees copied with their links, too large to search

    # -- what is found --------------------------------------------------------------------

    def unknown(self, what: str) -> None:
        found = self.found
        self.acts += 1
        found.read = False
        if what in found._unknown_seen:
            return
        found._unknown_seen.add(what)
        if len(found.unknown) >= _MAX_UNKNOWN:
            found._more += 1
        else:
            found.unknown.append(what)

    def quiet(self) -> None:
        """The command is no read, though it writes nothing in the work tree."""
        self.acts += 1
        self.found.read = False

    def add(self, path: str, follow: bool = True) -> None:
        """Record a written path, and (when the write goes through links) what links made in this
        call make it another name for: those whose directory exists, since a write elsewhere fails."""
        self.acts += 1
        self.found.read = False
        self._record(path)
        if self.copied_trees and follow:
            for tree in self.copied_trees:
                if path.startswith(tree + "/"):
                    self.unknown(
                        f"{path}: in a copy of a tree too large to search for the links it copied; "
                        f"where one leads proctor cannot tell"
                    )
                    break
        if self.links and follow:
            for other in self._aliases(path):
                if other not in self.found._seen and (
                    os.path.dirname(other) in self.made or os.path.isdir(os.path.dirname(other))
                ):
                    self._record(other)

    def _record(self, path: str) -> None:
        found = self.found
        if path in found._seen:
            return
        found._seen.add(path)
        found.paths.append(path)
        parent = path
        while True:
            parent = os.path.dirname(parent)
            if parent in self.made or parent == "/" or not parent:
                break
            self.made.add(parent)
        self.made.add(path)

    def name(self, word: Word, cwd: str | None) -> None:
        """Keep a path the script names (read or written) in found.named: absolute, a glob as its pattern."""
        found = self.found
        if word.dynamic or len(found.named) >= _MAX_NAMED:
            return
        text = word.text
        if "=" in text:
            if text[0] == "-" or _is_assignment(word):
                text = text.split("=", 1)[1]
        elif text[:1] == "-":
            return
        if not text or text in _DEVICES:
            return
        if text[0] != "/":
            if cwd is None:
                return
            text = (cwd if cwd != "/" else "") + "/" + text
        if "/." in text or "//" in text or text[-1] == "/" or text.startswith(("/dev/", "/proc/")):
            path = self.resolve(text)
        else:
            path = text  # plain already
        if path is not None and path not in found._named_seen:
            found._named_seen.add(path)
            found.named.append(path)

    def resolve(self, text: str) -> str | None:
        """An absolute path made plain: through a directory held on a descriptor, and `..` taken
        physically (as the kernel does). None when it goes through a descriptor proctor cannot see."""
        through = _through_fd(text)
        if through is not None:
            own, fd, rest = through
            held = self.fds.get(fd) if own else None
            if held is None:
                return None if rest else text
            text = held + "/" + rest if rest else held
        if "/../" in text or text.endswith("/.."):
            head, _, tail = text.rpartition("/")
            head = os.path.realpath(head) if tail != ".." else os.path.realpath(text)
            return head if tail == ".." else os.path.normpath(os.path.join(head, tail))
        return os.path.normpath(text)

    def _aliases(self, path: str) -> list[str]:
        """Every other name a write of `path` reaches through links made in this call."""
        out: list[str] = []
        todo = [path]
        while todo and len(out) < 64:
            for other in self._through_links(todo.pop()):
                if other != path and other not in out:
                    out.append(other)
                    todo.append(other)
        return out

    def _through_links(self, path: str) -> list[str]:
        parts = path.split("/")
        for i in range(len(parts), 1, -1):
            targets = self.links.get("/".join(parts[:i]))
            if targets:
                rest = parts[i:]
                return [os.path.normpath(os.path.join(t, *rest)) if rest else t for t in targets]
        return []

    def target(self, word: Word, cwd: str | None, who: str, into: str | None = None) -> str | None:
        """The absolute path a write names; "" for a device or a process substitution; None when
        it cannot be named (recorded as unknown)."""
        text = word.text
        if text.startswith("/proc/"):
            m = _r().proc.match(text)
            if m is not None:
                who_pid, kind = m.groups()
                rest = text[m.end() :]
                if kind == "cwd" and who_pid in ("self", "thread-self", "$$", "${$}", "$BASHPID", "${BASHPID}"):
                    if cwd is None:
                        self.unknown(f"{who} {text}: after a cd proctor cannot follow")
                        return None
                    word = Word(cwd + rest, "$" in rest or "`" in rest, raw=word.raw)
                    text = word.text
                else:
                    self.unknown(
                        f"{who} {text}: a path through another process's {'directory' if kind == 'cwd' else 'root'}"
                    )
                    return None
        through = _through_fd(text)
        if through is not None:
            own, fd, rest = through
            if not rest:
                if own:
                    return ""  # a stream
                self.unknown(f"{who} {text}: a descriptor of another process")
                return None
            held = self.fds.get(fd) if own else None
            if held is None:
                self.unknown(f"{who} {text}: a path through descriptor {fd}, whose directory proctor cannot see")
                return None
            word = Word(held + "/" + rest, word.dynamic, raw=word.raw, why=word.why)
            text = word.text
        if text.startswith(("<(", ">(")) and word.raw.startswith(("<(", ">(")):
            return ""  # a pipe into a process substitution, judged as a script of its own
        if word.dynamic or not text:
            self.unknown(f"{who} {text or 'to an empty name'}: {_why(word)}")
            return None
        if text in _DEVICES or text.startswith("/dev/pts/"):
            return ""
        if not text.startswith("/"):
            if cwd is None:
                self.unknown(f"{who} {text}: after a cd proctor cannot follow")
                return None
            text = cwd.rstrip("/") + "/" + text
        if "/../" in text or text.endswith("/.."):
            head, _, tail = text.rpartition("/")
            head = os.path.realpath(head) if tail != ".." else os.path.realpath(text)
            path = head if tail == ".." else os.path.normpath(os.path.join(head, tail))
        else:
            path = os.path.normpath(text)
        if into is not None and os.path.isdir(path):
            path = os.path.normpath(path + "/" + into)
        return path

    def write(
        self, word: Word, cwd: str | None, who: str, into: str | None = None, stream: bool = False, follow: bool = True
    ) -> str | None:
        """Record a write of `word`; a device or a pipe is no write, and keeps a read a read when
        `stream` (output, not a file operation)."""
        path = self.target(word, cwd, who, into)
        if path == "":
            if not stream:
                self.quiet()
            return None
        if path is None:
            return None
        if word.text.endswith(("/", "/.")) and into is None:
            follow = True  # `rm -r link/`: a trailing slash resolves the link
        if _unquoted_glob(word.raw) and any(ch in word.text for ch in "*?["):
            self._glob(path, who, follow)
        self.add(path, follow)
        if not follow:
            self.found.no_follow.add(path)
        return path

    def _glob(self, pattern: str, who: str, follow: bool) -> None:
        """A glob in a written path: a match through a link is written where it leads, and a
        pattern in a directory part names what it matches."""
        import glob

        head = os.path.dirname(pattern)
        in_dir = any(ch in head for ch in "*?[")
        if not in_dir and not follow:
            return
        try:
            matches = glob.glob(pattern)
        except (OSError, ValueError, RecursionError):
            return
        if in_dir and len(matches) > _MAX_GLOB:
            self.unknown(f"{who} {pattern}: a pattern matching too many paths to judge")
            return
        for match in matches[: _MAX_GLOB * 16]:
            if in_dir or (follow and os.path.islink(match)):
                self.add(os.path.normpath(match))

    def directory(self, word: Word, cwd: str | None) -> str | None:
        """The directory a word names (for cd, -C and the like); None when it cannot be known."""
        text = word.text
        if text.startswith("/proc/"):
            m = _r().proc.match(text)
            if m is not None:
                if m.group(2) == "cwd" and m.group(1) in ("self", "thread-self", "$$", "${$}") and cwd is not None:
                    rest = text[m.end() :]
                    return None if "$" in rest else os.path.normpath(cwd + rest)
                return None
        through = _through_fd(text)
        if through is not None:
            held = self.fds.get(through[1]) if through[0] else None
            if held is None:
                return None
            text = held + "/" + through[2] if through[2] else held
        if word.dynamic or not text:
            return None
        if not text.startswith("/"):
            if cwd is None:
                return None
            text = cwd.rstrip("/") + "/" + text
        return os.path.normpath(text)

    def link(self, link_path: str, target: Word, cwd: str | None, symbolic: bool, relative: bool) -> None:
        """A link made at `link_path`: writes through it later write its target too."""
        if target.dynamic or cwd is None and not target.text.startswith("/"):
            self.unknown(f"a link at {link_path} to {target.text}: its target is held in a variable")
            return
        text = target.text
        if text.startswith("/"):
            targets = [os.path.normpath(text)]
        elif symbolic and not relative:
            # the kernel reads it from the link's directory; the writer may have meant the cwd
            targets = [os.path.normpath(os.path.dirname(link_path) + "/" + text)]
            if cwd is not None:
                from_cwd = os.path.normpath(cwd + "/" + text)
                if from_cwd not in targets:
                    targets.append(from_cwd)
        else:
            targets = [os.path.normpath((cwd or "/") + "/" + text)]
        self.links[link_path] = [t for t in targets if t != link_path]

    def copied_links(self, path: str, source: Word, cwd: str | None) -> None:
        """`cp -P source path`: the symbolic links among what is copied are copied as links."""
        if cwd is None and not source.text.startswith("/"):
            return
        origin = os.path.normpath(os.path.join(cwd or "/", source.text))
        if origin in self.links:
            self.links[path] = list(self.links[origin])
            return
        if os.path.islink(origin):
            self._copied_link(origin, path)
            return
        if not os.path.isdir(origin):
            return
        seen = 0
        todo = [(origin, path)]
        while todo:
            here, there = todo.pop()
            try:
                entries = list(os.scandir(here))
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > _MAX_LINK_SCAN:
                    self.copied_trees.append(path)
                    return
                if entry.is_symlink():
                    self._copied_link(entry.path, there + "/" + entry.name)
                elif entry.is_dir(follow_symlinks=False):
                    todo.append((entry.path, there + "/" + entry.name))

    def _copied_link(self, origin: str, copy: str) -> None:
        try:
            text = os.readlink(origin)
        except (OSError, ValueError):
            return
        target = text if text.startswith("/") else os.path.dirname(copy) + "/" + text
        self.links[copy] = [os.path.normpath(target)]

    # -- scripts and commands -------------------------------------------------------------

    def script(self, text: str, cwd: str | None, oldpwd: str | None, child: bool) -> tuple[str | None, str | None]:
        """Judge a script run by a shell in `cwd`: a new shell (`child`) or this one (eval, an
        alias); the (cwd, oldpwd) it ends in."""
        if self.depth > _MAX_NESTING:
            self.unknown("shell nested too deeply to read")
            return cwd, oldpwd
        self.extglob = self.extglob or "extglob" in text
        try:
            parser = _Parser(text, self.budget, extglob=self.extglob)
            commands = parser.parse()
        except ParseError as exc:
            self.unknown(f"unparseable shell ({exc})")
            return cwd, oldpwd
        self.found.heredocs.extend(parser.heredocs)
        self.scripts += 1
        saved = self.script_id, self.in_function, self.loops
        self.script_id = self.scripts
        if child:
            self.in_function = self.loops = 0  # a new shell: `return` or `break` there ends nothing of this one
        self.depth += 1
        try:
            return self.run(commands, cwd, oldpwd)
        except (_Exit, _Return, _Break):
            if not child:
                raise
            return cwd, oldpwd
        finally:
            self.depth -= 1
            self.script_id, self.in_function, self.loops = saved

    def run(self, commands: list[Command], cwd: str | None, oldpwd: str | None) -> tuple[str | None, str | None]:
        """Judge commands in order; each scope starts where its parent is. Returns the state of
        the root scope at the end."""
        here: dict[tuple, tuple[str | None, str | None]] = {(): (cwd, oldpwd)}
        # open if/while/for: [skipping before it, a branch surely taken, this branch skipped, sure, until,
        # a loop, left by break]
        frames: list[list] = []
        skipping = False
        previous: Command | None = None
        self.status = True
        loops = self.loops
        state: tuple[str | None, str | None] | None  # where a command's scope is: (cwd, oldpwd)
        for command in commands:
            kind = command.kind
            if kind not in ("simple", "test", "function", "opaque"):
                if kind == "for" and command.cond and not skipping:
                    state = here.get(command.scope) or here[()]
                    for word in command.cond:
                        self.name(self.expand_one(word, state[0], state[1]), state[0])
                skipping = self._branch(kind, frames, skipping)
                self.loops = loops + sum(1 for f in frames if f[5])
                previous = None
                continue
            if skipping:
                continue
            if (
                previous is not None
                and previous.next_op in ("&&", "||")
                and command.scope == previous.scope
                and self.status is not None
                and self.status != (previous.next_op == "&&")
            ):
                previous = command if command.next_op in ("&&", "||") else None
                continue  # it cannot run: the status before it decides
            scope = command.scope
            state = here.get(scope)
            if state is None:
                probe = scope
                while state is None:
                    probe = probe[:-1]
                    state = here.get(probe)
            sure = (
                scope == ()
                and not any(not f[3] for f in frames)
                and not (previous is not None and previous.next_op in ("&&", "||") and self.status is None)
            )
            try:
                new = self.command(command, state[0], state[1], sure)
            except _Exit:
                if scope == () and sure:
                    raise
                new = None
            except _Return as exc:
                if scope == () and sure:
                    if exc.state is None:
                        exc.state = here[()]
                    raise
                new = None
            except _Break as exc:
                if scope != () or not sure:
                    new = None
                else:
                    open_loops = [k for k, f in enumerate(frames) if f[5]]
                    if not open_loops:
                        if exc.state is None:
                            exc.state = here[()]
                        raise  # an eval's break, for the loop around the eval
                    if exc.state is not None:
                        here[()] = exc.state
                    left = open_loops[-min(exc.levels, len(open_loops))]
                    frames[left][6] = True
                    for f in frames[left + 1 :]:
                        f[0] = True  # what is open inside the loop is skipped to its end
                    skipping = True
                    previous = None
                    continue
            if command.negated and self.status is not None:
                self.status = not self.status
            if new is not None:
                here[scope] = new
            previous = command
        self.loops = loops
        return here[()]

    def _branch(self, kind: str, frames: list[list], skipping: bool) -> bool:
        status = self.status
        if kind in ("if", "while", "until", "for", "case"):
            frames.append([skipping, False, False, kind != "case", kind == "until", kind not in ("if", "case"), False])
            return skipping
        if not frames:
            return skipping
        frame = frames[-1]
        if kind in ("then", "do"):
            known = status if not frame[4] or status is None else not status
            if frame[0] or frame[1] or known is False:
                frame[2] = True
                return True
            frame[2] = False
            if known is True:
                frame[1] = True
            else:
                frame[3] = False
            return False
        if kind == "elif":
            return frame[0] or frame[1]
        if kind == "else":
            if frame[0] or frame[1]:
                return True
            frame[3] = frame[3] and frame[2]
            return False
        frames.pop()
        self.status = None
        return frame[0]

    def command(
        self, command: Command, cwd: str | None, oldpwd: str | None, sure: bool
    ) -> tuple[str | None, str | None] | None:
        """Judge one command; the (cwd, oldpwd) it leaves its scope in, or None for no change."""
        budget = self.budget
        budget.left -= 1
        if budget.left < 0:
            raise _TooLarge()
        loops = self.loops
        for sub in command.nested:
            try:
                self.run(sub, cwd, oldpwd)
            except (_Exit, _Return, _Break):
                pass
            self.loops = loops
        self.status = None
        if command.kind == "function":
            self.functions[command.name or ""] = command.body
            self.unset_maybe.discard(command.name or "")
            self.status = True
            if command.name == "command_not_found_handle":
                self.unknown(
                    "command_not_found_handle: bash runs it for any program it cannot find; proctor "
                    "cannot tell what it writes"
                )
            return None
        if command.kind == "opaque":
            self.unknown(command.name or "code proctor cannot see")
            return None
        fds = command.fds
        for k, (op, target) in enumerate(command.redirects):
            fd = fds[k] if k < len(fds) else ""
            if op in ("<<", "<<-", "<<<"):
                continue
            if op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
                number = fd or ("0" if op == "<&" else "1")
                if target.text == "-" or target.text not in self.fds:
                    self.fds.pop(number, None)
                else:
                    self.fds[number] = self.fds[target.text]
                continue
            target = self.expand_one(target, cwd, oldpwd)
            self.name(target, cwd)
            if op == "<":
                held = self.directory(target, cwd)
                if held is not None:
                    self.fds[fd or "0"] = self.resolve(held) or held
                else:
                    self.fds.pop(fd or "0", None)
            else:
                self.fds.pop(fd or ("0" if op == "<>" else "1"), None)
            if op in _OUTPUT_REDIRECTS or op == ">&":
                self.write(target, cwd, op, stream=True)
        if command.kind == "test":
            for k, word in enumerate(command.cond[:-1]):
                if word.text == "-v" and _subscript_code(command.cond[k + 1].text):
                    self.unknown(f"[[ -v {command.cond[k + 1].text[:40]} ]]: a subscript that runs a command")
            return None
        if not command.words:
            if not command.redirects:
                self.status = True
            return None
        words = self.expand(command.words, cwd, oldpwd)
        if words is None:
            return None
        return self.simple(words, command, cwd, oldpwd, sure)

    def expand(self, words: list[Word], cwd: str | None, oldpwd: str | None) -> list[Word] | None:
        out: list[Word] = []
        for word in words:
            raw = word.raw
            if "{" in raw and ("," in raw or ".." in raw) and not _is_assignment(word):
                pieces = _braces(raw)
                if pieces is None:
                    self.unknown(f"{raw[:60]}: a brace expansion too large to judge")
                    return None
                if len(pieces) > 1 or pieces[0] != raw:
                    for piece in pieces:
                        out.append(self.relex(piece, cwd, oldpwd))
                    continue
            out.append(self.expand_one(word, cwd, oldpwd))
        return out

    def expand_one(self, word: Word, cwd: str | None, oldpwd: str | None) -> Word:
        raw = word.raw
        if raw.startswith("~") or (
            word.dynamic and ("PWD" in raw or "HOME" in raw or (self.positional is not None and "$" in raw))
        ):
            return self.relex(raw, cwd, oldpwd)
        return word

    def relex(self, raw: str, cwd: str | None, oldpwd: str | None) -> Word:
        """A word read again: ~, $PWD, $HOME, $OLDPWD and known positional parameters resolved."""
        env: dict[str, str] = {}
        if cwd is not None:
            env["PWD"] = cwd
        if self.home is not None:
            env["HOME"] = self.home
        if oldpwd is not None:
            env["OLDPWD"] = oldpwd
        if self.positional is not None:
            for k, value in enumerate(self.positional[:9]):
                env[str(k + 1)] = value
            env["#"] = str(len(self.positional))
        dynamic_tilde = False
        if raw.startswith("~"):
            end = raw.find("/")
            prefix = raw[1:] if end < 0 else raw[1:end]
            rest = "" if end < 0 else raw[end:]
            if all(ch.isalnum() or ch in "._-+" for ch in prefix):
                home = {"": self.home, "+": cwd, "-": oldpwd}.get(prefix, "")
                if home == "":
                    home = os.path.expanduser("~" + prefix)  # ~user; unchanged (literal) when there is none
                if home is None:
                    dynamic_tilde = True
                elif not home.startswith("~"):
                    raw = _quote(home) + rest
        try:
            parser = _Parser(raw, self.budget, env=env)
            word = parser._word()
            if parser.pos != len(raw):
                return Word(raw, True, raw=raw)
        except ParseError:
            return Word(raw, True, raw=raw)
        if dynamic_tilde:
            word.dynamic = True
        return word

    def simple(
        self, words: list[Word], command: Command, cwd: str | None, oldpwd: str | None, sure: bool
    ) -> tuple[str | None, str | None] | None:
        i = 0
        prefix: dict[str, Word] = {}
        saved = self.home, self.tmpdir
        while i < len(words) and _is_assignment(words[i]):
            name = self.assign(words[i], cwd, oldpwd, standalone=False)
            prefix[name] = words[i]
            i += 1
        for k, word in enumerate(words):
            if k != i or "/" in word.text:  # not a program's name, looked up in PATH
                self.name(word, cwd)
        if i == len(words):
            self.home, self.tmpdir = saved
            for word in words:
                self.assign(word, cwd, oldpwd, standalone=True)
            self.status = True
            return None
        temporary = ["HOME" in prefix or "TMPDIR" in prefix]
        try:
            return self._simple(words, i, prefix, command, cwd, oldpwd, sure, temporary)
        finally:
            if temporary[0]:
                self.home, self.tmpdir = saved  # HOME=x cmd: for that command only

    def _simple(
        self,
        words: list[Word],
        i: int,
        prefix: dict[str, Word],
        command: Command,
        cwd: str | None,
        oldpwd: str | None,
        sure: bool,
        temporary: list[bool],
    ) -> tuple[str | None, str | None] | None:
        argv = words[i:]
        first = argv[0]
        if first.raw in self.aliases and first.raw not in self.expanding and self.aliases_apply(first.raw, command):
            return self.alias(first.raw, argv[1:], cwd, oldpwd)
        self.prefix = prefix
        saved = self.home, self.tmpdir
        unwrapped = self.unwrap(argv, cwd, oldpwd)
        if (self.home, self.tmpdir) != saved:
            temporary[0] = True  # env HOME=x cmd
        if unwrapped is None:
            return None
        argv, cwd_run, how = unwrapped
        if cwd_run != cwd:
            for word in argv[0 if "/" in argv[0].text else 1 :]:
                self.name(word, cwd_run)
        texts = [w.text for w in argv]
        tail = words[len(words) - len(argv) :]
        raw = [w.text for w in words]
        if len(tail) != len(argv) or any(a is not b for a, b in zip(tail, argv)):
            raw += texts
        if how != "script":
            self.found.commands.append(texts)
            self.found.stdins.append(None if command.stdin_dynamic else command.stdin_script)
        self.found.simple.append((raw, texts, command.background))
        if how == "script":
            if any(w.dynamic for w in argv):
                self.unknown(f"{' '.join(texts)[:60]}: a command built from an expansion")
            else:
                self.script(" ".join(texts), cwd_run, oldpwd, child=True)
            return None
        if how == "xargs":
            # the names it reads are more operands
            argv = argv + [Word("{}", True, why="names xargs reads from its input")]
        result = self.program(argv, command, cwd_run, oldpwd, how, sure)
        if cwd_run != cwd:
            return None
        return result

    def aliases_apply(self, name: str, command: Command) -> bool:
        value, dynamic, script_id, line = self.aliases[name]
        if script_id == self.script_id and command.line <= line:
            return False  # bash reads a whole line before running it
        if not self.expand_aliases:
            self.unknown(f"{name}: an alias, run only where the shell expands aliases")
            return False
        return True

    def alias(self, name: str, args: list[Word], cwd: str | None, oldpwd: str | None):
        value, dynamic, _, _ = self.aliases[name]
        if dynamic:
            self.unknown(f"{name}: an alias built from an expansion")
            return None
        text = value + " " + " ".join(w.raw if w.dynamic else _quote(w.text) for w in args)
        self.expanding.add(name)
        try:
            return self.script(text, cwd, oldpwd, child=False)
        finally:
            self.expanding.discard(name)

    def assign(self, word: Word, cwd: str | None, oldpwd: str | None, standalone: bool) -> str:
        """An assignment (a prefix, a standalone one, or an argument of export and its kin): a
        variable that makes later programs run code is unknown. Returns its name."""
        m = _r().assignment.match(word.raw)
        name = m.group(1) if m else word.text.split("=", 1)[0]
        if word.dynamic and ("PWD" in word.raw or "HOME" in word.raw or word.raw.find("~") > 0):
            head, _, tail = word.raw.partition("=")
            value_word = self.relex(tail, cwd, oldpwd) if tail else Word("")
        else:
            value_word = Word(word.text.split("=", 1)[1] if "=" in word.text else "", word.dynamic)
        value = value_word.text
        if name in _CODE_VARIABLES and value not in ("", "/dev/null"):
            harmless = (
                not value_word.dynamic
                and name in _COMMAND_VARIABLES
                and (_program(value.split()[0]) if value.split() else "") in _READS | {"less", "more"}
            )
            if not harmless:
                self.unknown(f"{name}={value[:40]}: makes later programs run it; proctor cannot tell what that writes")
        elif name == "PATH":
            for part in value.split(":"):
                if (
                    part
                    and not part.startswith(("/", "$", "~"))
                    or part.startswith("$PWD")
                    or (cwd is not None and (part == cwd or part.startswith(cwd.rstrip("/") + "/")))
                ):
                    self.unknown(f"PATH={value[:40]}: programs may be found in the work tree")
                    break
        elif name == "CDPATH" and value:
            self.cdpath = True
        elif name == "HOME":
            self.home = None if value_word.dynamic else value
        elif name == "TMPDIR":
            self.tmpdir = None if value_word.dynamic else value
        elif name == "GIT_ALLOW_PROTOCOL" and (value_word.dynamic or "ext" in value.split(":")):
            self.unknown(
                f"GIT_ALLOW_PROTOCOL={value[:40]}: lets git's ext:: transport run a program named in a "
                f"URL; proctor cannot tell what it writes"
            )
        if not value_word.dynamic and _subscript_code(value):
            self.unknown(
                f"{name}={value[:40]}: a value whose subscript runs a command when arithmetic reads it; "
                f"proctor cannot tell what it writes"
            )
        return name

    def unwrap(
        self, words: list[Word], cwd: str | None, oldpwd: str | None
    ) -> tuple[list[Word], str | None, str | None] | None:
        """The command inside its wrappers: (argv, the directory it runs in, how it is run:
        None, "xargs", "exec" (no functions or aliases), or "script" (argv is a script to read)).
        None when no command is run (what the wrappers do is recorded)."""
        how: str | None = None
        i = 0
        while i < len(words):
            word = words[i]
            if word.dynamic:
                break
            name = _program(word.text)
            wrapper = _WRAPPERS.get(name or "")
            if wrapper is None:
                break
            result = wrapper(self, words, i + 1, cwd)
            if result is None:
                return None
            words, i, cwd, kind = result
            if kind is not None:
                how = kind
            if how == "script":
                break
            if i >= len(words):
                if kind != "quiet":
                    self.status = True
                return None
        return words[i:], cwd, how

    def program(
        self, argv: list[Word], command: Command, cwd: str | None, oldpwd: str | None, how: str | None, sure: bool
    ) -> tuple[str | None, str | None] | None:
        word = argv[0]
        args = argv[1:]
        if word.dynamic:
            self.unknown(f"{word.text}: a command named by an expansion; proctor cannot tell what it runs")
            return None
        name = _program(word.text)
        if name is None:
            self.unknown(f"{word.text}: a program proctor does not know; it cannot tell what it writes")
            return None
        if how is None and "/" not in word.text and name in self.functions:
            if name in self.unset_maybe:
                # `unset NAME` removed a variable of that name, or else the function: either runs
                self.unknown(f"{name}: a function `unset` may have removed; then a program of that name runs")
            return self.call(name, args, cwd, oldpwd)
        if name in ("test", "["):
            for k, arg in enumerate(args[:-1]):
                if arg.text == "-v" and _subscript_code(args[k + 1].text):
                    self.unknown(f"{name} -v {args[k + 1].text[:40]}: a subscript that runs a command")
            self.status = self.test(name, args, cwd)
            return None
        if name in self.disabled and (name in _BUILTINS or name in _READS):
            self.status = None
            if name in _BUILTINS:
                self.unknown(f"{name}: a builtin turned off by enable -n; a program of that name runs, if there is one")
                return None
        builtin = _BUILTINS.get(name)
        if builtin is not None:
            return builtin(self, name, args, command, cwd, oldpwd, sure)
        if name in _SHELLS:
            self.shell(name, args, command, cwd)
            return None
        if name in _READS:
            self.status = (
                True
                if name in ("true", ":", "echo") and not (command.redirects and not self._redirects_open(command, cwd))
                else False
                if name == "false"
                else None
            )
            return None
        handler = _PROGRAMS.get(name)
        if handler is not None:
            handler(self, name, args, cwd, command)
            return None
        if name in _INTERPRETERS or _r().python.match(name):
            self.interpreter(name, args)
            return None
        if name in _BUILDERS:
            self.unknown(f"{name}: runs build recipes; proctor cannot tell what they write")
            return None
        self.unknown(f"{name}: a program proctor does not know; it cannot tell what it writes")
        return None

    def _redirects_open(self, command: Command, cwd: str | None) -> bool:
        """Whether every redirection of a command surely opens: a file in an existing directory."""
        for op, target in command.redirects:
            if op in ("<<", "<<-", "<<<") or op in (">&", "<&") and (target.text.isdigit() or target.text == "-"):
                continue
            if target.dynamic or cwd is None and not target.text.startswith("/"):
                return False
            if target.text in _DEVICES:
                continue
            path = os.path.normpath(os.path.join(cwd or "/", target.text))
            if op in ("<", "<&"):
                if not os.path.isfile(path):
                    return False
            elif not os.path.isdir(os.path.dirname(path)) or os.path.isdir(path):
                return False
        return True

    def test(self, name: str, args: list[Word], cwd: str | None) -> bool | None:
        """The status of `test`/`[` when its words are literal and the files it asks about are
        not ones this script may have changed; None when it cannot be known."""
        if name == "[":
            if not args or args[-1].text != "]":
                return None
            args = args[:-1]
        if any(w.dynamic for w in args):
            return None
        texts = [w.text for w in args]
        negate = len(texts) > 1 and texts[0] == "!"
        if negate:
            texts = texts[1:]
        result: bool | None = None
        if not texts:
            result = False
        elif len(texts) == 1:
            result = texts[0] != ""
        elif len(texts) == 2 and texts[0] in ("-z", "-n"):
            result = (texts[1] == "") == (texts[0] == "-z")
        elif len(texts) == 2 and texts[0] in ("-e", "-a", "-f", "-d", "-L", "-h", "-s", "-r", "-w", "-x"):
            if self.found.unknown or self.links or cwd is None and not texts[1].startswith("/"):
                return None
            path = os.path.normpath(os.path.join(cwd or "/", texts[1]))
            probe = path
            while probe not in ("/", ""):
                if probe in self.found._seen:
                    return None
                probe = os.path.dirname(probe)
            if path in self.made:
                return None
            op = texts[0]
            if op in ("-e", "-a"):
                result = os.path.exists(path)
            elif op == "-f":
                result = os.path.isfile(path)
            elif op == "-d":
                result = os.path.isdir(path)
            elif op in ("-L", "-h"):
                result = os.path.islink(path)
            elif op == "-s":
                result = os.path.isfile(path) and os.path.getsize(path) > 0
            else:
                result = os.access(path, {"-r": os.R_OK, "-w": os.W_OK, "-x": os.X_OK}[op])
        elif len(texts) == 3 and texts[1] in ("=", "==", "!="):
            result = (texts[0] == texts[2]) == (texts[1] != "!=")
        if result is None:
            return None
        return not result if negate else result

    def call(self, name: str, args: list[Word], cwd: str | None, oldpwd: str | None):
        if name in self.expanding:
            self.unknown(f"{name}: a function calling itself")
            return None
        if self.depth > _MAX_NESTING:
            self.unknown(f"{name}: functions calling one another too deeply to judge")
            return None
        body = self.functions[name]
        self.budget.left -= 8 + 4 * len(body)  # a call costs its body again
        saved = self.positional, self.in_function, self.loops
        self.positional = None if any(w.dynamic for w in args) else [w.text for w in args]
        self.expanding.add(name)
        self.depth += 1
        self.in_function += 1
        self.loops = 0  # bash's break in a function leaves no loop of its caller
        try:
            return self.run(body, cwd, oldpwd)
        except _Return as exc:
            return exc.state
        finally:
            self.depth -= 1
            self.expanding.discard(name)
            self.positional, self.in_function, self.loops = saved

    def sub_command(self, words: list[Word], cwd: str | None, oldpwd: str | None) -> None:
        """A command another program runs (find -exec, xargs): judged like one of the script's."""
        if words:
            self.simple(words, Command(), cwd, oldpwd, False)

    def shell(self, name: str, args: list[Word], command: Command, cwd: str | None) -> None:
        """sh -c SCRIPT, sh FILE, or a shell reading its standard input."""
        script: Word | None = None
        dash_c = no_exec = interactive = False
        i, n = 0, len(args)
        while i < n:
            t = args[i].text
            if t == "--" or t == "-":
                i += 1
                break
            if t in ("--rcfile", "--init-file"):
                interactive = True
                i += 2
                continue
            if t.startswith("--"):
                if t in (
                    "--login",
                    "--norc",
                    "--noprofile",
                    "--posix",
                    "--restricted",
                    "--verbose",
                    "--noediting",
                    "--debugger",
                    "--dump-strings",
                    "--dump-po-strings",
                    "--pretty-print",
                ):
                    i += 1
                    continue
                if t in ("--version", "--help"):
                    return
                i += 1
                continue
            if t[:1] in "-+" and len(t) > 1:
                i += 1
                for ch in t[1:]:
                    if ch == "c":
                        dash_c = True
                    elif ch == "n":
                        no_exec = True
                    elif ch == "i":
                        interactive = True
                    elif ch in "oO" and i < n:
                        i += 1
                continue
            break
        operands = args[i:]
        if interactive:
            self.unknown(f"{name} -i: an interactive shell reads startup files proctor does not read")
        if dash_c:
            if not operands:
                return
            script = operands[0]
            if script.dynamic:
                self.unknown(f"{name} -c {script.text[:40]}: a script built from an expansion")
                return
            saved = self.positional
            self.positional = None if any(w.dynamic for w in operands[1:]) else [w.text for w in operands[2:]]
            try:
                self.script(script.text, cwd, None, child=True)
            finally:
                self.positional = saved
            return
        if no_exec:
            return
        if operands:
            self.unknown(f"{name} {operands[0].text}: runs a script file; proctor cannot tell what it writes")
            return
        script_text = command.stdin_script if not command.stdin_dynamic else None
        if script_text is None and not command.stdin_dynamic and command.pipe_from is not None:
            script_text = _piped_text(command.pipe_from)
        if script_text is not None:
            self.script(script_text, cwd, None, child=True)
        else:
            self.unknown(f"{name}: runs a script from its standard input; proctor cannot tell what it writes")

    def interpreter(self, name: str, args: list[Word]) -> None:
        texts = [w.text for w in args]
        if len(texts) == 1 and (
            texts[0] in ("--version", "-V", "--help", "-h")
            or texts[0] == "-v"
            and name in ("node", "nodejs", "perl", "ruby", "deno", "bun")
        ):
            return
        for k, t in enumerate(texts):
            if t in ("-c", "-e", "-E", "--eval", "-p", "--print", "-r") or (
                len(t) > 1 and t[0] == "-" and t[1] != "-" and t[-1] in "ce" and k + 1 < len(texts)
            ):
                self.unknown(f"{name} {t}: runs code proctor cannot read; it cannot tell what it writes")
                return
            if t == "-m" and k + 1 < len(texts):
                self.unknown(f"{name} -m {texts[k + 1]}: runs a module; proctor cannot tell what it writes")
                return
            if t == "-":
                break
            if not t.startswith("-"):
                self.unknown(f"{name} {t}: runs a script; proctor cannot tell what it writes")
                return
        self.unknown(f"{name}: runs code from its standard input; proctor cannot tell what it writes")


def _piped_text(source: Command) -> str | None:
    """What a simple command piping into a shell writes to it, when its words say: `cat` of its
    here-document, `echo` or `printf` of literal words."""
    words = source.words
    if not words or any(w.dynamic for w in words) or source.redirects and source.stdin_script is None:
        return None
    name = _program(words[0].text)
    args = [w.text for w in words[1:]]
    if name == "cat" and not args and source.stdin_script is not None and not source.stdin_dynamic:
        return source.stdin_script
    if name == "echo" and not any(a.startswith("-") and a != "-n" for a in args):
        return " ".join(a for a in args if a != "-n")
    if name == "printf" and len(args) >= 1 and "%" not in args[0].replace("%s", "").replace("%%", ""):
        text = args[0].replace("%%", "%")
        if "%s" in text:
            text = text.replace("%s", " ".join(args[1:]), 1) if len(args) > 1 else text.replace("%s", "")
        return text.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")
    return None
