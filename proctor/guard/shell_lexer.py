"""The lexer and parser of bash: text into the simple commands proctor.guard.shell judges.

Parsing. A tokenizer that knows quoting (single, double, $'...'), escapes, comments, operators,
redirections and here-documents turns a script into simple commands (Command, of Words), each
tagged with the subshell scope it runs in (( ), a pipeline element, a background list). Every
substitution is parsed where it runs: $( ), backticks, <( ), >( ), and those inside ${x:-$(...)},
$(( )) and unquoted here-document bodies. A quoted string, a quoted here-document's body, [[ ]]
and (( )) are data or tests, never commands or redirections. Words are cut as bash cuts them: a
bare CR is part of a word (`x\r#` starts no comment), an extended glob (`@(a|#)`, `!(x)` once
the script names extglob) is one word up to its `)`, a $'...' string ends at a NUL it decodes,
and bytes that are no UTF-8 (`\xff`, a lone `\ud800`) are kept as surrogate escapes, so that os
functions take every path; a NUL in the script itself is dropped, a lone surrogate replaced.

Also here: the step budget a parse spends (_Budget, _TooLarge), and the helpers that read a
word's raw text (brace expansion, unquoted globs, assignments, a subscript that runs code).
It imports nothing of the judge or of the writer tables.
Core: the standard library only, and cheap at import (the regular expressions are compiled on
first use), because the hook runs it on every tool call.
"""

from __future__ import annotations

import re


_MAX_STEPS = 200_000  # tokens, word parts and commands judged before a script is too large to judge
_MAX_NESTING = 24  # substitutions, shells and function calls inside one another
_MAX_EXPANSION_DEPTH = 200  # ${ and quotes inside one another
_MAX_BRACE_WORDS = 256  # words one brace expansion may make

_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|", "(", ")")
_REDIRECTS = ("&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", ">", "<")


# the redirections that give a command its standard input (on fd 0, or with no fd named)
_STDIN_OPS = frozenset(("<<", "<<-", "<<<", "<", "<>", "<&"))


class _Rx:
    """The regular expressions, compiled on first use so that importing the module stays cheap."""

    def __init__(self) -> None:
        # a bare CR is a word character to bash, not a blank
        self.plain = re.compile(r"[^ \t\n;&|()<>'\"\\$`]+")
        self.plain_cond = re.compile(r"[^ \t\n'\"\\$`]+")
        self.plain_dq = re.compile(r'[^"\\$`]+')
        self.plain_brace = re.compile(r"[^}\\'\"$`]+")
        self.plain_arith = re.compile(r"[^()\[\]$`'\"\\]+")
        self.special = re.compile(r"[\\$`]")
        self.blank = re.compile(r"(?:[ \t]+|\\\n)+")
        self.ansi = re.compile(r"[^\\']+")
        self.name = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
        self.assignment = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?\+?=")
        self.parameter = re.compile(
            r"(?:[#!]?(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!0-])|[#!])"
            r"(?=[}:=?+#%/^,\[@*-])"
        )
        self.proc = re.compile(r"/proc/([^/]+)/(cwd|root)(?=/|$)")
        self.python = re.compile(r"(python|pypy)[0-9.]*$")


_rx: _Rx | None = None


def _r() -> _Rx:
    global _rx
    if _rx is None:
        _rx = _Rx()
    return _rx


class Word:
    """A word after quote removal; `dynamic` when it holds an expansion proctor cannot resolve.
    `raw` is its source text, `quoted` whether any of it was quoted or escaped."""

    __slots__ = ("text", "dynamic", "quoted", "raw", "why")

    def __init__(
        self, text: str, dynamic: bool = False, quoted: bool = False, raw: str | None = None, why: str | None = None
    ) -> None:
        self.text, self.dynamic, self.quoted = text, dynamic, quoted
        self.raw = text if raw is None else raw
        self.why = why  # what an unresolved word stands for, when it is not a variable

    def __repr__(self) -> str:
        return f"Word({self.text!r}{', dynamic' if self.dynamic else ''})"


class Command:
    """One simple command: its words and its redirections `(operator, target Word)`, in the
    subshell `scope` it runs in. `nested` holds the parsed substitutions that run with it.
    `kind` is "simple", or "test" for [[ ]], (( )) and the words of a case or for header (only
    their substitutions run), "function" for a definition (`name`, `body`), "opaque" for code
    that runs unseen (`name` says why), or a branch marker (if, then, elif, else, fi, while,
    until, for, do, done, case, esac)."""

    __slots__ = (
        "words",
        "redirects",
        "fds",
        "background",
        "scope",
        "stdin_script",
        "stdin_dynamic",
        "nested",
        "next_op",
        "kind",
        "name",
        "body",
        "line",
        "negated",
        "pipe_from",
        "cond",
    )

    def __init__(self, scope: tuple = (), kind: str = "simple") -> None:
        self.words: list[Word] = []
        self.redirects: list[tuple[str, Word]] = []
        self.fds: list[str] = []  # the descriptor each redirection names ("" for its default)
        self.background = False
        self.scope = scope
        self.stdin_script: str | None = None  # its here-document or here-string, when it has one
        self.stdin_dynamic = False  # its standard input holds an expansion, or comes from a file
        self.nested: list[list[Command]] = []
        self.next_op: str | None = None
        self.kind = kind
        self.name: str | None = None
        self.body: list[Command] = []
        self.line = 0
        self.negated = False
        self.pipe_from: Command | None = None  # the command piping into it, when it is a simple one
        self.cond: list[Word] = []  # the words of a [[ ]], or of a for loop's list (on its "for" marker)

    @property
    def argv(self) -> list[str]:
        return [w.text for w in self.words]

    @property
    def depth(self) -> int:
        return len(self.scope)

    def __repr__(self) -> str:
        return f"Command({self.argv}, redirects={[(op, w.text) for op, w in self.redirects]})"


