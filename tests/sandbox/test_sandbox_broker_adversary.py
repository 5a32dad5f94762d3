"""The store broker (proctor/broker.py) turned on by its own worker: a sandboxed worker
(`[sandbox] workers = true`) looks for a way to get proctor's store written, another job acted
as, or a file outside its write paths landed, through what proctor runs FOR it (its brokered
`proctor` commands, their git, their targets, the hook) or AFTER it (proctor work's own git and
check, the person's next command).

Each test asserts the promise, so it fails where the promise breaks. Every test runs `proctor
work` (or the broker) as real processes on this kernel; the oracle is the disk, the store, git
and exit statuses, never the worker's word. HOME is the test's own directory (the worker may
write it); whatever a test plants outside tmp_path is removed in a finally block."""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from proctor import broker, sandbox
from tests.sandbox.test_sandbox import _fork
from tests.sandbox.test_sandbox_worker_adversary import (
    _committed_since,
    _head,
    _marks,
    _row,
    _run,
    _setup,
    _state_dir,
    _work,
)

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(
    ABI == 0 and os.environ.get("CI") != "true",
    reason="this kernel offers no Landlock; CI's kernel does, and there these tests run",
)


# -- helpers -------------------------------------------------------------------------------------


def _sibling(root: str, job: str = "plan/d", paths=("other/b.py",)) -> dict:
    _fork(root, {"id": job, "parent": "plan", "criteria": "d", "check": "test", "write_paths": list(paths)})
    return _row(root, job)


def _terms(job: dict | None) -> dict:
    """What a row says about who holds it and what it may do: the fields no other job may move."""
    keys = (
        "state",
        "criteria",
        "write_paths",
        "deny_paths",
        "check",
        "result",
        "checkout_root",
        "taken",
        "archived",
        "trashed",
        "parent",
        "read_only",
        "goals",
    )
    return {k: (job or {}).get(k) for k in keys}


def _bindings_to(root: str, job_id: str) -> list:
    """Every binding row (a checkout's or an agent session's) naming `job_id`, read from the
    SQLite store's own tables."""
    import sqlite3

    db = os.path.join(_state_dir(root), "proctor.db")
    out = []
    with sqlite3.connect(db) as conn:
        for (table,) in conn.execute("select name from sqlite_master where type='table'"):
            cols = [c[1] for c in conn.execute(f"pragma table_info('{table}')")]
            if "scope" in cols and "job" in cols:
                out += [(table, *r) for r in conn.execute(f"select scope, job from '{table}' where job = ?", (job_id,))]
    return out


# the worker waits for the test without going idle (the stand-in's idle limit, `_setup`'s): the
# stand-in's shell runs with stdout on /dev/null, so it ticks on stderr, which the runner reads
WAIT_FOR = 'for i in $(seq 1 600); do [ -e "$MARKS/{mark}" ] && break; echo tick >&2; sleep 0.1; done'


# the program the worker plants: logs who ran it (its parent's parent: the proctor that ran git)
# and, given the rights, rewrites plan/d's row through proctor's own store API
EVIL_FILTER = r"""#!/bin/sh
gp=$(awk '{print $4}' /proc/$PPID/stat 2>/dev/null)
who=$(tr '\0' ' ' < /proc/$gp/cmdline 2>/dev/null)
echo "ran by: $who" >> TOOL/filter-ran
if PY TOOL/edit_row.py plan/d criteria '"pwned"' 2>/dev/null; then echo "EDITED by: $who" >> TOOL/filter-ran; fi
(echo pwned >> "MAIN/PWNED-filter") 2>/dev/null && echo "MAIN-WRITTEN by: $who" >> TOOL/filter-ran
cat
"""


def _evil_filter(tmp_path, root: str) -> str:
    tool = tmp_path / "tool"
    path = tool / "evil-filter.sh"
    path.write_text(
        EVIL_FILTER.replace("TOOL", str(tool)).replace("PY", sys.executable).replace("MAIN", os.path.realpath(root))
    )
    path.chmod(0o755)
    return str(path)


def _plant_gitconfig(evil: str) -> str:
    """The worker's shell: a clean filter on every file, named by ~/.gitconfig."""
    return (
        'echo "* filter=evil" > "$HOME/attrs"; '
        f'printf "[core]\\n\\tattributesFile = $HOME/attrs\\n[filter \\"evil\\"]\\n\\tclean = {evil}\\n" '
        '> "$HOME/.gitconfig"; '
    )


# -- 1. git config the worker writes, read by the git its brokered commands run ---------------------


