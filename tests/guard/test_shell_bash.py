"""The guard against bash itself: a differential test of lease-write-scope's reading of shell.

Every command of tests/guard/shell_corpus.py is judged by the guard (`proctor hook claude --lease w1`,
in-process, before the command runs, with cwd in the copy it will run in) and then run for real
by `bash -c` in a fresh copy of a small repository (5 s timeout, its own session, stdin
/dev/null, HOME and TMPDIR in a scratch dir, proxies pointing nowhere), whose work tree is walked
before and after. bash is the oracle: what it changed is what the command writes. A change is a
created or deleted entry, a changed type, content, mode, mtime or inode (a file replaced by
rename), or symlink target; a directory's mtime counts only when no entry in it was created,
removed or replaced. The job w1 may write `plan/w1/**` (the directory plan/w1 itself counts as
inside).

- A command that changed anything in the work tree outside `plan/w1/` (`.git/` aside) must
  be denied, or advised by a lease rule (a write the guard cannot name). Passing it silently, or
  with only another rule's advisory, is a *silent miss*.
- A command that changed nothing outside `plan/w1/` must not be denied: a *false deny*. An
  advisory on it is allowed.

Writes outside the repository ($TMPDIR, $HOME, ../) are not the lease's business and are not
counted. The test prints the tally and fails listing every silent miss and false deny with what
bash changed and what the guard said. Set SHELL_ORACLE_REPORT=<file> to get every case as JSON.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import pytest

from proctor import api
from proctor.hook import run as hook_run
from tests.support import git
from tests.guard.shell_corpus import SECTIONS

JOB = "w1"
LEASE = "plan/w1"
TIMEOUT = 5.0
PAST = 1_614_834_367  # 2021-03-04 05:06:07 UTC: every file of the template is dated here, so a write shows
WORKERS = 3

CONFIG = '[targets.test]\ncommand = "true"\n'
MAKEFILE = """\
all:
\t@echo nothing to do

gen:
\t@echo generated > src/gen.txt

w:
\t@echo ok > plan/w1/out.txt

clean:
\trm -f src/untracked.tmp

.PHONY: all gen w clean
"""
CHANGE_PATCH = """\
--- a/src/a.txt
+++ b/src/a.txt
@@ -1,3 +1,3 @@
 alpha
-beta
+BETA
 gamma
