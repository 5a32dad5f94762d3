"""Two machines on one PostgreSQL store, simulated on this host.

Each "machine" is a clone of one repository (cloned from a bare origin) in a directory of its
own, with its own PROCTOR_STATE_DIR, XDG_CACHE_HOME, XDG_STATE_HOME, HOME and PROCTOR_MACHINE
(alpha, beta), and both name one PostgreSQL store (PROCTOR_STORE_URL). Everything the
scenario does goes through real `python -m proctor` processes (or, for the concurrency test,
real Python processes using the library) with that machine's environment, so nothing can pass
from one "machine" to the other through Python state: only through the store.

The rules held here: a job taken on beta and waited for from alpha is graded on the diff
recorded on beta when the result was filed (rule `diff-read-where-taken`), and never passes
with nothing recorded; a result is filed only on the machine that holds the job (PRC3060); a
checkout that is gone is judged so only on the machine that took it; a run cited as evidence
must come from the machine that holds the job; and 32 writers from both sides lose nothing.

These tests always run on PostgreSQL, whatever the pass, each on a database of its own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

from tests.support import Result

PYTHON_TIMEOUT = 120

CONFIG = """\
[targets.test]
command = "grep done src/a.py"
timeout = "1m"

[targets.lint]
command = "true"
"""


def _git(cwd: str, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


@dataclass
class Machine:
    """One simulated machine: its name, its environment, and its clones of the repository."""

    name: str
    env: dict
    home: str
    origin: str
    clones: dict = field(default_factory=dict)

    @property
    def clone(self) -> str:
        """The machine's first clone."""
        return self.clones["main"]

    def add_clone(self, label: str) -> str:
        path = os.path.join(self.home, label)
        _git(self.home, "clone", "-q", self.origin, path)
        self.clones[label] = os.path.realpath(path)
        return self.clones[label]

    def proctor(self, *argv: str, cwd: str | None = None, stdin: str | None = None) -> Result:
        """`python -m proctor ARGV` as a process of this machine, in `cwd` (its first clone)."""
        proc = subprocess.run(
            [sys.executable, "-m", "proctor", *argv],
            cwd=cwd or self.clone,
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=PYTHON_TIMEOUT,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *argv: str, cwd: str | None = None, stdin: str | None = None) -> Result:
        done = self.proctor(*argv, cwd=cwd, stdin=stdin)
        assert done.code == 0, f"[{self.name}] proctor {' '.join(argv)} exited {done.code}:\n{done.out}\n{done.err}"
        return done

    def run_check(self, target: str = "test", cwd: str | None = None) -> dict:
        """`proctor run TARGET -o json`: the run's record (its id and output_ref to cite)."""
        done = self.proctor("run", target, "-o", "json", cwd=cwd)
        assert done.code in (0, 1), f"[{self.name}] proctor run {target}: {done.out}\n{done.err}"
        return json.loads(done.out)

    def file_result(
        self, job_id: str, *made: dict, changed=("src/a.py",), cwd: str | None = None, extra: tuple = ()
    ) -> Result:
        record = {
            "schema_version": 2,
            "changed_paths": list(changed),
            "validation": [{"run": m["id"], "output_ref": m["output_ref"]} for m in made],
            "status": "done",
        }
        return self.proctor("job", "exit", job_id, "--stdin", *extra, cwd=cwd, stdin=json.dumps(record))

    def jobs(self, cwd: str | None = None) -> dict:
        """`proctor ls jobs -o json` on this machine, by id."""
        done = self.ok("ls", "jobs", "-o", "json", cwd=cwd)
        return {row["id"]: row for row in done.json()["jobs"]}

    def stored(self, job_id: str) -> dict:
        """A job's record as the store holds it, read through this machine's store (the listing
        leaves out what only the store reads, such as the digest of the job's secret)."""
        script = (
            "import json, sys\nfrom proctor.store import rows\nfrom proctor.workspace import Workspace\n"
            "with Workspace(sys.argv[1], warn=lambda line: None) as ws, ws.store.read() as tx:\n"
            "    print(json.dumps(rows.record(tx, sys.argv[2])))\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", script, self.clone, job_id],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=PYTHON_TIMEOUT,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)


@dataclass
class World:
    alpha: Machine
    beta: Machine
    url: str
    base: str


