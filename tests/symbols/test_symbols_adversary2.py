"""Adversarial tests for symbol goals, round 2: the job machinery end to end (fork, exec in a
worktree, edits, exit, wait, describe), the symbol cache, parse-level shapes tree-sitter reads
without error but not as the language does, and `proctor graph diff` / `proctor diff -`.

Each test asserts the SECURE behaviour: a goal that cannot be verified, or whose subject the
language still sees, FAILS; a diff's symbol view names what changed, where it changed; hostile
input does not crash. tests/symbols/test_symbols_adversary.py holds round 1; nothing here repeats it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from proctor.symbols import goals
from proctor.symbols.index import Index, blob_id
from tests.support import git
from tests.symbols.test_symbol_goals import _outcome, _repo, _wait_json
from tests.jobs.test_verify import file_result, fork, write


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PROCTOR_STATE_DIR", str(tmp_path / "state"))


# --------------------------------------------------------------------------------------------
# helpers


def sh(cwd, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), cwd=cwd, capture_output=True, **{"text": True, **kw})
    if check:
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    return proc


def files_at(root, files: dict) -> None:
    for rel, content in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        if isinstance(content, bytes):
            with open(path, "wb") as handle:
                handle.write(content)
        else:
            with open(path, "w", encoding="utf-8", newline="") as handle:
                handle.write(content)


def make(tmp_path, files: dict, name: str = "co"):
    root = tmp_path / name
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    files_at(root, {"README": "hello\n", **files})
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def grade(root, names, expect: str, **kw):
    names = [names] if isinstance(names, str) else names
    with Index(str(root)) as index:
        return goals.grade(index, {"id": "g", "kind": "symbol", "expect": expect, "symbols": names}, **kw)


def passes(root, names, expect: str, **kw) -> bool:
    return grade(root, names, expect, **kw)[0]


def take(proctor, holder: str, record: dict) -> None:
    fork(proctor, record)
    taken = proctor("job", "exec", record["id"], cwd=holder)
    assert taken.code == 0, taken.err


def finish(proctor, job: str, holder: str, changed: list[str]) -> dict:
    filed = file_result(proctor, job, holder, changed_paths=changed, status="done")
    assert filed.code == 0, filed.err
    return _wait_json(proctor, job)


def goal_ok(done: dict, name: str) -> bool:
    return _outcome(done, name)["ok"]


def verdict(done: dict, name: str) -> tuple:
    """What an assertion shows: the job's state and the goal's subjects."""
    return done["state"], _outcome(done, name)["subjects"]


LEGACY_PY = "class Legacy:\n    pass\n"
GONE = {"id": "gone", "kind": "symbol", "expect": "absent", "symbols": ["Legacy"]}


# --------------------------------------------------------------------------------------------
# 1. end to end: fork, exec in a worktree, edit, exit, wait


@pytest.mark.parametrize("how", ["git-worktree-add", "gitdir-file"])
def test_e2e_definition_moved_into_a_nested_linked_worktree(tmp_path, monkeypatch, proctor, how):
    """The holder deletes pkg/legacy.py and puts the definition in pkg/old/, a directory whose
    `.git` names this repository (`git worktree add pkg/old`, or a one-line `.git` file aimed at
    the checkout's own git dir). Python imports pkg.old.pkg.legacy.Legacy all the same; the
    index takes the directory for "another checkout, not content" and reads none of it, and the
    diff drops it the same way."""
    root, trees = _repo(
        tmp_path,
        {"pkg/legacy.py": LEGACY_PY, "app.py": "from pkg.legacy import Legacy\nprint(Legacy.__name__)\n"},
        ["holder"],
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    take(proctor, holder, {"id": "drop", "write_paths": ["pkg/**", "app.py"], "goals": [GONE]})
    git(holder, "rm", "-q", "pkg/legacy.py")
    if how == "git-worktree-add":
        git(holder, "worktree", "add", "-q", "--detach", "pkg/old", "HEAD")
    else:
        os.makedirs(os.path.join(holder, "pkg", "old", "pkg"))
        write(os.path.join(holder, "pkg", "old", "pkg", "legacy.py"), LEGACY_PY)
        gitdir = git(holder, "rev-parse", "--absolute-git-dir").strip()
        write(os.path.join(holder, "pkg", "old", ".git"), f"gitdir: {gitdir}\n")
    write(os.path.join(holder, "app.py"), "from pkg.old.pkg.legacy import Legacy\nprint(Legacy.__name__)\n")
    assert sh(holder, sys.executable, "app.py").stdout == "Legacy\n"  # the language still has it
    done = finish(proctor, "drop", holder, ["app.py", "pkg/legacy.py"])
    assert not goal_ok(done, "gone"), verdict(done, "gone")


@pytest.mark.parametrize("when", ["staged-by-holder", "at-checkpoint"])
def test_e2e_definition_in_an_embedded_gitlink(tmp_path, monkeypatch, proctor, when):
    """`git add pkg/vend` of a repository made inside the tree stages a gitlink with no
    .gitmodules entry: not an active submodule, so `git grep --recurse-submodules` passes over
    it, and the index reads nothing under it, tracked files included. Python imports
    pkg.vend.legacy from disk. Staged by the holder, the diff's own check flags the directory
    (rule diff-readable) while the goal itself passes; committed before the checkpoint, the
    job passes whole."""
    files = {"app.py": "from pkg.legacy import Legacy\n"}
    if when == "staged-by-holder":
        files["pkg/legacy.py"] = LEGACY_PY
    root, trees = _repo(tmp_path, files, ["holder"] if when == "staged-by-holder" else [])
    holder = trees.get("holder", root)

    def embed(where: str) -> None:
        vend = os.path.join(where, "pkg", "vend")
        os.makedirs(vend)
        git(vend, "init", "-q", "-b", "main")
        write(os.path.join(vend, "legacy.py"), LEGACY_PY)
        git(vend, "add", "-A")
        git(vend, "commit", "-q", "-m", "v")
        sh(where, "git", "add", "pkg/vend")

    if when == "at-checkpoint":
        embed(root)
        write(os.path.join(root, "app.py"), "from pkg.vend.legacy import Legacy\n")
        git(root, "commit", "-q", "-am", "vendored")
    monkeypatch.chdir(root)
    take(proctor, holder, {"id": "drop", "write_paths": ["pkg/**", "app.py"], "goals": [GONE]})
    if when == "staged-by-holder":
        git(holder, "rm", "-q", "pkg/legacy.py")
        embed(holder)
        write(os.path.join(holder, "app.py"), "from pkg.vend.legacy import Legacy\n")
        changed = ["app.py", "pkg/legacy.py", "pkg/vend"]
    else:
        write(os.path.join(holder, "app.py"), "from pkg.vend.legacy import Legacy\nLEGACY = Legacy\n")
        changed = ["app.py"]
    assert (
        sh(holder, sys.executable, "-c", "from pkg.vend.legacy import Legacy; print(Legacy.__name__)").stdout
        == "Legacy\n"
    )
    done = finish(proctor, "drop", holder, changed)
    assert not goal_ok(done, "gone"), verdict(done, "gone")


def test_e2e_submodule_deactivated_by_config(tmp_path, monkeypatch, proctor):
    """A checked-out submodule defines Legacy (round 1: that fails absent). The holder sets
    `submodule.vendor/sub.active=false` in the repository's config: git's grep then skips the
    submodule, and its files, still on disk and still imported, are read by nothing."""
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    write(str(sub / "legacy.py"), LEGACY_PY)
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "s")
    root, _ = _repo(tmp_path, {"vendor/notes.py": "x = 1\n"})
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub")
    git(root, "commit", "-q", "-m", "sub")
    monkeypatch.chdir(root)
    # taken in the orchestrator's own checkout, where the submodule is checked out
    take(proctor, root, {"id": "drop", "write_paths": ["vendor/**"], "goals": [GONE]})
    described = proctor("describe", "job", "drop").out
    assert "gone: unmet: Legacy is still defined" in described, described  # seen while active
    git(root, "config", "submodule.vendor/sub.active", "false")
    write(os.path.join(root, "vendor", "notes.py"), "x = 2\n")
    assert os.path.isfile(os.path.join(root, "vendor", "sub", "legacy.py"))
    done = finish(proctor, "drop", root, ["vendor/notes.py"])
    assert not goal_ok(done, "gone"), verdict(done, "gone")


def test_e2e_definition_moved_into_an_untracked_file_of_a_submodule(tmp_path, monkeypatch, proctor):
    """An untracked file inside a checked-out (active) submodule: `git grep
    --recurse-submodules` reads the submodule's tracked files only, the superproject's
    `ls-files --others` does not descend into it, and diff-index does not report a submodule's
    untracked content. The holder deletes lib/legacy.py and writes Legacy into
    vendor/sub/legacy_impl.py, which Python imports from disk."""
    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q", "-b", "main")
    write(str(sub / "util.py"), "x = 1\n")
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "s")
    root, _ = _repo(tmp_path, {"lib/legacy.py": LEGACY_PY, "app.py": "from lib.legacy import Legacy\n"})
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/sub")
    git(root, "commit", "-q", "-m", "sub")
    monkeypatch.chdir(root)
    take(proctor, root, {"id": "drop", "write_paths": ["lib/**", "app.py", "vendor/**"], "goals": [GONE]})
    git(root, "rm", "-q", "lib/legacy.py")
    write(os.path.join(root, "vendor", "sub", "legacy_impl.py"), LEGACY_PY)
    write(os.path.join(root, "app.py"), "from vendor.sub.legacy_impl import Legacy\n")
    assert sh(root, sys.executable, "-c", "import app; print(app.Legacy.__name__)").stdout == "Legacy\n"
    done = finish(proctor, "drop", root, ["app.py", "lib/legacy.py"])
    assert not goal_ok(done, "gone"), verdict(done, "gone")


def test_e2e_core_worktree_redirect_by_worktree_config(tmp_path, monkeypatch, proctor):
    """`git config extensions.worktreeConfig true` and `git config --worktree core.worktree
    <elsewhere>` in the holder's worktree: every git command run in the checkout now reads a
    copy elsewhere (legacy.py deleted there), while the checkout on disk, where checks run and
    Python imports from, still defines Legacy."""
    root, trees = _repo(tmp_path, {"legacy.py": LEGACY_PY, "app.py": "x = 1\n"}, ["holder"])
    holder = trees["holder"]
    monkeypatch.chdir(root)
    take(proctor, holder, {"id": "drop", "write_paths": ["legacy.py", "app.py"], "goals": [GONE]})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(str(elsewhere / "app.py"), "x = 1\n")
    write(str(elsewhere / "README"), "hello\n")
    shutil.copy(os.path.join(holder, "proctor.toml"), str(elsewhere / "proctor.toml"))
    git(holder, "config", "extensions.worktreeConfig", "true")
    git(holder, "config", "--worktree", "core.worktree", str(elsewhere))
    assert open(os.path.join(holder, "legacy.py")).read() == LEGACY_PY
    done = finish(proctor, "drop", holder, ["legacy.py"])
    assert not goal_ok(done, "gone"), verdict(done, "gone")


def test_e2e_inherited_goal_scope_glob_over_a_linked_directory(tmp_path, monkeypatch, proctor):
    """The child's write path `mine/**` names a tracked link `mine -> other`. Its callers at
    mine/x.py (other/x.py through the link) still name Legacy. The index answers the link as a
    doubt at the path `mine`, which the glob `mine/**` does not cover, and other/x.py is outside
    the child's paths: the parent's unreferenced goal passes on the child. (With the literal
    write path `mine` the same tree fails.)"""
    root, trees = _repo(
        tmp_path,
        {"lib.py": LEGACY_PY, "other/x.py": "from lib import Legacy\n", "tool.py": "def tool():\n    return 1\n"},
        [],
    )
    os.symlink("other", os.path.join(root, "mine"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "link")
    holder = str(tmp_path / "wt-child")
    git(root, "worktree", "add", "-q", "-b", "child", holder)
    holder = os.path.realpath(holder)
    monkeypatch.chdir(root)
    fork(
        proctor,
        {
            "id": "rename",
            "write_paths": ["mine/**", "other/**", "tool.py"],
            "goals": [{"id": "quiet", "kind": "symbol", "expect": "unreferenced", "symbols": ["Legacy"]}],
        },
    )
    assert proctor("job", "exec", "rename").code == 0
    take(
        proctor,
        holder,
        {
            "id": "rename/child",
            "parent": "rename",
            "write_paths": ["mine/**", "tool.py"],
            "goals": [{"id": "edited", "kind": "symbol", "expect": "changed", "symbols": ["tool"]}],
        },
    )
    write(os.path.join(holder, "tool.py"), "def tool():\n    return 2\n")
    assert "Legacy" in open(os.path.join(holder, "mine", "x.py")).read()
    done = finish(proctor, "rename/child", holder, ["tool.py"])
    assert not goal_ok(done, "rename:quiet"), verdict(done, "rename:quiet")


def test_e2e_changed_goal_credited_with_handed_work(tmp_path, monkeypatch, proctor):
    """A job forked from a dirty tree is handed uncommitted work: here, Legacy already edited.
    The holder never touches Legacy; it edits one unrelated line of the same file. The diff
    keeps the file (it no longer holds what was handed), and `changed` compares Legacy at the
    checkpoint's COMMIT with the disk, so the handed edit is credited to the holder. Untouched,
    the same file is left out of the diff and the goal fails: the verdict turns on a line
    that has nothing to do with Legacy."""
    root, _ = _repo(tmp_path, {"a.py": "class Legacy:\n    x = 1\n\n\nother = 1\n"})
    monkeypatch.chdir(root)
    write(os.path.join(root, "a.py"), "class Legacy:\n    x = 2\n\n\nother = 1\n")  # handed, uncommitted
    take(
        proctor,
        root,
        {
            "id": "edit",
            "write_paths": ["a.py"],
            "goals": [{"id": "touched", "kind": "symbol", "expect": "changed", "symbols": ["Legacy"]}],
        },
    )
    write(os.path.join(root, "a.py"), "class Legacy:\n    x = 2\n\n\nother = 3\n")
    done = finish(proctor, "edit", root, ["a.py"])
    assert not goal_ok(done, "touched"), verdict(done, "touched")


def test_e2e_changed_goal_on_a_path_git_reads_as_pathspec_magic(tmp_path, monkeypatch, proctor):
    """Go compiles every .go file of a package directory, `:legacy.go` too. The holder appends a
    comment after Legacy; Legacy's text is unchanged. `git ls-tree REV -- :legacy.go` reads the
    leading colon as pathspec magic and lists nothing, so the checkpoint side is empty and
    Legacy counts as added."""
    root, trees = _repo(
        tmp_path, {"go.mod": "module m\n\ngo 1.21\n", ":legacy.go": "package m\n\ntype Legacy struct{}\n"}, ["holder"]
    )
    holder = trees["holder"]
    monkeypatch.chdir(root)
    take(
        proctor,
        holder,
        {
            "id": "edit",
            "write_paths": [":legacy.go"],
            "goals": [{"id": "touched", "kind": "symbol", "expect": "changed", "symbols": ["Legacy"]}],
        },
    )
    write(os.path.join(holder, ":legacy.go"), "package m\n\ntype Legacy struct{}\n\n// reviewed\n")
    done = finish(proctor, "edit", holder, [":legacy.go"])
    assert not goal_ok(done, "touched"), verdict(done, "touched")


def test_e2e_definition_moved_into_a_file_ignored_by_info_exclude(tmp_path, monkeypatch, proctor):
    """The holder moves Legacy into pkg/impl.py and lists that file in `.git/info/exclude`, a
    file of the repository no write path covers and no diff shows (a .gitignore would be a
    change in the diff). app.py, tracked and changed, imports it; checks run on the disk see
    Legacy defined. Round 1 holds an ignored file nobody added to be outside the tree; here the
    ignore rule itself is the holder's, made where the grader cannot see it made."""
    root, trees = _repo(tmp_path, {"pkg/legacy.py": LEGACY_PY, "app.py": "from pkg.legacy import Legacy\n"}, ["holder"])
    holder = trees["holder"]
    monkeypatch.chdir(root)
    take(proctor, holder, {"id": "drop", "write_paths": ["pkg/**", "app.py"], "goals": [GONE]})
    git(holder, "rm", "-q", "pkg/legacy.py")
    write(os.path.join(holder, "pkg", "impl.py"), LEGACY_PY)
    exclude = os.path.join(git(holder, "rev-parse", "--git-common-dir").strip(), "info", "exclude")
    if not os.path.isabs(exclude):
        exclude = os.path.join(holder, exclude)
    os.makedirs(os.path.dirname(exclude), exist_ok=True)
    with open(exclude, "a") as handle:
        handle.write("pkg/impl.py\n")
    write(os.path.join(holder, "app.py"), "from pkg.impl import Legacy\n")
    assert sh(holder, sys.executable, "-c", "from pkg.impl import Legacy; print(Legacy.__name__)").stdout == "Legacy\n"
    done = finish(proctor, "drop", holder, ["app.py", "pkg/legacy.py"])
    assert not goal_ok(done, "gone"), verdict(done, "gone")


# --------------------------------------------------------------------------------------------
# 2. the caches in symbols.db


def _poison_summary(holder: str, rel: str, language: str) -> None:
    """What any process of the holder's user can do (a sandboxed run too: proctor's sandbox
    grants the repository's cache directory, symbols.db's directory, to every run): record
    "no definitions" for the blob of a file that defines Legacy."""
    from proctor.paths import find_checkout, repo_cache_dir

    with open(os.path.join(holder, rel), "rb") as handle:
        data = handle.read()
    cache = repo_cache_dir(find_checkout(holder))
    with Index(holder, cache_dir=cache) as index:
        version = index.version(language)
        path = index.cache_path
    db = sqlite3.connect(path)
    db.execute("DELETE FROM names WHERE blob = ?", (blob_id(data),))
    db.execute("INSERT OR REPLACE INTO summaries VALUES (?, ?, ?, ?, NULL)", (blob_id(data), language, version, "[]"))
    db.commit()
    db.close()


def _poison_seen(holder: str, rel: str) -> None:
    """The per-path stat record: the file's own stat key with no folded words, so a file that
    spells Legacy only through NFKC (`class Ｌegacy`) is never read again."""
    from proctor.paths import find_checkout, repo_cache_dir

    cache = repo_cache_dir(find_checkout(holder))
    with Index(holder, cache_dir=cache) as index:
        path = index.cache_path
    info = os.lstat(os.path.join(holder, rel))
    record = {rel: [[info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns], ""]}
    db = sqlite3.connect(path)
    db.execute("INSERT OR REPLACE INTO seen VALUES (?, ?)", (os.path.realpath(holder), json.dumps(record)))
    db.commit()
    db.close()


@pytest.mark.parametrize("table", ["summaries", "seen"])
def test_e2e_poisoned_symbol_cache(tmp_path, monkeypatch, proctor, table):
    """symbols.db is trusted for content: a row the holder writes decides the goal. The
    definition stays; the grader is told it is not there."""
    source = LEGACY_PY if table == "summaries" else "class \uff2cegacy:\n    pass\n"
    root, trees = _repo(tmp_path, {"legacy.py": source, "app.py": "x = 1\n"}, ["holder"])
    holder = trees["holder"]
    monkeypatch.chdir(root)
    take(proctor, holder, {"id": "drop", "write_paths": ["app.py", "legacy.py"], "goals": [GONE]})
    write(os.path.join(holder, "app.py"), "x = 2\n")
    if table == "summaries":
        _poison_summary(holder, "legacy.py", "python")
    else:
        import time

        time.sleep(2.2)  # the file's stat data older than the index's racy window
        _poison_seen(holder, "legacy.py")
    done = finish(proctor, "drop", holder, ["app.py"])
    assert not goal_ok(done, "gone"), verdict(done, "gone")


def test_cache_two_graders_race_on_one_checkout(tmp_path):
    """Two processes grade one checkout while a third rewrites a file between a definition and
    none (held: each answer matches the content it read; the stat cache is never left
    answering for content it did not read)."""
    root = make(tmp_path, {"a.py": "x = 1\n"})
    code = (
        "import sys\nfrom proctor.symbols.index import Index\nfrom proctor.symbols import goals\n"
        "root = sys.argv[1]\nfor _ in range(12):\n"
        "    with Index(root) as i:\n"
        "        goals.grade(i, {'symbols': ['Legacy'], 'expect': 'absent'})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root)], env=dict(os.environ)) for _ in range(2)]
    n = 0
    while any(proc.poll() is None for proc in procs):
        n += 1
        files_at(root, {"a.py": "class Legacy:\n    pass\n" if n % 2 else "class \uff2cegacz:\n    pass\n"})
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    files_at(root, {"a.py": "class Legacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")
    files_at(root, {"a.py": "class \uff2cegacy:\n    pass\n"})
    assert not passes(root, "Legacy", "absent")


# --------------------------------------------------------------------------------------------
# 3. shapes tree-sitter parses without error, read otherwise than the language reads them


@pytest.mark.parametrize(
    "source",
    [
        # a name bound two levels down a target list: the queries look one level down
        "a, (b, Legacy) = 1, (2, 3)\n",
        "[a, [b, *Legacy]] = [1, [2, 3]]\n",
        "for a, (b, Legacy) in [(1, (2, 3))]:\n    pass\n",
        "import contextlib\nwith contextlib.nullcontext((1, 2)) as (a, Legacy):\n    pass\n",
        # capture patterns of `match` other than a bare name
        "match [1, 2]:\n    case [a, *Legacy]:\n        pass\n",
        "match {'k': 1}:\n    case {**Legacy}:\n        pass\n",
        "class P:\n    k = 1\n\n\nmatch P():\n    case P(k=Legacy):\n        pass\n",
        "match 1:\n    case (1 | 2) as Legacy:\n        pass\n",
        # a binding in the builtins module: a name every module resolves with no import
        "import builtins\nbuiltins.Legacy = type('L', (), {})\n",
    ],
)
def test_py_binding_forms_round2(tmp_path, source):
    """Each binds the module-level (or builtin) name Legacy; python3 itself confirms it."""
    namespace: dict = {}
    exec(compile(source, "a.py", "exec"), namespace)
    import builtins

    assert "Legacy" in namespace or hasattr(builtins, "Legacy"), source
    if hasattr(builtins, "Legacy"):
        del builtins.Legacy
    root = make(tmp_path, {"a.py": source})
    assert not passes(root, "Legacy", "absent"), source


JS_FORMS = [
    # destructuring below the first level, rest elements, defaults
    "var {a: {b: Legacy}} = {a: {b: 1}};\n",
    "var [x, [Legacy]] = [0, [2]];\n",
    "let [{Legacy}] = [{Legacy: 1}];\n",
    "var {...Legacy} = {};\n",
    "var [...Legacy] = [];\n",
    "var {Legacy = 1} = {};\n",
    "var [Legacy = 1] = [];\n",
    # a var in a for-of head is a module-level binding
    "for (var Legacy of [1]) {}\n",
    # CommonJS exports under a quoted key
    'module.exports = { "Legacy": class {} };\n',
    'exports["Legacy"] = class {};\n',
    # ES2022 arbitrary module namespace names: `import { Legacy } from './a.mjs'` resolves it
    'class Other {}\nexport { Other as "Legacy" };\n',
    # members named by a string literal
    'export class A { "Legacy"() {} }\n',
    'export class A { "Legacy" = 1 }\n',
    # the global object: `Legacy` then resolves in every module
    "globalThis.Legacy = class {};\n",
]


def _esm(source: str) -> bool:
    return re.search(r"(^|\n)export ", source) is not None


@pytest.mark.parametrize("source", JS_FORMS)
def test_js_binding_forms_round2(tmp_path, source):
    root = make(tmp_path, {"a.mjs" if _esm(source) else "a.js": source})
    assert not passes(root, "Legacy", "absent"), source


@pytest.mark.skipif(
    shutil.which("node") is None and os.environ.get("CI") != "true",
    reason="node is not installed (.ci/run installs it with the host CLIs, and there it runs)",
)
def test_js_binding_forms_round2_are_javascript(tmp_path):
    """node runs every form above, and each binds Legacy (a module binding, an export, a
    member, a global)."""
    for n, source in enumerate(JS_FORMS):
        if _esm(source):
            files_at(
                tmp_path,
                {
                    f"f{n}.mjs": source,
                    f"p{n}.mjs": (
                        f"import * as m from './f{n}.mjs';\nconst A = m.A;\n"
                        "if (!(('Legacy' in m) || (A && (('Legacy' in A.prototype) || ('Legacy' in new A())))))\n"
                        "  throw new Error('no Legacy');\n"
                    ),
                },
            )
        elif "exports" in source:
            files_at(
                tmp_path,
                {
                    f"f{n}.cjs": source,
                    f"p{n}.cjs": (
                        f"const m = require('./f{n}.cjs');\nif (!('Legacy' in m)) throw new Error('no Legacy');\n"
                    ),
                },
            )
        else:
            files_at(
                tmp_path, {f"p{n}.cjs": source + "if (typeof Legacy === 'undefined') throw new Error('no Legacy');\n"}
            )
        probe = f"p{n}.mjs" if _esm(source) else f"p{n}.cjs"
        proc = sh(tmp_path, "node", probe, check=False)
        assert proc.returncode == 0, (source, proc.stderr[-800:])


@pytest.mark.parametrize(
    "source",
    [
        # a parameter property made by `readonly` (or `override`) alone, with no accessibility
        "export class A { constructor(readonly Legacy: number) {} }\n",
        "class B { constructor(public x: number) {} }\nexport class A extends B { constructor(override x: number, "
        "readonly Legacy = 1) { super(x); } }\n",
        # a dotted namespace declares the inner namespace Legacy
        "export namespace Outer.Legacy { export const x = 1; }\n",
        "declare module Outer.Legacy { const x: number; }\n",
        # members named by a string literal
        'export enum E { "Legacy" = 1 }\n',
        'export interface I { "Legacy": number }\n',
        'export { Other as "Legacy" };\nclass Other {}\n',
    ],
)
def test_ts_binding_forms_round2(tmp_path, source):
    root = make(tmp_path, {"a.ts": source})
    assert not passes(root, "Legacy", "absent"), source


@pytest.mark.parametrize(
    "source",
    [
        # the second name of a const spec (var specs are read whole; const specs stop at the first)
        "package a\n\nconst A, Legacy = 1, 2\n",
        "package a\n\nconst (\n\tA, Legacy = 1, 2\n)\n",
    ],
)
def test_go_binding_forms_round2(tmp_path, source):
    root = make(tmp_path, {"a.go": source})
    assert not passes(root, "Legacy", "absent"), source


# Rust attributes are comments to Python: a .py file can be a Rust module the index reads as an
# empty Python file
RUST_IN_PY = "#[cfg(all())] pub struct Legacy;\n#[allow(dead_code)] pub fn make() -> Legacy { Legacy }\n"


@pytest.mark.parametrize(
    "lib", ['#[path = "legacy.py"]\nmod legacy;\npub use legacy::make;\n', 'include!("legacy.py");\n']
)
def test_rust_module_in_a_python_file(tmp_path, lib):
    """`#[path = "legacy.py"] mod legacy;` (or `include!`) compiles legacy.py as Rust. Each line
    of it is an attribute, so a comment, to Python: it parses without error and defines
    nothing. Round 1 reads a prose file a source names as code; a file with a grammar of its
    own is read in that grammar alone."""
    root = make(tmp_path, {"src/lib.rs": lib, "src/legacy.py": RUST_IN_PY})
    if shutil.which("rustc"):
        proc = sh(
            root,
            "rustc",
            "--edition",
            "2021",
            "--crate-type",
            "lib",
            "--emit=metadata",
            "-o",
            str(tmp_path / "out.rmeta"),
            "src/lib.rs",
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    ast = sh(root, sys.executable, "-c", "import ast; print(len(ast.parse(open('src/legacy.py').read()).body))")
    assert ast.stdout.strip() == "0"  # nothing but comments, to Python
    assert not passes(root, "Legacy", "absent")


def test_rust_reference_in_a_python_file(tmp_path):
    root = make(
        tmp_path,
        {
            "src/lib.rs": 'pub struct Legacy;\n#[path = "uses.py"]\nmod uses;\n',
            "src/uses.py": "#[allow(dead_code)] fn make() -> crate::Legacy { crate::Legacy }\n",
        },
    )
    assert not passes(root, "Legacy", "unreferenced")


# --------------------------------------------------------------------------------------------
# 4. proctor graph diff --rev R, and git diff R | proctor diff -


def cli(root, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args],
        cwd=str(root),
        input=stdin,
        capture_output=True,
        timeout=120,
        env=dict(os.environ),
    )


def graph(root, rev: str) -> dict:
    proc = cli(root, "graph", "diff", "--rev", rev, "-o", "json")
    assert proc.returncode == 0, proc.stderr.decode()
    return {f["path"]: f for f in json.loads(proc.stdout)["files"]}


def annotated(root, patch: bytes) -> dict:
    proc = cli(root, "diff", "-", "-o", "json", stdin=patch)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    return {f["path"]: f for f in json.loads(proc.stdout)["files"]}


def names(entry: dict, field: str) -> set[str]:
    return {d["name"] for d in entry.get(field, ())}


DECORATED = (
    "import functools\n\n\n@functools.cache\ndef legacy():\n    return 1\n\n\n"
    "class A:\n    @staticmethod\n    def m():\n        return 2\n"
)
DECORATED_AFTER = DECORATED.replace("@functools.cache", "@functools.lru_cache(maxsize=1)").replace(
    "@staticmethod", "@classmethod"
)
ATTRIBUTED = "#[derive(Debug)]\npub struct S;\n\n#[inline(always)]\npub fn f() {}\n"
ATTRIBUTED_AFTER = "#[derive(Clone)]\npub struct S;\n\n#[inline(never)]\npub fn f() {}\n"
TS_DECORATED = "@sealed\nexport class B {\n  m() { return 1; }\n}\n\nexport class C {\n  @log\n  n() { return 1; }\n}\n"
TS_DECORATED_AFTER = TS_DECORATED.replace("@sealed", "@frozen").replace("@log", "@trace")
DECORATED_NAMES = {"a.py": {"legacy", "m"}, "src/lib.rs": {"S", "f"}, "deco.ts": {"B", "n"}}


def _decorated_tree(tmp_path):
    root = make(tmp_path, {"a.py": DECORATED, "src/lib.rs": ATTRIBUTED, "deco.ts": TS_DECORATED})
    rev = git(root, "rev-parse", "HEAD").strip()
    files_at(root, {"a.py": DECORATED_AFTER, "src/lib.rs": ATTRIBUTED_AFTER, "deco.ts": TS_DECORATED_AFTER})
    return root, rev


def test_graph_diff_names_a_definition_whose_decorator_changed(tmp_path):
    """A decorator is part of a Python definition (`@staticmethod` -> `@classmethod` changes
    what `m` is), an outer attribute part of a Rust item (`derive`, `inline`, `cfg`), a
    decorator part of a TypeScript class or method. The digest covers the bare def/item node:
    legacy, S, f and B are not in the graph at all, and A (C) stands in for its method m (n)."""
    root, rev = _decorated_tree(tmp_path)
    files = graph(root, rev)
    missing = {path: sorted(want - names(files.get(path, {}), "changed")) for path, want in DECORATED_NAMES.items()}
    assert not any(missing.values()), missing


def test_diff_stdin_places_a_decorator_line_in_its_definition(tmp_path):
    """`git diff -U0 R | proctor diff -`: the changed decorator lines (git's own hunk lines: 4
    and 10 of a.py) belong to `legacy` and `A.m`, the attribute lines to S and f, the TypeScript
    decorators to B and C.n; they are placed outside any declaration, or in the class around
    the method."""
    root, rev = _decorated_tree(tmp_path)
    patch = git(root, "diff", "-U0", rev).encode()
    assert "@@ -4 +4 @@" in patch.decode() and "@@ -10 +10 @@" in patch.decode()
    files = annotated(root, patch)
    missing = {
        path: sorted(want - {t["name"] for t in files[path]["touched"]}) for path, want in DECORATED_NAMES.items()
    }
    assert not any(missing.values()), missing


def test_graph_diff_on_a_path_git_reads_as_pathspec_magic(tmp_path):
    """`:legacy.go` with a comment appended after Legacy: the checkpoint side is read with
    `git ls-tree REV -- :legacy.go`, which takes the colon for pathspec magic and lists
    nothing, so Legacy is reported added."""
    root = make(tmp_path, {":legacy.go": "package m\n\ntype Legacy struct{}\n"})
    rev = git(root, "rev-parse", "HEAD").strip()
    files_at(root, {":legacy.go": "package m\n\ntype Legacy struct{}\n\n// reviewed\n"})
    files = graph(root, rev)
    assert "Legacy" not in names(files.get(":legacy.go", {}), "added"), files


def test_changed_goal_link_replaced_by_identical_copy(tmp_path):
    """a.py was a link to impl.py (Python imports impl.py's text as module a); it becomes a
    plain copy of the same text. The checkpoint side is read as the link's blob, the text
    `impl.py`, which defines nothing: Legacy counts as added, and `changed` passes. (Round 1
    has the other direction: a file replaced by a link.)"""
    root = make(tmp_path, {"impl.py": LEGACY_PY})
    os.symlink("impl.py", root / "a.py")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "link")
    rev = git(root, "rev-parse", "HEAD").strip()
    os.unlink(root / "a.py")
    shutil.copy(root / "impl.py", root / "a.py")
    changed = sorted(set(git(root, "diff", "--name-only", rev).split()))
    assert changed == ["a.py"]
    assert not passes(root, "Legacy", "changed", revision=rev, changed=changed)
    assert "Legacy" not in names(graph(root, rev).get("a.py", {}), "added")


def test_diff_stdin_combined_diff_of_a_conflicted_merge(tmp_path):
    """`git diff` in a conflicted merge prints a combined diff (`diff --cc`, `@@@` hunks). The
    file is listed with nothing touched and no note, as if nothing in it had changed; legacy's
    body did."""
    root = make(tmp_path, {"a.py": "def legacy():\n    return 1\n\n\ndef other():\n    return 2\n"})
    git(root, "checkout", "-q", "-b", "side")
    files_at(root, {"a.py": "def legacy():\n    return 10\n\n\ndef other():\n    return 2\n"})
    git(root, "commit", "-q", "-am", "side")
    git(root, "checkout", "-q", "main")
    files_at(root, {"a.py": "def legacy():\n    return 11\n\n\ndef other():\n    return 2\n"})
    git(root, "commit", "-q", "-am", "main")
    sh(root, "git", "merge", "side", check=False)
    files_at(root, {"a.py": "def legacy():\n    return 12\n\n\ndef other():\n    return 2\n"})
    patch = git(root, "diff").encode()
    assert patch.startswith(b"diff --cc a.py")
    entry = annotated(root, patch)["a.py"]
    assert "legacy" in {t["name"] for t in entry["touched"]} or entry["note"], entry


def test_diff_stdin_mnemonic_prefix(tmp_path):
    """`diff.mnemonicPrefix=true` (a stock git setting) prints `--- c/a.py` / `+++ w/a.py`: the
    file is reported as `w/a.py` and its new side is not read."""
    root, rev = _decorated_tree(tmp_path)
    files_at(root, {"a.py": DECORATED.replace("return 1", "return 3")})
    patch = git(root, "-c", "diff.mnemonicPrefix=true", "diff", rev, "--", "a.py").encode()
    assert b"+++ w/a.py" in patch
    files = annotated(root, patch)
    assert list(files) == ["a.py"], files
    assert {t["name"] for t in files["a.py"]["touched"] if t["side"] == "new"} == {"legacy"}


HOSTILE = {
    "octal-escape-above-255": b'diff --git "a/\\777.py" "b/\\777.py"\n--- "a/\\777.py"\n+++ "b/\\777.py"\n'
    b"@@ -1 +1 @@\n-x\n+y\n",
    "nul-in-quoted-path": b'--- a/x.py\n+++ "b/x\\000.py"\n@@ -1 +1 @@\n-x\n+y\n',
    "huge-counts": b"--- a/a.py\n+++ b/a.py\n@@ -1,99999999999999999999 +1 @@\n-x\n",
    "huge-starts": b"--- a/a.py\n+++ b/a.py\n@@ -99999999999999999999999 +99999999999999999999 @@\n-x\n+y\n",
    "hunk-without-header": b"@@ -1 +1 @@\n-x\n+y\n",
    "crlf": b"--- a/a.py\r\n+++ b/a.py\r\n@@ -1 +1 @@\r\n-import functools\r\n+import os\r\n",
    "binary-patch": b"diff --git a/a.py b/a.py\nindex 0000000..1111111\nGIT binary patch\nliteral 5\nMcmZ?b\n\n"
    b"literal 0\nHcmV?d00001\n\n",
    "empty-names": b"--- a/\n+++ b/\n@@ -1 +1 @@\n-x\n+y\n",
    "dev-null-both": b"--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n",
    "rename-with-space": b"diff --git a/a.py b/b c.py\nsimilarity index 90%\nrename from a.py\nrename to b c.py\n"
    b"--- a/a.py\n+++ b/b c.py\t\n@@ -1 +1 @@\n-x\n+y\n",
    "mode-change": b"diff --git a/a.py b/a.py\nold mode 100644\nnew mode 100755\n",
    "no-newline-markers": b"--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+y\n"
    b"\\ No newline at end of file\n",
    "negative-counts": b"--- a/a.py\n+++ b/a.py\n@@ -1,-5 +1,-3 @@\n-x\n",
    "unterminated-quote": b'--- "a/x.py\n+++ "b/x.py\\"\n@@ -1 +1 @@\n-x\n+y\n',
    "invalid-utf8-path": b"--- a/\xff\xfe.py\n+++ b/\xff\xfe.py\n@@ -1 +1 @@\n-x\n+y\n",
    "directory-path": b"--- a/src\n+++ b/src\n@@ -1 +1 @@\n-x\n+y\n",
    "sha256-index": b"diff --git a/a.py b/a.py\nindex " + b"0" * 64 + b".." + b"f" * 64 + b" 100644\n--- a/a.py\n"
    b"+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n",
    "all-bytes": bytes(range(256)) * 8,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_diff_stdin_hostile_input_does_not_crash(tmp_path, case):
    root, _rev = _decorated_tree(tmp_path)
    proc = cli(root, "diff", "-", "-o", "json", stdin=HOSTILE[case])
    assert "Traceback" not in proc.stderr.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")[-1500:]
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-1500:]
    json.loads(proc.stdout)


def test_diff_stdin_lines_match_git_hunks(tmp_path):
    """Held: parse_patch's removed/added lines equal git's own hunk ranges (read from a -U0
    diff whose content lines carry other indicators, so no content can pass for a header), for
    random edits of files full of lines that look like diff headers, at -U0, -U1 and -U3, LF
    and CRLF, with and without a final newline."""
    import random

    from proctor.symbols.diff import parse_patch

    tricky = [
        b"--- a/x.py",
        b"+++ b/x.py",
        b"-- x",
        b"++ y",
        b"@@ -1 +1 @@",
        b"diff --git a/q b/q",
        b"\\ No newline at end of file",
        b"",
        b"  ",
        b"index 1..2",
        b"x = 1",
        b"def f():",
        b"    return 2",
        b"-",
        b"+",
        b"@@@ -1 -1 +1 @@@",
    ]
    rng = random.Random(20261202)
    root = make(tmp_path, {"x.py": ""})
    for _ in range(40):
        eol = rng.choice([b"\n", b"\r\n"])
        lines = [rng.choice(tricky) for _ in range(rng.randint(0, 25))]
        files_at(root, {"x.py": eol.join(lines) + (eol if rng.random() < 0.7 else b"")})
        git(root, "commit", "-q", "-a", "--allow-empty", "-m", "t")
        for _ in range(rng.randint(1, 6)):
            op = rng.random()
            if op < 0.4 and lines:
                lines.pop(rng.randrange(len(lines)))
            elif op < 0.8:
                lines.insert(rng.randint(0, len(lines)), rng.choice(tricky))
            elif lines:
                lines[rng.randrange(len(lines))] = rng.choice(tricky)
        files_at(root, {"x.py": eol.join(lines) + (eol if rng.random() < 0.7 else b"")})
        plain = sh(
            root,
            "git",
            "diff",
            "-U0",
            "--output-indicator-new=P",
            "--output-indicator-old=M",
            "--output-indicator-context=C",
            "HEAD",
            text=False,
        ).stdout
        want_old, want_new = set(), set()
        for line in plain.split(b"\n"):
            hunk = re.match(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
            if hunk:
                o, oc, n, nc = int(hunk[1]), int(hunk[2] or 1), int(hunk[3]), int(hunk[4] or 1)
                want_old.update(range(o, o + oc))
                want_new.update(range(n, n + nc))
        for context in ("-U0", "-U1", "-U3"):
            patch = sh(root, "git", "diff", context, "HEAD", text=False).stdout
            got = parse_patch(patch)
            if not want_old and not want_new:
                assert got == [] or all(not e["removed"] and not e["added"] for e in got)
                continue
            assert len(got) == 1 and got[0]["new"] == "x.py", got
            assert (set(got[0]["removed"]), set(got[0]["added"])) == (want_old, want_new), (context, patch)


@pytest.mark.parametrize(
    "source",
    [
        "from a import *\nLegacy.instances = []\n",
        "from a import *\nregistry = {}\nregistry[Legacy] = 1\n",
    ],
)
def test_py_read_taken_for_a_definition(tmp_path, source):
    """`Legacy.instances = []` and `registry[Legacy] = 1` READ Legacy (python3 runs them against
    a.Legacy). The pattern `(assignment left: (_ (identifier) @name))`, meant for `a, Legacy =`,
    also matches the object of an attribute target and the index of a subscript target, so the
    use is filed as a second definition of Legacy and is no reference: unreferenced passes,
    listing the use among the definitions."""
    root = make(tmp_path, {"a.py": LEGACY_PY, "b.py": source})
    ran = sh(root, sys.executable, "-c", "import b, a; print(a.Legacy.__name__)", check=False)
    assert ran.stdout == "Legacy\n", ran.stderr
    assert not passes(root, "Legacy", "unreferenced"), grade(root, "Legacy", "unreferenced")


@pytest.mark.parametrize(
    "path,source",
    [
        # a string literal whose VALUE is the name counts as a reference when spelled plainly
        # (round 1: `getattr(a, 'Legacy')`, `ns['Legacy']`); spelled with an escape or split by
        # implicit concatenation, the same value is not seen
        ("b.py", "import a\ngetattr(a, '\\x4cegacy')()\n"),
        ("b.py", "import a\ngetattr(a, 'Leg' 'acy')()\n"),
        ("b.js", "import * as ns from './a.js';\nns['\\u004Cegacy'];\n"),
        ("b.js", "import * as ns from './a.js';\nns['\\x4Cegacy'];\n"),
        # a PEP 484 type comment, which type checkers read as an annotation (round 1 counts the
        # string annotation `-> 'a.Legacy'`)
        ("b.py", "import a\n\n\ndef f(x):\n    # type: (a.Legacy) -> None\n    pass\n"),
    ],
)
def test_reference_forms_round2(tmp_path, path, source):
    root = make(tmp_path, {"a.py": LEGACY_PY, "a.js": "export class Legacy {}\n", path: source})
    assert not passes(root, "Legacy", "unreferenced"), source


@pytest.mark.parametrize(
    "files",
    [
        # rustc reads the module from `leg\x61cy.md`; the basename `legacy.md` is never spelled
        {
            "src/lib.rs": '#[path = "leg\\x61cy.md"]\nmod legacy;\npub use legacy::Legacy as _L;\n',
            "src/legacy.md": "pub struct Legacy;\n",
        },
        # the everyday form of include! (`include!(concat!(env!("OUT_DIR"), "/x.rs"))`)
        {"src/lib.rs": 'include!(concat!("leg", "acy.md"));\n', "src/legacy.md": "pub struct Legacy;\n"},
        # node's require of a .txt file (round 1), the name spelled with an escape
        {
            "index.js": 'const m = require("./leg\\x61cy.txt");\nmodule.exports = { make: () => new m.Legacy() };\n',
            "legacy.txt": "exports.Legacy = class Legacy {};\n",
        },
        # a manifest with no grammar names the file: Cargo's [lib] path, npm's "main"
        {
            "Cargo.toml": '[package]\nname = "cg"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\npath = "src/legacy.txt"\n',
            "src/legacy.txt": "pub struct Legacy;\n",
        },
        {"package.json": '{"name": "pj", "main": "legacy.txt"}\n', "legacy.txt": "exports.Legacy = class Legacy {};\n"},
    ],
)
def test_prose_read_as_code_under_another_spelling(tmp_path, files):
    """Round 1 reads a prose file as code when a source file names its basename. A source
    that names it through an escape or a concatenation is not found by `git grep -F
    legacy.md`, a manifest with no grammar (Cargo.toml, package.json) is not consulted, and
    the definition in it is prose that "decides nothing"."""
    root = make(tmp_path, files)
    if "src/lib.rs" in files and shutil.which("rustc"):
        proc = sh(
            root,
            "rustc",
            "--edition",
            "2021",
            "--crate-type",
            "lib",
            "--emit=metadata",
            "-o",
            str(tmp_path / "out.rmeta"),
            "src/lib.rs",
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
    if "index.js" in files and shutil.which("node"):
        assert sh(root, "node", "-e", "console.log(typeof require('./index.js').make())").stdout == "object\n"
    if "package.json" in files and shutil.which("node"):
        assert sh(root, "node", "-e", "console.log(typeof require(process.cwd()).Legacy)").stdout == "function\n"
    assert not passes(root, "Legacy", "absent")


def test_cache_directories_swapped_keep_no_stale_words(tmp_path):
    """Held: `mv a t; mv b a; mv t b` moves files without touching their inodes' ctime; the stat
    key carries the inode, so the path's record no longer matches and the file is read again."""
    import time

    root = make(tmp_path, {"a/x.py": "class \uff2cegacz:\n    pass\n", "b/x.py": "class \uff2cegacy:\n    pass\n"})
    time.sleep(2.2)  # older than the index's racy window: both records are kept
    grade(root, "Legacy", "absent")
    os.rename(root / "a", root / "t")
    os.rename(root / "b", root / "a")
    os.rename(root / "t", root / "b")
    ok, subjects = grade(root, "Legacy", "absent")
    assert not ok and any("a/x.py" in s for s in subjects), subjects


# -- known limits, each stated in the note; strict, so each says so the day it holds -----------

_SUBMODULES = (
    "a known limit: git's grep reads the tracked files of active, initialised submodules only; an "
    "embedded repository with no .gitmodules entry, a submodule deactivated in config, and a "
    "submodule's untracked files are not read"
)
_KNOWN = {
    "test_e2e_definition_moved_into_a_nested_linked_worktree": (
        "a known limit: a linked worktree inside the checkout is another checkout of the repository (proctor's own "
        "worktrees may live there), so its files are neither in the job's diff nor in the symbol index; a holder "
        "that makes one to move code out of sight is not told apart"
    ),
    "test_e2e_definition_in_an_embedded_gitlink": _SUBMODULES,
    "test_e2e_submodule_deactivated_by_config": _SUBMODULES,
    "test_e2e_definition_moved_into_an_untracked_file_of_a_submodule": _SUBMODULES,
    "test_e2e_core_worktree_redirect_by_worktree_config": (
        "a known limit: a holder that rewrites its checkout's git configuration (core.worktree) makes every git "
        "proctor runs read another directory; the diff and the index both follow it"
    ),
    "test_e2e_definition_moved_into_a_file_ignored_by_info_exclude": (
        "a known limit: a file git ignores is outside the tree (as outside the diff and the checkpoint), and a "
        "holder may write the ignore rule itself in .git/info/exclude"
    ),
    "test_e2e_poisoned_symbol_cache": (
        "the same-user limit (tests/server/test_server_adversary.py SAME_USER): symbols.db is the person's file, as the "
        "store is; a process that writes it can write the store's verdict too"
    ),
    "test_rust_module_in_a_python_file": (
        "a known limit: a file is read as the language its name says; Rust's #[path] or include! of a .py file "
        "reads it as Rust, which the index does not"
    ),
    "test_rust_reference_in_a_python_file": (
        "a known limit: a file is read as the language its name says; Rust's #[path] or include! of a .py file "
        "reads it as Rust, which the index does not"
    ),
    "test_prose_read_as_code_under_another_spelling": (
        "a known limit: prose is read as code when a source file names it by its plain file name; an escaped or "
        "concatenated name, Cargo.toml's path or package.json's main are not followed"
    ),
}
for _name, _reason in _KNOWN.items():
    globals()[_name] = pytest.mark.xfail(strict=True, reason=_reason)(globals()[_name])
