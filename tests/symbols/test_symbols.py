"""proctor's symbol index: what each language's file defines and names, the cache, and the
symbol view of a change (`proctor graph diff --rev`, `git diff | proctor diff -`) on real
repositories, with git's own diff piped in."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess

import pytest

from proctor.symbols import languages
from proctor.symbols.diff import parse_patch
from proctor.symbols.index import Index
from tests.support import REPO_ROOT, git


def defs(data: str, language: str) -> dict[str, str]:
    """name (Scope.name where scoped) -> kind."""
    record = languages.summarize(data.encode(), language)
    assert record["error"] is None, record["error"]
    return {(f"{d[4]}.{d[0]}" if d[4] else d[0]): d[1] for d in record["defs"]}


def refs(data: str, language: str) -> dict[str, list[int]]:
    return languages.summarize(data.encode(), language)["refs"]


PY = '''"""A module."""
from legacy import LegacyStore as Old
import os

__all__ = ["Store", "helper"]
LIMIT, OTHER = 10, 20
type Alias = list[int]


class Store:
    """Keeps things."""
    size = 3

    def load(self, x: Old) -> "Store":
        # LegacyStore is gone from here, says a comment
        return helper(x)


@decorated
def helper(value):
    return Store()
'''


def test_python_definitions_and_what_names_them():
    # an import under another name binds that name, and a class attribute is the class's
    assert defs(PY, "python") == {
        "Old": "import",
        "__all__": "constant",
        "LIMIT": "constant",
        "OTHER": "constant",
        "Alias": "type",
        "Store": "class",
        "Store.size": "variable",
        "Store.load": "function",
        "helper": "function",
    }
    found = refs(PY, "python")
    assert found["LegacyStore"] == [2]  # the import names it; the comment on line 15 does not
    assert found["Old"] == [14]  # the annotation (the alias is Old's definition)
    # __all__'s string and the call; neither the definition nor its own body's "Store" annotation
    assert found["Store"] == [5, 21]
    assert found["helper"] == [5, 16]
    assert "Keeps" not in found and "gone" not in found


def test_go_definitions():
    source = """package accounts

import "fmt"

// LegacyStore keeps accounts.
type LegacyStore struct{ n int }

type Alias = LegacyStore

var (
	Default = LegacyStore{}
	count   int
)

const Limit = 3

func New() *LegacyStore { return &LegacyStore{} }

func (s *LegacyStore) Load() { fmt.Println(s.n) }

type Getter interface{ Get() int }
"""
    assert defs(source, "go") == {
        "LegacyStore": "type",
        "LegacyStore.n": "field",
        "Alias": "type",
        "Default": "variable",
        "count": "variable",
        "Limit": "constant",
        "New": "function",
        "Load": "method",
        "Getter": "type",
        "Getter.Get": "method",
    }
    assert refs(source, "go")["LegacyStore"] == [8, 11, 17, 19]


def test_javascript_and_typescript_definitions():
    js = """import { LegacyStore } from "./legacy.js";
export const limit = 3;
let cache = new Map();
export function load(x) { return new LegacyStore(x); }
class Store { get(k) { return cache.get(k); } }
const make = () => new Store();
"""
    assert defs(js, "javascript") == {
        "limit": "variable",
        "cache": "variable",
        "load": "function",
        "Store": "class",
        "Store.get": "method",
        "make": "function",
    }
    assert refs(js, "javascript")["LegacyStore"] == [1, 4]
    ts = """import type { LegacyStore } from "./legacy";
export interface Account { id: string }
export type Id = string;
export enum Kind { A, B }
export class Store implements Account { id = ""; load(s: LegacyStore): void {} }
declare function external(): void;
"""
    assert defs(ts, "typescript") == {
        "Account": "interface",
        "Account.id": "field",
        "Id": "type",
        "Kind": "enum",
        "Kind.A": "member",
        "Kind.B": "member",
        "Store": "class",
        "Store.id": "field",
        "Store.load": "method",
        "external": "function",
    }
    assert refs(ts, "typescript")["LegacyStore"] == [1, 5]
    tsx = """import { Legacy } from "./legacy";
