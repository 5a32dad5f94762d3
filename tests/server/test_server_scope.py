"""No leased agent reaches around its scope (issue 14, item 7). Each test is an attack that
worked: a process working a job, or one beneath it, acting as the person who runs the server.

(a) the server token read and sent by a leased process, by a child of a leased shell with
    its environment stripped, or by a monitor command (it runs beneath the server);
(b) `env -u BAGGAGE -u PROCTOR_NONCE proctor monitor remove N` from a fresh worktree, where
    the CLI fell back to the server token;
(c) `proctor server stop` under a lease;
(d) `proctor server start` under a lease (its BAGGAGE and secret would reach every monitor).

The server identifies the process at the other end of a token's connection (its socket's
owner in /proc) and refuses the token to one that was started under a job of this store, or
beneath one, or beneath the server itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from proctor import api
from tests.support import git
from tests.server.test_server import Server, cli, served, wait_for  # noqa: F401  (the fixture)

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="the peer is found through /proc")


def _third(served):  # noqa: F811
    """An active job that is not card's, with a monitor: what a leased agent reaches for."""
    api.fork({"id": "third", "write_paths": ["src/c.py"], "check": "test", "state": "running"}, cwd=served.root)
    status, monitor = served.add("third", "true", "1h")
    assert status == 201, monitor
    return monitor["id"]


def _live(served, monitor_id):  # noqa: F811
    return any(m["id"] == monitor_id for m in served.call("GET", "/api/v1/monitors")[1]["monitors"])


def _attack_script(tmp_path, served, monitor_id):  # noqa: F811
    """A script that reads the token and removes `monitor_id` with it, printing the status."""
    script = tmp_path / "attack.py"
    script.write_text(
        textwrap.dedent(f"""
        import urllib.request, urllib.error
        token = open({served.token_path!r}).read().strip()
        request = urllib.request.Request("http://127.0.0.1:{served.port}/api/v1/monitors/{monitor_id}",
                                         method="DELETE", headers={{"Authorization": "Bearer " + token,
                                                                    "Content-Type": "application/json"}})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                print("status", response.status)
        except urllib.error.HTTPError as exc:
            print("status", exc.code, exc.read().decode())
    """)
    )
    return str(script)


def _leased_env(served, **extra):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    env.update({"BAGGAGE": "proctor.lease=card", "PROCTOR_NONCE": served.card_nonce}, **extra)
    return env


# -- (a) the token, read and sent -----------------------------------------------------------------


