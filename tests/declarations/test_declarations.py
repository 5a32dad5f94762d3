"""Declaration claims end to end: two jobs on one file in two worktrees, each held to its own
declaration by the guard (Claude Code Edit and MultiEdit payloads, a Codex apply_patch) and by
`job wait`'s footprint; releases digest the declaration; overlaps and PRC3031/PRC3032 read the
file. Real git repositories and worktrees, proctor's own hook process and API."""

from __future__ import annotations

import json
import os

import pytest

from proctor import api, declarations, errors
from tests.support import call_hook, git, make_repo
from tests.guard.guard_lease import denied, job_row, said

CONFIG = "[targets.test]\ncommand = 'true'\n"

SOURCE = """import os
import sys


def alpha():
    return 1


def beta():
    return 2


def gamma():
    return 3
"""


def build(tmp_path, monkeypatch, source=SOURCE, name="a.py", extra=None):
    """A repository whose src/<name> holds `source` (and `extra` files), committed, with three
    worktrees wa, wb, wc; (its root, the worktrees by name)."""
    root = make_repo(tmp_path / "main", CONFIG)
    os.makedirs(os.path.join(root, "src"))
    data = source if isinstance(source, bytes) else source.encode()
    with open(os.path.join(root, "src", name), "wb") as handle:
        handle.write(data)
    for rel, text in (extra or {}).items():
        with open(os.path.join(root, rel), "w") as handle:
            handle.write(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "src")
    trees = {}
    for tree in ("wa", "wb", "wc"):
        trees[tree] = os.path.realpath(str(tmp_path / tree))
        git(root, "worktree", "add", "-q", "-b", tree, trees[tree])
    monkeypatch.chdir(root)
    return os.path.realpath(root), trees


@pytest.fixture
def world(tmp_path, monkeypatch):
    return build(tmp_path, monkeypatch, extra={"src/notes.txt": "plain\n"})


def hook(host: str, payload: dict, lease: str) -> dict:
    return call_hook(payload, host, {"BAGGAGE": f"proctor.lease={lease}"})


def claude(tree: str, lease: str, tool: str, tool_input: dict) -> dict:
    return hook(
        "claude",
        {
            "session_id": "s-" + lease,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": tree,
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_use_id": "toolu_1",
            "tool_input": tool_input,
        },
        lease,
    )


def edit(tree: str, lease: str, old: str, new: str, path: str | None = None) -> dict:
    return claude(
        tree,
        lease,
        "Edit",
        {"file_path": path or os.path.join(tree, "src", "a.py"), "old_string": old, "new_string": new},
    )


def multi_edit(tree: str, lease: str, pairs: list[tuple[str, str]]) -> dict:
    return hook(
        "claude",
        {
            "session_id": "s-" + lease,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": tree,
            "hook_event_name": "PreToolUse",
            "tool_name": "MultiEdit",
            "tool_use_id": "toolu_2",
            "tool_input": {
                "file_path": os.path.join(tree, "src", "a.py"),
                "edits": [{"old_string": o, "new_string": n} for o, n in pairs],
            },
        },
        lease,
    )


def apply_patch(tree: str, lease: str, body: str) -> dict:
    patch = f"*** Begin Patch\n*** Update File: src/a.py\n{body}*** End Patch\n"
    return hook(
        "codex",
        {
            "session_id": "s-" + lease,
            "turn_id": "t1",
            "transcript_path": None,
            "cwd": tree,
            "hook_event_name": "PreToolUse",
            "model": "gpt-5",
            "permission_mode": "default",
            "tool_name": "apply_patch",
            "tool_use_id": "call_1",
            "tool_input": {"command": patch},
        },
        lease,
    )


def write_whole(tree: str, lease: str) -> dict:
    return hook(
        "claude",
        {
            "session_id": "s-" + lease,
            "transcript_path": "/tmp/none.jsonl",
            "cwd": tree,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_use_id": "toolu_3",
            "tool_input": {"file_path": os.path.join(tree, "src", "a.py"), "content": "x\n"},
        },
        lease,
    )


def replace(tree: str, old: str, new: str) -> None:
    """The first `old` in the tree's src/a.py becomes `new`, its bytes otherwise kept."""
    path = os.path.join(tree, "src", "a.py")
    with open(path, "rb") as handle:
        text = handle.read().decode()
    assert old in text
    with open(path, "wb") as handle:
        handle.write(text.replace(old, new, 1).encode())


def finish(job: str, tree: str, changed=("src/a.py",)) -> dict:
    made = api.run_target("test", cwd=tree, lease=job, warn=lambda _line: None)
    api.exit_job(
        job,
        {
            "schema_version": 2,
            "changed_paths": list(changed),
            "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
        },
        cwd=tree,
        warn=lambda _line: None,
    )
    return api.wait_job(job, cwd=tree)


