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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Literal

    # how a language compares names: a Unicode normal form, or its \u escapes decoded
    _Fold = Literal["NFKC", "NFC", "escapes"]

# name -> (grammar module, its language function, tags queries by module, normalisation)
SPECS: dict[str, tuple[str, str, tuple[str, ...], _Fold | None]] = {
    "python": ("tree_sitter_python", "language", ("tree_sitter_python",), "NFKC"),
    "go": ("tree_sitter_go", "language", ("tree_sitter_go",), None),
    "javascript": ("tree_sitter_javascript", "language", ("tree_sitter_javascript",), "escapes"),
    "typescript": (
        "tree_sitter_typescript",
        "language_typescript",
        ("tree_sitter_javascript", "tree_sitter_typescript"),
        "escapes",
    ),
    "tsx": ("tree_sitter_typescript", "language_tsx", ("tree_sitter_javascript", "tree_sitter_typescript"), "escapes"),
    "rust": ("tree_sitter_rust", "language", ("tree_sitter_rust",), "NFC"),
}

EXTENSIONS = {
    ".py": "python",
    ".pyi": "python",
    ".pyw": "python",
    ".go": "go",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
}

# prose names things without defining or referencing them: a mention there is reported, and
# neither fails nor passes a goal
PROSE = {".md", ".markdown", ".rst", ".txt", ".adoc", ".asciidoc"}