class ParseError(ValueError):
    pass


def _c_string(text: str) -> str:
    """A $'...' string as bash makes it: a C string, so a NUL ends it; bytes that are no UTF-8
    kept as the file system gets them (surrogate escapes), so that os functions take the text."""
    cut = text.find("\0")
    if cut >= 0:
        text = text[:cut]
    if not text.isascii():
        try:
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
        except UnicodeError:
            text = "".join("\ufffd" if 0xD800 <= ord(ch) < 0xDC80 else ch for ch in text)
    return text


class _TooLarge(Exception):
    pass


class _Budget:
    __slots__ = ("left",)

    def __init__(self, steps: int) -> None:
        self.left = steps


class _Level:
    """An open compound command while parsing: where its current pipeline element and and-or
    list began (indices into the command list), and the header state of a for or case."""

    __slots__ = ("kind", "scope", "start", "elem", "list", "piped", "state", "func", "coproc", "head")

    def __init__(self, kind: str, scope: tuple, start: int, state: str | None = None, func: str | None = None) -> None:
        self.kind, self.scope, self.start, self.state, self.func = kind, scope, start, state, func
        self.elem = self.list = start
        self.piped = self.coproc = False
        self.head: Command | None = None  # a for loop's marker


class _Parser:
    def __init__(
        self,
        text: str,
        budget: _Budget,
        nesting: int = 0,
        heredocs: list | None = None,
        env: dict | None = None,
        extglob: bool = False,
    ) -> None:
        self.rx = _r()
        # `shopt -s extglob` seen: `!(...)` at a word's start is a pattern too (else `! (...)`)
        self.extglob = extglob
        self.text, self.n, self.pos = text, len(text), 0
        self.budget = budget
        self.nesting = nesting
        self.base = nesting  # substitutions met at this depth are the script's own (for parse())
        self.texts: list[str] = []  # the script's own substitutions, as text
        self.subs: list[list[Command]] = []  # parsed substitutions not yet given to a command
        self.pending: list[tuple[str, bool, bool, Command, int]] = []  # here-documents awaiting their bodies
        self.heredocs: list[str] = [] if heredocs is None else heredocs
        self.env = env  # parameters to substitute when re-reading a word (None: none)
        self.ids = 0
        self.lines = 0
        self.depth = 0  # expansions open inside one another

    def _spend(self, steps: int = 1) -> None:
        budget = self.budget
        budget.left -= steps
        if budget.left < 0:
            raise _TooLarge()

    def _new_id(self) -> int:
        self.ids += 1
        return self.ids

    def _save(self) -> tuple[int, int, int]:
        return self.pos, len(self.subs), len(self.texts)

    def _restore(self, saved: tuple[int, int, int]) -> None:
        self.pos = saved[0]
        del self.subs[saved[1] :]
        del self.texts[saved[2] :]

    def _take(self) -> list[list[Command]]:
        subs, self.subs = self.subs, []
        return subs

    # -- tokens ---------------------------------------------------------------------------

    def _blank(self) -> str:
        """Skip blanks, line continuations and a comment; the next character ("" at the end)."""
        text, n = self.text, self.n
        blank = self.rx.blank
        while True:
            m = blank.match(text, self.pos)
            if m is not None:
                self.pos = m.end()
            if self.pos < n and text[self.pos] == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
                continue
            return text[self.pos] if self.pos < n else ""

    def _operator(self) -> str | None:
        text, pos = self.text, self.pos
        if text[pos] not in ";&|()":
            return None
        for op in _OPERATORS:
            if text.startswith(op, pos):
                self.pos = pos + len(op)
                return op
        return None

    def _redirect(self) -> tuple[str, str] | None:
        """A redirection operator at pos, with its fd prefix: (fd, operator)."""
        text, n, start = self.text, self.n, self.pos
        pos = start
        while pos < n and "0" <= text[pos] <= "9":
            pos += 1
        if pos == start and pos < n and text[pos] == "{":
            close = text.find("}", pos, pos + 80)
            if close > 0 and self.rx.name.fullmatch(text, pos + 1, close):
                pos = close + 1
        if pos >= n or text[pos] not in "<>&":
            return None
        if text[pos] == "&" and pos != start:
            return None
        if text[pos] in "<>" and text.startswith("(", pos + 1):
            return None  # process substitution, a word
        for op in _REDIRECTS:
            if text.startswith(op, pos):
                self.pos = pos + len(op)
                return text[start:pos], op
        return None

    def _word(self, cond: bool = False) -> Word:
        text, n = self.text, self.n
        start = pos = self.pos
        parts: list[str] = []
        dynamic = quoted = False
        why = None
        plain = self.rx.plain_cond if cond else self.rx.plain
        budget = self.budget
        while pos < n:
            budget.left -= 1
            if budget.left < 0:
                raise _TooLarge()
            m = plain.match(text, pos)
            if m is not None:
                parts.append(m.group())
                pos = m.end()
                continue
            c = text[pos]
            if c == "\\":
                if pos + 1 < n:
                    if text[pos + 1] != "\n":
                        parts.append(text[pos + 1])
                        quoted = True
                    pos += 2
                else:
                    pos += 1
                continue
            if c == "'":
                end = text.find("'", pos + 1)
                if end < 0:
                    raise ParseError("unterminated single quote")
                parts.append(text[pos + 1 : end])
                pos = end + 1
                quoted = True
                continue
            if c == '"' or (c == "$" and text.startswith('$"', pos)):
                self.pos = pos + (1 if c == '"' else 2)
                part, more = self._double()
                parts.append(part)
                dynamic |= more
                quoted = True
                pos = self.pos
                continue
            if c == "$":
                if text.startswith("$'", pos):
                    self.pos = pos + 2
                    parts.append(self._ansi_c())
                    quoted = True
                else:
                    self.pos = pos
                    part, more = self._dollar()
                    parts.append(part)
                    dynamic |= more
                pos = self.pos
                continue
            if c == "`":
                self.pos = pos
                parts.append(self._backtick())
                dynamic = True
                pos = self.pos
                continue
            if not cond and c in "<>" and text.startswith("(", pos + 1):
                self.pos = pos + 2
                self._substitution()
                parts.append(text[pos : self.pos])
                dynamic = True
                pos = self.pos
                continue
            if (
                not cond
                and c == "("
                and pos > start
                and text[pos - 1] in "@*+?!"
                and (pos - 2 < start or text[pos - 2] != "\\")
                and (self.extglob or pos - 1 > start or text[pos - 1] != "!")
            ):
                # an extended glob: one word up to its `)`, blanks, `|` and `#` inside included (without
                # extglob bash refuses the line, so reading it as a pattern never hides what runs)
                self.pos = pos
                self._extglob()
                parts.append(text[pos : self.pos])
                dynamic = True
                why = "an extended glob pattern"
                pos = self.pos
                continue
            if not cond and c == "(" and parts and self.rx.assignment.fullmatch(text, start, pos):
                self.pos = pos + 1
                self._array()
                parts.append(text[pos : self.pos])
                dynamic = True
                pos = self.pos
                continue
            break
        self.pos = pos
        return Word("".join(parts), dynamic, quoted, text[start:pos], why)

    def _extglob(self) -> None:
        """An extended glob's `( ... )` at pos, up to its `)`: quotes and substitutions inside read."""
        text, n = self.text, self.n
        pos = self.pos + 1
        depth = 0
        while pos < n:
            self._spend()
            c = text[pos]
            if c == ")":
                if depth == 0:
                    self.pos = pos + 1
                    return
                depth -= 1
                pos += 1
            elif c == "(":
                depth += 1
                pos += 1
            elif c == "\\":
                pos += 2
            elif c == "'":
                end = text.find("'", pos + 1)
                if end < 0:
                    raise ParseError("unterminated single quote")
                pos = end + 1
            elif c == '"' or c == "`" or c == "$":
                if text.startswith("$'", pos):
                    self.pos = pos + 2
                    self._ansi_c()
                elif c == '"':
                    self.pos = pos + 1
                    self._double()
                elif c == "$":
                    self.pos = pos
                    self._dollar()
                else:
                    self.pos = pos
                    self._backtick()
                pos = self.pos
            else:
                pos += 1
        raise ParseError("unterminated extended glob")

    def _array(self) -> None:
        """The elements of `name=( ... )`, up to its `)`."""
        while True:
            c = self._blank()
            if not c:
                raise ParseError("unterminated array")
            if c == "\n":
                self.pos += 1
            elif c == ")":
                self.pos += 1
                return
            elif c in ";&|(<>":
                raise ParseError(f"unexpected {c} in an array")
            else:
                self._word()

    def _double(self) -> tuple[str, bool]:
        """A double-quoted string after its opening quote: (text, dynamic)."""
        text, n = self.text, self.n
        out: list[str] = []
        dynamic = False
        plain = self.rx.plain_dq
        budget = self.budget
        pos = self.pos
        while pos < n:
            budget.left -= 1
            if budget.left < 0:
                raise _TooLarge()
            m = plain.match(text, pos)
            if m is not None:
                out.append(m.group())
                pos = m.end()
                continue
            c = text[pos]
            if c == '"':
                self.pos = pos + 1
                return "".join(out), dynamic
            if c == "\\":
                if pos + 1 < n and text[pos + 1] in '"\\$`\n':
                    if text[pos + 1] != "\n":
                        out.append(text[pos + 1])
                    pos += 2
                else:
                    out.append("\\")
                    pos += 1
                continue
            self.pos = pos
            if c == "$":
                part, more = self._dollar()
            else:
                part, more = self._backtick(), True
            out.append(part)
            dynamic |= more
            pos = self.pos
        raise ParseError("unterminated double quote")

    def _ansi_c(self) -> str:
        """A $'...' string after its opening: its text, escapes decoded."""
        text, n = self.text, self.n
        out: list[str] = []
        pos = self.pos
        plain = self.rx.ansi
        simple = {
            "n": "\n",
            "t": "\t",
            "r": "\r",
            "a": "\a",
            "b": "\b",
            "e": "\x1b",
            "E": "\x1b",
            "f": "\f",
            "v": "\v",
            "\\": "\\",
            "'": "'",
            '"': '"',
            "?": "?",
        }
        while pos < n:
            self._spend()
            m = plain.match(text, pos)
            if m is not None:
                out.append(m.group())
                pos = m.end()
                continue
            if text[pos] == "'":
                self.pos = pos + 1
                return _c_string("".join(out))
            c = text[pos + 1] if pos + 1 < n else ""
            pos += 2
            if c in simple:
                out.append(simple[c])
            elif c in ("x", "u", "U"):
                digits = {"x": 2, "u": 4, "U": 8}[c]
                end = pos
                while end < min(n, pos + digits) and text[end] in "0123456789abcdefABCDEF":
                    end += 1
                if end > pos:
                    code = int(text[pos:end], 16)
                    if c == "x" and code >= 0x80:
                        out.append(chr(0xDC00 + code))  # a byte, as the file system gets it
                    elif 0xD800 <= code < 0xE000:
                        # a lone surrogate: bash writes its three bytes
                        out.append(chr(code).encode("utf-8", "surrogatepass").decode("utf-8", "surrogateescape"))
                    else:
                        out.append(chr(code) if code < 0x110000 else "")
                    pos = end
                else:
                    out.append("\\" + c)
            elif c and c in "01234567":
                end = pos
                while end < min(n, pos + 2) and text[end] in "01234567":
                    end += 1
                code = int(c + text[pos:end], 8) & 0xFF
                out.append(chr(code) if code < 0x80 else chr(0xDC00 + code))
                pos = end
            elif c == "c" and pos < n:
                out.append(chr(ord(text[pos]) & 0x1F))
                pos += 1
            else:
                out.append("\\" + c)
        raise ParseError("unterminated $'...' string")

    def _dollar(self) -> tuple[str, bool]:
        """An expansion at pos: (its text, dynamic). A substitution in it is parsed."""
        self.depth += 1
        try:
            if self.depth > _MAX_EXPANSION_DEPTH:
                raise ParseError("expansions nested too deeply")
            return self._expansion()
        finally:
            self.depth -= 1

    def _expansion(self) -> tuple[str, bool]:
        text, n, start = self.text, self.n, self.pos
        nxt = text[start + 1] if start + 1 < n else ""
        env = self.env
        if nxt == "(":
            if text.startswith("$((", start):
                saved = self._save()
                end = self._arith(start + 3)
                if end > 0:
                    self.pos = end
                    return text[start:end], True
                self._restore(saved)
            self.pos = start + 2
            self._substitution()
            return text[start : self.pos], True
        if nxt == "{":
            self.pos = start + 2
            self._braced()
            body = text[start + 2 : self.pos - 1]
            if env is not None and body in env:
                return env[body], False
            if body.endswith("@P"):
                opaque = Command((), "opaque")
                opaque.name = f"${{{body[:40]}}}: a prompt expansion, which runs the commands its value holds"
                self.subs.append([opaque])
            return text[start : self.pos], True
        if nxt == "[":
            end = self._arith(start + 2, "[", "]")
            if end < 0:
                raise ParseError("unterminated $[")
            self.pos = end
            return text[start:end], True
        m = self.rx.name.match(text, start + 1)
        if m is not None:
            self.pos = m.end()
            name = m.group()
            if env is not None and name in env:
                return env[name], False
            return text[start : self.pos], True
        if nxt and nxt in "@*#?$!-0123456789":
            self.pos = start + 2
            if env is not None and nxt in env:
                return env[nxt], False
            return text[start : self.pos], True
        self.pos = start + 1
        return "$", False

    def _braced(self) -> None:
        """A ${...} after its opening, up to its }. A substitution inside runs, unless the
        expansion is malformed (bash refuses it before running anything in it)."""
        text, n = self.text, self.n
        good = self.rx.parameter.match(text, self.pos) is not None
        subs = len(self.subs)
        pos = self.pos
        plain = self.rx.plain_brace
        budget = self.budget
        while pos < n:
            budget.left -= 1
            if budget.left < 0:
                raise _TooLarge()
            m = plain.match(text, pos)
            if m is not None:
                pos = m.end()
                continue
            c = text[pos]
            if c == "}":
                self.pos = pos + 1
                if not good:
                    del self.subs[subs:]
                return
            if c == "\\":
                pos += 2
                continue
            if c == "'":
                end = text.find("'", pos + 1)
                if end < 0:
                    raise ParseError("unterminated single quote")
                pos = end + 1
                continue
            if c == '"':
                self.pos = pos + 1
                self._double()
            elif c == "$":
                self.pos = pos
                self._dollar()
            else:
                self.pos = pos
                self._backtick()
            pos = self.pos
        raise ParseError("unterminated ${")

    def _arith(self, pos: int, opening: str = "(", closing: str = ")") -> int:
        """The end (after `))`, or `]` for $[) of arithmetic starting at pos; -1 when it is not
        arithmetic. Its substitutions are parsed."""
        text, n = self.text, self.n
        depth = 0
        plain = self.rx.plain_arith
        budget = self.budget
        while pos < n:
            budget.left -= 1
            if budget.left < 0:
                raise _TooLarge()
            m = plain.match(text, pos)
            if m is not None:
                pos = m.end()
                continue
            c = text[pos]
            if c == opening:
                depth += 1
                pos += 1
            elif c == closing:
                if depth == 0:
                    if closing == "]":
                        return pos + 1
                    return pos + 2 if text.startswith("))", pos) else -1
                depth -= 1
                pos += 1
            elif c == "\\":
                pos += 2
            elif c == "'":
                end = text.find("'", pos + 1)
                if end < 0:
                    return -1
                pos = end + 1
            elif c in '"$`':
                self.pos = pos + (c == '"')
                if c == '"':
                    self._double()
                elif c == "$":
                    self._dollar()
                else:
                    self._backtick()
                pos = self.pos
            else:
                pos += 1
        return -1

    def _substitution(self) -> None:
        """A $( ), <( ) or >( ) whose script starts at pos: parsed up to its `)`."""
        if self.nesting >= _MAX_NESTING:
            raise ParseError("substitutions nested too deeply")
        start = self.pos
        saved = self.subs, self.pending
        self.subs, self.pending = [], []
        self.nesting += 1
        try:
            commands = self._list(")")
        finally:
            self.nesting -= 1
            self.subs, self.pending = saved
        self.subs.append(commands)
        if self.nesting == self.base:
            self.texts.append(self.text[start : self.pos - 1])

    def _backtick(self) -> str:
        text, n, start = self.text, self.n, self.pos
        out: list[str] = []
        pos = seg = start + 1
        special = re.compile(r"[\\`]")
        while True:
            m = special.search(text, pos)
            if m is None:
                raise ParseError("unterminated backtick")
            at = m.start()
            if text[at] == "\\":
                if at + 1 < n and text[at + 1] in "$`\\":
                    out.append(text[seg:at])
                    seg = at + 1
                pos = at + 2
                continue
            out.append(text[seg:at])
            pos = at + 1
            break
        self.pos = pos
        inner = "".join(out)
        if self.nesting >= _MAX_NESTING:
            raise ParseError("substitutions nested too deeply")
        sub = _Parser(inner, self.budget, self.nesting + 1, self.heredocs, extglob=self.extglob)
        self.subs.append(sub._list(None))
        if self.nesting == self.base:
            self.texts.append(inner)
        return text[start:pos]

    def _read_heredocs(self) -> None:
        """The bodies of the here-documents begun on the line just ended."""
        text, n = self.text, self.n
        pending, self.pending = self.pending, []
        for delimiter, strip, quoted, command, index in pending:
            pattern = re.compile(("^\t*" if strip else "^") + re.escape(delimiter) + "$", re.M)
            m = pattern.search(text, self.pos)
            if m is None:
                body, self.pos = text[self.pos :], n
            else:
                body, self.pos = text[self.pos : m.start()], min(n, m.end() + 1)
            if body.endswith("\n"):
                body = body[:-1]
            if strip and "\t" in body:
                body = "\n".join(line.lstrip("\t") for line in body.split("\n"))
            self.heredocs.append(body)
            # the command's standard input when this is its last redirection of fd 0 (bash
            # applies them in order: `<<'EOF' <<<x` reads x, `3<<EOF` is not stdin at all)
            stdin = command.fds[index] in ("", "0") and not any(
                op in _STDIN_OPS and fd in ("", "0")
                for (op, _), fd in zip(command.redirects[index + 1 :], command.fds[index + 1 :])
            )
            if stdin:
                command.stdin_script = body
                # an unquoted body is what bash hands on only when nothing in it expands and no
                # backslash escapes anything (bash drops the one before $, `, \ and a newline)
                command.stdin_dynamic = not quoted and "\\" in body
            if not quoted and ("$" in body or "`" in body):
                scanner = _Parser(body, self.budget, self.nesting + 1, self.heredocs, extglob=self.extglob)
                dynamic = scanner._expansions()
                if stdin:
                    command.stdin_dynamic = command.stdin_dynamic or dynamic
                command.nested.extend(scanner.subs)

    def _expansions(self) -> bool:
        """Scan an unquoted here-document body: its substitutions parsed; whether it expands."""
        text = self.text
        special = self.rx.special
        dynamic = False
        pos = 0
        while True:
            self._spend()
            m = special.search(text, pos)
            if m is None:
                return dynamic
            pos = m.start()
            c = text[pos]
            if c == "\\":
                pos += 2
                continue
            self.pos = pos
            if c == "$":
                _, more = self._dollar()
                dynamic |= more
            else:
                self._backtick()
                dynamic = True
            pos = self.pos

    def _arith_command(self) -> bool:
        """A (( ... )) at pos: consumed, True; or nothing consumed (it is two subshells)."""
        saved = self._save()
        end = self._arith(self.pos + 2)
        if end < 0:
            self._restore(saved)
            return False
        self.pos = end
        return True

    def _cond(self) -> list[Word]:
        """The words of a [[ ... ]] after its `[[`, up to its `]]`: tests, never redirections."""
        words: list[Word] = []
        while True:
            c = self._blank()
            if not c:
                raise ParseError("unterminated [[")
            if c == "\n":
                self.pos += 1
                continue
            start = self.pos
            word = self._word(cond=True)
            if word.raw.startswith("]]"):
                self.pos = start + 2
                return words
            if self.pos == start:
                raise ParseError("unreadable [[")
            words.append(word)

    def _coproc_name(self) -> None:
        """After `coproc`: skip the NAME of `coproc NAME { ...; }` or `coproc NAME ( ... )`."""
        saved = self._save()
        c = self._blank()
        if c and c not in "\n;&|()<>":
            word = self._word()
            nxt = self._blank()
            if self.rx.name.fullmatch(word.raw) and (
                nxt == "(" or (nxt == "{" and self.text[self.pos + 1 : self.pos + 2] in (" ", "\t", "\n"))
            ):
                return
        self._restore(saved)

    def _rescope(self, commands: list[Command], start: int, scope: tuple) -> None:
        """Commands from `start` run in a subshell of their own (a pipeline element, a background list)."""
        if start >= len(commands):
            return
        k = len(scope)
        new = (self._new_id(),)
        for command in commands[start:]:
            command.scope = command.scope[:k] + new + command.scope[k:]

    # -- the command list -----------------------------------------------------------------

    def parse(self) -> list[Command]:
        return self._list(None)

    def _list(self, closer: str | None) -> list[Command]:
        """Commands up to `closer` (")" for a substitution, consumed) or the end of the text."""
        text = self.text
        commands: list[Command] = []
        levels = [_Level("root", (), 0)]
        cur = Command(())
        cur.line = self.lines
        pending_func: str | None = None
        insert_at: int | None = None  # where the redirections after a compound command's end go
        closed = False
        expect_name = False  # after `function`
        after_time = False
        negate = False

        def finish(op: str | None) -> None:
            nonlocal cur, negate, insert_at
            lvl = levels[-1]
            if cur.words or cur.redirects or cur.nested or cur.cond:
                cur.next_op = op
                cur.negated = negate
                if insert_at is not None and not cur.words:
                    # `{ cd x; } > f`: the redirections are made before the compound command runs
                    commands.insert(insert_at, cur)
                else:
                    commands.append(cur)
            negate = False
            insert_at = None
            source = cur if cur.words and commands and commands[-1] is cur and lvl.elem == len(commands) - 1 else None
            if op in ("|", "|&"):
                self._rescope(commands, lvl.elem, lvl.scope)
                lvl.elem = len(commands)
                lvl.piped = True
            else:
                source = None
                if lvl.piped:
                    self._rescope(commands, lvl.elem, lvl.scope)
                    lvl.piped = False
                lvl.elem = len(commands)
                if op == "&" or (lvl.coproc and op not in ("&&", "||")):
                    self._rescope(commands, lvl.list, lvl.scope)
                    for command in commands[lvl.list :]:
                        command.background = True
                    lvl.coproc = False
                if op not in ("&&", "||"):
                    lvl.list = len(commands)
            cur = Command(lvl.scope)
            cur.line = self.lines
            cur.pipe_from = source

        def marker(kind: str) -> None:
            lvl = levels[-1]
            commands.append(Command(lvl.scope, kind))
            lvl.elem = lvl.list = len(commands)

        def push(kind: str, state: str | None = None, subshell: bool = False) -> None:
            nonlocal cur, pending_func
            outer = levels[-1]
            scope = outer.scope + (self._new_id(),) if subshell else outer.scope
            levels.append(_Level(kind, scope, len(commands), state, pending_func))
            pending_func = None
            cur = Command(scope)
            cur.line = self.lines

        def close(kinds: tuple[str, ...]) -> bool:
            nonlocal cur, insert_at
            for k in range(len(levels) - 1, 0, -1):
                if levels[k].kind in kinds:
                    break
            else:
                return False
            while len(levels) > k:
                finish(";")
                lvl = levels.pop()
                if lvl.kind == "if":
                    commands.append(Command(lvl.scope, "fi"))
                elif lvl.kind == "loop":
                    commands.append(Command(lvl.scope, "done"))
                elif lvl.kind == "case":
                    commands.append(Command(lvl.scope, "esac"))
                if lvl.func is not None:
                    body = commands[lvl.start :]
                    del commands[lvl.start :]
                    cut = len(levels[-1].scope)
                    for command in body:
                        command.scope = command.scope[cut:]
                    definition = Command(levels[-1].scope, "function")
                    definition.name, definition.body = lvl.func, body
                    commands.append(definition)
                insert_at = lvl.start
            cur = Command(levels[-1].scope)
            cur.line = self.lines
            return True

        def hold() -> None:
            """Substitutions in the words of a header: they run, in a command of their own."""
            if self.subs:
                test = Command(levels[-1].scope, "test")
                test.nested = self._take()
                commands.append(test)

        while True:
            self._spend()
            c = self._blank()
            if not c:
                break
            lvl = levels[-1]
            if c == "\n":
                self.pos += 1
                self.lines += 1
                if self.pending:
                    self._read_heredocs()
                if lvl.kind == "case" and lvl.state != "body":
                    continue
                if lvl.kind == "loop" and lvl.state in ("name", "in", "list"):
                    if lvl.state != "name":
                        lvl.state = "body"
                    continue
                if (
                    not (cur.words or cur.redirects or cur.nested)
                    and commands
                    and commands[-1].next_op in ("&&", "||", "|", "|&")
                    and lvl.elem == len(commands)
                ):
                    continue  # a line break after && or | continues the list
                finish("\n")
                continue
            if lvl.kind == "case" and lvl.state != "body":
                op = self._operator()
                if op is not None:
                    if op == ")" and lvl.state == "pattern":
                        lvl.state = "body"
                        lvl.elem = lvl.list = len(commands)
                    continue
                start = self.pos
                word = self._word()
                if self.pos == start:
                    raise ParseError(f"unexpected {c!r} in a case")
                if lvl.state == "subject":
                    lvl.state = "in"
                elif lvl.state == "in":
                    lvl.state = "pattern"
                elif word.raw == "esac":
                    self.subs.clear()
                    close(("case",))
                    continue
                hold()
                continue
            if lvl.kind == "loop" and lvl.state in ("name", "in", "list"):
                start = self.pos
                if lvl.state == "name":
                    if text.startswith("((", self.pos):
                        if not self._arith_command():
                            raise ParseError("unreadable for ((")
                    else:
                        self._word()
                    if self.pos == start:
                        raise ParseError(f"unexpected {c!r} after for")
                    lvl.state = "in"
                    hold()
                    continue
                op = self._operator()
                if op is not None:
                    lvl.state = "body"
                    lvl.elem = lvl.list = len(commands)
                    continue
                word = self._word()
                if self.pos == start:
                    raise ParseError(f"unexpected {c!r} in a for")
                if lvl.state == "in" and word.raw == "in":
                    lvl.state = "list"
                elif word.raw == "do" and lvl.state == "in":
                    lvl.state = "body"
                    lvl.elem = lvl.list = len(commands)
                else:
                    lvl.state = "list"
                    if lvl.head is not None and len(lvl.head.cond) < 256:
                        lvl.head.cond.append(word)
                    hold()
                continue
            at_start = not cur.words and not cur.redirects
            if at_start and text.startswith("((", self.pos) and self._arith_command():
                cur.kind = "test"
                cur.nested.extend(self._take())
                continue
            redirect = self._redirect()
            if redirect is not None:
                fd, op = redirect
                nxt = self._blank()
                if not nxt or nxt == "\n" or (nxt in ";&|()<>" and not text.startswith(("<(", ">("), self.pos)):
                    raise ParseError(f"a redirection {op} with no target")
                target = self._word()
                cur.redirects.append((op, target))
                cur.fds.append(fd)
                if op in ("<<", "<<-"):
                    self.pending.append((target.text, op == "<<-", target.quoted, cur, len(cur.redirects) - 1))
                    if fd in ("", "0"):
                        cur.stdin_script, cur.stdin_dynamic = "", False
                elif op == "<<<" and fd in ("", "0"):
                    cur.stdin_script = None if target.dynamic else target.text
                    cur.stdin_dynamic = target.dynamic
                elif op in ("<", "<>", "<&") and fd in ("", "0"):
                    cur.stdin_script, cur.stdin_dynamic = None, True
                if self.subs:
                    cur.nested.extend(self._take())
                continue
            op = self._operator()
            if op is not None:
                if op == "(":
                    if (
                        len(cur.words) == 1
                        and not cur.redirects
                        and cur.words[0].raw == cur.words[0].text
                        and self._blank() == ")"
                    ):
                        self.pos += 1
                        pending_func = cur.words[0].text
                        cur = Command(lvl.scope)
                        cur.line = self.lines
                        continue
                    if not at_start:
                        finish(";")
                    push("paren", subshell=True)
                    continue
                if op == ")":
                    if lvl.kind == "case" or close(("paren",)):
                        continue
                    if closer == ")":
                        closed = True
                        break
                    continue  # a stray ")"
                if op in (";;", ";&", ";;&"):
                    finish(";")
                    if levels[-1].kind == "case":
                        levels[-1].state = "pattern"
                    continue
                finish(op)
                continue
            start = self.pos
            word = self._word()
            if self.pos == start:
                raise ParseError(f"unexpected {c!r}")
            if expect_name:
                expect_name = False
                pending_func = word.text
                saved = self._save()
                if self._blank() == "(":
                    self.pos += 1
                    if self._blank() == ")":
                        self.pos += 1
                    else:
                        self._restore(saved)
                continue
            if at_start and word.raw == word.text and word.text in _RESERVED:
                t = word.text
                if after_time and t not in ("-p", "--"):
                    after_time = False
                if t == "{":
                    push("brace")
                elif t == "}":
                    close(("brace",))
                elif t == "if":
                    push("if")
                    marker("if")
                elif t in ("while", "until"):
                    push("loop", t)
                    marker(t)
                elif t in ("for", "select"):
                    push("loop", "name")
                    marker("for")
                    levels[-1].head = commands[-1]
                elif t == "case":
                    push("case", "subject")
                    marker("case")  # which branch runs is not known: nothing in one is sure
                elif t in ("then", "else", "elif", "do"):
                    finish(";")
                    if t == "do" and levels[-1].kind == "loop" and levels[-1].state not in ("while", "until"):
                        pass
                    elif t != "do" or levels[-1].kind == "loop":
                        marker(t)
                elif t == "fi":
                    close(("if",))
                elif t == "done":
                    close(("loop",))
                elif t == "esac":
                    close(("case",))
                elif t == "!":
                    negate = not negate
                elif t == "time":
                    after_time = True
                elif t in ("-p", "--"):
                    if not after_time:
                        cur.words.append(word)
                    after_time = False
                elif t == "function":
                    expect_name = True
                elif t == "[[":
                    cur.cond = self._cond()
                    cur.kind = "test"
                    cur.nested.extend(self._take())
                elif t == "coproc":
                    levels[-1].coproc = True
                    self._coproc_name()
                continue
            after_time = False
            pending_func = None
            cur.words.append(word)
            if self.subs:
                cur.nested.extend(self._take())
        if closer is not None and not closed:
            raise ParseError("unterminated $(")
        finish(None)
        while len(levels) > 1:
            close((levels[-1].kind,))
        if self.pending and closer is None:
            self._read_heredocs()
        return commands


