"""Reading a shell command for what it writes: a real parse, never a regex over the string.

A tokenizer that knows quoting (single, double, $'...'), escapes, comments, operators,
redirections, here-documents and command substitution turns a script into simple
commands. A quoted string or a here-document body is data: it is never read as a command.
Each simple command is then read for the paths it writes: redirections, `tee`, the
targets of `cp`/`mv`/`install`/`ln`, `rm`/`touch`/`mkdir`/`truncate`/`chmod`, `sed -i`,
`perl -i`, `dd of=`, `git checkout -- path`/`restore`/`rm`/`mv`, through env prefixes and
wrappers (`env`, `sudo`, `nice`, `nohup`, `timeout`, `xargs`, ...) and into `bash -c '...'`
and `eval`. `cd` moves the directory later commands resolve against.

What cannot be known without running the script (a `$VAR` in a path) is reported as
`unknown`, so a rule can tell "writes nothing" from "writes something it cannot name".
Core: the standard library only, and cheap at import, because the hook runs it.
"""

from __future__ import annotations

import os

_OPERATORS = ("&&", "||", ";;", "|&", ";", "&", "|", "(", ")", "\n")
_REDIRECTS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")
_RESERVED = frozenset(("if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done",
                       "case", "esac", "in", "function", "select", "{", "}", "!", "[[", "]]"))
_WRAPPERS = frozenset(("env", "sudo", "doas", "nice", "nohup", "time", "command", "exec", "builtin",
                       "timeout", "stdbuf", "xargs", "setsid", "ionice", "chronic", "unbuffer",
                       "caffeinate", "flock", "watch", "strace", "ltrace", "eatmydata", "npx", "bunx"))
_SHELLS = frozenset(("sh", "bash", "zsh", "dash", "ksh", "ash", "fish"))
_INTO_IF_DIR = "destination, or a directory receiving "
_DEVICES = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero")


class Word:
    """A word after quote removal; `dynamic` when it holds an expansion proctor cannot resolve."""

    __slots__ = ("text", "dynamic", "quoted")

    def __init__(self, text: str, dynamic: bool, quoted: bool) -> None:
        self.text, self.dynamic, self.quoted = text, dynamic, quoted

    def __repr__(self) -> str:
        return f"Word({self.text!r}{', dynamic' if self.dynamic else ''})"


class Command:
    """One simple command: its words and its redirections `(operator, target Word)`."""

    __slots__ = ("words", "redirects", "background", "depth", "stdin_script")

    def __init__(self, depth: int = 0) -> None:
        self.words: list[Word] = []
        self.redirects: list[tuple[str, Word]] = []
        self.background = False
        self.depth = depth  # how many ( ) subshells enclose it: a cd inside one ends with it
        self.stdin_script: str | None = None  # its here-document, when it has one

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]

    def __repr__(self) -> str:
        return f"Command({self.argv}, redirects={[(op, w.text) for op, w in self.redirects]})"


