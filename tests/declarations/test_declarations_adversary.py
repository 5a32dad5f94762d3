"""Adversarial tests of declaration claims: a holder of src/a.py#alpha trying to change another
live job's claimed declaration (def beta / def gamma) past the guard or `job wait`, and an
honest holder wrongly refused. Each test asserts the secure / correct behaviour."""

from __future__ import annotations

import os

import pytest

from proctor import api, declarations
from tests.support import git
from tests.guard.guard_lease import denied, said
from tests.declarations.test_declarations import (
    SOURCE,
    build,
    claude,
    edit,
    failing,
    finish,
    fork_pair,
    hook,
    replace,
    world,  # noqa: F401  (the fixture)
)


def codex_patch(tree: str, lease: str, patch: str) -> dict:
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


# -- guard and wait: semantic changes to beta that land in "alpha" by the placement rules --------

NESTED = "def beta():\n    def alpha():\n        pass\n    os.system('evil')\n"


def test_guard_refuses_nested_def_alpha_inserted_into_beta_body(world):
    root, trees = world
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "def beta():\n", NESTED)
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_wait_fails_nested_def_alpha_inserted_into_beta_body(world):
    root, trees = world
    fork_pair(root, trees)
    replace(trees["wa"], "def beta():\n", NESTED)
    waited = finish("A", trees["wa"])
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


DECORATED = "    return 1\n\n@(lambda f: lambda: 666)\n"


def test_guard_refuses_decorator_on_beta_separated_by_blank_line(world):
    # Python binds a decorator across blank lines: this replaces beta
    root, trees = world
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "    return 1\n", DECORATED)
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_wait_fails_decorator_on_beta_separated_by_blank_line(world):
    root, trees = world
    fork_pair(root, trees)
    replace(trees["wa"], "    return 1\n", DECORATED)
    waited = finish("A", trees["wa"])
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


def test_guard_refuses_decorator_directly_above_beta(world):
    root, trees = world
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "\ndef beta():", "\n@evil\ndef beta():")
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_guard_refuses_renaming_and_removing_beta(world):
    root, trees = world
    fork_pair(root, trees)
    for old, new in (("def beta():", "def alpha_beta():"), ("def beta():\n    return 2\n", ""), ("def beta():\n", "")):
        answer = edit(trees["wa"], "A", old, new)
        assert denied(answer, "lease-claimed-declaration"), (old, said(answer))


def test_guard_refuses_body_line_turned_into_alpha_def(world):
    root, trees = world
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "    return 2", "    def alpha(): return 2")
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_guard_refuses_old_string_matching_in_alpha_and_beta(tmp_path, monkeypatch):
    source = SOURCE.replace("return 2", "return 1")
    root, trees = build(tmp_path, monkeypatch, source)
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "    return 1", "    return 10")
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_multiedit_first_edit_moves_text_second_changes_beta(world):
    root, trees = world
    fork_pair(root, trees)
    answer = claude(
        trees["wa"],
        "A",
        "MultiEdit",
        {
            "file_path": os.path.join(trees["wa"], "src", "a.py"),
            "edits": [
                {"old_string": "    return 1", "new_string": "    return 1  # X"},
                {"old_string": "    return 2", "new_string": "    return 666"},
            ],
        },
    )
    assert denied(answer, "lease-claimed-declaration"), said(answer)


# -- Codex apply_patch parsing differences --------------------------------------------------------


def test_codex_indented_update_header_is_still_graded(world):
    # Codex trims a hunk header line (parse_one_hunk: lines[0].trim()); proctor's parser does not
    root, trees = world
    fork_pair(root, trees)
    patch = (
        "*** Begin Patch\n *** Update File: src/a.py\n@@ def beta():\n-    return 2\n+    return 666\n*** End Patch\n"
    )
    answer = codex_patch(trees["wa"], "A", patch)
    assert denied(answer), said(answer)