# definitions the grammar's tags query leaves out, which a rename must still find: every binding
# of a name at module or class level (assignments in any form, imports under another name,
# exports under another name, fields, members). A binding of kind `variable` or `import` inside
# a function's body is that function's local and is dropped (LOCAL_SCOPES); a use of it stays a
# reference, which errs on the side of a goal that fails.
EXTRA_DEFINITIONS = {
    "python": """
(module (expression_statement (assignment left: (pattern_list (identifier) @name))) @definition.constant)
(module (expression_statement (assignment left: (tuple_pattern (identifier) @name))) @definition.constant)
(type_alias_statement left: (type (identifier) @name)) @definition.type
(type_alias_statement left: (type (generic_type (identifier) @name))) @definition.type
(assignment left: (_) @target) @definition.variable
(for_statement left: (_) @target) @definition.variable
(for_in_clause left: (_) @target) @definition.variable
(as_pattern_target (_) @target) @definition.variable
(named_expression name: (identifier) @name) @definition.variable
(case_pattern (dotted_name . (identifier) @name .)) @definition.variable
(splat_pattern (identifier) @name) @definition.variable
(as_pattern (case_pattern) (identifier) @name .) @definition.variable
(keyword_pattern (identifier) (dotted_name . (identifier) @name .)) @definition.variable
(global_statement (identifier) @name) @definition.global
(aliased_import alias: (identifier) @name) @definition.import
(assignment left: (attribute object: (identifier) @_g attribute: (identifier) @name)
  (#any-of? @_g "builtins" "__builtins__")) @definition.export
""",
    "go": """
(var_spec) @target @definition.variable
(const_spec) @target @definition.constant
(type_alias name: (type_identifier) @name) @definition.type
(method_elem name: (field_identifier) @name) @definition.method
(field_declaration name: (field_identifier) @name) @definition.field
""",
    "javascript": """
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(variable_declarator name: (_) @target) @definition.variable
(for_in_statement left: (_) @target) @definition.variable
(assignment_expression left: (member_expression object: (identifier) @_g property: (property_identifier) @name)
  (#any-of? @_g "globalThis" "window" "global" "self")) @definition.export
(assignment_expression left: (subscript_expression object: (identifier) @_o index: (string) @name)
  (#any-of? @_o "exports" "globalThis" "window" "global" "self")) @definition.export
(assignment_expression left: (member_expression object: (identifier) @_m property: (property_identifier) @_e)
  right: (object (pair key: (string) @name)) (#eq? @_m "module") (#eq? @_e "exports")) @definition.export
(method_definition name: (string) @name) @definition.method
(export_specifier alias: (_) @name) @definition.export
(import_specifier alias: (identifier) @name) @definition.import
(namespace_import (identifier) @name) @definition.import
(import_clause (identifier) @name) @definition.import
(namespace_export (_) @name) @definition.export
(assignment_expression left: (member_expression object: (identifier) @_o property: (property_identifier) @name)
  (#eq? @_o "exports")) @definition.export
(assignment_expression left: (member_expression object: (member_expression object: (identifier) @_m
  property: (property_identifier) @_e) property: (property_identifier) @name)
  (#eq? @_m "module") (#eq? @_e "exports")) @definition.export
(assignment_expression left: (member_expression object: (identifier) @_m property: (property_identifier) @_e)
  right: (object (shorthand_property_identifier) @name) (#eq? @_m "module") (#eq? @_e "exports")) @definition.export
(assignment_expression left: (member_expression object: (identifier) @_m property: (property_identifier) @_e)
  right: (object (pair key: (property_identifier) @name)) (#eq? @_m "module") (#eq? @_e "exports")) @definition.export
""",
    "rust": """
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
(function_signature_item name: (identifier) @name) @definition.function
(enum_variant name: (identifier) @name) @definition.variant
(use_as_clause alias: (identifier) @name) @definition.import
(extern_crate_declaration alias: (identifier) @name) @definition.import
(field_declaration name: (field_identifier) @name) @definition.field
(associated_type name: (type_identifier) @name) @definition.type
""",
}
EXTRA_DEFINITIONS["typescript"] = EXTRA_DEFINITIONS["tsx"] = (
    EXTRA_DEFINITIONS["javascript"]
    + """
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(class_declaration name: (type_identifier) @name) @definition.class
(public_field_definition name: (property_identifier) @name) @definition.field
(property_signature name: (property_identifier) @name) @definition.field
(required_parameter (accessibility_modifier) pattern: (identifier) @name) @definition.field
(required_parameter (override_modifier) pattern: (identifier) @name) @definition.field
(required_parameter "readonly" pattern: (identifier) @name) @definition.field
(internal_module name: (nested_identifier (property_identifier) @name .)) @definition.module
(enum_assignment name: (string) @name) @definition.member
(property_signature name: (string) @name) @definition.field
(public_field_definition name: (string) @name) @definition.field
(module name: (nested_identifier (property_identifier) @name .)) @definition.module
(module name: (identifier) @name) @definition.module
(internal_module name: (identifier) @name) @definition.module
(enum_body name: (property_identifier) @name) @definition.member
(enum_body (enum_assignment name: (property_identifier) @name)) @definition.member
(import_alias . (identifier) @name) @definition.import
(export_statement "namespace" (identifier) @name) @definition.export
"""
)
EXTRA_DEFINITIONS["javascript"] += """
(field_definition property: (property_identifier) @name) @definition.field
(field_definition property: (string) @name) @definition.field
"""
# the node types whose body holds a function's locals
LOCAL_SCOPES = {
    "python": {"function_definition", "lambda"},
    "go": {"function_declaration", "method_declaration", "func_literal"},
    "javascript": {
        "function_declaration",
        "function_expression",
        "arrow_function",
        "method_definition",
        "generator_function",
        "generator_function_declaration",
        "class_static_block",
    },
    "rust": {"function_item", "closure_expression"},
}
LOCAL_SCOPES["typescript"] = LOCAL_SCOPES["tsx"] = LOCAL_SCOPES["javascript"]
LOCAL_KINDS = {"variable", "constant", "import"}
# definitions with a body of their own (a class, a function): a use of the name inside one is the
# definition naming itself. Anything else binds a value (`Legacy = a.Legacy`), and a use inside it
# names something else: a reference
BODIES = {
    "class_definition",
    "function_definition",
    "decorated_definition",
    "class_declaration",
    "class",
    "abstract_class_declaration",
    "function_declaration",
    "function_expression",
    "generator_function",
    "generator_function_declaration",
    "method_definition",
    "method_declaration",
    "function_item",
    "struct_item",
    "enum_item",
    "union_item",
    "trait_item",
    "impl_item",
    "mod_item",
    "macro_definition",
    "interface_declaration",
    "internal_module",
    "module",
    "enum_declaration",
}

