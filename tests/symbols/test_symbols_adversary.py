"""Adversarial tests for symbol goals: a worker that wants `absent`/`unreferenced` (or `present`/
`changed`) to pass while the language itself still sees the symbol defined (or referenced).

Each test asserts the SECURE behaviour: the goal fails. A test for a reference or definition that
is genuinely dynamic (no static index can see it) says so in its docstring and asserts only that
grading does not crash.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from proctor.symbols import goals
from proctor.symbols.index import Index


# --------------------------------------------------------------------------------------------
# helpers


class Link:
    def __init__(self, target: str):
        self.target = target


def git(cwd, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc.stdout


def write(root, files: dict) -> None:
    for rel, content in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        if isinstance(content, Link):
            os.symlink(content.target, path)
        elif isinstance(content, bytes):
            with open(path, "wb") as handle:
                handle.write(content)
        else:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(content)


def make(tmp_path, files: dict | None = None, untracked: dict | None = None, name: str = "co"):
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, {"README": "hello\n", **(files or {})})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    if untracked:
        write(root, untracked)
    return root


def grade(root, names, expect: str, **kw):
    if isinstance(names, str):
        names = [names]
    goal = {"id": "g", "kind": "symbol", "expect": expect, "symbols": names}
    with Index(str(root)) as index:
        return goals.grade(index, goal, **kw)


def passes(root, names, expect: str, **kw) -> bool:
    ok, reasons = grade(root, names, expect, **kw)
    return ok


def head(root) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def changed_since(root, rev) -> list[str]:
    paths = set(git(root, "diff", "--name-only", rev).split())
    paths |= set(git(root, "ls-files", "--others", "--exclude-standard").split())
    return sorted(paths)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


# --------------------------------------------------------------------------------------------
# sanity: the harness sees the obvious cases


def test_sanity_absent_fails_on_plain_class(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_sanity_absent_passes_when_gone(tmp_path):
    root = make(tmp_path, {"a.py": "class Other:\n    pass\n"})
    assert passes(root, "Legacy", "absent")


def test_sanity_unreferenced(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n", "b.py": "x = 1\n"})
    assert passes(root, "Legacy", "unreferenced")
    write(root, {"b.py": "from a import Legacy\n"})
    assert not passes(root, "Legacy", "unreferenced")


# --------------------------------------------------------------------------------------------
# Python: identifiers are NFKC-normalised by the language


def test_py_fullwidth_definition(tmp_path):
    """`class Ｌegacy` defines `Legacy` (Python NFKC-normalises identifiers)."""
    root = make(tmp_path, {"a.py": "class \uff2cegacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_all_fullwidth_definition(tmp_path):
    root = make(tmp_path, {"a.py": "class \uff2c\uff45\uff47\uff41\uff43\uff59:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_mathematical_bold_definition(tmp_path):
    """U+1D40B MATHEMATICAL BOLD CAPITAL L normalises to L."""
    root = make(tmp_path, {"a.py": "def \U0001d40begacy():\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_ligature_definition(tmp_path):
    """`def ﬁnd()` (U+FB01 LATIN SMALL LIGATURE FI) defines `find`."""
    root = make(tmp_path, {"a.py": "def \ufb01nd():\n    pass\n"})
    assert not passes(root, "find", "absent")


def test_py_fullwidth_reference(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n", "b.py": "from a import \uff2cegacy\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_py_decomposed_nfc_definition(tmp_path):
    """Goal `Café` (precomposed); source spells `Cafe` + U+0301: the same identifier to Python."""
    root = make(tmp_path, {"a.py": "class Cafe\u0301:\n    pass\n"})
    assert not passes(root, "Caf\u00e9", "absent")


# Python: encodings the interpreter honours


def test_py_utf7_coding_cookie(tmp_path):
    """`# coding: utf-7` then `class +AEw-egacy` is `class Legacy` to Python."""
    root = make(tmp_path, {"a.py": "# coding: utf-7\nclass +AEw-egacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_unicode_escape_coding_cookie(tmp_path):
    """`# coding: unicode_escape` lets `class \\u004cegacy` define `Legacy`."""
    root = make(tmp_path, {"a.py": "# coding: unicode_escape\nclass \\u004cegacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_raw_unicode_escape_coding_cookie(tmp_path):
    root = make(tmp_path, {"a.py": "# coding: raw_unicode_escape\nclass \\u004cegacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_unicode_escape_cookie_reference(tmp_path):
    root = make(
        tmp_path,
        {"a.py": "class Legacy:\n    pass\n", "b.py": "# coding: unicode_escape\nfrom a import \\u004cegacy\n"},
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_py_latin1_cookie_with_high_bytes(tmp_path):
    """A latin-1 file whose bytes are not valid UTF-8: the definition must still be seen."""
    root = make(tmp_path, {"a.py": b"# -*- coding: latin-1 -*-\n# caf\xe9 \xff\xfe\nclass Legacy:\n    s = '\xe9'\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_utf8_bom(tmp_path):
    root = make(tmp_path, {"a.py": b"\xef\xbb\xbfclass Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_cr_only_newlines(tmp_path):
    """Python accepts lone CR as a newline."""
    root = make(tmp_path, {"a.py": b"import os\rx = 1\rclass Legacy:\r    pass\r"})
    assert not passes(root, "Legacy", "absent")


def test_py_crlf(tmp_path):
    root = make(tmp_path, {"a.py": b"import os\r\nclass Legacy:\r\n    pass\r\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_form_feed(tmp_path):
    root = make(tmp_path, {"a.py": b"import os\n\x0c\nclass Legacy:\n\x0c    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_line_continuation_in_class_header(tmp_path):
    root = make(tmp_path, {"a.py": "class \\\nLegacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_definition_after_unparsable_312_syntax(tmp_path):
    """PEP 695/701 syntax (valid Python 3.12+) placed before the definition must not hide it."""
    root = make(tmp_path, {"a.py": 'x = f"{"a" + f"{"b"}"}"\ntype Alias[T] = list[T]\nclass Legacy[T]:\n    pass\n'})
    assert not passes(root, "Legacy", "absent")


# Python: binding forms other than class/def


@pytest.mark.parametrize(
    "source",
    [
        "Legacy = type('Legacy', (), {})\n",
        "Legacy, Other = 1, 2\n",
        "Other, *Legacy = 1, 2, 3\n",
        "(Legacy, (Other, Third)) = 1, (2, 3)\n",
        "[Legacy] = [1]\n",
        "a = Legacy = 1\n",
        "Legacy: int = 1\n",
        "Legacy: int\n",
        "import os as Legacy\n",
        "import os.path as Legacy\n",
        "from os import path as Legacy\n",
        "from os import sep\nfrom os.path import join as Legacy\n",
        "for Legacy in range(3):\n    pass\n",
        "with open(__file__) as Legacy:\n    pass\n",
        "if (Legacy := 1):\n    pass\n",
        "async def Legacy():\n    pass\n",
        "@staticmethod\ndef Legacy():\n    pass\n",
        "class Holder:\n    Legacy = 1\n",
        "class Holder:\n    def Legacy(self):\n        pass\n",
        "if True:\n    class Legacy:\n        pass\n",
        "match 1:\n    case Legacy:\n        pass\n",
        "def f():\n    global Legacy\n    Legacy = 1\n",
        "type Legacy = int\n",
        "if True:\n    Legacy = 1\n",
        "try:\n    from fast import Legacy\nexcept ImportError:\n    Legacy = None\n",
        "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    Legacy = object\n",
        "class Holder:\n    Legacy = staticmethod(lambda: 1)\n",
    ],
)
def test_py_binding_forms(tmp_path, source):
    root = make(tmp_path, {"a.py": source})
    assert not passes(root, "Legacy", "absent"), source


def test_py_globals_subscript_definition(tmp_path):
    """`globals()['Legacy'] = ...` defines Legacy at run time; a static index cannot be expected
    to see through arbitrary string keys. Documents the current behaviour; no crash."""
    root = make(tmp_path, {"a.py": "globals()['Legacy'] = type('X', (), {})\n"})
    grade(root, "Legacy", "absent")


def test_py_setattr_module_definition(tmp_path):
    """Dynamic: `setattr(sys.modules[__name__], 'Leg' + 'acy', ...)`. Out of reach; no crash."""
    root = make(tmp_path, {"a.py": "import sys\nsetattr(sys.modules[__name__], 'Leg' + 'acy', 1)\n"})
    grade(root, "Legacy", "absent")


def test_py_exec_definition_literal(tmp_path):
    """`exec("class Legacy: pass")`: the name is in a string literal. Dynamic; no crash."""
    root = make(tmp_path, {"a.py": 'exec("class Legacy: pass")\n'})
    grade(root, "Legacy", "absent")


# Python: references


@pytest.mark.parametrize(
    "source",
    [
        "import a\na.Legacy()\n",
        "from a import *\nprint(f'{Legacy()}')\n",
        "from a import *\nprint(f'{1:{Legacy}}')\n",
        "from a import *\n@Legacy\ndef f():\n    pass\n",
        "from a import *\ndef f(x: Legacy) -> Legacy:\n    pass\n",
        "from a import *\nclass B(Legacy):\n    pass\n",
        "from a import *\nx = [Legacy for _ in range(1)]\n",
        "from a import *\nx = lambda: Legacy\n",
        "from a import *\nmatch 1:\n    case Legacy():\n        pass\n",
        "from a import *\nclass C(metaclass=Legacy):\n    pass\n",
    ],
)
def test_py_reference_forms(tmp_path, source):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n", "b.py": source})
    assert not passes(root, "Legacy", "unreferenced"), source


def test_py_string_annotation_reference(tmp_path):
    """`def f() -> "Legacy"`: a forward reference type checkers and typing.get_type_hints honour.
    Arguably static; asserted as a reference."""
    root = make(
        tmp_path,
        {
            "a.py": "class Legacy:\n    pass\n",
            "b.py": "from __future__ import annotations\nimport a\ndef f() -> 'a.Legacy':\n    pass\n",
        },
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_py_dunder_all_reference(tmp_path):
    """`__all__ = ["Legacy"]` exports it to `from a import *`. A string, but one Python honours."""
    root = make(tmp_path, {"a.py": "__all__ = ['Legacy']\nclass Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_py_getattr_dynamic_reference(tmp_path):
    """Dynamic: `getattr(a, 'Leg' + 'acy')`. Out of reach for a static index; no crash."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n", "b.py": "import a\ngetattr(a, 'Leg' + 'acy')()\n"})
    grade(root, "Legacy", "unreferenced")