"""
LEASE_PATCH = """\
--- a/plan/w1/todo.md
+++ b/plan/w1/todo.md
@@ -1 +1 @@
-- [ ] task
+- [x] task
"""


# -- the repository -----------------------------------------------------------------------------


def _write(root, rel, text, mode=None):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)
    if mode is not None:
        os.chmod(path, mode)


def _tar(path, members):
    """members: (name, text) for a file, (name, None, target) for a symlink."""
    with tarfile.open(path, "w") as archive:
        for member in members:
            info = tarfile.TarInfo(member[0])
            info.mtime = PAST
            if len(member) == 3:
                info.type, info.linkname = tarfile.SYMTYPE, member[2]
                archive.addfile(info)
            else:
                data = member[1].encode()
                info.size, info.mode = len(data), 0o644
                archive.addfile(info, io.BytesIO(data))


def _zip(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members:
            archive.writestr(name, text)


def build_template(root: str) -> str:
    """The repository every command starts from (described in tests/guard/shell_corpus.py)."""
    os.makedirs(root)
    files = {
        "README.md": "# demo\n",
        "proctor.toml": CONFIG,
        "Makefile": MAKEFILE,
        "src/a.txt": "alpha\nbeta\ngamma\n",
        "src/b.txt": "one\ntwo\nthree\n",
        "src/main.py": "print('hi')\n",
        "src/j.json": '{"a": 1}\n',
        "src/sub/c.txt": "c\n",
        "docs/guide.md": "# Guide\nUse make.\n",
        "docs/notes.txt": "notes\n",
        "tests/test_a.py": "def test_a():\n    assert True\n",
        "plan/README.md": "plans\n",
        "plan/w10/notes.md": "w10\n",
        "plan/w1/todo.md": "- [ ] task\n",
        "plan/w1/data.txt": "d1\nd2\n",
        "plan/w1/list": "src/xl\n",
        "fixtures/change.patch": CHANGE_PATCH,
        "fixtures/lease.patch": LEASE_PATCH,
        "fixtures/script.sed": "s/alpha/ALPHA/\n",
    }
    for rel, text in files.items():
        _write(root, rel, text)
    _write(root, "w.sh", "#!/bin/sh\necho w > src/x\n", 0o755)
    _write(root, "wl.sh", "#!/bin/sh\necho ok > plan/w1/from_script\n", 0o755)
    os.symlink("../../src/a.txt", os.path.join(root, "plan/w1/link"))
    os.symlink("../../src", os.path.join(root, "plan/w1/srcdir"))
    fx = os.path.join(root, "fixtures")
    _tar(os.path.join(fx, "src.tar"), [("src/a.txt", "from tar\n"), ("src/t_new.txt", "new\n")])
    _tar(os.path.join(fx, "lease.tar"), [("plan/w1/t.txt", "t\n")])
    _tar(os.path.join(fx, "flat.tar"), [("flat.txt", "flat\n")])
    _tar(os.path.join(fx, "evil.tar"), [("esc", None, "../../src"), ("esc/pwn.txt", "pwn\n")])
    _zip(os.path.join(fx, "src.zip"), [("src/z.txt", "z\n")])
    _zip(os.path.join(fx, "lease.zip"), [("plan/w1/z.txt", "z\n")])
    with gzip.open(os.path.join(fx, "data.gz"), "wb") as handle:
        handle.write(b"data\n")

    git(root, "init", "-q", "-b", "main")
    # A copy has new inodes and ctimes; git would take every file for modified and rewrite it
    # on `git checkout .`. Size and mtime (which copies keep) are what a fresh checkout shows.
    git(root, "config", "core.checkStat", "minimal")
    git(root, "config", "core.trustctime", "false")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    _write(root, "docs/guide.md", "# Guide\nUse make.\nAnd git.\n")
    git(root, "commit", "-q", "-am", "guide")
    _write(root, "README.md", "# demo\n\nA demo.\n")
    git(root, "commit", "-q", "-am", "readme")
    git(root, "checkout", "-q", "-b", "other")
    _write(root, "src/a.txt", "alpha\nbeta\nOTHER\n")
    _write(root, "src/only_other.txt", "other\n")
    os.remove(os.path.join(root, "docs/notes.txt"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "other")
    git(root, "checkout", "-q", "main")
    git(root, "checkout", "-q", "-b", "lease-only")
    _write(root, "plan/w1/todo.md", "- [x] task\n")
    git(root, "commit", "-q", "-am", "lease only")
    git(root, "checkout", "-q", "main")
    # uncommitted and untracked state, for stash, reset, clean, checkout -- and rmdir
    _write(root, "src/b.txt", "one\ntwo\nthree\nfour\n")
    _write(root, "plan/w1/data.txt", "d1\nd2\nd3\n")
    _write(root, "src/untracked.tmp", "u\n")
    _write(root, "plan/w1/scratch.tmp", "s\n")
    os.makedirs(os.path.join(root, "src/empty"))
    os.makedirs(os.path.join(root, "plan/w1/emptyd"))
    for here, dirs, names in os.walk(root, topdown=False):
        if os.path.relpath(here, root).split(os.sep)[0] == ".git":
            continue
        for name in names + dirs:
            os.utime(os.path.join(here, name), (PAST, PAST), follow_symlinks=False)
    os.utime(root, (PAST, PAST))
    # fewer files to copy per command: git's sample hooks out, objects packed
    for name in os.listdir(os.path.join(root, ".git", "hooks")):
        os.remove(os.path.join(root, ".git", "hooks", name))
    git(root, "gc", "-q", "--prune=now")
    git(root, "status", "--porcelain")  # refresh the index's stat data (writes .git/ only)
    api.fork({"id": JOB, "write_paths": [LEASE + "/**"], "check": "test"}, cwd=root)
    return root


# -- the oracle ---------------------------------------------------------------------------------


def snapshot(root: str) -> dict[str, tuple]:
    """Every entry of the work tree but .git/: what it is, and what a write would change."""
    out: dict[str, tuple] = {}
    for here, dirs, names in os.walk(root):
        rel_here = os.path.relpath(here, root)
        if rel_here == ".":
            dirs[:] = [d for d in dirs if d != ".git"]
            names = [n for n in names if n != ".git"]
        for name in dirs + names:
            full = os.path.join(here, name)
            rel = os.path.normpath(os.path.join(rel_here, name))
            try:
                st = os.lstat(full)
            except OSError:
                continue
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", mode, st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                try:
                    with open(full, "rb") as handle:
                        digest = hashlib.sha1(handle.read()).hexdigest()
                except OSError:
                    digest = None
                out[rel] = ("file", mode, digest, st.st_size, st.st_mtime_ns, st.st_ino)
            else:
                kind = "fifo" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "special"
                out[rel] = (kind, mode)
        # a symlink to a directory is listed in dirs: never walk through it
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(here, d))]
    out["."] = ("dir", stat.S_IMODE(os.lstat(root).st_mode), os.lstat(root).st_mtime_ns)
    return out


def changes(before: dict, after: dict) -> dict[str, str]:
    """path -> what happened to it. A directory whose only change is its mtime is left out when
    an entry directly inside it changed (that is the entry's write, not the directory's)."""
    found: dict[str, str] = {}
    for rel in sorted(set(before) | set(after)):
        old, new = before.get(rel), after.get(rel)
        if old == new:
            continue
        if old is None:
            found[rel] = f"created ({new[0]}{' -> ' + new[1] if new[0] == 'link' else ''})"
        elif new is None:
            found[rel] = f"deleted ({old[0]})"
        elif old[0] != new[0]:
            found[rel] = f"type {old[0]} -> {new[0]}"
        elif old[0] == "link":
            found[rel] = f"link target {old[1]} -> {new[1]}"
        elif old[0] == "dir":
            what = []
            if old[1] != new[1]:
                what.append(f"mode {old[1]:o} -> {new[1]:o}")
            if old[2] != new[2]:
                what.append("mtime")
            found[rel] = "dir " + ", ".join(what)
        elif old[0] == "file":
            what = []
            if old[1] != new[1]:
                what.append(f"mode {old[1]:o} -> {new[1]:o}")
            if old[2] != new[2]:
                what.append("content")
            if old[4] != new[4]:
                what.append("mtime")
            if old[5] != new[5]:
                what.append("replaced")
            found[rel] = "modified (" + ", ".join(what) + ")"
        else:
            found[rel] = f"{old[0]} mode {old[1]:o} -> {new[1]:o}"
    for rel in list(found):
        if found[rel] == "dir mtime":
            prefix = "" if rel == "." else rel + "/"
            if any(
                other != rel
                and other.startswith(prefix)
                and "/" not in other[len(prefix) :]
                and (what.startswith(("created", "deleted", "type")) or "replaced" in what)
                for other, what in found.items()
            ):
                del found[rel]
    return found


def in_lease(rel: str) -> bool:
    return rel == LEASE or rel.startswith(LEASE + "/")


def _proc_info(pid: str) -> tuple[str, int, int, bytes, str] | None:
    """(state, pgrp, session, environ, cwd) of a live process, None when gone or not ours."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        state, pgrp, session = fields[0].decode(), int(fields[2]), int(fields[3])
        if state == "Z":
            return None
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            environ = b""
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        return state, pgrp, session, environ, cwd
    except (OSError, IndexError, ValueError):
        return None


