"""Symbol goals on real trees, through the real CLI: a rename split across two child jobs in
two worktrees (one repository per language), what `absent` and `unreferenced` say about a
definition that is gone or a longer name that stays, files the index cannot read, the index
reused from its cache, and `describe job` grading without writing."""

from __future__ import annotations

import os

import pytest

from tests.support import git, make_repo
from tests.jobs.test_verify import _rejected, file_result, fork, write

CONFIG = """
[targets.lint]
command = "true"
"""

OLD, NEW = "LegacyAccountStore", "AccountStore"
UNREF = {"id": "callers-moved", "kind": "symbol", "expect": "unreferenced", "symbols": [OLD]}


def _swap(text: str) -> str:
    return text.replace(OLD, NEW)


# One small tree per language. `lib` defines the new name and keeps the old one as a deprecated
# alias (at line `def_line`); `a`, `b` and `c` each name the old one. Child a renames a's caller,
# child b renames b's and edits `b_func` doing it; `b_lazy` is b half-renamed, leaving the old
# name at `lazy_lines`; nobody's child holds c, whose caller keeps the old name at `c_lines`.
LANGS = {
    "python": dict(
        lib=("lib/store.py", f'class {NEW}:\n    pass\n\n\nclass {OLD}({NEW}):\n    """Deprecated."""\n'),
        def_line=5,
        new_line=1,
        a=("a/one.py", f"from lib.store import {OLD}\n\nSTORE = {OLD}()\n"),
        b=("b/report.py", f"from lib.store import {OLD}\n\n\ndef report():\n    return {OLD}().__class__.__name__\n"),
        b_func="report",
        b_lazy=f"from lib.store import {NEW}, {OLD}\n\n\ndef report():\n    return {NEW}().__class__.__name__\n",
        lazy_lines=[1],
        c=("c/caller.py", f"from lib.store import {OLD}\n\n\ndef make():\n    return {OLD}()\n"),
        c_lines=[1, 5],
    ),
    "go": dict(
        lib=(
            "lib/store.go",
            f"package lib\n\ntype {NEW} struct{{}}\n\n// Deprecated: use {NEW}.\ntype {OLD} = {NEW}\n",
        ),
        def_line=6,
        new_line=3,
        a=("a/one.go", f'package a\n\nimport "example.com/m/lib"\n\nvar Store = lib.{OLD}{{}}\n'),
        b=(
            "b/report.go",
            f'package b\n\nimport "example.com/m/lib"\n\nfunc Report() lib.{OLD} {{\n\treturn lib.{OLD}{{}}\n}}\n',
        ),
        b_func="Report",
        b_lazy=f'package b\n\nimport "example.com/m/lib"\n\nfunc Report() lib.{OLD} {{\n\treturn lib.{NEW}{{}}\n}}\n',
        lazy_lines=[5],
        c=(
            "c/caller.go",
            f'package c\n\nimport "example.com/m/lib"\n\nfunc Make() lib.{OLD} {{\n\treturn lib.{OLD}{{}}\n}}\n',
        ),
        c_lines=[5, 6],
    ),
    "javascript": dict(
        lib=(
            "lib/store.js",
            f"export class {NEW} {{}}\n\n/** @deprecated use {NEW} */\nexport class {OLD} extends {NEW} {{}}\n",
        ),
        def_line=4,
        new_line=1,
        a=("a/one.js", f'import {{ {OLD} }} from "../lib/store.js";\n\nexport const store = new {OLD}();\n'),
        b=(
            "b/report.js",
            f'import {{ {OLD} }} from "../lib/store.js";\n\nexport function report() {{\n'
            f"  return new {OLD}().constructor.name;\n}}\n",
        ),
        b_func="report",
        b_lazy=f'import {{ {NEW}, {OLD} }} from "../lib/store.js";\n\nexport function report() {{\n'
        f"  return new {NEW}().constructor.name;\n}}\n",
        lazy_lines=[1],
        c=(
            "c/caller.js",
            f'import {{ {OLD} }} from "../lib/store.js";\n\nexport function make() {{\n  return new {OLD}();\n}}\n',
        ),
        c_lines=[1, 4],
    ),
    "typescript": dict(
        lib=(
            "lib/store.ts",
            f'export class {NEW} {{\n  name = "store";\n}}\n\n/** @deprecated use {NEW} */\n'
            f"export class {OLD} extends {NEW} {{}}\n",
        ),
        def_line=6,
        new_line=1,
        a=("a/one.ts", f'import {{ {OLD} }} from "../lib/store";\n\nexport const store: {OLD} = new {OLD}();\n'),
        # b's caller is a component in a .tsx file
        b=(
            "b/view.tsx",
            f'import {{ {OLD} }} from "../lib/store";\n\nexport function View(props: {{ store: {OLD} }}) {{\n'
            f"  return <div>{{props.store.name}}</div>;\n}}\n",
        ),
        b_func="View",
        b_lazy=f'import {{ {NEW}, {OLD} }} from "../lib/store";\n\nexport function View(props: {{ store: {NEW} }}) {{\n'
        f"  return <div>{{props.store.name}}</div>;\n}}\n",
        lazy_lines=[1],
        c=(
            "c/caller.ts",
            f'import {{ {OLD} }} from "../lib/store";\n\nexport function make(): {OLD} {{\n  return new {OLD}();\n}}\n',
        ),
        c_lines=[1, 3, 4],
    ),
    "rust": dict(
        lib=("lib/store.rs", f'pub struct {NEW};\n\n#[deprecated(note = "use {NEW}")]\npub type {OLD} = {NEW};\n'),
        def_line=3,
        new_line=1,  # a definition starts at its attributes (#[deprecated])
        a=(
            "a/one.rs",
            f"use crate::lib::store::{OLD};\n\npub fn store() -> {OLD} {{\n    crate::lib::store::{NEW}\n}}\n",
        ),
        b=(
            "b/report.rs",
            f'use crate::lib::store::{OLD};\n\npub fn report(_s: &{OLD}) -> &\'static str {{\n    "report"\n}}\n',
        ),
        b_func="report",
        b_lazy=f"use crate::lib::store::{OLD};\n\npub fn report(_s: &crate::lib::store::{NEW}) -> &'static str {{\n"
        f'    "report"\n}}\n',
        lazy_lines=[1],
        c=(
            "c/caller.rs",
            f"use crate::lib::store::{OLD};\n\npub fn make() -> {OLD} {{\n    crate::lib::store::{NEW}\n}}\n",
        ),
        c_lines=[1, 3],
    ),
}


