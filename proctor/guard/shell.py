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
                       "caffeinate", "flock", "watch", "strace", "ltrace", "eatmydata"))
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

    __slots__ = ("words", "redirects", "background")

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.redirects: list[tuple[str, Word]] = []
        self.background = False

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
            if c == "$":
                parts.append(self._dollar())
                dynamic = True
                continue
            if c == "`":
                end = self._matching_backtick()
                self.nested.append(text[self.pos + 1:end])
                self.pos = end + 1
                dynamic = True
                continue
            parts.append(c)
            self.pos += 1
        return Word("".join(parts), dynamic, quoted)

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
            if c == "$":
                out.append(self._dollar())
                dynamic = True
                continue
            if c == "`":
                end = self._matching_backtick()
                self.nested.append(text[self.pos + 1:end])
                self.pos = end + 1
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
    current = Command()
    tokens = _tokens_with_heredocs(lexer)
    i = 0
    while i < len(tokens):
        kind, value = tokens[i]
        if kind == "op":
            if current.words or current.redirects:
                if value == "&":
                    current.background = True
                commands.append(current)
            current = Command()
        elif kind == "redir":
            target = tokens[i + 1][1] if i + 1 < len(tokens) and tokens[i + 1][0] == "word" else Word("", True, False)
            current.redirects.append((value, target))  # type: ignore[arg-type]
            i += 1
        else:
            current.words.append(value)  # type: ignore[arg-type]
        i += 1
    if current.words or current.redirects:
        commands.append(current)
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


def _collect(script: str, cwd: str, found: Writes, depth: int) -> None:
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
    for command in commands:
        for op, target in command.redirects:
            if op in (">", ">>", ">|", "&>", "&>>", "<>"):
                _add(found, target, cwd, f"redirection {op}")
        argv_words = _strip_wrappers(command.words)
        if not argv_words:
            continue
        found.commands.append([w.text for w in argv_words])
        found.simple.append(([w.text for w in command.words], [w.text for w in argv_words], command.background))
        name = os.path.basename(argv_words[0].text)
        args = argv_words[1:]
        if name == "cd":
            if args and not args[0].dynamic:
                cwd = _resolve(args[0].text, cwd)
            continue
        if name in _SHELLS or name == "eval":
            script_text = _inline_script(name, args)
            if script_text is not None:
                _collect(script_text, cwd, found, depth + 1)
            continue
        reader = _WRITERS.get(name)
        if reader is not None:
            for word, what in reader(args):
                _add(found, word, cwd, what)


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
        if base in _WRAPPERS:
            i += 1
            # the wrapper's own options and operands, up to the wrapped command
            while i < len(words):
                option = words[i].text
                if base == "timeout" and option[:1].isdigit():
                    i += 1
                    break
                if base == "env" and "=" in option and not option.startswith("-"):
                    i += 1
                    continue
                if base == "nice" and option == "-n" and i + 1 < len(words):
                    i += 2
                    continue
                if base in ("sudo", "doas") and option in ("-u", "-g", "-C", "-D") and i + 1 < len(words):
                    i += 2
                    continue
                if base == "flock" and not option.startswith("-"):
                    i += 1  # the lock file
                    continue
                if option.startswith("-") and option != "--":
                    i += 1
                    continue
                if option == "--":
                    i += 1
                break
            continue
        break
    return words[i:]


def _inline_script(name: str, args: list[Word]) -> str | None:
    if name == "eval":
        return " ".join(w.text for w in args)
    for index, word in enumerate(args):
        if word.text == "-c" or (word.text.startswith("-") and not word.text.startswith("--") and "c" in word.text[1:]):
            if index + 1 < len(args):
                return args[index + 1].text
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
        if word.text in ("-t", "--target-directory") and index + 1 < len(args):
            return args[index + 1]
        if word.text.startswith("--target-directory="):
            return Word(word.text.split("=", 1)[1], word.dynamic, word.quoted)
    return None


def _copy_like(removes_sources: bool):
    def read(args: list[Word]) -> list[tuple[Word, str]]:
        operands = _operands(args, frozenset(("-t", "--target-directory", "-S", "--suffix", "-m", "-o", "-g")))
        target_dir = _target_dir_option(args)
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


def _git(args: list[Word]) -> list[tuple[Word, str]]:
    words = list(args)
    while words and words[0].text.startswith("-"):  # git -C dir / -c k=v
        words = words[2:] if words[0].text in ("-C", "-c") else words[1:]
    if not words:
        return []
    sub, rest = words[0].text, words[1:]
    if sub == "checkout":
        texts = [w.text for w in rest]
        if "--" in texts:
            return [(w, "git checkout --") for w in rest[texts.index("--") + 1:]]
        return []
    if sub == "restore":
        return [(w, "git restore") for w in _operands(rest, frozenset(("-s", "--source")))]
    if sub == "rm":
        return [(w, "git rm") for w in _operands(rest)]
    if sub == "mv":
        return _copy_like(True)(rest)
    return []


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
    "git": _git,
}


def _resolve(text: str, cwd: str) -> str:
    path = os.path.expanduser(text)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(cwd, path))


def _add(found: Writes, word: Word, cwd: str, what: str) -> None:
    if word.dynamic or not word.text:
        found.unknown.append(f"{what} to {word.text or 'an unnamed target'}")
        return
    if word.text.startswith("&") or word.text in _DEVICES or word.text.startswith("/dev/fd/"):
        return
    path = _resolve(word.text, cwd)
    if what.startswith(_INTO_IF_DIR) and os.path.isdir(path):
        path = os.path.join(path, what[len(_INTO_IF_DIR):])
    if path not in found.paths:
        found.paths.append(path)


def is_read_only(script: str, cwd: str) -> bool:
    """Whether a script writes nothing proctor can see and nothing it cannot name."""
    found = writes(script, cwd)
    return not found.paths and not found.unknown
