"""A holder "shrinks its own write paths, changing nothing else of its row", and
jobrecord.one_author compares only the fields a record names with the row. A proctor that sees
no lease (the hook's lease is --lease here, and the shell has no BAGGAGE) takes the same record
as the forking session's full replacement, where an absent field is cleared: `proctor job fork
w1 --write-paths 'plan/w1/**' --check test` would drop w1's deny_paths, read_paths and
deadline, and `proctor job fork w1 --check test` its write paths. The guard therefore refuses a
holder's fork of its own row in a checkout not bound to its job (take it there first). Each
command is put through the hook and then run for real, and the row read back. Found by an
adversarial review."""

from __future__ import annotations

from proctor import api
from tests.guard.guard_lease import denied, job_row, proctor_path, said, ws  # noqa: F401 (fixtures)
from tests.guard.test_guard_adversary import bash, run


def test_a_restated_own_row_keeps_what_it_does_not_name(ws, tmp_path):  # noqa: F811
    # the forking session narrows w1: a deny path, explicit reads, a deadline
    api.fork(
        {
            "id": "w1",
            "write_paths": ["plan/w1/**"],
            "deny_paths": ["plan/w1/secret.py"],
            "read_paths": ["plan/w1"],
            "timeout": "1h",
            "check": "test",
        },
        cwd=ws,
    )
    before = job_row(ws, "w1")
    assert before["deny_paths"] == ["plan/w1/secret.py"] and before["deadline"]
    command = "proctor job fork w1 --write-paths 'plan/w1/**' --check test"
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    after = job_row(ws, "w1")
    lost = {
        k: (before.get(k), after.get(k))
        for k in ("deny_paths", "read_paths", "timeout", "deadline")
        if before.get(k) != after.get(k)
    }
    assert denied(answer, "lease-store") or not lost, (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode}; w1 lost {lost}"
    )


def test_a_restatement_that_names_no_write_paths_does_not_empty_them(ws, tmp_path):  # noqa: F811
    """`proctor job fork w1 --check test`: no field changed as the guard reads it (write_paths is
    not named, so neither "empty" nor "widens" is found); as a full replacement it leaves w1, a
    root job, with NO write paths, "no boundary at all", and its holder then writes docs/."""
    assert denied(bash(ws, "echo x > docs/c.md"), "lease-write-scope") or denied(bash(ws, "echo x > docs/c.md"))
    command = "proctor job fork w1 --check test"
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    after = job_row(ws, "w1")
    write_after = bash(ws, "echo x > docs/c.md")
    assert denied(answer, "lease-store"), (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode} {ran.stderr[-200:]}; w1's "
        f"write_paths now {after.get('write_paths')}; its holder's write of docs/c.md: {said(write_after)}"
    )