def _repo(tmp_path, files: dict[str, str], worktrees=()) -> tuple[str, dict[str, str]]:
    """A repository at tmp_path/main holding `files` (committed), and a linked worktree on a
    branch of its own for each name in `worktrees`."""
    root = make_repo(tmp_path / "main", CONFIG)
    for rel, text in files.items():
        write(os.path.join(root, rel), text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")
    trees = {}
    for name in worktrees:
        trees[name] = str(tmp_path / f"wt-{name}")
        git(root, "worktree", "add", "-q", "-b", name, trees[name])
    return os.path.realpath(root), {k: os.path.realpath(v) for k, v in trees.items()}


def _wait_json(proctor, job: str) -> dict:
    waited = proctor("job", "wait", job, "-o", "json")
    assert waited.code in (0, 1), waited.out + waited.err
    return waited.json()


def _outcome(payload: dict, name: str) -> dict:
    found = [o for o in payload["grade"]["outcomes"] if o["name"] == name]
    assert len(found) == 1, payload["grade"]["outcomes"]
    return found[0]


def _graded_now(text: str) -> list[str]:
    """The lines of describe's "Graded now" section."""
    lines = text.splitlines()
    start = lines.index("Graded now:") + 1
    out = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        out.append(line.strip())
    return out


def _failures(proctor, job: str) -> list[str]:
    """`job wait`'s rejection: each failing rule and goal subject, footprint lines left out."""
    return [r for r in _rejected(proctor, job) if r.startswith(("goal ", "rule "))]


def _ls_jobs(proctor) -> dict:
    return {r["id"]: r for r in proctor("ls", "jobs", "-o", "json").json()["jobs"]}


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_rename_split_across_children(tmp_path, monkeypatch, proctor, lang):
    spec = LANGS[lang]
    lib, a, b, c = spec["lib"], spec["a"], spec["b"], spec["c"]
    files = dict([lib, a, b, c])
    if lang == "go":
        files["go.mod"] = "module example.com/m\n\ngo 1.21\n"
    root, trees = _repo(tmp_path, files, ["a", "b", "lazy"])
    monkeypatch.chdir(root)
    lib_path, def_line = lib[0], spec["def_line"]

    fork(
        proctor,
        {
            "id": "rename",
            "criteria": f"move every caller of {OLD} to {NEW}",
            "write_paths": ["a/**", "b/**", "c/**"],
            "goals": [UNREF],
        },
    )
    assert proctor("job", "exec", "rename").code == 0
    fork(
        proctor,
        {
            "id": "rename/a",
            "parent": "rename",
            "criteria": "a's callers",
            "write_paths": ["a/**"],
            "goals": [{"id": "new-name", "kind": "symbol", "expect": "present", "symbols": [NEW]}],
        },
    )
    fork(
        proctor,
        {
            "id": "rename/b",
            "parent": "rename",
            "criteria": "b's callers",
            "write_paths": ["b/**"],
            "goals": [{"id": "edited", "kind": "symbol", "symbols": [spec["b_func"]]}],
        },
    )
    # a second take on b's paths that renames only part of them
    fork(
        proctor,
        {
            "id": "rename/lazy",
            "parent": "rename",
            "criteria": "b's callers",
            "write_paths": ["b/**"],
            "goals": [{"id": "edited", "kind": "symbol", "symbols": [spec["b_func"]]}],
        },
    )
    for job, tree in (("rename/a", "a"), ("rename/b", "b"), ("rename/lazy", "lazy")):
        taken = proctor("job", "exec", job, cwd=trees[tree])
        assert taken.code == 0, taken.err
    write(os.path.join(trees["a"], a[0]), _swap(a[1]))
    write(os.path.join(trees["b"], b[0]), _swap(b[1]))
    write(os.path.join(trees["lazy"], b[0]), spec["b_lazy"])

    # before anything is filed, describe grades the inherited goal within the child's paths
    described = _graded_now(proctor("describe", "job", "rename/a").out)
    assert (
        f"rename:callers-moved: met: nothing names {OLD} within the job's write paths outside its "
        f"definition ({lib_path}:{def_line})" in described
    )

    assert file_result(proctor, "rename/a", trees["a"], changed_paths=[a[0]], status="done").code == 0
    assert file_result(proctor, "rename/b", trees["b"], changed_paths=[b[0]], status="done").code == 0
    assert file_result(proctor, "rename/lazy", trees["lazy"], changed_paths=[b[0]], status="done").code == 0

    inherited_ok = [f"nothing names {OLD} within the job's write paths outside its definition ({lib_path}:{def_line})"]
    child_a = _wait_json(proctor, "rename/a")
    assert child_a["state"] == "pass", child_a["grade"]["outcomes"]
    assert _outcome(child_a, "new-name")["subjects"] == [f"{NEW} is defined in {lib_path}:{spec['new_line']}"]
    assert _outcome(child_a, "rename:callers-moved") == {
        "kind": "goal",
        "name": "rename:callers-moved",
        "label": 'goal "rename:callers-moved"',
        "ok": True,
        "subjects": inherited_ok,
    }

    child_b = _wait_json(proctor, "rename/b")
    assert child_b["state"] == "pass", child_b["grade"]["outcomes"]
    revision = child_b["grade"]["revision"]
    assert _outcome(child_b, "edited")["subjects"] == [f"{spec['b_func']} was edited since {revision[:8]} ({b[0]})"]
    assert _outcome(child_b, "rename:callers-moved")["ok"] is True
    assert _outcome(child_b, "rename:callers-moved")["subjects"] == inherited_ok

    # the half-done take passes its own goal and fails the parent's, naming what it left
    reasons = _failures(proctor, "rename/lazy")
    leftover = ", ".join(f"{b[0]}:{line}" for line in spec["lazy_lines"])
    assert reasons == [f'goal "rename:callers-moved": {OLD} is still named within the job\'s write paths: {leftover}']
    lazy = _ls_jobs(proctor)["rename/lazy"]
    assert lazy["state"] == "fail"
    assert [f["name"] for f in lazy["verdict"]["failures"]] == ["rename:callers-moved"]

    # both passing children's work merged into the parent's checkout: c's caller is still there
    for tree in ("a", "b"):
        git(trees[tree], "commit", "-q", "-am", f"rename in {tree}")
    git(root, "merge", "-q", "--no-edit", "a", "b")
    with open(os.path.join(root, a[0])) as handle:
        assert OLD not in handle.read()
    left_behind = ", ".join(f"{c[0]}:{line}" for line in spec["c_lines"])
    now = _graded_now(proctor("describe", "job", "rename").out)
    assert now == [f"callers-moved: unmet: {OLD} is still named in {root}: {left_behind}"]
    assert (
        file_result(
            proctor,
            "rename",
            root,
            changed_paths=[a[0], b[0]],
            descendants=["rename/a", "rename/b", "rename/lazy"],
            status="done",
        ).code
        == 0
    )
    assert _failures(proctor, "rename") == [f'goal "callers-moved": {OLD} is still named in {root}: {left_behind}']


# -- absent and unreferenced on one definition -------------------------------------------------


def test_absent_and_unreferenced_around_a_deleted_definition(tmp_path, monkeypatch, proctor):
    root, trees = _repo(
        tmp_path,
        {
            "legacy.py": "class Legacy:\n    pass\n",
            "adapter.py": "class LegacyAdapter:\n    def wrap(self):\n        return 'LegacyAdapter'\n",
            "use.py": "from adapter import LegacyAdapter\n\nADAPTER = LegacyAdapter()\n",
        },
        ["holder"],
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "drop",
            "criteria": "delete Legacy",
            "write_paths": ["legacy.py"],
            "goals": [
                {"id": "gone", "kind": "symbol", "expect": "absent", "symbols": ["Legacy"]},
                {"id": "quiet", "kind": "symbol", "expect": "unreferenced", "symbols": ["Legacy"]},
                {"id": "adapter-stays", "kind": "symbol", "expect": "present", "symbols": ["LegacyAdapter"]},
            ],
        },
    )
    assert proctor("job", "exec", "drop", cwd=holder).code == 0

    # the definition remains: absent fails naming it; nothing names Legacy (LegacyAdapter is not it)
    before = _graded_now(proctor("describe", "job", "drop").out)
    assert before == [
        f"gone: unmet: Legacy is still defined in {holder}: legacy.py:1 (class)",
        f"quiet: met: nothing names Legacy in {holder} outside its definition (legacy.py:1)",
        "adapter-stays: met: LegacyAdapter is defined in adapter.py:1",
    ]

    os.remove(os.path.join(holder, "legacy.py"))
    after = _graded_now(proctor("describe", "job", "drop").out)
    assert after == [
        f"gone: met: Legacy is defined nowhere in {holder}",
        "quiet: unmet: Legacy is no longer defined, so whether anything names it cannot be vouched for; grade "
        "unreferenced while the definition exists, and declare absent for the job that deletes it",
        "adapter-stays: met: LegacyAdapter is defined in adapter.py:1",
    ]
    assert file_result(proctor, "drop", holder, changed_paths=["legacy.py"], status="done").code == 0
    assert _failures(proctor, "drop") == [
        'goal "quiet": Legacy is no longer defined, so whether anything names it cannot be vouched for; grade '
        "unreferenced while the definition exists, and declare absent for the job that deletes it"
    ]


