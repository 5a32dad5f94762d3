"""The sandbox on this machine's kernel, for real: Landlock write grants read from the job row
(`proctor run` and `proctor work`), what narrows and what does not, the denials as the kernel's
audit log reports them, and a kernel without Landlock (a seccomp filter makes the Landlock
system calls fail with ENOSYS, as on a kernel built without it). Bash itself is the oracle of
what a target wrote: each write is attempted and its result read back from the disk."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys

import pytest

from proctor import sandbox
from tests.support import git, machine_wide, make_repo
from tests.support import SHARED_FIXTURES, STANDIN

ABI = sandbox.kernel_abi()
pytestmark = pytest.mark.skipif(
    ABI == 0 and os.environ.get("CI") != "true",
    reason="this kernel offers no Landlock; CI's kernel does, and there these tests run",
)

# The target writes each probe and prints ok:<name> or no:<name>: what the shell could write.
PROBES = {
    "inside": "src/a.py",  # the job's write path (a file)
    "outside": "other/b.py",  # another file of the checkout
    "newroot": "rootfile",  # a new file at the root of the checkout
    "new_in_literal": "gen/new/x.py",  # under a literal write path that did not exist (gen/new)
    "beside_denied": "lib/sub/keep.py",  # next to a deny path inside a granted directory
    "denied": "lib/sub/secret.py",  # the deny path itself
    "new_beside_denied": "lib/sub/new.py",  # a new file in the directory the deny path cost
    "git": ".git/hooks/post-commit",  # the repository's own hooks
}


def _script() -> str:
    lines = []
    for name, path in PROBES.items():
        lines.append(
            f'mkdir -p "$(dirname {path})" 2>/dev/null; '
            f"if echo written-by-target > {path}; then echo ok:{name}; else echo no:{name}; fi"
        )
    lines.append('if echo t > "$TMPDIR/t"; then echo ok:tmp; else echo no:tmp; fi')
    lines.append('if echo c > "$PROCTOR_TEST_CACHE/c"; then echo ok:cache; else echo no:cache; fi')
    lines.append('if echo o > "$PROCTOR_TEST_OUTSIDE/o"; then echo ok:beyond; else echo no:beyond; fi')
    return "\n".join(lines) + "\n"


def _repo(tmp_path, mode: str = "landlock", workers: bool = False) -> str:
    config = f"""[targets.probe]
command = "sh ./probe.sh"
timeout = "30s"

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"

