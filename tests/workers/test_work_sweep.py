"""What a worker leaves behind after its attempt: every process it started is ended, those that
dropped the attempt's tag and double-forked out of its session included; the person's
`proctor server` runs on, and the worker can neither start nor stop one. Real processes
throughout: a real `proctor work` process, a worker stand-in that forks, a real server daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.support import alive_with, git, make_repo
from tests.workers.test_runner_stops import _kill_marked, _live
from proctor import api
from proctor.process import Tree, kill_tree, subreaper

# The worker stand-in: argv[1] is a marker (in the escapees' command lines), argv[2] a directory
# for their reports, argv[3] hang | exit | stop_server.
WORKER = r"""
import json, os, subprocess, sys, time
marker, out, ending = sys.argv[1], sys.argv[2], sys.argv[3]
with open(os.path.join(out, "worker_sid"), "w") as handle:
    handle.write(str(os.getsid(0)))
with open("src/a.py", "w") as handle:
    handle.write("ok = True\n")
REPORT = '''
import json, os, sys, time
time.sleep(0.5)  # the middle child is gone by now: this is an orphan
if os.environ.get("FAKE_SERVER_JSON"):  # claim to be the server a directory of its own records
    os.makedirs(os.path.dirname(os.environ["FAKE_SERVER_JSON"]), exist_ok=True)
    with open(os.environ["FAKE_SERVER_JSON"], "w") as handle:
        json.dump({"pid": os.getpid()}, handle)
with open(sys.argv[2], "w") as handle:
    json.dump({"pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
               "tagged": "PROCTOR_WORKER_TAG" in os.environ}, handle)
time.sleep(300)
'''

def escape(name, env):
    # setsid'd and double-forked: out of the worker's group, session and parent chain
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execve(sys.executable, [sys.executable, "-c", REPORT, marker, os.path.join(out, name)], env)
        os._exit(0)

# a worker does not start the server: the CLI refuses a leased caller (the person's server runs)
refused = subprocess.run([sys.executable, "-m", "proctor", "server", "start"], capture_output=True, text=True)
with open(os.path.join(out, "start_refused"), "w") as handle:
    json.dump({"returncode": refused.returncode, "output": refused.stdout + refused.stderr}, handle)
status = json.loads(subprocess.run([sys.executable, "-m", "proctor", "server", "status", "-o", "json"],
                                   check=True, capture_output=True, text=True).stdout)
server_dir = os.path.dirname(status["token_path"])
untagged = {k: v for k, v in os.environ.items() if k != "PROCTOR_WORKER_TAG"}
escape("untagged.json", untagged)
# a variable alone spares nothing: it names the server's directory, but is not the server recorded there
escape("forged.json", {**untagged, "PROCTOR_SERVER_DIR": server_dir})
# nor a directory of the worker's own whose server.json records the escapee itself
fake = os.path.join(out, "fake-server")
escape("fakedir.json", {**untagged, "PROCTOR_SERVER_DIR": fake,
                        "FAKE_SERVER_JSON": os.path.join(fake, "server.json")})
if ending == "stop_server":
    stopped = subprocess.run([sys.executable, "-m", "proctor", "server", "stop"], capture_output=True, text=True)
    with open(os.path.join(out, "stop_refused"), "w") as handle:
        json.dump({"returncode": stopped.returncode, "output": stopped.stdout + stopped.stderr}, handle)
time.sleep(1)  # the reports are written
print(json.dumps({"type": "result", "subtype": "success", "result": "done", "session_id": "s"}), flush=True)
if ending == "hang":
    time.sleep(60)
"""


def _environ(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        return handle.read().split(b"\0")


@pytest.fixture
def work_repo(tmp_path, monkeypatch):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)

    def make(ending: str, marker: str, out) -> str:
        command = json.dumps([sys.executable, str(script), marker, str(out), ending])
        root = make_repo(
            tmp_path / "repo",
            f"""
[jobs]
grace_seconds = 5
idle_minutes = 1

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"

[workers]
ladder = ["only"]
attempts = 1

