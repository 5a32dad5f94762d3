"""Adversarial tests of the sandbox (proctor/sandbox.py): a target run under a child job's lease
tries every way it can think of to write inside the checkout outside its grant, to run
unsandboxed while its row says it is narrowed, or to leave a misleading run record.

Each test asserts the PROMISE, so it fails where the promise breaks. The oracle of what got
written is the disk itself (each file's content read back after the run), never proctor's word.
proctor runs as a real process (`python -m proctor`), so the sandbox applies as in real use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from proctor import sandbox
from tests.support import git, machine_wide
from tests.sandbox.test_sandbox import _audit, audit_switch, seccomp_wrapper as _seccomp_wrapper

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(ABI == 0 and os.environ.get("CI") != "true", reason="this kernel offers no Landlock")

PY = sys.executable


# -- helpers ------------------------------------------------------------------------------------


def _repo(
    tmp_path,
    script: str,
    mode: str = "landlock",
    name: str = "repo",
    extra_files: dict | None = None,
    init_args: tuple = (),
) -> str:
    root = tmp_path / name
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main", *init_args)
    files = {
        "src/a.py": "a\n",
        "other/b.py": "b\n",
        "lib/sub/keep.py": "k\n",
        "lib/sub/secret.py": "s\n",
        "proctor.toml": f'[targets.w]\ncommand = "sh ./attack.sh"\ntimeout = "60s"\n\n[sandbox]\nmode = "{mode}"\n',
        "attack.sh": script,
    }
    files.update(extra_files or {})
    for rel, text in files.items():
        os.makedirs(os.path.join(root, os.path.dirname(rel)) or ".", exist_ok=True)
        with open(os.path.join(root, rel), "w") as handle:
            handle.write(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return str(root)


def _proctor(cwd: str, *argv: str, env: dict | None = None, prefix: list | None = None, stdin: str | None = None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [*(prefix or []), PY, "-m", "proctor", *argv],
        cwd=cwd,
        env=full,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fork(root: str, record: dict) -> subprocess.CompletedProcess:
    return _proctor(root, "job", "fork", "--stdin", stdin=json.dumps(record))


def _child(root: str, job: str = "parent/child", **fields) -> None:
    done = _fork(root, {"id": "parent", "criteria": "the whole", "check": "w"})
    assert done.returncode == 0 or "exists" in done.stdout + done.stderr, done.stdout + done.stderr
    record = {"id": job, "parent": "parent", "criteria": "a part", "check": "w", "write_paths": ["src/a.py"]}
    record.update(fields)
    done = _fork(root, record)
    assert done.returncode == 0, done.stdout + done.stderr


def _run(root: str, lease: str | None = "parent/child", env: dict | None = None, prefix=None, cwd: str | None = None):
    argv = ["run", "w", "-o", "json"] + (["--lease", lease] if lease else [])
    done = _proctor(cwd or root, *argv, env=env, prefix=prefix)
    record = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
    return done, record


def _read(root: str, rel: str) -> str | None:
    try:
        with open(os.path.join(root, rel)) as handle:
            return handle.read()
    except OSError:
        return None


def _untouched(root: str) -> None:
    """The files outside src/a.py's grant as they were committed."""
    assert _read(root, "other/b.py") == "b\n", "other/b.py was written"
    assert _read(root, "lib/sub/secret.py") == "s\n", "lib/sub/secret.py was written"


# -- 0. the baseline: a direct write outside the grant is refused ---------------------------------


def test_baseline_direct_writes_are_refused(tmp_path):
    root = _repo(
        tmp_path,
        "echo x >> src/a.py; echo x > other/b.py; echo x > lib/sub/secret.py; "
        "echo x > rootfile; echo x > .git/hooks/pre-commit; true\n",
    )
    _child(root)
    done, record = _run(root)
    assert done.returncode == 0, done.stderr
    assert _read(root, "src/a.py") == "a\nx\n"
    _untouched(root)
    assert _read(root, "rootfile") is None and _read(root, ".git/hooks/pre-commit") is None
    assert record["sandbox"]["job"] == "parent/child"