def test_codex_chunk_after_end_of_file_marker_is_graded(world):
    # Codex keeps parsing chunks of the same file after `*** End of File`; a pure addition is
    # appended to the end of the file, i.e. into gamma, which B claims
    root, trees = world
    fork_pair(root, trees, b_claim="src/a.py#def gamma")
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n def gamma():\n     return 3\n*** End of File\n"
        "@@\n+    os.system('evil')\n*** End Patch\n"
    )
    answer = codex_patch(trees["wa"], "A", patch)
    assert denied(answer, "lease-claimed-declaration"), said(answer)


@pytest.mark.parametrize("brk", ["\x0c", "\r", "\u2028"])
def test_codex_line_with_non_newline_break_does_not_hide_later_chunk(world, brk):
    # Rust's str::lines splits on \n only; Python's splitlines also on \f, \r, \u2028 ...: a
    # '+' line holding "<brk>*** x" ends the file for proctor, but not for Codex
    root, trees = world
    fork_pair(root, trees)
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@ def alpha():\n-    return 1\n"
        f"+    return 1  # {brk}*** x\n@@ def beta():\n-    return 2\n+    return 666\n*** End Patch\n"
    )
    answer = codex_patch(trees["wa"], "A", patch)
    assert denied(answer), said(answer)


FUZZY = """import os


def alpha():
    x = 1
    return x


def beta():
    x = 1 
    return x
"""


def test_codex_fuzzy_match_after_context_lands_in_beta(tmp_path, monkeypatch):
    # Codex seeks `@@ def beta():` first, then matches the old lines ignoring trailing
    # whitespace: the change lands in beta, while an exact in-memory replace lands in alpha
    root, trees = build(tmp_path, monkeypatch, FUZZY)
    fork_pair(root, trees)
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@ def beta():\n-    x = 1\n-    return x\n"
        "+    return 666\n*** End Patch\n"
    )
    answer = codex_patch(trees["wa"], "A", patch)
    assert denied(answer), said(answer)


def test_codex_add_file_over_existing_and_move_are_refused(world):
    root, trees = world
    fork_pair(root, trees)
    add = "*** Begin Patch\n*** Add File: src/a.py\n+x = 1\n*** End Patch\n"
    assert denied(codex_patch(trees["wa"], "A", add)), "Add File over a claimed file"
    move = (
        "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/z.py\n@@\n-    return 1\n"
        "+    return 10\n*** End Patch\n"
    )
    assert denied(codex_patch(trees["wa"], "A", move)), "Move to"


def test_codex_honest_alpha_edit_passes(world):
    root, trees = world
    fork_pair(root, trees)
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-    return 1\n+    return 10\n*** End Patch\n"
    answer = codex_patch(trees["wa"], "A", patch)
    assert not denied(answer), said(answer)


# -- paths ---------------------------------------------------------------------------------------


def test_edit_through_differently_named_symlink_is_refused(tmp_path, monkeypatch):
    root, trees = build(tmp_path, monkeypatch)
    wa = trees["wa"]
    os.symlink("a.py", os.path.join(wa, "src", "link.txt"))
    fork_pair(root, trees)
    answer = edit(wa, "A", "    return 2", "    return 666", path=os.path.join(wa, "src", "link.txt"))
    assert denied(answer), said(answer)


@pytest.mark.parametrize("spelling", ["./src/a.py", "src//a.py", "src/../src/a.py"])
def test_edit_with_odd_relative_spelling_is_refused(world, spelling):
    root, trees = world
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "    return 2", "    return 666", path=spelling)
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_edit_through_main_checkout_is_refused(world):
    root, trees = world
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "    return 2", "    return 666", path=os.path.join(root, "src", "a.py"))
    assert denied(answer), said(answer)


def test_shell_write_to_claimed_file_is_refused(world):
    root, trees = world
    fork_pair(root, trees)
    answer = claude(trees["wa"], "A", "Bash", {"command": "sed -i 's/return 2/return 666/' src/a.py"})
    assert denied(answer), said(answer)
    answer = claude(
        trees["wa"],
        "A",
        "Write",
        {"file_path": os.path.join(trees["wa"], "src", "a.py"), "content": SOURCE.replace("return 2", "return 666")},
    )
    assert denied(answer, "lease-claimed-declaration"), said(answer)


