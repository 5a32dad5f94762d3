"""A sandboxed worker (`[sandbox] workers = true`) turned on what proctor work does AFTER its
attempt, outside any sandbox: the integrity put-back of the person's git config, the gates,
the landing, and the brokered commands it asks for. Each test asserts the promise, so it fails
where the promise breaks; the oracle is the disk, the store, git and exit codes.

HOME is the test's own directory (the worker may write it); whatever a test plants outside
tmp_path is removed in a finally block."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from proctor import sandbox
from tests.sandbox.test_sandbox import _fork
from tests.sandbox.test_sandbox_worker_adversary import _committed_since, _head, _marks, _row, _setup, _state_dir, _work

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(
    ABI == 0 and os.environ.get("CI") != "true",
    reason="this kernel offers no Landlock; CI's kernel does, and there these tests run",
)


def _tree_digest(top: str) -> dict[str, str]:
    """Every file under `top` (not following links) and a digest of it."""
    out = {}
    for base, _dirs, files in os.walk(top):
        for name in files:
            full = os.path.join(base, name)
            try:
                if os.path.islink(full):
                    out[full] = "link:" + os.readlink(full)
                else:
                    with open(full, "rb") as handle:
                        out[full] = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                out[full] = "?"
    return out


# -- 1. the put-back of the person's git config follows a directory link ------------------------


def test_the_put_back_of_xdg_git_config_never_deletes_a_file_outside_the_grant(tmp_path):
    """proctor watches $XDG_CONFIG_HOME/git/{config,ignore,attributes} and, after the attempt,
    deletes what the attempt added there. The worker (which may write ~/.config) makes
    ~/.config/git a symbolic link to the repository's .git directory, which its domain denies
    it: the file proctor then finds "added" at ~/.config/git/config is the repository's own
    config. proctor must not delete it (nor anything else the worker cannot write)."""
    root, env = _setup(tmp_path)
    common = os.path.join(os.path.realpath(root), ".git")
    with open(os.path.join(common, "config"), "rb") as handle:
        before = handle.read()
    shell = (
        'echo "ok = True" > src/a.py; mkdir -p "$XDG_CONFIG_HOME"; rm -rf "$XDG_CONFIG_HOME/git"; '
        'ln -s "$MAIN/.git" "$XDG_CONFIG_HOME/git" && echo linked > "$MARKS/linked"; '
        '(echo x >> "$MAIN/.git/config") 2>/dev/null && echo direct >> "$MARKS/direct"; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert _marks(tmp_path, "linked"), done.stderr[-1500:]
    assert not _marks(tmp_path, "direct"), "the worker could write .git/config itself: the grant is not the one tested"
    exists = os.path.exists(os.path.join(common, "config"))
    after = open(os.path.join(common, "config"), "rb").read() if exists else None
    assert after == before, (
        f"proctor's put-back followed the worker's ~/.config/git link into the repository's .git and "
        f"{'deleted' if after is None else 'rewrote'} .git/config, which the worker's domain denies it\n"
        f"{done.stdout[-1200:]}"
    )


def test_the_put_back_of_xdg_git_config_writes_nothing_into_proctors_state(tmp_path):
    """The same link, aimed at proctor's state directory, with the person's own
    ~/.config/git/ignore and attributes in place before the attempt (as many have): the worker
    moves the directory away and links ~/.config/git to the state directory. proctor, putting
    back "the person's ignore file", must write nothing into its own state directory."""
    root, env = _setup(tmp_path)
    state = _state_dir(root)
    xdg_git = os.path.join(env["XDG_CONFIG_HOME"], "git")
    os.makedirs(xdg_git)
    with open(os.path.join(xdg_git, "ignore"), "w") as handle:
        handle.write("*.swp\n")
    with open(os.path.join(xdg_git, "attributes"), "w") as handle:
        handle.write("*.png binary\n")
    with open(os.path.join(xdg_git, "config"), "w") as handle:
        handle.write("[pwned]\n\tby = the-worker\n")
    shell = (
        'echo "ok = True" > src/a.py; mv "$XDG_CONFIG_HOME/git" "$XDG_CONFIG_HOME/git.moved" && '
        f'ln -s "{state}" "$XDG_CONFIG_HOME/git" && echo linked > "$MARKS/linked"; true'
    )
    done, payload = _work(root, "plan/c", env, shell)
    assert _marks(tmp_path, "linked"), done.stderr[-1500:]
    planted = [
        os.path.join(state, name)
        for name in ("config", "ignore", "attributes")
        if os.path.lexists(os.path.join(state, name))
    ]
    assert not planted, (
        f"proctor's put-back of ~/.config/git followed the worker's link and wrote into its own state "
        f"directory: {planted}\n{done.stdout[-1200:]}"
    )


# -- 2. Python code the worker plants in $HOME, run by proctor's own check ------------------------


def _user_site_python() -> tuple[str, str] | None:
    """A python3 outside any virtual environment that reads the user site, and the user site
    it reads under HOME (relative)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if not os.path.exists(candidate):
            continue
        out = subprocess.run(
            [
                candidate,
                "-c",
                "import site, sys; print(site.ENABLE_USER_SITE, sys.prefix != "
                "sys.base_prefix); print(site.getusersitepackages())",
            ],
            capture_output=True,
            text=True,
            env={"HOME": "/HOME", "PATH": os.defpath},
        )
        lines = out.stdout.split("\n")
        if out.returncode == 0 and lines[0] == "True False" and lines[1].startswith("/HOME/"):
            return candidate, lines[1][len("/HOME/") :]
    return None


