"""Adversarial tests of the PostgreSQL store and of several machines sharing it.

Each test is an attack by a leased agent or a hostile input on a promise proctor makes on a
shared PostgreSQL store; it asserts the promise, so a break fails. Real processes and a real
PostgreSQL (tests/store/pgcluster.py), each test on a database of its own.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from proctor import api
from tests.support import call_hook, Result, git, make_repo
from tests.jobs.test_two_machines import _write, world  # noqa: F401  (world is a fixture)

CONFIG = "[targets.test]\ncommand = 'true'\n"


# -- helpers ---------------------------------------------------------------------------------------


def _database(request) -> tuple[object, str, str]:
    """(cluster, database name, its URL): a database of this test's own, dropped at the end."""
    from tests.store.pgcluster import require_cluster

    cluster = require_cluster()
    name = "adv_" + re.sub(r"[^a-z0-9]", "_", request.node.name.lower())[:30] + "_" + os.urandom(4).hex()
    cluster.create_database(name)
    request.addfinalizer(lambda: cluster.drop_database(name))
    return cluster, name, cluster.url(name)


@pytest.fixture
def pg(request, monkeypatch):
    """This test's PostgreSQL store, selected through PROCTOR_STORE_URL as a person selects it."""
    cluster, name, url = _database(request)
    monkeypatch.setenv("PROCTOR_STORE_URL", url)
    return cluster, name, url


def _leased_repo(tmp_path, monkeypatch) -> str:
    """A repository with job w1 holding plan/w1/** and job `other` holding src/**."""
    root = make_repo(tmp_path / "repo", CONFIG)
    for path in ("plan/w1/a.py", "src/b.py"):
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as handle:
            handle.write("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "files")
    monkeypatch.chdir(root)
    api.fork({"id": "w1", "write_paths": ["plan/w1/**"], "check": "test"}, cwd=root)
    api.fork({"id": "other", "write_paths": ["src/**"], "check": "test"}, cwd=root)
    return os.path.realpath(root)


def _hook(root, tool, tool_input, lease="w1", session="s1", cwd=None, environ=None) -> dict:
    payload = {
        "session_id": session,
        "transcript_path": "/tmp/none.jsonl",
        "cwd": cwd or root,
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }
    return call_hook(payload, base=environ, env={"BAGGAGE": f"proctor.lease={lease}"} if lease else None)


def _hook_process(root, tool, tool_input, env, lease=None, cwd=None) -> dict:
    """The hook as the host runs it: `python -m proctor hook claude` with `env` as its environment."""
    payload = {
        "session_id": "s1",
        "transcript_path": "/tmp/none.jsonl",
        "cwd": cwd or root,
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }
    env = {k: v for k, v in env.items() if k != "BAGGAGE"}
    if lease:
        env["BAGGAGE"] = f"proctor.lease={lease}"
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "hook", "claude"],
        cwd=cwd or root,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout or "{}")


def _denied(answer: dict, rule: str | None = None) -> bool:
    spec = answer.get("hookSpecificOutput", {})
    text = spec.get("permissionDecisionReason") or ""
    return spec.get("permissionDecision") == "deny" and (rule is None or f"deny [{rule}]" in text)


def _said(answer: dict) -> str:
    spec = answer.get("hookSpecificOutput", {})
    return spec.get("permissionDecisionReason") or spec.get("additionalContext") or "pass ({})"


def _cli(*argv, cwd, env=None, stdin=None) -> Result:
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", *argv],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        timeout=120,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _job_ids(root, env=None) -> set[str]:
    done = _cli("ls", "jobs", "-o", "json", cwd=root, env=env)
    assert done.code == 0, done.out + done.err
    return {row["id"] for row in done.json()["jobs"]}


def _schemas(cluster, database) -> set[str]:
    return {
        row[0]
        for row in cluster.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'proctor_%'", db=database)
    }


# -- 1. the guard finds the store the way the embedded engine finds it -------------------------------


