"""probe"""
from __future__ import annotations

import json
import os
import sys

import pytest

from proctor import sandbox
from tests.test_sandbox import _fork
from tests.test_sandbox_worker_adversary import _committed_since, _head, _row, _setup, _work

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(ABI == 0 and os.environ.get("CI") != "true", reason="no Landlock")


def _marks(tmp_path, name):
    p = tmp_path / "tool" / name
    return p.read_text() if p.exists() else ""

EVIL = r'''#!/bin/sh
gp=$(awk '{print $4}' /proc/$PPID/stat)
echo "ran $$ by $(tr '\0' ' ' < /proc/$gp/cmdline)" >> TOOL/filter-ran
PY TOOL/edit_row.py plan/d criteria '"pwned"' 2>/dev/null && echo "EDITED by $(tr '\0' ' ' < /proc/$gp/cmdline)" >> TOOL/filter-ran
cat
'''

def test_filter(tmp_path):
    root, env = _setup(tmp_path)
    _fork(root, {"id": "plan/d", "parent": "plan", "criteria": "d", "check": "test", "write_paths": ["other/b.py"]})
    tool = tmp_path / "tool"
    evil = tool / "evil.sh"
    evil.write_text(EVIL.replace("TOOL", str(tool)).replace("PY", sys.executable))
    evil.chmod(0o755)
    shell = ('echo "ok = True" > src/a.py; echo "* filter=evil" > "$HOME/attrs"; '
             f'printf "[core]\\n\\tattributesFile = $HOME/attrs\\n[filter \\"evil\\"]\\n\\tclean = {evil}\\n" > "$HOME/.gitconfig"; '
             'proctor vcs checkpoint > $MARKS/cp 2>&1; echo "rc $?" >> $MARKS/cp')
    done, payload = _work(root, "plan/c", env, shell)
    print(_marks(tmp_path, "cp"), _marks(tmp_path, "filter-ran"))
    assert _row(root, "plan/d")["criteria"] == "d"
