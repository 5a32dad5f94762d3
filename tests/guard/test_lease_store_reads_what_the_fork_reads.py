"""lease-store judges a `proctor job fork --stdin` record by what that fork itself reads on
standard input: its own here-document or here-string, when nothing in it expands
(shell.Writes.stdins). It used to judge "the command's one here-document" as written: an
unquoted one that bash expands (<<EOF with $(...)), another command's (`cat >/dev/null <<'EOF'
...; echo ... | proctor job fork --stdin`) and one a later here-string overrides (`<<'EOF'
<<<'...'`) each let the fork read a record the guard never saw. A read path is read as the
store reads it (split at `#` first). Each command is put through the hook and then run for
real, as a worker whose shell carries no BAGGAGE, and the row the store keeps is read back.
Found by an adversarial review."""

from __future__ import annotations

import pytest

from tests.guard.guard_lease import denied, job_row, proctor_path, said, ws  # noqa: F401 (fixtures)
from tests.guard.test_guard_adversary import bash, run

BENIGN = '{"id": "w1/esc", "parent": "w1", "write_paths": ["plan/w1/x.py"], "check": "test"}'
EVIL = '{"id": "w1/esc", "parent": "w1", "write_paths": ["docs/**"], "check": "test"}'

COMMANDS = {
    # an unquoted here-document: the guard reads plan/w1/$(echo ..)/../docs/** as plan/w1/docs/**,
    # bash hands proctor plan/w1/../../docs/**, which the store reads as docs/**
    "unquoted-heredoc": (
        "proctor job fork --stdin <<EOF\n"
        '{"id": "w1/esc", "parent": "w1", "write_paths": ["plan/w1/$(echo ..)/../docs/**"], "check": "test"}\n'
        "EOF"
    ),
    # the one heredoc belongs to cat; the fork reads the pipe
    "heredoc-of-another-command": f"cat >/dev/null <<'EOF'\n{BENIGN}\nEOF\necho '{EVIL}' | proctor job fork --stdin",
    # the fork's own heredoc, then a here-string after it: the last redirection of stdin wins
    "here-string-after-heredoc": f"proctor job fork --stdin <<'EOF' <<<'{EVIL}'\n{BENIGN}\nEOF",
}


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_guard_judges_the_record_the_fork_reads(ws, tmp_path, name):  # noqa: F811
    command = COMMANDS[name]
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    kept = job_row(ws, "w1/esc")["write_paths"] if ran.returncode == 0 else None
    assert denied(answer, "lease-store"), (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode} {ran.stderr[-300:]}; "
        f"w1/esc's stored write_paths: {kept}"
    )


def test_the_guard_reads_a_read_path_as_the_store_does(ws, tmp_path):  # noqa: F811
    """The guard used to normalise a read entry whole (`src#x/../plan/w1/y` -> plan/w1/y,
    inside w1's boundary); the store splits it at # first (claims.split_entry: the path `src`,
    a "declaration" x/../plan/w1/y), and a read boundary of `src` covers all of src/."""
    command = (
        "proctor job fork w1/esc --parent w1 --write-paths plan/w1/x.py --check test --read-paths 'src#x/../plan/w1/y'"
    )
    answer = bash(ws, command)
    ran = run(ws, command, env={"PATH": proctor_path(tmp_path)})  # a worker bound by its session alone
    kept = job_row(ws, "w1/esc").get("read_paths") if ran.returncode == 0 else None
    from proctor.store import rows

    boundary = rows.read_boundary(job_row(ws, "w1/esc"), lambda j: None) if ran.returncode == 0 else None
    peek = None
    if ran.returncode == 0:
        from proctor import api
        from tests.guard.test_read_only_child_boundary import read_event
        from tests.support import call_hook

        api.exec_job("w1/esc", cwd=ws, lease="w1/esc")
        peek = said(call_hook(read_event(ws, "src/b.py"), "claude", None, ["--lease", "w1/esc"], drop=("BAGGAGE",)))
    assert denied(answer, "lease-store"), (
        f"guard passed it ({said(answer)}); run for real: exit {ran.returncode} {ran.stderr[-300:]}; "
        f"w1/esc's stored read_paths: {kept}, its read boundary {boundary}; its holder's Read of src/b.py: {peek}"
    )