def failing(waited: dict) -> list[str]:
    return [s for o in waited["grade"]["outcomes"] if not o["ok"] for s in o["subjects"]]


def fork_pair(root: str, trees: dict, a_paths=("src/a.py#alpha",), b_claim="src/a.py#def beta") -> None:
    api.fork({"id": "A", "write_paths": list(a_paths), "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": [b_claim], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    api.exec_job("B", cwd=trees["wb"], environ={})


def test_two_jobs_on_one_file_each_edit_their_own_declaration_and_pass(world):
    root, trees = world
    fork_pair(root, trees)
    wa, wb = trees["wa"], trees["wb"]
    # A: its own declaration passes, B's is refused naming B and the declaration
    assert not denied(edit(wa, "A", "    return 1", "    return 10")), "A edits alpha"
    answer = edit(wa, "A", "    return 2", "    return 20")
    assert denied(answer, "lease-claimed-declaration"), said(answer)
    assert "B" in said(answer) and "def beta():" in said(answer)
    # a MultiEdit list: one edit in B's declaration refuses the call
    answer = multi_edit(wa, "A", [("    return 1", "    return 11"), ("    return 2", "    return 22")])
    assert denied(answer, "lease-claimed-declaration"), said(answer)
    assert not denied(multi_edit(wa, "A", [("def alpha():", "def alpha():  # a"), ("    return 1", "    return 11")]))
    # B, through Codex's apply_patch
    assert not denied(apply_patch(wb, "B", "@@ def beta():\n-    return 2\n+    return 20\n"))
    answer = apply_patch(wb, "B", "@@ def alpha():\n-    return 1\n+    return 10\n")
    assert denied(answer, "lease-claimed-declaration"), said(answer)
    assert "A" in said(answer) and "def alpha():" in said(answer)
    # a whole-file write cannot be placed: graded by path, which the other job holds too
    answer = write_whole(wa, "A")
    assert denied(answer, "lease-claimed-declaration") and "as an edit" in said(answer), said(answer)
    # both make their edits and pass wait, each footprint naming its declaration
    replace(wa, "    return 1", "    return 10")
    replace(wb, "    return 2", "    return 20")
    a, b = finish("A", wa), finish("B", wb)
    assert a["job"]["state"] == "pass", failing(a)
    assert b["job"]["state"] == "pass", failing(b)
    placed = a["grade"]["footprint"]["src/a.py"]["declarations"]
    assert [d["text"] for d in placed] == ["def alpha():"] and placed[0]["new"] == 5


def test_a_third_edits_the_imports_above_both_and_passes(world):
    root, trees = world
    fork_pair(root, trees)
    api.fork({"id": "C", "write_paths": ["src/a.py#gamma"], "check": "test"}, cwd=root)
    api.exec_job("C", cwd=trees["wc"], environ={})
    wc = trees["wc"]
    answer = edit(wc, "C", "import sys\n", "import sys\nimport json\n")
    assert not denied(answer), said(answer)
    replace(wc, "import sys\n", "import sys\nimport json\n")
    waited = finish("C", wc)
    assert waited["job"]["state"] == "pass", failing(waited)
    assert waited["grade"]["footprint"]["src/a.py"]["outside"] is True


def test_a_job_that_also_touches_the_other_declaration_fails_wait_naming_it(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    replace(wa, "    return 1", "    return 10")
    replace(wa, "    return 2", "    return 20")  # past the guard: a shell write nobody hooked
    waited = finish("A", wa)
    assert waited["job"]["state"] == "fail"
    bad = failing(waited)
    assert any("'def beta():'" in s and "src/a.py#alpha" in s for s in bad), bad
    assert not any("def alpha" in s for s in bad), bad


def test_a_footprint_that_cannot_be_placed_fails_a_declaration_claim(world):
    root, trees = world
    with open(os.path.join(root, ".gitattributes"), "w") as handle:
        handle.write("*.py diff=python\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "attrs")
    api.fork({"id": "A", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=root)
    wa = trees["wa"]
    git(wa, "merge", "-q", "main")
    api.exec_job("A", cwd=wa, environ={})
    with open(os.path.join(wa, "src", "a.py"), "wb") as handle:
        handle.write(b"\x00\x01binary now\n")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "fail"
    assert any("cannot be placed in declarations" in s for s in failing(waited)), failing(waited)


def test_footprint_prints_the_declaration_in_wait_and_describe(world, proctor):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    replace(wa, "    return 1", "    return 10")
    described = proctor("describe", "job", "A", cwd=wa)
    assert described.code == 0, described.err
    assert "src/a.py#alpha  (names line 5 'def alpha():' (lines 5-8))" in described.out
    assert "Footprint:" in described.out and "in def alpha():" in described.out
    made = api.run_target("test", cwd=wa, lease="A", warn=lambda _line: None)
    api.exit_job(
        "A",
        {
            "schema_version": 2,
            "changed_paths": ["src/a.py"],
            "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
        },
        cwd=wa,
        warn=lambda _line: None,
    )
    waited = proctor("job", "wait", "A", cwd=wa)
    assert "src/a.py: +1 -1 [lines 6] in def alpha():" in waited.out, waited.out


def test_fork_refusals_and_a_claim_that_names_nothing_yet(world, proctor):
    root, _ = world
    for spelling, text in (
        ("src/a.py#", "empty declaration"),
        ("src/*.py#alpha", "glob"),
        ("src/notes.txt#alpha", "no diff driver"),
    ):
        refused = proctor("job", "fork", "X", "--write-paths", spelling, "--check", "test", cwd=root)
        assert refused.code == 1 and "PRC3031" in refused.err and text in refused.err, refused.err
    made = proctor("job", "fork", "X", "--write-paths", "src/a.py#delta", "--check", "test", cwd=root)
    assert made.code == 0, made.err
    described = proctor("describe", "job", "X", cwd=root)
    assert "src/a.py#delta  (names no declaration of src/a.py yet (the job may create it))" in described.out


def test_releasing_a_declaration_digests_its_lines_only(world):
    root, trees = world
    fork_pair(root, trees)
    wa, wb = trees["wa"], trees["wb"]
    replace(wa, "    return 1", "    return 10")
    replace(wb, "    return 2", "    return 20")
    # B's release of its declaration, from its own checkout
    expected_b = declarations.digest(
        open(os.path.join(wb, "src", "a.py"), "rb").read(),
        declarations.named(
            declarations.declarations(
                open(os.path.join(wb, "src", "a.py"), "rb").read(), declarations.configured({}, "python")
            ),
            "def beta",
        ),
    )
    api.fork({"id": "B", "write_paths": ["src/a.py#def beta", "src/b.py"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/b.py"]}, cwd=wb)
    release = job_row(root, "B")["releases"][0]
    assert release["path"] == "src/a.py#def beta" and release["digest"] == expected_b
    # an edit elsewhere in the file does not change a declaration's digest
    with open(os.path.join(wb, "src", "a.py"), "a") as handle:
        handle.write("\n\ndef delta():\n    return 4\n")
    from proctor.jobs.fork import release_digest
    from proctor.claims import Claim

    assert release_digest(wb, Claim("src/a.py", "def beta")) == expected_b
    assert release_digest(wb, Claim("src/a.py", "omega")) == "absent"
    assert release_digest(wb, Claim("src/a.py", "alpha")) != expected_b


def test_overlaps_read_the_declarations(world, proctor):
    root, _ = world
    api.fork({"id": "A", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/a.py#def beta"], "check": "test"}, cwd=root)
    api.fork({"id": "S", "write_paths": ["src/a.py#def alpha():"], "check": "test"}, cwd=root)
    api.fork({"id": "W", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    listed = json.loads(proctor("ls", "jobs", "-o", "json", cwd=root).out)
    kinds = {tuple(p["jobs"]): p["claims"] for p in listed["overlaps"]}
    assert kinds[("A", "B")] == "disjoint"
    assert kinds[("A", "S")] == "overlapping"  # two spellings of one declaration
    assert kinds[("B", "S")] == "disjoint"
    assert kinds[("A", "W")] == kinds[("B", "W")] == "overlapping"  # a whole-file claim


def test_prc3032_remedy_works_end_to_end(world):
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    with pytest.raises(errors.Refused) as refused:
        api.fork({"id": "B", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
    assert "PRC3032" in str(refused.value.reasons) and "#<declaration>" in str(refused.value.reasons)
    # the remedy: a declaration claim on both rows
    api.fork({"id": "A", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=trees["wa"])
    api.fork({"id": "B", "write_paths": ["src/a.py#beta"], "check": "test"}, cwd=root)
    api.exec_job("B", cwd=trees["wb"], environ={})
    # one declaration claimed in two checkouts is the same collision
    with pytest.raises(errors.Refused) as again:
        api.fork({"id": "C", "write_paths": ["src/a.py#def alpha"], "check": "test"}, cwd=root)
    assert "name one declaration" in str(again.value.reasons)
    assert not denied(edit(trees["wa"], "A", "    return 1", "    return 10"))
    assert not denied(edit(trees["wb"], "B", "    return 2", "    return 20"))
    replace(trees["wa"], "    return 1", "    return 10")
    replace(trees["wb"], "    return 2", "    return 20")
    assert finish("A", trees["wa"])["job"]["state"] == "pass"
    assert finish("B", trees["wb"])["job"]["state"] == "pass"


# -- the placement rules the spec adds to git's lines ------------------------------------------

GO = b"""package main

import "fmt"

// Magus runs stages.
type Magus struct {
	n int
}

var (
	a = 1
	b = 2
)

const Limit = 3

// executeStages runs each stage.
func (m *Magus) executeStages(ctx context.Context) error {
	return nil
}
"""


def test_go_var_const_type_and_doc_comments_are_declarations_of_their_own():
    decls = declarations.declarations(GO, declarations.configured({}, "golang"))
    assert [(d.text, d.start, d.end) for d in decls] == [
        ("type Magus struct {", 5, 9),
        ("var (", 10, 14),
        ("const Limit = 3", 15, 16),
        ("func (m *Magus) executeStages(ctx context.Context) error {", 17, 20),
    ]
    assert declarations.place(decls, [[1, 3]]) == ([], True)  # package clause and imports: no claim
    assert [d.text for d in declarations.place(decls, [[5, 5]])[0]] == ["type Magus struct {"]  # its doc comment


@pytest.mark.parametrize(
    "claim,named",
    [
        ("executeStages", True),
        ("execute", False),
        ("Stages", False),
        ("func (m *Magus) executeStages", True),
        ("(m *Magus)", True),
        ("m *Magus", True),
        ("*Magus) executeStages(ctx", True),
        ("Magu", False),
        ("func (m *Magus) executeStages(ctx context.Context) error {", True),
        ("error {", True),
        ("rror", False),
    ],
)
def test_a_claim_names_a_run_that_cuts_no_word(claim, named):
    assert declarations.names(claim, "func (m *Magus) executeStages(ctx context.Context) error {") is named


def test_an_edit_is_placed_in_memory_old_and_new_side():
    rules = declarations.configured({}, "python")
    data = SOURCE.encode()
    hit, above = declarations.touched(data, [("    return 1", "    return 10")], rules)
    assert [d.text for d in hit] == ["def alpha():"] and not above
    hit, above = declarations.touched(data, [("def beta():\n    return 2\n", "")], rules)  # removed: old side
    assert [d.text for d in hit] == ["def beta():"]
    hit, above = declarations.touched(data, [("import os\n", "import os\nimport re\n")], rules)
    assert hit == [] and above
    assert declarations.touched(data, [("not in the file", "x")], rules) is None
    assert declarations.touched(data, [("", "x")], rules) is None


def test_locate_is_place_of_declarations_on_random_files():
    """The footprint's fast path reads only the declarations near the changed lines; it must
    answer what placing among all of them answers."""
    import random

    rng = random.Random(11)
    pieces = [
        "def f{}():",
        "    x = {}",
        "",
        "# about {}",
        "@deco{}",
        "class C{}:",
        "    def m{}(self):",
        "import os",
        "    return {}",
    ]
    for driver in ("python", "golang", "cpp", "markdown", "javascript"):
        rules = declarations.configured({}, driver)
        for _ in range(150):
            lines = [rng.choice(pieces).format(rng.randrange(9)) for _ in range(rng.randrange(0, 40))]
            data = "\n".join(lines).encode() + (b"\n" if rng.random() < 0.7 else b"")
            count = max(len(lines), 1)
            ranges = []
            for _ in range(rng.randrange(1, 4)):
                a = rng.randrange(1, count + 1)
                ranges.append([a, min(count, a + rng.randrange(0, 4))])
            decls, outside = declarations.place(declarations.declarations(data, rules), ranges)
            assert declarations.locate(data, rules, ranges) == ([(d.line, d.text) for d in decls], outside), (
                driver,
                lines,
                ranges,
            )


def test_placing_an_edit_is_bounded_whatever_the_payload():
    """A hook must answer in time: an edit whose text is in more places than the guard weighs is
    not placed (and so graded by its path), never weighed place by place."""
    import time

    rules = declarations.configured({}, "python")
    data = b"def f():\n" + b"    x\n" * 200_000
    start = time.perf_counter()
    assert declarations.touched(data, [("    x", "    y")], rules) is None  # 200,000 exact places
    assert declarations.touched(data, [("x\n" * 5000, "y\n")], rules) is None  # loose places, each 5,000 wide
    assert time.perf_counter() - start < 30  # generous: seconds at most, never the minutes unbounded work takes
    hit, _ = declarations.touched(
        b"def f():\n    x = 1\n\n\ndef g():\n    x = 1\n", [("    x = 1", "    x = 2")], rules
    )
    assert [d.text for d in hit] == ["def f():", "def g():"]  # both places weighed