# -- 1. git configuration outside the checkout, run by proctor's own (unsandboxed) git ----------

FILTER_ATTACK = r"""R=$PWD
printf '#!/bin/sh\necho pwned-by-filter > %s/other/b.py\ncat\n' "$R" > "$HOME/f.sh"; chmod +x "$HOME/f.sh"
printf '[core]\n\tattributesFile = %s/attrs\n[filter "x"]\n\tclean = %s/f.sh\n' "$HOME" "$HOME" > "$HOME/.gitconfig"
echo '* filter=x' > "$HOME/attrs"
echo changed >> src/a.py
"""


def test_a_global_gitconfig_clean_filter_is_no_way_around_the_grant(tmp_path):
    """The target may write $HOME (outside the checkout). It writes a global git config whose
    clean filter writes other/b.py, then touches its own granted file: proctor hashes the changed
    tree after the run with `git hash-object` (filters on), unsandboxed, and the filter runs."""
    home = tmp_path / "home"
    home.mkdir()
    root = _repo(tmp_path, FILTER_ATTACK)
    _child(root)
    done, record = _run(root, env={"HOME": str(home)})
    assert record is not None and record["sandbox"] is not None, done.stderr
    assert _read(root, "src/a.py") == "a\nchanged\n"
    assert _read(root, "other/b.py") == "b\n", "a git filter planted by the sandboxed target wrote other/b.py"


