"""A sandboxed worker (`[sandbox] workers = true`) turned adversary: the stand-in CLI runs a shell
command (STANDIN_SHELL) inside its job's Landlock grant and tries to get a write past the boundary
that lands in, or steers, what proctor grades and commits. Each test asserts the promise, so it
fails where the promise breaks; the disk and git are the oracle, never the worker's word.

Every test runs `proctor work` as a real process with HOME pointed at a directory of the test's
own (the worker may write $HOME: the attacks on the person's git config never reach the
machine's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from proctor import sandbox
from tests.support import git
from tests.sandbox.test_sandbox import STANDIN, STREAM, _child, _fork, _repo

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(
    ABI == 0 and os.environ.get("CI") != "true",
    reason="this kernel offers no Landlock; CI's kernel does, and there these tests run",
)

# the worker's tool: rewrite one field of a job's row through proctor's own store API, as any
# process that can write proctor's state (a worker can: it files its result) could
EDIT_ROW = r"""
import json, os, sys
from proctor.store import rows
from proctor.workspace import Workspace
job_id, field, value = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
with Workspace(os.getcwd(), warn=lambda line: None) as ws, ws.store.write() as tx:
    job = rows.get(tx, job_id)
    if field == "check.target":
        job["check"] = dict(job["check"], target=value)
    else:
        job[field] = value
    rows.put(tx, job, job["_root"], job["_depth"])
print("edited", job_id, field, file=sys.stderr)
"""


def _setup(tmp_path, attempts: int = 1, extra: str = "", idle_minutes: float = 0.5) -> tuple[str, dict]:
    """A repository with the sandbox on for workers, a stand-in worker, and the job plan/c
    (write path src/a.py). Returns (root, the env every proctor call of the test gets). A
    worker silent for `idle_minutes` is stopped: 30 s by default. A brokered command the shell
    runs silently (`proctor mcp`, `proctor hook`, git) can take over 3 s on a loaded machine, and a
    shorter limit stopped such a worker mid-way in CI; no test here leans on the idle stop to end
    (the four files that share this world took 83 s with 30 s and 94 s with 3 s). A test whose
    worker is silent on purpose for longer gives it more."""
    root = _repo(tmp_path, workers=True)
    standin = json.dumps([sys.executable, STANDIN])
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write(
            f'\n[targets.always]\ncommand = "true"\ntimeout = "30s"\n'
            f"\n[jobs]\ngrace_seconds = 5\nidle_minutes = {idle_minutes}\n\n[workers]\nattempts = {attempts}\n"
            f'\n[workers.one]\nexecutor = "claude"\ncommand = {standin}\n{extra}'
        )
    git(root, "commit", "-qam", "workers")
    _child(root, write_paths=["src/a.py"], deny_paths=[])
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "edit_row.py").write_text(EDIT_ROW)
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "STANDIN_STREAM": STREAM,
        "STANDIN_WRITE": "",
        "STANDIN_SUMMARY": "did it",
        "EDIT_ROW": f"{sys.executable} {tmp_path}/tool/edit_row.py",
        "MAIN": os.path.realpath(root),
        "MARKS": str(tmp_path / "tool"),
    }
    return root, env


def _run(root: str, *argv: str, env: dict, timeout: int = 90) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "proctor", *argv], cwd=root, env=full, capture_output=True, text=True, timeout=timeout
    )


def _work(root: str, job: str, env: dict, shell: str, **more) -> tuple[subprocess.CompletedProcess, dict | None]:
    done = _run(root, "work", job, "-o", "json", env=dict(env, STANDIN_SHELL=shell, **more))
    try:
        payload = json.loads(done.stdout)
    except ValueError:
        payload = None
    return done, payload


def _committed_since(root: str, base: str) -> set[str]:
    """Every path a commit on the main checkout's branch since `base` touched."""
    out = git(root, "log", "--format=", "--name-only", f"{base}..HEAD")
    return {line for line in out.splitlines() if line}


def _row(root: str, job_id: str) -> dict:
    from proctor.store import rows
    from proctor.workspace import Workspace

    with Workspace(root, warn=lambda line: None) as ws, ws.store.read() as tx:
        return rows.get(tx, job_id)


