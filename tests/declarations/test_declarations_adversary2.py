"""Second adversarial round on declaration claims. Each test asserts the secure / correct
behaviour, so a failing test is a finding."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from proctor import api, errors
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


def gemini_replace(tree, lease, old, new, path=None):
    return hook(
        "gemini",
        {
            "session_id": "s-" + lease,
            "transcript_path": "/tmp/none.json",
            "cwd": tree,
            "hook_event_name": "BeforeTool",
            "tool_name": "replace",
            "tool_input": {
                "file_path": path or os.path.join(tree, "src", "a.py"),
                "old_string": old,
                "new_string": new,
            },
        },
        lease,
    )


def opencode(tree, lease, tool, tool_input):
    return hook(
        "opencode",
        {
            "session_id": "s-" + lease,
            "cwd": tree,
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
        },
        lease,
    )


class Timeout(Exception):
    pass


def within(seconds, fn, *args, **kwargs):
    """fn(*args) or Timeout after `seconds` (an alarm interrupts a blocking open or read)."""

    def alarm(_signum, _frame):
        raise Timeout(f"still running after {seconds}s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        return fn(*args, **kwargs)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# -- (a) a holder of alpha reaching beta ----------------------------------------------------------


def test_hard_link_alias_of_claimed_file_is_not_an_unguarded_way_into_beta(world):
    # a hard link is the same inode under another name: the symlink resolution the guard does
    # (realpath) does not see it. Either making the link or editing through it must be refused.
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    made = claude(wa, "A", "Bash", {"command": "ln src/a.py src/h.py"})
    os.link(os.path.join(wa, "src", "a.py"), os.path.join(wa, "src", "h.py"))
    through = edit(wa, "A", "    return 2", "    return 666", path=os.path.join(wa, "src", "h.py"))
    assert denied(made) or denied(through), (said(made), said(through))


def test_own_declaration_line_rewritten_so_the_other_claim_names_it_is_refused(world):
    # B claims `beta`; A rewrites its own `def alpha():` into `def alpha(beta=None):`, a line B's
    # claim names: from then on both jobs hold that declaration (what fork refuses as PRC3032)
    root, trees = world
    fork_pair(root, trees, b_claim="src/a.py#beta")
    answer = edit(trees["wa"], "A", "def alpha():", "def alpha(beta=None):")
    assert denied(answer, "lease-claimed-declaration"), said(answer)


def test_gemini_replace_into_beta_is_refused_and_alpha_passes(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    answer = gemini_replace(wa, "A", "    return 2", "    return 666")
    assert denied(answer), answer
    answer = gemini_replace(wa, "A", "    return 1", "    return 10")
    assert not denied(answer), answer


def test_opencode_multiedit_items_naming_another_file_still_graded(world):
    # opencode's multiedit applies every item to the top-level filePath
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    answer = opencode(
        wa,
        "A",
        "multiedit",
        {
            "filePath": os.path.join(wa, "src", "a.py"),
            "edits": [
                {
                    "filePath": os.path.join(wa, "src", "other.py"),
                    "oldString": "    return 2",
                    "newString": "    return 666",
                }
            ],
        },
    )
    assert denied(answer), answer


def test_codex_patch_two_sections_one_file_second_hits_beta(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n@@\n-    return 1\n+    return 10\n"
        f"*** Update File: {os.path.join(wa, 'src', 'a.py')}\n@@\n-    return 2\n+    return 666\n*** End Patch\n"
    )
    answer = hook(
        "codex",
        {
            "session_id": "s-A",
            "turn_id": "t1",
            "transcript_path": None,
            "cwd": wa,
            "hook_event_name": "PreToolUse",
            "model": "gpt-5",
            "permission_mode": "default",
            "tool_name": "apply_patch",
            "tool_use_id": "call_9",
            "tool_input": {"command": patch},
        },
        "A",
    )
    assert denied(answer), answer


# -- (b) an honest holder --------------------------------------------------------------------------

TWIN = """import os