class ParseError(ValueError):
    pass


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.nested: list[str] = []  # scripts inside $( ) and backticks
        self.pending_heredocs: list[tuple[str, bool]] = []  # (delimiter, strip tabs)
        self.heredoc_bodies: list[str] = []

    def _redirect(self) -> str | None:
        text, start = self.text, self.pos
        pos = start
        while pos < len(text) and text[pos].isdigit():
            pos += 1
        if pos < len(text) and text[pos] == "{":  # {fd}>file
            close = text.find("}", pos)
            if close != -1 and text[pos + 1:close].isidentifier():
                pos = close + 1
        for op in _REDIRECTS:
            if text.startswith(op, pos):
                if pos != start and not text[start:pos].isdigit() and not text[start] == "{":
                    return None
                self.pos = pos + len(op)
                return op
        return None

    def _word(self) -> Word:
        text, n = self.text, len(self.text)
        parts: list[str] = []
        dynamic = quoted = False
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n;&|()<>":
                break
            if c == "\\":
                if self.pos + 1 < n:
                    if text[self.pos + 1] != "\n":
                        parts.append(text[self.pos + 1])
                    self.pos += 2
                else:
                    self.pos += 1
                continue
            if c == "'":
                end = text.find("'", self.pos + 1)
                if end == -1:
                    raise ParseError("unterminated single quote")
                parts.append(text[self.pos + 1:end])
                self.pos = end + 1
                quoted = True
                continue
            if c == "$" and text.startswith("$'", self.pos):
                parts.append(self._ansi_c())
                quoted = True
                continue
            if c == '"':
                self.pos += 1
                inner, inner_dynamic = self._double_quoted()
                parts.append(inner)
                dynamic |= inner_dynamic
                quoted = True
                continue
            if c in "$`":
                parts.append(self._expansion())
                dynamic = True
                continue
            parts.append(c)
            self.pos += 1
        return Word("".join(parts), dynamic, quoted)

    def _expansion(self) -> str:
        """A `$...` or a backtick substitution at pos: consumed, its script kept for reading."""
        if self.text[self.pos] == "$":
            return self._dollar()
        end = self._matching_backtick()
        self.nested.append(self.text[self.pos + 1:end])
        start, self.pos = self.pos, end + 1
        return self.text[start:self.pos]

    def _ansi_c(self) -> str:
        text = self.text
        self.pos += 2
        out: list[str] = []
        escapes = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
                   "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v", "0": "\0"}
        while self.pos < len(text):
            c = text[self.pos]
            if c == "'":
                self.pos += 1
                return "".join(out)
            if c == "\\" and self.pos + 1 < len(text):
                out.append(escapes.get(text[self.pos + 1], text[self.pos + 1]))
                self.pos += 2
                continue
            out.append(c)
            self.pos += 1
        raise ParseError("unterminated $'...' string")

    def _double_quoted(self) -> tuple[str, bool]:
        text, n = self.text, len(self.text)
        out: list[str] = []
        dynamic = False
        while self.pos < n:
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                return "".join(out), dynamic
            if c == "\\" and self.pos + 1 < n and text[self.pos + 1] in '"\\$`\n':
                if text[self.pos + 1] != "\n":
                    out.append(text[self.pos + 1])
                self.pos += 2
                continue
            if c in "$`":
                out.append(self._expansion())
                dynamic = True
                continue
            out.append(c)
            self.pos += 1
        raise ParseError("unterminated double quote")

    def _dollar(self) -> str:
        """Consume an expansion; a command substitution's script is kept for reading."""
        text, n = self.text, len(self.text)
        start = self.pos
        if text.startswith("$((", self.pos):
            end = self._balanced(self.pos + 1, "(", ")")
            self.pos = end + 1
        elif text.startswith("$(", self.pos):
            end = self._balanced(self.pos + 1, "(", ")")
            self.nested.append(text[self.pos + 2:end])
            self.pos = end + 1
        elif text.startswith("${", self.pos):
            end = self._balanced(self.pos + 1, "{", "}")
            self.pos = end + 1
        else:
            self.pos += 1
            while self.pos < n and (text[self.pos].isalnum() or text[self.pos] == "_"):
                self.pos += 1
            if self.pos == start + 1 and self.pos < n and text[self.pos] in "@*#?$!-0123456789":
                self.pos += 1
        return text[start:self.pos]

    def _balanced(self, open_at: int, opening: str, closing: str) -> int:
        depth, pos, text = 0, open_at, self.text
        while pos < len(text):
            c = text[pos]
            if c == "\\":
                pos += 2
                continue
            if c == "'" and opening == "(":
                end = text.find("'", pos + 1)
                pos = len(text) if end == -1 else end + 1
                continue
            if c == opening:
                depth += 1
            elif c == closing:
                depth -= 1
                if depth == 0:
                    return pos
            pos += 1
        raise ParseError(f"unterminated {opening}")

    def _matching_backtick(self) -> int:
        pos = self.pos + 1
        while pos < len(self.text):
            if self.text[pos] == "\\":
                pos += 2
                continue
            if self.text[pos] == "`":
                return pos
            pos += 1
        raise ParseError("unterminated backtick")

    def _read_heredoc_bodies(self) -> None:
        text = self.text
        while self.pending_heredocs:
            delimiter, strip = self.pending_heredocs.pop(0)
            lines: list[str] = []
            while self.pos < len(text):
                end = text.find("\n", self.pos)
                line = text[self.pos:] if end == -1 else text[self.pos:end]
                self.pos = len(text) if end == -1 else end + 1
                check = line.lstrip("\t") if strip else line
                if check == delimiter:
                    break
                lines.append(line)
            self.heredoc_bodies.append("\n".join(lines))


def parse(script: str) -> tuple[list[Command], list[str]]:
    """The simple commands of `script`, and the scripts found inside substitutions."""
    commands, nested, _ = _parse_all(script)
    return commands, nested


