"""proctor/guard/rules/lease_write_scope.py: lease-write-scope, a leased write outside the lease's write paths or inside its deny paths."""

from __future__ import annotations

import os

from tests.hook.world import LEASED, advised, denied, event, reason


def test_write_scope_and_deny_paths(ws, hook):
    assert denied(hook(event(ws, "Bash", {"command": "cp src/a.py README"}), env=LEASED), "lease-write-scope")
    secret = hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/gen/secret.py")}), env=LEASED)
    assert denied(secret, "lease-write-scope") and "inside the deny paths" in reason(secret)
    assert hook(event(ws, "Write", {"file_path": os.path.join(ws, "src/gen/x/y.py")}), env=LEASED) == {}
    assert hook(event(ws, "Bash", {"command": "echo '> README' && cat README"}), env=LEASED) == {}
    unknown = hook(event(ws, "Bash", {"command": "rm -rf $TARGET"}), env=LEASED)
    assert advised(unknown, "lease-write-scope")
    outside_repo = hook(event(ws, "Bash", {"command": "echo x > /tmp/scratch.txt"}), env=LEASED)
    assert outside_repo == {}, "paths outside the repository are not judged"


def test_symlinked_write_is_judged_where_it_leads(ws, hook):
    os.symlink("b.py", os.path.join(ws, "src", "a.py"))
    answer = hook(event(ws, "Bash", {"command": "echo pwned > src/a.py"}), env=LEASED)
    assert denied(answer, "lease-write-scope") and "src/b.py" in reason(answer)