def stragglers(marker: str, session: int, scratch: str) -> list[int]:
    """Processes a case left behind: by its session, by the marker in their environment (a
    setsid escapes the session), or by a working directory in its scratch dir (env -i too)."""
    found = []
    needle = f"SHELL_ORACLE_CASE={marker}".encode()
    if session > 0 and os.path.exists(f"/proc/{session}"):
        session = -1  # the leader was reaped and its pid taken: its number no longer marks ours
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        info = _proc_info(pid)
        if info is None:
            continue
        _, pgrp, sid, environ, cwd = info
        if sid == session or needle in environ or cwd == scratch or cwd.startswith(scratch + "/"):
            found.append(int(pid))
    return found


def run_bash(command: str, cwd: str, env: dict, scratch: str, marker: str, timeout: float = TIMEOUT) -> dict:
    """Run `bash -c command` in its own session; wait for it and whatever it left running
    until the deadline, then kill what is left. Never leaves a process behind."""
    start = time.monotonic()
    deadline = start + timeout
    with open(os.path.join(scratch, "stdout"), "wb") as out, open(os.path.join(scratch, "stderr"), "wb") as err:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
    killed = []
    while True:
        left = stragglers(marker, proc.pid, scratch)
        if not left:
            break
        if time.monotonic() >= deadline:
            timed_out = True
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)
            if time.monotonic() > deadline + 2:
                break
        else:
            time.sleep(0.02)
    with open(os.path.join(scratch, "stderr"), "rb") as handle:
        stderr = handle.read().decode("utf-8", "replace")
    return {
        "code": code,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - start, 3),
        "stderr": stderr[-400:],
        "killed": killed,
    }