# -- CRLF, no trailing newline, tabs, unicode ---------------------------------------------------------


def test_crlf_file_guard_and_wait(tmp_path, monkeypatch):
    root, trees = build(tmp_path, monkeypatch, SOURCE.replace("\n", "\r\n"))
    fork_pair(root, trees)
    wa = trees["wa"]
    assert denied(edit(wa, "A", "    return 2", "    return 666"), "lease-claimed-declaration")
    answer = edit(wa, "A", "    return 1\r\n", "    return 10\r\n")
    assert not denied(answer), said(answer)
    replace(wa, "    return 1\r\n", "    return 10\r\n")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "pass", failing(waited)


def test_crlf_file_wait_fails_beta_touch(tmp_path, monkeypatch):
    root, trees = build(tmp_path, monkeypatch, SOURCE.replace("\n", "\r\n"))
    fork_pair(root, trees)
    replace(trees["wa"], "    return 2\r\n", "    return 666\r\n")
    waited = finish("A", trees["wa"])
    assert waited["job"]["state"] == "fail"


def test_no_trailing_newline_beta_last(tmp_path, monkeypatch):
    source = SOURCE.replace("def gamma():\n    return 3\n", "").rstrip("\n")
    root, trees = build(tmp_path, monkeypatch, source)
    fork_pair(root, trees)
    wa = trees["wa"]
    assert denied(edit(wa, "A", "    return 2", "    return 2\n    evil()"), "lease-claimed-declaration")
    replace(wa, "    return 2", "    return 2\n    evil()\n")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "fail"


def test_tab_indented_and_unicode_declarations(tmp_path, monkeypatch):
    source = "import os\n\n\ndef alpha():\n\treturn 1\n\n\ndef bêta():\n\treturn 'é'\n"
    root, trees = build(tmp_path, monkeypatch, source)
    fork_pair(root, trees, b_claim="src/a.py#bêta")
    wa = trees["wa"]
    assert denied(edit(wa, "A", "\treturn 'é'", "\treturn 'x'"), "lease-claimed-declaration")
    assert not denied(edit(wa, "A", "\treturn 1", "\treturn 10"))
    replace(wa, "\treturn 1", "\treturn 10")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "pass", failing(waited)


# -- methods, classes, several matches -----------------------------------------------------------------

CLASSES = """class Alpha:
    def run(self):
        return 1


class Beta:
    def beta(self):
        return 2

    def other(self):
        return 3
"""


def test_method_claims(tmp_path, monkeypatch):
    root, trees = build(tmp_path, monkeypatch, CLASSES)
    fork_pair(root, trees, a_paths=("src/a.py#class Alpha", "src/a.py#def run"))
    wa = trees["wa"]
    assert denied(edit(wa, "A", "        return 2", "        return 666"), "lease-claimed-declaration")
    assert not denied(edit(wa, "A", "        return 1", "        return 10"))
    # a class attribute inserted in class Beta before its first method lands in "class Beta"
    # (no claim) for the guard, but in wait it is outside A's claims
    replace(wa, "        return 1", "        return 10")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "pass", failing(waited)


# -- the holder changing how declarations are read ------------------------------------------------


def test_wait_fails_beta_touch_hidden_by_info_attributes(world):
    root, trees = world
    fork_pair(root, trees)
    common = git(trees["wa"], "rev-parse", "--git-common-dir").strip()
    common = common if os.path.isabs(common) else os.path.join(trees["wa"], common)
    os.makedirs(os.path.join(common, "info"), exist_ok=True)
    with open(os.path.join(common, "info", "attributes"), "w") as handle:
        handle.write("*.py diff=tex\n")
    replace(trees["wa"], "    return 2", "    return 666")
    waited = finish("A", trees["wa"])
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


def test_wait_fails_beta_touch_hidden_by_xfuncname_config(world):
    root, trees = world
    fork_pair(root, trees)
    git(trees["wa"], "config", "diff.python.xfuncname", "^zzz")
    replace(trees["wa"], "    return 2", "    return 666")
    waited = finish("A", trees["wa"])
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