def test_a_global_gitconfig_fsmonitor_is_no_way_around_the_grant(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    script = r"""R=$PWD
printf '#!/bin/sh\necho pwned-by-fsmonitor > %s/other/b.py\nexit 1\n' "$R" > "$HOME/m.sh"; chmod +x "$HOME/m.sh"
printf '[core]\n\tfsmonitor = %s/m.sh\n\tuntrackedCache = true\n' "$HOME" > "$HOME/.gitconfig"
echo changed >> src/a.py
"""
    root = _repo(tmp_path, script)
    _child(root)
    done, record = _run(root, env={"HOME": str(home)})
    assert record is not None and record["sandbox"] is not None, done.stderr
    assert _read(root, "other/b.py") == "b\n", "an fsmonitor hook planted by the sandboxed target wrote other/b.py"


def test_a_separate_git_dir_is_no_way_around_the_grant(tmp_path):
    """A checkout whose git directory lives elsewhere (`git init --separate-git-dir`): the
    repository's config and info/attributes are outside the checkout, so writable; a clean
    filter set there runs in proctor's own git calls."""
    gitdir = tmp_path / "gitdir"
    script = r"""R=$PWD
G=$(git rev-parse --git-dir)
printf '#!/bin/sh\necho pwned-by-repo-filter > %s/other/b.py\ncat\n' "$R" > "$PROCTOR_T_SCRATCH/f.sh"
chmod +x "$PROCTOR_T_SCRATCH/f.sh"
printf '[filter "x"]\n\tclean = %s/f.sh\n' "$PROCTOR_T_SCRATCH" >> "$G/config" || echo no:config
mkdir -p "$G/info"; echo '* filter=x' > "$G/info/attributes" || echo no:attributes
echo changed >> src/a.py
"""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    root = _repo(tmp_path, script, init_args=("--separate-git-dir", str(gitdir)))
    _child(root)
    done, record = _run(root, env={"PROCTOR_T_SCRATCH": str(scratch)})
    assert record is not None and record["sandbox"] is not None, done.stderr
    assert _read(root, "other/b.py") == "b\n", (
        f"the repository's own git dir ({gitdir}) was writable and its filter wrote other/b.py: {done.stderr}"
    )


# -- 2. links and moves -------------------------------------------------------------------------


def test_links_and_moves_from_inside_the_grant(tmp_path):
    script = """ln other/b.py src/hard.py && echo x > src/hard.py
ln -s ../other/b.py src/soft.py && echo x > src/soft.py
ln -s ../other src/dirlink && echo x > src/dirlink/b.py
mv other/b.py src/moved.py && echo x > src/moved.py
mv src/a.py other/a.py
mv lib/sub src/sub && echo x > src/sub/secret.py
echo x > lib/sub/../sub/secret.py
true
"""
    root = _repo(tmp_path, script)
    _child(root, write_paths=["src/new/x.py"])  # a missing literal: its nearest directory, src, is granted
    done, record = _run(root)
    assert done.returncode == 0, done.stderr
    assert record["sandbox"]["grant"][0].endswith("/src"), record["sandbox"]
    _untouched(root)
    assert _read(root, "src/a.py") == "a\n" and _read(root, "other/a.py") is None


def test_a_symlink_left_by_a_previous_run_grants_nothing_in_the_next(tmp_path):
    """Run 1 (granted src, and a missing src/l/b.py that walks up to src) plants src/l ->
    ../other; run 2 resolves the same row again and must not follow the link."""
    script = """[ -e src/l ] || { ln -s ../other src/l; ln -s .. src/up; echo planted; exit 0; }
echo x > src/l/b.py; echo x > src/up/other/b.py; echo x > src/up/rootfile; true
"""
    root = _repo(tmp_path, script)
    _child(root, write_paths=["src/l/b.py", "src/up/other/b.py"])
    first, _ = _run(root)
    assert os.path.islink(os.path.join(root, "src/l")), first.stderr
    second, record = _run(root)
    _untouched(root)
    assert _read(root, "rootfile") is None
    assert record["sandbox"] is not None


@pytest.mark.xfail(
    strict=True,
    reason="Landlock judges the path a file is opened by: a hard link made before the "
    "run, by someone outside it, inside a granted directory is that directory's file (a run cannot "
    "make one itself: test_links_and_moves_from_inside_the_grant)",
)
def test_a_preexisting_hard_link_in_the_grant(tmp_path):
    """A hard link inside a granted directory to a file outside it, made before the run (by the
    repository itself): a write through it changes the file outside the grant."""
    root = _repo(tmp_path, "echo x > src/h.py; true\n")
    os.link(os.path.join(root, "other/b.py"), os.path.join(root, "src/h.py"))
    _child(root, write_paths=["src/new/x.py"])  # grants the directory src
    _run(root)
    assert _read(root, "other/b.py") == "b\n", "other/b.py changed through a hard link in src/"


# -- 3. spellings of write paths -----------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "./src/../src/a.py",
        "src//a.py",
        "ABS",
        "../repo/src/a.py",
        "src/./a.py",
        "src/a.py/",
        "**",
        "*",
        "src/**",
        "**/*.py",
        "[s]rc/a.py",
        "src/a.py#x",
    ],
)
def test_write_path_spellings_never_grant_the_git_dir_or_other(tmp_path, spelling):
    script = """echo x > .git/hooks/pre-commit; echo x >> .git/config; echo x > .git/HEAD.lock
git config core.hooksPath /tmp/nowhere; echo x > proctor.toml.new; true
"""
    root = _repo(tmp_path, script)
    path = os.path.join(root, "src/a.py") if spelling == "ABS" else spelling
    fields = {"write_paths": [path]}
    if spelling not in ("**", "*", "**/*.py"):
        script_other = "echo x > other/b.py; "
    else:
        script_other = ""
    with open(os.path.join(root, "attack.sh"), "w") as handle:
        handle.write(script_other + script)
    done = _fork(root, {"id": "parent", "criteria": "w", "check": "w"})
    assert done.returncode == 0, done.stderr
    done = _fork(root, {"id": "parent/child", "parent": "parent", "criteria": "c", "check": "w", **fields})
    if spelling == "../repo/src/a.py":  # outside the repository, however it comes back: refused
        assert done.returncode != 0 and "PRC3041" in done.stdout + done.stderr, done.stdout + done.stderr
        return
    assert done.returncode == 0, done.stdout + done.stderr
    config = _read(root, ".git/config")
    done, record = _run(root)
    assert record is not None, done.stderr
    assert _read(root, ".git/hooks/pre-commit") is None, record["sandbox"]
    assert _read(root, ".git/config") == config, record["sandbox"]
    assert _read(root, ".git/HEAD.lock") is None
    # "[s]rc/a.py" is no glob to proctor: a literal whose nearest existing directory is the root,
    # so it grants the whole checkout (bar .git), as the spec says a missing literal does
    if spelling not in ("**", "*", "src/**", "**/*.py", "[s]rc/a.py"):
        assert _read(root, "other/b.py") == "b\n", record["sandbox"]
    if spelling not in ("*", "**", "[s]rc/a.py"):
        assert _read(root, "proctor.toml.new") is None, record["sandbox"]