def _machine_env(name: str, base: str, url: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PROCTOR_", "XDG_", "PG")) and k not in ("BAGGAGE", "HOME")
    }
    env.update(
        PROCTOR_STORE_URL=url,
        PROCTOR_MACHINE=name,
        PROCTOR_STATE_DIR=os.path.join(base, f"{name}-state"),
        XDG_CACHE_HOME=os.path.join(base, f"{name}-cache"),
        XDG_STATE_HOME=os.path.join(base, f"{name}-xdg-state"),
        HOME=os.path.join(base, f"{name}-home"),
        PROCTOR_BUSY_TIMEOUT="60",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.invalid",
    )
    os.makedirs(env["HOME"], exist_ok=True)
    return env


@pytest.fixture
def world(tmp_path, request):
    """A bare origin holding proctor.toml and src/a.py, cloned once on alpha and once on beta;
    both machines on one PostgreSQL database of this test's own."""
    from tests.store.pgcluster import require_cluster

    cluster = require_cluster()
    database = "tm_" + re.sub(r"[^a-z0-9]", "_", request.node.name.lower())[:40] + "_" + os.urandom(4).hex()
    cluster.create_database(database)
    url = cluster.url(database)
    base = os.path.realpath(str(tmp_path))
    seed = os.path.join(base, "seed")
    os.makedirs(seed)
    _git(seed, "init", "-q", "-b", "main")
    _write(os.path.join(seed, "proctor.toml"), CONFIG)
    _write(os.path.join(seed, "src", "a.py"), "x = 1\n")
    _write(os.path.join(seed, "src", "b.py"), "y = 1\n")
    _git(seed, "add", "-A")
    _git(seed, "commit", "-q", "-m", "init")
    origin = os.path.join(base, "origin.git")
    _git(base, "clone", "-q", "--bare", seed, origin)
    shutil.rmtree(seed)
    machines = []
    for name in ("alpha", "beta"):
        home = os.path.join(base, name)
        os.makedirs(home)
        machine = Machine(name, _machine_env(name, base, url), home, origin)
        machine.add_clone("main")
        machines.append(machine)
    try:
        yield World(machines[0], machines[1], url, base)
    finally:
        cluster.drop_database(database)


# -- 1. the round trip across machines -------------------------------------------------------------


def test_fork_on_alpha_work_on_beta_wait_on_alpha_passes(world):
    """The orchestrator on alpha forks; a worker on beta takes the job in its clone, edits,
    runs the check and files its result citing that run; the orchestrator's wait on alpha
    passes, graded on the diff beta recorded (rule diff-read-where-taken, naming beta). The job
    shows on alpha, and the run's output is readable from alpha (blobs live in the store)."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w1", "--criteria", "finish a.py", "--write-paths", "src/a.py", "--check", "test")
    taken = beta.ok("job", "exec", "w1")
    assert "took w1 in " + beta.clone in taken.out
    _write(os.path.join(beta.clone, "src", "a.py"), "done = 'by beta, w1'\n")
    made = beta.run_check("test")
    assert made["exit_code"] == 0 and made["machine"] == "beta" and made["lease"] == "w1"
    filed = beta.file_result("w1", made)
    assert filed.code == 0, filed.out + filed.err

    # the orchestrator's view from alpha, before it waits
    row = alpha.jobs()["w1"]
    assert row["state"] == "exited" and row["machine"] == "beta" and row["checkout_root"] == beta.clone
    assert row["declared_on"] == "alpha"
    assert row["observed"]["machine"] == "beta" and row["observed"]["changed"] == ["src/a.py"]

    waited = alpha.proctor("job", "wait", "w1", "-o", "json")
    assert waited.code == 0, waited.out + waited.err
    answer = waited.json()
    assert answer["state"] == "pass"
    outcomes = {o["name"]: o for o in answer["grade"]["outcomes"]}
    assert all(o["ok"] for o in outcomes.values()), outcomes
    note = outcomes["diff-read-where-taken"]
    assert note["ok"] and "machine beta" in note["subjects"][0], note
    assert "this machine (alpha) cannot read " + beta.clone in note["subjects"][0]
    assert outcomes["check"]["ok"] and made["id"] in outcomes["check"]["subjects"][0]
    assert answer["grade"]["changed"] == ["src/a.py"]

    assert alpha.jobs()["w1"]["state"] == "pass"
    assert beta.jobs()["w1"]["state"] == "pass", "beta reads the verdict alpha recorded"
    # the run's output, recorded on beta, read back on alpha (whose state dir holds no blob)
    output = alpha.proctor("query", "output", made["output_ref"])
    assert output.code == 0, output.err
    assert output.out == "done = 'by beta, w1'\n"
    assert made["output_ref"].split(":")[1] not in " ".join(
        name for _dir, _dirs, names in os.walk(world.base + "/alpha-state") for name in names
    )


# -- 2. nothing recorded where it was taken --------------------------------------------------------


def test_a_job_taken_elsewhere_with_nothing_filed_never_passes_from_here(world):
    """A job taken on beta and worked there (its check run and passing), no result filed:
    alpha's wait does not pass; it cannot answer (exit 2, PRC3054: nothing filed) and leaves
    the job running. alpha's describe, which grades now and writes nothing, has its check
    unmet."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w2", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w2")
    _write(os.path.join(beta.clone, "src", "a.py"), "done = 2\n")
    assert beta.run_check("test")["exit_code"] == 0

    for argv in (("job", "wait", "w2", "-o", "json"), ("job", "wait", "w2")):
        waited = alpha.proctor(*argv)
        assert waited.code == 2, (argv, waited.out, waited.err)
        assert "PRC3054" in waited.out + waited.err, waited.out + waited.err
        assert "nothing was filed for w2 (it is running)" in waited.out + waited.err
        assert "pass" not in waited.out
    assert alpha.jobs()["w2"]["state"] == "running"

    described = alpha.proctor("describe", "job", "w2")
    assert described.code == 0, described.err
    assert "check: unmet: no result is filed" in described.out, described.out
    assert ": met:" not in described.out
    assert alpha.jobs()["w2"]["state"] == "running", "describe writes nothing"