def _parse_all(script: str) -> tuple[list[Command], list[str], list[str]]:
    lexer = _Lexer(script)
    commands: list[Command] = []
    depth = 0
    current = Command(depth)
    tokens = _tokens_with_heredocs(lexer)
    segment = 0  # where the current pipeline or subshell list began: a trailing & sends all of it
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "op":
            if current.words or current.redirects:
                commands.append(current)
            if value == "&":
                for command in commands[segment:]:
                    command.background = True
            if value in ("&", ";", "&&", "||", "\n") and depth == 0:
                segment = len(commands)
            if value == "(":
                depth += 1
            elif value == ")":
                depth = max(0, depth - 1)
            current = Command(depth)
        elif kind == "redir":
            target = tokens[i + 1][1] if i + 1 < len(tokens) and tokens[i + 1][0] == "word" else Word("", True, False)
            current.redirects.append((value, target))  # type: ignore[arg-type]
            i += 1
        else:
            current.words.append(value)  # type: ignore[arg-type]
        i += 1
    if current.words or current.redirects:
        commands.append(current)
    bodies = iter(lexer.heredoc_bodies)
    for command in commands:
        for op, _target in command.redirects:
            if op in ("<<", "<<-"):
                command.stdin_script = next(bodies, None)
    return commands, lexer.nested, lexer.heredoc_bodies


def _tokens_with_heredocs(lexer: _Lexer) -> list[tuple[str, object]]:
    """Tokenize, registering each here-document's delimiter as its operator is read."""
    out: list[tuple[str, object]] = []
    text, n = lexer.text, len(lexer.text)
    while lexer.pos < n:
        chunk = _one_token(lexer)
        if chunk is None:
            continue
        out.append(chunk)
        if chunk[0] == "redir" and chunk[1] in ("<<", "<<-"):
            save = lexer.pos
            while lexer.pos < n and text[lexer.pos] in " \t":
                lexer.pos += 1
            if lexer.pos < n and text[lexer.pos] not in "\n;&|()<>":
                delimiter = lexer._word()
                out.append(("word", delimiter))
                lexer.pending_heredocs.append((delimiter.text, chunk[1] == "<<-"))
            else:
                lexer.pos = save
    if lexer.pending_heredocs:
        lexer._read_heredoc_bodies()
    return out


def _one_token(lexer: _Lexer) -> tuple[str, object] | None:
    text, n = lexer.text, len(lexer.text)
    c = text[lexer.pos]
    if c == "\\" and text.startswith("\\\n", lexer.pos):
        lexer.pos += 2
        return None
    if c in " \t\r":
        lexer.pos += 1
        return None
    if c == "#":
        end = text.find("\n", lexer.pos)
        lexer.pos = n if end == -1 else end
        return None
    if c == "\n":
        lexer.pos += 1
        lexer._read_heredoc_bodies()
        return ("op", "\n")
    redirect = lexer._redirect()
    if redirect:
        return ("redir", redirect)
    op = next((o for o in _OPERATORS if text.startswith(o, lexer.pos)), None)
    if op:
        lexer.pos += len(op)
        return ("op", op)
    return ("word", lexer._word())


class Writes:
    """What a script writes: resolved paths (absolute), and whether some write is unknown."""

    __slots__ = ("paths", "unknown", "commands", "heredocs", "simple")

    def __init__(self) -> None:
        self.simple: list[tuple[list[str], list[str], bool]] = []  # (argv with wrappers, argv, background)
        self.heredocs: list[str] = []  # here-document bodies: data, kept for rules that read records
        self.paths: list[str] = []
        self.unknown: list[str] = []  # descriptions of writes whose target proctor cannot name
        self.commands: list[list[str]] = []  # every simple command's argv, wrappers removed


def writes(script: str, cwd: str, depth: int = 0) -> Writes:
    """Every path `script` writes, resolved against `cwd` (and any `cd` along the way)."""
    found = Writes()
    _collect(script, cwd, found, depth)
    return found