PYCHECK = "{python} -c \"import sys; sys.exit(0 if 'ok' in open('src/a.py').read() else 1)\""


@pytest.mark.parametrize("how", ["none", "pth", "usercustomize"])
def test_a_python_check_does_not_pass_on_code_the_worker_put_in_the_user_site(tmp_path, how):
    """The job's check is a Python program (as pytest is), run by a python3 that reads the user
    site ($HOME/.local/lib/pythonX.Y/site-packages, which the worker may write: it is in
    $HOME and on no PATH). The worker leaves src/a.py failing the check and plants a .pth file
    (or usercustomize.py) there that ends every python at once with status 0. proctor's own
    check of the attempt must not pass on it, and nothing may land."""
    found = _user_site_python()
    if found is None:
        pytest.skip("no python3 outside a virtual environment that reads a user site")
    python, user_site = found
    extra = f'\n[targets.pycheck]\ncommand = {json.dumps(PYCHECK.format(python=python))}\ntimeout = "30s"\n'
    root, env = _setup(tmp_path, extra=extra)
    _fork(root, {"id": "plan/p", "parent": "plan", "criteria": "p", "check": "pycheck", "write_paths": ["src/a.py"]})
    base = _head(root)
    site_dir = os.path.join(env["HOME"], user_site)
    plant = {
        "none": "true",  # the control: the check fails on src/a.py as the worker left it
        "pth": 'printf "import os; os._exit(0)\\n" > "{d}/zz-evil.pth"',
        "usercustomize": 'printf "import os\\nos._exit(0)\\n" > "{d}/usercustomize.py"',
    }[how].format(d=site_dir)
    shell = f'echo "not good" > src/a.py; mkdir -p "{site_dir}" && {plant} && echo planted > "$MARKS/planted"; true'
    done, payload = _work(root, "plan/p", env, shell)
    assert payload is not None, done.stdout[-1500:] + done.stderr[-1500:]
    committed = _committed_since(root, base)
    with open(os.path.join(root, "src", "a.py")) as handle:
        landed = handle.read()
    assert payload["passed"] is False and "src/a.py" not in committed, (
        f"the Python check passed on the worker's {how} in the user site, and src/a.py (which fails the real "
        f"check: {landed!r}) landed: {committed}"
    )


# -- 3. a ~/.gitconfig proctor cannot put back ----------------------------------------------------

EVIL_GITCONFIG = (
    'cat > "$HOME/evil.sh" <<EOF\n#!/bin/sh\n'
    'gp=\\$(awk "{print \\\\\\$4}" /proc/\\$PPID/stat)\n'
    'echo "\\$0 \\$* by \\$(tr "\\\\\\\\0" " " < /proc/\\$gp/cmdline)" >> "$MAIN/PWNED"\n'
    '$EDIT_ROW plan/d criteria \'"pwned"\' >/dev/null 2>&1 && echo edited >> "$MAIN/PWNED"\n'
    "cat\nEOF\n"
    'chmod +x "$HOME/evil.sh"; echo "* filter=evil diff=evil" > "$HOME/attrs"; '
    'printf "[core]\\n\\tattributesFile = $HOME/attrs\\n[filter \\"evil\\"]\\n\\tclean = $HOME/evil.sh clean\\n'
    '\\tsmudge = $HOME/evil.sh smudge\\n[diff \\"evil\\"]\\n\\ttextconv = $HOME/evil.sh\\n" > "$HOME/.gitconfig"; '
)