def test_absent_fails_while_the_definition_remains_recorded(tmp_path, monkeypatch, proctor):
    """A holder that only renames the callers, leaving the definition, is rejected by `job
    wait` naming where it is still defined; a name holding it (LegacyAdapter) is no definition."""
    root, trees = _repo(
        tmp_path,
        {
            "lib/legacy.ts": "export class Legacy {}\n\nexport type LegacyAdapter = Legacy;\n",
            "app.ts": 'import { Legacy } from "./lib/legacy";\n\nexport const x = new Legacy();\n',
        },
        ["holder"],
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "drop",
            "write_paths": ["app.ts", "lib/**"],
            "goals": [{"id": "gone", "kind": "symbol", "expect": "absent", "symbols": ["Legacy"]}],
        },
    )
    assert proctor("job", "exec", "drop", cwd=holder).code == 0
    write(os.path.join(holder, "app.ts"), "export const x = 1;\n")
    assert file_result(proctor, "drop", holder, changed_paths=["app.ts"]).code == 0
    assert _failures(proctor, "drop") == [f'goal "gone": Legacy is still defined in {holder}: lib/legacy.ts:1 (class)']

    # the next job deletes it and keeps LegacyAdapter (now a class of its own): absent passes
    fork(
        proctor,
        {
            "id": "drop2",
            "write_paths": ["app.ts", "lib/**"],
            "goals": [{"id": "gone", "kind": "symbol", "expect": "absent", "symbols": ["Legacy"]}],
        },
    )
    assert proctor("job", "exec", "drop2", cwd=holder).code == 0
    write(os.path.join(holder, "lib", "legacy.ts"), "export class LegacyAdapter {}\n")
    assert file_result(proctor, "drop2", holder, changed_paths=["lib/legacy.ts"]).code == 0
    done = _wait_json(proctor, "drop2")
    assert done["state"] == "pass", done["grade"]["outcomes"]
    assert _outcome(done, "gone")["subjects"] == [f"Legacy is defined nowhere in {holder}"]


