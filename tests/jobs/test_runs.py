"""proctor run: targets run through the shell, killed as a group past their timeout, and
recorded with their whole output as evidence; proctor query output reads it back."""

from __future__ import annotations

import json
import os
import time

import pytest

CONFIG = """
[targets.hello]
command = "echo out; echo err >&2; echo more"
[targets.fail]
command = "echo broken; exit 3"
[targets.slow]
command = "sleep 30"
timeout = "1s"
[targets.orphan]
command = "sleep 30 & echo $! > orphan.pid; echo started"
timeout = "20s"
[targets.where]
command = "pwd"
cwd = "sub"
[targets.binary]
command = "printf '\\\\000\\\\001\\\\377'"
[targets.lease]
command = "echo lease=$PROCTOR_LEASE"
"""


@pytest.fixture
def targets_repo(tmp_path, monkeypatch, new_repo):
    root = new_repo("r", CONFIG)
    os.makedirs(os.path.join(root, "sub"))
    monkeypatch.chdir(root)
    return root


def test_run_records_everything(targets_repo, proctor):
    shown = proctor("run", "hello")
    assert shown.code == 0
    assert shown.out.splitlines() == ["out", "err", "more"], "stdout and stderr, interleaved as printed"
    assert "output_ref sha256:" in shown.err
    record = proctor("run", "hello", "-o", "json")
    assert record.code == 0
    run = record.json()
    assert run["target"] == "hello" and run["exit_code"] == 0 and run["timed_out"] is False
    assert run["command"] == "echo out; echo err >&2; echo more"
    assert run["ref"] == run["output_ref"] and run["output_ref"].startswith("sha256:")
    assert run["checkout"] == os.path.realpath(targets_repo) and run["checkpoint"]
    assert run["lease"] is None and run["started"] <= run["ended"]
    assert "out\nerr\nmore\n" == record.err.split("\n", 0)[0][: len("out\nerr\nmore\n")]
    back = proctor("query", "output", run["output_ref"])
    assert back.code == 0 and back.out == "out\nerr\nmore\n"


def test_failing_target(targets_repo, proctor):
    result = proctor("run", "fail", "-o", "json")
    assert result.code == 1 and result.json()["exit_code"] == 3


def test_timeout_kills_the_group(targets_repo, proctor):
    started = time.monotonic()
    result = proctor("run", "slow", "-o", "json")
    assert time.monotonic() - started < 10
    run = result.json()
    assert result.code == 1 and run["timed_out"] is True and run["exit_code"] is None
    assert "timed out" in proctor("run", "slow").err


def test_grandchild_holding_the_pipe_does_not_hang(targets_repo, proctor):
    started = time.monotonic()
    result = proctor("run", "orphan", "-o", "json")
    assert time.monotonic() - started < 10
    assert result.code == 0 and result.json()["exit_code"] == 0
    output = proctor("query", "output", result.json()["output_ref"]).out
    assert output == "started\n"
    with open(os.path.join(targets_repo, "orphan.pid")) as handle:
        pid = int(handle.read())
    assert not _alive(pid), "the grandchild was killed with its group"


def _alive(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().split(")")[-1].split()[0] == "Z":
                    return False
        except FileNotFoundError:
            return False
        time.sleep(0.05)
    return True


def test_cwd_binary_and_lease(targets_repo, proctor):
    where = proctor("run", "where")
    assert where.out.strip() == os.path.join(os.path.realpath(targets_repo), "sub")
    from proctor import api

    binary = api.run_target("binary", cwd=targets_repo, echo=None)
    assert api.query_output(binary["output_ref"], cwd=targets_repo) == b"\x00\x01\xff"
    assert proctor("job", "fork", "j", "--check", "hello").code == 0
    leased = proctor("run", "lease", "--lease", "j", "-o", "json")
    assert leased.json()["lease"] == "j"
    assert proctor("query", "output", leased.json()["output_ref"]).out == "lease=j\n"


def test_unknown_target_and_refs(targets_repo, proctor):
    unknown = proctor("run", "nope")
    assert unknown.code == 2 and "[targets.nope]" in unknown.err
    missing = proctor("query", "output", "sha256:" + "0" * 64)
    assert missing.code == 2 and "no recorded run" in missing.err
    bad = proctor("query", "output", "not-a-ref")
    assert bad.code == 2


def test_missing_blob_is_reported(targets_repo, proctor):
    run = proctor("run", "hello", "-o", "json").json()
    from proctor.paths import find_checkout, repo_state_dir
    from tests.store.store_oracle import remove_blob

    remove_blob(repo_state_dir(find_checkout(targets_repo)), run["output_ref"])
    gone = proctor("query", "output", run["output_ref"])
    assert gone.code == 2 and "missing" in gone.err


def test_run_is_on_the_trail(targets_repo, proctor):
    run = proctor("run", "fail", "-o", "json").json()
    from proctor import trail
    from proctor.paths import find_checkout, repo_state_dir
    from proctor.store import Store

    store = Store(repo_state_dir(find_checkout(targets_repo)))
    with store.read() as conn:
        events = trail.events(conn, kind="run")
    store.close()
    assert events[-1]["data"]["run"] == run["id"] and events[-1]["data"]["exit_code"] == 3


def test_large_output_is_recorded_whole(targets_repo, proctor, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"line of output\n" * 200_000)
    with open(os.path.join(targets_repo, "proctor.toml"), "a") as handle:
        handle.write(f'[targets.big]\ncommand = "cat {big}"\n')
    run = proctor("run", "big", "-o", "json")
    record = json.loads(run.out)
    assert record["output_bytes"] == big.stat().st_size
    import hashlib

    assert record["output_ref"] == "sha256:" + hashlib.sha256(big.read_bytes()).hexdigest()


def test_interrupted_run_ends_its_target(targets_repo, tmp_path):
    import signal
    import subprocess
    import sys

    with open(os.path.join(targets_repo, "proctor.toml"), "a") as handle:
        handle.write('[targets.hang]\ncommand = "sleep 300 & echo $! > hang.pid; wait"\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "run", "hang"],
        cwd=targets_repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    pid_file = os.path.join(targets_repo, "hang.pid")
    deadline = time.monotonic() + 20
    while not os.path.exists(pid_file) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and b"Traceback" not in err
    with open(pid_file) as handle:
        assert not _alive(int(handle.read()))
