"""proctor as a real process: the module entry point, exit codes, help, and JSON errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from proctor import __version__


def test_version_and_help(repo, proctor_process):
    version = proctor_process("--version", cwd=repo)
    assert version.code == 0 and version.out == f"proctor {__version__}\n"
    helped = proctor_process("--help", cwd=repo)
    assert helped.code == 0
    for group in ("init", "config", "vcs", "job", "ls", "describe"):
        assert group in helped.out
    for args in (
        ("job", "fork", "--help"),
        ("ls", "jobs", "--help"),
        ("vcs", "checkpoint", "--help"),
        ("config", "show", "--help"),
        ("describe", "job", "--help"),
    ):
        assert proctor_process(*args, cwd=repo).code == 0, args


def test_console_script_installed(repo):
    exe = shutil.which("proctor") or os.path.join(os.path.dirname(__import__("sys").executable), "proctor")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True, cwd=repo)
    assert proc.returncode == 0 and __version__ in proc.stdout


def test_round_trip_as_processes(repo, proctor_process):
    made = proctor_process(
        "job", "fork", "api/x", "--criteria", "c", "--write-paths", "a.py", "--check", "test", "-o", "json", cwd=repo
    )
    assert made.code == 0, made.err
    listed = proctor_process("ls", "jobs", "-o", "json", cwd=repo)
    assert [r["id"] for r in listed.json()["jobs"]] == ["api/x"]
    described = proctor_process("describe", "job", "api/x", cwd=repo)
    assert described.code == 0 and "Write paths:\n  a.py" in described.out


def test_usage_errors_exit_2(repo, proctor_process):
    assert proctor_process("job", "fork", cwd=repo).code == 2
    assert proctor_process("no-such-command", cwd=repo).code == 2
    assert proctor_process("ls", "jobs", "-o", "yaml", cwd=repo).code == 2


def test_json_errors_for_scripts(repo, proctor_process):
    refused = proctor_process("job", "fork", "j", "--write-paths", "a.py", "--check", "ci", "-o", "json", cwd=repo)
    assert refused.code == 1
    payload = json.loads(refused.out)
    assert payload["error"]["code"] == "PRC3038"
    assert payload["refusals"][0]["code"] == "PRC3038"
    assert refused.err.startswith("PRC3038: refused fork of j")


def test_stdin_closed_or_empty(repo, proctor_process):
    empty = proctor_process("job", "fork", "--stdin", cwd=repo, stdin="")
    assert empty.code == 2 and "read nothing" in empty.err and "Traceback" not in empty.err


def test_library_door_has_the_same_rules(repo):
    from proctor import api, errors
    import pytest

    row = api.fork({"id": "lib", "write_paths": ["a.py"], "check": "test"}, cwd=repo)
    assert row["write_proof"] == "alone"
    with pytest.raises(errors.Refused) as refused:
        api.fork({"id": "lib2", "write_paths": ["a.py"], "check": "ci"}, cwd=repo)
    assert refused.value.code == "PRC3038" and refused.value.exit_code == 1
    with pytest.raises(errors.Refused) as leased:
        api.fork({"id": "lib3", "check": "test"}, cwd=repo, environ={"BAGGAGE": "proctor.lease=lib"})
    assert leased.value.code == "PRC3042"
    assert [r["id"] for r in api.ls_jobs(cwd=repo)["jobs"]] == ["lib"]
    assert "Write paths:" in api.describe_job("lib", cwd=repo)
    assert api.checkpoint(cwd=repo)["vcs"] == "git"
    assert api.config_show(cwd=repo)["problems"] == []
    assert api.record_schema()["required"] == ["id"]