def test_unreferenced_sees_a_name_on_its_definitions_own_line(tmp_path, monkeypatch, proctor):
    """A reference is "outside the definition" by where it is, not by which line it is on: a
    minified bundle defines and uses a class on one line, and Go puts two declarations on one."""
    root, trees = _repo(
        tmp_path,
        {
            "dist/bundle.min.js": "class Legacy{}const legacy=new Legacy();export{legacy};\n",
            "one.go": "package p\n\ntype Legacy struct{}; var Default = Legacy{}\n",
            "lib.py": "class Legacy:\n    pass\n",
        },
        ["holder"],
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "quiet",
            "write_paths": ["lib.py"],
            "goals": [{"id": "unused", "kind": "symbol", "expect": "unreferenced", "symbols": ["Legacy"]}],
        },
    )
    assert proctor("job", "exec", "quiet", cwd=holder).code == 0
    assert _graded_now(proctor("describe", "job", "quiet").out) == [
        f"unused: unmet: Legacy is still named in {holder}: dist/bundle.min.js:1, one.go:3"
    ]


# -- files the index cannot read -----------------------------------------------------------------

BROKEN = {
    "src/broken.py": "def broken(:\n    return Legacy\n",
    "src/broken.go": "package src\n\nfunc Use() {\n\tx := Legacy{\n}\n",
    "src/broken.js": "export function use() {\n  return new Legacy(;\n}\n",
    "src/broken.ts": "export function use(): Legacy {\n  return new Legacy(;\n}\n",
    "src/broken.tsx": "export const View = () => <div>{Legacy</div>;\n",
    "src/broken.rs": "pub fn use_it() -> Legacy {\n    Legacy {\n}\n",
}