[workers.only]
executor = "claude"
command = {command}
""",
        )
        os.makedirs(os.path.join(root, "src"))
        (tmp_path / "repo" / "src" / "a.py").write_text("x = 1\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "src")
        monkeypatch.chdir(root)
        api.fork({"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
        return root

    return make


def _proctor(root: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "proctor", *argv], cwd=root, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("ending", ["hang", "exit"])
def test_proctor_work_ends_escapees_and_spares_the_server(work_repo, tmp_path, ending):
    """A real `proctor work`: the worker double-forks a setsid'd grandchild without the tag,
    another with a forged server variable, and tries to start `proctor server` (refused: a
    leased caller); after the attempt (stopped after its grace window, or exited by itself)
    the grandchildren are gone, and the person's server runs on without the tag."""
    marker = f"SWEEP{os.getpid()}x{time.monotonic_ns() % 10**9}"
    out = tmp_path / "out"
    out.mkdir()
    root = work_repo(ending, marker, out)
    started = _proctor(root, "server", "start")
    assert started.returncode == 0, started.stdout + started.stderr
    person_server = json.loads(_proctor(root, "server", "status", "-o", "json").stdout)["pid"]
    try:
        work = subprocess.Popen(
            [sys.executable, "-m", "proctor", "work", "feat", "-o", "json"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        stdout, stderr = work.communicate(timeout=120)
        assert work.returncode == 0, stderr
        result = json.loads(stdout)
        attempt = result["jobs"][0]["attempts"][0]
        assert attempt["stop"] == ("grace" if ending == "hang" else None), attempt["reason"]
        for name in ("untagged.json", "forged.json", "fakedir.json"):
            report = json.loads((out / name).read_text())
            # it did escape: no tag, a session of its own, an orphan adopted by `proctor work`
            assert report["tagged"] is False
            assert report["sid"] not in (
                int((out / "worker_sid").read_text()),
                os.getsid(0),
            )  # `proctor work` is in ours
            assert report["ppid"] == work.pid
            assert not _live(report["pid"]), f"{name}: pid {report['pid']} outlived the attempt"
        assert alive_with(marker) == []
        status = _proctor(root, "server", "status", "-o", "json")
        assert status.returncode == 0, status.stdout + status.stderr
        server = json.loads(status.stdout)
        assert server["running"] is True and server["pid"] == person_server and _live(server["pid"])
        assert not any(item.startswith(b"PROCTOR_WORKER_TAG=") for item in _environ(server["pid"]))
        refused = json.loads((out / "start_refused").read_text())
        assert refused["returncode"] != 0 and "SERVER_LEASED_CALLER" in refused["output"], refused
    finally:
        _kill_marked(marker)
        stop = _proctor(root, "server", "stop")
    assert stop.returncode == 0 and "server stopped" in stop.stdout, stop.stdout + stop.stderr


def test_a_worker_cannot_stop_the_persons_server(work_repo, tmp_path):
    """The worker tries `proctor server stop` within its attempt: refused (a leased caller), and
    the server every job's monitors run in runs on, the same process."""
    marker = f"SWEEP{os.getpid()}y{time.monotonic_ns() % 10**9}"
    out = tmp_path / "out"
    out.mkdir()
    root = work_repo("stop_server", marker, out)
    assert _proctor(root, "server", "start").returncode == 0
    before = json.loads(_proctor(root, "server", "status", "-o", "json").stdout)["pid"]
    try:
        done = _proctor(root, "work", "feat", "-o", "json")
        assert done.returncode == 0, done.stderr
        stopped = json.loads((out / "stop_refused").read_text())
        assert stopped["returncode"] != 0 and "SERVER_LEASED_CALLER" in stopped["output"], stopped
        assert alive_with(marker) == []
        after = json.loads(_proctor(root, "server", "status", "-o", "json").stdout)
        assert after["running"] is True and after["pid"] == before and _live(before)
    finally:
        _kill_marked(marker)
        _proctor(root, "server", "stop")


SIBLING = r"""
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
    os._exit(0)
time.sleep(300)
"""


def test_without_adoption_other_children_and_their_orphans_are_spared(tmp_path):
    """As in the server, which resumes workers while it runs monitor commands: a child of this
    process started during the attempt, and its orphan, are not the worker's and survive its
    sweep; the process is no subreaper before or after."""
    from proctor.workers import runner
    from proctor.workers.executors import claude

    marker = f"SIBLING{os.getpid()}z{time.monotonic_ns() % 10**9}"
    script = tmp_path / "sibling.py"
    script.write_text(SIBLING)
    worker = tmp_path / "worker.py"
    worker.write_text(
        "import json, time\ntime.sleep(0.5)\n"
        "print(json.dumps({'type': 'result', 'subtype': 'success', 'result': 'done', "
        "'session_id': 's'}), flush=True)\ntime.sleep(60)\n"
    )
    siblings = []

    def on_event(kind, attempt):
        if kind == "final" and not siblings:
            siblings.append(subprocess.Popen([sys.executable, str(script), marker], start_new_session=True))
            time.sleep(0.5)  # its orphan is out

    try:
        assert not subreaper()
        attempt = runner.run_attempt(
            [sys.executable, str(worker)],
            claude.Parser(),
            runner.Limits(idle=30, grace=1),
            str(tmp_path),
            dict(os.environ),
            on_event=on_event,
        )
        assert attempt.stop == "grace" and siblings
        assert not subreaper()
        assert siblings[0].poll() is None
        assert len(alive_with(marker)) == 2  # the sibling and its orphan
    finally:
        _kill_marked(marker)
        for proc in siblings:
            proc.wait()


def test_adopting_attempt_leaves_no_subreaper_behind(tmp_path):
    from proctor.workers import runner
    from proctor.workers.executors import claude

    worker = tmp_path / "worker.py"
    worker.write_text(
        "import json\nprint(json.dumps({'type': 'result', 'subtype': 'success', 'result': 'done', "
        "'session_id': 's'}), flush=True)\n"
    )
    assert not subreaper()
    attempt = runner.run_attempt(
        [sys.executable, str(worker)],
        claude.Parser(),
        runner.Limits(idle=30, grace=1),
        str(tmp_path),
        dict(os.environ),
        adopt_orphans=True,
    )
    assert attempt.reply == "done" and attempt.stop is None
    assert not subreaper()


def test_tree_spares_a_subtree_and_remembers_members(tmp_path):
    """kill_tree ends the root's descendants, a member reparented away included, but no process
    `spare` names, nor anything below it."""
    marker = f"TREE{os.getpid()}w{time.monotonic_ns() % 10**9}"
    script = tmp_path / "tree.py"
    # root -> kept (spared) -> kept's child; root -> middle -> leaf (middle exits: leaf reparented)
    script.write_text(r"""
import os, subprocess, sys, time
m, out = sys.argv[1], sys.argv[2]
sleeper = [sys.executable, "-c", "import time; time.sleep(300)", m]
kept = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(300)"] + sleeper)
leaf = subprocess.Popen(["sh", "-c", 'echo $$ > %s/leaf; exec "$@"' % out, "sh"] + sleeper, start_new_session=True)
with open(os.path.join(out, "kept"), "w") as handle:
    handle.write(str(kept.pid))
time.sleep(300)
""")
    root = subprocess.Popen([sys.executable, str(script), marker, str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        # the root, kept, kept's child and the leaf carry the marker once all are up
        while len(alive_with(marker)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        kept = int((tmp_path / "kept").read_text())
        leaf = int((tmp_path / "leaf").read_text())
        tree = Tree(root.pid, spare=lambda pid: pid == kept)
        assert set(tree.scan()) == {root.pid, leaf}
        root.kill()
        root.wait()  # the leaf is reparented away from the root; the tree remembers it
        signalled = kill_tree(tree, grace=0.5)
        assert leaf in signalled and kept not in signalled
        assert not _live(leaf) and _live(kept)
        assert len(alive_with(marker)) == 2  # kept and its child, below a spared process
    finally:
        _kill_marked(marker)
        if root.poll() is None:
            root.kill()
            root.wait()