def _collect(script: str, cwd: str | None, found: Writes, depth: int) -> None:
    if depth > 4:
        found.unknown.append("shell nested too deeply to read")
        return
    try:
        commands, nested, heredocs = _parse_all(script)
    except ParseError as exc:
        found.unknown.append(f"unparseable shell ({exc})")
        return
    found.heredocs.extend(heredocs)
    for inner in nested:
        _collect(inner, cwd, found, depth + 1)
    # The directory each subshell level resolves against: a cd inside ( ) ends with it.
    cwds: dict[int, str | None] = {0: cwd}
    dirs: list[str | None] = []
    for command in commands:
        for level in [k for k in cwds if k > command.depth]:
            del cwds[level]
        here = cwds.get(command.depth, cwds[max(cwds)])
        for op, target in command.redirects:
            if op in (">", ">>", ">|", "&>", "&>>", "<>"):
                _add(found, target, here, f"redirection {op}")
            elif op == ">&" and not (target.text.isdigit() or target.text == "-"):
                _add(found, target, here, "redirection >&")
        argv_words = _strip_wrappers(command.words)
        wrappers = [os.path.basename(w.text) for w in command.words[: len(command.words) - len(argv_words)]]
        if not argv_words:
            continue
        found.commands.append([w.text for w in argv_words])
        found.simple.append(([w.text for w in command.words], [w.text for w in argv_words], command.background))
        if argv_words[0].dynamic:
            found.unknown.append(f"a command named by an expansion ({argv_words[0].text})")
            continue
        name = os.path.basename(argv_words[0].text)
        args = argv_words[1:]
        if name in ("cd", "pushd"):
            if name == "pushd":
                dirs.append(here)
            target = args[0] if args else None
            if target is None:
                new = os.path.expanduser("~")
            elif target.dynamic or here is None:
                new = None  # later relative paths cannot be named
            else:
                new = _resolve(target.text, here)
            cwds[command.depth] = new
            continue
        if name == "popd":
            cwds[command.depth] = dirs.pop() if dirs else None
            continue
        if "xargs" in wrappers and name in _WRITERS:
            found.unknown.append(f"{name} run by xargs on names read from its input")
            continue
        if name in _SHELLS or name == "eval":
            script_text = _inline_script(name, args)
            if script_text is not None:
                if script_text is _DYNAMIC:
                    found.unknown.append(f"{name} -c with a script built from an expansion")
                else:
                    _collect(script_text, here, found, depth + 1)
            elif name in _SHELLS and not _operands(args):
                if command.stdin_script is not None:
                    _collect(command.stdin_script, here, found, depth + 1)
                else:
                    found.unknown.append(f"a script fed to {name} on its standard input")
            continue
        if name == "apply_patch":
            for path in patch_paths(command.stdin_script or " ".join(w.text for w in args)):
                _add(found, Word(path, False, False), here, "apply_patch")
            continue
        if name == "find":
            if any(w.text in ("-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprintf", "-fls")
                   for w in args):
                found.unknown.append("find with -delete or -exec")
            continue
        if name == "git":
            _git(found, args, here)
            continue
        reader = _WRITERS.get(name)
        if reader is not None:
            for word, what in reader(args):
                _add(found, word, here, what)


_DYNAMIC = object()


def patch_paths(patch: str) -> list[str]:
    """Files an apply_patch body touches (`*** Update File: path`, Add, Delete, Move to)."""
    paths = []
    for line in patch.splitlines():
        for marker in ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "):
            if line.startswith(marker) and line[len(marker):].strip():
                paths.append(line[len(marker):].strip())
    return paths


# Each wrapper's options that take a value, so the value is not read as the wrapped command.
_WRAPPER_VALUES = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "--user", "--group"},
    "doas": {"-u", "-C"},
    "nice": {"-n", "--adjustment"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "stdbuf": {"-i", "-o", "-e", "--input", "--output", "--error"},
    "xargs": {"-I", "-n", "-P", "-d", "-a", "-E", "-L", "-s", "--max-args", "--max-procs", "--delimiter",
              "--arg-file", "--replace"},
    "ionice": {"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"},
    "flock": {"-w", "-E", "--timeout", "--conflict-exit-code"},
    "watch": {"-n", "--interval", "-d"},
    "strace": {"-o", "-e", "-p", "-s", "-u", "-E"},
    "ltrace": {"-o", "-e", "-p", "-s", "-u"},
}


def _strip_wrappers(words: list[Word]) -> list[Word]:
    i = 0
    while i < len(words):
        text = words[i].text
        if text in _RESERVED:
            i += 1
            continue
        if "=" in text and not words[i].quoted and text.split("=", 1)[0].isidentifier():
            i += 1  # VAR=value prefix
            continue
        base = os.path.basename(text)
        if base not in _WRAPPERS:
            break
        i += 1
        values = _WRAPPER_VALUES.get(base, set())
        # the wrapper's own options and operands, up to the wrapped command
        while i < len(words):
            option = words[i].text
            if option == "--":
                i += 1
                break
            if option in values:
                i += 2
                continue
            if option.startswith("-") and len(option) > 1:
                i += 1
                continue
            if base == "env" and "=" in option:
                i += 1
                continue
            if base == "timeout" and option[:1].isdigit():
                i += 1  # the duration; the command follows
                break
            if base == "flock":
                i += 1  # the lock file; the command follows
                break
            break
    return words[i:]