# -- the guard ----------------------------------------------------------------------------------

_JUDGE = threading.Lock()


def judge(command: str, cwd: str, case_id: str) -> dict:
    """The hook's answer to this command, asked before it runs, with cwd in its copy."""
    payload = {
        "session_id": f"oracle-{case_id}",
        "transcript_path": "/nonexistent/oracle.jsonl",
        "cwd": cwd,
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": f"toolu_{case_id}",
    }
    environ = {k: v for k, v in os.environ.items() if k != "BAGGAGE"}
    environ["PROCTOR_HOOK_DEBUG"] = "1"
    debug = io.StringIO()
    with _JUDGE, contextlib.redirect_stderr(debug):
        out, code = hook_run(["claude", "--lease", JOB], json.dumps(payload).encode(), environ)
    answer = json.loads(out)
    spec = answer.get("hookSpecificOutput") or {}
    denied = spec.get("permissionDecision") == "deny"
    reason = spec.get("permissionDecisionReason") or ""
    context = spec.get("additionalContext") or ""
    text = (reason + "\n" + context).strip()
    advice_rules = re.findall(r"advise \[([\w-]+)\]", text)
    return {
        "exit": code,
        "denied": denied,
        "advised": bool(context) and not denied,
        "lease_advice": any(rule.startswith("lease-") for rule in advice_rules),
        "advice_rules": advice_rules,
        "text": text,
        "error": debug.getvalue().strip(),
    }


def said(verdict: dict) -> str:
    if verdict["error"]:
        return f"guard error, so it passed: {verdict['error']}"
    if not verdict["text"]:
        return "pass ({})"
    kind = "DENY" if verdict["denied"] else "advise"
    lines = [line for line in verdict["text"].splitlines() if not line.startswith("(acting under lease")]
    return f"{kind}: " + " | ".join(lines)


# -- running the corpus -------------------------------------------------------------------------


def missing_tools(tools) -> list[str]:
    return [t for t in tools if shutil.which(t, path="/usr/local/bin:/usr/bin:/bin") is None]


def corpus() -> list[tuple[str, str, tuple]]:
    out = []
    for name, entries in SECTIONS.items():
        for entry in entries:
            command, tools = (entry, ()) if isinstance(entry, str) else entry
            out.append((name, command, tuple(tools)))
    return out