def test_py_doctest_reference(tmp_path):
    """A doctest (`>>> Legacy()`) in a docstring runs under `python -m doctest`. Arguably a
    reference; documents current behaviour, no crash."""
    root = make(
        tmp_path,
        {
            "a.py": "class Legacy:\n    pass\n",
            "b.py": 'def f():\n    """\n    >>> from a import Legacy\n    >>> Legacy()\n    """\n',
        },
    )
    grade(root, "Legacy", "unreferenced")


# --------------------------------------------------------------------------------------------
# JavaScript / TypeScript


@pytest.mark.parametrize(
    "path,source",
    [
        ("a.js", "class \\u004Cegacy {}\n"),
        ("a.js", "class \\u{4C}egacy {}\n"),
        ("a.js", "function Leg\\u0061cy() {}\n"),
        ("a.js", "const \\u004Cegacy = 1;\n"),
        ("a.ts", "class \\u004Cegacy {}\n"),
        ("a.mjs", "export class \\u004Cegacy {}\n"),
    ],
)
def test_js_unicode_escaped_definition(tmp_path, path, source):
    root = make(tmp_path, {path: source})
    assert not passes(root, "Legacy", "absent"), source


def test_js_unicode_escaped_reference(tmp_path):
    root = make(
        tmp_path,
        {"a.js": "export class Legacy {}\n", "b.js": "import { \\u004Cegacy } from './a.js';\n\\u004Cegacy;\n"},
    )
    assert not passes(root, "Legacy", "unreferenced")


@pytest.mark.parametrize(
    "path,source",
    [
        ("a.js", "class Other {}\nexport { Other as Legacy };\n"),
        ("a.js", "export * as Legacy from './b.js';\n"),
        ("a.js", "export { Other as Legacy } from './b.js';\n"),
        ("a.js", "export default class Legacy {}\n"),
        ("a.js", "export default function Legacy() {}\n"),
        ("a.js", "import { Other as Legacy } from './b.js';\nexport { Legacy };\n"),
        ("a.js", "import * as Legacy from './b.js';\nexport { Legacy };\n"),
        ("a.js", "import Legacy from './b.js';\nexport { Legacy };\n"),
        ("a.js", "const { Legacy } = require('./b.js');\nmodule.exports = { Legacy };\n"),
        ("a.js", "export const { x: Legacy } = require('./b.js');\n"),
        ("a.js", "export const [Legacy] = [1];\n"),
        ("a.js", "if (true) { var Legacy = class {}; }\n"),
        ("a.js", "class \\u{000000004C}egacy {}\n"),
        ("a.js", "let a, Legacy = 2;\n"),
        ("a.js", "var Legacy = function () {};\n"),
        ("a.js", "const Legacy = class {};\n"),
        ("a.js", "exports.Legacy = class {};\n"),
        ("a.js", "module.exports.Legacy = function () {};\n"),
        ("a.js", "function* Legacy() {}\n"),
        ("a.js", "async function Legacy() {}\n"),
        ("a.js", "class A { Legacy() {} }\n"),
        ("a.js", "class A { static Legacy = 1 }\n"),
        ("a.js", "class A { get Legacy() { return 1 } }\n"),
        ("a.js", "const o = { Legacy() {} };\n"),
        ("a.js", "const o = { Legacy: () => 1 };\n"),
        ("a.jsx", "export const Legacy = () => <div/>;\n"),
        ("a.cjs", "module.exports = { Legacy: class {} };\n"),
        ("a.ts", "declare class Legacy {}\n"),
        ("a.ts", "declare function Legacy(): void;\n"),
        ("a.ts", "declare const Legacy: number;\n"),
        ("a.ts", "declare module 'x' { export class Legacy {} }\n"),
        ("a.ts", "declare global { var Legacy: number }\nexport {}\n"),
        ("a.ts", "namespace N { export class Legacy {} }\n"),
        ("a.ts", "namespace Legacy { export const x = 1 }\n"),
        ("a.ts", "module Legacy { export const x = 1 }\n"),
        ("a.ts", "enum Legacy { A }\n"),
        ("a.ts", "const enum Legacy { A }\n"),
        ("a.ts", "enum E { Legacy }\n"),
        ("a.ts", "interface Legacy { x: number }\n"),
        ("a.ts", "type Legacy = number;\n"),
        ("a.ts", "abstract class Legacy {}\n"),
        ("a.ts", "export function Legacy(x: string): void;\nexport function Legacy(x: any) {}\n"),
        ("a.ts", "export import Legacy = require('./b');\n"),
        ("a.ts", "namespace N { export const y = 1 }\nexport import Legacy = N.y;\n"),
        ("a.ts", "export as namespace Legacy;\n"),
        ("a.ts", "export declare namespace Legacy { const x: number }\n"),
        ("a.ts", "export type { Other as Legacy } from './b';\n"),
        ("a.ts", "class A { constructor(public Legacy: number) {} }\n"),
        ("a.ts", "class A { Legacy!: number }\n"),
        ("a.ts", "interface I { Legacy(): void }\n"),
        ("a.ts", "export = Legacy;\ndeclare class Legacy {}\n"),
        ("a.d.ts", "export declare class Legacy {}\n"),
        ("a.mts", "export class Legacy {}\n"),
        ("a.cts", "export class Legacy {}\n"),
        ("a.tsx", "export const Legacy = () => <div/>;\n"),
        ("a.tsx", "export function Legacy<T,>(x: T) { return <div/>; }\n"),
    ],
)
def test_js_ts_binding_forms(tmp_path, path, source):
    root = make(tmp_path, {path: source})
    assert not passes(root, "Legacy", "absent"), (path, source)


