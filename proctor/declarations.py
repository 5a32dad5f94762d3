"""Declarations as git's diff driver names them: the lines a `file#declaration` claim names,
the lines each declaration spans, and which declarations a change lands in.

Core, because the job footprint (`job wait`, `describe job`), releases, overlaps and the
guard's claimed-declaration row all place lines the same way; it imports only the standard
library's cheapest modules, for the hook's sake (git is asked only when a file's driver or
its configured pattern must be read).

A declaration line is a line git's diff driver for the file matches as a hunk header:
- the driver is the `diff` attribute (`git check-attr diff`; `-diff` means none), else
  proctor's guess from the extension (DIFF_DRIVERS);
- its patterns are `diff.<driver>.xfuncname` (extended) or `funcname` (basic) from git's
  config, else git's own built-in patterns (BUILTIN, as git 2.39 ships them), else proctor's
  for JavaScript and TypeScript (git has none), else git's default rule (a line starting with
  a letter, `_` or `$`);
- each pattern line is tried in order on each line, and the first that matches decides; a
  `!` line that matches makes it no declaration line.
Git's patterns are POSIX regular expressions, applied one line at a time; `translate` turns
one into Python's dialect, keeping every match inside its line, so one scan of the whole
file finds every line a pattern matches.

On top of git's lines, as the spec has it: in Go a top-level `var`, `const` or `type` is a
declaration of its own; a doc comment (or decorator, or attribute) directly above a
declaration line is that declaration's; a declaration spans to the line before the next
one's first line; the lines above the first declaration belong to none.

A claim names a declaration when it is the whole declaration line or a run of it that
starts and ends on a word boundary: `executeStages` names `func (m *Magus) executeStages(`,
`execute` does not.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re

# Extensions whose files git (or proctor) has a funcname diff driver for.
DIFF_DRIVERS = {
    ".py": "python",
    ".pyi": "python",
    ".go": "golang",
    ".rs": "rust",
    ".rb": "ruby",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".cs": "csharp",
    ".php": "php",
    ".pl": "perl",
    ".pm": "perl",
    ".c": "cpp",
    ".h": "cpp",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".m": "objc",
    ".mm": "objc",
    ".swift": "swift",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".md": "markdown",
    ".markdown": "markdown",
    ".tex": "tex",
    ".css": "css",
    ".scss": "css",
    ".html": "html",
    ".htm": "html",
    ".sh": "bash",
    ".bash": "bash",
    ".ex": "elixir",
    ".exs": "elixir",
    ".f90": "fortran",
    ".pas": "pascal",
    ".scm": "scheme",
    ".dts": "dts",
    ".bib": "bibtex",
    ".adb": "ada",
    ".ads": "ada",
    ".mat": "matlab",
}

# git's built-in funcname patterns (userdiff.c, git 2.39), written as git writes them: one
# POSIX extended expression per line, `!` before one that rules a line out. (pattern, icase)
BUILTIN = {
    "ada": (
        "!^(.*[ \t])?(is[ \t]+new|renames|is[ \t]+separate)([ \t].*)?$\n"
        "!^[ \t]*with[ \t].*$\n"
        "^[ \t]*((procedure|function)[ \t]+.*)$\n"
        "^[ \t]*((package|protected|task)[ \t]+.*)$",
        True,
    ),
    "bash": (
        "^[ \t]*(([a-zA-Z_][a-zA-Z0-9_]*[ \t]*\\([ \t]*\\))|(function[ \t]+[a-zA-Z_][a-zA-Z0-9_]*"
        "(([ \t]*\\([ \t]*\\))|([ \t]+)))[ \t]*(\\{|\\(\\(?|\\[\\[))",
        False,
    ),
    "bibtex": ("(@[a-zA-Z]{1,}[ \t]*\\{{0,1}[ \t]*[^ \t\"@',\\#}{~%]*).*$", False),
    "cpp": ("!^[ \t]*[A-Za-z_][A-Za-z_0-9]*:[[:space:]]*($|/[/*])\n^((::[[:space:]]*)?[A-Za-z_].*)$", False),
    "csharp": (
        "!^[ \t]*(do|while|for|if|else|instanceof|new|return|switch|case|throw|catch|using)\n"
        "^[ \t]*(((static|public|internal|private|protected|new|virtual|sealed|override|unsafe|async)"
        "[ \t]+)*[][<>@.~_[:alnum:]]+[ \t]+[<>@._[:alnum:]]+[ \t]*\\(.*\\))[ \t]*$\n"
        "^[ \t]*(((static|public|internal|private|protected|new|virtual|sealed|override|unsafe)"
        "[ \t]+)*[][<>@.~_[:alnum:]]+[ \t]+[@._[:alnum:]]+)[ \t]*$\n"
        "^[ \t]*(((static|public|internal|private|protected|new|unsafe|sealed|abstract|partial)"
        "[ \t]+)*(class|enum|interface|struct|record)[ \t]+.*)$\n"
        "^[ \t]*(namespace[ \t]+.*)$",
        False,
    ),
    "css": ("![:;][[:space:]]*$\n^[:[@.#]?[_a-z0-9].*$", True),
    "dts": ("!;\n!=\n^[ \t]*((/[ \t]*\\{|&?[a-zA-Z_]).*)", False),
    "elixir": ("^[ \t]*((def(macro|module|impl|protocol|p)?|test)[ \t].*)$", False),
    "fortran": (
        "!^([C*]|[ \t]*!)\n"
        "!^[ \t]*MODULE[ \t]+PROCEDURE[ \t]\n"
        "^[ \t]*((END[ \t]+)?(PROGRAM|MODULE|BLOCK[ \t]+DATA"
        "|([^!'\" \t]+[ \t]+)*(SUBROUTINE|FUNCTION))[ \t]+[A-Z].*)$",
        True,
    ),
    "fountain": ("^((\\.[^.]|(int|ext|est|int\\.?/ext|i/e)[. ]).*)$", True),
    "golang": ("^[ \t]*(func[ \t]*.*(\\{[ \t]*)?)\n^[ \t]*(type[ \t].*(struct|interface)[ \t]*(\\{[ \t]*)?)", False),
    "html": ("^[ \t]*(<[Hh][1-6]([ \t].*)?>.*)$", False),
    "java": (
        "!^[ \t]*(catch|do|for|if|instanceof|new|return|switch|throw|while)\n"
        "^[ \t]*(([a-z]+[ \t]+)*(class|enum|interface)[ \t]+[A-Za-z][A-Za-z0-9_$]*[ \t]+.*)$\n"
        "^[ \t]*(([A-Za-z_<>&][][?&<>.,A-Za-z_0-9]*[ \t]+)+[A-Za-z_][A-Za-z_0-9]*[ \t]*\\([^;]*)$",
        False,
    ),
    "kotlin": ("^[ \t]*(([a-z]+[ \t]+)*(fun|class|interface)[ \t]+.*)$", False),
    "markdown": ("^ {0,3}#{1,6}[ \t].*", False),
    "matlab": ("^[[:space:]]*((classdef|function)[[:space:]].*)$|^(%%%?|##)[[:space:]].*$", False),
    "objc": (
        "!^[ \t]*(do|for|if|else|return|switch|while)\n"
        "^[ \t]*([-+][ \t]*\\([ \t]*[A-Za-z_][A-Za-z_0-9* \t]*\\)[ \t]*[A-Za-z_].*)$\n"
        "^[ \t]*(([A-Za-z_][A-Za-z_0-9]*[ \t]+)+[A-Za-z_][A-Za-z_0-9]*[ \t]*\\([^;]*)$\n"
        "^(@(implementation|interface|protocol)[ \t].*)$",
        False,
    ),
    "pascal": (
        "^(((class[ \t]+)?(procedure|function)|constructor|destructor|interface"
        "|implementation|initialization|finalization)[ \t]*.*)$\n"
        "^(.*=[ \t]*(class|record).*)$",
        False,
    ),
    "perl": (
        "^package .*\n"
        "^sub [[:alnum:]_':]+[ \t]*(\\([^)]*\\)[ \t]*)?(:[^;#]*)?(\\{[ \t]*)?(#.*)?$\n"
        "^(BEGIN|END|INIT|CHECK|UNITCHECK|AUTOLOAD|DESTROY)[ \t]*(\\{[ \t]*)?(#.*)?$\n"
        "^=head[0-9] .*",
        False,
    ),
    "php": (
        "^[\t ]*(((public|protected|private|static|abstract|final)[\t ]+)*function.*)$\n"
        "^[\t ]*((((final|abstract)[\t ]+)?class|enum|interface|trait).*)$",
        False,
    ),
    "python": ("^[ \t]*((class|(async[ \t]+)?def)[ \t].*)$", False),
    "ruby": ("^[ \t]*((class|module|def)[ \t].*)$", False),
    "rust": (
        '^[\t ]*((pub(\\([^\\)]+\\))?[\t ]+)?((async|const|unsafe|extern([\t ]+"[^"]+"))[\t ]+)?'
        "(struct|enum|union|mod|trait|fn|impl|macro_rules!)[< \t]+[^;]*)$",
        False,
    ),
    "scheme": (
        "^[\t ]*(\\(((define|def(struct|syntax|class|method|rules|record|proto|alias)?)[-*/ \t]"
        "|(library|module|struct|class)[*+ \t]).*)$",
        False,
    ),
    "tex": ("^(\\\\((sub)*section|chapter|part)\\*{0,1}\\{.*)$", False),
}

# proctor's own, for languages git has no driver for (a `diff.javascript.xfuncname` in git's
# config wins over these, as it would in git): functions, classes and methods at any depth,
# bindings and TypeScript's type declarations at the top level; control statements are not.
_JS = (
    "!^[ \t]*(if|for|while|switch|catch|with|return|else|do|try|finally)([ \t({]|$)\n"
    "^[ \t]*((export[ \t]+)?(default[ \t]+)?(async[ \t]+)?function[ \t*].*)$\n"
    "^[ \t]*((export[ \t]+)?(default[ \t]+)?(abstract[ \t]+)?class[ \t].*)$\n"
    "^((export[ \t]+)?(declare[ \t]+)?(const|let|var|interface|type|enum|namespace|module)[ \t]+"
    "[A-Za-z_$][A-Za-z0-9_$.]*.*)$\n"
    "^[ \t]+(((static|async|get|set|public|private|protected|readonly|override|abstract)[ \t]+)*\\*?"
    "#?[A-Za-z_$][A-Za-z0-9_$]*[ \t]*(<[^>]*>)?\\([^;]*\\{[ \t]*)$"
)
PROCTOR_OWN = {"javascript": (_JS, False), "typescript": (_JS, False)}

# What else starts a declaration line: Go's top-level var, const and type.
EXTRA = {"golang": "^((var|const|type)([ \t(].*)?)$"}

# Lines directly above a declaration line that are its own: doc comments, decorators, attributes.
_C_LIKE = (b"//", b"/*", b"*", b"@", b"#[", b"#![")
ABOVE = {
    "python": (b"#", b"@"),
    "ruby": (b"#",),
    "perl": (b"#",),
    "bash": (b"#",),
    "elixir": (b"#", b"@"),
    "golang": (b"//", b"/*", b"*"),
    "rust": (b"//", b"/*", b"*", b"#["),
    "java": _C_LIKE,
    "kotlin": _C_LIKE,
    "csharp": (b"//", b"/*", b"*", b"["),
    "php": _C_LIKE,
    "cpp": (b"//", b"/*", b"*"),
    "objc": (b"//", b"/*", b"*"),
    "swift": _C_LIKE,
    "javascript": _C_LIKE,
    "typescript": _C_LIKE,
    "scheme": (b";",),
    "tex": (b"%",),
    "matlab": (b"%",),
    "ada": (b"--",),
    "pascal": (b"//", b"{", b"(*"),
    "css": (b"/*", b"*"),
    "dts": (b"//", b"/*", b"*"),
}

# Of those, what binds to the declaration below it across blank lines too.
DECORATORS = {
    "python": (b"@",),
    "rust": (b"#[",),
    "java": (b"@",),
    "kotlin": (b"@",),
    "javascript": (b"@",),
    "typescript": (b"@",),
    "csharp": (b"[",),
    "php": (b"#[",),
    "swift": (b"@",),
}

_CLASSES = {
    "alpha": "A-Za-z",
    "digit": "0-9",
    "alnum": "A-Za-z0-9",
    "upper": "A-Z",
    "lower": "a-z",
    "space": " \\t\\r\\f\\v",
    "blank": " \\t",
    "xdigit": "0-9A-Fa-f",
    "word": "A-Za-z0-9_",
    "punct": "!-/:-@\\[-`{-~",
    "cntrl": "\\x00-\\x09\\x0b-\\x1f\\x7f",
    "print": " -~",
    "graph": "!-~",
}
_ESCAPES = {
    "w": "[A-Za-z0-9_]",
    "W": "[^A-Za-z0-9_\\n]",
    "s": "[ \\t\\r\\f\\v]",
    "S": "[^ \\t\\r\\f\\v\\n]",
    "<": "\\b(?=\\w)",
    ">": "\\b(?<=\\w)",
    "b": "\\b",
    "B": "\\B",
    "`": "^",
    "'": "$",
}


def translate(pattern: str, extended: bool = True) -> str:
    """One POSIX regular expression (extended, or basic for git's `funcname`) in Python's
    dialect, never matching across a newline: git applies it to one line at a time, so the
    buffer anchors (\\` and \\') are the line's. POSIX has no lazy quantifier: `x+?` is
    `(x+)?`. What Python cannot say is POSIX's leftmost-longest choice between alternatives,
    which changes only the text a header shows, never whether a line is a declaration."""
    tokens: list[list] = []  # [text, quantified]; a group collapses into one token when it closes
    opened: list[int] = []
    i, n = 0, len(pattern)

    def atom(text: str) -> None:
        tokens.append([text, False])

    def quantify(text: str) -> None:
        if not tokens or tokens[-1][0] in ("(", "|", "^"):
            atom(re.escape(text[0]) + text[1:])  # nothing to repeat: the character is literal
            return
        if tokens[-1][1]:
            tokens[-1][0] = "(?:" + tokens[-1][0] + ")"
        tokens[-1][0] += text
        tokens[-1][1] = True

    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            i += 2
            if not extended and nxt == "(":
                opened.append(len(tokens))
                atom("(")
            elif not extended and nxt == ")" and opened:
                start = opened.pop()
                tokens[start:] = [["".join(t[0] for t in tokens[start:]) + ")", False]]
            elif not extended and nxt == "|":
                atom("|")
            elif not extended and nxt in "+?":
                quantify(nxt)
            elif not extended and nxt == "{":
                close = pattern.find("\\}", i)
                if close != -1 and re.fullmatch(r"\d*(,\d*)?", pattern[i:close]):
                    quantify("{" + pattern[i:close] + "}")
                    i = close + 2
                else:
                    atom("\\{")
            elif nxt in _ESCAPES:
                atom(_ESCAPES[nxt])
            elif nxt.isdigit():
                atom("\\" + nxt)
            else:
                atom(re.escape(nxt))
            continue
        if c == "[":
            end, body = _bracket(pattern, i)
            if end is None:
                atom("\\[")
                i += 1
            else:
                atom(body)
                i = end
            continue
        if c == "{" and extended:
            m = re.match(r"\{(\d*)(,(\d*))?\}", pattern[i:])
            if m and (m.group(1) or m.group(3)):
                quantify(m.group(0))
                i += len(m.group(0))
            else:
                atom("\\{")
                i += 1
            continue
        if c in "*+?" and (extended or c == "*"):
            if c == "*" and (not tokens or tokens[-1][0] in ("(", "|", "^")):
                atom("\\*")  # a leading * is literal in POSIX
            else:
                quantify(c)
        elif c == "(" and extended:
            opened.append(len(tokens))
            atom("(")
        elif c == ")" and extended and opened:
            start = opened.pop()
            tokens[start:] = [["".join(t[0] for t in tokens[start:]) + ")", False]]
        elif c == "|" and extended:
            atom("|")
        elif c == "^" and (extended or not tokens or tokens[-1][0] == "("):
            atom("^")
        elif c == "$" and (extended or i + 1 == n or pattern.startswith("\\)", i + 1)):
            atom("$")
        elif c == ".":
            atom(".")
        else:
            atom(re.escape(c))
        i += 1
    return "".join(t[0] for t in tokens)


def _bracket(pattern: str, at: int) -> tuple[int | None, str]:
    """A bracket expression starting at `at`: (index after it, its Python class)."""
    i = at + 1
    negate = i < len(pattern) and pattern[i] == "^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    spans_newline = False  # a range reaching over \n, which must not match it
    while i < len(pattern):
        c = pattern[i]
        if c == "]" and not first:
            body = "".join(items)
            if negate:
                return i + 1, f"[^{body}\\n]"
            return i + 1, f"(?:(?!\\n)[{body}])" if spans_newline else f"[{body}]"
        first = False
        if c == "[" and i + 1 < len(pattern) and pattern[i + 1] in ":.=":
            kind = pattern[i + 1]
            close = pattern.find(kind + "]", i + 2)
            if close == -1:
                return None, ""
            name = pattern[i + 2 : close]
            if kind == ":":
                if name not in _CLASSES:
                    return None, ""
                items.append(_CLASSES[name])
            else:
                items.append(re.escape(name))
            i = close + 2
            continue
        if c == "-" and items and i + 1 < len(pattern) and pattern[i + 1] != "]":
            items.append("-")
            spans_newline = spans_newline or (pattern[i - 1] <= "\n" <= pattern[i + 1])
        else:
            items.append("\\" + c if c in "\\]^[-" else c)
        i += 1
    return None, ""


class Rules:
    """A driver's compiled patterns: [(regex, negate, has a group)], or the default rule.
    `error` says why a configured pattern could not be read (then nothing can be placed)."""

    __slots__ = ("driver", "rules", "source", "text", "extended", "icase", "error")

    def __init__(
        self, driver: str | None, text: str | None, extended: bool = True, icase: bool = False, source: str = "builtin"
    ) -> None:
        self.driver, self.source, self.text, self.extended, self.icase = driver, source, text, extended, icase
        self.error: str | None = None
        self.rules: list[tuple[re.Pattern, bool, bool]] = []
        if text is None:
            self.rules.append((re.compile(rb"^[A-Za-z_$][^\n]*", re.M), False, False))  # git's default
        else:
            flags = re.M | (re.IGNORECASE if icase else 0)
            for line in text.split("\n"):
                negate = line.startswith("!")
                try:
                    expression = translate(line[1:] if negate else line, extended)
                    compiled = re.compile(expression.encode("utf-8", "surrogateescape"), flags)
                except Exception as exc:  # re.error, OverflowError, RecursionError, ...: git refuses it too
                    self.error = f"diff.{driver}'s pattern {line!r} cannot be read ({exc})"
                    self.rules = []
                    return
                self.rules.append((compiled, negate, compiled.groups > 0))
        extra = EXTRA.get(driver or "")
        if extra and source != "config":
            self.rules.append((re.compile(translate(extra).encode(), re.M), False, True))

    def to_json(self) -> dict:
        """What a job row records, so the job is graded by the patterns it was forked under,
        not by ones its holder set since (git's config and attributes are the holder's to write)."""
        return {
            "driver": self.driver,
            "pattern": self.text,
            "extended": self.extended,
            "icase": self.icase,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, record: dict) -> "Rules":
        """The rules a row recorded (compiled once per distinct record in a process)."""
        return _recorded(
            record.get("driver"),
            record.get("pattern"),
            bool(record.get("extended", True)),
            bool(record.get("icase")),
            str(record.get("source") or "builtin"),
        )

    def headers(self, data: bytes) -> dict[int, bytes]:
        """{0-based line: the text git would print in a hunk header} for every declaration line."""
        if b"\r\n" in data:
            data = data.replace(b"\r\n", b"\n")  # git matches a line without its \r\n
        return {
            line: _shown(match.group(1) if grouped and match.group(1) is not None else match.group(0))
            for line, (match, grouped) in self._decide(data).items()
        }

    def lines(self, data: bytes) -> list[int]:
        """The 0-based declaration lines of `data` (\r\n already made \n), in order."""
        return sorted(self._decide(data))

    def _decide(self, data: bytes) -> dict:
        """{0-based line: (the match, whether its pattern has a group)} for each line the first
        pattern to match decides is a declaration line."""
        decided: dict[int, tuple | None] = {}
        for compiled, negate, grouped in self.rules:
            line, last = 0, 0
            for match in compiled.finditer(data):
                start = match.start()
                line += data.count(b"\n", last, start)
                last = start
                if line not in decided:
                    decided[line] = None if negate else (match, grouped)
        return {k: v for k, v in decided.items() if v is not None}


def _shown(text: bytes) -> bytes:
    """A header as git prints it: 80 bytes at most, trailing blanks (git's isspace: space, tab,
    CR, LF) trimmed, cut before the first byte that does not complete a UTF-8 character."""
    text = text[:80].rstrip(b" \t\r\n")
    try:
        text.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = text[: exc.start]
    return text


_RECORDED: dict[tuple, Rules] = {}


def _recorded(driver, pattern, extended: bool, icase: bool, source: str) -> Rules:
    key = (driver, pattern, extended, icase, source)
    if key not in _RECORDED:
        _RECORDED[key] = Rules(
            driver if isinstance(driver, str) else None,
            pattern if isinstance(pattern, str) else None,
            extended,
            icase,
            source,
        )
    return _RECORDED[key]


class Declaration:
    __slots__ = ("line", "start", "end", "text")

    def __init__(self, line: int, start: int, end: int, text: str) -> None:
        self.line, self.start, self.end, self.text = line, start, end, text  # 1-based, inclusive

    def to_json(self) -> dict:
        return {"line": self.line, "start": self.start, "end": self.end, "text": self.text}

    def __repr__(self) -> str:
        return f"Declaration({self.line}, {self.start}-{self.end}, {self.text!r})"


def declarations(data: bytes, rules: Rules) -> list[Declaration]:
    """Every declaration of a file's bytes, in order, with the lines it spans."""
    if b"\r\n" in data:
        data = data.replace(b"\r\n", b"\n")
    heads = rules.lines(data)
    if not heads:
        return []
    lines = _split(data)
    out = [
        Declaration(
            index + 1,
            _start(lines, heads, i, rules.driver) + 1,
            0,
            lines[index].strip().decode("utf-8", "surrogateescape"),
        )
        for i, index in enumerate(heads)
    ]
    for here, after in zip(out, out[1:]):
        here.end = after.start - 1
    out[-1].end = len(lines)
    return out


def _split(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def _start(lines: list[bytes], heads: list[int], i: int, driver: str | None) -> int:
    """The first line (0-based) of the declaration on line heads[i]: its line, or the doc
    comments, decorators and attributes directly above it (a decorator across blank lines)."""
    above = ABOVE.get(driver or "", ())
    bound = DECORATORS.get(driver or "", ())
    floor = heads[i - 1] + 1 if i else 0
    start, probe = heads[i], heads[i] - 1
    while above and probe >= floor:
        if lines[probe].lstrip().startswith(above):
            start = probe
            probe -= 1
            continue
        if bound and not lines[probe].strip():
            up = probe
            while up >= floor and not lines[up].strip():
                up -= 1
            if up >= floor and lines[up].lstrip().startswith(bound):
                start = probe = up
                probe -= 1
                continue
        break
    return start


def locate(data: bytes, rules: Rules, ranges) -> tuple[list[tuple[int, str]], bool]:
    """place(declarations(data, rules), ranges), as ((line, text) of each declaration hit,
    whether a line lands above the first), reading only the declarations near the ranges:
    the footprint of a large diff places every file's lines this way."""
    if b"\r\n" in data:
        data = data.replace(b"\r\n", b"\n")
    heads = rules.lines(data)
    if not heads:
        return [], any(True for _ in ranges)
    lines = _split(data)
    starts: dict[int, int] = {}

    def index_of(line: int) -> int:  # the declaration holding 0-based `line`, -1 above the first
        i = bisect.bisect_right(heads, line) - 1
        nxt = i + 1
        if nxt < len(heads):
            if nxt not in starts:
                starts[nxt] = _start(lines, heads, nxt, rules.driver)
            if starts[nxt] <= line:
                return nxt
        return i

    hit: set[int] = set()
    outside = False
    for a, b in ranges:
        first, last = index_of(a - 1), index_of(b - 1)
        if first < 0:
            outside = True
            first = 0
        hit.update(range(first, last + 1))
    return [(heads[i] + 1, lines[heads[i]].strip().decode("utf-8", "surrogateescape")) for i in sorted(hit)], outside


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def names(claim: str, text: str) -> bool:
    """Whether declaration claim `claim` names the declaration line `text`: the whole line, or
    a run of it that cuts no word at either end."""
    claim, text = claim.strip(), text.strip()
    if not claim:
        return False
    at = text.find(claim)
    while at != -1:
        before = text[at - 1] if at else ""
        after = text[at + len(claim)] if at + len(claim) < len(text) else ""
        if not (before and _word(before) and _word(claim[0])) and not (after and _word(after) and _word(claim[-1])):
            return True
        at = text.find(claim, at + 1)
    return False


def named(decls: list[Declaration], claim: str) -> list[Declaration]:
    return [d for d in decls if names(claim, d.text)]


def place(decls: list[Declaration], ranges) -> tuple[list[Declaration], bool]:
    """(the declarations lines in `ranges` (1-based, inclusive pairs) land in, whether any
    lands above the first declaration)."""
    starts = [d.start for d in decls]
    hit: dict[int, None] = {}
    outside = False
    for a, b in ranges:
        first = bisect.bisect_right(starts, a) - 1
        last = bisect.bisect_right(starts, b) - 1
        if first < 0:
            outside = True
            first = 0
        for index in range(first, last + 1):
            hit[index] = None
    return [decls[i] for i in sorted(hit)], outside


def digest(data: bytes, decls: list[Declaration]) -> str:
    """sha256 over the lines the given declarations span."""
    if b"\r\n" in data:
        data = data.replace(b"\r\n", b"\n")
    lines = data.split(b"\n")
    h = hashlib.sha256()
    for decl in decls:
        h.update(b"\n".join(lines[decl.start - 1 : decl.end]) + b"\n\0")
    return "sha256:" + h.hexdigest()


# -- drivers and their patterns, as git's attributes and config give them ---------------------


def driver_for(attribute: str | None, path: str) -> str | None:
    """The diff driver from a file's `diff` attribute (proctor.vcs.git.diff_attribute's answer),
    else proctor's by extension; None when the file has none (`-diff`)."""
    if attribute == "unset":
        return None
    if attribute and attribute != "default":
        return attribute
    return DIFF_DRIVERS.get(os.path.splitext(path)[1].lower())


def driver_at(root: str, path: str) -> str | None:
    """The diff driver of a file in the checkout at `root`: .gitattributes' `diff`, else
    proctor's by extension. A file whose `diff` is unset (`*.py -diff`) has none: git diffs it
    as binary."""
    from proctor.vcs import git

    return driver_for(git.diff_attribute(root, path), path)


def configured(config: dict[str, tuple[str, bool]], driver: str | None) -> Rules:
    """The rules for `driver`: git's config (`config`: {driver: (pattern, extended)}, see
    read_config), else git's built-in patterns, else proctor's own, else git's default."""
    if driver in config:
        text, extended = config[driver]
        return Rules(driver, text, extended, source="config")
    if driver in BUILTIN:
        text, icase = BUILTIN[driver]
        return Rules(driver, text, True, icase)
    if driver in PROCTOR_OWN:
        text, icase = PROCTOR_OWN[driver]
        return Rules(driver, text, True, icase, source="proctor")
    return Rules(driver, None, source="default")


def read_config(root: str) -> dict[str, tuple[str, bool]]:
    """{driver: (pattern, extended)} from `diff.<driver>.xfuncname` / `funcname` in git's config
    (the last one set wins, as in git)."""
    from proctor import errors
    from proctor.vcs import git

    try:
        proc = git.run(root, "config", "-z", "--get-regexp", r"^diff\..*\.x?funcname$", check=False)
    except errors.ProctorError:
        return {}
    out: dict[str, tuple[str, bool]] = {}
    for item in proc.stdout.split(b"\0"):
        key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
        if not key.startswith("diff."):
            continue
        driver, _, kind = key[len("diff.") :].rpartition(".")
        if driver and kind in ("xfuncname", "funcname"):
            out[driver] = (value, kind == "xfuncname")
    return out


class Reader:
    """Declarations of files in one checkout, drivers and git's config read once."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._config: dict | None = None
        self._rules: dict[str | None, Rules] = {}

    def rules(self, driver: str | None) -> Rules:
        if driver not in self._rules:
            if self._config is None:
                self._config = read_config(self.root)
            self._rules[driver] = configured(self._config, driver)
        return self._rules[driver]

    def driver(self, path: str) -> str | None:
        from proctor.vcs import git

        return driver_for(git.diff_attribute(self.root, path), path)

    def drivers(self, paths: list[str]) -> dict[str, str | None]:
        """Every path's driver, from one `git check-attr` for all of them."""
        if not paths:
            return {}
        from proctor.vcs import git

        attributes = git.diff_attributes(self.root, paths)
        return {p: driver_for(attributes.get(p), p) for p in paths}

    def of(self, data: bytes, driver: str | None) -> list[Declaration]:
        return declarations(data, self.rules(driver))


class Resolver:
    """Whether two declaration claims of one file name a common declaration: one names the
    other's text (`alpha`, `def alpha`: so also a declaration not written yet), or both name
    one declaration of the file as it is in `root`, each file read once."""

    def __init__(self, root: str) -> None:
        self.reader = Reader(root)
        self._files: dict[str, list[Declaration]] = {}

    def of(self, path: str) -> list[Declaration]:
        if path not in self._files:
            full = os.path.join(self.reader.root, path)
            decls: list[Declaration] = []
            if os.path.isfile(full):
                try:
                    with open(full, "rb") as handle:
                        data = handle.read()
                    driver = self.reader.driver(path)
                    decls = self.reader.of(data, driver) if driver is not None else []
                except OSError:
                    decls = []
            self._files[path] = decls
        return self._files[path]

    def __call__(self, path: str, a: str, b: str) -> bool:
        # one claim a word-bounded run of the other names every line the other names, and
        # the one the file may not have yet (`delta`, `def delta`)
        if names(a, b) or names(b, a):
            return True
        return any(names(a, d.text) and names(b, d.text) for d in self.of(path))


# -- an edit placed before it is made (the guard's claimed-declaration row) --------------------

# Punctuation hosts fold when an edit's old text is not found as written (curly quotes, dashes).
_FOLD = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2002": " ",
        "\u2003": " ",
        "\u2009": " ",
        "\u202f": " ",
    }
)


# The places one edit may land in that are weighed; past them the edit is not placed (and is
# graded by its path), which bounds the hook's work whatever the file and the payload.
PLACES = 200


def _loose(line: str) -> str:
    return " ".join(line.translate(_FOLD).split())


def _local(before: list[str], after: list[str]) -> list[tuple[str, int, int, int, int]]:
    """The line opcodes turning `before` into `after`, an edit's own lines: small, aligned
    with difflib; past a bound, every line of both is changed (a superset, never less)."""
    if len(before) * len(after) > 250_000:
        return [("replace", 0, len(before), 0, len(after))]
    import difflib

    return (
        [op for op in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes() if op[0] != "equal"]
        if before != after
        else []
    )


class _Placing:
    """A file's lines as edits are applied in order, each line remembering the original line it
    is (None: written by an edit), and the original lines the edits changed or inserted after."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self._loose: list[str] | None = None  # the lines folded, kept in step once made
        self.origin: list[int | None] = list(range(len(self.lines)))
        self.changed: set[int] = set()  # original 0-based lines changed or removed
        self.after: set[int] = set()  # original 0-based lines something was inserted after (-1: the top)

    def _original_above(self, index: int) -> int:
        while index >= 0:
            line = self.origin[index]
            if line is not None:
                return line
            index -= 1
        return -1

    def mark(self, start: int, ops) -> None:
        """Mark what `ops` (opcodes of an edit at current line `start`) change, without applying."""
        for _tag, i1, i2, _j1, _j2 in ops:
            for i in range(start + i1, start + i2):
                line = self.origin[i]
                if line is not None:
                    self.changed.add(line)
                else:
                    self.after.add(self._original_above(i))
            if i1 == i2:
                self.after.add(self._original_above(start + i1 - 1))

    def replace(self, start: int, end: int, after: list[str]) -> None:
        """Current lines start..end (inclusive) become `after`."""
        before = self.lines[start : end + 1]
        ops = _local(before, after)
        self.mark(start, ops)
        origin = list(self.origin[start : end + 1])
        mapped: list[int | None] = [None] * len(after)
        cursor_b = cursor_a = 0
        for _tag, i1, i2, j1, j2 in ops + [("end", len(before), len(before), len(after), len(after))]:
            while cursor_b < i1 and cursor_a < j1:
                mapped[cursor_a] = origin[cursor_b]
                cursor_b += 1
                cursor_a += 1
            cursor_b, cursor_a = i2, j2
        self.lines[start : end + 1] = after
        self.origin[start : end + 1] = mapped
        if self._loose is not None:
            self._loose[start : end + 1] = [_loose(line) for line in after]

    def candidates(self, old: str) -> list[tuple[int, int]] | None:
        """Line spans (start, end) where a host might find `old` written differently: its lines
        matching with whitespace, quotes and dashes folded; None past PLACES of them."""
        wanted = [_loose(line) for line in old.split("\n")]
        while wanted and not wanted[-1]:
            wanted.pop()
        while wanted and not wanted[0]:
            wanted.pop(0)
        if not wanted:
            return []
        if self._loose is None:
            self._loose = [_loose(line) for line in self.lines]
        loose, width, first = self._loose, len(wanted), wanted[0]
        heads: list[int] = []
        at = -1
        while True:
            try:
                at = loose.index(first, at + 1)
            except ValueError:
                break
            if at + width > len(loose):
                break
            heads.append(at)
            if len(heads) > PLACES:
                return None  # too many places to weigh: the caller places nothing
        return [(i, i + width - 1) for i in heads if loose[i : i + width] == wanted]


def touched(
    data: bytes, edits: list[tuple[str, str]], rules: Rules, patch: bool = False
) -> tuple[list[Declaration], bool] | None:
    """The declarations an edit of `data` lands in and whether a line lands above the first
    declaration; None when the edit cannot be placed (no old text, text the file does not
    hold in any spelling a host would accept, or text it holds in more than PLACES places).

    Each (old, new) is applied in order at every place it occurs (a host replaces one: the rest
    is a superset). Where a host would fall back to a looser match (its text not in the file
    exactly once; for an apply_patch hunk, `patch`, always, since the patch's context line picks
    where it looks), every place its lines occur with whitespace, quotes and dashes folded is
    marked too. Changed lines are
    placed on the old side, lines an edit inserts on the old side where they go (so code
    inserted into a declaration is that declaration's, whatever it declares) and on the new."""
    if rules.error:
        return None
    text = data.decode("utf-8", "surrogateescape").replace("\r\n", "\n")
    placing = _Placing(text)
    for old, new in edits:
        old, new = old.replace("\r\n", "\n"), new.replace("\r\n", "\n")
        if not old:
            return None
        joined = "\n".join(placing.lines)
        found: list[int] = []
        at = joined.find(old)
        while at != -1:
            found.append(at)
            if len(found) > PLACES:
                return None  # a hook must answer in time: an edit made in that many places is not placed
            at = joined.find(old, at + len(old))
        loose = placing.candidates(old) if patch or len(found) != 1 else []
        if loose is None or (not found and not loose):
            return None
        exact_starts = {joined.count("\n", 0, at) for at in found}
        for start, end in loose:
            if start in exact_starts:
                continue
            placing.mark(start, _local(placing.lines[start : end + 1], new.split("\n")))
        if not found:  # the host's looser match is the one it applies
            start, end = loose[0]
            placing.replace(start, end, new.split("\n"))
            continue
        for at in reversed(found):
            first = joined.count("\n", 0, at)
            last = first + old.count("\n")
            line_start = joined.rfind("\n", 0, at) + 1
            prefix = joined[line_start:at]
            tail_end = joined.find("\n", at + len(old))
            suffix = joined[at + len(old) : tail_end if tail_end != -1 else len(joined)]
            placing.replace(first, last, (prefix + new + suffix).split("\n"))
    after = "\n".join(placing.lines)
    before_decls = declarations(data, rules)
    after_decls = declarations(after.encode("utf-8", "surrogateescape"), rules)
    old_ranges = [[i + 1, i + 1] for i in sorted(placing.changed)]
    hit_old, out_old = place(before_decls, old_ranges)
    inserted = sorted(placing.after)
    hit_at, out_at = place(before_decls, [[i + 1, i + 1] for i in inserted if i >= 0])
    out_at = out_at or (-1 in placing.after)
    new_lines = [i + 1 for i, o in enumerate(placing.origin) if o is None]
    hit_new, out_new = place(after_decls, [[i, i] for i in new_lines])
    seen: dict[str, Declaration] = {}
    for decl in hit_old + hit_at + hit_new:
        seen.setdefault(decl.text, decl)
    return list(seen.values()), out_old or out_at or out_new