_RESERVED = frozenset(
    (
        "{",
        "}",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "while",
        "until",
        "for",
        "select",
        "do",
        "done",
        "case",
        "esac",
        "!",
        "time",
        "-p",
        "--",
        "function",
        "[[",
        "coproc",
    )
)


def parse(script: str) -> tuple[list[Command], list[str]]:
    """The simple commands of `script` (its own, not those of its substitutions or functions),
    and the scripts of its substitutions as text. Raises ParseError."""
    script = _clean(script)
    parser = _Parser(script, _Budget(_MAX_STEPS), extglob="extglob" in script)
    try:
        commands = parser.parse()
    except _TooLarge:
        raise ParseError("too large to judge") from None
    return [c for c in commands if c.kind == "simple" and (c.words or c.redirects)], parser.texts


def _clean(script: str) -> str:
    """The script as bash gets it: no NUL (bash drops one it reads; an argument ends at one), and
    a lone surrogate (text no UTF-8 encodes) as the replacement character it is sent as."""
    if "\0" in script:
        script = script.replace("\0", "")
    if not script.isascii():
        try:
            script.encode("utf-8")
        except UnicodeEncodeError:
            script = "".join("\ufffd" if 0xD800 <= ord(ch) < 0xE000 else ch for ch in script)
    return script


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _why(word: Word) -> str:
    if word.why:
        return word.why
    if "$(" in word.raw or "`" in word.raw or "<(" in word.raw or ">(" in word.raw:
        return "a path a command prints"
    return "a path held in a variable"