@pytest.mark.parametrize("lock", ["immutable", "read-only-home"])
def test_a_gitconfig_proctor_cannot_put_back_runs_nothing_of_proctors(tmp_path, lock):
    """The worker plants the filter of ~/.gitconfig and then makes it impossible to remove:
    `chattr +i` (a worker running as root holds CAP_LINUX_IMMUTABLE, and Landlock does not
    govern inode flags) or `chmod a-w $HOME` (Landlock does not govern modes either; for a
    non-root proctor that is enough). proctor's put-back fails; its own git after the attempt
    (the gates' diff, the landing) must still run nothing the worker named, and no sibling's
    row may change."""
    root, env = _setup(tmp_path)
    _fork(root, {"id": "plan/d", "parent": "plan", "criteria": "d", "check": "test", "write_paths": ["other/b.py"]})
    home = env["HOME"]
    lock_cmd = (
        'chattr +i "$HOME/.gitconfig" "$HOME/attrs" "$HOME/evil.sh" && echo locked > "$MARKS/locked"'
        if lock == "immutable"
        else 'chmod 555 "$HOME" && echo locked > "$MARKS/locked"'
    )
    shell = 'echo "ok = True" > src/a.py; ' + EVIL_GITCONFIG + lock_cmd + "; true"
    try:
        done, payload = _work(root, "plan/c", env, shell)
    finally:
        subprocess.run(["chattr", "-i", f"{home}/.gitconfig", f"{home}/attrs", f"{home}/evil.sh"], capture_output=True)
        os.chmod(home, 0o755)
    if not _marks(tmp_path, "locked"):
        pytest.skip(f"the worker could not {lock} here: {done.stderr[-300:]}")
    pwned = os.path.join(root, "PWNED")
    ran = open(pwned).read() if os.path.exists(pwned) else ""
    d = _row(root, "plan/d")
    assert not ran and d["criteria"] == "d", (
        f"a ~/.gitconfig proctor could not put back ({lock}) ran its filter in proctor's own git, with "
        f"proctor's rights (main checkout written; plan/d {d['criteria']!r}):\n{ran[:1500]}"
    )


# -- 4. what Landlock does not govern: modes and inode flags of proctor's store --------------------


@pytest.mark.xfail(
    os.geteuid() == 0,
    strict=True,
    reason="a known limit, stated in the README: a worker run as root "
    "holds CAP_LINUX_IMMUTABLE, and Landlock does not govern inode flags: `chattr +i` on the store "
    "outlasts its attempt (modes alone proctor puts back; run workers as an unprivileged user)",
)
def test_the_worker_cannot_change_the_modes_or_flags_of_proctors_store(tmp_path):
    """Landlock governs opening for write, making and removing; not chmod(2) nor inode flags.
    The worker makes proctor's store read-only (`chmod 444` on proctor.db and its lock, `chmod
    555` on the state directory: enough for a non-root proctor) and, where it holds the right,
    immutable (`chattr +i`: enough for root), then lets its attempt end. Unlike a lock held
    through a read-only descriptor (ended with the attempt), this outlasts it: once `proctor
    work` has returned, the person's `proctor job fork` must still write the store, and the
    store's files must keep the modes they had."""
    root, env = _setup(tmp_path)
    state = _state_dir(root)
    files = [os.path.join(state, name) for name in ("proctor.db", "proctor.db.lock")] + [state]
    files = [f for f in files if os.path.exists(f)]
    modes = {f: os.stat(f).st_mode & 0o7777 for f in files}
    quoted = " ".join(f'"{f}"' for f in files)
    shell = (
        'echo "ok = True" > src/a.py; pwd > "$MARKS/worktree"; '
        f'for f in {quoted}; do chmod a-w "$f" 2>/dev/null && echo "chmod $f" >> "$MARKS/changed"; '
        f'chattr +i "$f" 2>/dev/null && echo "chattr $f" >> "$MARKS/changed"; done; true'
    )
    try:
        done, payload = _work(root, "plan/c", env, shell)
        changed = _marks(tmp_path, "changed")
        now = {f: os.stat(f).st_mode & 0o7777 for f in files}
        flags = subprocess.run(["lsattr", "-d", *files], capture_output=True, text=True).stdout
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
    finally:
        subprocess.run(["chattr", "-i", *files], capture_output=True)
        for f, mode in modes.items():
            os.chmod(f, mode)
        # proctor work, failing on the store, leaves its worktree (outside tmp_path) behind: removed here
        import shutil

        left = _marks(tmp_path, "worktree").strip()
        if left and os.path.isdir(left):
            subprocess.run(["git", "worktree", "remove", "--force", "--force", left], cwd=root, capture_output=True)
            shutil.rmtree(left, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(left))
            except OSError:
                pass
    immutable = [line for line in flags.splitlines() if "i" in line.split()[0]] if flags else []
    assert now == modes and not immutable and forked.returncode == 0, (
        f"the worker changed proctor's store past its attempt: modes {modes} -> {now}, immutable {immutable}; "
        f"the person's `proctor job fork` then exited {forked.returncode}: {forked.stderr.strip()[-400:]}\n"
        f"worker: {changed}"
    )