@pytest.mark.parametrize("where", ["~/.gitconfig", "$XDG_CONFIG_HOME/git/config"])
def test_a_filter_in_home_gitconfig_never_runs_with_the_store_writable_in_a_brokered_command(tmp_path, where):
    """The worker names a clean filter in ~/.gitconfig (its HOME is proctor's HOME) and asks the
    broker for `proctor vcs checkpoint`, which `git status`es and diffs the worktree it changed.
    The brokered command runs in a domain with proctor's state writable: the filter, run by its
    git, must not be able to rewrite a sibling's row."""
    root, env = _setup(tmp_path)
    before = _terms(_sibling(root))
    evil = _evil_filter(tmp_path, root)
    target = '"$HOME/.gitconfig"' if where == "~/.gitconfig" else '"$XDG_CONFIG_HOME/git/config"'
    shell = (
        'echo "ok = True" > src/a.py; mkdir -p "$XDG_CONFIG_HOME/git"; '
        + _plant_gitconfig(evil).replace('"$HOME/.gitconfig"', target)
        + 'proctor vcs checkpoint > "$MARKS/cp" 2>&1; echo "rc=$?" >> "$MARKS/cp"'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert "rc=0" in _marks(tmp_path, "cp"), _marks(tmp_path, "cp") + done.stderr[-1500:]
    after = _terms(_row(root, "plan/d"))
    assert after == before, (
        f"a filter the worker named in ~/.gitconfig ran in a brokered command's git with proctor's store "
        f"writable and rewrote plan/d's row: {after['criteria']!r}\n{_marks(tmp_path, 'filter-ran')[:1500]}"
    )


def test_the_workers_ordinary_job_exit_runs_no_filter_of_its_with_the_store_writable(tmp_path):
    """No command of its own: the worker only plants the filter and lets the stand-in file its
    result (`proctor job exit <job> --stdin`, the one call every worker makes). Nothing it
    planted may write proctor's store through that call."""
    root, env = _setup(tmp_path)
    before = _terms(_sibling(root))
    evil = _evil_filter(tmp_path, root)
    done, payload = _work(root, "plan/c", env, 'echo "ok = True" > src/a.py; ' + _plant_gitconfig(evil))
    edited = [line for line in _marks(tmp_path, "filter-ran").splitlines() if line.startswith("EDITED")]
    after = _terms(_row(root, "plan/d"))
    assert after == before and not edited, (
        f"the worker's own `proctor job exit` ran its ~/.gitconfig filter with the store writable: plan/d now "
        f"{after['criteria']!r}; {sorted(set(edited))[:3]}"
    )


def test_a_sibling_widened_through_a_brokered_filter_lands_nothing_outside_its_paths(tmp_path):
    """The filter of the two tests above, turned on the sibling's terms: plan/c's worker has
    plan/d's write paths rewritten to README while a brokered `proctor run test` hashes its tree.
    When plan/d is worked next, nothing outside the paths it was forked with may land."""
    root, env = _setup(tmp_path)
    _sibling(root)
    base = _head(root)
    tool = tmp_path / "tool"
    evil = tool / "widen.sh"
    evil.write_text(
        f'#!/bin/sh\n{sys.executable} {tool}/edit_row.py plan/d write_paths \'["README", "other/b.py"]\' '
        f"2>/dev/null && echo widened >> {tool}/widened\ncat\n"
    )
    evil.chmod(0o755)
    shell = (
        'echo "ok = True" > src/a.py; '
        + _plant_gitconfig(str(evil))
        + 'proctor run test >/dev/null 2>&1; rm -f "$HOME/.gitconfig"'
    )
    _work(root, "plan/c", env, shell)
    widened = _row(root, "plan/d").get("write_paths")
    done2, _ = _work(root, "plan/d", env, 'echo sibling >> README; echo "ok = True" > src/a.py; echo b2 > other/b.py')
    committed = _committed_since(root, base)
    assert "README" not in committed, (
        f"plan/c's worker widened plan/d's row to {widened} through the git of a brokered command, and plan/d "
        f"landed README: {committed}\n{done2.stdout[-1000:]}"
    )


# -- 2. programs found on PATH ---------------------------------------------------------------------


def _with_path_dir(env: dict, tmp_path) -> tuple[dict, str]:
    """The person's PATH with ~/.local/bin first (as a login shell makes it where it exists)."""
    bindir = os.path.join(env["HOME"], ".local", "bin")
    return dict(env, PATH=f"{bindir}:{os.environ['PATH']}"), bindir


def test_a_git_the_worker_puts_first_on_the_persons_path_is_never_run_by_proctor(tmp_path):
    """~/.local/bin leads the person's PATH (a common login profile); the worker, which may write
    $HOME, puts a `git` there that records who ran it and then runs the real git. Neither the
    broker nor proctor work may run it: it would run with the store writable, or with proctor
    work's own rights."""
    root, env = _setup(tmp_path)
    env, bindir = _with_path_dir(env, tmp_path)
    before = _terms(_sibling(root))
    base = _head(root)
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True).stdout.strip()
    tool = tmp_path / "tool"
    fake = (
        f'#!/bin/sh\nwho=$(tr "\\\\0" " " < /proc/$PPID/cmdline 2>/dev/null)\n'
        f'echo "git $* <- $who" >> {tool}/git-ran\n'
        f"{sys.executable} {tool}/edit_row.py plan/d criteria '\"pwned-by-git\"' >/dev/null 2>&1 && "
        f'echo "EDITED <- $who" >> {tool}/git-ran\n'
        f'(echo pwned >> "{os.path.realpath(root)}/PWNED-git") 2>/dev/null\n'
        # once proctor has landed and checked its commit (it removes the worktree next), a file
        # of the worker's is folded into that commit
        f'case " $* " in *" worktree remove "*) [ -e "{os.path.realpath(root)}/EVIL.txt" ] || '
        f'(cd "{os.path.realpath(root)}" && echo evil > EVIL.txt && {real_git} add EVIL.txt && '
        f"{real_git} -c core.hooksPath=/dev/null commit -q --amend --no-edit) >/dev/null 2>&1;; esac\n"
        f'exec {real_git} "$@"\n'
    )
    (tool / "fake-git").write_text(fake)
    shell = (
        f'echo "ok = True" > src/a.py; mkdir -p "{bindir}"; cp "$MARKS/fake-git" "{bindir}/git"; '
        f'chmod +x "{bindir}/git"; proctor vcs checkpoint >/dev/null 2>&1; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    ran = _marks(tmp_path, "git-ran")
    after = _terms(_row(root, "plan/d"))
    pwned = os.path.exists(os.path.join(root, "PWNED-git"))
    committed = _committed_since(root, base)
    assert after == before and not pwned and not committed - {"src/a.py"}, (
        f"a git the worker planted on PATH ran for proctor (plan/d {after['criteria']!r}, main checkout "
        f"written: {pwned}, committed: {sorted(committed)}):\n"
        + "\n".join(sorted(set(line.split(" <- ")[1] for line in ran.splitlines() if " <- " in line)))[:1500]
    )


def test_a_program_the_check_runs_cannot_be_shadowed_on_the_persons_path(tmp_path):
    """The same PATH: the worker leaves src/a.py failing its check (`grep -q ok src/a.py`) and
    puts a `grep` that always succeeds in ~/.local/bin. proctor's own check of the attempt must
    not pass on it, and nothing may land."""
    root, env = _setup(tmp_path)
    env, bindir = _with_path_dir(env, tmp_path)
    base = _head(root)
    shell = (
        f'echo "not good" > src/a.py; mkdir -p "{bindir}"; printf "#!/bin/sh\\nexit 0\\n" > "{bindir}/grep"; '
        f'chmod +x "{bindir}/grep"'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert payload is not None, done.stdout[-1500:] + done.stderr[-1500:]
    committed = _committed_since(root, base)
    assert payload["passed"] is False and "src/a.py" not in committed, (
        f"the check passed on a grep the worker put on PATH, and src/a.py (which fails the real check) "
        f"landed: {committed}"
    )


# -- 3. processes started for the worker outside its cgroup ----------------------------------------


def test_a_target_the_broker_runs_leaves_no_process_behind(tmp_path):
    """A brokered command runs outside the worker's cgroup. The worker calls `proctor run test`
    with its own PATH leading to a `grep` of its making, without the attempt's tag: that grep
    starts a setsid'd loop which writes a mark once `proctor work` has returned. Nothing started
    for the attempt may be alive then."""
    root, env = _setup(tmp_path)
    late = f"{tmp_path}/tool/late"
    evil = tmp_path / "tool" / "evil-bin"
    evil.mkdir()
    (evil / "grep").write_text(
        "#!/bin/sh\n"
        f'echo "started $$ $(date +%s.%N)" >> {tmp_path}/tool/started\n'
        f"setsid sh -c 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 0.5; done; echo \"late $(date +%s.%N)\" >> {late}' "
        "</dev/null >/dev/null 2>&1 &\nexit 0\n"
    )
    (evil / "grep").chmod(0o755)
    shell = (
        'echo "ok = True" > src/a.py; '
        f'env -u PROCTOR_WORKER_TAG PATH="{evil}:$PATH" proctor run test >/dev/null 2>&1; true'
    )
    began = time.monotonic()
    done, payload = _work(root, "plan/c", env, shell)
    ended = time.time()
    time.sleep(max(0.0, 8.5 - (time.monotonic() - began)))
    text = _marks(tmp_path, "late")
    assert _marks(tmp_path, "started"), ("the worker's grep never ran", done.stderr[-1500:])
    assert not text, (
        f"a process a brokered target started outlived the attempt and wrote "
        f"{time.time() - ended:.1f}s around proctor work's end: {text!r}"
    )


def test_a_process_left_by_a_brokered_target_cannot_steer_proctors_own_git(tmp_path):
    """The survivor of the test above, put to work: it re-plants the ~/.gitconfig filter every
    few milliseconds, so that it stands again once proctor work has put the person's config back
    after the attempt, when proctor work runs the job's check and lands it. The filter must never
    run with proctor work's rights (write the main checkout, rewrite a sibling's row)."""
    root, env = _setup(tmp_path)
    before = _terms(_sibling(root))
    base = _head(root)
    filt = _evil_filter(tmp_path, root)
    home = env["HOME"]
    config = f'[core]\n\tattributesFile = {home}/attrs\n[filter "evil"]\n\tclean = {filt}\n'
    (tmp_path / "tool" / "evil.gitconfig").write_text(config)
    evil = tmp_path / "tool" / "evil-bin"
    evil.mkdir()
    # it waits for the attempt's end (its broker's socket gone), then keeps the filter planted
    (evil / "grep").write_text(
        "#!/bin/sh\n"
        f'echo "* filter=evil" > "{home}/attrs"\n'
        f'setsid sh -c \'while [ -S "$PROCTOR_BROKER_SEEN" ]; do sleep 0.01; done; echo "attempt over" >> {tmp_path}/tool/survivor; '
        f'i=0; while [ $i -lt 1500 ]; do cmp -s {tmp_path}/tool/evil.gitconfig "{home}/.gitconfig" || '
        f'cp {tmp_path}/tool/evil.gitconfig "{home}/.gitconfig"; sleep 0.01; i=$((i+1)); done\' '
        "</dev/null >/dev/null 2>&1 &\nexit 0\n"
    )
    (evil / "grep").chmod(0o755)
    shell = (
        'echo "ok = True" > src/a.py; '
        f'env -u PROCTOR_WORKER_TAG PROCTOR_BROKER_SEEN="$PROCTOR_BROKER" PATH="{evil}:$PATH" '
        "proctor run test >/dev/null 2>&1; true"
    )
    done, payload = _work(root, "plan/c", env, shell)
    time.sleep(0.5)
    ran = _marks(tmp_path, "filter-ran")
    unbrokered = sorted(
        {
            line.split(": ", 1)[1]
            for line in ran.splitlines()
            if line.startswith(("EDITED", "MAIN-WRITTEN")) and "-m proctor work" in line
        }
    )
    pwned = os.path.exists(os.path.join(root, "PWNED-filter"))
    after = _terms(_row(root, "plan/d"))
    committed = _committed_since(root, base)
    assert not pwned and after == before and "PWNED-filter" not in committed, (
        f"a filter re-planted after the attempt by a process its brokered target left ran in proctor's own git: "
        f"main checkout written {pwned}, plan/d {after['criteria']!r}, by {unbrokered[:3]}\n{ran[:800]}"
        f"\nsurvivor: {_marks(tmp_path, 'survivor')!r}"
    )


# -- 4. what the brokered interpreter and git run from ----------------------------------------------


def _mapped_files_of_interpreter() -> list[str]:
    """Every file a fresh `python -E -P -s -m proctor --version` of this interpreter maps (its
    libpython, its extension modules' libraries), as the broker starts it."""
    probe = subprocess.Popen(
        [sys.executable, "-E", "-s", "-c", "import sqlite3, json, ssl, hashlib, sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
    )
    try:
        time.sleep(1.0)
        with open(f"/proc/{probe.pid}/maps") as handle:
            files = {line.split(None, 5)[5].strip() for line in handle if len(line.split(None, 5)) == 6}
    finally:
        probe.communicate(b"", timeout=10)
    return sorted(f for f in files if f.startswith("/") and os.path.isfile(f))


def test_no_file_the_brokers_interpreter_loads_is_writable_by_the_worker(tmp_path):
    """The broker runs proctor from this interpreter, and the worker's domain narrows what it
    runs from (interpreter_regions: the executable, sys.path, proctor's package). The interpreter
    also loads its shared library (libpython) and its extensions' libraries. The worker opens each
    file of the interpreter's installation (under sys.base_prefix, sys.prefix) that a running
    interpreter maps, for writing (O_APPEND, nothing written): none may open."""
    root, env = _setup(tmp_path)
    prefixes = tuple(os.path.realpath(p) + os.sep for p in {sys.base_prefix, sys.prefix})
    mapped = [f for f in _mapped_files_of_interpreter() if os.path.realpath(f).startswith(prefixes)]
    assert mapped, "the interpreter maps no file of its own installation"
    listing = tmp_path / "tool" / "mapped"
    listing.write_text("\n".join(mapped) + "\n")
    shell = (
        'echo "ok = True" > src/a.py; '
        f'{sys.executable} -c "import os,sys\nfor p in open(sys.argv[1]).read().split():\n'
        f"    try:\n        os.close(os.open(p, os.O_WRONLY | os.O_APPEND))\n"
        f'        print(p)\n    except OSError: pass" "$MARKS/mapped" > "$MARKS/writable" 2>&1'
    )
    done, payload = _work(root, "plan/c", env, shell)
    writable = _marks(tmp_path, "writable").split()
    assert os.path.exists(tmp_path / "tool" / "writable"), done.stderr[-1500:]
    assert writable == [], (
        f"the worker could open for writing code the broker's interpreter loads (and "
        f"proctor work's, and the person's): {writable}"
    )


def test_the_worker_cannot_plant_code_on_the_brokers_import_path(tmp_path):
    """Every other place the brokered `python -E -P -s -m proctor` (and git) takes code from:
    sitecustomize in the standard library, a module in lib-dynload, a stale .pyc beside a stdlib
    module and beside proctor's, pyvenv.cfg, the editable finder, git's exec path. None lands."""
    import sysconfig

    import proctor

    root, env = _setup(tmp_path)
    stdlib = sysconfig.get_paths()["stdlib"]
    dynload = os.path.join(stdlib, "lib-dynload")
    package = os.path.dirname(os.path.realpath(proctor.__file__))
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True).stdout.strip()
    targets = [
        os.path.join(stdlib, "sitecustomize.py"),
        os.path.join(dynload, "zz_planted.py"),
        os.path.join(stdlib, "__pycache__", "zz_planted.cpython-311.pyc"),
        os.path.join(package, "__pycache__", "zz_planted.pyc"),
        os.path.join(sys.prefix, "zz_planted.cfg"),
        os.path.join(exec_path, "git-zz-planted"),
    ]
    targets += glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "__editable__*finder.py"))
    originals = {t: open(t, "rb").read() for t in targets if os.path.isfile(t)}
    try:
        shell = (
            'echo "ok = True" > src/a.py; '
            + "; ".join(f'(echo "# planted" >> "{t}") 2>/dev/null && echo "{t}" >> "$MARKS/planted"' for t in targets)
            + "; true"
        )
        done, payload = _work(root, "plan/c", env, shell)
        assert payload is not None, done.stdout[-1000:] + done.stderr[-1000:]
        landed = [
            t
            for t in targets
            if (t in originals and open(t, "rb").read() != originals[t]) or (t not in originals and os.path.exists(t))
        ]
        assert landed == [], landed
    finally:
        for t in targets:
            if t in originals:
                if open(t, "rb").read() != originals[t]:
                    with open(t, "wb") as handle:
                        handle.write(originals[t])
            elif os.path.exists(t):
                os.unlink(t)


