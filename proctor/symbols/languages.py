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
(assignment left: (identifier) @name) @definition.variable
(assignment left: (_ (identifier) @name)) @definition.variable
(assignment left: (_ (list_splat_pattern (identifier) @name))) @definition.variable
(for_statement left: (identifier) @name) @definition.variable
(for_statement left: (_ (identifier) @name)) @definition.variable
(as_pattern_target (identifier) @name) @definition.variable
(named_expression name: (identifier) @name) @definition.variable
(case_pattern (dotted_name . (identifier) @name .)) @definition.variable
(global_statement (identifier) @name) @definition.global
(aliased_import alias: (identifier) @name) @definition.import
""",
    "go": """
(var_spec name: (identifier) @name) @definition.variable
(const_spec name: (identifier) @name) @definition.constant
(type_alias name: (type_identifier) @name) @definition.type
(method_elem name: (field_identifier) @name) @definition.method
(field_declaration name: (field_identifier) @name) @definition.field
""",
    "javascript": """
(program (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(program (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (lexical_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement (variable_declaration (variable_declarator name: (identifier) @name) @definition.variable))
(variable_declarator name: (identifier) @name) @definition.variable
(variable_declarator name: (array_pattern (identifier) @name)) @definition.variable
(variable_declarator name: (object_pattern (pair_pattern value: (identifier) @name))) @definition.variable
(variable_declarator name: (object_pattern (shorthand_property_identifier_pattern) @name)) @definition.variable
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
EXTRA_DEFINITIONS["typescript"] = EXTRA_DEFINITIONS["tsx"] = EXTRA_DEFINITIONS["javascript"] + """
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(class_declaration name: (type_identifier) @name) @definition.class
(public_field_definition name: (property_identifier) @name) @definition.field
(property_signature name: (property_identifier) @name) @definition.field
(required_parameter (accessibility_modifier) pattern: (identifier) @name) @definition.field
(internal_module name: (identifier) @name) @definition.module
(enum_body name: (property_identifier) @name) @definition.member
(enum_body (enum_assignment name: (property_identifier) @name)) @definition.member
(import_alias . (identifier) @name) @definition.import
(export_statement "namespace" (identifier) @name) @definition.export
"""
EXTRA_DEFINITIONS["javascript"] += """
(field_definition property: (property_identifier) @name) @definition.field
"""
# the node types whose body holds a function's locals
LOCAL_SCOPES = {
    "python": {"function_definition", "lambda"},
    "go": {"function_declaration", "method_declaration", "func_literal"},
    "javascript": {"function_declaration", "function_expression", "arrow_function", "method_definition",
                   "generator_function", "generator_function_declaration", "class_static_block"},
    "rust": {"function_item", "closure_expression"},
}
LOCAL_SCOPES["typescript"] = LOCAL_SCOPES["tsx"] = LOCAL_SCOPES["javascript"]
LOCAL_KINDS = {"variable", "constant", "import"}
# definitions with a body of their own (a class, a function): a use of the name inside one is the
# definition naming itself. Anything else binds a value (`Legacy = a.Legacy`), and a use inside it
# names something else: a reference
BODIES = {"class_definition", "function_definition", "decorated_definition", "class_declaration", "class",
          "abstract_class_declaration", "function_declaration", "function_expression", "generator_function",
          "generator_function_declaration", "method_definition", "method_declaration", "function_item",
          "struct_item", "enum_item", "union_item", "trait_item", "impl_item", "mod_item", "macro_definition",
          "interface_declaration", "internal_module", "module", "enum_declaration"}

# leaves that name something, where the grammar has them
IDENTIFIERS = ("identifier", "type_identifier", "field_identifier", "package_identifier", "property_identifier",
               "shorthand_property_identifier", "shorthand_property_identifier_pattern",
               "private_property_identifier", "statement_identifier", "shorthand_field_identifier")
STRINGS = ("string_content", "string_fragment", "interpreted_string_literal_content", "raw_string_literal_content")

NAME = re.compile(r"[^\W\d]\w*|\$[\w$]*|[A-Za-z_$][\w$]*")
_ESCAPE = re.compile(r"\\u\{0*([0-9a-fA-F]{1,6})\}|\\u([0-9a-fA-F]{4})")

# the queries proctor adds, and the way names are folded: a cached summary from another
# version of either is not reused
QUERY_VERSION = "6"


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


def fold(text: str, how: str | None, language: str | None = None) -> str:
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

    for mark, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                        (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"),
                        (codecs.BOM_UTF16_BE, "utf-16")):
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
    return data.isascii() and b"\\u" not in data and b"\0" not in data and not (
        language == "python" and b"coding" in data[:400]) and not (language == "rust" and b"r#" in data)


_WORD = re.compile(r"[^\W\d][\w$]*|\$[\w$]*")
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
        nodes = captures.get("name")
        kinds = [k for k in captures if k.startswith("definition.")]
        if not nodes or not kinds:
            continue
        node, whole = nodes[0], captures[kinds[0]][0]
        kind = kinds[0].split(".", 1)[1]
        if kind in LOCAL_KINDS and _inside(node, local):
            continue  # a function's local: its uses stay references
        name = fold(data[node.start_byte:node.end_byte].decode("utf-8", "replace"), how, language)
        name_starts.add(node.start_byte)
        if node.start_byte in found and found[node.start_byte][6] <= pattern:
            continue  # the earliest pattern to place a name wins: the grammar's own tags before proctor's
        first = whole.start_point[0]
        docs = captures.get("doc") or []
        if docs:
            first = min(first, min(d.start_point[0] for d in docs))
        digest = hashlib.sha1(data[whole.start_byte:whole.end_byte].replace(b"\r\n", b"\n")).hexdigest()[:16]
        found[node.start_byte] = [name, kind, first + 1, whole.end_point[0] + 1,
                                  (whole.start_byte, whole.end_byte), digest, pattern,
                                  _exported(language, name, whole, data), whole.type in BODIES]
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
        text = data[node.start_byte:node.end_byte].decode("utf-8", "replace")
        if node.type in STRINGS:
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
    if language == "go":  # a //go:linkname directive binds to another package's name
        for match in _LINKNAME.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            refs.setdefault(match.group(1).decode("utf-8", "replace"), []).append(line)
    return {"defs": scoped, "refs": {name: sorted(set(lines)) for name, lines in refs.items()},
            "inner": {name: sorted(set(lines)) for name, lines in inner.items()},
            "macro": {name: sorted(set(lines)) for name, lines in macro.items()}, "error": error}


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