def _inline_script(name: str, args: list[Word]):
    """The script of `sh -c SCRIPT` or `eval ...`; _DYNAMIC when it is built from an expansion."""
    if name == "eval":
        if any(w.dynamic for w in args):
            return _DYNAMIC
        return " ".join(w.text for w in args)
    for index, word in enumerate(args):
        if word.text == "-c" or (word.text.startswith("-") and not word.text.startswith("--") and "c" in word.text[1:]):
            if index + 1 < len(args):
                return _DYNAMIC if args[index + 1].dynamic else args[index + 1].text
    return None


def _operands(args: list[Word], takes_value: frozenset = frozenset()) -> list[Word]:
    """Non-option arguments (everything after `--` included)."""
    out: list[Word] = []
    skip = False
    after_dashes = False
    for word in args:
        if skip:
            skip = False
            continue
        if after_dashes:
            out.append(word)
        elif word.text == "--":
            after_dashes = True
        elif word.text.startswith("-") and word.text != "-":
            if word.text in takes_value:
                skip = True
        else:
            out.append(word)
    return out


def _target_dir_option(args: list[Word]) -> Word | None:
    for index, word in enumerate(args):
        short_t = word.text.startswith("-") and not word.text.startswith("--") and word.text.endswith("t")
        if (word.text in ("-t", "--target-directory") or short_t) and index + 1 < len(args):
            return args[index + 1]
        if word.text.startswith("--target-directory="):
            return Word(word.text.split("=", 1)[1], word.dynamic, word.quoted)
    return None


def _copy_like(removes_sources: bool):
    def read(args: list[Word]) -> list[tuple[Word, str]]:
        target_dir = _target_dir_option(args)
        operands = [w for w in _operands(args, frozenset(("-t", "--target-directory", "-S", "--suffix", "-m", "-o", "-g")))
                    if w is not target_dir]
        out: list[tuple[Word, str]] = []
        if target_dir is not None:
            sources, destination = operands, target_dir
        elif len(operands) >= 2:
            sources, destination = operands[:-1], operands[-1]
        else:
            return out
        into_dir = target_dir is not None or len(sources) > 1 or destination.text.endswith("/")
        for source in sources:
            name = os.path.basename(source.text.rstrip("/"))
            if into_dir:
                out.append((Word(destination.text.rstrip("/") + "/" + name,
                                 destination.dynamic or source.dynamic, False), "destination"))
            else:
                # one source: the destination is the file, or a directory it lands in
                out.append((destination, _INTO_IF_DIR + name))
            if removes_sources:
                out.append((source, "moved away"))
        return out

    return read


def _all_operands(skip_first: int = 0, takes_value: frozenset = frozenset()):
    def read(args: list[Word]) -> list[tuple[Word, str]]:
        return [(w, "operand") for w in _operands(args, takes_value)[skip_first:]]

    return read


def _tee(args: list[Word]) -> list[tuple[Word, str]]:
    return [(w, "tee") for w in _operands(args)]


def _sed(args: list[Word]) -> list[tuple[Word, str]]:
    in_place = any(w.text == "-i" or w.text.startswith("-i") or w.text.startswith("--in-place")
                   or (w.text.startswith("-") and not w.text.startswith("--") and "i" in w.text[1:])
                   for w in args)
    if not in_place:
        return []
    has_script_option = any(w.text in ("-e", "-f", "--expression", "--file") for w in args)
    operands = _operands(args, frozenset(("-e", "-f", "--expression", "--file", "-l")))
    files = operands if has_script_option else operands[1:]
    return [(w, "sed -i") for w in files]


def _perl(args: list[Word]) -> list[tuple[Word, str]]:
    in_place = any(w.text.startswith("-") and not w.text.startswith("--") and "i" in w.text[1:].split("e")[0]
                   for w in args)
    if not in_place:
        return []
    operands = _operands(args, frozenset(("-e", "-E", "-M", "-I")))
    has_e = any(w.text in ("-e", "-E") or (w.text.startswith("-") and w.text.endswith("e")) for w in args)
    files = operands if has_e else operands[1:]
    return [(w, "perl -i") for w in files]


def _dd(args: list[Word]) -> list[tuple[Word, str]]:
    return [(Word(w.text[3:], w.dynamic, w.quoted), "dd of=") for w in args if w.text.startswith("of=")]