# -- 4. deny paths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "write,deny,probe",
    [
        (["src/a.py"], ["src"], "src/a.py"),  # a deny path around a write path
        (["src/new/x.py"], ["./src/../src/a.py"], "src/a.py"),  # a deny path spelled oddly
        (["src/new/x.py"], ["src/*.py"], "src/a.py"),  # a deny glob
        (["src/new/x.py"], ["src/*.py"], "src/new.py"),  # a deny glob: a new file it would match
        (["lib/**"], ["lib/sub/secret.py"], "lib/sub/secret.py"),
        (["lib/*"], ["lib/sub/secret.py", "lib/sub"], "lib/sub/secret.py"),
        (["lib/sub/secret.py"], ["lib/sub/secret.py"], "lib/sub/secret.py"),  # write and deny the same
        (["lib/*"], ["lib/sub/"], "lib/sub/secret.py"),  # a deny path with a trailing slash
    ],
)
def test_a_deny_path_is_never_written(tmp_path, write, deny, probe):
    root = _repo(tmp_path, f"echo x > {probe}; true\n", extra_files={"src/new.txt": "n\n"})
    done = _fork(root, {"id": "parent", "criteria": "w", "check": "w"})
    done = _fork(
        root,
        {
            "id": "parent/child",
            "parent": "parent",
            "criteria": "c",
            "check": "w",
            "write_paths": write,
            "deny_paths": deny,
        },
    )
    assert done.returncode == 0, f"fork refuses {write} / {deny}: {(done.stdout + done.stderr).strip()[:200]}"
    before = _read(root, probe)
    done, record = _run(root)
    assert record is not None, done.stderr
    assert _read(root, probe) == before, f"{probe} (denied by {deny}) was written; grant {record['sandbox']}"


# -- 5. the git directory and a linked worktree ----------------------------------------------------


def test_the_git_dir_by_every_door(tmp_path):
    outside = tmp_path / "wtree"
    script = f"""echo x > .git/hooks/post-commit; chmod +x .git/hooks/post-commit
git config core.hooksPath /tmp; git config filter.x.clean cat
mkdir -p .git/info; echo '* filter=x' > .git/info/attributes
git worktree add -q {outside} 2>/dev/null
git update-ref refs/heads/evil HEAD; git tag evil; git stash
echo x > /proc/self/cwd/other/b.py; echo x > /proc/self/root{{ROOT}}/other/b.py; echo x > /proc/$$/cwd/.git/x
true
"""
    root = _repo(tmp_path, script)
    with open(os.path.join(root, "attack.sh")) as handle:
        text = handle.read().replace("{ROOT}", os.path.realpath(root))
    with open(os.path.join(root, "attack.sh"), "w") as handle:
        handle.write(text)
    git(root, "commit", "-qam", "attack")
    _child(root)
    config = _read(root, ".git/config")
    refs = git(root, "for-each-ref")
    done, record = _run(root)
    assert record["sandbox"] is not None
    assert _read(root, ".git/config") == config
    assert git(root, "for-each-ref") == refs
    assert _read(root, ".git/hooks/post-commit") is None and _read(root, ".git/info/attributes") is None
    assert _read(root, ".git/x") is None and not outside.exists()
    _untouched(root)