def test_a_repository_made_inside_the_leased_tree_does_not_unbind_the_guard(pg, tmp_path, monkeypatch):
    """README: "A repository made inside a leased tree (git init, or a clone of this one) is a
    checkout of its own, but the call is judged in the checkout around it". On SQLite the guard
    finds the outer checkout by its proctor.db; a PostgreSQL store has no file, so a holder that
    runs `git init` inside its own write paths and works from there must still be judged
    under w1: writing `other`'s src/b.py from there is denied, as it is from the root."""
    root = _leased_repo(tmp_path, monkeypatch)
    target = os.path.join(root, "src", "b.py")
    assert _denied(_hook(root, "Write", {"file_path": target, "content": "y"})), "the plain case is denied"
    inner = os.path.join(root, "plan", "w1", "inner")
    assert not _denied(_hook(root, "Bash", {"command": "git init -q plan/w1/inner"})), "inside its own paths"
    git(root, "init", "-q", inner)
    by_tool = _hook(root, "Write", {"file_path": target, "content": "y"}, cwd=inner)
    by_shell = _hook(root, "Bash", {"command": "echo y > ../../../src/b.py"}, cwd=inner)
    assert _denied(by_tool), f"Write to src/b.py from a nested repository: {_said(by_tool)}"
    assert _denied(by_shell), f"echo > src/b.py from a nested repository: {_said(by_shell)}"


def test_the_hook_creates_no_store_where_proctor_is_not_in_use(pg, tmp_path, new_repo):
    """README: "The hook records into an existing store only (proctor init creates it), so wiring
    it for every repository creates no state where proctor is not in use." With
    PROCTOR_STORE_URL exported for every shell, a session in an unrelated repository (never
    `proctor init`ed, no job) must not create a schema in the shared database."""
    cluster, database, _url = pg
    before = _schemas(cluster, database)
    root = os.path.realpath(new_repo("unrelated"))
    answer = _hook(root, "Write", {"file_path": os.path.join(root, "README"), "content": "y"}, lease=None)
    assert not _denied(answer)
    made = _schemas(cluster, database) - before
    assert not made, f"the hook of an unrelated repository created {made} in the shared database"
    assert not os.path.exists(os.environ["PROCTOR_STATE_DIR"]) or not any(
        name.endswith(".db") for _d, _s, names in os.walk(os.environ["PROCTOR_STATE_DIR"]) for name in names
    )


# -- 2. a leased session and the store itself ---------------------------------------------------------


def test_a_leased_session_cannot_wipe_the_shared_store_with_store_migrate(pg, tmp_path, monkeypatch):
    """A holder of w1 runs `proctor store migrate --from sqlite: --to <the shared store> --replace`:
    an empty embedded store copied over every machine's jobs. The guard must refuse it (as it
    refuses sqlite3 on the store file, lease-tamper), and if it let it through, the store must
    refuse a leased caller: after the command, w1 and `other` are still there."""
    _cluster, _database_name, url = pg
    root = _leased_repo(tmp_path, monkeypatch)
    command = f"proctor store migrate --from sqlite: --to '{url}' --replace"
    answer = _hook(root, "Bash", {"command": command})
    if not _denied(answer):
        done = _cli(
            "store",
            "migrate",
            "--from",
            "sqlite:",
            "--to",
            url,
            "--replace",
            cwd=root,
            env=dict(os.environ, BAGGAGE="proctor.lease=w1"),
        )
        left = _job_ids(root)
        assert {"w1", "other"} <= left, (
            f"the guard let `{command}` through ({_said(answer)}), and run under BAGGAGE=proctor.lease=w1 it "
            f"exited {done.code} ({done.out.strip()[:200]}); the shared store now holds jobs {sorted(left)}"
        )


def test_a_client_handed_the_store_url_is_refused_like_sqlite3_on_the_store_file(pg, tmp_path, monkeypatch):
    """On the embedded store, `sqlite3 <store> ...` from a leased session is lease-tamper ("a
    command handed the store"). On PostgreSQL the store is its URL: `psql <url> -c 'DELETE ...'`
    from the holder of w1 must be refused the same way, not merely advised."""
    _cluster, _name, url = pg
    root = _leased_repo(tmp_path, monkeypatch)
    answer = _hook(root, "Bash", {"command": f"psql '{url}' -c 'DELETE FROM jobs'"})
    assert _denied(answer), f"psql handed the store's URL: {_said(answer)}"