_GIT_TREE_WIDE = {
    "reset": "git reset", "stash": "git stash", "clean": "git clean", "apply": "git apply", "am": "git am",
    "merge": "git merge", "rebase": "git rebase", "pull": "git pull", "cherry-pick": "git cherry-pick",
    "revert": "git revert", "switch": "git switch",
}
_GIT_READ_SUBCOMMANDS = {"stash": ("list", "show"), "reset": ("--soft", "-q")}


def _git(found: Writes, args: list[Word], cwd: str | None) -> None:
    words = list(args)
    while words and words[0].text.startswith("-"):  # git -C dir, git -c key=value
        if words[0].text == "-C" and len(words) > 1:
            cwd = None if words[1].dynamic or cwd is None else _resolve(words[1].text, cwd)
            words = words[2:]
        elif words[0].text == "-c":
            words = words[2:]
        else:
            words = words[1:]
    if not words:
        return
    sub, rest = words[0].text, words[1:]
    texts = [w.text for w in rest]
    if sub in ("checkout", "restore"):
        if "--" in texts:
            for word in rest[texts.index("--") + 1:]:
                _add(found, word, cwd, f"git {sub} --")
            return
        operands = _operands(rest, frozenset(("-b", "-B", "--orphan", "-s", "--source", "--conflict")))
        if sub == "restore":
            for word in operands:
                _add(found, word, cwd, "git restore")
        elif any(t in ("-b", "-B", "--orphan") for t in texts) and len(operands) <= 1:
            return  # a new branch where HEAD is: the tree stays as it is
        elif len(operands) >= 2:
            for word in operands[1:]:
                _add(found, word, cwd, "git checkout <rev> path")
        elif operands:
            found.unknown.append(f"git checkout {operands[0].text} rewrites the work tree")
        return
    if sub == "rm":
        for word in _operands(rest, frozenset(("--pathspec-from-file",))):
            _add(found, word, cwd, "git rm")
        return
    if sub == "mv":
        for word, what in _copy_like(True)(rest):
            _add(found, word, cwd, what)
        return
    if sub in _GIT_TREE_WIDE:
        harmless = _GIT_READ_SUBCOMMANDS.get(sub, ())
        if sub == "reset" and not any(t in ("--hard", "--merge", "--keep") for t in texts):
            return  # moves HEAD and the index, not the files
        if texts[:1] and texts[0] in harmless:
            return
        found.unknown.append(f"{_GIT_TREE_WIDE[sub]} rewrites files across the work tree")


_WRITERS = {
    "tee": _tee,
    "cp": _copy_like(False),
    "install": _copy_like(False),
    "mv": _copy_like(True),
    "ln": _copy_like(False),
    "rm": _all_operands(),
    "rmdir": _all_operands(),
    "unlink": _all_operands(),
    "shred": _all_operands(),
    "touch": _all_operands(takes_value=frozenset(("-d", "-r", "-t", "--date", "--reference"))),
    "mkdir": _all_operands(takes_value=frozenset(("-m", "--mode"))),
    "truncate": _all_operands(takes_value=frozenset(("-s", "--size", "-r", "--reference"))),
    "chmod": _all_operands(skip_first=1),
    "chown": _all_operands(skip_first=1),
    "chgrp": _all_operands(skip_first=1),
    "sed": _sed,
    "perl": _perl,
    "dd": _dd,
}


def _resolve(text: str, cwd: str) -> str:
    path = os.path.expanduser(text)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def _add(found: Writes, word: Word, cwd: str | None, what: str) -> None:
    if word.dynamic or not word.text:
        found.unknown.append(f"{what} to {word.text or 'an unnamed target'}")
        return
    if word.text.startswith("&") or word.text in _DEVICES or word.text.startswith("/dev/fd/"):
        return
    if cwd is None and not os.path.isabs(os.path.expanduser(word.text)):
        found.unknown.append(f"{what} to {word.text}, after a cd proctor cannot follow")
        return
    path = _resolve(word.text, cwd or "/")
    if what.startswith(_INTO_IF_DIR) and os.path.isdir(path):
        path = os.path.join(path, what[len(_INTO_IF_DIR):])
    if path not in found.paths:
        found.paths.append(path)


def is_read_only(script: str, cwd: str) -> bool:
    """Whether a script writes nothing proctor can see and nothing it cannot name."""
    found = writes(script, cwd)
    return not found.paths and not found.unknown