def test_a_leased_process_sending_the_token_is_refused(served, tmp_path):  # noqa: F811
    victim = _third(served)
    script = _attack_script(tmp_path, served, victim)
    done = subprocess.run(
        [sys.executable, script],
        cwd=served.worktree,
        env=_leased_env(served),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("status 403") and "LEASED_CALLER" in done.stdout, done.stdout + done.stderr
    assert _live(served, victim), "the other job's monitor is still there"


def test_a_stripped_child_of_a_leased_shell_sending_the_token_is_refused(served, tmp_path):  # noqa: F811
    victim = _third(served)
    script = _attack_script(tmp_path, served, victim)
    # the shell was started under the lease; env -u changes only its child's environment
    command = f"env -u BAGGAGE -u PROCTOR_NONCE -u PROCTOR_WORKER_TAG {sys.executable} {script}; exit $?"
    done = subprocess.run(
        ["bash", "-c", command], cwd=str(tmp_path), env=_leased_env(served), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("status 403") and "LEASED_CALLER" in done.stdout, done.stdout + done.stderr
    assert _live(served, victim)


def test_a_child_of_a_shell_holding_only_the_secret_is_refused(served, tmp_path):  # noqa: F811
    """A session whose lease the guard recorded (no BAGGAGE anywhere) exported its secret."""
    victim = _third(served)
    script = _attack_script(tmp_path, served, victim)
    env = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    env["PROCTOR_NONCE"] = served.card_nonce
    done = subprocess.run(
        ["bash", "-c", f"env -u PROCTOR_NONCE {sys.executable} {script}; exit $?"],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.startswith("status 403"), done.stdout + done.stderr
    assert _live(served, victim)


def test_a_monitor_command_sending_the_token_is_refused(served, tmp_path):  # noqa: F811
    """A monitor's command is the agent's, run beneath the server with the server's rights."""
    victim = _third(served)
    script = _attack_script(tmp_path, served, victim)
    made = cli(
        served.root,
        "monitor",
        "add",
        "--cmd",
        f"{sys.executable} {script}",
        "--interval",
        "1h",
        "--allow-unsandboxed",
        "-o",
        "json",
        env={"PROCTOR_NONCE": served.card_nonce},
    )
    assert json.loads(made.stdout)["job"] == "card"
    lines = wait_for(lambda: [e["line"] for e in served.events("card") if e["line"].startswith("status")], timeout=30)
    assert lines[0].startswith("status 403"), lines
    assert _live(served, victim)


def test_the_person_with_the_token_is_served(served):  # noqa: F811
    victim = _third(served)
    assert served.call("DELETE", f"/api/v1/monitors/{victim}")[0] == 200
    assert cli(served.root, "monitor", "list").returncode == 0


# -- (b) the CLI's fall-back to the token ------------------------------------------------------------


def _fresh_worktree(served, tmp_path):  # noqa: F811
    fresh = str(tmp_path / "fresh")
    git(served.root, "worktree", "add", "-q", "-b", "fresh", fresh)
    return fresh


def test_monitor_remove_with_the_lease_stripped_from_a_fresh_worktree(served, tmp_path):  # noqa: F811
    victim = _third(served)
    fresh = _fresh_worktree(served, tmp_path)
    command = f"env -u BAGGAGE -u PROCTOR_NONCE {sys.executable} -m proctor monitor remove {victim}; exit $?"
    done = subprocess.run(
        ["bash", "-c", command], cwd=fresh, env=_leased_env(served), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "PROCTOR_NONCE" in done.stderr
    assert _live(served, victim)


def test_monitor_remove_under_a_shell_holding_only_the_secret(served, tmp_path):  # noqa: F811
    victim = _third(served)
    fresh = _fresh_worktree(served, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    env["PROCTOR_NONCE"] = served.card_nonce
    command = f"env -u PROCTOR_NONCE {sys.executable} -m proctor monitor remove {victim}; exit $?"
    done = subprocess.run(["bash", "-c", command], cwd=fresh, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert _live(served, victim)


# -- (c) server stop ----------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["baggage", "checkout", "ancestor"])
def test_server_stop_under_a_lease_is_refused(served, tmp_path, how):  # noqa: F811
    if how == "baggage":
        done = cli(served.root, "server", "stop", env={"BAGGAGE": "proctor.lease=card"}, check=False)
    elif how == "checkout":  # the worktree card was taken in: its checkout's record
        done = cli(served.worktree, "server", "stop", check=False)
    else:
        done = subprocess.run(
            ["bash", "-c", f"env -u BAGGAGE {sys.executable} -m proctor server stop; exit $?"],
            cwd=served.root,
            env=_leased_env(served),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "SERVER_LEASED_CALLER" in done.stderr and "a person stops the server" in done.stderr
    assert served.call("GET", "/api/v1/status")[0] == 200, "the server still runs"


# -- (d) server start ---------------------------------------------------------------------------------


@pytest.mark.parametrize("foreground", [True, False])
def test_server_start_under_a_lease_is_refused(served, foreground):  # noqa: F811
    cli(served.root, "server", "stop")
    argv = ["server", "start"] + (["--foreground"] if foreground else [])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "proctor", *argv],
            cwd=served.root,
            env=_leased_env(served),
            capture_output=True,
            text=True,
            timeout=15,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("a server started under the lease") from None
    finally:
        started = json.loads(cli(served.root, "server", "status", "-o", "json", check=False).stdout)
        if started.get("running"):
            cli(served.root, "server", "stop", check=False)
    assert not started.get("running"), "a server started under the lease"
    assert done.returncode == 1 and "SERVER_LEASED_CALLER" in done.stderr, done.stdout + done.stderr


def test_a_process_beneath_a_proctor_work_of_this_repository_is_refused(served, tmp_path):  # noqa: F811
    """An orphan a worker double-forked, its environment stripped, reparents to `proctor work`
    (a child subreaper): a process beneath a `proctor work` of this repository is a worker's."""
    victim = _third(served)
    script = _attack_script(tmp_path, served, victim)
    fake = tmp_path / "bin" / "proctor"  # a `proctor work` as its command line shows it
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nenv -i PATH=/usr/bin:/bin {sys.executable} {script}\nexit $?\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("BAGGAGE", "PROCTOR_NONCE")}
    done = subprocess.run(
        ["/bin/sh", str(fake), "work", "card"], cwd=served.root, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("status 403") and "proctor work" in done.stdout, done.stdout + done.stderr
    assert _live(served, victim)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        ["/bin/sh", str(fake), "work", "card"], cwd=str(elsewhere), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.startswith("status 200"), "a proctor work of another repository is not this one's worker"