def _is_assignment(word: Word) -> bool:
    return _r().assignment.match(word.raw) is not None


def _subscript_code(text: str) -> bool:
    """Whether a name or an arithmetic expression bash evaluates holds a subscript whose expansion
    runs a command: `a[$(cmd)]`, which a quoted string passed to let, read, printf -v, test -v,
    unset or declare -i reaches unseen by the parser."""
    k = text.find("[")
    return k >= 0 and ("$(" in text[k:] or "`" in text[k:] or "${" in text[k:] or "$[" in text[k:])


def _past_quote(raw: str, i: int) -> int:
    """When `raw[i]` begins an escape or a quoted string, the index just past it; else -1."""
    c, n = raw[i], len(raw)
    if c == "\\":
        return i + 2
    if c == "'":
        end = raw.find("'", i + 1)
        return n if end < 0 else end + 1
    if c == '"':
        i += 1
        while i < n and raw[i] != '"':
            i += 2 if raw[i] == "\\" else 1
        return i + 1
    return -1


def _unquoted_glob(raw: str) -> bool:
    """Whether the source of a word has a glob character outside quotes."""
    i, n = 0, len(raw)
    while i < n:
        after = _past_quote(raw, i)
        if after >= 0:
            i = after
            continue
        if raw[i] in "*?[":
            return True
        i += 1
    return False