export function View(): JSX.Element { return <Legacy name="x" />; }
"""
    assert defs(tsx, "tsx") == {"View": "function"}
    assert refs(tsx, "tsx")["Legacy"] == [1, 2]


def test_rust_definitions():
    source = """use crate::legacy::LegacyStore;
pub const LIMIT: u32 = 3;
static COUNT: u32 = 0;
pub struct Store { inner: LegacyStore }
pub enum Kind { A, B }
pub trait Load { fn load(&self); }
impl Store { pub fn new() -> Self { Store { inner: LegacyStore::new() } } }
macro_rules! make { () => { Store::new() } }
mod inner {}
type Alias = Store;
"""
    assert defs(source, "rust") == {
        "LIMIT": "constant",
        "COUNT": "constant",
        "Store": "class",
        "Store.inner": "field",
        "Kind": "class",
        "Kind.A": "variant",
        "Kind.B": "variant",
        "Load": "interface",
        "Load.load": "function",
        "new": "method",
        "make": "macro",
        "inner": "module",
        "Alias": "class",
    }
    assert refs(source, "rust")["LegacyStore"] == [1, 4, 7]


def test_names_fold_as_their_language_folds_them():
    # Python reads fullwidth letters as their ASCII selves (NFKC); JavaScript decodes \\u escapes
    assert "LegacyStore" in refs("x = \uff2cegacyStore()\n", "python")
    assert defs("class \uff2cegacyStore:\n    pass\n", "python") == {"LegacyStore": "class"}
    assert "LegacyStore" in refs("const y = new L\\u0065gacyStore();\n", "javascript")
    assert languages.spelled_words("x = \uff2cegacyStore()\n".encode(), "python") == {"LegacyStore"}
    assert languages.spelled_words("x = 'caf\u00e9'\n".encode(), "python") == {"caf\u00e9"}
    assert languages.spelled_words(b"x = 'plain'\n", "python") == set()


def test_a_definition_naming_itself_is_judged_by_its_bytes_not_its_lines():
    # one line, two statements: the second names Legacy from outside its definition
    assert refs("package a\ntype Legacy struct{}; var Default = Legacy{}\n", "go")["Legacy"] == [2]
    # (in Python `class Legacy: pass; x = Legacy()` is all the class's body: its own)
    assert "Legacy" not in refs("class Legacy: pass; x = Legacy()\n", "python")
    assert refs("class Legacy{}const legacy=new Legacy();\n", "javascript")["Legacy"] == [1]
    assert "Legacy" not in refs("class Legacy:\n    def clone(self):\n        return Legacy()\n", "python")


def test_the_public_surface_as_each_language_marks_it():
    def public(source: str, language: str) -> dict[str, bool]:
        return {
            (f"{d[4]}.{d[0]}" if d[4] else d[0]): d[6] for d in languages.summarize(source.encode(), language)["defs"]
        }

    assert public(
        "class A:\n    def f(self): pass\n    def _g(self): pass\nclass _B:\n    def h(self): pass\n", "python"
    ) == {"A": True, "A.f": True, "A._g": False, "_B": False, "_B.h": False}
    assert public("package a\nfunc Do() {}\nfunc do() {}\n", "go") == {"Do": True, "do": False}
    assert public("pub fn a() {}\nfn b() {}\n", "rust") == {"a": True, "b": False}
    assert public(
        "export class A { m() {} }\nclass B { m() {} }\nexport const x = 1;\nconst y = 2;\n", "typescript"
    ) == {"A": True, "A.m": True, "B": False, "B.m": False, "x": True, "y": False}


def test_a_file_that_does_not_parse_says_where():
    record = languages.summarize(b"def ok():\n    pass\n\ndef broken(:\n    pass\n", "python")
    assert record["error"] == "a syntax error at line 4"


# -- the cache ----------------------------------------------------------------------------------


@pytest.fixture
def repo(tmp_path, monkeypatch, new_repo):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = new_repo("repo")
    files = {
        "core/store.py": "class LegacyStore:\n    pass\n\n\ndef make():\n    return LegacyStore()\n",
        "app/main.py": "from core.store import LegacyStore\n\nx = LegacyStore()\n",
        "web/view.ts": "import { LegacyStore } from './store';\nexport const v = new LegacyStore();\n",
    }
    for path, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as handle:
            handle.write(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "files")
    monkeypatch.chdir(root)
    return root


def _places(root: str, name: str) -> tuple[list, list, int]:
    with Index(root) as index:
        answer = index.ask([name])
        return ([(p, d[2]) for p, d in answer.definitions(name)], answer.references(name), index.parsed)


def test_a_second_question_parses_nothing_and_an_edit_reparses_that_file(repo):
    first = _places(repo, "LegacyStore")
    assert first[0] == [("core/store.py", 1)]
    assert sorted(first[1]) == [
        ("app/main.py", 1),
        ("app/main.py", 3),
        ("core/store.py", 6),
        ("web/view.ts", 1),
        ("web/view.ts", 2),
    ]
    assert first[2] == 3
    assert _places(repo, "LegacyStore") == first[:2] + (0,)
    with open(os.path.join(repo, "app/main.py"), "a") as handle:
        handle.write("y = LegacyStore()\n")
    again = _places(repo, "LegacyStore")
    assert again[2] == 1 and ("app/main.py", 4) in again[1]


def test_a_broken_or_foreign_cache_is_recomputed_never_trusted(repo):
    expected = _places(repo, "LegacyStore")[:2]
    with Index(repo) as index:
        path = index.cache_path
    with open(path, "wb") as handle:  # not a database at all
        handle.write(b"garbage" * 100)
    assert _places(repo, "LegacyStore")[:2] == expected
    os.remove(path)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    _places(repo, "LegacyStore")
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")  # another version's layout: dropped on open
    conn.execute("UPDATE summaries SET defs = '[]'")
    conn.commit()
    conn.close()
    assert _places(repo, "LegacyStore") == tuple(expected) + (3,)


# -- the CLI ------------------------------------------------------------------------------------


def test_graph_diff_lists_added_removed_and_changed(repo, proctor):
    with open(os.path.join(repo, "core/store.py"), "w") as handle:
        handle.write("class AccountStore:\n    pass\n\n\ndef make():\n    return AccountStore()\n")
    with open(os.path.join(repo, "app/new.py"), "w") as handle:  # untracked, and counted
        handle.write("def fresh():\n    return 1\n")
    result = proctor("graph", "diff", "--rev", "HEAD", "-o", "json")
    assert result.code == 0, result.err
    record = result.json()
    by_path = {f["path"]: f for f in record["files"]}
    assert set(by_path) == {"core/store.py", "app/new.py"}
    store = by_path["core/store.py"]
    assert [d["name"] for d in store["added"]] == ["AccountStore"]
    assert [d["name"] for d in store["removed"]] == ["LegacyStore"]
    assert [d["name"] for d in store["changed"]] == ["make"]
    assert [d["name"] for d in by_path["app/new.py"]["added"]] == ["fresh"]
    text = proctor("graph", "diff", "--rev", "HEAD").out
    assert "+ class      AccountStore" in text and "- class      LegacyStore" in text and "~ function   make" in text
    # a checkpoint token's revision half is a revision
    head = git(repo, "rev-parse", "HEAD").strip()
    assert proctor("graph", "diff", "--rev", f"{head}+abcdef0123", "-o", "json").json()["revision"] == head
    refused = proctor("graph", "diff", "--rev", "no-such-branch")
    assert refused.code == 2 and "PRC3064" in refused.err


def test_diff_annotates_git_diff_with_declarations_and_who_names_them(repo, proctor):
    with open(os.path.join(repo, "core/store.py"), "w") as handle:
        handle.write("import os\n\nclass LegacyStore:\n    size = 1\n\n\ndef make():\n    return LegacyStore()\n")
    patch = subprocess.run(["git", "diff", "HEAD"], cwd=repo, capture_output=True, check=True).stdout
    result = proctor("diff", "-", "-o", "json", stdin=patch.decode())
    assert result.code == 0, result.err
    (entry,) = result.json()["files"]
    assert entry["path"] == "core/store.py"
    assert entry["outside"] == {"old": [], "new": [1, 2]}
    touched, attribute = entry["touched"]
    assert touched["name"] == "LegacyStore" and touched["kind"] == "class" and touched["side"] == "old"
    assert (attribute["name"], attribute["scope"], attribute["side"]) == ("size", "LegacyStore", "new")
    assert touched["referenced_by"] == ["app/main.py", "core/store.py", "web/view.ts"]
    text = proctor("diff", "-", stdin=patch.decode()).out
    assert touched["public"] is True
    assert "public class LegacyStore (lines 1-2, old side): named in 3 files" in text
    assert "new lines above or between declarations: 1-2" in text


def test_diff_refuses_a_revision_given_to_it(repo, proctor):
    refused = proctor("diff", "HEAD~1")
    assert refused.code == 2
    assert "PRC3063" in refused.err and "git diff HEAD~1 | proctor diff -" in refused.err
    assert "PRC3063" in proctor("diff").err


def test_a_removed_line_that_starts_like_a_header_is_a_removed_line():
    patch = (
        b"diff --git a/x.py b/x.py\nindex 1111111..2222222 100644\n--- a/x.py\n+++ b/x.py\n"
        b"@@ -1,3 +1,2 @@\n--- not a header\n+++ not one either\n keep\n-gone\n"
        b"diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -5 +5 @@\n-old\n+new\n"
    )
    x, y = parse_patch(patch)
    assert (x["old"], x["new"], x["old_blob"], x["new_blob"]) == ("x.py", "x.py", "1111111", "2222222")
    assert x["removed"] == [1, 3] and x["added"] == [1]
    assert (y["old"], y["removed"], y["added"]) == ("y.py", [5], [5])
    plain = b"--- a.py\t2026-01-01\n+++ a.py\t2026-01-02\n@@ -1 +1 @@\n-a\n+b\n--- b.py\n+++ b.py\n@@ -2,0 +3 @@\n+c\n"
    a, b = parse_patch(plain)
    assert (a["new"], a["added"], b["new"], b["added"]) == ("a.py", [1], "b.py", [3])


def test_the_hook_never_loads_the_index():
    code = (
        "import sys, proctor.guard.engine, proctor.jobs.verify; "
        "print(json.dumps([m for m in sys.modules if m.startswith(('tree_sitter', 'proctor.symbols'))]))"
    )
    out = subprocess.run(
        [os.environ.get("PYTHON", "python3"), "-c", "import json; " + code],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_a_worktree_inside_the_checkout_is_another_checkout_and_a_nested_repository_a_doubt(repo):
    from proctor.symbols import goals

    git(repo, "worktree", "add", "-q", ".worktrees/w1")  # proctor's own worktrees may live here
    with Index(repo) as index:
        assert goals.grade(index, {"symbols": ["Nowhere"], "expect": "absent"}) == (
            True,
            [f"Nowhere is defined nowhere in {os.path.realpath(repo)}"],
        )
    nested = os.path.join(repo, "vendor", "lib")
    os.makedirs(nested)
    git(nested, "init", "-q")
    with Index(repo) as index:
        ok, subjects = goals.grade(index, {"symbols": ["Nowhere"], "expect": "absent"})
    assert not ok
    assert (
        "vendor/lib/ could name Nowhere but a nested repository, whose files no listing of this tree shows"
        in subjects[-1]
    )


def test_a_first_question_over_many_files_says_so_once(repo, monkeypatch, capsys):
    from proctor.symbols import index as index_mod

    monkeypatch.setattr(index_mod, "PROGRESS_AT", 2)
    _places(repo, "LegacyStore")
    assert "proctor: indexing 3 files that name LegacyStore (kept for the next question)" in capsys.readouterr().err
    _places(repo, "LegacyStore")  # all kept: nothing to say
    assert capsys.readouterr().err == ""