# -- 3. the store's password -------------------------------------------------------------------------


def test_a_password_given_as_a_url_parameter_is_never_shown(request, tmp_path, monkeypatch, new_repo):
    """libpq (and pgwire) take the password as a URL parameter too:
    postgresql://proctor@host:port/db?password=... . doctor and config show name the URL "without
    its password", and the guard's advisory for a store out of reach goes to the model: none of
    them may carry it. A password holding a raw `@` (pgwire splits at the last one) is not
    half-shown either."""
    from tests.store.pgcluster import PASSWORD

    cluster, name, _ = _database(request)
    root = os.path.realpath(new_repo("repo", CONFIG))
    url = f"postgresql://proctor@127.0.0.1:{cluster.port}/{name}?password={PASSWORD}"
    env = dict(os.environ, PROCTOR_STORE_URL=url)
    shown = {}
    for argv in (("doctor",), ("config", "show")):
        done = _cli(*argv, cwd=root, env=env)
        shown[" ".join(argv)] = done.out + done.err
    out_of_reach = f"postgresql://proctor@127.0.0.1:9/{name}?sslmode=disable&password=Zq8-out-of-reach"
    answer = _hook_process(
        root,
        "Write",
        {"file_path": os.path.join(root, "README"), "content": "y"},
        dict(os.environ, PROCTOR_STORE_URL=out_of_reach),
    )
    assert "cannot reach its job store" in json.dumps(answer), answer
    shown["the hook's advisory"] = json.dumps(answer)
    at_sign = "postgresql://proctor:p4rt1@Zq8-after-at@127.0.0.1:9/x"
    answer = _hook_process(
        root,
        "Write",
        {"file_path": os.path.join(root, "README"), "content": "y"},
        dict(os.environ, PROCTOR_STORE_URL=at_sign),
    )
    shown["the hook's advisory (@ in the password)"] = json.dumps(answer)
    leaks = {
        where: text[:300]
        for where, text in shown.items()
        if PASSWORD in text or "Zq8-out-of-reach" in text or "Zq8-after-at" in text
    }
    assert not leaks, f"the store's password is shown: {leaks}"


# -- 4. machines ---------------------------------------------------------------------------------------


def _embedded(machine) -> dict:
    return {k: v for k, v in machine.env.items() if k != "PROCTOR_STORE_URL"}


def test_a_store_moved_from_before_machines_keeps_its_jobs_on_their_machine(world):
    """A one-machine store from before machines were recorded (its jobs' `machine` empty, as the
    schema-7 migration leaves them: it stamps bindings with the migrating machine, not jobs) is
    moved into PostgreSQL from alpha, the machine that took its job. beta, whose filesystem has
    no such path, then reads the store: README "A checkout is judged gone, and its job ended,
    only on the machine that took it" -- beta must not end alpha's running job."""
    alpha, beta = world.alpha, world.beta
    embedded = _embedded(alpha)
    for argv in (("job", "fork", "old", "--write-paths", "src/a.py", "--check", "test"), ("job", "exec", "old")):
        done = _cli(*argv, cwd=alpha.clone, env=embedded)
        assert done.code == 0, done.out + done.err
    base = alpha.env["PROCTOR_STATE_DIR"]
    db = next(
        os.path.join(base, n, "proctor.db")
        for n in os.listdir(base)
        if os.path.exists(os.path.join(base, n, "proctor.db"))
    )
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE jobs SET machine = NULL, doc = json_remove(doc, '$.machine') WHERE id = 'old'")
    conn.close()
    moved = _cli("store", "migrate", "--to", world.url, "--orchestrator", cwd=alpha.clone, env=embedded)
    assert moved.code == 0, moved.out + moved.err
    assert alpha.jobs()["old"]["state"] == "running"

    aside = alpha.clone + ".elsewhere"
    os.rename(alpha.clone, aside)  # beta's filesystem: no such path there
    try:
        seen = beta.proctor("ls", "jobs")
    finally:
        os.rename(aside, alpha.clone)
    row = alpha.jobs()["old"]
    assert row["state"] == "running", (
        f"beta ended alpha's job: {row.get('end_reason')!r}; beta said: {seen.err.strip()[:300]}"
    )


