"""What one source file defines and names, read with tree-sitter.

A language is a grammar wheel (`tree-sitter-python`, ...) and two queries run on its tree:
- the grammar's own tags query (`queries/tags.scm`, shipped in the wheel), widened by
  proctor's own patterns where the tags query leaves out a definition a rename must find (a
  module-level `const` in JavaScript, Go's `var` and `const`, Rust's `const` and `static`,
  TypeScript's `type` and `enum`). Its `@definition.*` captures are the definitions;
- every identifier-like leaf, and every string literal whose whole text is a name (Python's
  `__all__`, a `getattr`), as references. That is wider than the tags query's calls on purpose:
  a name imported, annotated or passed along still names the symbol, and a goal that says
  "nothing names it" must not pass while something does. Comments are not references.

Names are compared as each language compares them: Python folds identifiers with NFKC and
Rust with NFC, so `ＬegacyStore` in a Python file names `LegacyStore`; JavaScript's `\\u`
escapes in identifiers are decoded. Nothing here is on the guard's hook path.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata

# name -> (grammar module, its language function, tags queries by module, normalisation)
SPECS = {
    "python": ("tree_sitter_python", "language", ("tree_sitter_python",), "NFKC"),
    "go": ("tree_sitter_go", "language", ("tree_sitter_go",), None),
    "javascript": ("tree_sitter_javascript", "language", ("tree_sitter_javascript",), "escapes"),
    "typescript": ("tree_sitter_typescript", "language_typescript",
                   ("tree_sitter_javascript", "tree_sitter_typescript"), "escapes"),
    "tsx": ("tree_sitter_typescript", "language_tsx", ("tree_sitter_javascript", "tree_sitter_typescript"),
            "escapes"),
    "rust": ("tree_sitter_rust", "language", ("tree_sitter_rust",), "NFC"),
}

EXTENSIONS = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".go": "go",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
}

# prose names things without defining or referencing them: a mention there is reported, and
# neither fails nor passes a goal
PROSE = {".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc"}

# definitions the grammar's tags query leaves out, which a rename must still find
EXTRA_DEFINITIONS = {
    "python": """
(module (expression_statement (assignment left: (pattern_list (identifier) @name))) @definition.constant)
(module (expression_statement (assignment left: (tuple_pattern (identifier) @name))) @definition.constant)
(type_alias_statement left: (type (identifier) @name)) @definition.type
(type_alias_statement left: (type (generic_type (identifier) @name))) @definition.type
""",
    "go": """
(var_spec name: (identifier) @name) @definition.variable
(const_spec name: (identifier) @name) @definition.constant
(type_alias name: (type_identifier) @name) @definition.type
""",
    "javascript": """
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
""",
    "rust": """
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
(function_signature_item name: (identifier) @name) @definition.function
(enum_variant name: (identifier) @name) @definition.variant
""",
}
EXTRA_DEFINITIONS["typescript"] = EXTRA_DEFINITIONS["tsx"] = EXTRA_DEFINITIONS["javascript"] + """
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(class_declaration name: (type_identifier) @name) @definition.class
"""

# leaves that name something, where the grammar has them
IDENTIFIERS = ("identifier", "type_identifier", "field_identifier", "package_identifier", "property_identifier",
               "shorthand_property_identifier", "shorthand_property_identifier_pattern",
               "private_property_identifier", "statement_identifier", "shorthand_field_identifier")
STRINGS = ("string_content", "string_fragment", "interpreted_string_literal_content", "raw_string_literal_content")

NAME = re.compile(r"[^\W\d]\w*|\$[\w$]*|[A-Za-z_$][\w$]*")
_ESCAPE = re.compile(r"\\u\{([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})")

# the queries proctor adds, and the way names are folded: a cached summary from another
# version of either is not reused
QUERY_VERSION = "4"


class NoGrammar(Exception):
    """The language's grammar wheel is not installed (or does not load)."""


def language_of(path: str) -> str | None:
    base = path.rpartition("/")[2]
    dot = base.rfind(".")
    return EXTENSIONS.get(base[dot:].lower()) if dot > 0 else None