# leaves that name something, where the grammar has them
IDENTIFIERS = (
    "identifier",
    "type_identifier",
    "field_identifier",
    "package_identifier",
    "property_identifier",
    "shorthand_property_identifier",
    "shorthand_property_identifier_pattern",
    "private_property_identifier",
    "statement_identifier",
    "shorthand_field_identifier",
)
STRINGS = ("string_content", "string_fragment", "interpreted_string_literal_content", "raw_string_literal_content")

NAME = re.compile(r"[^\W\d]\w*|\$[\w$]*|[A-Za-z_$][\w$]*")
_ESCAPE = re.compile(r"\\u\{0*([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})")

# the queries proctor adds, and the way names are folded: a cached summary from another
# version of either is not reused
QUERY_VERSION = "10"


class NoGrammar(Exception):
    """The language's grammar wheel is not installed (or does not load)."""


def language_of(path: str) -> str | None:
    base = path.rpartition("/")[2]
    dot = base.rfind(".")
    return EXTENSIONS.get(base[dot:].lower()) if dot > 0 else None


def by_shebang(data: bytes) -> str | None:
    """The language a script with no extension names on its first line (`#!/usr/bin/env
    python3`, `node`)."""
    if not data.startswith(b"#!"):
        return None
    first = data.split(b"\n", 1)[0]
    if b"python" in first:
        return "python"
    if b"node" in first or b"deno" in first or b"bun" in first:
        return "javascript"
    return None