def test_guard_refuses_beta_edit_after_xfuncname_config(world):
    root, trees = world
    fork_pair(root, trees)
    git(trees["wa"], "config", "diff.python.xfuncname", "^zzz")
    answer = edit(trees["wa"], "A", "    return 2", "    return 666")
    assert denied(answer), said(answer)


def test_wait_fails_beta_touch_hidden_by_own_gitattributes(world):
    root, trees = world
    fork_pair(root, trees, a_paths=("src/a.py#alpha", ".gitattributes"))
    with open(os.path.join(trees["wa"], ".gitattributes"), "w") as handle:
        handle.write("*.py diff=tex\n")
    replace(trees["wa"], "    return 2", "    return 666")
    waited = finish("A", trees["wa"], changed=("src/a.py", ".gitattributes"))
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


def test_wait_fails_beta_touch_with_own_gitattributes_unset_diff(world):
    root, trees = world
    fork_pair(root, trees, a_paths=("src/a.py#alpha", ".gitattributes"))
    with open(os.path.join(trees["wa"], ".gitattributes"), "w") as handle:
        handle.write("*.py -diff\n")
    replace(trees["wa"], "    return 2", "    return 666")
    waited = finish("A", trees["wa"], changed=("src/a.py", ".gitattributes"))
    assert waited["job"]["state"] == "fail"


# -- honest holders ---------------------------------------------------------------------------