def _braces(raw: str, limit: int = _MAX_BRACE_WORDS, depth: int = 0) -> list[str] | None:
    """Bash's brace expansion of a word's source text; None when it makes more than `limit` words."""
    if depth > 32 or len(raw) > 65536:
        return None
    i, n = 0, len(raw)
    while i < n:
        after = _past_quote(raw, i)
        if after >= 0:
            i = after
            continue
        c = raw[i]
        if c == "$" and i + 1 < n and raw[i + 1] in "({":
            depth, i = 0, i + 1
            while i < n:
                if raw[i] in "({":
                    depth += 1
                elif raw[i] in ")}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            i += 1
            continue
        if c == "{":
            alternatives = _brace_body(raw, i)
            if alternatives is not None:
                close, items = alternatives
                if len(items) > limit:
                    return None
                out: list[str] = []
                for item in items:
                    more = _braces(raw[:i] + item + raw[close + 1 :], limit, depth + 1)
                    if more is None:
                        return None
                    out.extend(more)
                    if len(out) > limit:
                        return None
                return out
        i += 1
    return [raw]


def _brace_body(raw: str, start: int) -> tuple[int, list[str]] | None:
    """The `}` closing the brace at `start` and its alternatives, or None when it expands nothing."""
    depth, i, n = 0, start, len(raw)
    commas: list[int] = []
    while i < n:
        c = raw[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            end = raw.find(c, i + 1)
            if end < 0:
                return None
            i = end + 1
            continue
        if c == "$" and i + 1 < n and raw[i + 1] == "{":
            depth += 1
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        elif c == "," and depth == 1:
            commas.append(i)
        i += 1
    else:
        return None
    close = i
    if commas:
        bounds = [start] + commas + [close]
        return close, [raw[bounds[k] + 1 : bounds[k + 1]] for k in range(len(bounds) - 1)]
    body = raw[start + 1 : close]
    m = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?", body)
    if m is None:
        return None
    if m.group(1) is not None:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        if abs(b - a) // step > _MAX_BRACE_WORDS:
            return close, [""] * (_MAX_BRACE_WORDS + 1)
        width = (
            max(len(m.group(1)), len(m.group(2)))
            if (m.group(1).lstrip("-").startswith("0") or m.group(2).lstrip("-").startswith("0"))
            else 0
        )
        values = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
        return close, [str(v).zfill(width) if width else str(v) for v in values]
    a, b = ord(m.group(4)), ord(m.group(5))
    step = abs(int(m.group(6) or 1)) or 1
    values = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
    return close, [chr(v) for v in values]