@pytest.mark.parametrize(
    "path,source",
    [
        ("b.js", "import * as ns from './a.js';\nns.Legacy;\n"),
        ("b.js", "import { Legacy as L } from './a.js';\nL;\n"),
        ("b.js", "const { Legacy } = require('./a.js');\n"),
        ("b.js", "import { Legacy } from './a.js';\nexport const o = { Legacy };\n"),
        ("b.js", "import { Legacy } from './a.js';\nconsole.log(`${Legacy}`);\n"),
        ("b.js", "export { Legacy } from './a.js';\n"),
        ("b.jsx", "import { Legacy } from './a.js';\nexport const X = () => <Legacy />;\n"),
        ("b.jsx", "import * as ns from './a.js';\nexport const X = () => <ns.Legacy />;\n"),
        ("b.ts", "import type { Legacy } from './a.js';\nlet x: Legacy;\n"),
        ("b.ts", "import * as ns from './a.js';\nlet x: ns.Legacy;\n"),
        ("b.ts", "let x: typeof import('./a.js').Legacy;\n"),
        ("b.ts", "class B implements Legacy {}\n"),
        ("b.ts", "function f<T extends Legacy>(x: T) {}\n"),
        ("b.ts", "@Legacy\nclass B {}\n"),
        ("b.tsx", "export const X = () => <Legacy />;\n"),
    ],
)
def test_js_ts_reference_forms(tmp_path, path, source):
    root = make(tmp_path, {"a.js": "export class Legacy {}\n", path: source})
    assert not passes(root, "Legacy", "unreferenced"), (path, source)


def test_js_nul_byte_in_comment(tmp_path):
    """Node accepts a NUL inside a comment; git calls the file binary."""
    root = make(tmp_path, {"a.js": b"// \x00 padding\nexport class Legacy {}\n"})
    assert not passes(root, "Legacy", "absent")


def test_ts_utf16_bom(tmp_path):
    """tsc decodes UTF-16 (LE or BE) files with a BOM; the definition is still there."""
    root = make(tmp_path, {"a.ts": "\ufeffexport class Legacy {}\n".encode("utf-16-le")})
    assert not passes(root, "Legacy", "absent")


def test_js_string_key_reference(tmp_path):
    """`ns['Legacy']` is a literal-keyed reference; a static index may or may not count string
    literals. Documents current behaviour; no crash."""
    root = make(
        tmp_path, {"a.js": "export class Legacy {}\n", "b.js": "import * as ns from './a.js';\nns['Leg' + 'acy'];\n"}
    )
    grade(root, "Legacy", "unreferenced")


# --------------------------------------------------------------------------------------------
# Go


@pytest.mark.parametrize(
    "source",
    [
        "package a\n\nvar (\n\tx = 1\n\tLegacy = 2\n)\n",
        "package a\n\nconst (\n\tA = iota\n\tLegacy\n)\n",
        "package a\n\ntype (\n\tA int\n\tLegacy struct{}\n)\n",
        "package a\n\ntype Legacy[T any] struct{ v T }\n",
        "package a\n\nfunc Legacy[T any](x T) T { return x }\n",
        "package a\n\ntype A struct{}\n\nfunc (a *A) Legacy() {}\n",
        "package a\n\ntype A struct{}\n\nfunc (a *A[T]) Legacy() {}\n",
        "package a\n\ntype Legacy = int\n",
        "package a\n\nvar a, Legacy int\n",
        "package a\n\nvar a, Legacy = 1, 2\n",
        "package a\n\ntype I interface {\n\tLegacy()\n}\n",
        "package a\n\ntype S struct {\n\tLegacy int\n}\n",
        "//go:build ignore\n\npackage a\n\nfunc Legacy() {}\n",
    ],
)
def test_go_binding_forms(tmp_path, source):
    root = make(tmp_path, {"a.go": source})
    assert not passes(root, "Legacy", "absent"), source


@pytest.mark.parametrize(
    "source",
    [
        "package a\n\nvar x Legacy\n",
        "package a\n\nvar x = Legacy{}\n",
        "package a\n\ntype S struct {\n\tLegacy\n}\n",
        "package a\n\ntype S struct {\n\t*Legacy\n}\n",
        "package a\n\nfunc f[T Legacy]() {}\n",
        "package a\n\nfunc f(x any) { _ = x.(Legacy) }\n",
        "package a\n\nfunc f(x any) {\n\tswitch x.(type) {\n\tcase Legacy:\n\t}\n}\n",
        "package a\n\nvar m map[string]Legacy\n",
        "package a\n\nvar c chan Legacy\n",
        "package a\n\nvar f func(Legacy)\n",
        "package a\n\nvar s []Legacy\n",
        "package a\n\nfunc f(p *Legacy) {}\n",
        "package a\n\nvar _ = (*Legacy).M\n",
    ],
)
def test_go_reference_forms(tmp_path, source):
    root = make(tmp_path, {"l.go": "package a\n\ntype Legacy struct{}\n\nfunc (Legacy) M() {}\n", "a.go": source})
    assert not passes(root, "Legacy", "unreferenced"), source