# -- 5. the store's location ------------------------------------------------------------------------


def test_the_worker_cannot_move_proctors_store_by_rewriting_the_repo_key_cache(tmp_path):
    """proctor finds a repository's store by its root commit, cached in
    repo_keys_dir()/<tag> (beside the stores) and trusted while it names any object of the
    repository. The worker (which may write the cache) names README's blob there: the person's
    next proctor command must still read the store the jobs are in."""
    root, env = _setup(tmp_path)
    _sibling(root)
    from proctor.paths import repo_keys_dir

    keys = glob.glob(os.path.join(repo_keys_dir(), "*"))
    assert keys, "no repo key cache to attack"
    shell = (
        'echo "ok = True" > src/a.py; blob=$(git rev-parse HEAD:README); '
        'for f in "$PROCTOR_STATE_DIR"/repo-keys/*; do echo "$blob" > "$f" && echo "$f" >> "$MARKS/keys"; done'
    )
    done, payload = _work(root, "plan/c", env, shell, XDG_CACHE_HOME=os.environ["XDG_CACHE_HOME"])
    listed = _run(root, "ls", "jobs", "-o", "json", env=env)
    assert _row(root, "plan/d") is not None and "plan/d" in listed.stdout, (
        f"after the worker rewrote the repo key cache ({_marks(tmp_path, 'keys').strip()}), proctor reads another "
        f"store: plan/d is gone from it\n{listed.stdout[-500:]}{listed.stderr[-500:]}"
    )