def test_honest_edit_of_alpha_def_line_passes_guard_and_wait(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    answer = edit(wa, "A", "def alpha():", "def alpha(x=0):")
    assert not denied(answer), said(answer)
    replace(wa, "def alpha():", "def alpha(x=0):")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "pass", failing(waited)


def test_honest_decorator_on_alpha_passes(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    answer = edit(wa, "A", "\n\ndef alpha():", "\n\n@staticmethod\ndef alpha():")
    assert not denied(answer), said(answer)
    replace(wa, "\n\ndef alpha():", "\n\n@staticmethod\ndef alpha():")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "pass", failing(waited)


def test_honest_appending_lines_at_end_of_alpha_passes(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    old, new = "    return 1\n", "    x = 1\n    return 1\n"
    assert not denied(edit(wa, "A", old, new))
    replace(wa, old, new)
    waited = finish("A", wa)
    assert waited["job"]["state"] == "pass", failing(waited)


def test_placement_units():
    rules = declarations.configured({}, "python")
    decls = declarations.declarations(SOURCE.encode(), rules)
    assert [(d.text, d.start, d.end) for d in decls] == [
        ("def alpha():", 5, 8),
        ("def beta():", 9, 12),
        ("def gamma():", 13, 14),
    ]
    # a claim that names a run across a word boundary only
    assert not declarations.names("alpha", "def alphabet():")
    assert declarations.names("alpha", "def alpha():")


# -- opencode's edit tool, and a job not yet taken ------------------------------------------------


def opencode_edit(tree: str, lease: str, old: str, new: str) -> dict:
    return hook(
        "opencode",
        {
            "session_id": "s-" + lease,
            "cwd": tree,
            "hook_event_name": "PreToolUse",
            "tool_name": "edit",
            "tool_input": {"filePath": os.path.join(tree, "src", "a.py"), "oldString": old, "newString": new},
        },
        lease,
    )


def test_opencode_edit_into_beta_is_refused(world):
    root, trees = world
    fork_pair(root, trees)
    answer = opencode_edit(trees["wa"], "A", "    return 2", "    return 666")
    assert denied(answer, "lease-claimed-declaration"), said(answer)
    assert not denied(opencode_edit(trees["wa"], "A", "    return 1", "    return 10"))


AMBIGUOUS = """import os


def alpha():
    x = 1
    return x
    x = 1
    return x


def beta():
    if True:
        x = 1
        return x
"""


def test_opencode_ambiguous_exact_match_falls_back_to_fuzzy_match_in_beta(tmp_path, monkeypatch):
    # opencode's replace(): an oldString found more than once exactly is skipped, and its
    # LineTrimmedReplacer then finds the one (differently indented) block in beta
    root, trees = build(tmp_path, monkeypatch, AMBIGUOUS)
    fork_pair(root, trees)
    answer = opencode_edit(trees["wa"], "A", "    x = 1\n    return x", "    return 666")
    assert denied(answer), said(answer)


def test_guard_protects_a_forked_job_not_yet_taken(world):
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/a.py#def beta"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    answer = edit(trees["wa"], "A", "    return 2", "    return 666")
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_honest_new_file_claimed_by_declaration_passes(world):
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/n.py#alpha"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    with open(os.path.join(trees["wa"], "src", "n.py"), "w") as handle:
        handle.write("import os\n\n\ndef alpha():\n    return 1\n")
    waited = finish("A", trees["wa"], changed=("src/n.py",))
    assert waited["job"]["state"] == "pass", failing(waited)


def test_honest_edit_with_context_reaching_into_beta_passes(world):
    root, trees = world
    fork_pair(root, trees)
    answer = edit(
        trees["wa"], "A", "    return 1\n\n\ndef beta():\n    return 2", "    return 10\n\n\ndef beta():\n    return 2"
    )
    assert not denied(answer), said(answer)


# -- large files, language-level tricks, JavaScript ------------------------------------------------


def test_honest_multiedit_far_apart_in_large_file_passes(tmp_path, monkeypatch):
    # alpha at the top, omega at the bottom, beta's long body between: one MultiEdit of both of
    # A's own declarations must not be read as a change of everything between them
    body = "".join(f"    x{i} = {i}\n" for i in range(2600))
    source = (
        "import os\n\n\ndef alpha():\n    return 1\n\n\ndef beta():\n" + body + "    return 2\n\n\n"
        "def omega():\n    return 9\n"
    )
    root, trees = build(tmp_path, monkeypatch, source)
    fork_pair(root, trees, a_paths=("src/a.py#alpha", "src/a.py#omega"))
    answer = claude(
        trees["wa"],
        "A",
        "MultiEdit",
        {
            "file_path": os.path.join(trees["wa"], "src", "a.py"),
            "edits": [
                {"old_string": "    return 1\n", "new_string": "    y = 0\n    return 10\n"},
                {"old_string": "    return 9\n", "new_string": "    return 90\n"},
            ],
        },
    )
    assert not denied(answer), said(answer)


SWALLOW = """import os


def beta():
    return 2


def alpha():
    return 1
"""


def test_wait_fails_string_opened_above_first_declaration_swallowing_beta(tmp_path, monkeypatch):
    # lines above the first declaration are nobody's, a comment directly above alpha is alpha's:
    # a string opened above beta and closed by "# '''" above alpha erases beta without a line of
    # beta's span changing
    root, trees = build(tmp_path, monkeypatch, SWALLOW)
    fork_pair(root, trees)
    wa = trees["wa"]
    assert not denied(edit(wa, "A", "import os\n", "import os\n_ = '''\n"))
    replace(wa, "import os\n", "import os\n_ = '''\n")
    replace(wa, "\ndef alpha():", "\n# '''\ndef alpha():")
    waited = finish("A", wa)
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


JS = """import fs from "fs";

function alpha() {
  return 1;
}

function beta() {
  return 2;
}
"""


def test_javascript_claims(tmp_path, monkeypatch):
    root, trees = build(tmp_path, monkeypatch, JS, name="a.js")
    wa, wb = trees["wa"], trees["wb"]
    api.fork({"id": "A", "write_paths": ["src/a.js#alpha"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/a.js#function beta"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=wa, environ={})
    api.exec_job("B", cwd=wb, environ={})
    path = os.path.join(wa, "src", "a.js")
    assert denied(edit(wa, "A", "  return 2;", "  return 666;", path=path), "lease-claimed-declaration")
    # a call whose callback opens on the line reads as a method declaration named alpha
    answer = edit(wa, "A", "  return 2;", "  alpha(fs.rmSync('/x'), function () {\n  });\n  return 2;", path=path)
    assert denied(answer, "lease-claimed-declaration"), said(answer)