def test_a_linked_worktree_as_the_checkout(tmp_path):
    main = _repo(tmp_path, "true\n")
    wt = str(tmp_path / "wt")
    git(main, "worktree", "add", "-q", wt)
    with open(os.path.join(wt, "attack.sh"), "w") as handle:
        handle.write(f"""echo x > other/b.py; echo x > {main}/other/b.py; echo x > {main}/.git/hooks/post-commit
echo x >> {main}/.git/config; echo x > $(git rev-parse --git-dir)/x; echo x >> src/a.py; true
""")
    _child(wt)
    config = _read(main, ".git/config")
    done, record = _run(wt, cwd=wt)
    assert record["sandbox"] is not None, done.stderr
    assert _read(wt, "src/a.py") == "a\nx\n"
    _untouched(wt)
    _untouched(main)
    assert _read(main, ".git/hooks/post-commit") is None and _read(main, ".git/config") == config
    assert not os.path.exists(os.path.join(main, ".git/worktrees/wt/x"))


# -- 6. the kernel's own doors: mounts, namespaces, /proc ------------------------------------------


def test_mounts_and_namespaces(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    script = f"""mount --bind {scratch} other 2>/dev/null && echo MOUNTED
unshare -m sh -c 'mount --bind {scratch} other && echo x > other/b.py' 2>/dev/null
unshare -Urm sh -c 'mount --bind {scratch} other; echo x > other/b.py' 2>/dev/null
mkdir -p $TMPDIR/m; mount --bind . $TMPDIR/m 2>/dev/null && echo x > $TMPDIR/m/other/b.py
mount -t tmpfs none lib 2>/dev/null
true
"""
    root = _repo(tmp_path, script)
    _child(root)
    done, record = _run(root)
    subprocess.run(["umount", "-l", os.path.join(root, "other")], capture_output=True)
    subprocess.run(["umount", "-l", os.path.join(root, "lib")], capture_output=True)
    assert "MOUNTED" not in done.stderr
    _untouched(root)


# -- 7. lease spellings, nesting, what outlives the run ------------------------------------------


@pytest.mark.parametrize("how", ["baggage", "baggage-encoded", "baggage-many", "proctor-lease-env"])
def test_the_lease_given_other_ways_still_narrows(tmp_path, how):
    root = _repo(tmp_path, "echo x > other/b.py; true\n")
    _child(root)
    env = {
        "baggage": {"BAGGAGE": "proctor.lease=parent/child"},
        "baggage-encoded": {"BAGGAGE": "proctor.lease=parent%2Fchild"},
        "baggage-many": {"BAGGAGE": "a=b, proctor.lease=parent/child;p=1, c=d"},
        "proctor-lease-env": {"PROCTOR_LEASE": "parent/child"},
    }[how]
    done, record = _run(root, lease=None, env=env)
    if how == "proctor-lease-env" and record is not None and record["lease"] is None:
        # PROCTOR_LEASE is what proctor sets for a target, not a way to name a lease: no lease, no narrowing
        return
    assert record is not None, done.stderr
    assert record["lease"] == "parent/child"
    assert record["sandbox"] is not None
    _untouched(root)


def test_a_nested_proctor_run_stays_inside(tmp_path):
    script = f"""{PY} -m proctor run inner --lease parent -o json > $TMPDIR/o1 2>&1
{PY} -m proctor run inner --orchestrator -o json > $TMPDIR/o2 2>&1
BAGGAGE= {PY} -m proctor run inner -o json > $TMPDIR/o3 2>&1
cat $TMPDIR/o1 $TMPDIR/o2 $TMPDIR/o3 >&2
true
"""
    root = _repo(tmp_path, script)
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write('\n[targets.inner]\ncommand = "echo x > other/b.py; echo x > lib/sub/secret.py"\n')
    git(root, "commit", "-qam", "inner")
    _child(root)
    done, record = _run(root)
    assert record["sandbox"] is not None, done.stderr
    _untouched(root)


def test_a_background_process_outlives_the_run(tmp_path):
    script = """setsid sh -c 'sleep 1.5; echo late > other/b.py; echo late > src/a.py' </dev/null >/dev/null 2>&1 &
nohup sh -c 'sleep 1.5; echo late > lib/sub/secret.py' </dev/null >/dev/null 2>&1 &
true
"""
    root = _repo(tmp_path, script)
    _child(root)
    done, record = _run(root)
    assert record["sandbox"] is not None, done.stderr
    time.sleep(3)
    _untouched(root)
    assert _read(root, "src/a.py") == "late\n", "the granted file stays writable to what the run left behind"


def test_the_target_cannot_reach_an_unsandboxed_process(tmp_path):
    """ptrace, /proc/<pid>/mem of the proctor parent, and signals are the ways to borrow an
    unsandboxed process's authority."""
    script = f"""P=$(ps -o ppid= -p $PPID | tr -d ' ')  # the proctor process: /bin/sh -c is in the domain
echo x > /proc/$P/cwd/other/b.py; echo x > /proc/$P/root$(readlink /proc/$P/cwd)/lib/sub/secret.py
{PY} - "$P" <<'EOF' 2>&1 | sed 's/^/probe: /' >&2
import ctypes, os, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, pid, 0, 0)  # PTRACE_ATTACH
print("ptrace", r, ctypes.get_errno())
if r == 0:
    libc.ptrace(17, pid, 0, 0)
try:
    open(f"/proc/{{pid}}/mem", "r+b"); print("MEM-OPEN")
except OSError as e:
    print("mem", e.errno)
try:
    os.listdir(f"/proc/{{pid}}/fd"); print("FD-LIST")
except OSError as e:
    print("fd", e.errno)
EOF
true
"""
    root = _repo(tmp_path, script)
    _child(root)
    done, record = _run(root)
    assert "MEM-OPEN" not in done.stderr and "ptrace 0 " not in done.stderr, done.stderr
    _untouched(root)


# -- 8. the row itself: the sandbox's source of truth, from inside the sandbox -------------------


def test_the_sandboxed_target_cannot_rewrite_its_own_row(tmp_path):
    """The store lives outside the checkout (PROCTOR_STATE_DIR), which the grant leaves
    writable: run 1 rewrites its own row (no write paths), run 2 under the same lease runs
    unsandboxed and writes other/b.py."""
    script = f"""if [ ! -e "$HOME/done" ]; then
{PY} - <<'EOF'
import glob, json, os, sqlite3
for db in glob.glob(os.environ["PROCTOR_STATE_DIR"] + "/*/proctor.db"):
    c = sqlite3.connect(db)
    for (doc,) in c.execute("SELECT doc FROM jobs WHERE id = 'parent/child'").fetchall():
        d = json.loads(doc); d["write_paths"] = ["**"]; d["deny_paths"] = []
        c.execute("UPDATE jobs SET doc = ? WHERE id = 'parent/child'", (json.dumps(d),))
    c.commit()
EOF
touch "$HOME/done"; exit 0
fi
echo x > other/b.py; true
"""
    home = tmp_path / "home"
    home.mkdir()
    root = _repo(tmp_path, script)
    _child(root)
    first, record1 = _run(root, env={"HOME": str(home)})
    assert record1["sandbox"]["grant"][0].endswith("src/a.py"), record1
    second, record2 = _run(root, env={"HOME": str(home)})
    assert _read(root, "other/b.py") == "b\n", (
        f"run 1 widened its own row from inside the sandbox; run 2's grant: {record2['sandbox']['grant']}"
    )


# -- 9. scale ------------------------------------------------------------------------------------


def test_a_big_tree_is_planned_quickly(tmp_path):
    files = {f"big/d{i}/f{j}.py": "x\n" for i in range(300) for j in range(10)}
    root = _repo(tmp_path, "echo y > big/d7/f3.py; echo y > other/b.py; true\n", extra_files=files)
    _child(root, write_paths=["big/**/*.py", "src/*"], deny_paths=["big/d7/f4.py"])
    started = time.monotonic()
    done, record = _run(root)
    took = time.monotonic() - started
    assert record["sandbox"] is not None, done.stderr
    assert _read(root, "big/d7/f3.py") == "y\n"
    _untouched(root)
    assert took < 15, f"a run over 3000 files took {took:.1f}s"


# -- 10. kernels without (part of) Landlock ---------------------------------------------------------


def test_a_kernel_without_landlock_refuses_or_says_so(tmp_path):
    prefix = _seccomp_wrapper(tmp_path, (444, 445, 446))
    root = _repo(tmp_path, "echo ran > other/b.py\n")
    _child(root)
    done, record = _run(root, prefix=prefix)
    assert done.returncode != 0 and "PRC3061" in done.stdout + done.stderr, done.stdout + done.stderr
    assert _read(root, "other/b.py") == "b\n", "the target ran though landlock mode had no Landlock"
    with open(os.path.join(root, "proctor.toml")) as handle:
        text = handle.read().replace('mode = "landlock"', 'mode = "auto"')
    with open(os.path.join(root, "proctor.toml"), "w") as handle:
        handle.write(text)
    done, record = _run(root, prefix=prefix)
    assert record["sandbox"] is None and "not sandboxed" in done.stderr
    assert _read(root, "other/b.py") == "ran\n"


def test_restrict_self_failing_in_the_child_is_said_so(tmp_path):
    """Landlock present (create/add work) but landlock_restrict_self refused in the child: the
    target must not run, and proctor must not record a run that 'ran sandboxed' with exit 126 as
    though the target itself had failed."""
    prefix = _seccomp_wrapper(tmp_path, (446,))
    root = _repo(tmp_path, "echo ran > other/b.py; echo ran > src/a.py\n")
    _child(root)
    done, record = _run(root, prefix=prefix)
    assert _read(root, "other/b.py") == "b\n" and _read(root, "src/a.py") == "a\n", "ran unsandboxed"
    said = done.stdout + done.stderr
    assert record is None or "PRC3062" in said or "landlock_restrict_self" in said, (
        f"the target never ran, yet a run is recorded as run in the sandbox with exit {record['exit_code']} "
        f"and {record['output_bytes']} bytes of output, and nothing says why: {said[-400:]}"
    )


# -- 11. the record of denials ---------------------------------------------------------------------


@machine_wide("kernel-audit")
def test_the_target_turning_audit_off_leaves_no_false_zero(tmp_path):
    """With audit on, the record counts denials; a root target can switch the kernel's audit off
    (AUDIT_SET, not a filesystem write) before its refused writes: the record must not then say
    `denials: 0` as though nothing was refused."""
    was = sandbox._audit_enabled()
    audit_switch(1)
    script = f"""{PY} - <<'EOF'
import socket, struct
s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9); s.bind((0, 0))
body = struct.pack("8I", 1, 0, 0, 0, 0, 0, 0, 0) + b"\\0" * 8
s.send(struct.pack("IHHII", 16 + len(body), 1001, 1 | 4, 1, 0) + body); s.recv(65536)
EOF
echo x > other/b.py; echo x > lib/sub/secret.py; true
"""
    try:
        root = _repo(tmp_path, script)
        _child(root)
        done, record = _run(root)
    finally:
        _audit(1 if was else 0)
    _untouched(root)
    box = record["sandbox"]
    assert box["denials"] != 0, f"two writes were refused, and the record says: {box}"


@machine_wide("kernel-audit")
def test_denials_of_a_background_child_and_a_renamed_shell_are_counted(tmp_path):
    """Denials from the target's children (not only the shell that made the domain)."""
    was = sandbox._audit_enabled()
    audit_switch(1)
    script = "sh -c 'echo x > other/b.py'; (echo x > lib/sub/secret.py) ; exec sh -c 'echo x > rootfile; true'\n"
    try:
        root = _repo(tmp_path, script)
        _child(root)
        done, record = _run(root)
    finally:
        _audit(1 if was else 0)
    _untouched(root)
    assert record["sandbox"]["denials"] >= 3, record["sandbox"]