def _head(root: str) -> str:
    return git(root, "rev-parse", "HEAD").strip()


def _marks(tmp_path, name: str) -> str:
    """What the worker's shell left in $MARKS/<name>, or ""."""
    path = tmp_path / "tool" / name
    return path.read_text(errors="replace") if path.exists() else ""


def _state_dir(root: str) -> str:
    from proctor.workspace import Workspace

    with Workspace(root, warn=lambda line: None) as ws:
        return ws.state_dir


# -- proctor's store: the row the grant and the gates are read from --------------------------------


def test_a_row_the_worker_widened_does_not_widen_its_next_attempt(tmp_path):
    """Attempt 1 rewrites its own row's write paths to ["README", "src/a.py"] through the store
    (which it may write, to file its result) and fails its check; attempt 2, granted from the row
    as it now reads, writes README and passes. What proctor commits must stay within the write
    paths the job was forked with."""
    root, env = _setup(tmp_path, attempts=2)
    base = _head(root)
    mark = f"{tmp_path}/tool/first-done"
    shell = (
        f'if [ -e {mark} ]; then echo widened >> README; echo "ok = True" > src/a.py; '
        f'else touch {mark}; $EDIT_ROW plan/c write_paths \'["README", "src/a.py"]\'; fi'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert os.path.exists(mark), done.stderr
    committed = _committed_since(root, base)
    with open(os.path.join(root, "README")) as handle:
        readme = handle.read()
    assert "README" not in committed and "widened" not in readme, (
        f"a write path the worker added to its own row was granted and landed: committed {committed}, "
        f"README {readme!r}\n{done.stdout[-2000:]}"
    )


def test_a_worker_cannot_swap_its_check_for_one_that_always_passes(tmp_path):
    """The worker leaves src/a.py failing its check (test: grep ok src/a.py) and rewrites its
    row's check to the target `always` (true). proctor runs the check the job was forked with:
    the job does not pass and nothing lands."""
    root, env = _setup(tmp_path)
    base = _head(root)
    shell = 'echo "not good" > src/a.py; $EDIT_ROW plan/c check.target \'"always"\''
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None, done.stdout + done.stderr
    committed = _committed_since(root, base)
    assert payload["passed"] is False and "src/a.py" not in committed, (
        f"the job passed on a check the worker chose: committed {committed}\n{done.stdout[-2000:]}"
    )


def test_a_worker_cannot_widen_a_sibling_job_it_does_not_hold(tmp_path):
    """plan/c's worker rewrites plan/d's row (write paths src/a.py only, not yet worked) to
    README; when plan/d is worked next, its worker's grant and its landing are those of the row
    as forked."""
    root, env = _setup(tmp_path)
    _fork(root, {"id": "plan/d", "parent": "plan", "criteria": "d", "check": "test", "write_paths": ["other/b.py"]})
    base = _head(root)
    done, _ = _work(
        root, "plan/c", env, 'echo "ok = True" > src/a.py; $EDIT_ROW plan/d write_paths \'["README", "other/b.py"]\''
    )
    d_paths = _row(root, "plan/d").get("write_paths")
    done2, _ = _work(root, "plan/d", env, 'echo sibling >> README; echo "ok = True" > src/a.py; echo b2 > other/b.py')
    committed = _committed_since(root, base)
    assert "README" not in committed, (
        f"plan/c's worker widened plan/d's row ({d_paths}) and plan/d landed README: {committed}\n"
        f"{done2.stdout[-1500:]}"
    )


def test_the_stream_proctor_keeps_is_what_the_worker_printed(tmp_path):
    """The attempt's stream file lives in proctor's state dir (<repo>/streams/<pid>-<job>-<n>.out),
    which a worker may write: it rewrites the file as it runs. The transcript proctor keeps must
    be what came down the pipe."""
    root, env = _setup(tmp_path)
    shell = (
        'echo "ok = True" > src/a.py; for f in "$PROCTOR_STATE_DIR"/*/streams/*.out; do '
        'printf \'{"type":"forged"}\\n\' > "$f" && echo forged >> "$MARKS/forged"; done'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None, done.stdout + done.stderr
    forged = os.path.exists(f"{tmp_path}/tool/forged")
    assert forged or "Permission denied" in json.dumps(payload), "the attack did not find the stream file"
    from proctor.store import blobs
    from proctor.workspace import Workspace

    attempt = payload["jobs"][0]["attempts"][0]
    ref = attempt.get("stream")
    assert ref, attempt
    with Workspace(root, warn=lambda line: None) as ws:
        text = blobs.get(ws.store, ref).decode("utf-8", "replace")
    assert '"forged"' not in text, f"the worker rewrote the transcript proctor kept (forged={forged}): {text[:300]!r}"


# -- git: the repository's, the worktree's own, and the person's config ----------------------------


def test_the_worker_writes_nothing_of_the_main_checkout_or_any_git_directory(tmp_path):
    """By relative path from the worktree, by absolute path into the main checkout, into the
    repository's .git (hooks, config, refs, objects, info/attributes) and the worktree's own git
    directory (.git/worktrees/<name>): nothing lands, and what lands in the path is committed."""
    root, env = _setup(tmp_path)
    base = _head(root)
    common = os.path.join(os.path.realpath(root), ".git")
    shell = (
        'echo "ok = True" > src/a.py; admin=$(git rev-parse --git-dir); '
        "echo x >> README; echo x >> other/b.py; echo x > rootfile; "
        'echo main >> "$MAIN/README"; echo x > "$MAIN/src/a.py"; echo x > "$MAIN/newfile"; '
        'echo "#!/bin/sh" > "$MAIN/.git/hooks/post-commit"; echo "[core] x = 1" >> "$MAIN/.git/config"; '
        'mkdir -p "$MAIN/.git/info"; echo "* filter=evil" >> "$MAIN/.git/info/attributes"; '
        'echo 0000000000000000000000000000000000000000 > "$MAIN/.git/refs/heads/planted"; '
        'mkdir -p "$MAIN/.git/objects/ab" && echo junk > "$MAIN/.git/objects/ab/cdef"; '
        'echo "[core] y = 1" >> "$admin/config.worktree"; echo elsewhere > "$admin/gitdir"; '
        'echo x > "$admin/HEAD"; echo x > .git; '
        'for f in "$MAIN/README" "$MAIN/.git/hooks/post-commit" "$MAIN/.git/config" "$admin/HEAD" "$admin/gitdir"; do '
        '  [ -w "$f" ] && echo "$f" >> "$MARKS/reported-writable"; done; true'
    )
    before = {rel: open(os.path.join(common, rel), "rb").read() for rel in ("config", "HEAD")}
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None and payload["passed"] is True, done.stdout[-2000:] + done.stderr[-2000:]
    assert _committed_since(root, base) == {"src/a.py"}
    with open(os.path.join(root, "README")) as handle:
        assert handle.read() == "hello\n"
    assert not os.path.exists(os.path.join(root, "newfile"))
    assert not os.path.exists(os.path.join(common, "hooks", "post-commit"))
    assert not os.path.exists(os.path.join(common, "refs", "heads", "planted"))
    assert not os.path.exists(os.path.join(common, "objects", "ab", "cdef"))
    assert (
        not os.path.exists(os.path.join(common, "info", "attributes"))
        or "evil" not in open(os.path.join(common, "info", "attributes")).read()
    )
    for rel, data in before.items():
        assert open(os.path.join(common, rel), "rb").read() == data, rel
    attempt = payload["jobs"][0]["attempts"][0]
    assert not attempt.get("failures"), attempt  # nothing had to be put back: nothing was written


def _gitconfig_attack(tmp_path, where: str) -> tuple[str, dict, str]:
    """The config the worker writes at `where` (under $HOME): a clean filter on every file, a
    gpg program for a signed commit, and an fsmonitor, each of which writes a marker into the main
    checkout (which the worker itself cannot write) when a git proctor starts unsandboxed runs it."""
    marks = tmp_path / "tool"
    return (
        (
            f'cat > "$HOME/evil.sh" <<EOF\n#!/bin/sh\necho "\\$0 \\$*" >> "$MAIN/PWNED"\ncat\nEOF\n'
            f'chmod +x "$HOME/evil.sh"; echo "* filter=evil" > "$HOME/attrs"; '
            f'cat > "{where}" <<EOF\n[core]\n\tattributesFile = $HOME/attrs\n[filter "evil"]\n'
            f"\tclean = $HOME/evil.sh clean\n\tsmudge = $HOME/evil.sh smudge\n\tprocess = \n"
            f"[diff]\n\texternal = $HOME/evil.sh\n[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = $HOME/evil.sh\n"
            f'EOF\necho "ok = True" > src/a.py; touch "{marks}/planted"'
        ),
        {},
        str(marks / "planted"),
    )


@pytest.mark.parametrize("where", ["gitconfig", "included"])
def test_git_config_the_worker_plants_in_home_runs_nothing_of_proctors(tmp_path, where):
    """~/.gitconfig (watched and put back), or a file the person's ~/.gitconfig includes
    (`[include] path = ~/.gitconfig.local`, as many do): proctor's own git after the attempt (the
    gates' diff, the landing's add and commit in the main checkout) must run none of the filter,
    gpg program or external diff it names outside the worker's grant."""
    root, env = _setup(tmp_path)
    home = env["HOME"]
    if where == "included":
        with open(os.path.join(home, ".gitconfig"), "w") as handle:
            handle.write(f"[include]\n\tpath = {home}/.gitconfig.local\n")
        target = "$HOME/.gitconfig.local"
    else:
        target = "$HOME/.gitconfig"
    shell, _, planted = _gitconfig_attack(tmp_path, target)
    done, payload = _work(root, "plan/c", env, shell)
    assert os.path.exists(planted), done.stderr[-2000:]
    pwned = os.path.join(root, "PWNED")
    ran = open(pwned).read() if os.path.exists(pwned) else ""
    assert not ran, (
        f"git proctor ran unsandboxed after the attempt ran the worker's command, which wrote "
        f"the main checkout: {ran!r}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
    )


# -- processes: what the worker leaves, and what it starts --------------------------------------


def test_nothing_the_worker_started_writes_after_the_attempt(tmp_path):
    """A double-forked, setsid'd child, a nohup'd one and one without the attempt's tag wait (a
    loop of short sleeps: a sleep killed alone only shortens the wait) and then write, and
    plant ~/.gitconfig: none of them is alive to, once `proctor work` has returned."""
    root, env = _setup(tmp_path)
    late = f"{tmp_path}/tool/late"
    wait = "for i in 1 2 3 4 5 6 7; do sleep 1; done"
    shell = (
        'echo "ok = True" > src/a.py; '
        f"setsid sh -c '({wait}; echo late-setsid >> {late}; "
        f'printf "[core]\\n\\tfsmonitor = true\\n" >> "$HOME/.gitconfig") &\' </dev/null >/dev/null 2>&1; '
        f'nohup sh -c "{wait}; echo late-nohup >> {late}" </dev/null >/dev/null 2>&1 & '
        f'env -u PROCTOR_WORKER_TAG setsid sh -c "{wait}; echo late-untagged >> {late}" </dev/null >/dev/null 2>&1 &'
    )
    began = time.monotonic()
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None and payload["passed"] is True, done.stdout[-1500:] + done.stderr[-1500:]
    time.sleep(max(0.0, 9 - (time.monotonic() - began)))
    assert not os.path.exists(late), open(late).read()
    assert not os.path.exists(os.path.join(env["HOME"], ".gitconfig"))


def test_a_proctor_work_the_worker_starts_is_sandboxed_still(tmp_path):
    """The worker runs `proctor work plan/d` itself (a sibling, with no lease in its
    environment): the worker that one starts, and its landing, stay within plan/c's grant."""
    root, env = _setup(tmp_path)
    _fork(root, {"id": "plan/d", "parent": "plan", "criteria": "d", "check": "always", "write_paths": ["other/b.py"]})
    base = _head(root)
    inner = 'echo inner >> "$MAIN/README"; echo b > other/b.py; echo inner > README'
    shell = (
        'echo "ok = True" > src/a.py; '
        f"env -u BAGGAGE -u PROCTOR_NONCE -u PROCTOR_LEASE STANDIN_SHELL='{inner}' "
        f'{sys.executable} -m proctor work plan/d > "$MARKS/inner.out" 2>&1; echo "rc=$?" >> "$MARKS/inner.out"'
    )
    done, payload = _work(root, "plan/c", env, shell)
    inner_out = open(f"{tmp_path}/tool/inner.out").read() if os.path.exists(f"{tmp_path}/tool/inner.out") else ""
    with open(os.path.join(root, "README")) as handle:
        readme = handle.read()
    committed = _committed_since(root, base)
    assert "inner" not in readme and "README" not in committed, (readme, committed, inner_out[-1500:])


def test_a_monitor_the_worker_adds_does_not_run_outside_its_grant(tmp_path):
    """The person runs the repository's server; the worker, holding its job's secret, adds a
    monitor to its own job with --allow-unsandboxed. The server must not run the worker's command
    with the server's rights (here: write the main checkout, which the worker cannot)."""
    root, env = _setup(tmp_path)
    started = _run(root, "server", "start", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        shell = (
            'echo "ok = True" > src/a.py; '
            f"{sys.executable} -m proctor monitor add --cmd 'echo monitor >> \"$MAIN/PWNED-monitor\"; echo tick' "
            '--interval 10s --allow-unsandboxed > "$MARKS/monitor.out" 2>&1; echo "rc=$?" >> "$MARKS/monitor.out"; '
            "sleep 3"
        )
        done, payload = _work(root, "plan/c", env, shell)
        said = open(f"{tmp_path}/tool/monitor.out").read() if os.path.exists(f"{tmp_path}/tool/monitor.out") else ""
        pwned = os.path.join(root, "PWNED-monitor")
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not os.path.exists(pwned):
            time.sleep(0.2)
    finally:
        _run(root, "server", "stop", env=env)
    assert not os.path.exists(pwned), f"the worker's monitor ran with the server's rights: {said}"


# -- ordinary work inside the grant ---------------------------------------------------------------


def test_ordinary_work_functions_inside_the_sandbox(tmp_path):
    """git status and diff read the worktree, a nested `proctor run` of the check is sandboxed
    again (proctor's state narrowed) and recorded, `proctor job exit --stdin` files the result."""
    root, env = _setup(tmp_path)
    env = dict(env, STANDIN_SUMMARY="")  # the shell files it
    env.pop("STANDIN_SUMMARY")
    base = _head(root)
    out = f"{tmp_path}/tool"
    shell = (
        'echo "ok = True" > src/a.py; git status --porcelain > "$MARKS/status" 2>&1; '
        'git diff > "$MARKS/diff" 2>&1; git log --oneline -1 > "$MARKS/log" 2>&1; '
        'lease=$(echo "$BAGGAGE" | tr "," "\\n" | sed -n "s/^proctor.lease=//p"); '
        f'{sys.executable} -m proctor run test --lease "$lease" -o json > "$MARKS/run.json" 2>"$MARKS/run.err"; '
        f'echo "rc=$?" >> "$MARKS/run.err"; '
        f'echo x > "$PROCTOR_STATE_DIR/from-worker" && echo ok > "$MARKS/state-writable"; '
        'echo \'{"schema_version": 1, "status": "done", "summary": "filed by the shell"}\' | '
        f'{sys.executable} -m proctor job exit "$lease" --stdin > "$MARKS/exit.out" 2>&1; echo "rc=$?" >> "$MARKS/exit.out"'
    )
    done, payload = _work(root, "plan/c", env, shell)
    read = lambda name: open(f"{out}/{name}").read() if os.path.exists(f"{out}/{name}") else ""  # noqa: E731
    assert "src/a.py" in read("status") and "+ok = True" in read("diff") and read("log").strip(), (
        read("status"),
        read("diff"),
        read("log"),
    )
    assert "rc=0" in read("exit.out"), read("exit.out")
    assert "rc=0" in read("run.err"), read("run.err")
    record = json.loads(read("run.json"))
    assert record["exit_code"] == 0 and record["sandbox"]["job"] == "plan/c", record
    assert os.path.realpath(os.environ["PROCTOR_STATE_DIR"]) in " ".join(record["sandbox"]["narrowed"])
    assert payload is not None and payload["passed"] is True, done.stdout[-1500:] + done.stderr[-1500:]
    assert _committed_since(root, base) == {"src/a.py"}
    assert "filed by the shell" in json.dumps(_row(root, "plan/c").get("result"))