def test_unparsable_and_grammarless_files_fail_the_goal(tmp_path, monkeypatch, proctor):
    root, trees = _repo(
        tmp_path,
        {
            **BROKEN,
            "native.c": "int Legacy(void);\n",
            "config.yaml": "adapter: LegacyAdapter\n",  # the name only inside a longer word: no doubt
            "README.md": "Legacy was removed; see the changelog.\n",
            "notes.txt": "Legacy\n",
            "adapter.py": "class LegacyAdapter:\n    pass\n",
        },
        ["holder"],
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "sweep",
            "write_paths": ["src/**", "native.c"],
            "goals": [{"id": "gone", "kind": "symbol", "expect": "absent", "symbols": ["Legacy"]}],
        },
    )
    assert proctor("job", "exec", "sweep", cwd=holder).code == 0
    graded = _graded_now(proctor("describe", "job", "sweep").out)
    errors_at = {
        "src/broken.go": 6,
        "src/broken.js": 2,
        "src/broken.py": 1,
        "src/broken.rs": 1,
        "src/broken.ts": 2,
        "src/broken.tsx": 1,
    }
    lang = {".py": "python", ".go": "go", ".js": "javascript", ".ts": "typescript", ".tsx": "tsx", ".rs": "rust"}
    unparsed = [
        f"gone: unmet: {path} could name Legacy but it does not parse as {lang[os.path.splitext(path)[1]]} "
        f"(a syntax error at line {line}), so the goal cannot be vouched for"
        for path, line in sorted(errors_at.items())
    ]
    # a failing goal lists what fails it (and the prose it saw), not what passed
    assert graded == [
        *unparsed,
        "gone: unmet: native.c holds the text Legacy and is in a language proctor has no grammar for, so whether it "
        "defines the symbol cannot be told",
        "gone: unmet: named in prose, which decides nothing: README.md, notes.txt",
    ], "\n".join(graded)
    assert not any("config.yaml" in line for line in graded)

    # one unparsable file alone fails the goal, named
    for path in BROKEN:
        if path != "src/broken.rs":
            os.remove(os.path.join(holder, path))
    os.remove(os.path.join(holder, "native.c"))
    only = _graded_now(proctor("describe", "job", "sweep").out)
    assert only == [
        "gone: unmet: src/broken.rs could name Legacy but it does not parse as rust (a syntax error at line 1), so "
        "the goal cannot be vouched for",
        "gone: unmet: named in prose, which decides nothing: README.md, notes.txt",
    ]

    # fixed: the prose mentions are reported and decide nothing
    write(os.path.join(holder, "src", "broken.rs"), "pub fn use_it() -> u32 {\n    1\n}\n")
    assert file_result(proctor, "sweep", holder, changed_paths=sorted(BROKEN) + ["native.c"]).code == 0
    done = _wait_json(proctor, "sweep")
    assert done["state"] == "pass", done["grade"]["outcomes"]
    assert _outcome(done, "gone")["subjects"] == [
        f"Legacy is defined nowhere in {holder}",
        "named in prose, which decides nothing: README.md, notes.txt",
    ]


