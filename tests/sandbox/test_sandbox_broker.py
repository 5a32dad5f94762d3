"""The store broker (proctor/broker.py): a sandboxed worker (`[sandbox] workers = true`) cannot
open proctor's store, and its `proctor` commands run through `proctor work`'s broker, as its own
job, in its own grant, with proctor's environment and interpreter. Every test runs `proctor
work` (or the broker) as real processes on this kernel; the disk, the store and the exit
statuses are the oracle, never the worker's word."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

import pytest

from proctor import broker, sandbox
from proctor.workspace import Workspace
from tests.support import machine_wide
from tests.sandbox.test_sandbox import _fork
from tests.sandbox.test_sandbox_worker_adversary import _marks, _row, _setup, _work

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(
    ABI == 0 and os.environ.get("CI") != "true",
    reason="this kernel offers no Landlock; CI's kernel does, and there these tests run",
)


def _trail(root: str, job: str, kind: str) -> list[dict]:
    from proctor import trail

    with Workspace(root, warn=lambda line: None) as ws, ws.store.read() as tx:
        return trail.events(tx, job, kind)


def _store_files(root: str) -> list[str]:
    with Workspace(root, warn=lambda line: None) as ws:
        state = ws.state_dir
    return [p for p in glob.glob(os.path.join(state, "*")) if os.path.isfile(p)]


# -- the worker's side: no store of its own, its commands served --------------------------------


@pytest.mark.sqlite_store  # the store's own files: on PostgreSQL there are none to open
def test_the_worker_files_its_result_through_the_broker_and_cannot_open_the_store(tmp_path):
    """The worker writes its file, tries the store's files directly (sqlite3 and a plain append),
    and files its result with `proctor job exit` (the stand-in's own call): the result is filed
    and graded, the store's files are unchanged by the worker, and the trail says what the broker
    ran."""
    root, env = _setup(tmp_path)
    files = _store_files(root)
    assert any(f.endswith(".db") or "store" in os.path.basename(f) for f in files), files
    db = next(f for f in files if f.endswith(".db"))
    probe = (
        f'{sys.executable} -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); '
        f"c.execute('create table planted(a)'); c.commit()\" {db} 2>/dev/null "
        f"&& echo sqlite-wrote >> $MARKS/db || echo sqlite-refused >> $MARKS/db; "
        f'for f in {" ".join(files)}; do (echo x >> "$f") 2>/dev/null && echo "appended $f" >> $MARKS/db; done; '
        f"true"
    )
    done, payload = _work(root, "plan/c", env, 'echo "ok = True" > src/a.py; ' + probe)
    assert payload is not None, done.stdout + done.stderr
    assert _marks(tmp_path, "db").strip() == "sqlite-refused", _marks(tmp_path, "db")
    assert payload["passed"] is True, done.stdout[-2000:] + done.stderr[-2000:]
    job = _row(root, "plan/c")
    assert (job.get("result") or {}).get("summary") == "did it", job.get("result")
    served = _trail(root, "plan/c", "sandbox_broker")
    assert served and served[-1]["data"]["served"] >= 1, served
    import sqlite3

    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
    assert tables and "planted" not in tables


def test_a_worker_cannot_end_or_work_a_sibling_through_the_broker(tmp_path):
    """The worker names plan/d (its sibling) every way it can: BAGGAGE, --lease, and the job
    argument of `job exit`; and asks for `proctor work plan/d`, `proctor server start` and
    `proctor store migrate`. plan/d is left as it was forked, and each refusal says why."""
    root, env = _setup(tmp_path)
    _fork(root, {"id": "plan/d", "parent": "plan", "criteria": "d", "check": "test", "write_paths": ["other/b.py"]})
    before = _row(root, "plan/d")
    record = json.dumps({"schema_version": 1, "status": "done", "summary": "forged"}).replace('"', '\\"')
    shell = (
        'echo "ok = True" > src/a.py; '
        f'echo "{record}" | BAGGAGE=proctor.lease=plan/d proctor job exit plan/d --stdin 2>> $MARKS/exit; '
        'echo "exit-by-baggage $?" >> $MARKS/codes; '
        f'echo "{record}" | proctor job exit plan/d --stdin --lease plan/d 2>> $MARKS/exit; '
        'echo "exit-by-flag $?" >> $MARKS/codes; '
        'proctor work plan/d 2>> $MARKS/work; echo "work $?" >> $MARKS/codes; '
        'proctor server start 2>> $MARKS/work; echo "server $?" >> $MARKS/codes; '
        'proctor store migrate --to sqlite:/tmp/x 2>> $MARKS/work; echo "store $?" >> $MARKS/codes; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None, done.stdout + done.stderr
    codes = dict(line.rsplit(" ", 1) for line in _marks(tmp_path, "codes").splitlines())
    assert set(codes) == {"exit-by-baggage", "exit-by-flag", "work", "server", "store"}, codes
    assert all(code != "0" for code in codes.values()), (codes, _marks(tmp_path, "exit"))
    after = _row(root, "plan/d")
    assert after.get("result") == before.get("result") and after["state"] == before["state"], after
    work = _marks(tmp_path, "work")
    for word in ("work", "server", "store"):
        assert f"`proctor {word}`" in work, work
    assert payload["passed"] is True, done.stdout[-2000:]


def test_a_worker_hands_over_no_command_from_outside_its_checkout(tmp_path):
    """From the main checkout (bound to no job of the worker's) the broker runs nothing."""
    root, env = _setup(tmp_path)
    shell = (
        'echo "ok = True" > src/a.py; cd "$MAIN" && proctor ls jobs 2>> $MARKS/cwd; echo "code $?" >> $MARKS/cwd; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    text = _marks(tmp_path, "cwd")
    assert "code 2" in text and "its own checkout" in text, text


def test_a_target_the_worker_runs_never_writes_the_store(tmp_path):
    """plan/e may write proctor.toml: its worker turns the sandbox off there and runs a target
    that appends to every file of proctor's state, under its own lease and under --lease plan (the
    root, which narrows nothing). The target runs (its mark in TMPDIR's sibling lands) and no
    file of the state changes."""
    root, env = _setup(tmp_path, extra='\n[targets.plant]\ncommand = "sh $PLANT"\ntimeout = "30s"\n')
    _fork(
        root,
        {
            "id": "plan/e",
            "parent": "plan",
            "criteria": "e",
            "check": "test",
            "write_paths": ["src/a.py", "proctor.toml"],
        },
    )
    with Workspace(root, warn=lambda line: None) as ws:
        state = ws.state_dir
    plant = tmp_path / "tool" / "plant.sh"
    plant.write_text(
        f'echo ran >> "{tmp_path}/tool/ran"\n'
        f'for f in $(find "{state}" -type f); do (echo planted >> "$f") 2>/dev/null && '
        f'echo "$f" >> "{tmp_path}/tool/planted"; done\n'
        f'(echo x > "{state}/new-by-target") 2>/dev/null && echo new >> "{tmp_path}/tool/planted"; true\n'
    )
    shell = (
        'echo "ok = True" > src/a.py; '
        'sed -i \'s/mode = "landlock"/mode = "off"/\' proctor.toml; '
        "proctor run plant >/dev/null 2>&1; proctor run plant --lease plan >/dev/null 2>&1; "
        "proctor run plant --orchestrator >/dev/null 2>&1; true"
    )
    done, payload = _work(root, "plan/e", env, shell, PLANT=str(plant))
    ran = _marks(tmp_path, "ran").split()
    assert len(ran) >= 2, (ran, done.stdout[-1500:], done.stderr[-1500:])
    assert _marks(tmp_path, "planted") == "", _marks(tmp_path, "planted")
    assert not os.path.exists(os.path.join(state, "new-by-target"))


def test_the_worker_cannot_change_the_code_its_broker_runs(tmp_path):
    """The broker runs proctor from this interpreter: the worker tries a .pth in site-packages,
    a module in proctor's package and a file in the virtual environment. None lands."""
    import site

    import proctor

    root, env = _setup(tmp_path)
    package = os.path.dirname(os.path.realpath(proctor.__file__))
    targets = [os.path.join(p, "zz_planted_by_worker.pth") for p in site.getsitepackages() if os.path.isdir(p)]
    targets.append(os.path.join(package, "zz_planted_by_worker.py"))
    if sys.prefix != sys.base_prefix:
        targets.append(os.path.join(sys.prefix, "zz_planted_by_worker"))
    try:
        shell = (
            'echo "ok = True" > src/a.py; '
            + "; ".join(f'(echo "# planted" > "{t}") 2>/dev/null && echo "{t}" >> $MARKS/planted' for t in targets)
            + "; true"
        )
        done, payload = _work(root, "plan/c", env, shell)
        assert payload is not None, done.stdout + done.stderr
        landed = [t for t in targets if os.path.exists(t)]
        assert landed == [], landed
        assert payload["passed"] is True, done.stdout[-1500:]
    finally:
        for t in targets:
            if os.path.exists(t):
                os.unlink(t)


# -- the broker itself -------------------------------------------------------------------------


class _Open:
    """A stand-in for the brokered domain: no narrowing (the unit tests read the broker's own
    rules: who it serves, the environment it builds, its handling of a client that leaves)."""

    def env(self, env: dict) -> dict:
        return dict(env)

    def preexec(self) -> None:
        pass


def _broker(tmp_path, root: str, allowed, base: dict | None = None) -> broker.Broker:
    path = str(tmp_path / "b" / "sock")
    env = dict(os.environ) if base is None else base
    return broker.Broker(path, "plan/c", root, _Open(), env, allowed).start()


def _client(path: str, argv: list[str], cwd: str, env: dict | None = None, **kw) -> subprocess.Popen:
    full = dict(os.environ, **(env or {}))
    full[broker.ENV] = path
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", *argv],
        cwd=cwd,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_the_broker_serves_its_attempt_and_refuses_any_other_process(tmp_path, new_repo):
    root = new_repo("repo", "")
    served = _broker(tmp_path, root, lambda pid: True)
    try:
        client = _client(served.path, ["--version"], root)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0 and out.startswith("proctor "), (out, err)
    finally:
        served.close()
    closed = _broker(tmp_path, root, lambda pid: False)
    try:
        client = _client(closed.path, ["--version"], root)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 2 and out == "" and "not of the attempt" in err, (out, err)
        assert closed.served == 0 and closed.refused
    finally:
        closed.close()
    client = _client(closed.path, ["--version"], root)  # the broker gone: said, not hung
    out, err = client.communicate(timeout=60)
    assert client.returncode == 2 and "cannot be reached" in err, err


def test_the_broker_serves_a_process_of_the_attempt_alone(tmp_path):
    """work.py's rule: in the attempt's cgroup or descended from its worker. A process started
    by the worker is served; this test's own process (no worker above it) is not."""
    from proctor.workers.work import _of_attempt

    worker = subprocess.Popen(["sh", "-c", "sh -c 'sleep 30' & wait"])
    try:
        time.sleep(0.3)
        children = subprocess.run(["pgrep", "-P", str(worker.pid)], capture_output=True, text=True).stdout.split()
        allowed = _of_attempt({}, {worker.pid})
        assert children and all(allowed(int(c)) for c in children)
        assert allowed(worker.pid)
        assert not allowed(os.getpid())
        assert not allowed(os.getppid())
    finally:
        worker.kill()
        worker.wait()


def test_the_broker_hands_the_command_proctors_environment_and_pins_the_job(tmp_path, new_repo):
    root = new_repo("repo", "")
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/proctor",
        "PROCTOR_STATE_DIR": "/state",
        "TERM": "dumb",
        "BAGGAGE": "proctor.lease=plan/c",
    }
    served = broker.Broker(str(tmp_path / "s"), "plan/c", root, _Open(), base, lambda pid: True)
    client = {
        "PATH": "/evil/bin",
        "HOME": "/evil",
        "PROCTOR_STATE_DIR": "/evil/state",
        "GIT_DIR": "/evil/.git",
        "GIT_CONFIG_PARAMETERS": "'core.fsmonitor'='evil'",
        "PYTHONPATH": "/evil",
        "LD_PRELOAD": "/evil.so",
        "PROCTOR_STORE_URL": "sqlite:/evil",
        "BASH_ENV": "/evil/rc",
        "OPENSSL_CONF": "/evil/ssl.cnf",
        "CLAUDE_PROJECT_DIR": root,
        "GEMINI_SESSION_ID": "g1",
        "TERM": "xterm",
        "LC_ALL": "C.UTF-8",
        "BAGGAGE": "proctor.lease=plan,other=1",
        broker.ENV: "/evil/sock",
        broker.BROKERED: "plan",
    }
    env = served.env_for(client)
    assert env["PATH"] == "/usr/bin:/bin" and env["HOME"] == "/home/proctor"
    assert env["PROCTOR_STATE_DIR"] == "/state" and env["TERM"] == "dumb"
    for key in (
        "GIT_DIR",
        "GIT_CONFIG_PARAMETERS",
        "PYTHONPATH",
        "LD_PRELOAD",
        "PROCTOR_STORE_URL",
        "BASH_ENV",
        "OPENSSL_CONF",
        broker.ENV,
    ):
        assert key not in env, key
    assert env["CLAUDE_PROJECT_DIR"] == root and env["GEMINI_SESSION_ID"] == "g1" and env["LC_ALL"] == "C.UTF-8"
    assert env["BAGGAGE"] == "proctor.lease=plan/c"  # the worker's own members never merged
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env[broker.BROKERED] == "plan/c"
    assert json.loads(env[broker.CLIENT_ENV]) == client  # the targets' environment, sandboxed beneath


def test_a_client_that_leaves_takes_its_command_with_it(tmp_path, new_repo):
    """The worker's proctor is killed (its host timed the hook out): the command the broker
    started for it, and the target that command runs, end too."""
    root = new_repo("repo", '[targets.slow]\ncommand = "sleep 4; touch late"\ntimeout = "60s"\n')
    served = _broker(tmp_path, root, lambda pid: True)
    try:
        client = _client(served.path, ["run", "slow"], root, start_new_session=True)
        deadline = time.monotonic() + 30
        while not served._children and time.monotonic() < deadline:
            time.sleep(0.05)
        assert served._children, "the broker started nothing"
        time.sleep(1.0)
        client.kill()
        client.wait()
        deadline = time.monotonic() + 30
        while served._children and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not served._children, "the command outlived the client that asked for it"
        time.sleep(4.5)
        assert not os.path.exists(os.path.join(root, "late")), "the target outlived its command"
    finally:
        served.close()


def test_the_pinned_hook_of_a_sandboxed_worker_goes_to_its_broker(tmp_path, monkeypatch):
    from proctor.workers.executors import pinned_hook

    monkeypatch.setenv("PROCTOR_STORE_URL", "postgresql://u:secret@db/x")
    plain = pinned_hook("plan/c", "claude")
    assert "PROCTOR_STORE_URL_FILE" in plain and broker.ENV not in plain
    broker.SERVING["plan/c"] = "/state/brokers/abc"
    try:
        pinned = pinned_hook("plan/c", "claude")
    finally:
        broker.SERVING.pop("plan/c", None)
    assert f"{broker.ENV}=/state/brokers/abc" in pinned
    assert "PROCTOR_STORE_URL" not in pinned and "secret" not in pinned


def test_a_socket_path_longer_than_an_address_still_serves(tmp_path, new_repo):
    root = new_repo("repo", "")
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "sock")
    assert len(path) > 108
    served = broker.Broker(path, "plan/c", root, _Open(), dict(os.environ), lambda pid: True).start()
    try:
        client = _client(path, ["--version"], root)
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0 and out.startswith("proctor "), (out, err)
    finally:
        served.close()


def test_what_the_broker_runs_from_is_narrowed_but_never_the_workers_own_tree(monkeypatch, tmp_path):
    import proctor

    regions = broker.interpreter_regions()
    assert os.path.realpath(sys.executable) in regions
    assert os.path.dirname(os.path.realpath(proctor.__file__)) in regions
    assert any(r.endswith("site-packages") for r in regions), regions
    monkeypatch.setattr(broker, "_RUNS_FROM", ["/", "/home/u", "/home/u/venv", "/usr/bin/git"])
    assert broker.interpreter_regions(keep_writable=("/home/u/work/tree",)) == ["/home/u/venv", "/usr/bin/git"]


def test_a_long_lived_command_speaks_through_the_broker_both_ways(tmp_path, new_repo):
    """`proctor mcp` (the MCP door a host starts on stdio) handed to the broker: the worker's
    pipes are the command's own, so a request written after it started is answered, and it ends
    when its stdin closes."""
    root = new_repo("repo", "")
    served = _broker(tmp_path, root, lambda pid: True)
    try:
        client = subprocess.Popen(
            [sys.executable, "-m", "proctor", "mcp"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ, **{broker.ENV: served.path}),
        )
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        client.stdin.write(json.dumps(request) + "\n")
        client.stdin.flush()
        answer = json.loads(client.stdout.readline())
        assert answer["id"] == 1 and "serverInfo" in answer["result"], answer
        assert served.served == 1
        client.stdin.close()
        assert client.wait(timeout=30) == 0, client.stderr.read()
    finally:
        served.close()


@machine_wide("kernel-audit")
def test_the_kernels_denials_of_the_worker_and_of_its_brokered_commands_reach_the_trail(tmp_path):
    """With the kernel's audit on: the worker's own write into proctor's state, and a command its
    broker ran that wrote outside the grant (`proctor init --force` rewrites proctor.toml, not a
    write path), are each on the trail as sandbox_denial of the job, the second marked brokered."""
    from tests.sandbox.test_sandbox import _audit, audit_switch

    was = sandbox._audit_enabled()
    audit_switch(1)
    try:
        root, env = _setup(tmp_path)
        with Workspace(root, warn=lambda line: None) as ws:
            state = ws.state_dir
        shell = (
            f'echo "ok = True" > src/a.py; (echo x >> "{state}/planted") 2>/dev/null; '
            f"proctor init --force 2>/dev/null; true"
        )
        done, payload = _work(root, "plan/c", env, shell)
    finally:
        _audit(1 if was else 0)
    assert payload is not None, done.stdout + done.stderr
    denials = _trail(root, "plan/c", "sandbox_denial")
    assert all(d["job"] == "plan/c" for d in denials), denials
    mine = [d["data"] for d in denials if not d["data"].get("brokered")]
    brokered = [d["data"] for d in denials if d["data"].get("brokered")]
    assert [(d["path"], d["blockers"], d["attempt"]) for d in mine] == [(os.path.realpath(state), "fs.make_reg", 1)], (
        denials
    )
    # nothing else of a brokered command is refused: no bytecode written beside proctor's modules,
    # no look at the environment of a process outside its domain
    assert [(d["path"].rsplit("/", 1)[-1], d["blockers"]) for d in brokered] == [("proctor.toml", "fs.write_file")], (
        denials
    )


def test_the_modes_a_worker_changes_on_proctors_state_are_put_back(tmp_path):
    """chmod is no write Landlock governs: the worker takes the owner's rights off the store's
    files and the state directory; after its attempt they are back, the attempt fails saying so,
    and the person's next fork writes the store."""
    root, env = _setup(tmp_path)
    with Workspace(root, warn=lambda line: None) as ws:
        state = ws.state_dir
    # the SQLite store's files where the store is SQLite; on PostgreSQL the state directory alone
    files = [p for p in (os.path.join(state, name) for name in ("proctor.db", "proctor.db.lock")) if os.path.exists(p)]
    shell = "; ".join(
        ['echo "ok = True" > src/a.py'] + [f'chmod 400 "{f}"' for f in files] + [f'chmod 500 "{state}"', "true"]
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None, done.stdout[-1500:] + done.stderr[-1500:]
    assert os.stat(state).st_mode & 0o700 == 0o700
    assert all(os.stat(f).st_mode & 0o600 == 0o600 for f in files)
    failures = payload["jobs"][0]["attempts"][0]["failures"]
    assert any("changed the mode" in f and "put its rights back" in f for f in failures), failures
    _fork(root, {"id": "plan/e", "parent": "plan", "criteria": "e", "check": "test", "write_paths": ["other/e.py"]})
    assert _row(root, "plan/e") is not None