[sandbox]
mode = "{mode}"
workers = {"true" if workers else "false"}
"""
    root = make_repo(tmp_path / "repo", config)
    for rel, text in (
        ("src/a.py", "a\n"),
        ("other/b.py", "b\n"),
        ("lib/sub/keep.py", "k\n"),
        ("lib/sub/secret.py", "s\n"),
        ("gen/.keep", ""),
    ):
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w") as handle:
            handle.write(text)
    with open(os.path.join(root, "probe.sh"), "w") as handle:
        handle.write(_script())
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")
    return root


def _proctor(root: str, *argv: str, env: dict | None = None, prefix: list[str] | None = None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "proctor", *argv],
        cwd=root,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fork(root: str, record: dict) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "proctor", "job", "fork", "--stdin"],
        cwd=root,
        input=json.dumps(record),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _child(root: str, **fields) -> None:
    _fork(root, {"id": "plan", "criteria": "the whole", "check": "test"})
    record = {
        "id": "plan/c",
        "parent": "plan",
        "criteria": "a part",
        "check": "test",
        "write_paths": ["src/a.py", "gen/new/x.py", "lib/*"],
        "deny_paths": ["lib/sub/secret.py"],
    }
    record.update(fields)
    _fork(root, record)


def _probe(root: str, lease: str | None, tmp_path, env: dict | None = None, prefix=None):
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "proctor")
    argv = ["run", "probe", "-o", "json"] + (["--lease", lease] if lease else [])
    extra = {"PROCTOR_TEST_OUTSIDE": str(outside), **(env or {})}
    done = _proctor(root, *argv, env=extra, prefix=prefix)
    said = {
        line.split(":", 1)[1]: line.split(":", 1)[0] == "ok"
        for line in done.stderr.splitlines()
        if line.startswith(("ok:", "no:"))
    }
    record = json.loads(done.stdout) if done.stdout.strip().startswith("{") else None
    return done, said, record, cache


def _cache_env(root: str) -> dict:
    """PROCTOR_TEST_CACHE: the workspace cache directory of `root`, as proctor names it."""
    from proctor.paths import find_checkout, repo_cache_dir

    return {"PROCTOR_TEST_CACHE": repo_cache_dir(find_checkout(root))}


def _content(root: str, rel: str) -> str | None:
    try:
        with open(os.path.join(root, rel)) as handle:
            return handle.read()
    except OSError:
        return None


def test_a_child_lease_writes_only_its_grant(tmp_path):
    root = _repo(tmp_path)
    _child(root)
    done, said, record, _ = _probe(root, "plan/c", tmp_path, env=_cache_env(root))
    assert done.returncode == 0, done.stderr
    assert said == {
        "inside": True,
        "outside": False,
        "newroot": False,
        "new_in_literal": True,
        "beside_denied": True,
        "denied": False,
        "new_beside_denied": False,
        "git": False,
        "tmp": True,
        "cache": True,
        "beyond": True,
    }, said
    # bash's word checked against the disk
    assert _content(root, "src/a.py") == "written-by-target\n"
    assert _content(root, "other/b.py") == "b\n" and _content(root, "lib/sub/secret.py") == "s\n"
    assert _content(root, "rootfile") is None and _content(root, ".git/hooks/post-commit") is None
    assert _content(root, "gen/new/x.py") == "written-by-target\n"
    assert _content(root, "lib/sub/keep.py") == "written-by-target\n"
    box = record["sandbox"]
    assert box["job"] == "plan/c" and box["abi"] == ABI and box["mode"] == "landlock"
    real = os.path.realpath(root)
    assert f"{real}/src/a.py" in box["grant"] and f"{real}/gen" in box["grant"]
    # lib/* matched the directory lib/sub; the deny path inside it cost that directory's grant
    assert f"{real}/lib/sub" not in box["grant"] and f"{real}/lib/sub/keep.py" in box["grant"]
    # narrowed with the checkout: proctor's state, where the row lives
    assert box["narrowed"][0] == real and len(box["narrowed"]) == 2
    assert box["narrowed"][1].startswith(os.path.realpath(os.environ["PROCTOR_STATE_DIR"]))
    assert "Permission denied" in done.stderr  # EACCES, as the shell reports it
    assert not os.path.exists(box["tmpdir"]), "the private temp dir goes with the run"


@pytest.mark.parametrize("case", ["root job", "mode off", "no lease", "no such job", "no write paths", "ended"])
def test_what_does_not_narrow(tmp_path, case):
    root = _repo(tmp_path, mode="off" if case == "mode off" else "landlock")
    _child(root)
    lease = {
        "root job": "plan",
        "mode off": "plan/c",
        "no lease": None,
        "no such job": "plan/nope",
        "no write paths": "plan/w",
        "ended": "plan/e",
    }[case]
    if case == "no write paths":  # fork refuses such a row (PRC3039); one written by hand narrows nothing either
        _fork(root, {"id": "plan/w", "parent": "plan", "criteria": "w", "check": "test", "write_paths": ["src/a.py"]})
        from proctor.store import rows
        from proctor.workspace import Workspace

        with Workspace(root, warn=lambda line: None) as ws, ws.store.write() as tx:
            job = rows.get(tx, "plan/w")
            job["write_paths"] = []
            rows.put(tx, job, job["_root"], job["_depth"])
    if case == "ended":
        _fork(root, {"id": "plan/e", "parent": "plan", "criteria": "e", "check": "test", "write_paths": ["src/a.py"]})
        ended = _proctor(root, "job", "exit", "plan/e", "--orchestrator")  # abandoned: no_return
        assert ended.returncode == 0, ended.stdout + ended.stderr
    done, said, record, _ = _probe(root, lease, tmp_path, env=_cache_env(root))
    if case == "no such job":
        assert record is None or record.get("sandbox") is None
        return
    assert done.returncode == 0, done.stderr
    if case == "ended":
        from proctor import jobrecord
        from proctor.store import rows
        from proctor.workspace import Workspace

        with Workspace(root, warn=lambda line: None) as ws, ws.store.read() as tx:
            state = rows.get(tx, "plan/e")["state"]
        if jobrecord.is_live(state):
            pytest.fail(f"the test could not end plan/e (state {state})")
    assert record["sandbox"] is None
    assert said["outside"] and said["newroot"] and said["denied"], said
    assert _content(root, "other/b.py") == "written-by-target\n"


def test_a_read_only_row_writes_nothing_in_the_checkout(tmp_path):
    root = _repo(tmp_path)
    _child(root, id="plan/r", write_paths=[], deny_paths=[], read_only=True)
    done, said, record, _ = _probe(root, "plan/r", tmp_path, env=_cache_env(root))
    assert done.returncode == 0, done.stderr
    assert not any(said[name] for name in PROBES), said
    assert said["tmp"] and said["cache"] and said["beyond"], said
    assert record["sandbox"]["read_only"] is True
    assert _content(root, "src/a.py") == "a\n"


def test_a_glob_grants_what_it_matches_now_and_a_glob_matching_nothing_grants_nothing(tmp_path):
    root = _repo(tmp_path)
    _child(root, id="plan/g", write_paths=["src/*.py", "nothing/**"], deny_paths=[])
    with open(os.path.join(root, "probe.sh"), "w") as handle:
        handle.write(
            "echo x > src/a.py && echo ok:a; echo y > src/new.py || echo no:new; "
            "mkdir -p nothing/x && echo ok:nothing || echo no:nothing\n"
        )
    git(root, "commit", "-qam", "probe")
    done, said, record, _ = _probe(root, "plan/g", tmp_path)
    assert said == {"a": True, "new": False, "nothing": False}, (said, done.stderr)
    assert not os.path.exists(os.path.join(root, "nothing"))


def test_a_symlink_in_the_write_paths_grants_nothing_beyond_itself(tmp_path):
    """A write path that is a symlink to a directory the row does not name: writes through it
    land on its target, which is not granted."""
    root = _repo(tmp_path)
    os.symlink("other", os.path.join(root, "link"))
    git(root, "add", "link")
    git(root, "commit", "-qm", "link")
    _child(root, id="plan/l", write_paths=["link/b.py"], deny_paths=[])
    with open(os.path.join(root, "probe.sh"), "w") as handle:
        handle.write("echo z > link/b.py && echo ok:through || echo no:through\n")
    done, said, record, _ = _probe(root, "plan/l", tmp_path)
    assert said == {"through": False}, (said, done.stderr)
    assert _content(root, "other/b.py") == "b\n"
    assert record["sandbox"]["not_granted"], record["sandbox"]


# -- the kernel's audit log -----------------------------------------------------------------------


def audit_switch(on: int) -> None:
    """Turn the kernel's audit on or off, or skip where it cannot be switched (it takes root);
    under CI, which runs as root, that is a failure instead."""
    if not _audit(on):
        if os.environ.get("CI") == "true" and os.geteuid() == 0:
            pytest.fail("CI runs as root: the kernel's audit should be switchable here")
        pytest.skip("the kernel's audit cannot be switched here (it takes root)")


def _audit(on: int) -> bool:
    """Turn the kernel's audit on or off (AUDIT_SET, root only); whether it took."""
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 9)
        sock.bind((0, 0))
        body = struct.pack("8I", 1, on, 0, 0, 0, 0, 0, 0) + b"\0" * 8
        sock.send(struct.pack("IHHII", 16 + len(body), 1001, 1 | 4, 1, 0) + body)
        reply = sock.recv(65536)
        sock.close()
        return struct.unpack_from("i", reply, 16)[0] == 0
    except OSError:
        return False