def is_prose(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in PROSE


def fold(text: str, how: _Fold | None, language: str | None = None) -> str:
    """`text` (a name) as the language compares names."""
    if how == "escapes":
        if "\\u" in text:
            text = _ESCAPE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
        return text
    if language == "rust" and text.startswith("r#"):
        text = text[2:]  # a raw identifier names the same thing
    if how and not text.isascii():
        return unicodedata.normalize(how, text)
    return text


def source(data: bytes, language: str | None) -> bytes:
    """`data` as UTF-8, read the way the language reads it: a byte-order mark (UTF-8, UTF-16,
    UTF-32), Python's coding declaration (latin-1, utf-7, unicode_escape, ...), and UTF-16
    without a mark where the bytes are plainly that. Anything else is its own bytes."""
    import codecs

    for mark, codec in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(mark):
            return _transcode(data, codec)
    if language == "python" and b"coding" in data[:400]:
        import io
        import tokenize

        try:
            codec, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except (SyntaxError, LookupError):
            codec = "utf-8"
        if codec.replace("_", "-").lower() not in ("utf-8", "utf8", "ascii", "us-ascii"):
            return _transcode(data, codec)
    if len(data) >= 4 and data.count(b"\0") * 3 > len(data):
        evens, odds = data[0::2].count(b"\0"), data[1::2].count(b"\0")
        if odds > evens * 4:
            return _transcode(data, "utf-16-le")
        if evens > odds * 4:
            return _transcode(data, "utf-16-be")
    return data


def _transcode(data: bytes, codec: str) -> bytes:
    try:
        return data.decode(codec, "replace").encode("utf-8", "surrogateescape")
    except (LookupError, UnicodeError, ValueError):
        return data


def _plain(data: bytes, language: str | None) -> bool:
    """No way for `data` to spell a name other than by its bytes (most files)."""
    return (
        data.isascii()
        and b"\\u" not in data
        and b"\\x" not in data
        and b"\0" not in data
        and not (language == "python" and (b"coding" in data[:400] or _ADJACENT.search(data)))
        and not (language == "rust" and b"r#" in data)
    )


_WORD = re.compile(r"[^\W\d][\w$]*|\$[\w$]*")
_ADJACENT = re.compile(rb"""['"][ \t]+['"]""")
_ADJACENT_TEXT = re.compile(r"""['"][ \t]+['"]""")
_STRING_ESCAPE = re.compile(r"\\x([0-9a-fA-F]{2})|\\u\{0*([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})")
_TYPE_COMMENT = re.compile(rb"#[ \t]*type:([^\n]*)")
_concatenated_query: dict[str, Any] = {}


def _concatenated(language: str):
    import tree_sitter as ts

    if language not in _concatenated_query:
        _concatenated_query[language] = ts.Query(grammar(language)[0], "(concatenated_string) @s")
    return _concatenated_query[language]


def _descendants(node, kind: str) -> list:
    out, stack = [], [node]
    while stack:
        at = stack.pop()
        if at.type == kind:
            out.append(at)
        stack.extend(reversed(at.children))
    return out


_LINKNAME = re.compile(rb"^//go:linkname[ \t]+\S+[ \t]+\S*?([A-Za-z_][A-Za-z0-9_]*)[ \t]*$", re.M)
_ASCII_WORD = re.compile(rb"[A-Za-z_$][\w$]*")
_ANY_ESCAPE = re.compile(r"\\u\{0*([0-9a-fA-F]{1,6})\}|\\u+([0-9a-fA-F]{4})")


def spelled_words(data: bytes, language: str | None) -> set[str]:
    """The words `data` spells as its language reads it that its own bytes do not: a name
    behind an encoding, a fold (NFKC, NFC), an escape, or a raw identifier. Empty for most
    files. With no grammar (`language` None) every `\\u` escape is decoded, as Java, C# and a
    page's script read them."""
    if _plain(data, language):
        return set()
    text = source(data, language).decode("utf-8", "replace")
    how = SPECS[language][3] if language else "escapes"
    if how == "escapes" or language is None:
        text = _ANY_ESCAPE.sub(lambda m: _char(m.group(1) or m.group(2)), text)
    if "\\x" in text or "\\u" in text:  # a string's escapes ('\x4cegacy')
        text = _STRING_ESCAPE.sub(lambda m: _char(m.group(1) or m.group(2) or m.group(3)), text)
    if language == "python":  # 'Leg' 'acy' is one string
        text = _ADJACENT_TEXT.sub("", text)
    if language == "rust":
        text = text.replace("r#", " ")
    if language is None:
        how = "NFKC"  # with no grammar, the widest fold any language makes
    if how in ("NFKC", "NFC") and not text.isascii():
        text = unicodedata.normalize(how, text)
    raw = {w.decode() for w in _ASCII_WORD.findall(data)}
    return {w for w in _WORD.findall(text) if w not in raw}


def _char(hexdigits: str) -> str:
    try:
        return chr(int(hexdigits, 16))
    except (ValueError, OverflowError):
        return " "


def mentions(data: bytes, language: str | None, names: set[str]) -> bool:
    """Whether `data` could name any of `names`: its bytes hold one, or its text as the
    language reads it spells one."""
    if any(n.encode() in data for n in names):
        return True
    return bool(names & spelled_words(data, language))


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
        raise NoGrammar(
            f"the {language} grammar does not load ({exc}); pip install tree-sitter "
            f"{SPECS[language][0].replace('_', '-')}"
        ) from None
    definitions = ts.Query(lang, tags + "\n" + EXTRA_DEFINITIONS.get(language, ""))
    # JavaScript's strings are read whole: a fragment stops at an escape ('\u004Cegacy')
    strings = ("string",) if SPECS[language][3] == "escapes" else STRINGS
    kinds = [k for k in IDENTIFIERS + strings if lang.id_for_node_kind(k, True)]
    names = ts.Query(lang, "[" + " ".join(f"({k})" for k in kinds) + "] @n")
    _loaded[language] = (lang, ts.Parser(lang), definitions, names)
    return _loaded[language]


def grammar_versions() -> str:
    """The grammars' versions and proctor's queries: part of every cached summary's key."""
    from importlib import metadata

    parts = [QUERY_VERSION]
    for dist in (
        "tree-sitter",
        "tree-sitter-python",
        "tree-sitter-go",
        "tree-sitter-javascript",
        "tree-sitter-typescript",
        "tree-sitter-rust",
    ):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=none")
    return ";".join(parts)


def summarize(data: bytes, language: str) -> dict:
    """What `data` defines and names, as a JSON-able record:
    {"defs": [[name, kind, first line, last line, scope, digest, public]], "refs": {name: [lines]},
     "inner": {name: [lines]}, "error": None or where the parse failed}.

    The file is read as its language reads it (source()). Lines count from 1; a definition's
    lines run from its doc comment (where the tags query binds one) to its last line; its
    digest is of its own text (line endings aside), so a changed body is a changed symbol. A
    name used inside a definition with a body (a class, a function) of that same name, byte for
    byte inside it, is in `inner`, not `refs`: the definition naming itself, which goes with it
    when it is the only one of that name (goals.py decides)."""
    import tree_sitter as ts

    _lang, parser, definitions, names = grammar(language)
    how = SPECS[language][3]
    data = source(data, language)
    tree = parser.parse(data)
    root = tree.root_node
    error = None
    if root.has_error:
        error = _first_error(root)
    found: dict[int, list] = {}
    name_starts = set()
    local = LOCAL_SCOPES.get(language, set())
    for pattern, captures in ts.QueryCursor(definitions).matches(root):
        kinds = [k for k in captures if k.startswith("definition.")]
        if not kinds:
            continue
        nodes = list(captures.get("name") or ())
        for target in captures.get("target") or ():
            nodes.extend(_bound(target))  # every name an assignment's target binds, at any depth
        whole = _with_decorations(captures[kinds[0]][0])
        kind = kinds[0].split(".", 1)[1]
        for node in nodes:
            if kind in LOCAL_KINDS and _inside(node, local):
                continue  # a function's local: its uses stay references
            text = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
            if node.type == "string":  # `export { Other as "Legacy" }`, `enum E { "Legacy" = 1 }`
                text = text[1:-1] if len(text) >= 2 else text
            name = fold(text, how, language)
            name_starts.add(node.start_byte)
            if node.start_byte in found and found[node.start_byte][6] <= pattern:
                continue  # the earliest pattern to place a name wins: the grammar's own tags before proctor's
            first = whole.start_point[0]
            docs = captures.get("doc") or []
            if docs:
                first = min(first, min(d.start_point[0] for d in docs))
            digest = hashlib.sha1(data[whole.start_byte : whole.end_byte].replace(b"\r\n", b"\n")).hexdigest()[:16]
            found[node.start_byte] = [
                name,
                kind,
                first + 1,
                whole.end_point[0] + 1,
                (whole.start_byte, whole.end_byte),
                digest,
                pattern,
                _exported(language, name, whole.node, data),
                whole.type in BODIES,
            ]
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
    bodies: dict[str, list[tuple[int, int]]] = {}
    for d in defs:
        if d[8]:
            bodies.setdefault(d[0], []).append(d[4])
    refs: dict[str, list[int]] = {}
    inner: dict[str, list[int]] = {}
    macro: dict[str, list[int]] = {}
    for node in ts.QueryCursor(names).captures(root).get("n", ()):
        if node.start_byte in name_starts and node.type != "shorthand_property_identifier_pattern":
            continue  # (a shorthand destructure, `const { Legacy } = require(...)`, binds it and names it)
        text = data[node.start_byte : node.end_byte].decode("utf-8", "replace")
        if node.type == "string":
            text = text[1:-1] if len(text) >= 2 else ""
        if node.type in STRINGS or node.type == "string":
            if "\\" in text:  # '\x4cegacy' is 'Legacy'
                text = _STRING_ESCAPE.sub(lambda m: _char(m.group(1) or m.group(2) or m.group(3)), text)
            text = text.strip().rpartition(".")[2]  # a dotted name in a string ('a.Legacy') names its last part
            if not NAME.fullmatch(text):
                continue
        text = fold(text, how, language)
        if node.type == "private_property_identifier":
            text = text.lstrip("#")
        into = inner if any(start <= node.start_byte < end for start, end in bodies.get(text, ())) else refs
        into.setdefault(text, []).append(node.start_point[0] + 1)
        if language == "rust" and _inside(node, {"token_tree"}):
            macro.setdefault(text, []).append(node.start_point[0] + 1)
    if language == "python":
        # 'Leg' 'acy' is one string; a `# type:` comment names what it annotates
        for node in ts.QueryCursor(_concatenated(language)).captures(root).get("s", ()):
            text = (
                "".join(
                    data[c.start_byte : c.end_byte].decode("utf-8", "replace")
                    for c in _descendants(node, "string_content")
                )
                .strip()
                .rpartition(".")[2]
            )
            if NAME.fullmatch(text):
                refs.setdefault(fold(text, how, language), []).append(node.start_point[0] + 1)
        for match in _TYPE_COMMENT.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            for word in _ASCII_WORD.findall(match.group(1)):
                refs.setdefault(word.decode(), []).append(line)
    if language == "go":  # a //go:linkname directive binds to another package's name
        for match in _LINKNAME.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            refs.setdefault(match.group(1).decode("utf-8", "replace"), []).append(line)
    return {
        "defs": scoped,
        "refs": {name: sorted(set(lines)) for name, lines in refs.items()},
        "inner": {name: sorted(set(lines)) for name, lines in inner.items()},
        "macro": {name: sorted(set(lines)) for name, lines in macro.items()},
        "error": error,
    }


# what a binding target is made of: a name, or a pattern of them (the field named, where only
# one side binds: `{key: value}`, `value = default`)
_CONTAINERS = {
    "pattern_list": None,
    "tuple_pattern": None,
    "list_pattern": None,
    "list_splat_pattern": None,
    "parenthesized_expression": None,
    "array_pattern": None,
    "object_pattern": None,
    "rest_pattern": None,
    "pair_pattern": "value",
    "assignment_pattern": "left",
    "object_assignment_pattern": "left",
    "tuple": None,
    "list": None,
}
_BINDING_LEAVES = {"identifier", "shorthand_property_identifier_pattern"}


def _bound(target) -> list:
    """The name nodes a binding target binds: `a, (b, Legacy)`, `{a: {Legacy}, ...rest}`; not
    what an attribute or subscript target reads (`Legacy.x = 1`, `registry[Legacy] = 1`)."""
    if target.type in _BINDING_LEAVES:
        return [target]
    if target.type in ("var_spec", "const_spec"):  # Go: `const A, Legacy = 1, 2`
        return [c for c in target.children_by_field_name("name") if c.type == "identifier"]
    if target.type not in _CONTAINERS:
        return []
    only = _CONTAINERS[target.type]
    children = [target.child_by_field_name(only)] if only else target.named_children
    out = []
    for child in children:
        if child is not None:
            out.extend(_bound(child))
    return out


class _Span:
    """A definition's node widened to what decorates it."""

    def __init__(self, node, first) -> None:
        self.node, self.type = node, node.type
        self.start_byte, self.start_point = first.start_byte, first.start_point
        self.end_byte, self.end_point, self.parent = node.end_byte, node.end_point, node.parent


def _with_decorations(node):
    """A definition with what decorates it: Python's decorated_definition, and the attributes
    (`#[derive]`) and decorators (`@Component`) written just above it."""
    if node.parent is not None and node.parent.type == "decorated_definition":
        node = node.parent
    first = node
    before = node.prev_named_sibling
    while before is not None and before.type in ("decorator", "attribute_item"):
        first, before = before, before.prev_named_sibling
    return _Span(node, first)


def _inside(node, scopes: set[str]) -> bool:
    at = node.parent
    while at is not None:
        if at.type in scopes:
            return True
        at = at.parent
    return False


def _exported(language: str, name: str, node, data: bytes) -> bool:
    """Whether a definition is on its module's public surface, as the language marks it: Go's
    capital letter, Rust's `pub`, an `export` in JavaScript and TypeScript, and in Python a
    name with no leading underscore."""
    if language == "go":
        return name[:1].isupper()
    if language == "rust":
        return data[node.start_byte : node.start_byte + 3] == b"pub"
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