def is_prose(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in PROSE


def fold(text: str, how: str | None) -> str:
    """`text` as the language compares names."""
    if how == "escapes":
        if "\\u" in text:
            text = _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
        return text
    if how and not text.isascii():
        return unicodedata.normalize(how, text)
    return text


def may_fold(data: bytes, language: str) -> bool:
    """Whether a name in `data` could be spelt other than by its own bytes: non-ASCII text in
    a language that normalises identifiers, or a `\\u` escape in JavaScript or TypeScript."""
    how = SPECS[language][3]
    if how == "escapes":
        return b"\\u" in data
    return how is not None and not data.isascii()


_WORD = re.compile(r"[^\W\d][\w$]*|\$[\w$]*")


def folded_words(data: bytes, language: str) -> set[str]:
    """The words `data`'s folded text spells that its bytes do not (empty for most files)."""
    if not may_fold(data, language):
        return set()
    text = data.decode("utf-8", "replace")
    folded = fold(text, SPECS[language][3])
    if folded == text:
        return set()
    return set(_WORD.findall(folded)) - set(_WORD.findall(text))


def mentions(data: bytes, language: str | None, names: set[str]) -> bool:
    """Whether `data` could name any of `names`: its bytes hold one, or folded text does."""
    if any(n.encode() in data for n in names):
        return True
    if language is None or not may_fold(data, language):
        return False
    text = fold(data.decode("utf-8", "replace"), SPECS[language][3])
    return any(n in text for n in names)


_loaded: dict[str, tuple] = {}


def grammar(language: str):
    """(Language, Parser, definitions query, names query) for `language`, loaded once."""
    if language in _loaded:
        return _loaded[language]
    import importlib

    try:
        import tree_sitter as ts

        module_name, function, tag_modules, _ = SPECS[language]
        module = importlib.import_module(module_name)
        lang = ts.Language(getattr(module, function)())
        tags = "\n".join(importlib.import_module(m).TAGS_QUERY for m in tag_modules)
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        raise NoGrammar(f"the {language} grammar does not load ({exc}); pip install tree-sitter "
                        f"{SPECS[language][0].replace('_', '-')}") from None
    definitions = ts.Query(lang, tags + "\n" + EXTRA_DEFINITIONS.get(language, ""))
    kinds = [k for k in IDENTIFIERS + STRINGS if lang.id_for_node_kind(k, True)]
    names = ts.Query(lang, "[" + " ".join(f"({k})" for k in kinds) + "] @n")
    _loaded[language] = (lang, ts.Parser(lang), definitions, names)
    return _loaded[language]


def grammar_versions() -> str:
    """The grammars' versions and proctor's queries: part of every cached summary's key."""
    from importlib import metadata

    parts = [QUERY_VERSION]
    for dist in ("tree-sitter", "tree-sitter-python", "tree-sitter-go", "tree-sitter-javascript",
                 "tree-sitter-typescript", "tree-sitter-rust"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=none")
    return ";".join(parts)


def summarize(data: bytes, language: str) -> dict:
    """What `data` defines and names, as a JSON-able record:
    {"defs": [[name, kind, first line, last line, scope, digest, public]], "refs": {name: [lines]},
     "error": None or where the parse failed}. A name used inside a definition of that same name
    (byte for byte inside it, not merely on its lines) is not its reference. Lines count from 1; a definition's lines run
    from its doc comment (where the tags query binds one) to its last line; its digest is of
    its own text, so a changed body is a changed symbol."""
    import tree_sitter as ts

    _lang, parser, definitions, names = grammar(language)
    how = SPECS[language][3]
    tree = parser.parse(data)
    root = tree.root_node
    error = None
    if root.has_error:
        error = _first_error(root)
    found: dict[int, list] = {}
    name_starts = set()
    for pattern, captures in ts.QueryCursor(definitions).matches(root):
        nodes = captures.get("name")
        kinds = [k for k in captures if k.startswith("definition.")]
        if not nodes or not kinds:
            continue
        node, whole = nodes[0], captures[kinds[0]][0]
        name = fold(data[node.start_byte:node.end_byte].decode("utf-8", "replace"), how)
        name_starts.add(node.start_byte)
        if node.start_byte in found and found[node.start_byte][6] <= pattern:
            continue  # the earliest pattern to place a name wins: the grammar's own tags before proctor's
        first = whole.start_point[0]
        docs = captures.get("doc") or []
        if docs:
            first = min(first, min(d.start_point[0] for d in docs))
        digest = hashlib.sha1(data[whole.start_byte:whole.end_byte]).hexdigest()[:16]
        found[node.start_byte] = [name, kinds[0].split(".", 1)[1], first + 1, whole.end_point[0] + 1,
                                  (whole.start_byte, whole.end_byte), digest, pattern,
                                  _exported(language, name, whole, data)]
    defs = sorted(found.values(), key=lambda d: (d[4][0], -d[4][1]))
    scoped = []
    stack: list[list] = []
    for d in defs:
        while stack and stack[-1][4][1] <= d[4][0]:
            stack.pop()
        enclosing = [s for s in stack if s[4] != d[4] and s[4][0] <= d[4][0] and d[4][1] <= s[4][1]]
        scope = ".".join(s[0] for s in enclosing)
        # inside a private scope, private; a JavaScript member is as public as its class
        own = True if enclosing and SPECS[language][3] == "escapes" else d[7]
        public = bool(own and all(s[7] for s in enclosing))
        scoped.append([d[0], d[1], d[2], d[3], scope, d[5], public])
        stack.append(d)
    spans: dict[str, list[tuple[int, int]]] = {}
    for d in defs:
        spans.setdefault(d[0], []).append(d[4])
    refs: dict[str, list[int]] = {}
    for node in ts.QueryCursor(names).captures(root).get("n", ()):
        if node.start_byte in name_starts:
            continue
        text = data[node.start_byte:node.end_byte].decode("utf-8", "replace")
        if node.type in STRINGS:
            text = text.strip()
            if not NAME.fullmatch(text):
                continue
        text = fold(text, how)
        if node.type == "private_property_identifier":
            text = text.lstrip("#")
        if any(start <= node.start_byte < end for start, end in spans.get(text, ())):
            continue  # a definition naming itself (a recursive call) goes with it: not a reference
        refs.setdefault(text, []).append(node.start_point[0] + 1)
    return {"defs": scoped, "refs": {name: sorted(set(lines)) for name, lines in refs.items()}, "error": error}


def _exported(language: str, name: str, node, data: bytes) -> bool:
    """Whether a definition is on its module's public surface, as the language marks it: Go's
    capital letter, Rust's `pub`, an `export` in JavaScript and TypeScript, and in Python a
    name with no leading underscore."""
    if language == "go":
        return name[:1].isupper()
    if language == "rust":
        return data[node.start_byte:node.start_byte + 3] == b"pub"
    if language == "python":
        return not name.startswith("_")
    at = node
    for _ in range(3):
        at = at.parent
        if at is None:
            return False
        if at.type == "export_statement":
            return True
    return False


def _first_error(root) -> str:
    """Where the first syntax error sits, as `line L`."""
    cursor = [root]
    while cursor:
        node = cursor.pop()
        if node.is_error or node.is_missing:
            return f"a syntax error at line {node.start_point[0] + 1}"
        if node.has_error:
            cursor.extend(reversed(node.children))
    return "a syntax error"