class Bench:
    """The template, the scratch area and the environment bash runs in."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.template = build_template(os.path.join(base, "template"))
        self.bin = os.path.join(base, "bin")
        os.makedirs(self.bin)
        # python3 on this PATH is the real interpreter: a version manager's shim would need HOME
        real = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
        os.symlink(real, os.path.join(self.bin, "python3"))
        self.counter = 0
        self.lock = threading.Lock()

    def env(self, scratch: str, marker: str) -> dict:
        env = {
            "PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": os.path.join(scratch, "home"),
            "TMPDIR": os.path.join(scratch, "tmp"),
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "TERM": "dumb",
            "SHELL": "/bin/bash",
            "USER": "oracle",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "http_proxy": "http://127.0.0.1:9",
            "https_proxy": "http://127.0.0.1:9",
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "no_proxy": "",
            "SHELL_ORACLE_CASE": marker,
        }
        for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
            env[key] = os.environ.get(key, "t")
        return env

    def fresh(self) -> tuple[str, str, str]:
        """(scratch dir, the copy's root, marker): a new copy of the template."""
        with self.lock:
            self.counter += 1
            number = self.counter
        marker = f"{os.getpid()}-{number}-{time.monotonic_ns()}"
        scratch = os.path.join(self.base, "cases", str(number))
        os.makedirs(os.path.join(scratch, "home"))
        os.makedirs(os.path.join(scratch, "tmp"))
        root = os.path.join(scratch, "repo")
        shutil.copytree(self.template, root, symlinks=True)
        return scratch, root, marker

    def case(self, command: str, judge_it: bool = True, timeout: float = TIMEOUT) -> dict:
        scratch, root, marker = self.fresh()
        verdict = judge(command, root, marker) if judge_it else None
        before = snapshot(root)
        ran = run_bash(command, root, self.env(scratch, marker), scratch, marker, timeout)
        changed = changes(before, snapshot(root))
        outside = {rel: what for rel, what in changed.items() if not in_lease(rel)}
        return {"command": command, "changed": changed, "outside": outside, "verdict": verdict, "bash": ran}


@pytest.fixture
def bench(tmp_path):
    return Bench(str(tmp_path))


def classify(result: dict) -> str:
    verdict = result["verdict"]
    if result["outside"]:
        if verdict["denied"]:
            return "denied"
        if verdict["advised"] and verdict["lease_advice"]:
            return "advised"
        return "silent"
    if verdict["denied"]:
        return "false-deny"
    return "harmless-advised" if verdict["advised"] else "harmless-passed"


def describe(result: dict, section: str) -> str:
    ran = result["bash"]
    changed = "; ".join(f"{rel}: {what}" for rel, what in result["outside"].items()) or "nothing outside the lease"
    inside = [rel for rel in result["changed"] if rel not in result["outside"]]
    lines = [
        f"  [{section}] {result['command']!r}",
        f"      bash changed: {changed}"
        + (f" (and in the lease: {', '.join(inside[:4])}{', ...' if len(inside) > 4 else ''})" if inside else ""),
        f"      bash exit {ran['code']}"
        + (" TIMED OUT" if ran["timed_out"] else "")
        + (f", stderr: {ran['stderr'].strip()[:160]!r}" if ran["stderr"].strip() else ""),
        f"      guard said: {said(result['verdict'])}",
    ]
    return "\n".join(lines)


# -- the oracle works ---------------------------------------------------------------------------


def test_the_oracle_sees_what_bash_writes(bench):
    def outside(command):
        result = bench.case(command, judge_it=False)
        assert result["bash"]["code"] == 0 or command.startswith("false"), (command, result["bash"])
        return result["outside"]

    assert outside("touch src/new") == {"src/new": "created (file)"}
    assert outside("echo x >> src/a.txt") == {"src/a.txt": "modified (content, mtime)"}
    assert outside("rm docs/notes.txt") == {"docs/notes.txt": "deleted (file)"}
    assert outside("chmod +x src/a.txt") == {"src/a.txt": "modified (mode 644 -> 755)"}
    assert outside("touch src/a.txt") == {"src/a.txt": "modified (mtime)"}
    assert outside("sed -i s/zzz/y/ src/a.txt") == {"src/a.txt": "modified (mtime, replaced)"}
    assert outside("ln -sfn ../src/sub src/lk") == {"src/lk": "created (link -> ../src/sub)"}
    assert outside("rm -r src/sub") == {"src/sub": "deleted (dir)", "src/sub/c.txt": "deleted (file)"}
    assert outside("mkfifo src/f") == {"src/f": "created (fifo)"}
    assert outside("(sleep 0.3; touch src/late) &") == {"src/late": "created (file)"}, "waits for the background"
    assert outside("mkdir src/t && rmdir src/t") == {"src": "dir mtime"}
    assert outside("echo x >> plan/w1/link") == {"src/a.txt": "modified (content, mtime)"}
    assert outside("touch -c plan/w1/srcdir") == {"src": "dir mtime"}
    # writes inside the lease, outside the repository, and reads are not outside-lease writes
    result = bench.case("touch plan/w1/new && echo x >> plan/w1/data.txt", judge_it=False)
    assert result["outside"] == {} and set(result["changed"]) == {"plan/w1/new", "plan/w1/data.txt"}
    assert bench.case('echo x > "$TMPDIR/t"; echo y > ~/h; echo z > ../o', judge_it=False)["changed"] == {}
    for reader in (
        "git status",
        "git log -p",
        "git diff other",
        "cat src/a.txt plan/w1/link",
        "ls -laR",
        "python3 -c 'print(1)'",
        "make -n gen",
    ):
        result = bench.case(reader, judge_it=False)
        assert result["changed"] == {} and result["bash"]["code"] == 0, (reader, result)
    # each case starts from the template, however the last one ended
    assert outside("rm -rf src") and outside("cat src/a.txt") == {}


def test_no_process_outlives_a_case(bench):
    scratch, root, marker = bench.fresh()
    command = "sleep 30 & setsid sleep 31 & env -i sleep 32 & disown -a; exit 0"
    ran = run_bash(command, root, bench.env(scratch, marker), scratch, marker, timeout=1.0)
    assert ran["timed_out"] and len(ran["killed"]) >= 3, ran
    time.sleep(0.1)
    assert stragglers(marker, -1, scratch) == []
    ran = run_bash("sleep 30", root, bench.env(scratch, marker), scratch, marker, timeout=0.5)
    assert ran["timed_out"] and ran["seconds"] < 3 and stragglers(marker, -1, scratch) == []


def test_the_guard_judges_under_the_lease_in_each_copy(bench):
    scratch, root, marker = bench.fresh()
    deny = judge("touch src/new", root, "sanity1")
    assert deny["denied"] and "lease-write-scope" in deny["text"], deny
    assert judge("touch plan/w1/new", root, "sanity2")["text"] == ""


# -- the differential test ----------------------------------------------------------------------


def test_the_guard_agrees_with_bash(bench, capsys):
    cases = corpus()
    assert len(cases) >= 300 and len({c for _, c, _ in cases}) == len(cases), "a corpus of distinct commands"
    skipped, todo = [], []
    for section, command, tools in cases:
        missing = missing_tools(tools)
        if missing:
            skipped.append(f"  [{section}] {command!r}: {', '.join(missing)} not installed")
        else:
            todo.append((section, command))

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(lambda item: (item[0], bench.case(item[1])), todo))
    elapsed = time.monotonic() - started

    tally: dict[str, list] = {
        k: [] for k in ("denied", "advised", "silent", "harmless-passed", "harmless-advised", "false-deny")
    }
    for section, result in results:
        tally[classify(result)].append((section, result))
    report = os.environ.get("SHELL_ORACLE_REPORT")
    if report:
        with open(report, "w") as handle:
            json.dump([{"section": s, "class": classify(r), **r} for s, r in results], handle, indent=1)

    line = (
        f"shell oracle: {len(results)} commands run ({len(skipped)} skipped) in {elapsed:.1f}s; "
        f"outside-lease writes: {len(tally['denied'])} denied, {len(tally['advised'])} advised, "
        f"{len(tally['silent'])} silent; harmless: {len(tally['harmless-passed'])} passed, "
        f"{len(tally['harmless-advised'])} advised, {len(tally['false-deny'])} denied"
    )
    timed_out = [f"  [{s}] {r['command']!r}" for s, r in results if r["bash"]["timed_out"]]
    with capsys.disabled():
        print("\n" + line)
        if skipped:
            print("skipped (the command means nothing without the tool):\n" + "\n".join(skipped))
        if timed_out:
            print("timed out (killed at the deadline; judged on what they had written):\n" + "\n".join(timed_out))

    problems = []
    if skipped and os.environ.get("CI") == "true":
        problems.append(f"{len(skipped)} commands not run because a tool is missing; .ci/tools installs them")
    if tally["silent"]:
        problems.append(
            f"SILENT MISSES ({len(tally['silent'])}): bash wrote outside {LEASE}/, the guard neither denied nor advised"
        )
        problems.extend(describe(r, s) for s, r in tally["silent"])
    if tally["false-deny"]:
        problems.append(
            f"FALSE DENIES ({len(tally['false-deny'])}): bash changed nothing outside {LEASE}/, the guard denied"
        )
        problems.extend(describe(r, s) for s, r in tally["false-deny"])
    if problems:
        pytest.fail(line + "\n" + "\n".join(problems), pytrace=False)