def test_go_selector_reference_other_package(tmp_path):
    root = make(
        tmp_path,
        {
            "lib/l.go": "package lib\n\ntype Legacy struct{}\n",
            "main.go": 'package main\n\nimport "x/lib"\n\nvar v lib.Legacy\n',
        },
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_go_field_selector_reference(tmp_path):
    root = make(tmp_path, {"a.go": "package a\n\ntype S struct{ Legacy int }\n\nfunc f(s S) int { return s.Legacy }\n"})
    # the field Legacy is referenced by s.Legacy
    assert not passes(root, "Legacy", "unreferenced")


# --------------------------------------------------------------------------------------------
# Rust


@pytest.mark.parametrize(
    "source",
    [
        "struct r#Legacy;\n",
        "fn r#Legacy() {}\n",
        "pub use other::Thing as Legacy;\n",
        "pub use other::{Thing as Legacy};\n",
        "pub extern crate core as Legacy;\n",
        "macro_rules! m { () => { pub struct Legacy; } }\nm!();\n",
        "macro_rules! mk { ($n:ident) => { pub struct $n; } }\nmk!(Legacy);\n",
        "macro_rules! Legacy { () => {} }\n",
        '#[cfg(feature = "old")]\npub struct Legacy;\n',
        "pub type Legacy = u32;\n",
        "pub enum Legacy { A }\n",
        "pub enum E { Legacy }\n",
        "pub enum E { Legacy(u8), B }\n",
        "pub union Legacy { a: u32 }\n",
        "pub trait Legacy {}\n",
        "pub const Legacy: u32 = 1;\n",
        "pub static Legacy: u32 = 1;\n",
        "pub mod Legacy {}\n",
        "pub struct S { pub Legacy: u32 }\n",
        "pub struct S;\nimpl S { pub fn Legacy() {} }\n",
        "pub trait T { fn Legacy(); type Assoc; }\n",
        "pub trait T { type Legacy; }\n",
        "pub trait T { const Legacy: u32; }\n",
        'extern "C" { fn Legacy(); }\n',
        'extern "C" { static Legacy: u32; }\n',
        "pub struct Legacy<T>(T);\n",
    ],
)
def test_rust_binding_forms(tmp_path, source):
    root = make(tmp_path, {"src/lib.rs": source})
    assert not passes(root, "Legacy", "absent"), source


def test_rust_nfc_definition(tmp_path):
    """Rust NFC-normalises identifiers: `struct Cafe\\u0301;` defines `Café`."""
    root = make(tmp_path, {"src/lib.rs": "pub struct Cafe\u0301;\n"})
    assert not passes(root, "Caf\u00e9", "absent")


@pytest.mark.parametrize(
    "source",
    [
        "use crate::a::r#Legacy;\n",
        "fn f(x: Legacy) {}\n",
        "fn f() -> Option<Legacy> { None }\n",
        "impl Legacy {}\n",
        "impl Default for Legacy { fn default() -> Self { Legacy } }\n",
        "fn f() { let _ = crate::a::Legacy; }\n",
        "fn f() { let _ = Legacy { x: 1 }; }\n",
        "fn f(x: &dyn Legacy) {}\n",
        "fn f<T: Legacy>() {}\n",
        "macro_rules! m { () => { Legacy } }\n",
        "fn f() { m!(Legacy); }\n",
        "#[derive(Legacy)]\nstruct S;\n",
        "type T = Legacy;\n",
        "fn f() { match x { Legacy { .. } => {} } }\n",
        "fn f(s: S) { s.Legacy; }\n",
        "fn f() { let Legacy = 1; S { Legacy }; }\n",
    ],
)
def test_rust_reference_forms(tmp_path, source):
    root = make(tmp_path, {"src/a.rs": "pub struct Legacy { pub x: u32 }\n", "src/b.rs": source})
    assert not passes(root, "Legacy", "unreferenced"), source


def test_rust_path_attribute_txt_module(tmp_path):
    """`#[path = "legacy.txt"] mod legacy;` makes rustc compile a .txt file as Rust: a prose
    extension does not mean the file is prose."""
    root = make(
        tmp_path, {"src/lib.rs": '#[path = "legacy.txt"]\nmod legacy;\n', "src/legacy.txt": "pub struct Legacy;\n"}
    )
    assert not passes(root, "Legacy", "absent")


def test_rust_include_md(tmp_path):
    """`include!("legacy.md")` splices a .md file's tokens into the crate."""
    root = make(tmp_path, {"src/lib.rs": 'include!("legacy.md");\n', "src/legacy.md": "pub struct Legacy;\n"})
    assert not passes(root, "Legacy", "absent")


def test_node_require_txt(tmp_path):
    """Node's require() loads a file of unknown extension (.txt) as JavaScript."""
    root = make(
        tmp_path,
        {
            "index.js": "const { Legacy } = require('./legacy.txt');\nmodule.exports = {};\n",
            "legacy.txt": "exports.Legacy = class Legacy {};\n",
        },
    )
    assert not passes(root, "Legacy", "absent")


def test_rust_paste_dynamic(tmp_path):
    """`paste!{ struct [<Leg acy>]; }` concatenates identifiers: out of reach; no crash."""
    root = make(tmp_path, {"src/lib.rs": "paste::paste! { pub struct [<Leg acy>]; }\n"})
    grade(root, "Legacy", "absent")


# --------------------------------------------------------------------------------------------
# files with no grammar, prose, binaries


def test_html_inline_script_escaped(tmp_path):
    """An .html file (no grammar) whose inline script defines `\\u004Cegacy`: the word scan does
    not see `Legacy`, but the browser does."""
    root = make(tmp_path, {"index.html": "<script>class \\u004Cegacy {}</script>\n"})
    assert not passes(root, "Legacy", "absent")


def test_vue_sfc_definition(tmp_path):
    root = make(tmp_path, {"a.vue": "<script>\nexport class Legacy {}\n</script>\n"})
    assert not passes(root, "Legacy", "absent")


def test_shebang_script_no_extension(tmp_path):
    root = make(tmp_path, {"bin/tool": "#!/usr/bin/env python3\nclass Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_shebang_script_fullwidth_reference(tmp_path):
    """A no-extension Python script referencing `Ｌegacy` (NFKC: Legacy): the word scan misses it."""
    root = make(
        tmp_path,
        {"lib.py": "class Legacy:\n    pass\n", "bin/tool": "#!/usr/bin/env python3\nfrom lib import \uff2cegacy\n"},
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_pyw_and_pyi(tmp_path):
    root = make(tmp_path, {"a.pyw": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")
    root2 = make(tmp_path, {"a.pyi": "class Legacy: ...\n"}, name="co2")
    assert not passes(root2, "Legacy", "absent")


def test_sourceless_pyc(tmp_path):
    """Python imports a sourceless `legacy.pyc` beside the package; it is binary."""
    import py_compile

    src = tmp_path / "src_legacy.py"
    src.write_text("class Legacy:\n    pass\n")
    root = make(tmp_path, {"README": "x\n"})
    py_compile.compile(str(src), cfile=str(root / "legacy.pyc"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "pyc")
    assert not passes(root, "Legacy", "absent")


def test_toml_word_fails(tmp_path):
    root = make(tmp_path, {"conf.toml": 'entry = "Legacy"\n'})
    assert not passes(root, "Legacy", "absent")


def test_no_grammar_file_with_nul(tmp_path):
    """A no-grammar file that is text with one NUL byte holds the word."""
    root = make(tmp_path, {"a.c": b"/* \x00 */\nstruct Legacy { int x; };\n"})
    assert not passes(root, "Legacy", "absent")


def test_no_grammar_utf16(tmp_path):
    """A C# file in UTF-16 with a BOM (Visual Studio writes these)."""
    root = make(tmp_path, {"a.cs": "\ufeffclass Legacy {}\n".encode("utf-16-le")})
    assert not passes(root, "Legacy", "absent")


def test_large_python_file(tmp_path):
    """A large (4 MiB) Python file with the definition at its end."""
    body = "# " + "x" * 78 + "\n"
    root = make(tmp_path, {"big.py": body * (4 * 1024 * 1024 // len(body)) + "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_very_long_line_js(tmp_path):
    root = make(tmp_path, {"min.js": "var a=1;" * 300000 + "class Legacy{}\n"})
    assert not passes(root, "Legacy", "absent")


def test_deep_nesting_python(tmp_path):
    """Deeply nested brackets before the definition (tree-sitter error recovery)."""
    root = make(tmp_path, {"a.py": "x = " + "(" * 500 + "1" + ")" * 500 + "\nclass Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


# --------------------------------------------------------------------------------------------
# git tricks: attributes, index flags, config, ignores, untracked, nested repos, submodules


@pytest.mark.parametrize(
    "attrs",
    [
        "*.py binary\n",
        "*.py -diff\n",
        "*.py -text\n",
        "*.py export-ignore\n",
        "*.py linguist-generated\n",
        "*.py diff=none\n",
    ],
)
def test_gitattributes(tmp_path, attrs):
    root = make(tmp_path, {".gitattributes": attrs, "a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_clean_filter_hides_definition(tmp_path):
    """A clean filter makes the blob git stores differ from the file on disk."""
    root = make(tmp_path, {"a.py": "class Other:\n    pass\n"})
    git(root, "config", "filter.hide.clean", "sed s/Legacy/Other/")
    git(root, "config", "filter.hide.smudge", "cat")
    write(root, {".gitattributes": "*.py filter=hide\n"})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "attrs")
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    git(root, "add", "-A")  # the index now records the clean (filtered) blob, stat-matching disk
    assert not passes(root, "Legacy", "absent")


def test_assume_unchanged(tmp_path):
    root = make(tmp_path, {"a.py": "class Other:\n    pass\n"})
    git(root, "update-index", "--assume-unchanged", "a.py")
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_skip_worktree(tmp_path):
    root = make(tmp_path, {"a.py": "class Other:\n    pass\n"})
    git(root, "update-index", "--skip-worktree", "a.py")
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_same_size_rewrite_with_minimal_checkstat(tmp_path):
    """core.trustctime=false + core.checkStat=minimal: git's own stat check trusts a same-size,
    same-mtime rewrite."""
    root = make(tmp_path, {"a.py": "class Legacz:\n    pass\n"})
    git(root, "config", "core.trustctime", "false")
    git(root, "config", "core.checkStat", "minimal")
    st = os.stat(root / "a.py")
    time.sleep(0.01)
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    os.utime(root / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not passes(root, "Legacy", "absent")


def test_status_show_untracked_no(tmp_path):
    root = make(tmp_path)
    git(root, "config", "status.showUntrackedFiles", "no")
    write(root, {"new/legacy.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_untracked_in_untracked_dir(tmp_path):
    root = make(tmp_path, untracked={"newpkg/sub/legacy.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_tracked_but_gitignored(tmp_path):
    """A tracked file matched by .gitignore is still tracked, still in the tree."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    write(root, {".gitignore": "a.py\n*.py\n"})
    assert not passes(root, "Legacy", "absent")


def test_tracked_file_deleted_from_index_but_on_disk_untracked(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    git(root, "rm", "-q", "--cached", "a.py")
    assert not passes(root, "Legacy", "absent")


def test_nested_untracked_repo(tmp_path):
    """An untracked directory that is itself a git repository: git lists it as `nested/` and
    descends no further; Python still imports nested/legacy.py."""
    root = make(tmp_path)
    nested = root / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    write(nested, {"legacy.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_nested_repo_committed_files(tmp_path):
    root = make(tmp_path)
    nested = root / "nested"
    nested.mkdir()
    git(nested, "init", "-q", "-b", "main")
    write(nested, {"legacy.py": "class Legacy:\n    pass\n"})
    git(nested, "add", "-A")
    git(nested, "commit", "-q", "-m", "n")
    assert not passes(root, "Legacy", "absent")


def test_submodule(tmp_path):
    """A submodule's files are in the checkout on disk; the goal cannot be verified without
    reading them, so it must fail."""
    sub = make(tmp_path, {"legacy.py": "class Legacy:\n    pass\n"}, name="sub")
    root = make(tmp_path)
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub")
    git(root, "commit", "-q", "-m", "sub")
    assert (root / "vendor/sub/legacy.py").exists()
    assert not passes(root, "Legacy", "absent")


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a known limit of the index alone: it asks the repository the checkout's .git names. A job is never "
        "passed on such a checkout: job wait's diff since the checkpoint fails (rule diff-readable), since the "
        "checkpoint is no commit of the repository the rewritten .git names"
    ),
)
def test_gitfile_redirect(tmp_path):
    """The worker rewrites the checkout's `.git` into a file pointing at another git dir that
    ignores everything (info/exclude `*`) and tracks nothing."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / ".git" / "info").mkdir(exist_ok=True)
    (other / ".git" / "info" / "exclude").write_text("*\n")
    import shutil

    shutil.move(str(root / ".git"), str(tmp_path / "moved-git"))
    (root / ".git").write_text(f"gitdir: {other / '.git'}\n")
    try:
        ok, _ = grade(root, "Legacy", "absent")
    except Exception:
        ok = False
    assert not ok


def test_filename_non_ascii(tmp_path):
    root = make(tmp_path, {"p\u00e9/l\u00e9gacy.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_filename_with_newline_and_quote(tmp_path):
    root = make(tmp_path, {'we"ird\nname.py': "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_filename_invalid_utf8(tmp_path):
    root = make(tmp_path)
    path = os.path.join(os.fsencode(str(root)), b"\xff\xfe.py")
    with open(path, "wb") as handle:
        handle.write(b"class Legacy:\n    pass\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "odd name")
    assert not passes(root, "Legacy", "absent")


def test_filename_leading_dash(tmp_path):
    root = make(tmp_path, {"-legacy.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


@pytest.mark.parametrize(
    "where",
    [
        "vendor/legacy.py",
        "node_modules/x/legacy.js",
        "third_party/legacy.go",
        ".hidden/legacy.py",
        "build/legacy.py",
        "dist/legacy.js",
        "__pycache__/legacy.py",
        ".venv/lib/legacy.py",
    ],
)
def test_tracked_in_conventionally_skipped_dirs(tmp_path, where):
    src = (
        "class Legacy:\n    pass\n"
        if where.endswith(".py")
        else ("export class Legacy {}\n" if where.endswith(".js") else "package x\n\ntype Legacy struct{}\n")
    )
    root = make(tmp_path, {where: src})
    assert not passes(root, "Legacy", "absent"), where


# --------------------------------------------------------------------------------------------
# symlinks


def test_py_symlink_to_prose(tmp_path):
    """`legacy.py -> legacy.md`: Python imports the .md's content as the module."""
    root = make(tmp_path, {"legacy.md": "class Legacy:\n    pass\n", "legacy.py": Link("legacy.md")})
    assert not passes(root, "Legacy", "absent")


def test_py_symlink_outside_tree(tmp_path):
    """`legacy.py` links to a file outside the checkout that defines Legacy."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "impl.py").write_text("class Legacy:\n    pass\n")
    root = make(tmp_path, {"legacy.py": Link(str(outside / "impl.py"))})
    assert not passes(root, "Legacy", "absent")


def test_dir_symlink_outside_tree(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "impl.py").write_text("class Legacy:\n    pass\n")
    root = make(tmp_path, {"pkg": Link(str(outside))})
    assert not passes(root, "Legacy", "absent")


def test_symlink_target_edited_after_grading(tmp_path):
    """The link's own stat data does not change when its target does: a cache keyed by lstat
    must not keep the target's old content."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "impl.py").write_text("class Other:\n    pass\n")
    root = make(
        tmp_path,
        {
            "legacy.py": Link(str(outside / "impl.py")),
            "legacy2.py": Link("real.py"),
            "real.py": "class Other2:\n    pass\n",
        },
    )
    grade(root, "Legacy", "absent")
    (outside / "impl.py").write_text("class Legacy:\n    pass\n")
    assert not passes(root, "Legacy", "absent")


def test_fifo_does_not_hang(tmp_path):
    """An untracked FIFO named like a source file must not hang grading (run in a child)."""
    root = make(tmp_path)
    os.mkfifo(root / "hang.py")
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    code = (
        "import sys\nfrom proctor.symbols.index import Index\nfrom proctor.symbols import goals\n"
        f"with Index({str(root)!r}) as i:\n"
        "    ok, r = goals.grade(i, {'symbols': ['Legacy'], 'expect': 'absent'})\n"
        "print('OK' if ok else 'FAIL')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ})
    assert proc.stdout.strip() == "FAIL", proc.stderr[-2000:]


# --------------------------------------------------------------------------------------------
# the cache


def test_cache_blob_shared_across_languages(tmp_path):
    """The same bytes as a .md (prose: no definitions) and later as a .py: a cache keyed by
    blob id alone would give the .py the .md's (empty) index."""
    content = "class Legacy:\n    pass\n"
    root = make(tmp_path, {"notes.md": content})
    assert passes(root, "Legacy", "absent")  # prose decides nothing
    write(root, {"legacy.py": content})
    assert not passes(root, "Legacy", "absent")


def test_cache_blob_shared_py_to_rs(tmp_path):
    """Same bytes parse differently in two grammars: `struct Legacy;` is nothing in Python."""
    content = "struct Legacy;\n"
    root = make(
        tmp_path,
        {"a.txt": "x\n", "x.py": content},
    )
    grade(root, "Legacy", "absent")
    write(root, {"src/lib.rs": content})
    assert not passes(root, "Legacy", "absent")


def test_cache_same_size_rewrite_restored_mtime(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacz:\n    pass\n"})
    assert passes(root, "Legacy", "absent")
    st = os.stat(root / "a.py")
    with open(root / "a.py", "r+") as handle:  # same inode, same size
        handle.write("class Legacy:\n    pass\n")
    os.utime(root / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(root / "a.py").st_size == st.st_size
    assert not passes(root, "Legacy", "absent")


def test_cache_replace_by_rename(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacz:\n    pass\n"})
    assert passes(root, "Legacy", "absent")
    st = os.stat(root / "a.py")
    (root / "tmp.new").write_text("class Legacy:\n    pass\n")
    os.utime(root / "tmp.new", ns=(st.st_atime_ns, st.st_mtime_ns))
    os.rename(root / "tmp.new", root / "a.py")
    assert not passes(root, "Legacy", "absent")


def test_cache_inode_reuse(tmp_path):
    """Delete and recreate (the inode number is often reused), same size, mtime restored."""
    root = make(tmp_path, {"a.py": "class Legacz:\n    pass\n"})
    assert passes(root, "Legacy", "absent")
    st = os.stat(root / "a.py")
    for _ in range(20):
        os.unlink(root / "a.py")
        (root / "a.py").write_text("class Legacy:\n    pass\n")
        if os.stat(root / "a.py").st_ino == st.st_ino:
            break
    os.utime(root / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert not passes(root, "Legacy", "absent")


def test_cache_edit_after_commit(tmp_path):
    """Grade, commit, edit quickly (same second), grade again."""
    root = make(tmp_path, {"a.py": "class Legacz:\n    pass\n"})
    assert passes(root, "Legacy", "absent")
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")
    write(root, {"a.py": "class Legacz:\n    pass\n"})
    assert passes(root, "Legacy", "absent")
    write(root, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_cache_two_checkouts_same_repo(tmp_path):
    """Two worktrees of one repository share the cache (same repo key): one's index must not
    answer for the other's files."""
    root = make(tmp_path, {"a.py": "class Legacz:\n    pass\n"})
    assert passes(root, "Legacy", "absent")
    wt = tmp_path / "wt"
    git(root, "worktree", "add", "-q", str(wt), "-b", "other")
    write(wt, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(wt, "Legacy", "absent")
    assert passes(root, "Legacy", "absent")


# --------------------------------------------------------------------------------------------
# present / changed false passes


@pytest.mark.parametrize(
    "files",
    [
        {"a.py": "# class Legacy: pass\n"},
        {"a.py": "s = 'class Legacy: pass'\n"},
        {"a.py": "Legacy()\n"},
        {"a.py": "import x\nx.Legacy\n"},
        {"a.py": "f(Legacy=1)\n"},
        {"README.md": "class Legacy:\n    pass\n"},
        {"notes.txt": "class Legacy:\n    pass\n"},
        {"conf.toml": "Legacy = 1\n"},
        {"a.js": "// class Legacy {}\n"},
        {"a.go": "package a\n\n// type Legacy struct{}\nvar _ = Legacy{}\n"},
        {"src/lib.rs": "/* struct Legacy; */\nfn f() { Legacy::new(); }\n"},
    ],
)
def test_present_false_pass(tmp_path, files):
    root = make(tmp_path, files)
    assert not passes(root, "Legacy", "present"), files


def test_present_only_in_ignored_file(tmp_path):
    root = make(tmp_path, {".gitignore": "gen/\n"}, untracked={"gen/legacy.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "present")


def test_present_only_in_file_deleted_on_disk(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    os.unlink(root / "a.py")
    assert not passes(root, "Legacy", "present")


def test_present_case_and_wildcards(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    assert passes(root, "Legacy", "present")
    for name in ["LEGACY", "legacy", "Leg_cy", "Leg%", "Leg*", "Leg?cy", "Leg[a]cy"]:
        try:
            ok, _ = grade(root, name, "present")
        except Exception:
            ok = False
        assert not ok, name


def test_present_only_imported(tmp_path):
    """`from lib import Legacy` binds the name but defines nothing in the tree (arguable)."""
    root = make(tmp_path, {"a.py": "from somelib import Legacy\n"})
    assert not passes(root, "Legacy", "present")


def test_changed_mode_only(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    rev = head(root)
    os.chmod(root / "a.py", 0o755)
    assert not passes(root, "Legacy", "changed", revision=rev, changed=["a.py"])


def test_changed_comment_outside_definition(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n\n\nx = 1\n"})
    rev = head(root)
    write(root, {"a.py": "class Legacy:\n    pass\n\n\nx = 2  # edited\n"})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_changed_reference_only(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n", "b.py": "from a import Legacy\n"})
    rev = head(root)
    write(root, {"b.py": "from a import Legacy\nLegacy()\n"})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_changed_in_prose_only(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    rev = head(root)
    write(root, {"notes.md": "class Legacy:\n    x = 1\n"})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_changed_other_symbol(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n\n\nclass Other:\n    pass\n"})
    rev = head(root)
    write(root, {"a.py": "class Legacy:\n    pass\n\n\nclass Other:\n    x = 1\n"})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_changed_caller_lists_unchanged_path(tmp_path):
    """`changed` lists a path whose content did not change."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    rev = head(root)
    assert not passes(root, "Legacy", "changed", revision=rev, changed=["a.py"])


def test_changed_without_revision(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    try:
        ok, _ = grade(root, "Legacy", "changed")
    except Exception:
        ok = False
    assert not ok


def test_changed_with_diff_error(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    rev = head(root)
    write(root, {"a.py": "class Legacy:\n    x = 1\n"})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=["a.py"], diff_error="diff failed")


def test_changed_bogus_revision(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    write(root, {"a.py": "class Legacy:\n    x = 1\n"})
    for rev in ["0" * 40, "not-a-rev", "--all", "HEAD~5"]:
        try:
            ok, _ = grade(root, "Legacy", "changed", revision=rev, changed=["a.py"])
        except Exception:
            ok = False
        # the definition changed relative to HEAD, but the revision cannot be read: it must fail
        assert not ok, rev


# --------------------------------------------------------------------------------------------
# malformed goals


def _refused(root, goal) -> bool:
    try:
        with Index(str(root)) as index:
            ok, _ = goals.grade(index, goal)
    except Exception:
        return True
    return not ok


@pytest.mark.parametrize(
    "symbols",
    [
        [],
        None,
        "Legacy",
        ["Legacy", ""],
        [""],
        ["a b"],
        ["1abc"],
        ["Legacy\n"],
        [" Legacy"],
        ["*"],
        ["%"],
        [".*"],
        [123],
        [None],
        ["Leg-acy"],
        ["Legacy()"],
        ["r#Legacy"],
    ],
)
@pytest.mark.parametrize("expect", ["absent", "unreferenced"])
def test_malformed_symbols_refused(tmp_path, symbols, expect):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n\nLegacy()\n"})
    assert _refused(root, {"id": "g", "kind": "symbol", "expect": expect, "symbols": symbols}), symbols


def test_missing_symbols_key(tmp_path):
    root = make(tmp_path, {"a.py": "x = 1\n"})
    assert _refused(root, {"id": "g", "kind": "symbol", "expect": "absent"})


@pytest.mark.parametrize("expect", [None, "", "Absent", "gone", "ABSENT", "absent "])
def test_bad_expect_refused(tmp_path, expect):
    """An expectation grade() does not know must not be graded as another one (`"Absent"` was
    graded as `unreferenced`, which passes on a defined, unused Legacy). normalize_goals refuses
    these upstream; grade() itself should too."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    goal = {"id": "g", "kind": "symbol", "symbols": ["Legacy"]}
    if expect is not None:
        goal["expect"] = expect
    assert _refused(root, goal), expect


def test_symbols_string_iterated_as_chars(tmp_path):
    """`"symbols": "Legacy"` must not be read as the letters L, e, g, ..."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n"})
    assert _refused(root, {"id": "g", "kind": "symbol", "expect": "absent", "symbols": "Legacy"})


# --------------------------------------------------------------------------------------------
# round 2: holes read off the implementation


def test_py_latin1_cookie_nfkc_letter(tmp_path):
    """`# coding: latin-1` and byte 0xAA (ª, NFKC 'a'): `class Legªcy` is `class Legacy` to
    Python. git grep sees no `Legacy` bytes, and the fold reads the file as UTF-8."""
    root = make(tmp_path, {"a.py": b"# coding: latin-1\nclass Leg\xaacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


def test_py_latin1_cookie_non_ascii_goal(tmp_path):
    """Goal `Café`; a latin-1 file spells it with byte 0xE9."""
    root = make(tmp_path, {"a.py": b"# -*- coding: latin-1 -*-\nclass Caf\xe9:\n    pass\n"})
    assert not passes(root, "Caf\u00e9", "absent")


def test_py_scoped_goal_class_attribute(tmp_path):
    """Goal `Store.legacy` absent; the method became a class attribute bound to a function."""
    root = make(tmp_path, {"a.py": "def _impl(self):\n    return 1\n\n\nclass Store:\n    legacy = _impl\n"})
    assert not passes(root, "Store.legacy", "absent")


def test_js_ts_object_define_property_export(tmp_path):
    """`Object.defineProperty(exports, "Legacy", ...)`, as tsc emits for CommonJS: the name is a
    string. Arguably dynamic; documents current behaviour, no crash."""
    root = make(tmp_path, {"a.js": "Object.defineProperty(exports, 'Legacy', { get: () => 1 });\n"})
    grade(root, "Legacy", "absent")


def test_js_export_star_reexport(tmp_path):
    """`export * from './a.js'` keeps Legacy reachable without naming it: only module
    resolution could see it. Documents current behaviour, no crash."""
    root = make(tmp_path, {"a.js": "export class Legacy {}\n", "b.js": "export * from './a.js';\n"})
    grade(root, "Legacy", "unreferenced")


@pytest.mark.parametrize(
    "path,source",
    [
        ("b.js", "import { Legacy } from './a.js';\nexport const Alias = Legacy;\n"),  # control: caught
    ],
)
def test_unreferenced_control(tmp_path, path, source):
    root = make(tmp_path, {"a.js": "export class Legacy {}\n", path: source})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_same_line_js(tmp_path):
    """A reference on the same line as the definition is counted as inside it (minified code
    has everything on one line)."""
    root = make(tmp_path, {"a.js": "export class Legacy {}; export const x = new Legacy();\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_same_line_go(tmp_path):
    root = make(tmp_path, {"a.go": "package a\n\ntype Legacy struct{}; var X = Legacy{}\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_same_line_rust(tmp_path):
    root = make(tmp_path, {"src/lib.rs": "pub struct Legacy; pub static X: Legacy = Legacy;\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_doc_comment_line_js(tmp_path):
    """A trailing comment after a use, just above the definition, is taken as the definition's
    doc comment: the definition's range then starts on the line of the use."""
    root = make(tmp_path, {"a.js": "export const x = new Legacy(); // keep\nexport class Legacy {}\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_doc_comment_block_js(tmp_path):
    root = make(tmp_path, {"a.js": "use(Legacy); /* a\n b */\n/** doc */\nexport function Legacy() {}\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_doc_comment_line_go(tmp_path):
    root = make(tmp_path, {"a.go": "package a\n\nvar X = Legacy // keep\nfunc Legacy() int { return 1 }\n"})
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_doc_comment_line_rust(tmp_path):
    root = make(tmp_path, {"src/lib.rs": "pub static X: fn() = Legacy; // keep\npub fn Legacy() {}\n"})
    assert not passes(root, "Legacy", "unreferenced")


@pytest.mark.parametrize(
    "files",
    [
        {"a.py": "class Legacy:\n    pass\n", "b.py": "import a\nLegacy = a.Legacy\n"},
        {"a.py": "class Legacy:\n    pass\n", "b.py": "import a\nLegacy = (lambda: a.Legacy)()\n"},
        {"a.js": "export class Legacy {}\n", "b.js": "import * as a from './a.js';\nexport const Legacy = a.Legacy;\n"},
        {
            "a/a.go": "package a\n\ntype Legacy struct{}\n",
            "b/b.go": 'package b\n\nimport "x/a"\n\ntype Legacy = a.Legacy\n',
        },
        {"src/a.rs": "pub struct Legacy;\n", "src/b.rs": "pub type Legacy = crate::a::Legacy;\n"},
    ],
)
def test_unreferenced_alias_definition_hides_reference(tmp_path, files):
    """`Legacy = a.Legacy` re-exports the original under its own name. The new line is itself
    a definition of `Legacy`, and a name used inside a definition of the same name is not
    counted as a reference, so the use of the original vanishes."""
    root = make(tmp_path, files)
    assert not passes(root, "Legacy", "unreferenced"), files


def test_unreferenced_wrapped_in_namesake_class_body(tmp_path):
    """Code placed in the body of a second, unrelated definition named Legacy runs at import
    time, and every reference in it counts as "inside the definition"."""
    root = make(
        tmp_path,
        {
            "a.py": "class Legacy:\n    def run(self):\n        pass\n",
            "b.py": "class Legacy:\n    from a import Legacy as _L\n    _L().run()\n",
        },
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_unreferenced_wrapped_in_namesake_method(tmp_path):
    root = make(
        tmp_path,
        {
            "a.py": "class Legacy:\n    pass\n",
            "b.py": "class Service:\n    def Legacy(self):\n        import a\n        return a.Legacy()\n\n\n"
            "Service().Legacy()\n",
        },
    )
    # Service().Legacy() on the last line names the method, so this one stays caught; the call
    # to a.Legacy inside the method is what is hidden: make the method unnamed from outside
    write(
        root,
        {
            "b.py": "class Service:\n    def Legacy(self):\n        import a\n        return a.Legacy()\n\n\n"
            "getattr(Service(), 'Leg' + 'acy')()\n"
        },
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_java_unicode_escape_no_grammar(tmp_path):
    """Java translates `\\u004C` before lexing: `class \\u004Cegacy` is `class Legacy`. The word
    scan of a no-grammar file does not see it."""
    root = make(tmp_path, {"Legacy.java": "public class \\u004Cegacy {}\n"})
    assert not passes(root, "Legacy", "absent")


def test_csharp_unicode_escape_no_grammar(tmp_path):
    root = make(tmp_path, {"a.cs": "public class \\u004Cegacy {}\n"})
    assert not passes(root, "Legacy", "absent")


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a known limit shared with git's own stat checks: a write through a shared mapping to an already dirty "
        "page moves no timestamp, so a file's kept words (proctor.symbols.index, `seen`) are not read again; "
        "in the note"
    ),
)
def test_cache_mmap_write_keeps_stat(tmp_path):
    """A write through a shared mapping whose page is already dirty changes no timestamp: the
    per-path stat cache of folded words then answers with the old content."""
    import mmap

    root = make(tmp_path, {"README": "x\n"})
    path = root / "a.py"
    path.write_bytes("class \uff2cegacz:\n    pass\n".encode())
    fd = os.open(path, os.O_RDWR)
    try:
        mapping = mmap.mmap(fd, 0)
        mapping[0:1] = b"c"  # the first write faults and stamps mtime/ctime
        time.sleep(2.6)  # older than RACY_SECONDS: the stat key is kept
        assert passes(root, "Legacy", "absent")
        before = os.stat(path)
        at = bytes(mapping[:]).index(b"egacz")
        mapping[at + 4 : at + 5] = b"y"  # now `class Ｌegacy`: no fault, no new ctime
        after = os.stat(path)
        assert (before.st_ino, before.st_size, before.st_mtime_ns, before.st_ctime_ns) == (
            after.st_ino,
            after.st_size,
            after.st_mtime_ns,
            after.st_ctime_ns,
        )
        assert path.read_bytes() == "class \uff2cegacy:\n    pass\n".encode()
        assert not passes(root, "Legacy", "absent")
        mapping.close()
    finally:
        os.close(fd)


@pytest.mark.skipif(
    os.geteuid() != 0 and os.environ.get("CI") != "true",
    reason="needs root to run the grader as another user (CI runs as root, and there it runs)",
)
def test_unreadable_file_as_grader(tmp_path):
    """A file the grader cannot read (mode 000, the grader not its owner or not root): git grep
    warns and exits 1 (no match), so the file is simply not a hit. An observation proctor could
    not make must fail the goal."""
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="proctor-unreadable-", dir="/tmp")
    try:
        os.chmod(base, 0o755)
        root = os.path.join(base, "co")
        os.mkdir(root)
        git(root, "init", "-q", "-b", "main")
        write(root, {"a.py": "class Legacy:\n    pass\n", "b.py": "x = 1\n"})
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "i")
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                os.chmod(os.path.join(dirpath, name), 0o755 if name in dirnames else 0o644)
        os.chmod(os.path.join(root, "a.py"), 0o000)
        cache = os.path.join(base, "cache")
        os.mkdir(cache)
        os.chmod(cache, 0o777)
        code = (
            "from proctor.symbols.index import Index\nfrom proctor.symbols import goals\n"
            f"with Index({root!r}) as i:\n"
            "    ok, r = goals.grade(i, {'symbols': ['Legacy'], 'expect': 'absent'})\n"
            "print('PASS' if ok else 'FAIL', r)\n"
        )
        env = {
            **os.environ,
            "XDG_CACHE_HOME": cache,
            "HOME": base,
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "safe.directory",
            "GIT_CONFIG_VALUE_0": "*",
        }
        proc = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=base,
        )
        assert proc.stdout.startswith(("PASS", "FAIL")), proc.stderr[-2000:]
        assert proc.stdout.startswith("FAIL"), proc.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_changed_file_replaced_by_symlink(tmp_path):
    """`a.py` becomes a link to an identical copy outside the tree: Python loads the very same,
    unedited Legacy; the grader skips links and calls it removed."""
    content = "class Legacy:\n    pass\n"
    root = make(tmp_path, {"a.py": content})
    rev = head(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.py").write_text(content)
    write(root, {"a.py": Link(str(outside / "a.py"))})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_changed_symlink_in_tree_same_content(tmp_path):
    """`a.py` becomes a link to `a.md` holding the same bytes (prose to the grader)."""
    content = "class Legacy:\n    pass\n"
    root = make(tmp_path, {"a.py": content})
    rev = head(root)
    write(root, {"a.md": content, "a.py": Link("a.md")})
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


# --------------------------------------------------------------------------------------------
# round 3: the tree on disk is not the tree that is committed


def _diff_touches(root, rev, path, word) -> bool:
    out = git(root, "diff", "--cached", "-U0", rev, "--", path)
    return any(word in line for line in out.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))


def test_working_tree_encoding_hides_definition(tmp_path):
    """`.gitattributes: *.py working-tree-encoding=UTF-16` (an attribute, no config needed):
    the file on disk is UTF-16, the blob git commits is UTF-8 `class Legacy`. The grade reads
    the disk, git grep finds no `Legacy` bytes, and absent passes while the commit defines it."""
    root = make(
        tmp_path,
        {".gitattributes": "*.py working-tree-encoding=UTF-16\n", "a.py": "class Legacy:\n    pass\n".encode("utf-16")},
    )
    assert git(root, "cat-file", "-p", "HEAD:a.py") == "class Legacy:\n    pass\n"
    assert not passes(root, "Legacy", "absent")


def test_working_tree_encoding_hides_reference(tmp_path):
    root = make(
        tmp_path,
        {
            ".gitattributes": "b.py working-tree-encoding=UTF-16\n",
            "a.py": "class Legacy:\n    pass\n",
            "b.py": "from a import Legacy\nLegacy()\n".encode("utf-16"),
        },
    )
    assert not passes(root, "Legacy", "unreferenced")


def test_changed_eol_attribute_only(tmp_path):
    """`*.py text eol=crlf`: the file on disk has CRLF, the blob LF. Another line of the file is
    edited; Legacy is byte-identical in what git commits, but the disk bytes differ from the
    checkpoint's blob, so its digest differs and it counts as edited."""
    root = make(tmp_path, {".gitattributes": "*.py text eol=crlf\n", "a.py": "class Legacy:\n    pass\n\n\nx = 1\n"})
    rev = head(root)
    write(root, {"a.py": b"class Legacy:\r\n    pass\r\n\r\n\r\nx = 2\r\n"})
    git(root, "add", "-A")
    assert not _diff_touches(root, rev, "a.py", "Legacy")  # git: Legacy untouched
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_changed_unparsable_after_passes(tmp_path):
    """The file after cannot be parsed (re-encoded to UTF-16 by a working-tree-encoding
    attribute, another line edited): Legacy is no longer seen, counts as removed, and a changed
    goal passes although the doubt ("could not be read") is dropped on a pass."""
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n\n\nx = 1\n"})
    rev = head(root)
    write(
        root,
        {
            ".gitattributes": "a.py working-tree-encoding=UTF-16\n",
            "a.py": "class Legacy:\n    pass\n\n\nx = 2\n".encode("utf-16"),
        },
    )
    git(root, "add", "-A")
    assert not _diff_touches(root, rev, "a.py", "Legacy")
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed_since(root, rev))


def test_tracked_file_under_directory_made_a_repository(tmp_path):
    """`git init pkg` over a directory of tracked files: `git grep --untracked` stops at the
    nested repository and skips the tracked pkg/legacy.py too (git status still calls it
    unchanged, so the commit keeps it)."""
    root = make(tmp_path, {"pkg/legacy.py": "class Legacy:\n    pass\n"})
    git(root / "pkg", "init", "-q")
    assert git(root, "status", "--porcelain", "--untracked-files=no") == ""
    assert not passes(root, "Legacy", "absent")


def test_tracked_file_under_ignored_directory(tmp_path):
    root = make(tmp_path, {"README": "x\n", ".gitignore": "pkg/\n"})
    write(root, {"pkg/legacy.py": "class Legacy:\n    pass\n"})
    # an ignored file nobody added is outside the tree, as it is outside the diff and the checkpoint
    assert passes(root, "Legacy", "absent")
    git(root, "add", "-f", "pkg/legacy.py")  # tracked, though a .gitignore pattern matches it
    git(root, "commit", "-q", "-m", "forced")
    assert not passes(root, "Legacy", "absent")


def test_tracked_reference_under_ignored_path(tmp_path):
    root = make(tmp_path, {"a.py": "class Legacy:\n    pass\n", ".gitignore": "b.py\n"})
    write(root, {"b.py": "from a import Legacy\n"})
    git(root, "add", "-f", "b.py")
    git(root, "commit", "-q", "-m", "forced")
    assert not passes(root, "Legacy", "unreferenced")


def test_go_linkname_reference(tmp_path):
    """`//go:linkname local x/a.Legacy` binds to Legacy by a directive the Go toolchain honours,
    in a comment. Arguably static; asserted as a reference."""
    root = make(
        tmp_path,
        {
            "a/a.go": "package a\n\nfunc Legacy() int { return 1 }\n",
            "b/b.go": 'package b\n\nimport _ "unsafe"\n\n//go:linkname local x/a.Legacy\nfunc local() int\n',
        },
    )
    assert not passes(root, "Legacy", "unreferenced")