def test_grammarless_file_fails_unreferenced_naming_it(tmp_path, monkeypatch, proctor):
    root, trees = _repo(
        tmp_path,
        {
            "store.py": "class Legacy:\n    pass\n",
            "deploy.yaml": "class: Legacy\n",
            "docs/guide.rst": "Legacy is going away.\n",
        },
        ["holder"],
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "quiet",
            "write_paths": ["deploy.yaml"],
            "goals": [{"id": "unused", "kind": "symbol", "expect": "unreferenced", "symbols": ["Legacy"]}],
        },
    )
    assert proctor("job", "exec", "quiet", cwd=holder).code == 0
    assert _graded_now(proctor("describe", "job", "quiet").out) == [
        "unused: unmet: deploy.yaml holds the text Legacy and is in a language proctor has no grammar for, so whether "
        "it names the symbol cannot be told",
        "unused: unmet: named in prose, which decides nothing: docs/guide.rst",
    ]
    write(os.path.join(holder, "deploy.yaml"), "class: LegacyStore\n")
    assert file_result(proctor, "quiet", holder, changed_paths=["deploy.yaml"]).code == 0
    done = _wait_json(proctor, "quiet")
    assert done["state"] == "pass", done["grade"]["outcomes"]
    assert _outcome(done, "unused")["subjects"] == [
        f"nothing names Legacy in {holder} outside its definition (store.py:1)",
        "named in prose, which decides nothing: docs/guide.rst",
    ]


# -- the index's cache ---------------------------------------------------------------------------