def test_two_machines_taking_one_job_at_once_one_wins(world):
    """alpha and beta run `proctor job exec w` at the same moment (four rounds, each in fresh clones): exactly one
    takes it each time; the other is refused, and the row names the winner's machine."""
    alpha, beta = world.alpha, world.beta
    for i in range(4):
        job = f"race{i}"
        alpha.ok("job", "fork", job, "--write-paths", f"src/r{i}.py", "--check", "test", "--orchestrator")
        where = {m.name: m.add_clone(f"take{i}") for m in (alpha, beta)}
        results = {}

        def take(machine):
            results[machine.name] = machine.proctor("job", "exec", job, cwd=where[machine.name])

        threads = [threading.Thread(target=take, args=(m,)) for m in (alpha, beta)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [name for name, r in results.items() if r.code == 0]
        assert len(won) == 1, {n: (r.code, r.out[-200:], r.err[-300:]) for n, r in results.items()}
        assert alpha.jobs(cwd=where["alpha"] if won[0] == "beta" else alpha.clone)[job]["machine"] == won[0]


# -- 5. one server runs the monitors ---------------------------------------------------------------------


def _monitor_runs(world) -> list[tuple]:
    """(id, machine) of every monitor run opened, from the repository's schema."""
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
        return conn.execute("SELECT id, machine FROM monitor_runs ORDER BY id").fetchall()


def _add_monitor(machine, job, cwd):
    status = json.loads(machine.proctor("server", "status", "-o", "json").out)
    token = open(status["token_path"]).read().strip()
    body = json.dumps(
        {"job": job, "command": "echo tick", "interval": "10s", "cwd": cwd, "allow_unsandboxed": True}
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


def test_a_leader_that_lost_its_connection_does_not_run_monitors_beside_the_new_leader(world):
    """alpha's server leads and runs a job's monitor. Its connection is dropped (a network blip,
    pg_terminate_backend, a PostgreSQL failover): the session lock is gone, and beta's server,
    started then, may take the lead (or alpha, reconnecting first, takes it back). README: "one
    server per shared store runs the monitors" -- once either runs the monitor after the drop,
    the other runs it no more."""
    from tests.server.test_server import wait_for

    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "m1", "--write-paths", "src/a.py", "--check", "test")
    alpha.ok("job", "exec", "m1")
    assert alpha.proctor("server", "start", "--orchestrator").code == 0
    try:
        _add_monitor(alpha, "m1", alpha.clone)
        wait_for(lambda: any(m == "alpha" for _i, m in _monitor_runs(world)), timeout=30)
        from tests.store.pgcluster import require_cluster

        cluster = require_cluster()
        database = world.url.rsplit("/", 1)[1]
        killed = cluster.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = $1)",
            (database,),
        )
        assert killed, "alpha's server held no session lock"
        assert beta.proctor("server", "start", "--orchestrator").code == 0
        # the first run opened after beta started names the leader (beta, or alpha back first)
        since = max((i for i, _m in _monitor_runs(world)), default=0)
        first, leader = wait_for(
            lambda: next(((i, m) for i, m in _monitor_runs(world) if i > since), None), timeout=40, step=0.5
        )
        other = "alpha" if leader == "beta" else "beta"
        deadline = time.monotonic() + 25  # a monitor runs every 10 s; a server asks to lead every 30 s
        late = []
        while time.monotonic() < deadline and not late:
            late = [i for i, m in _monitor_runs(world) if m == other and i > first]
            time.sleep(1)
        assert not late, (
            f"{other}'s server ran m1's monitor (runs {late}) after {leader}'s server led it "
            f"(its run {first}): {_monitor_runs(world)}"
        )
    finally:
        alpha.proctor("server", "stop", "--orchestrator")
        beta.proctor("server", "stop", "--orchestrator")