@machine_wide("kernel-audit")
def test_denials_reach_the_trail_when_the_kernel_audits(tmp_path):
    was = sandbox._audit_enabled()
    audit_switch(1)
    try:
        root = _repo(tmp_path)
        _child(root)
        done, said, record, _ = _probe(root, "plan/c", tmp_path, env=_cache_env(root))
    finally:
        _audit(1 if was else 0)
    assert done.returncode == 0, done.stderr
    assert not said["outside"] and not said["denied"]
    from proctor import trail
    from proctor.workspace import Workspace

    with Workspace(root, warn=lambda line: None) as ws, ws.store.read() as tx:
        denials = trail.events(tx, kind="sandbox_denial")
    real = os.path.realpath(root)
    paths = {(d["data"]["path"], d["data"]["blockers"]) for d in denials}
    assert all(d["job"] == "plan/c" and d["data"]["run"] == record["id"] for d in denials)
    assert (f"{real}/other/b.py", "fs.write_file") in paths, paths
    assert (f"{real}/lib/sub/secret.py", "fs.write_file") in paths, paths
    assert (real, "fs.make_reg") in paths, paths  # rootfile: made in the checkout's root
    assert record["sandbox"]["denials"] == len(denials) >= 4


@machine_wide("kernel-audit")
def test_without_the_audit_log_the_record_says_why_no_denial_is_listed(tmp_path):
    was = sandbox._audit_enabled()
    if was:
        audit_switch(0)
    try:
        root = _repo(tmp_path)
        _child(root)
        done, said, record, _ = _probe(root, "plan/c", tmp_path, env=_cache_env(root))
    finally:
        if was:
            _audit(1)
    assert not said["outside"]
    box = record["sandbox"]
    assert box["denials"] is None and "audit" in box["denials_unreported"]
    text = _proctor(root, "run", "probe", "--lease", "plan/c")
    assert "sandbox" in text.stderr and "not reported here" in text.stderr and "plan/c" in text.stderr