def test_the_worker_cannot_replace_or_squat_broker_sockets(tmp_path):
    """The sockets live in <state>/brokers, which the worker's domain denies: it tries to remove
    and replace its own broker's socket, to bind a socket at its sibling's broker address (which
    plan/d's attempt would then find), and to make a file there. Nothing lands, and plan/d's
    attempt is served by its own broker."""
    root, env = _setup(tmp_path)
    _sibling(root)
    state = _state_dir(root)
    d_sock = broker.socket_for(state, "plan/d")
    shell = (
        'echo "ok = True" > src/a.py; d="$(dirname "$PROCTOR_BROKER")"; '
        '(rm -f "$PROCTOR_BROKER") 2>/dev/null && echo removed >> "$MARKS/sock"; '
        f'{sys.executable} -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); '
        f'print(\'bound\')" "{d_sock}" >> "$MARKS/sock" 2>/dev/null; '
        '(echo x > "$d/planted") 2>/dev/null && echo planted >> "$MARKS/sock"; '
        '(mv "$PROCTOR_BROKER" "$d/moved") 2>/dev/null && echo moved >> "$MARKS/sock"; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert _marks(tmp_path, "sock") == "", _marks(tmp_path, "sock")
    assert payload is not None and payload["passed"] is True, done.stdout[-1500:] + done.stderr[-1500:]
    done2, payload2 = _work(root, "plan/d", env, 'echo b2 > other/b.py; echo "ok = True" > src/a.py')
    assert payload2 is not None and _row(root, "plan/d").get("result"), done2.stdout[-1500:] + done2.stderr[-1500:]


# -- 6. other jobs, the orchestrator -----------------------------------------------------------------


def test_no_brokered_command_acts_on_a_sibling_or_the_root(tmp_path):
    """Through the broker, every verb that changes a row, aimed at plan/d (the sibling) and plan
    (the root): archive, trash, delete, exec, a fork replacing each, a fork of a new root job
    with wide paths, exit, each plain, with --lease, with --orchestrator, with a forged BAGGAGE.
    No row but plan/c's may change, and no job appears."""
    root, env = _setup(tmp_path)
    _sibling(root)
    before = {job: _terms(_row(root, job)) for job in ("plan", "plan/d")}
    record_d = json.dumps(
        {"id": "plan/d", "parent": "plan", "criteria": "replaced", "check": "test", "write_paths": ["README"]}
    )
    record_root = json.dumps({"id": "plan", "criteria": "replaced", "check": "always"})
    record_new = json.dumps({"id": "evil", "criteria": "new root", "check": "always", "write_paths": ["README"]})
    result = json.dumps({"schema_version": 1, "status": "done", "summary": "forged"})
    cmds = []
    for how in ("", "--lease plan/d", "--lease plan", "--orchestrator"):
        for job in ("plan/d", "plan"):
            cmds += [
                f"proctor job archive {job} {how}",
                f"proctor job trash {job} {how}",
                f"proctor job exec {job} {how}",
                f"echo '{result}' | proctor job exit {job} --stdin {how}",
            ]
        cmds += [
            f"echo '{record_d}' | proctor job fork --stdin {how}",
            f"echo '{record_root}' | proctor job fork --stdin {how}",
            f"echo '{record_new}' | proctor job fork --stdin {how}",
        ]
    cmds += [
        "BAGGAGE=proctor.lease=plan/d proctor job trash plan/d",
        "proctor job delete plan/d --orchestrator",
        "proctor job delete plan/d",
        "proctor job delete plan --orchestrator",
    ]
    shell = (
        'echo "ok = True" > src/a.py; '
        + "; ".join(
            f'{c} >> "$MARKS/out" 2>&1; echo "rc=$? {n}" >> "$MARKS/codes"; echo tick >&2' for n, c in enumerate(cmds)
        )
        + "; true"
    )
    done, payload = _work(root, "plan/c", env, shell)
    codes = _marks(tmp_path, "codes").splitlines()
    assert len(codes) == len(cmds), (codes, done.stderr[-1000:])
    succeeded = [cmds[int(line.split()[1])] for line in codes if line.startswith("rc=0 ")]
    after = {job: _terms(_row(root, job)) for job in ("plan", "plan/d")}
    assert after == before and _row(root, "evil") is None, (
        f"a brokered command changed a row that is not the worker's: {succeeded}\n{after}"
    )
    assert succeeded == [], succeeded


def test_the_mcp_door_through_the_broker_acts_only_as_the_workers_job(tmp_path):
    """`proctor mcp` is an ordinary command to the broker: the worker speaks JSON-RPC to it and
    calls job_put (replace plan/d, fork a root job), job_exit plan/d and plan, job_exec plan/d.
    Every row but plan/c's is left as it was."""
    root, env = _setup(tmp_path)
    _sibling(root)
    before = {job: _terms(_row(root, job)) for job in ("plan", "plan/d")}
    calls = [
        (
            "job_put",
            {"id": "plan/d", "parent": "plan", "criteria": "replaced", "check": "test", "write_paths": ["README"]},
        ),
        ("job_put", {"id": "evil", "criteria": "new root", "check": "always", "write_paths": ["README"]}),
        ("job_exit", {"id": "plan/d", "result": {"schema_version": 1, "status": "done", "summary": "forged"}}),
        ("job_exit", {"id": "plan", "result": {"schema_version": 1, "status": "done", "summary": "forged"}}),
        ("job_exec", {"id": "plan/d"}),
        ("job_exec", {"id": "plan/d", "worktree": "../elsewhere"}),
    ]
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    lines += [
        {"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": {"name": name, "arguments": args}}
        for n, (name, args) in enumerate(calls)
    ]
    (tmp_path / "tool" / "rpc").write_text("".join(json.dumps(line) + "\n" for line in lines))
    # stdin stays open until the last call is answered (a loaded machine, a PostgreSQL store), 90 s at most
    shell = (
        'echo "ok = True" > src/a.py; (cat "$MARKS/rpc"; for i in $(seq 900); do '
        f'[ "$(grep -c jsonrpc "$MARKS/mcp.out" 2>/dev/null)" -gt {len(calls)} ] && break; sleep 0.1; done) '
        '| proctor mcp > "$MARKS/mcp.out" 2>&1; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    out = _marks(tmp_path, "mcp.out")
    answered = out.replace(" ", "")
    assert all(f'"id":{n + 1}' in answered for n in range(len(calls))), (
        out[:3000],
        done.stdout[-2000:],
        done.stderr[-2000:],
    )
    after = {job: _terms(_row(root, job)) for job in ("plan", "plan/d")}
    assert after == before and _row(root, "evil") is None, (after, out[:2000])


def _hook_payload(event: str, cwd: str, **more) -> str:
    payload = {
        "hook_event_name": event,
        "session_id": "evil-session",
        "cwd": cwd,
        "transcript_path": "",
        "tool_use_id": "toolu_evil",
        **more,
    }
    return json.dumps(payload)


def test_a_crafted_hook_call_cannot_take_a_sibling_for_a_subagent(tmp_path):
    """The hook is a brokered command too, and the worker writes its stdin and argv. It reports a
    subagent spawned with `lease: plan/d` (the PostToolUse of a Task whose response names an
    agentId), under `--lease plan/d` and `--lease plan`, from its worktree and naming the main
    checkout as its cwd. plan/d must stay declared and untaken, and nothing bound to it."""
    root, env = _setup(tmp_path)
    before = _terms(_sibling(root))
    spawn = dict(
        tool_name="Task",
        tool_input={"prompt": "lease: plan/d\nwork it", "description": "helper"},
        tool_response={"agentId": "agent-evil"},
    )
    payloads = []
    for n, (cwd, flag) in enumerate(
        [(".", "--lease plan/d"), (".", "--lease plan"), ("$MAIN", "--lease plan/d"), ("$MAIN", ""), (".", "")]
    ):
        body = json.loads(_hook_payload("PostToolUse", "CWD", **spawn))
        body["session_id"] = f"evil-session-{n}"
        body["tool_response"]["agentId"] = f"agent-evil-{n}"
        (tmp_path / "tool" / f"hook{n}.json").write_text(json.dumps(body))
        payloads.append((n, cwd, flag))
    shell = (
        'echo "ok = True" > src/a.py; here=$(pwd); '
        + "; ".join(
            f'sed "s#\\"CWD\\"#\\"{("$here" if cwd == "." else cwd)}\\"#" "$MARKS/hook{n}.json" | '
            f'proctor hook claude {flag} >> "$MARKS/hook.out" 2>&1; echo "rc=$?" >> "$MARKS/hook.out"'
            for n, cwd, flag in payloads
        )
        + "; true"
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert _marks(tmp_path, "hook.out").count("rc=") == len(payloads), _marks(tmp_path, "hook.out")
    after = _terms(_row(root, "plan/d"))
    bound = _bindings_to(root, "plan/d")
    assert after == before and not bound, (
        f"a hook call the worker wrote took its sibling plan/d: state {after['state']}, taken in "
        f"{after['checkout_root']}, bound {bound}"
    )


# -- 7. the broker's socket, from outside and from within --------------------------------------------


def _client(path: str, argv: list[str], cwd: str, stdin: str = "", env: dict | None = None):
    full = dict(os.environ, **(env or {}))
    full[broker.ENV] = path
    full.pop("BAGGAGE", None)
    return subprocess.run(
        [sys.executable, "-m", "proctor", *argv],
        cwd=cwd,
        env=full,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_process_outside_the_attempt_is_not_served_while_it_runs(tmp_path):
    """While the worker waits, a process that is not of the attempt (this test's own, and one
    started in the worktree as the worker's neighbour would be) hands the broker `job exit` with
    a forged result and `job fork` of a child with wide paths. Neither runs: the result filed is
    the worker's and no job appears."""
    root, env = _setup(tmp_path)
    shell = (
        'echo "ok = True" > src/a.py; pwd > "$MARKS/worktree"; echo "$PROCTOR_BROKER" > "$MARKS/broker"; '
        + WAIT_FOR.format(mark="outside-done")
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "work", "plan/c", "-o", "json"],
        cwd=root,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")}, **env, "STANDIN_SHELL": shell},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _marks(tmp_path, "broker").strip() and time.monotonic() < deadline:
            time.sleep(0.1)
        path, worktree = _marks(tmp_path, "broker").strip(), _marks(tmp_path, "worktree").strip()
        assert path and worktree, "the worker never started"
        forged = json.dumps({"schema_version": 1, "status": "done", "summary": "forged from outside"})
        child = json.dumps(
            {"id": "plan/c/x", "parent": "plan/c", "criteria": "x", "check": "always", "write_paths": ["README"]}
        )
        answers = [
            _client(path, ["job", "exit", "plan/c", "--stdin"], worktree, forged),
            _client(path, ["job", "fork", "--stdin"], worktree, child),
            _client(
                path, ["job", "exit", "plan/c", "--stdin"], worktree, forged, env={"BAGGAGE": "proctor.lease=plan/c"}
            ),
        ]
    finally:
        (tmp_path / "tool" / "outside-done").write_text("")
        out, err = proc.communicate(timeout=180)
    assert all(a.returncode != 0 and "not of the attempt" in a.stderr for a in answers), [
        (a.returncode, a.stderr[-300:]) for a in answers
    ]
    summary = json.dumps(_row(root, "plan/c").get("result"))
    assert "forged from outside" not in summary and _row(root, "plan/c/x") is None, summary


ABUSE = r"""
import json, os, socket, struct, sys, time, threading
sys.path.insert(0, os.environ["PROCTOR_SRC"])
from proctor import broker
path = os.environ["PROCTOR_BROKER"]
out = open(os.path.join(os.environ["MARKS"], "abuse"), "a")
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); broker._address(s, path, bind=False); s.settimeout(10); return s
def tell(what, s):
    try: out.write(f"{what}: {s.recv(4)!r}\n")
    except OSError as exc: out.write(f"{what}: {exc}\n")
    out.flush(); s.close()
def phase(what, send):
    # The broker may close a connection before the whole of a bad request is sent: a reset or a
    # broken pipe while sending is the broker refusing it, and the next phase goes on.
    try:
        s = conn(); send(s)
    except OSError as exc:
        out.write(f"{what}: {exc} (while sending)\n"); out.flush(); return
    tell(what, s)
def framed(header, fds, body=b"", shut=False):
    def send(s):
        socket.send_fds(s, [header], fds)
        if body: s.sendall(body)
        if shut: s.shutdown(socket.SHUT_WR)
    return send
# garbage, no fds
phase("garbage", lambda s: s.sendall(b"\xff" * 64))
# a header with one fd
phase("one-fd", framed(struct.pack("!I", 10), [0], b"x" * 10))
# a length beyond the limit
phase("huge", framed(struct.pack("!I", 0xFFFFFFFF), [0, 1, 2]))
# a length it never gets
phase("short", framed(struct.pack("!I", 100), [0, 1, 2], b"{", shut=True))
# malformed JSON, wrong types, a cwd outside, a relative cwd, NUL in argv
for name, body in [("json", b"{not json"), ("types", json.dumps({"argv": "ls", "cwd": 1, "env": []}).encode()),
                   ("cwd-out", json.dumps({"argv": ["ls", "jobs"], "cwd": "/", "env": {}}).encode()),
                   ("cwd-rel", json.dumps({"argv": ["ls", "jobs"], "cwd": "..", "env": {}}).encode()),
                   ("nul", json.dumps({"argv": ["ls\x00", "jobs"], "cwd": os.getcwd(), "env": {"A\x00": "b"}}).encode()),
                   ("deep", (b"[" * 200000) + (b"]" * 200000))]:
    phase(name, framed(struct.pack("!I", len(body)), [0, 1, 2], body))
# 400 idle connections held open, and 8 MB of a request, both left hanging
held = []
for i in range(400):
    try: held.append(conn())
    except OSError as exc: out.write(f"idle {i}: {exc}\n"); break
out.write(f"held {len(held)}\n"); out.flush()
try:
    s = conn(); socket.send_fds(s, [struct.pack("!I", broker.MAX_REQUEST)], [0, 1, 2]); s.sendall(b" " * (broker.MAX_REQUEST - 10)); held.append(s)
except OSError as exc:
    out.write(f"8MB: {exc}\n")
# and the ordinary command still works
import subprocess
r = subprocess.run([sys.executable, "-m", "proctor", "ls", "jobs"], capture_output=True, text=True, timeout=60)
out.write(f"ls-after rc={r.returncode}\n"); out.flush()
if os.fork() == 0:
    os.setsid()
    time.sleep(600)
    os._exit(0)
"""


def test_a_worker_that_abuses_the_socket_neither_hangs_nor_crashes_proctor_work(tmp_path):
    """The worker speaks to its broker wrongly every way it can (garbage, one fd, a length past
    the limit, a short body, malformed JSON and types, a cwd outside, NUL bytes, deep nesting),
    leaves 400 idle connections and an unfinished 8 MB request held by a setsid'd child, then
    files its result as usual. proctor work ends promptly and grades the attempt."""
    import proctor

    # the abuse takes seconds with no output, past the 3 s of silence after which _setup's
    # workers are stopped (on a loaded machine, the 400 connections alone)
    root, env = _setup(tmp_path, idle_minutes=2)
    (tmp_path / "tool" / "abuse.py").write_text(ABUSE)
    shell = f'echo "ok = True" > src/a.py; {sys.executable} "$MARKS/abuse.py"; true'
    began = time.monotonic()
    done, payload = _work(
        root, "plan/c", env, shell, PROCTOR_SRC=os.path.dirname(os.path.dirname(os.path.realpath(proctor.__file__)))
    )
    took = time.monotonic() - began
    abuse = _marks(tmp_path, "abuse")
    for phase in ("garbage", "one-fd", "huge", "short", "json", "types", "cwd-out", "cwd-rel", "nul", "deep", "held"):
        assert f"\n{phase} " in "\n" + abuse or f"\n{phase}:" in "\n" + abuse, (phase, abuse + done.stderr[-1500:])
    assert "ls-after rc=0" in abuse, abuse + done.stderr[-1500:]
    assert took < 90, f"proctor work took {took:.0f}s after the worker abused its broker\n{abuse}"
    assert payload is not None and payload["passed"] is True, (abuse, done.stdout[-1500:], done.stderr[-1500:])
    assert (_row(root, "plan/c").get("result") or {}).get("summary") == "did it"


def _work_in_background(root: str, job: str, env: dict, shell: str) -> subprocess.Popen:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")}
    full.update(env, STANDIN_SHELL=shell)
    return subprocess.Popen(
        [sys.executable, "-m", "proctor", "work", job, "-o", "json"],
        cwd=root,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(tmp_path, name: str, seconds: float = 60) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        text = _marks(tmp_path, name).strip()
        if text:
            return text
        time.sleep(0.1)
    return ""


def test_a_worker_cannot_write_a_siblings_worktree_while_both_run(tmp_path):
    """plan/d (write path other/b.py, check `always`) is being worked, its worktree under
    /tmp/proctor-work-<uid>/<repo>/ made, when plan/c's attempt starts. plan/c's worker writes
    other/b.py in plan/d's worktree (outside its own write paths, in a checkout not its own);
    plan/d's own worker writes nothing. Nothing plan/c's worker wrote may be written there, nor
    land as plan/d's work."""
    root, env = _setup(tmp_path)
    _fork(root, {"id": "plan/d", "parent": "plan", "criteria": "d", "check": "always", "write_paths": ["other/b.py"]})
    base = _head(root)
    d_shell = 'pwd > "$MARKS/d-worktree"; ' + WAIT_FOR.format(mark="c-done")
    d_proc = _work_in_background(root, "plan/d", env, d_shell)
    try:
        d_tree = _wait_for(tmp_path, "d-worktree")
        assert d_tree, "plan/d's worker never started"
        c_shell = (
            'echo "ok = True" > src/a.py; d="$(cat "$MARKS/d-worktree")"; '
            '(echo "written by plan/c" > "$d/other/b.py") 2>/dev/null && echo other >> "$MARKS/cross"; '
            '[ -d "$d" ] && echo "saw it" >> "$MARKS/c-saw"; true'
        )
        done, payload = _work(root, "plan/c", env, c_shell)
    finally:
        (tmp_path / "tool" / "c-done").write_text("x")
        d_out, d_err = d_proc.communicate(timeout=180)
    assert _marks(tmp_path, "c-saw"), "plan/c's worker did not see plan/d's worktree: the attack did not run"
    committed = _committed_since(root, base)
    with open(os.path.join(root, "other", "b.py")) as handle:
        landed_b = handle.read()
    assert not _marks(tmp_path, "cross") and "written by plan/c" not in landed_b, (
        f"plan/c's worker wrote plan/d's worktree ({_marks(tmp_path, 'cross').split()}); landed: {committed}, "
        f"other/b.py = {landed_b!r}\n{d_out[-800:]}"
    )


def test_a_flood_of_idle_connections_from_outside_does_not_stop_the_workers_commands(tmp_path):
    """Connecting to a unix socket is no write: any process of the user (a sibling's worker, a
    leftover) can connect to a broker whose path it can compute. From outside the attempt, 100
    connections that never send a byte are held open on plan/c's broker while its worker files
    its result, and until proctor work has returned. The worker's own `proctor job exit` must
    still be served, and proctor work must not hang on the idle connections."""
    root, env = _setup(tmp_path)
    shell = (
        'echo "ok = True" > src/a.py; pwd > "$MARKS/worktree"; echo "$PROCTOR_BROKER" > "$MARKS/broker"; '
        + WAIT_FOR.format(mark="flooded")
    )
    proc = _work_in_background(root, "plan/c", env, shell)
    held = []
    try:
        path = _wait_for(tmp_path, "broker")
        assert path, "the worker never started"
        for _ in range(100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                broker._address(s, path, bind=False)
                held.append(s)
            except OSError:
                s.close()
                break
        (tmp_path / "tool" / "flooded").write_text(str(len(held)))
        began = time.monotonic()
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        took = time.monotonic() - began
    finally:
        for s in held:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        # proctor work killed mid-close leaves its worktree (outside tmp_path) behind: removed here
        import shutil

        left = _marks(tmp_path, "worktree").strip()
        if left and os.path.isdir(left):
            subprocess.run(["git", "worktree", "remove", "--force", "--force", left], cwd=root, capture_output=True)
            shutil.rmtree(left, ignore_errors=True)
    assert len(held) >= 60, len(held)
    summary = (_row(root, "plan/c").get("result") or {}).get("summary")
    assert summary == "did it" and took < 60, (
        f"with {len(held)} idle connections held from outside the attempt, the worker's result was "
        f"{'filed' if summary == 'did it' else 'not filed'} and proctor work took {took:.0f}s after the flood\n"
        f"{err[-800:]}"
    )


SERVER_CALL = r"""
import json, os, sys, urllib.request, urllib.error
state = sys.argv[1]
token = open(os.path.join(state, "server", "token")).read().strip()
port = json.load(open(os.path.join(state, "server", "server.json")))["port"]
body = {"job": "plan/d", "command": "echo monitor >> " + os.environ["MAIN"] + "/PWNED-monitor; echo tick",
        "interval": "10s", "allow_unsandboxed": True, "cwd": os.environ["MAIN"]}
req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/monitors", data=json.dumps(body).encode(), method="POST",
                             headers={"Content-Type": "application/json", "Authorization": "Bearer " + token,
                                      "Host": f"127.0.0.1:{port}"})
try:
    with urllib.request.urlopen(req, timeout=20) as r:
        print("ADDED", r.status, r.read()[:300])
except urllib.error.HTTPError as exc:
    print("refused", exc.code, exc.read()[:300])
"""


def test_the_server_token_the_worker_can_read_does_not_make_it_the_person(tmp_path):
    """Reads are not narrowed: the worker reads the server's token from proctor's state and asks
    the running server, as the person, for a monitor on its sibling (unsandboxed, writing the
    main checkout), directly and from a target its brokered `proctor run` starts with the
    worker's environment stripped of every lease. No monitor may be added, and none runs."""
    root, env = _setup(tmp_path)
    _sibling(root)
    state = _state_dir(root)
    (tmp_path / "tool" / "server_call.py").write_text(SERVER_CALL)
    evil = tmp_path / "tool" / "evil-bin"
    evil.mkdir()
    (evil / "grep").write_text(
        f'#!/bin/sh\nenv -i MAIN="$MAIN" {sys.executable} {tmp_path}/tool/server_call.py '
        f'"{state}" >> {tmp_path}/tool/server.out 2>&1\nexit 0\n'
    )
    (evil / "grep").chmod(0o755)
    started = _run(root, "server", "start", env=env)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        shell = (
            'echo "ok = True" > src/a.py; '
            f'{sys.executable} "$MARKS/server_call.py" "{state}" >> "$MARKS/server.out" 2>&1; '
            f'env -u BAGGAGE -u PROCTOR_NONCE -u PROCTOR_WORKER_TAG PATH="{evil}:$PATH" proctor run test '
            ">/dev/null 2>&1; true"
        )
        done, payload = _work(root, "plan/c", env, shell)
        said = _marks(tmp_path, "server.out")
        pwned = os.path.join(root, "PWNED-monitor")
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and not os.path.exists(pwned):
            time.sleep(0.2)
    finally:
        _run(root, "server", "stop", env=env)
    assert said.count("refused") + said.count("ADDED") >= 2, said
    assert "ADDED" not in said and not os.path.exists(pwned), f"the worker acted as the person with the token: {said}"


@pytest.mark.xfail(
    strict=True,
    reason="a known limit, stated in the README: the sandbox narrows writes, not reads, "
    "and a lock can be taken on a file opened for reading; a sandboxed worker can hold the store's lock "
    "while its attempt lasts (it writes nothing: every writer waits, then says which file is held)",
)
def test_a_worker_holding_the_stores_lock_stops_no_one_elses_write(tmp_path):
    """Reads are not narrowed, and flock(2) takes an exclusive lock through a read-only
    descriptor: the worker opens proctor's sidecar lock (<state>/proctor.db.lock) for reading,
    locks it, and holds it for 14 seconds. Meanwhile the person forks a job. The person's write
    must go through: a worker's domain may not stop proctor's store from being written."""
    root, env = _setup(tmp_path)
    state = _state_dir(root)
    lock = os.path.join(state, "proctor.db.lock")
    assert os.path.exists(lock), os.listdir(state)
    hold = (
        f'{sys.executable} -c "import fcntl,os,sys,time\nfd=os.open(sys.argv[1], os.O_RDONLY)\n'
        f"fcntl.flock(fd, fcntl.LOCK_EX)\nopen(sys.argv[2], 'w').write('held')\n"
        f"for i in range(140):\n    sys.stderr.write('tick\\\\n'); sys.stderr.flush(); time.sleep(0.1)\" "
        f'"{lock}" "$MARKS/held"'
    )
    proc = _work_in_background(root, "plan/c", env, 'echo "ok = True" > src/a.py; ' + hold)
    try:
        assert _wait_for(tmp_path, "held"), "the worker never held the lock"
        began = time.monotonic()
        forked = subprocess.run(
            [sys.executable, "-m", "proctor", "job", "fork", "--stdin"],
            cwd=root,
            input=json.dumps(
                {"id": "plan/e", "parent": "plan", "criteria": "e", "check": "test", "write_paths": ["other/e.py"]}
            ),
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - began
    finally:
        out, err = proc.communicate(timeout=120)
    assert forked.returncode == 0 and _row(root, "plan/e") is not None, (
        f"while the worker held proctor's store lock (taken through a read-only descriptor), the person's "
        f"`proctor job fork` failed after {took:.0f}s: {forked.stderr.strip()[-400:]}"
    )


def test_a_percent_encoded_baggage_member_cannot_rename_the_job_a_brokered_command_acts_for(tmp_path):
    """The broker pins BAGGAGE to the worker's job and keeps the worker's other members, decoded.
    The worker hands it a member whose encoded value holds a comma and a second proctor.lease
    (`x=a%2Cproctor.lease%3Dplan%2Fd`), then takes and ends its sibling: `job exec plan/d` and
    `job exit plan/d` with a forged result. plan/d must be left as it was forked."""
    root, env = _setup(tmp_path)
    before = _terms(_sibling(root))
    result = json.dumps({"schema_version": 1, "status": "done", "summary": "forged by the sibling worker"})
    inject = "BAGGAGE='x=a%2Cproctor.lease%3Dplan%2Fd'"
    shell = (
        'echo "ok = True" > src/a.py; '
        f'{inject} proctor job exec plan/d > "$MARKS/inject" 2>&1; echo "exec rc=$?" >> "$MARKS/inject"; '
        f"echo '{result}' | {inject} proctor job exit plan/d --stdin >> \"$MARKS/inject\" 2>&1; "
        'echo "exit rc=$?" >> "$MARKS/inject"'
    )
    done, payload = _work(root, "plan/c", env, shell)
    said = _marks(tmp_path, "inject")
    assert "exit rc=" in said, said + done.stderr[-1000:]
    after = _terms(_row(root, "plan/d"))
    assert after == before, (
        f"plan/c's worker acted as plan/d through a BAGGAGE member the broker decoded into a second "
        f"proctor.lease: plan/d is {after['state']}, result {after['result']}\n{said[-800:]}"
    )


def test_brokered_verbs_that_write_files_land_nothing_outside_the_write_paths(tmp_path):
    """The verbs that write files or widen a grant, through the broker: `proctor init --force`
    (proctor.toml), `proctor agent harness install` (.claude/ and the rest), a child of plan/c
    forked with README and one with src/a.py, and the check run under the child's lease. What
    proctor commits is src/a.py alone, the main checkout's files are as they were, and no child
    holds README."""
    root, env = _setup(tmp_path)
    base = _head(root)
    with open(os.path.join(root, "proctor.toml")) as handle:
        config = handle.read()
    wide = json.dumps(
        {"id": "plan/c/wide", "parent": "plan/c", "criteria": "w", "check": "always", "write_paths": ["README"]}
    )
    inside = json.dumps(
        {"id": "plan/c/in", "parent": "plan/c", "criteria": "i", "check": "test", "write_paths": ["src/a.py"]}
    )
    cmds = [
        "proctor init --force",
        "proctor agent harness install",
        f"echo '{wide}' | proctor job fork --stdin",
        f"echo '{inside}' | proctor job fork --stdin",
        "proctor run test --lease plan/c/in",
        "proctor run always --lease plan/c/wide",
    ]
    shell = 'echo "ok = True" > src/a.py; ' + "; ".join(
        f'{c} >> "$MARKS/out" 2>&1; echo "rc=$? {n}" >> "$MARKS/codes"; echo tick >&2' for n, c in enumerate(cmds)
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert len(_marks(tmp_path, "codes").splitlines()) == len(cmds), _marks(tmp_path, "codes") + done.stderr[-800:]
    committed = _committed_since(root, base)
    with open(os.path.join(root, "proctor.toml")) as handle:
        assert handle.read() == config
    assert not os.path.exists(os.path.join(root, ".claude"))
    wide_row = _row(root, "plan/c/wide")
    assert committed <= {"src/a.py"} and not (wide_row and "README" in (wide_row.get("write_paths") or [])), (
        committed,
        wide_row,
        _marks(tmp_path, "out")[-1500:],
    )