def _spoofed_machine(world, tmp_path):
    """A holder on alpha with `PROCTOR_MACHINE=beta` in a file of its own write paths, beta's job
    bw taken in a checkout alpha's filesystem does not have; the command that exports the file."""
    alpha, beta = world.alpha, world.beta
    beta.ok("job", "fork", "bw", "--write-paths", "src/b.py", "--check", "test")
    beta.ok("job", "exec", "bw")
    held = alpha.add_clone("held")
    alpha.ok("job", "fork", "aw", "--write-paths", "src/m", "--check", "test", cwd=held)
    alpha.ok("job", "exec", "aw", cwd=held)
    _write(os.path.join(held, "src", "m"), "PROCTOR_MACHINE=beta\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "proctor").write_text(f'#!/bin/sh\nexec {sys.executable} -m proctor "$@"\n')
    (bindir / "proctor").chmod(0o755)
    env = dict(alpha.env, PATH=f"{bindir}{os.pathsep}{alpha.env['PATH']}")
    return held, env, 'export "$(cat src/m)"; proctor ls jobs'


def test_another_machines_name_through_an_exported_substitution_is_refused(world, tmp_path):
    """lease-store: "any command with PROCTOR_MACHINE ... set, exported or unset (another
    machine's name would judge its checkouts from here)" is refused, a name computed by a
    substitution included: `export "$(cat src/m)"; proctor ls jobs`."""
    held, env, command = _spoofed_machine(world, tmp_path)
    answer = _hook_process(held, "Bash", {"command": command}, env, lease="aw")
    assert _denied(answer, "lease-store"), _said(answer)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "same-user limit: PROCTOR_MACHINE is how a machine names itself, so a process that runs the "
        "command un-judged (a host without the hook, a relay started before the lease) is taken at its "
        "word and judges beta's checkouts from alpha; the guard refuses the spelling (the test above)"
    ),
)
def test_another_machines_name_run_unjudged_ends_no_job_there(world, tmp_path):
    held, env, command = _spoofed_machine(world, tmp_path)
    beta = world.beta
    aside = beta.clone + ".elsewhere"
    os.rename(beta.clone, aside)  # alpha's filesystem: beta's checkout is not there
    try:
        ran = subprocess.run(
            ["bash", "-c", command],
            cwd=held,
            env=dict(env, BAGGAGE="proctor.lease=aw"),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.rename(aside, beta.clone)
    row = beta.jobs()["bw"]
    assert row["state"] == "running", f"run on alpha it printed {ran.stderr.strip()[:200]!r}: {row.get('end_reason')}"


# -- 6. keys, schema versions, hostile rows and values -------------------------------------------------


def test_jobs_declared_before_the_first_commit_survive_it_on_postgresql(pg, tmp_path, monkeypatch):
    """README: "A repository with no commit yet is keyed by its git directory until its first
    commit, when its store is carried over." On PostgreSQL the store is a schema named by that
    key; after the first commit the guard must still judge the holder of a job declared before
    it (a write outside its paths denied), and ls jobs must list the job."""
    root = tmp_path / "new"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "proctor.toml").write_text(CONFIG)
    monkeypatch.chdir(root)
    api.fork({"id": "early", "write_paths": ["a.py"], "check": "test"}, cwd=str(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    real = os.path.realpath(str(root))
    answer = _hook(real, "Write", {"file_path": os.path.join(real, "proctor.toml"), "content": "x"}, lease="early")
    assert "early" in _job_ids(real) and _denied(answer), (
        f"after the first commit: jobs {sorted(_job_ids(real))}; the guard said {_said(answer)!r}"
    )


def test_a_schema_written_by_a_newer_proctor_is_refused_not_rewritten(pg, tmp_path, monkeypatch):
    """A schema whose proctor_meta says version 99: every CLI command refuses it (exit 2, naming
    the version), the version is left as it was, and the hook does not crash."""
    cluster, database, _url = pg
    root = _leased_repo(tmp_path, monkeypatch)
    schema = next(iter(_schemas(cluster, database)))
    cluster.execute(f"UPDATE \"{schema}\".proctor_meta SET value = '99' WHERE key = 'schema_version'", db=database)
    done = _cli("ls", "jobs", cwd=root)
    assert done.code == 2 and "newer than this proctor" in done.err, done.out + done.err
    assert "Traceback" not in done.err
    answer = _hook_process(
        root, "Write", {"file_path": os.path.join(root, "src", "b.py"), "content": "y"}, dict(os.environ), lease="w1"
    )
    assert isinstance(answer, dict)
    version = cluster.execute(f"SELECT value FROM \"{schema}\".proctor_meta WHERE key = 'schema_version'", db=database)
    assert version == [("99",)], version


def test_a_hostile_schema_version_row_is_an_answer_not_a_traceback(pg, tmp_path, monkeypatch):
    """A store row that is not what proctor wrote (proctor_meta's version 'x'): proctor cannot
    answer (exit 2, a message), never a traceback; the hook fails open without one either."""
    cluster, database, _url = pg
    root = _leased_repo(tmp_path, monkeypatch)
    schema = next(iter(_schemas(cluster, database)))
    cluster.execute(f"UPDATE \"{schema}\".proctor_meta SET value = 'x' WHERE key = 'schema_version'", db=database)
    done = _cli("ls", "jobs", cwd=root)
    proc = subprocess.run(
        [sys.executable, "-m", "proctor", "hook", "claude"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        input=json.dumps(
            {
                "session_id": "s1",
                "transcript_path": "/tmp/none.jsonl",
                "cwd": root,
                "hook_event_name": "PreToolUse",
                "tool_name": "Write",
                "tool_input": {"file_path": os.path.join(root, "README"), "content": "y"},
            }
        ),
    )
    problems = []
    if done.code != 2 or "Traceback" in done.err:
        problems.append(f"ls jobs exited {done.code}: {done.err.strip().splitlines()[-1:]}")
    if proc.returncode != 0 or "Traceback" in proc.stderr:
        problems.append(f"the hook exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    assert not problems, problems


def test_quotes_and_placeholders_in_ids_and_paths_are_data(pg, tmp_path, monkeypatch):
    """A write path holding `'`, `?`, `$1`, `%s` and `--` goes through both clients (psycopg for the
    CLI, pgwire for the guard) as data: stored as spelled, and the guard finds its owner."""
    root = _leased_repo(tmp_path, monkeypatch)
    spelled = "odd/it's ?$1 %s --x.py"
    api.fork({"id": "odd", "write_paths": [spelled], "check": "test"}, cwd=root)
    rows = {r["id"]: r for r in _cli("ls", "jobs", "-o", "json", cwd=root).json()["jobs"]}
    assert rows["odd"]["write_paths"] == [spelled]
    answer = _hook(root, "Write", {"file_path": os.path.join(root, spelled), "content": "y"}, lease="w1")
    assert _denied(answer), _said(answer)
    assert "odd" in _said(answer), _said(answer)


def test_a_connection_dropped_inside_a_write_lands_nothing(pg, tmp_path, monkeypatch):
    """A write transaction whose connection is ended before COMMIT (pg_terminate_backend): the
    caller gets a StoreError, nothing of the transaction lands, and the next write on a new
    store works."""
    from proctor.errors import StoreError
    from proctor.store import rows
    from proctor.workspace import Workspace

    cluster, database, _url = pg
    root = _leased_repo(tmp_path, monkeypatch)
    ws = Workspace(root, warn=lambda _line: None)
    store = ws.store
    pid = store.tx.scalar("SELECT pg_backend_pid()")
    with pytest.raises(StoreError):
        with store.write() as tx:
            job = rows.get(tx, "w1")
            job["criteria"] = "half-written"
            rows.put(tx, job, job["_root"], job["_depth"])
            tx.execute("DELETE FROM jobs WHERE id = 'other'")
            cluster.execute("SELECT pg_terminate_backend($1::int)", (pid,), db=database)
            time.sleep(0.2)
    assert store.broken()
    store.close()
    fresh = Workspace(root, warn=lambda _line: None)
    with fresh.store.read() as tx:
        assert rows.get(tx, "w1").get("criteria") != "half-written"
        assert rows.get(tx, "other") is not None
    fresh.close()