def alpha():
    if os.sep:
        return None
    return 1


def beta():
    return None
"""


def test_honest_unique_exact_edit_with_a_differently_indented_twin_in_beta_passes(tmp_path, monkeypatch):
    # `        return None` occurs exactly once (in alpha); Claude Code, opencode and Gemini apply a
    # unique exact match where it is. beta's `    return None` is only a whitespace-folded twin.
    root, trees = build(tmp_path, monkeypatch, TWIN)
    fork_pair(root, trees)
    answer = edit(trees["wa"], "A", "        return None", "        return 0")
    assert not denied(answer), said(answer)


def test_honest_edit_of_unclaimed_gamma_and_imports_passes_all_hosts(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    assert not denied(gemini_replace(wa, "A", "import sys", "import sys  # s"))
    assert not denied(
        opencode(
            wa,
            "A",
            "edit",
            {"filePath": os.path.join(wa, "src", "a.py"), "oldString": "    return 3", "newString": "    return 30"},
        )
    )


# -- (c) overlaps, refusals, releases ----------------------------------------------------------------


def test_two_spellings_of_a_declaration_not_yet_written_overlap(world, proctor):
    # `delta` and `def delta` name one declaration whenever it is written (names("delta",
    # "def delta():") holds): the same answer as for `alpha` / `def alpha():`
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/a.py#delta"], "check": "test"}, cwd=root)
    api.fork({"id": "S", "write_paths": ["src/a.py#def delta"], "check": "test"}, cwd=root)
    listed = json.loads(proctor("ls", "jobs", "-o", "json", cwd=root).out)
    kinds = {tuple(p["jobs"]): p["claims"] for p in listed["overlaps"]}
    assert kinds.get(("A", "S")) == "overlapping", kinds


def test_a_second_checkout_claiming_a_future_declaration_is_refused(world):
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/a.py#delta"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    with pytest.raises(errors.Refused):
        api.fork({"id": "C", "write_paths": ["src/a.py#def delta"], "check": "test"}, cwd=root)


def test_release_digest_ignores_changes_outside_and_sees_changes_inside(world):
    from proctor.claims import Claim
    from proctor.jobs.fork import release_digest

    root, trees = world
    wb = trees["wb"]
    before = release_digest(wb, Claim("src/a.py", "def beta"))
    replace(wb, "    return 1", "    return 10")
    replace(wb, "import sys\n", "import sys\nimport json\n")
    assert release_digest(wb, Claim("src/a.py", "def beta")) == before
    replace(wb, "    return 2\n", "    return 2\n    # trailing note\n")
    assert release_digest(wb, Claim("src/a.py", "def beta")) != before


# -- (d) hostile input: no traceback, no hang -------------------------------------------------------


def test_config_pattern_python_cannot_compile_does_not_crash_fork(world):
    # git's RE_DUP_MAX is 32767; Python raises OverflowError (not re.error) past 2**32
    root, trees = world
    git(root, "config", "diff.python.xfuncname", "^def a{99999999999}")
    try:
        api.fork({"id": "A", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=root)
    except errors.ProctorError:
        pass  # a refusal is an answer; a traceback is not


OVERFLOW = "^def a{99999999999}"


def overflow_after_fork(world):
    root, trees = world
    fork_pair(root, trees)
    git(root, "config", "diff.python.xfuncname", OVERFLOW)  # .git/config: shared by every worktree
    return root, trees


def test_config_pattern_overflow_set_after_fork_does_not_crash_ls(world, proctor):
    root, _ = overflow_after_fork(world)
    listed = proctor("ls", "jobs", "-o", "json", cwd=root)
    assert "Traceback" not in listed.err and listed.code in (0, 1), listed.err


def test_config_pattern_overflow_set_after_fork_does_not_crash_describe(world, proctor):
    _, trees = overflow_after_fork(world)
    with open(os.path.join(trees["wa"], "src", "other.py"), "w") as handle:  # a file no recorded rules cover
        handle.write("def f():\n    return 1\n")
    described = proctor("describe", "job", "A", cwd=trees["wa"])
    assert "Traceback" not in described.err and described.code in (0, 1), described.err


def test_config_pattern_overflow_set_after_fork_does_not_crash_wait(world):
    _, trees = overflow_after_fork(world)
    wa = trees["wa"]
    replace(wa, "    return 1", "    return 10")
    with open(os.path.join(wa, "src", "other.py"), "w") as handle:
        handle.write("def f():\n    return 1\n")
    waited = finish("A", wa, changed=("src/a.py", "src/other.py"))
    assert waited["job"]["state"] in ("pass", "fail")


def test_config_pattern_overflow_set_after_fork_does_not_crash_release(world):
    root, trees = overflow_after_fork(world)
    api.fork({"id": "B", "write_paths": ["src/a.py#def beta", "src/b.py"], "check": "test"}, cwd=root)
    try:
        api.fork({"id": "B", "write_paths": ["src/b.py"]}, cwd=trees["wb"])  # releases src/a.py#def beta
    except errors.ProctorError:
        pass


def test_config_pattern_overflow_hook_on_a_file_with_no_recorded_rules_refuses(world):
    # two claims on a file not yet written record no patterns at fork: the guard reads git's
    # config, which the holder can set; the hook must answer (and refuse beta), not crash or pass
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/n.py#alpha"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/n.py#beta"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    api.exec_job("B", cwd=trees["wb"], environ={})
    path = os.path.join(trees["wa"], "src", "n.py")
    with open(path, "w") as handle:
        handle.write("def alpha():\n    return 1\n\n\ndef beta():\n    return 2\n")
    git(root, "config", "diff.python.xfuncname", OVERFLOW)
    from proctor.hook import run as hook_run

    environ = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    environ["BAGGAGE"] = "proctor.lease=A"
    payload = {
        "session_id": "s-A",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": trees["wa"],
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_use_id": "toolu_9",
        "tool_input": {"file_path": path, "old_string": "    return 2", "new_string": "    return 666"},
    }
    out, code = hook_run(["claude"], json.dumps(payload).encode(), environ)
    assert code == 0 and denied(json.loads(out)), (code, out)


def test_config_pattern_overflow_does_not_crash_the_hook(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    git(root, "config", "diff.python.xfuncname", "^def a{99999999999}")
    from proctor.hook import run as hook_run

    environ = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    environ["BAGGAGE"] = "proctor.lease=A"
    payload = {
        "session_id": "s-A",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": wa,
        "hook_event_name": "PreToolUse",
        "tool_name": "Edit",
        "tool_use_id": "toolu_9",
        "tool_input": {
            "file_path": os.path.join(wa, "src", "a.py"),
            "old_string": "    return 2",
            "new_string": "    return 666",
        },
    }
    out, code = hook_run(["claude"], json.dumps(payload).encode(), environ)
    assert code == 0
    assert denied(json.loads(out)), out


@pytest.mark.parametrize(
    "claim",
    [
        "src/a.py#\\d+(",
        "src/a.py#é",
        "src/a.py#a\\b",
        "src/a.py#)(",
        "src/a.py#def\u00a0beta",
        "src/a.py#\U0001f600",
        "src/a.py/#alpha",
        "src/#alpha",
        "#alpha",
        "src/a.py##alpha",
        "src/a.py#alpha#beta",
        "src/a.py#alpha\n",
        "src/a.py#\x7f",
    ],
)
def test_odd_claim_spellings_do_not_crash_fork_ls_describe(world, proctor, claim):
    root, _ = world
    made = proctor("job", "fork", "X", "--write-paths", claim, "--check", "test", cwd=root)
    assert "Traceback" not in made.err and made.code in (0, 1), made.err
    listed = proctor("ls", "jobs", "-o", "json", cwd=root)
    assert "Traceback" not in listed.err and listed.code == 0, listed.err
    described = proctor("describe", "job", "X", cwd=root)
    assert "Traceback" not in described.err, described.err


@pytest.mark.parametrize("attribute", ["diff=a.b.c", "diff=\u00fcn\u00ef", "diff=x[", "diff=.."])
def test_weird_diff_driver_names_do_not_crash(tmp_path, monkeypatch, proctor, attribute):
    root, trees = build(tmp_path, monkeypatch, extra={".gitattributes": f"*.py {attribute}\n"})
    fork_pair(root, trees)
    assert "Traceback" not in proctor("ls", "jobs", "-o", "json", cwd=root).err
    answer = edit(trees["wa"], "A", "    return 2", "    return 666")
    assert denied(answer), answer
    replace(trees["wa"], "    return 1", "    return 10")
    assert "Traceback" not in proctor("describe", "job", "A", cwd=trees["wa"]).err


def test_wait_does_not_hang_on_claimed_file_replaced_by_fifo(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    path = os.path.join(wa, "src", "a.py")
    os.unlink(path)
    os.mkfifo(path)
    waited = within(20, finish, "A", wa)
    assert waited["job"]["state"] == "fail", waited["job"]


def test_wait_does_not_hang_on_claimed_file_symlinked_to_a_fifo_inside(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    path = os.path.join(wa, "src", "a.py")
    os.mkfifo(os.path.join(wa, "src", "pipe"))
    os.unlink(path)
    os.symlink("pipe", path)
    waited = within(8, finish, "A", wa)
    assert waited["job"]["state"] == "fail", waited["job"]


def test_hook_with_claimed_file_a_fifo_does_not_hang(world):
    root, trees = world
    fork_pair(root, trees)
    wa = trees["wa"]
    path = os.path.join(wa, "src", "a.py")
    os.unlink(path)
    os.mkfifo(path)
    answer = within(10, edit, wa, "A", "    return 2", "    return 666")
    assert denied(answer), answer


def test_untracked_new_file_claimed_by_two_jobs_crlf_and_odd_bytes(world):
    root, trees = world
    api.fork({"id": "A", "write_paths": ["src/n.py#alpha"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/n.py#beta"], "check": "test"}, cwd=root)
    api.exec_job("A", cwd=trees["wa"], environ={})
    api.exec_job("B", cwd=trees["wb"], environ={})
    path = os.path.join(trees["wa"], "src", "n.py")
    with open(path, "wb") as handle:
        handle.write(b"\xff\xfe\r\ndef alpha():\r\n    return '\xe9\x00'\r\n\r\ndef beta():\r\n    return 2\r\n")
    answer = edit(trees["wa"], "A", "    return 2", "    return 666", path=path)
    assert denied(answer), answer
    waited = finish("A", trees["wa"], changed=("src/n.py",))
    assert waited["job"]["state"] == "fail"  # it wrote beta too
    assert any("def beta():" in s for s in failing(waited)), failing(waited)


def test_huge_single_line_file_hook_and_wait_answer(tmp_path, monkeypatch):
    line = "x = '" + "a(" * 400_000 + "'\n"
    source = SOURCE.replace("def gamma():\n", line + "def gamma():\n")
    root, trees = build(tmp_path, monkeypatch, source)
    fork_pair(root, trees)
    start = time.perf_counter()
    answer = edit(trees["wa"], "A", "    return 2", "    return 666")
    spent = time.perf_counter() - start
    assert denied(answer), answer
    assert spent < 10, spent  # generous, for a loaded machine


# -- (e) time -----------------------------------------------------------------------------------------


def test_multiedit_with_many_small_edits_in_a_large_file_answers_quickly(tmp_path, monkeypatch):
    # an honest MultiEdit of 1,000 one-line edits, all in alpha, of a 20,000-line file: re-folding
    # every line of the file for each edit took 18 s; the bound is generous for a loaded machine
    body = "".join(f"    x{i} = {i}\n" for i in range(20_000))
    source = "import os\n\n\ndef alpha():\n" + body + "\n\ndef beta():\n    return 2\n"
    root, trees = build(tmp_path, monkeypatch, source)
    fork_pair(root, trees)
    wa = trees["wa"]
    edits = [{"old_string": f"    x{i} = {i}\n", "new_string": f"    x{i} = {i + 1}\n"} for i in range(0, 20_000, 20)]
    start = time.perf_counter()
    answer = claude(wa, "A", "MultiEdit", {"file_path": os.path.join(wa, "src", "a.py"), "edits": edits})
    spent = time.perf_counter() - start
    assert not denied(answer), said(answer)
    assert spent < 10, f"the hook took {spent:.1f}s"


SWALLOW_BY_CHANGE = """import os