def test_index_reused_from_cache(tmp_path, monkeypatch, proctor):
    from proctor.paths import find_checkout, repo_cache_dir
    from proctor.symbols import goals as symbol_goals
    from proctor.symbols import languages
    from proctor.symbols.index import Index

    spec = LANGS["python"]
    files = dict([spec["lib"], spec["a"], spec["b"], spec["c"]])
    files["d/other.py"] = "def unrelated():\n    return 1\n"
    root, trees = _repo(tmp_path, files, ["holder"])
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "job",
            "write_paths": ["a/**", "b/**"],
            "goals": [UNREF, {"id": "edited", "kind": "symbol", "symbols": ["report"]}],
        },
    )
    assert proctor("job", "exec", "job", cwd=holder).code == 0
    write(os.path.join(holder, spec["b"][0]), _swap(spec["b"][1]))

    parsed: list[bytes] = []
    real = languages.summarize

    def counting(data, language):
        parsed.append(data)
        return real(data, language)

    monkeypatch.setattr(languages, "summarize", counting)
    first = proctor("describe", "job", "job")
    assert first.code == 0, first.err
    # lib, a, c hold the name now, b at the checkpoint (for `changed`) and as edited
    assert len(parsed) == 5, parsed
    cache = os.path.join(repo_cache_dir(find_checkout(holder)), "symbols.db")
    assert os.path.isfile(cache)
    assert cache.startswith(os.path.join(os.environ["XDG_CACHE_HOME"], "proctor", ""))
    assert repo_cache_dir(find_checkout(root)) == os.path.dirname(cache), "one cache for the repository's checkouts"
    assert _graded_now(first.out) == [
        f"callers-moved: unmet: {OLD} is still named in {holder}: a/one.py:1, a/one.py:3, c/caller.py:1, c/caller.py:5",
        f"edited: met: report was edited since {_ls_jobs(proctor)['job']['checkpoint'][:8]} (b/report.py)",
    ]
    parsed.clear()
    second = proctor("describe", "job", "job")
    assert second.out == first.out
    assert parsed == [], "a second grading parses nothing"

    # editing one file re-parses exactly that file
    edited = _swap(spec["a"][1])
    write(os.path.join(holder, spec["a"][0]), edited)
    third = proctor("describe", "job", "job")
    assert parsed == [edited.encode()]
    assert (
        _graded_now(third.out)[0] == f"callers-moved: unmet: {OLD} is still named in {holder}: c/caller.py:1, "
        f"c/caller.py:5"
    )
    monkeypatch.setattr(languages, "summarize", real)

    # the library, in fresh indexes over the same cache: Index.parsed counts the files parsed
    goal = dict(UNREF)
    with Index(holder) as index:
        ok, subjects = symbol_goals.grade(index, goal)
        assert index.parsed == 0 and index.cache_path == cache
    assert not ok and subjects == [f"{OLD} is still named in {holder}: c/caller.py:1, c/caller.py:5"]
    # c's callers renamed, the old name left in a comment: the file is read (its bytes hold the
    # name) and parsed again, alone, and a comment names nothing
    write(os.path.join(holder, spec["c"][0]), f"# was {OLD}\n" + _swap(spec["c"][1]))
    with Index(holder) as index:
        ok, subjects = symbol_goals.grade(index, goal)
        assert index.parsed == 1
    assert ok and subjects == [f"nothing names {OLD} in {holder} outside its definition (lib/store.py:5)"]
    with Index(holder) as index:
        assert symbol_goals.grade(index, goal) == (ok, subjects)
        assert index.parsed == 0


# -- describe writes nothing ---------------------------------------------------------------------


def test_describe_grades_symbol_goals_and_writes_nothing(tmp_path, monkeypatch, proctor):
    from proctor.paths import find_checkout, repo_state_dir
    from tests.store.store_oracle import connect

    spec = LANGS["rust"]
    root, trees = _repo(tmp_path, dict([spec["lib"], spec["a"], spec["b"], spec["c"]]), ["holder"])
    holder = trees["holder"]
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "rust",
            "write_paths": ["a/**", "lib/**"],
            "goals": [
                UNREF,
                {"id": "new", "kind": "symbol", "expect": "present", "symbols": [NEW]},
                {"id": "gone", "kind": "symbol", "expect": "absent", "symbols": [OLD]},
                {"id": "edited", "kind": "symbol", "expect": "changed", "symbols": ["store"]},
            ],
        },
    )
    assert proctor("job", "exec", "rust", cwd=holder).code == 0
    write(os.path.join(holder, spec["a"][0]), _swap(spec["a"][1]))
    assert file_result(proctor, "rust", holder, changed_paths=[spec["a"][0]], status="done").code == 0

    db = repo_state_dir(find_checkout(root))
    count = lambda: connect(db).execute("SELECT COUNT(*), MAX(id) FROM events").fetchone()  # noqa: E731

    def jobs_now():
        return [
            {k: v for k, v in row.items() if k != "age_seconds"}
            for row in proctor("ls", "jobs", "-o", "json").json()["jobs"]
        ]

    events, jobs = count(), jobs_now()
    first = proctor("describe", "job", "rust")
    assert first.code == 0, first.err
    assert first.out == proctor("describe", "job", "rust").out
    checkpoint = jobs[0]["checkpoint"]
    assert _graded_now(first.out) == [
        f"callers-moved: unmet: {OLD} is still named in {holder}: b/report.rs:1, b/report.rs:3, c/caller.rs:1, "
        f"c/caller.rs:3",
        f"new: met: {NEW} is defined in lib/store.rs:1",
        f"gone: unmet: {OLD} is still defined in {holder}: lib/store.rs:3 (class)",
        f"edited: met: store was edited since {checkpoint[:8]} (a/one.rs)",
    ]
    assert "Goals:\n  callers-moved: symbol unreferenced: symbols LegacyAccountStore\n" in first.out
    assert count() == events
    assert jobs_now() == jobs
    assert _ls_jobs(proctor)["rust"]["state"] == "exited"
    assert "verdict" not in _ls_jobs(proctor)["rust"]