# -- a kernel without Landlock ----------------------------------------------------------------------


def seccomp_wrapper(tmp_path, numbers: tuple[int, ...]) -> list[str]:
    """A prefix that runs a program with the syscalls `numbers` failing with ENOSYS."""
    jumps = ", ".join(f"jump(0x15, {nr}, {len(numbers) - i}, 0)" for i, nr in enumerate(numbers))
    code = f"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def stmt(code, k): return struct.pack("HBBI", code, 0, 0, k)
def jump(code, k, jt, jf): return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([stmt(0x20, 0), {jumps}, stmt(0x06, 0x7fff0000), stmt(0x06, 0x00050000 | 38)])
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_char_p))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()
os.execv(sys.argv[1], sys.argv[1:])
"""
    wrapper = tmp_path / f"seccomp_{'_'.join(map(str, numbers))}.py"
    wrapper.write_text(code)
    return [sys.executable, str(wrapper)]


def test_a_kernel_without_landlock(tmp_path):
    prefix = seccomp_wrapper(tmp_path, (444, 445, 446))  # the Landlock calls fail with ENOSYS
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "from proctor import sandbox; print(sandbox.kernel_abi())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.strip() == "0", probe.stderr  # the filter holds: no Landlock, as the kernel says

    root = _repo(tmp_path, mode="landlock")
    _child(root)
    done, said, record, _ = _probe(root, "plan/c", tmp_path, prefix=prefix)
    assert done.returncode != 0 and not said, done.stdout + done.stderr
    assert "PRC3061" in done.stdout + done.stderr and "no Landlock" in done.stdout + done.stderr
    assert _content(root, "other/b.py") == "b\n", "nothing ran"

    with open(os.path.join(root, "proctor.toml")) as handle:
        text = handle.read().replace('mode = "landlock"', 'mode = "auto"')
    with open(os.path.join(root, "proctor.toml"), "w") as handle:
        handle.write(text)
    done, said, record, _ = _probe(root, "plan/c", tmp_path, prefix=prefix)
    assert done.returncode == 0 and said["outside"], done.stderr
    assert record["sandbox"] is None
    assert done.stderr.count("this kernel offers no Landlock, so runs are not sandboxed") == 1

    shown = _proctor(root, "config", "show", prefix=prefix)
    assert "sandbox.mode" in shown.stdout and "no Landlock: runs are not sandboxed" in shown.stdout
    doctor = _proctor(root, "doctor", prefix=prefix)
    assert "sandbox: auto, but this kernel offers no Landlock: runs are not sandboxed" in doctor.stdout


def test_config_show_and_doctor_name_the_mode_and_the_abi(tmp_path):
    root = _repo(tmp_path, mode="auto", workers=True)
    shown = _proctor(root, "config", "show", "-o", "json")
    settings = {s["key"]: s for s in json.loads(shown.stdout)["settings"]}
    assert settings["sandbox.mode"]["value"] == "auto" and f"Landlock ABI {ABI}" in settings["sandbox.mode"]["shown"]
    assert settings["sandbox.workers"]["value"] is True
    doctor = _proctor(root, "doctor")
    line = next(line for line in doctor.stdout.splitlines() if "sandbox:" in line)
    assert line.startswith("ok") and f"Landlock ABI {ABI}" in line and "workers too" in line
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write("\n[sandbox.extra]\n")
    bad = _proctor(root, "config", "show")
    assert "unknown key extra in [sandbox]" in bad.stdout


# -- workers inside the boundary --------------------------------------------------------------------

STREAM = os.path.join(SHARED_FIXTURES, "claude", "stream", "claude-stream-2.1.41.jsonl")


@pytest.mark.parametrize("workers", [True, False])
def test_a_worker_started_in_the_sandbox_cannot_write_outside_its_paths(tmp_path, workers):
    """The worker itself (a stand-in CLI, with no guard wired) writes its path and tries the
    repository's README from its worktree and the main checkout's README by absolute path: with
    `workers = true` only its path lands; without, both others land and its gates catch the
    worktree one."""
    root = _repo(tmp_path, workers=workers)
    standin = json.dumps([sys.executable, STANDIN])
    with open(os.path.join(root, "proctor.toml"), "a") as handle:
        handle.write(
            f'\n[jobs]\ngrace_seconds = 5\nidle_minutes = 0.05\n\n[workers.one]\nexecutor = "claude"\n'
            f"command = {standin}\n"
        )
    git(root, "commit", "-qam", "workers")
    _child(root, write_paths=["src/a.py"], deny_paths=[])
    main_readme = os.path.join(root, "README")
    out = tmp_path / "out"  # outside the checkouts: made before, as a tool's cache would be
    out.mkdir()
    shell = (
        f'echo worktree >> README; echo main >> {main_readme}; echo tmp > "$TMPDIR/w" && echo tmp-ok > "{out}/tmp-ok"'
    )
    env = {"STANDIN_STREAM": STREAM, "STANDIN_WRITE": "src/a.py=ok = True\\n", "STANDIN_SHELL": shell}
    done = _proctor(root, "work", "plan/c", "-o", "json", env=env)
    assert os.path.exists(STREAM), "the shared fixtures are needed"
    with open(main_readme) as handle:
        main_text = handle.read()
    payload = json.loads(done.stdout)
    attempt = payload["jobs"][0]["attempts"][0]
    if workers:
        assert "main" not in main_text, "a sandboxed worker wrote the main checkout"
        assert payload["passed"] is True, done.stdout + done.stderr
        assert (out / "tmp-ok").exists(), "its TMPDIR and what lies outside the checkouts are writable"
        assert not any("README" in f for f in attempt.get("failures", [])), attempt
    else:
        assert "main" in main_text
        assert payload["passed"] is False and any("README" in f for f in attempt["failures"]), attempt


def test_a_literal_path_whose_nearest_directory_is_the_root_never_grants_git(tmp_path):
    """newtop/x.py does not exist, nor newtop: the nearest existing directory is the checkout's
    root, so the root's entries are granted; its .git is not, so no hook can be planted."""
    root = _repo(tmp_path)
    _child(root, id="plan/t", write_paths=["newtop/x.py"], deny_paths=[])
    with open(os.path.join(root, "probe.sh"), "w") as handle:
        handle.write(
            "echo x > other/b.py && echo ok:other; echo h > .git/hooks/pre-commit && echo ok:hook || "
            "echo no:hook; echo c >> .git/config && echo ok:config || echo no:config\n"
        )
    done, said, record, _ = _probe(root, "plan/t", tmp_path)
    assert said == {"other": True, "hook": False, "config": False}, (said, done.stderr)
    assert not os.path.exists(os.path.join(root, ".git", "hooks", "pre-commit"))