def test_a_filed_result_without_beta_s_observation_fails_on_alpha(world):
    """The same rule at the wait itself: a result on file for a job taken on beta, but no diff
    recorded on beta with it (the record is dropped here by a process of beta's, as a store
    from before observations were recorded would hold it). alpha's wait fails, saying the
    checkout cannot be read from alpha and where to wait instead; never a pass."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w2", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w2")
    _write(os.path.join(beta.clone, "src", "a.py"), "done = 2\n")
    made = beta.run_check("test")
    assert beta.file_result("w2", made).code == 0
    drop = (
        "from proctor.store import rows\nfrom proctor.workspace import Workspace\n"
        "ws = Workspace()\nwith ws.store.write() as conn:\n"
        "    job = rows.get(conn, 'w2'); job.pop('observed'); rows.put(conn, job, job['_root'], job['_depth'])\n"
        "ws.close()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", drop],
        cwd=beta.clone,
        env=beta.env,
        capture_output=True,
        text=True,
        timeout=PYTHON_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr

    waited = alpha.proctor("job", "wait", "w2", "-o", "json")
    assert waited.code == 1, waited.out + waited.err
    answer = waited.json()
    assert answer["state"] == "fail"
    failed = {o["name"]: o for o in answer["grade"]["outcomes"] if not o["ok"]}
    assert "diff-readable" in failed, answer["grade"]["outcomes"]
    said = failed["diff-readable"]["subjects"][0]
    assert f"{beta.clone} on machine beta, which this machine (alpha) cannot read" in said, said
    assert "diff-read-where-taken" not in {o["name"] for o in answer["grade"]["outcomes"]}
    assert alpha.jobs()["w2"]["state"] == "fail"


# -- 3. a result is filed where the job is held -----------------------------------------------------


def test_filing_a_result_from_another_machine_is_refused(world):
    """alpha files a result for a job taken on beta, citing beta's own good run, as the
    orchestrator and under the job's lease: refused, PRC3060, naming beta; the job stays
    running, and beta files it."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w3", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w3")
    _write(os.path.join(beta.clone, "src", "a.py"), "done = 3\n")
    made = beta.run_check("test")
    assert made["exit_code"] == 0

    for extra in ((), ("--lease", "w3")):
        refused = alpha.file_result("w3", made, extra=extra)
        assert refused.code == 1, (extra, refused.out, refused.err)
        assert "PRC3060" in refused.err, (extra, refused.err)
        assert f"taken in {beta.clone} on machine beta" in refused.err, (extra, refused.err)
        assert alpha.jobs()["w3"]["state"] == "running"
        assert not alpha.jobs()["w3"].get("result")

    assert beta.file_result("w3", made).code == 0
    assert alpha.ok("job", "wait", "w3").code == 0


# -- 4. a checkout gone is judged where it was taken ------------------------------------------------


