"""The store's two engines from outside: moving a store between them, what doctor and config
say, the hook's imports on each, a store out of reach, and one server running the monitors.

Real processes throughout (`python -m proctor`), on a PostgreSQL database of each test's own
(tests/store/pgcluster.py), in the two-machine world of test_two_machines.py where a test needs a
second machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from proctor.store.schema import SCHEMA_VERSION
from tests.jobs.test_two_machines import _write, world  # noqa: F401  (world is a fixture)


def _fill(machine) -> dict:
    """Two jobs, one taken with a run of its check (a blob), the other declared."""
    machine.ok("job", "fork", "a1", "--write-paths", "src/a.py", "--check", "test")
    machine.ok("job", "fork", "b1", "--write-paths", "src/b.py", "--check", "test")
    machine.ok("job", "exec", "a1")
    _write(os.path.join(machine.clone, "src", "a.py"), "done = 1\n")
    return machine.run_check()


def _embedded(machine) -> dict:
    """The machine's environment with the embedded store selected."""
    return {k: v for k, v in machine.env.items() if k != "PROCTOR_STORE_URL"}


def _run(machine, *argv, env=None, stdin=None):
    from tests.support import Result

    proc = subprocess.run(
        [sys.executable, "-m", "proctor", *argv],
        cwd=machine.clone,
        input=stdin,
        capture_output=True,
        text=True,
        env=env or machine.env,
        timeout=120,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_a_store_moves_to_postgresql_and_back_with_every_row_and_blob(world):
    alpha = world.alpha
    embedded = _embedded(alpha)
    alpha.env, saved = embedded, alpha.env
    made = _fill(alpha)
    alpha.env = saved
    before = json.loads(_run(alpha, "ls", "jobs", "-o", "json", env=embedded).out)

    moved = _run(alpha, "store", "migrate", "--to", world.url, "--orchestrator", "-o", "json", env=embedded)
    assert moved.code == 0, moved.err
    counts = moved.json()
    assert counts["tables"]["jobs"] == 2 and counts["tables"]["runs"] == 1 and counts["blobs"] >= 1
    assert counts["tables"]["events"] >= 3
    assert "proctor-test-pw" not in moved.out + moved.err  # the password is never printed

    # on PostgreSQL now: the same jobs, the run's output read from the store's blob table
    after = alpha.jobs()
    assert sorted(after) == sorted(row["id"] for row in before["jobs"])
    assert after["a1"]["state"] == "running" and after["a1"]["checkout_root"] == alpha.clone
    output = alpha.ok("query", "output", made["output_ref"])
    assert "done = 1" in output.out
    # the ids the engine generates go on after the copied ones: a new event lands, none collides
    # (the checkout is still bound to a1 on the new engine, so the person says --orchestrator)
    alpha.ok("job", "fork", "c1", "--write-paths", "src/c.py", "--check", "test", "--orchestrator")
    assert "c1" in alpha.jobs()
    # the held lease still binds its checkout on the new engine: a1's holder files and passes
    filed = alpha.file_result("a1", made)
    assert filed.code == 0, filed.err

    # moving into a store that holds rows is refused, then --replace empties it first
    again = _run(alpha, "store", "migrate", "--to", world.url, "--orchestrator", env=embedded)
    assert again.code != 0 and "PRC3058" in again.err and "--replace" in again.err
    # and back: PostgreSQL to the embedded store, c1 and a1's result with it
    back = _run(alpha, "store", "migrate", "--to", "sqlite:", "--replace", "--orchestrator", "-o", "json")
    assert back.code == 0, back.err
    assert back.json()["tables"]["jobs"] == 3
    local = {row["id"]: row for row in json.loads(_run(alpha, "ls", "jobs", "-o", "json", env=embedded).out)["jobs"]}
    assert sorted(local) == ["a1", "b1", "c1"] and local["a1"]["state"] == "exited"
    assert "done = 1" in _run(alpha, "query", "output", made["output_ref"], env=embedded).out


def test_doctor_and_config_name_the_engine_without_the_password(world):
    alpha = world.alpha
    doctor = alpha.proctor("doctor")
    line = next(line for line in doctor.out.splitlines() if "store engine" in line)
    assert line.startswith("ok") and "PostgreSQL" in line and f"schema version {SCHEMA_VERSION}" in line
    assert "reachable from this machine (alpha)" in line
    assert "proctor-test-pw" not in doctor.out + doctor.err and ":***@" in line
    _write(
        os.path.join(alpha.clone, "proctor.toml"),
        open(os.path.join(alpha.clone, "proctor.toml")).read() + f'\n[store]\nurl = "{world.url}"\n',
    )
    shown = _run(alpha, "config", "show", env=_embedded(alpha))
    assert "proctor-test-pw" not in shown.out and ":***@" in shown.out

    unreachable = dict(alpha.env, PROCTOR_STORE_URL="postgresql://proctor:secret@127.0.0.1:9/x")
    down = _run(alpha, "doctor", env=unreachable)
    assert down.code == 1 and "FAIL store: PostgreSQL postgresql://proctor:***@127.0.0.1:9/x" in down.out
    assert "secret" not in down.out + down.err


def _hook_modules(machine, env, payload: dict) -> tuple[str, set[str]]:
    """The hook's answer and the modules its process imported (-X importtime)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "proctor", "hook", "claude"],
        cwd=machine.clone,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    names = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    return proc.stdout, names


def test_the_hook_loads_no_postgresql_driver_on_either_engine(world):
    alpha = world.alpha
    alpha.ok("job", "fork", "w", "--write-paths", "src/a.py", "--check", "test")
    payload = {
        "session_id": "s1",
        "transcript_path": "/nonexistent",
        "cwd": alpha.clone,
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": os.path.join(alpha.clone, "src", "a.py"), "content": "x"},
    }
    answer, names = _hook_modules(alpha, alpha.env, payload)
    # it read the store: the write to w's path by a session with no lease is named
    assert "belongs to w" in answer, answer
    assert not {n for n in names if n.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_c")}
    assert "proctor.store.pgwire" in names
    embedded = _embedded(alpha)
    subprocess.run(
        [sys.executable, "-m", "proctor", "job", "fork", "w", "--write-paths", "src/a.py", "--check", "test"],
        cwd=alpha.clone,
        env=embedded,
        check=True,
        capture_output=True,
    )
    answer, names = _hook_modules(alpha, embedded, payload)
    assert "belongs to w" in answer, answer
    assert not {n for n in names if n.startswith(("psycopg", "proctor.store.pgwire", "proctor.store.postgres"))}


def test_a_store_out_of_reach_fails_open_with_an_advisory(world):
    alpha = world.alpha
    env = dict(alpha.env, PROCTOR_STORE_URL="postgresql://proctor:secret@127.0.0.1:9/x")
    payload = {
        "session_id": "s1",
        "transcript_path": "/nonexistent",
        "cwd": alpha.clone,
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_input": {"file_path": os.path.join(alpha.clone, "src", "a.py"), "content": "x"},
    }
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "hook", "claude"],
        cwd=alpha.clone,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0
    answer = json.loads(proc.stdout)["hookSpecificOutput"]
    assert answer.get("permissionDecision") != "deny"
    assert "cannot reach its job store" in answer["additionalContext"]
    assert "secret" not in proc.stdout


def test_text_with_nul_is_kept_visible_on_postgresql(world):
    """PostgreSQL text cannot hold NUL (SQLite's can): a line a monitor printed with one is kept,
    the NUL shown as U+FFFD. (A job's record refuses NUL at fork, PRC3044.)"""
    alpha = world.alpha
    code = (
        "import sys; from proctor.workspace import Workspace; from proctor.store import rows\n"
        "ws = Workspace(cwd=sys.argv[1])\n"
        "with ws.store.write() as tx:\n"
        "    tx.execute(\"INSERT INTO events (time, kind, actor, data) VALUES ('t', 'note', 'person', ?)\", ('a\\x00b',))\n"
        "print(repr(ws.store.tx.scalar(\"SELECT data FROM events WHERE kind = 'note'\")))\n"
        "print(rows.job_by_secret_digest(ws.store.tx, 'nothing'))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, alpha.clone], capture_output=True, text=True, env=alpha.env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["'a\ufffdb'", "None"]


def _server(machine, *argv):
    return _run(machine, "server", *argv)


def _monitor_runs(world) -> list[tuple]:
    """(machine, exit code) of every monitor run, read with psycopg from the repository's schema."""
    import psycopg

    from proctor.store.postgres import schema_name

    base = world.alpha.env["PROCTOR_STATE_DIR"]
    key = next(
        name
        for name in os.listdir(base)  # a repository's directory, named by its key (not repo-keys)
        if os.path.isdir(os.path.join(base, name)) and re.fullmatch(r"[0-9a-f]{40,64}", name)
    )
    with psycopg.connect(world.url, autocommit=True) as conn:
        conn.execute(f'SET search_path TO "{schema_name(os.path.join(base, key))}"')
        return conn.execute(
            "SELECT machine, exit_code FROM monitor_runs WHERE ended IS NOT NULL ORDER BY id"
        ).fetchall()


def test_one_server_runs_the_monitors_and_another_takes_over(world):
    """Both machines start a server on the shared store: the first runs the monitors, the second
    stands by (its log says so); when the first stops, the second takes over."""
    import urllib.error
    import urllib.request

    from tests.server.test_server import wait_for

    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "m1", "--write-paths", "src/a.py", "--check", "test")
    alpha.ok("job", "exec", "m1")
    assert _server(alpha, "start", "--orchestrator").code == 0
    try:
        assert _server(beta, "start", "--orchestrator").code == 0
        status = json.loads(_server(alpha, "status", "-o", "json").out)
        token = open(status["token_path"]).read().strip()
        body = json.dumps(
            {"job": "m1", "command": "echo tick", "interval": "10s", "cwd": alpha.clone, "allow_unsandboxed": True}
        ).encode()
        request = urllib.request.Request(
            status["console"].rstrip("/") + "/api/v1/monitors",
            data=body,
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert answer.status in (200, 201)
        except urllib.error.HTTPError as exc:
            raise AssertionError(exc.read()) from None
        wait_for(lambda: len(_monitor_runs(world)) >= 2, timeout=60)
        assert {machine for machine, _ in _monitor_runs(world)} == {"alpha"}
        beta_log = os.path.join(
            os.path.dirname(json.loads(_server(beta, "status", "-o", "json").out)["token_path"]), "server.log"
        )
        assert "stands by" in open(beta_log).read()
        assert _server(alpha, "stop", "--orchestrator").code == 0
        # the standing-by server asks again every 30 s: it takes over within that and a run
        wait_for(lambda: "beta" in {machine for machine, _ in _monitor_runs(world)}, timeout=75, step=0.5)
    finally:
        _server(alpha, "stop", "--orchestrator")
        _server(beta, "stop", "--orchestrator")