def test_a_sandboxed_run_cannot_signal_a_process_outside_it(tmp_path):
    """From Landlock ABI 6 the domain is scoped for signals: the target cannot stop the process
    outside it (here a sleeper started by the test; in use, the proctor judging it or the server),
    while signalling its own children still works."""
    if ABI < 6:
        pytest.skip(f"signal scoping needs Landlock ABI 6; this kernel offers {ABI}")
    outside = subprocess.Popen(["sleep", "60"])
    try:
        root = _repo(tmp_path)
        _child(root)
        with open(os.path.join(root, "probe.sh"), "w") as handle:
            handle.write(
                f"kill -0 {outside.pid} && echo ok:outside || echo no:outside\n"
                "sleep 30 & kill $! && echo ok:own || echo no:own\n"
            )
        done, said, record, _ = _probe(root, "plan/c", tmp_path)
        assert said == {"outside": False, "own": True}, (said, done.stderr)
        assert outside.poll() is None, "the process outside the domain was signalled"
        unboxed, said, _, _ = _probe(root, "plan", tmp_path)  # a root job: nothing narrows
        assert said["outside"], unboxed.stderr
    finally:
        outside.kill()
        outside.wait()


def test_proctor_killed_mid_run_leaves_its_target_confined(tmp_path):
    """proctor run is SIGKILLed while its target sleeps: the target, which outlives it, is still in
    the kernel's grant when it wakes and writes (the domain is the process's, not proctor's)."""
    import signal
    import time

    root = _repo(tmp_path)
    _child(root)
    out = tmp_path / "out"  # outside the checkout, made before: writable (tmp_path itself holds the checkout)
    out.mkdir()
    started = out / "started"
    with open(os.path.join(root, "probe.sh"), "w") as handle:
        handle.write(f"touch {started}; sleep 2; echo late > src/a.py; echo late > other/b.py\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor", "run", "probe", "--lease", "plan/c"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not started.exists():
        time.sleep(0.1)
    assert started.exists(), "the target never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _content(root, "src/a.py") != "late\n":
        time.sleep(0.2)
    assert _content(root, "src/a.py") == "late\n", "the target, outliving proctor, wrote its own path"
    assert _content(root, "other/b.py") == "b\n", "the target wrote outside its grant once proctor was gone"