def test_a_deleted_checkout_ends_its_job_only_on_its_own_machine(world):
    """A job taken on beta in a clone of its own, which is then deleted. On alpha, where that
    path means nothing, every command that reads the store (ls jobs, doctor, describe, wait,
    fork of another job) leaves it running; the first command on beta, in another clone of
    the repository, ends it as no_return naming the missing checkout."""
    alpha, beta = world.alpha, world.beta
    doomed = beta.add_clone("w4-clone")
    elsewhere = beta.add_clone("other")
    alpha.ok("job", "fork", "w4", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w4", cwd=doomed)
    assert alpha.jobs()["w4"]["state"] == "running"
    shutil.rmtree(doomed)

    said = []
    for argv in (
        ("ls", "jobs"),
        ("ls", "jobs", "-o", "json"),
        ("doctor",),
        ("describe", "job", "w4"),
        ("job", "wait", "w4"),
        ("job", "fork", "other", "--write-paths", "src/b.py", "--check", "test"),
    ):
        done = alpha.proctor(*argv)
        said.append((argv, done.code, done.out + done.err))
        assert "ended w4" not in done.out + done.err, (argv, done.out, done.err)
    row = alpha.jobs()["w4"]
    assert row["state"] == "running", (row.get("end_reason"), said)
    assert row["machine"] == "beta" and row["checkout_root"] == doomed

    done = beta.proctor("ls", "jobs", cwd=elsewhere)
    assert done.code == 0, done.err
    assert f"ended w4: taken in {doomed}, which no longer exists" in done.err, done.err
    row = alpha.jobs()["w4"]
    assert row["state"] == "no_return"
    assert row["end_reason"] == f"taken in {doomed}, which no longer exists"
    assert alpha.jobs()["other"]["state"] == "declared", "only the job whose checkout went"


# -- 5. evidence comes from the machine that holds the job ------------------------------------------


def test_a_run_made_on_the_other_machine_is_not_evidence(world):
    """A job taken on beta. A passing run of its check made on alpha, in alpha's clone, and
    one made on alpha at the very path of beta's checkout with the very same tree (as if both
    machines had /src/app): either, cited in beta's result, is refused (PRC3056) naming the
    machine it was made on. beta's own run of the same tree then files, and alpha's wait
    passes: the machine alone was the reason."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w5", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w5")
    _write(os.path.join(beta.clone, "src", "a.py"), "done = 5\n")
    _write(os.path.join(alpha.clone, "src", "a.py"), "done = 5\n")
    on_alpha = alpha.run_check("test")
    same_path = alpha.run_check("test", cwd=beta.clone)
    mine = beta.run_check("test")
    for run in (on_alpha, same_path, mine):
        assert run["exit_code"] == 0, run
    assert on_alpha["machine"] == same_path["machine"] == "alpha" and mine["machine"] == "beta"
    assert same_path["checkout"] == mine["checkout"] == beta.clone
    assert same_path["tree"] == mine["tree"], "the same path, the same tree: only the machine differs"
    assert same_path["lease"] is None, "beta's binding of that path is beta's, not alpha's"

    for cited in (on_alpha, same_path):
        refused = beta.file_result("w5", cited)
        assert refused.code == 1, refused.out + refused.err
        assert "PRC3056" in refused.err, refused.err
        assert f"run {cited['id']} was made on machine alpha, not on beta" in refused.err, refused.err
        assert beta.jobs()["w5"]["state"] == "running"
    refused = beta.file_result("w5", mine, same_path)
    assert refused.code == 1 and f"run {same_path['id']} was made on machine alpha" in refused.err

    assert beta.file_result("w5", mine).code == 0
    waited = alpha.proctor("job", "wait", "w5", "-o", "json")
    assert waited.code == 0, waited.out + waited.err


# -- 6. sixteen writers a side -----------------------------------------------------------------------

WRITER = r"""
import os, sys, time
from proctor import api
from proctor.store import rows
from proctor.workspace import Workspace

tag, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
quiet = lambda line: None
ws = Workspace(warn=quiet)
with ws.store.read() as conn:  # connected and migrated before the start
    assert rows.get(conn, "shared") is not None
deadline = time.time() + 60
while not os.path.exists(go):
    assert time.time() < deadline, "never started"
    time.sleep(0.01)
for k in range(n):
    with ws.store.write() as conn:
        job = rows.get(conn, "shared")
        seen = int(job.get("counter") or 0)
        time.sleep(0.001)  # widen the window a lost update would need
        job["counter"] = seen + 1
        job.setdefault("writers", []).append(tag)
        rows.put(conn, job, job["_root"], job["_depth"])
    if k == n // 2:
        for j in range(3):
            api.fork({"id": f"{tag}/j{j}", "check": "test", "write_paths": [f"w/{tag}/{j}.py"]}, warn=quiet)
ws.close()
print("ok", tag)
"""


def test_sixteen_writers_on_each_machine_lose_no_update(world):
    """16 processes with alpha's environment and 16 with beta's, released together, each
    doing N read-modify-write transactions on one job's record through the library and
    forking three jobs of its own: the counter ends at 32*N, every writer's every increment is
    there, and every forked job exists, as each machine reads it."""
    alpha, beta = world.alpha, world.beta
    n = 20
    alpha.ok("job", "fork", "shared", "--write-paths", "src/a.py", "--check", "test")
    go = os.path.join(world.base, "go")
    procs = []
    for machine in (alpha, beta):
        for i in range(16):
            tag = f"{machine.name}{i}"
            procs.append(
                (
                    tag,
                    subprocess.Popen(
                        [sys.executable, "-c", WRITER, tag, str(n), go],
                        cwd=machine.clone,
                        env=machine.env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    ),
                )
            )
    # every writer connected (or failed) before the start: release them together
    time.sleep(0.5)
    _write(go, "go\n")
    failures = []
    for tag, proc in procs:
        out, err = proc.communicate(timeout=240)
        if proc.returncode != 0 or out.strip() != f"ok {tag}":
            failures.append((tag, proc.returncode, err[-2000:]))
    assert not failures, failures

    for machine in (alpha, beta):
        rows = machine.jobs()
        shared = rows["shared"]
        assert shared["counter"] == 32 * n, (machine.name, shared.get("counter"))
        assert sorted(shared["writers"]) == sorted(
            f"{m}{i}" for m in ("alpha", "beta") for i in range(16) for _ in range(n)
        )
        forked = {job_id for job_id in rows if "/j" in job_id}
        assert forked == {f"{m}{i}/j{j}" for m in ("alpha", "beta") for i in range(16) for j in range(3)}, (
            machine.name,
            len(forked),
        )
        for job_id in forked:
            assert rows[job_id]["declared_on"] == job_id.split("/")[0].rstrip("0123456789")
            assert rows[job_id]["state"] == "declared"


def test_taking_on_alpha_a_job_held_on_beta_at_the_same_path_is_no_retake(world):
    """alpha, at the very path beta took w7 in (both machines have it), runs job exec w7:
    refused as held on beta (the path alone is not the checkout), not treated as a retake
    that records alpha's base; the job keeps beta's record."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w7", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w7")
    before = alpha.stored("w7")
    done = alpha.proctor("job", "exec", "w7", cwd=beta.clone)
    assert done.code == 1, done.out + done.err
    assert f"taken in {beta.clone} on machine beta" in done.err, done.err
    after = alpha.stored("w7")
    assert (after["machine"], after["taken"], after["base"], after["nonce_sha256"]) == (
        before["machine"],
        before["taken"],
        before["base"],
        before["nonce_sha256"],
    )


def test_describe_points_the_holder_at_a_run_it_can_cite(world):
    """Before its result, beta's describe of its job names the latest run of the check
    "there" as the one to cite. A run alpha made later at the same path (the same tree) is one
    beta's result cannot cite (PRC3056, made on machine alpha): the hint must name beta's own
    run, not alpha's."""
    alpha, beta = world.alpha, world.beta
    alpha.ok("job", "fork", "w8", "--write-paths", "src/a.py", "--check", "test")
    beta.ok("job", "exec", "w8")
    _write(os.path.join(beta.clone, "src", "a.py"), "done = 8\n")
    mine = beta.run_check("test")
    time.sleep(0.01)
    theirs = alpha.run_check("test", cwd=beta.clone)
    assert mine["exit_code"] == theirs["exit_code"] == 0 and theirs["started"] > mine["started"]
    refused = beta.file_result("w8", theirs)
    assert refused.code == 1 and "made on machine alpha" in refused.err, refused.err

    described = beta.ok("describe", "job", "w8").out
    assert "check: unmet: no result is filed" in described, described
    assert theirs["id"] not in described, (
        f"describe on beta offers alpha's run {theirs['id']}, which beta's result cannot cite:\n{described}"
    )
    assert f"the latest run of test there is {mine['id']}" in described, described