def beta():
    return 2


# alpha's doc
def alpha():
    return 1
"""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "a known limit of claims by line: a string opened above the first declaration and closed in "
        "the holder's own doc comment turns another declaration into text without a line of it "
        "changing; lines are what git's driver and the spec name, and telling code from text needs "
        "the language's parser"
    ),
)
def test_wait_fails_string_opened_above_first_declaration_by_changing_lines_not_inserting(tmp_path, monkeypatch):
    # the first round's swallow, without an insertion for the old side to place in beta: an
    # existing import line (nobody's) opens a string, alpha's existing doc comment closes it
    # (`#'''` still starts with `#`, so it is still alpha's), and a module-level line in alpha's
    # span rebinds beta. No line of beta's span changes; beta's code is now a string.
    root, trees = build(tmp_path, monkeypatch, SWALLOW_BY_CHANGE)
    fork_pair(root, trees)
    wa = trees["wa"]
    replace(wa, "import os\n", "import os; _ = '''\n")
    replace(wa, "# alpha's doc\n", "#''' # alpha's doc\n")
    replace(wa, "    return 1\n", "    return 1\n\n\nbeta = lambda: 666\n")
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, 'src'); import a; print(a.beta())"],
        cwd=wa,
        capture_output=True,
        text=True,
    )
    assert ran.stdout.strip() == "666", ran.stderr  # beta's code is no longer beta's
    waited = finish("A", wa)
    assert waited["job"]["state"] == "fail", waited["grade"]["footprint"]


@pytest.mark.parametrize("whole", ["src/*.py", "src/**", "src/?.py"])
def test_a_glob_or_directory_claim_overlaps_a_declaration_claim_of_a_file_in_it(world, proctor, whole):
    root, _ = world
    api.fork({"id": "A", "write_paths": [whole], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/a.py#def beta"], "check": "test"}, cwd=root)
    listed = json.loads(proctor("ls", "jobs", "-o", "json", cwd=root).out)
    kinds = {tuple(p["jobs"]): p["claims"] for p in listed["overlaps"]}
    assert kinds.get(("A", "B")) == "overlapping", kinds


PATCH_INTO_BETA = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-    return 2\n+    return 666\n*** End Patch\n"


@pytest.mark.parametrize(
    "command",
    [
        f"apply_patch <<'EOF'\n{PATCH_INTO_BETA}EOF\n",
        f"apply_patch '{PATCH_INTO_BETA}'",
        f"cd src && apply_patch <<'EOF'\n{PATCH_INTO_BETA.replace('src/a.py', 'a.py')}EOF\n",
    ],
)
def test_apply_patch_through_the_shell_into_beta_is_refused(world, command):
    root, trees = world
    fork_pair(root, trees)
    answer = claude(trees["wa"], "A", "Bash", {"command": command})
    assert denied(answer), answer
    shell = hook(
        "codex",
        {
            "session_id": "s-A",
            "turn_id": "t1",
            "transcript_path": None,
            "cwd": trees["wa"],
            "hook_event_name": "PreToolUse",
            "model": "gpt-5",
            "permission_mode": "default",
            "tool_name": "shell",
            "tool_use_id": "call_8",
            "tool_input": {"command": ["bash", "-lc", command]},
        },
        "A",
    )
    assert denied(shell), shell
