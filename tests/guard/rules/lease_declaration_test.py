"""proctor/guard/rules/lease_declaration.py: lease-claimed-declaration, a leased edit landing in a declaration another live job claims."""

from __future__ import annotations

import os

import pytest

from proctor import api
from tests.hook.world import denied, event, reason
from tests.support import git, make_repo

SOURCE = "import os\n\n\ndef alpha():\n    return 1\n\n\ndef beta():\n    return 2\n"


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """src/a.py committed; job A claims its declaration alpha, job B its declaration beta."""
    root = make_repo(tmp_path / "repo", "[targets.test]\ncommand = 'true'\n")
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "src", "a.py"), "w") as handle:
        handle.write(SOURCE)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "src")
    monkeypatch.chdir(root)
    api.fork({"id": "A", "write_paths": ["src/a.py#alpha"], "check": "test"}, cwd=root)
    api.fork({"id": "B", "write_paths": ["src/a.py#def beta"], "check": "test"}, cwd=root)
    return os.path.realpath(root)


def by_a(hook, root, tool, tool_input):
    tool_input = {"file_path": os.path.join(root, "src", "a.py"), **tool_input}
    return hook(event(root, tool, tool_input), env={"BAGGAGE": "proctor.lease=A"})


def test_an_edit_in_the_other_jobs_declaration_is_refused(pair, hook):
    answer = by_a(hook, pair, "Edit", {"old_string": "    return 2", "new_string": "    return 20"})
    assert denied(answer, "lease-claimed-declaration"), answer
    assert "'def beta():'" in reason(answer) and "which B claims (src/a.py#def beta)" in reason(answer)
    # one edit of a list landing in beta refuses the whole call
    pairs = [("    return 1", "    return 10"), ("    return 2", "    return 20")]
    many = by_a(hook, pair, "MultiEdit", {"edits": [{"old_string": o, "new_string": n} for o, n in pairs]})
    assert denied(many, "lease-claimed-declaration"), many


def test_a_whole_file_write_is_graded_by_the_path_the_other_job_holds(pair, hook):
    answer = by_a(hook, pair, "Write", {"content": "x = 1\n"})
    assert denied(answer, "lease-claimed-declaration"), answer
    assert "carries no edit proctor can place" in reason(answer)


def test_an_edit_in_its_own_declaration_or_above_the_first_passes(pair, hook):
    assert by_a(hook, pair, "Edit", {"old_string": "    return 1", "new_string": "    return 10"}) == {}
    assert by_a(hook, pair, "Edit", {"old_string": "import os", "new_string": "import sys"}) == {}
    # B's own declaration is B's to edit
    own = event(
        pair,
        "Edit",
        {"file_path": os.path.join(pair, "src", "a.py"), "old_string": "    return 2", "new_string": "    return 20"},
    )
    assert hook(own, env={"BAGGAGE": "proctor.lease=B"}) == {}
