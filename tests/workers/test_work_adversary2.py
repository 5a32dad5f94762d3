"""A second adversarial review of `proctor work`: the promises about stopping workers (README
"Workers: run a job unattended", spec worker-stops.md), attacked by a hostile or broken agent
CLI and by a hostile environment. Each test runs a real attack with real processes, scans
/proc for survivors and uses git as the oracle for the repository. A failing test is a break."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support import git, machine_slots, make_repo
from tests.support import needs_shared_fixtures as needs_fixtures
from tests.workers.test_work import STANDIN, standin_env
from proctor import api
from proctor.config import parse as parse_config
from proctor.process import cgroup_home, cgroup_populated
from proctor.workers import runner
from proctor.workers.executors import claude, command

pytestmark = needs_fixtures

PY = sys.executable
HAS_CGROUP = runner.containment().startswith("cgroup v2")


# ====================================================================================== helpers


def config(idle: str = "0.05", workers: str | None = None, targets: str = "", jobs: str = "") -> str:
    standin = json.dumps([PY, STANDIN])
    workers = (
        workers
        if workers is not None
        else f"""
[workers]
ladder = ["one"]
attempts = 1

[workers.one]
executor = "claude"
command = {standin}
"""
    )
    return f"""
[jobs]
grace_seconds = 5
idle_minutes = {idle}
{jobs}

[targets.test]
command = "grep -q ok src/a.py"
timeout = "30s"
{targets}
{workers}
"""


@pytest.fixture
def repo(tmp_path, monkeypatch):
    def make(cfg: str | None = None, name: str = "repo", job: dict | None = None) -> str:
        # the name in a comment: two repositories made in one second are two repositories (on a
        # shared PostgreSQL store, repositories with one root commit are one)
        root = make_repo(tmp_path / name, (cfg or config()) + f"\n# {name}\n")
        os.makedirs(os.path.join(root, "src"))
        for file in ("a", "b"):
            with open(os.path.join(root, "src", f"{file}.py"), "w") as handle:
                handle.write("x = 1\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "src")
        monkeypatch.chdir(root)
        api.fork(job or {"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "test"}, cwd=root)
        return root

    return make


def spawn_work(root: str, env: dict, *extra: str, job: str = "feat", out: str | None = None) -> subprocess.Popen:
    full = dict(os.environ)
    for key, value in env.items():
        if value is None:
            full.pop(key, None)
        else:
            full[key] = value
    sink = open(out, "w") if out else subprocess.PIPE
    return subprocess.Popen(
        [PY, "-m", "proctor", "work", job, *extra],
        cwd=root,
        env=full,
        stdout=sink,
        stderr=subprocess.STDOUT if out else subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for(predicate, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    return predicate()


def rows(root: str) -> dict[str, dict]:
    return {r["id"]: r for r in api.ls_jobs(cwd=root)["jobs"]}


def attempts(root: str, job: str = "feat") -> list[dict]:
    from proctor.workers.work import attempts_of
    from proctor.workspace import Workspace

    with Workspace(root, warn=lambda line: None) as ws:
        return attempts_of(ws, job)


def worktree_count(root: str) -> int:
    return git(root, "worktree", "list", "--porcelain").count("worktree ")


def cleaned_up(root: str, job: str = "feat") -> bool:
    row = rows(root).get(job) or {}
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=root, capture_output=True, text=True)
    if listed.returncode != 0:
        # git lists .git/worktrees while the watchdog's `git worktree remove` empties it: the
        # clean-up is under way, not done; the caller asks again
        return False
    return listed.stdout.count("worktree ") == 1 and row.get("worker_pid") is None and row.get("state") == "declared"


def running(argv: list[str]) -> list[int]:
    """Live (not zombie) processes whose whole command line is `argv`."""
    wanted = "\0".join(argv).encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if handle.read().rstrip(b"\0") != wanted:
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            found.append(int(entry))
        except OSError:
            continue
    return found


def with_marker(marker: str) -> list[int]:
    """Live processes whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() not in handle.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as handle:
                if handle.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            found.append(int(entry))
        except OSError:
            continue
    return found


def cgroup_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cgroup") as handle:
            line = next((text for text in handle if text.startswith("0::")), None)
    except OSError:
        return None
    return line[3:].strip() if line else None


def kill_all(pids) -> None:
    """End the survivors a test found (theirs only), and remove the empty cgroups they held."""
    home = cgroup_home() if HAS_CGROUP else None
    groups = {cgroup_of(pid) for pid in pids}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.3)
    if home:
        for group in groups:
            if group and os.path.basename(group).startswith("proctor-"):
                try:
                    os.rmdir(os.path.join(home[0], group.lstrip("/")))
                except OSError:
                    pass


def stop(*procs, term: bool = False) -> None:
    """End what a test started and left running: SIGTERM first when `term` (a second's grace to
    clean up), then SIGKILL, and reap it."""
    for proc in procs:
        if proc is None or proc.poll() is not None:
            continue
        if term:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
                continue
            except subprocess.TimeoutExpired:
                pass
        proc.kill()
        proc.wait()


def marker(name: str) -> str:
    return f"ADV2{name}{os.getpid()}x{time.monotonic_ns() % 10**9}"


def sleeper(seconds_tag: str) -> list[str]:
    """A distinctive `sleep` argv, found again by `running`."""
    return ["sleep", seconds_tag]


ESCAPE_CGROUP = (
    "g=$(sed -n 's/^0:://p' /proc/self/cgroup); m=$(awk '$3 == \"cgroup2\" {print $2; exit}' /proc/mounts); "
)


def say(text: str) -> str:
    """A main-thread assistant line of Claude's stream saying `text`."""
    return json.dumps(
        {
            "type": "assistant",
            "parent_tool_use_id": None,
            "session_id": "s-adv",
            "message": {"content": [{"type": "text", "text": text}]},
        }
    )


def script(tmp_path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


# ====================================================================================== 1. no survivor


@pytest.mark.skipif(not HAS_CGROUP and os.environ.get("CI") != "true", reason="needs a cgroup v2 to escape from")
def test_a_fake_workspace_server_is_spared_and_outlives_the_attempt(repo, tmp_path):
    """The worker starts, in a session of its own, without the tag and outside the worktree, this
    interpreter running `-m proctor server start --foreground` from a directory holding a
    `proctor` package of its own (python -m puts the cwd first on sys.path), with
    PROCTOR_SERVER_DIR naming this repository's server directory, and writes server.json there
    with its own pid. Every test the runner makes to spare the workspace's server passes: the
    tree, the cgroup and the watchdog all spare it, and it runs on after the attempt ended."""
    root = repo()
    mark = marker("fakeserver")
    fake = tmp_path / "fake"
    (fake / "proctor").mkdir(parents=True)
    (fake / "proctor" / "__init__.py").write_text("")
    (fake / "proctor" / "__main__.py").write_text(
        textwrap.dedent("""
        import json, os, time
        directory = os.environ["PROCTOR_SERVER_DIR"]
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "server.json"), "w") as handle:
            json.dump({"pid": os.getpid(), "port": 1, "version": "x"}, handle)
        time.sleep(120)
    """)
    )
    find_dir = (
        "import os; from proctor.paths import find_checkout, repo_state_dir; "
        "print(os.path.realpath(os.path.join(repo_state_dir(find_checkout('.'), create=False), 'server')))"
    )
    shell = (
        f'd=$({PY} -c "{find_dir}"); '
        f"(cd {fake} && PROCTOR_SERVER_DIR=$d setsid env -u PROCTOR_WORKER_TAG "
        f"{PY} -m proctor server start --foreground {mark} > /dev/null 2>&1 < /dev/null &); sleep 1"
    )
    survivors: list[int] = []
    proc = spawn_work(root, standin_env(STANDIN_SHELL=shell))
    try:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        time.sleep(1.0)
        survivors = with_marker(mark)
        assert not survivors, (
            f"a process the worker started (pid {survivors}, a forged workspace server) runs on after its attempt ended"
        )
    finally:
        stop(proc)
        kill_all(with_marker(mark))


NEUTRALISE = r"""
import json, os, signal, subprocess, sys
common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], capture_output=True,
                        text=True).stdout.strip()
root = os.path.realpath(os.path.dirname(common))
how, payload = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else ""
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        cwd = os.readlink(f"/proc/{entry}/cwd")
    except OSError:
        continue
    if b"proctor.workers.watchdog" in argv and os.path.realpath(cwd) == root:
        if how == "kill":
            os.kill(int(entry), signal.SIGKILL)
        else:  # write to the watchdog's own stdin, the pipe proctor tells it through
            with open(f"/proc/{entry}/fd/0", "w") as pipe:
                pipe.write(payload + "\n")
        print("done", entry)
"""


@pytest.mark.parametrize("how", ["kill", "goodbye"])
def test_a_worker_that_disarms_the_watchdog_leaves_survivors_when_proctor_dies(repo, tmp_path, how):
    """The watchdog is a process of the same user as the worker: the worker finds it (its
    command line and its cwd, the person's checkout) and kills it, or writes a goodbye line into
    its stdin through /proc/PID/fd/0. proctor work is then killed with SIGKILL (an OOM kill, or
    the worker itself). Nobody ends what the worker left, records the attempt, or hands the job
    back."""
    root = repo(config(idle="2"))
    ready = tmp_path / "ready"
    argv = sleeper("72.375")
    disarm = tmp_path / "disarm.py"
    disarm.write_text(NEUTRALISE)
    shell = (
        f"setsid {' '.join(argv)} > /dev/null 2>&1 < /dev/null & "
        f"{PY} {disarm} {how} '{json.dumps({'goodbye': True})}' > {tmp_path / 'disarmed'}; touch {ready}"
    )
    proc = spawn_work(
        root,
        standin_env(
            STANDIN_SHELL=shell, STANDIN_MODE="hang_after", STANDIN_STREAM="", STANDIN_APPEND=say("half way there")
        ),
    )
    survivors: list[int] = []
    try:
        assert wait_for(lambda: ready.exists()), "the worker did not start"
        assert "done" in (tmp_path / "disarmed").read_text(), "the watchdog was not found"
        assert wait_for(lambda: running(argv))
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        wait_for(lambda: not running(argv) and cleaned_up(root), timeout=30)
        survivors = running(argv)
        assert not survivors, f"the worker's child (pid {survivors}) runs on after proctor work died"
        assert cleaned_up(root), f"the job is not handed back: {rows(root)['feat']}"
        recorded = attempts(root)
        assert recorded and recorded[-1]["outcome"] == "interrupted", recorded
    finally:
        stop(proc)
        kill_all(survivors or running(argv))
        drop_worktrees(root)


def test_a_forged_watchdog_message_cannot_make_it_delete_a_directory(repo, tmp_path):
    """The worker writes a state line of its own into the watchdog's stdin naming a directory of
    the person's as the attempt's worktree; when proctor work dies, the watchdog 'removes the
    worktree' with rmtree."""
    root = repo(config(idle="2"))
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("three years of work\n")
    ready = tmp_path / "ready"
    disarm = tmp_path / "disarm.py"
    disarm.write_text(NEUTRALISE)
    forged = json.dumps({"state": {"worktree": str(precious)}})
    group = tmp_path / "cgroup"
    shell = (
        f"sed -n 's/^0:://p' /proc/self/cgroup > {group}; "
        f"{PY} {disarm} write '{forged}' > {tmp_path / 'disarmed'}; touch {ready}"
    )
    proc = spawn_work(root, standin_env(STANDIN_SHELL=shell, STANDIN_MODE="hang_after"))
    try:
        assert wait_for(lambda: ready.exists()), "the worker did not start"
        assert "done" in (tmp_path / "disarmed").read_text(), "the watchdog was not found"
        time.sleep(1.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(5.0)
        assert (precious / "thesis.tex").exists(), "the watchdog deleted a directory the worker named"
    finally:
        stop(proc)
        wait_for(lambda: rows(root)["feat"].get("worker_pid") is None, timeout=20)
        drop_worktrees(root)
        home = cgroup_home() if HAS_CGROUP else None
        left = group.read_text().strip() if group.exists() else ""
        if home and os.path.basename(left).startswith("proctor-"):
            path = os.path.join(home[0], left.lstrip("/"))
            wait_for(lambda: not cgroup_populated(path), timeout=10)
            try:
                os.rmdir(path)  # the attempt's cgroup: the forged state kept the watchdog from removing it
            except OSError:
                pass


def drop_worktrees(root: str) -> None:
    """Remove the attempt worktrees a killed runner left (a test's own repository only)."""
    for line in git(root, "worktree", "list", "--porcelain").splitlines():
        if line.startswith("worktree ") and os.path.realpath(line[9:]) != os.path.realpath(root):
            subprocess.run(["git", "worktree", "remove", "--force", "--force", line[9:]], cwd=root, capture_output=True)
    subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)


# ====================================================================================== 2. Claude's stops


STOP_OK = json.dumps(
    {
        "type": "system",
        "subtype": "hook_response",
        "hook_event": "Stop",
        "hook_name": "Stop",
        "output": "",
        "exit_code": 0,
        "session_id": "s-adv",
    }
)
STOP_BLOCKED = json.dumps(
    {
        "type": "system",
        "subtype": "hook_response",
        "hook_event": "Stop",
        "hook_name": "Stop",
        "output": "",
        "exit_code": 2,
        "session_id": "s-adv",
    }
)


def replayer(tmp_path, lines: list[str], then: str) -> list[str]:
    """A Claude stand-in: prints `lines`, then runs the Python statement `then` (a loop, a hang)."""
    path = script(
        tmp_path,
        "replay.py",
        """
        import json, sys, time
        lines = json.load(open(sys.argv[1]))
        for line in lines:
            print(line, flush=True)
        exec(sys.argv[2])
    """,
    )
    data = tmp_path / "lines.json"
    data.write_text(json.dumps(lines))
    return [PY, path, str(data), then]


def test_claude_output_after_its_final_reply_buys_no_time_even_blocked_stops(tmp_path):
    """Claude's main Stop (not blocked), then its result: the final reply. The stream then goes
    on, every second, with a Stop hook response that blocked (exit code 2) and one that did not.
    'For a Claude worker, output after the final reply doesn't buy more time: once the result
    event has arrived, the idle clock no longer applies and the grace window is all that's
    left.' Each blocked Stop hands back to the idle clock and each Stop after it starts a new
    grace window, so the worker runs on as long as it likes."""
    result = json.dumps({"type": "result", "subtype": "success", "result": "all done", "session_id": "s-adv"})
    loop = (
        f"end = time.time() + 40\nwhile time.time() < end:\n"
        f"    print({STOP_BLOCKED!r}, flush=True); time.sleep(0.5); print({STOP_OK!r}, flush=True); time.sleep(0.5)\n"
        f"time.sleep(300)"
    )
    argv = replayer(tmp_path, [say("all done"), STOP_OK, result], loop)
    finals: list[float] = []
    started = time.monotonic()
    attempt = runner.run_attempt(
        argv,
        claude.Parser(),
        runner.Limits(idle=60, grace=5),
        str(tmp_path),
        dict(os.environ),
        on_event=lambda kind, a: finals.append(time.time()) if kind == "final" else None,
    )
    elapsed = time.monotonic() - started
    assert attempt.reply == "all done"
    assert attempt.stop == "grace", attempt.reason
    assert attempt.stopped_at - finals[0] < 5 + 5, (
        f"stopped {attempt.stopped_at - finals[0]:.1f} s after its final reply with a 5 s grace window "
        f"({len(finals)} final replies counted; {elapsed:.0f} s in all)"
    )


def test_claude_spend_in_a_result_without_a_stop_leaves_the_floor(tmp_path):
    """A Claude stream whose hooks did not answer (no Stop): its result is the final reply and
    carries the cost, past max_spend_usd. 'spend limit (for Claude, whose cost arrives with its
    result, never inside 5 s of its final reply)': the worker, saving its session file, is
    killed the moment its final reply arrives, and its finished attempt is recorded aborted."""
    result = json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "result": "done, and it cost",
            "session_id": "s-adv",
            "total_cost_usd": 3.0,
        }
    )
    argv = replayer(tmp_path, [say("done, and it cost"), result], "time.sleep(300)")
    finals: list[float] = []
    attempt = runner.run_attempt(
        argv,
        claude.Parser(),
        runner.Limits(idle=60, grace=60, spend=1.0),
        str(tmp_path),
        dict(os.environ),
        on_event=lambda kind, a: finals.append(time.time()) if kind == "final" else None,
    )
    assert attempt.stop == "spend" and attempt.reply == "done, and it cost", attempt.reason
    assert finals, "the result was the final reply"
    assert attempt.stopped_at - finals[0] >= runner.SPEND_FLOOR - 0.3, (
        f"killed {attempt.stopped_at - finals[0]:.2f} s after its final reply ({attempt.outcome}, "
        f"counts={attempt.counts})"
    )


# ====================================================================================== 3. durations


def test_long_but_valid_durations_do_not_crash_the_runner(repo):
    """`idle_minutes = "30d"` and `wall_minutes = "30d"` are durations the parser takes (up to a
    century). The watch sleeps in a selector whose timeout is the nearest deadline; epoll
    refuses one over INT_MAX milliseconds (24.8 days)."""
    standin = json.dumps([PY, STANDIN])
    workers = f'\n[workers.one]\nexecutor = "claude"\ncommand = {standin}\nwall_minutes = "30d"\n'
    root = repo(config(idle='"30d"', workers=workers))
    proc = spawn_work(root, standin_env(), "-o", "json")
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        stop(proc)
    assert proc.returncode == 0, out + err
    assert rows(root)["feat"]["state"] == "pass"


@pytest.mark.parametrize(
    "raw", ['"0s"', '"-5m"', '"1e309"', "1e309", "nan", '""', '"5 parsecs"', "true", '"1h-30m"', '"0x10"', "-1", "0"]
)
def test_a_bad_wall_minutes_is_reported_and_the_default_kept(raw):
    text = f'[workers.one]\nexecutor = "claude"\nwall_minutes = {raw}\n'
    parsed = parse_config(text.encode(), "proctor.toml")
    assert parsed.workers["one"].wall_minutes == 60
    assert any("wall_minutes" in p for p in parsed.problems), parsed.problems


@pytest.mark.parametrize(
    "raw, seconds", [('"1h30m"', 5400), ('"90s"', 90), ('"20m"', 1200), ("90", 5400), ('"1.5h"', 5400)]
)
def test_durations_in_every_form(raw, seconds):
    text = f'[jobs]\nidle_minutes = {raw}\n[workers.one]\nexecutor = "claude"\nwall_minutes = {raw}\n'
    parsed = parse_config(text.encode(), "proctor.toml")
    assert parsed.idle_limit_seconds == seconds and parsed.workers["one"].wall_minutes * 60 == seconds
    assert not parsed.problems, parsed.problems


@pytest.mark.parametrize(
    "key, raw",
    [
        ("idle_minutes", '"-5m"'),
        ("idle_minutes", '"0s"'),
        ("idle_minutes", "nan"),
        ("grace_seconds", '"1e309"'),
        ("grace_seconds", "inf"),
        ("grace_seconds", '"soon"'),
    ],
)
def test_a_bad_jobs_duration_is_reported_and_the_default_kept(key, raw):
    parsed = parse_config(f"[jobs]\n{key} = {raw}\n".encode(), "proctor.toml")
    assert any(key in p for p in parsed.problems), parsed.problems
    assert parsed.idle_limit_seconds == 15 * 60 and parsed["jobs.grace_seconds"] == 60


# ====================================================================================== 4. silent, closed, flooding


def test_a_spinner_without_newlines_does_not_hold_off_the_idle_stop(tmp_path):
    """A hung CLI that draws a spinner ('\\r|/-\\\\' without a newline) forever: no line, so no output."""
    argv = [
        PY,
        "-c",
        "import sys, time\nwhile True:\n    sys.stdout.write('\\r|/-\\\\'[int(time.time()*10) % 4]);"
        " sys.stdout.flush(); time.sleep(0.05)",
    ]
    started = time.monotonic()
    attempt = runner.run_attempt(
        argv,
        command.Parser(),
        runner.Limits(idle=2, grace=5),
        str(tmp_path),
        dict(os.environ),
        stream_path=str(tmp_path / "s.out"),
    )
    assert attempt.stop == "idle" and attempt.outcome == "aborted" and not attempt.counts, attempt.reason
    assert time.monotonic() - started < 20
    assert (tmp_path / "s.out").stat().st_size > 0, "the spinner's bytes are kept all the same"


def test_a_worker_that_closes_its_output_ignores_sigterm_and_lives_on_is_stopped(tmp_path):
    mark = marker("closed")
    argv = [
        PY,
        "-c",
        "import os, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('my reply', flush=True)\nos.close(1); os.close(2)\ntime.sleep(300)",
        mark,
    ]
    started = time.monotonic()
    try:
        attempt = runner.run_attempt(
            argv, command.Parser(), runner.Limits(idle=2, grace=5), str(tmp_path), dict(os.environ), adopt_orphans=True
        )
        assert attempt.stop == "idle", attempt.reason
        assert time.monotonic() - started < 20
        assert "my reply" in (attempt.reply or ""), "the reply printed before the idle stop is kept"
        assert not with_marker(mark)
    finally:
        kill_all(with_marker(mark))


def test_a_flood_on_stdout_and_stderr_is_stopped_at_its_wall_clock(tmp_path):
    """`yes` on both streams, as fast as the pipes take it: the loop still sees its deadline."""
    argv = ["/bin/sh", "-c", "yes flood & yes errflood >&2 & wait"]
    started = time.monotonic()
    attempt = runner.run_attempt(
        argv,
        claude.Parser(),
        runner.Limits(idle=60, grace=5, wall=3),
        str(tmp_path),
        dict(os.environ),
        adopt_orphans=True,
    )
    assert attempt.stop == "wall", attempt.reason
    assert time.monotonic() - started < 20
    assert attempt.lines > 1000
    assert not running(["yes", "flood"]) and not running(["yes", "errflood"])


def test_a_process_hopping_sessions_and_ignoring_sigterm_is_ended_with_its_cgroup(tmp_path):
    """Each generation forks, the parent exits at once, the child takes a session of its own and
    ignores SIGTERM: a pid-by-pid sweep is always one step behind; the cgroup is not."""
    mark = marker("hopper")
    hopper = script(
        tmp_path,
        "hopper.py",
        """
        import os, signal, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        env = {k: v for k, v in os.environ.items() if k != "PROCTOR_WORKER_TAG"}
        end = time.time() + 20
        while time.time() < end:
            if os.fork():
                os._exit(0)
            os.setsid()
            time.sleep(0.002)
        time.sleep(60)
    """,
    )
    argv = [
        PY,
        "-c",
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {hopper!r}, {mark!r}])\n"
        "time.sleep(1)\nprint('left a hopper', flush=True)",
    ]
    try:
        attempt = runner.run_attempt(
            argv, command.Parser(), runner.Limits(idle=30, grace=5), str(tmp_path), dict(os.environ), adopt_orphans=True
        )
        assert attempt.outcome == "finished", attempt.reason
        time.sleep(0.5)
        assert not with_marker(mark), "a hopper survived the sweep"
    finally:
        kill_all(with_marker(mark))
        time.sleep(0.3)
        kill_all(with_marker(mark))


# ====================================================================================== 5. interrupting proctor


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_interrupted_during_the_check_the_attempt_is_still_recorded(repo, tmp_path, how):
    """The worker finished and said what it did; proctor runs the job's check (a slow one) and is
    stopped (SIGTERM) or killed (SIGKILL, the watchdog cleans up) meanwhile. The check is ended
    and the job handed back; and the attempt, with what the worker said, is on the trail."""
    mark = tmp_path / "check-started"
    argv = sleeper("38.625")
    root = repo(
        config(
            targets=f'\n[targets.slow]\ncommand = "touch {mark}; {" ".join(argv)}; grep -q ok src/a.py"\n'
            f'timeout = "120s"\n'
        ),
        job={"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "slow"},
    )
    proc = spawn_work(root, standin_env(STANDIN_STREAM="", STANDIN_APPEND=say("I made a ok")))
    try:
        assert wait_for(lambda: mark.exists(), timeout=60)
        time.sleep(0.3)
        os.kill(proc.pid, how)
        proc.wait(timeout=30)
        assert wait_for(lambda: cleaned_up(root)), rows(root)["feat"]
        assert wait_for(lambda: not running(argv), timeout=10), "the check runs on"
        broken = []
        if how != signal.SIGKILL and proc.returncode != 128 + how:
            broken.append(f"exit {proc.returncode}, not {128 + how}: {proc.stderr.read().strip()}")
        recorded = attempts(root)
        if len(recorded) != 1 or "I made a ok" not in (recorded[0].get("claim") or ""):
            broken.append(f"the finished attempt is not on the trail (attempts: {recorded})")
        assert not broken, "; ".join(broken)
    finally:
        stop(proc)
        kill_all(running(argv))
        drop_worktrees(root)


def test_ctrl_c_pressed_again_and_again_loses_nothing(repo, tmp_path):
    """A person presses Ctrl-C, then keeps pressing it (every 20 ms for three seconds) while
    proctor ends the worker and records the attempt. The worker and what it left are gone, the
    attempt is recorded interrupted with what the worker said, the job is handed back and the
    worktree removed."""
    ready = tmp_path / "ready"
    argv = sleeper("73.875")
    root = repo(config(idle="2"))
    shell = f"setsid {' '.join(argv)} > /dev/null 2>&1 < /dev/null & touch {ready}"
    proc = spawn_work(
        root,
        standin_env(
            STANDIN_SHELL=shell, STANDIN_MODE="hang_after", STANDIN_STREAM="", STANDIN_APPEND=say("half way there")
        ),
    )
    try:
        assert wait_for(lambda: ready.exists())
        time.sleep(1.0)
        until = time.monotonic() + 3.0
        while time.monotonic() < until and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGINT)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        proc.wait(timeout=30)
        assert wait_for(lambda: not running(argv), timeout=20), "the worker's child runs on"
        assert wait_for(lambda: cleaned_up(root), timeout=20), (rows(root)["feat"], worktree_count(root))
        recorded = attempts(root)
        said = proc.stderr.read().strip().splitlines()
        assert recorded and recorded[-1]["outcome"] == "interrupted", (
            f"no attempt recorded ({recorded}); proctor work exited {proc.returncode}: {said[-3:]}"
        )
        assert "half way there" in (recorded[-1].get("claim") or "")
    finally:
        stop(proc)
        kill_all(running(argv))
        drop_worktrees(root)


# ====================================================================================== 6. slots, one runner


def slot_config(slots: int = 1) -> str:
    standin = json.dumps([PY, STANDIN])
    return config(idle="1", workers=f'\n[workers.one]\nexecutor = "claude"\ncommand = {standin}\nslots = {slots}\n')


@machine_slots
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL])
def test_proctor_stopped_while_it_waits_for_a_slot(repo, tmp_path, how):
    """x holds the only claude slot; y waits for it and is stopped (or killed) meanwhile: y exits,
    is handed back with no worktree left and no attempt recorded (its worker never started), a
    second `proctor work y` meanwhile was refused naming y's pid; x is untouched."""
    root = repo(slot_config())
    api.fork({"id": "y", "criteria": "make b", "write_paths": ["src/b.py"], "check": "test"}, cwd=root)
    ready = tmp_path / "x-ready"
    first = spawn_work(root, standin_env(STANDIN_MODE="hang_after", STANDIN_SHELL=f"touch {ready}"), job="feat")
    log = tmp_path / "y.log"
    second = None
    try:
        assert wait_for(lambda: ready.exists())
        second = spawn_work(root, standin_env(STANDIN_WRITE="src/b.py=ok\\n"), job="y", out=str(log))
        assert wait_for(lambda: "waiting for a claude slot" in log.read_text()), log.read_text()
        third = subprocess.run([PY, "-m", "proctor", "work", "y"], cwd=root, capture_output=True, text=True)
        assert third.returncode == 2 and f"pid {second.pid}" in third.stderr, third.stderr
        os.kill(second.pid, how)
        second.wait(timeout=30)
        if how != signal.SIGKILL:
            assert second.returncode == 128 + how, log.read_text()
        assert wait_for(
            lambda: (r := rows(root)["y"]) and r["state"] == "declared" and r.get("worker_pid") is None, timeout=20
        ), rows(root)["y"]
        assert not attempts(root, "y")
        assert first.poll() is None and rows(root)["feat"]["state"] == "running"
        assert wait_for(lambda: worktree_count(root) == 2, timeout=20), git(root, "worktree", "list")
    finally:
        stop(first, second, term=True)
        drop_worktrees(root)


@machine_slots
def test_slots_bound_workers_on_the_machine_whatever_the_state_directory(repo, tmp_path, monkeypatch):
    """Two repositories, each worked with `slots = 1` for its claude worker, one of them with
    PROCTOR_STATE_DIR set elsewhere (the documented override): the slot lock files live under
    each one's state base, so both workers run at once."""
    first_root = repo(slot_config(), name="one")
    elsewhere = tmp_path / "other-state"
    env_two = {"PROCTOR_STATE_DIR": str(elsewhere)}
    with monkeypatch.context() as m:
        m.setenv("PROCTOR_STATE_DIR", str(elsewhere))
        second_root = repo(slot_config(), name="two")
    monkeypatch.chdir(first_root)
    ready_one, ready_two = tmp_path / "ready-one", tmp_path / "ready-two"
    first = spawn_work(first_root, standin_env(STANDIN_MODE="hang_after", STANDIN_SHELL=f"touch {ready_one}"))
    second = None
    try:
        assert wait_for(lambda: ready_one.exists())
        second = spawn_work(
            second_root,
            dict(standin_env(STANDIN_MODE="hang_after", STANDIN_SHELL=f"touch {ready_two}"), **env_two),
            out=str(tmp_path / "two.log"),
        )
        started = wait_for(
            lambda: ready_two.exists() or "waiting for a claude slot" in (tmp_path / "two.log").read_text(), timeout=40
        )
        assert started, (tmp_path / "two.log").read_text()
        assert not ready_two.exists(), "two claude workers run at once on this machine with slots = 1"
    finally:
        stop(first, second, term=True)
        drop_worktrees(first_root)
        drop_worktrees(second_root)


# ====================================================================================== 7. more stops held


def test_every_stderr_byte_counts_as_output(tmp_path):
    """Nothing on stdout, a byte on stderr every half second for eight seconds, an idle limit of
    two: the worker is not stopped, and exits by itself."""
    argv = [PY, "-c", "import os, time\nfor _ in range(16):\n    os.write(2, b'.'); time.sleep(0.5)\nprint('done')"]
    attempt = runner.run_attempt(
        argv, command.Parser(), runner.Limits(idle=2, grace=5), str(tmp_path), dict(os.environ)
    )
    assert attempt.stop is None and attempt.outcome == "finished" and attempt.reply == "done", attempt.reason


def test_a_tool_output_quoting_a_stop_hook_response_is_not_the_final_reply(tmp_path):
    """A tool's output (a user line's tool_result) holding the text of a Stop hook response, and
    a subagent's SubagentStop: neither starts the grace window; the silent worker is stopped
    at its idle limit, with what the main agent said kept."""
    quoted = json.dumps(
        {
            "type": "user",
            "parent_tool_use_id": None,
            "session_id": "s-adv",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "t1", "content": STOP_OK + "\n" + STOP_OK}]},
        }
    )
    sub = json.dumps(
        {
            "type": "system",
            "subtype": "hook_response",
            "hook_event": "SubagentStop",
            "output": "",
            "exit_code": 0,
            "session_id": "s-adv",
        }
    )
    argv = replayer(tmp_path, [say("working on it"), quoted, sub], "time.sleep(300)")
    attempt = runner.run_attempt(
        argv, claude.Parser(), runner.Limits(idle=3, grace=60), str(tmp_path), dict(os.environ)
    )
    assert attempt.stop == "idle" and attempt.reply == "working on it" and attempt.reply_kind == "partial", (
        attempt.stop,
        attempt.reply,
        attempt.reason,
    )


def test_a_second_runner_with_retry_is_refused_before_it_touches_the_job(repo, tmp_path):
    root = repo(config(idle="1"))
    ready = tmp_path / "ready"
    first = spawn_work(root, standin_env(STANDIN_MODE="hang_after", STANDIN_SHELL=f"touch {ready}"))
    try:
        assert wait_for(lambda: ready.exists())
        before = rows(root)["feat"]
        second = subprocess.run(
            [PY, "-m", "proctor", "work", "feat", "--retry"], cwd=root, capture_output=True, text=True
        )
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr, second.stderr
        after = rows(root)["feat"]
        assert after["state"] == before["state"] == "running" and after.get("worker_pid") == first.pid
    finally:
        os.kill(first.pid, signal.SIGTERM)
        first.wait(timeout=30)
        drop_worktrees(root)


def test_sigterm_while_landing_leaves_the_persons_checkout_as_it_was(repo, tmp_path):
    """proctor is stopped (SIGTERM) while git commits the graded files in the person's checkout."""
    import shutil

    root = repo()
    shim, mark = tmp_path / "shim", tmp_path / "landing"
    shim.mkdir()
    (shim / "git").write_text(
        f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "--only" ] && touch {mark} && '
        f'exec sleep 39.125; done\nexec {shutil.which("git")} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    head = git(root, "rev-parse", "HEAD")
    proc = spawn_work(root, standin_env(PATH=f"{shim}:{os.environ['PATH']}"))
    try:
        assert wait_for(lambda: mark.exists(), timeout=60)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        assert proc.returncode == 128 + signal.SIGTERM, proc.stderr.read()
        assert wait_for(lambda: cleaned_up(root)), rows(root)["feat"]
        assert git(root, "rev-parse", "HEAD") == head
        assert git(root, "status", "--porcelain") == ""
        assert [a["outcome"] for a in attempts(root)] == ["finished"]
    finally:
        stop(proc)
        kill_all(running(["sleep", "39.125"]))
        drop_worktrees(root)


# ====================================================================================== 8. blocking the runner


STOP_FILL = r"""
import json, os, signal, subprocess, sys
common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], capture_output=True,
                        text=True).stdout.strip()
root = os.path.realpath(os.path.dirname(common))
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    try:
        argv = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        cwd = os.readlink(f"/proc/{entry}/cwd")
    except OSError:
        continue
    if b"proctor.workers.watchdog" in argv and os.path.realpath(cwd) == root:
        os.kill(int(entry), signal.SIGSTOP)
        fd = os.open(f"/proc/{entry}/fd/0", os.O_WRONLY | os.O_NONBLOCK)
        try:
            while True:
                os.write(fd, b"x" * 4096)
        except BlockingIOError:
            pass
        print(entry)
"""


def test_a_worker_that_freezes_the_watchdog_does_not_hang_the_runner(repo, tmp_path):
    """The worker stops the watchdog (SIGSTOP) and fills the pipe proctor tells it through, then
    finishes its work and exits. proctor writes to that pipe blocking, after the attempt: the
    unattended runner hangs for good, its job claimed and `running`, no wall clock to end it."""
    root = repo()
    fill = tmp_path / "fill.py"
    fill.write_text(STOP_FILL)
    frozen = tmp_path / "frozen"
    proc = spawn_work(root, standin_env(STANDIN_SHELL=f"{PY} {fill} > {frozen}"), out=str(tmp_path / "out.log"))
    dog = None
    try:
        assert wait_for(lambda: frozen.exists() and frozen.read_text().strip(), timeout=60)
        dog = int(frozen.read_text().split()[0])
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        assert proc.poll() is not None, (
            f"proctor work (pid {proc.pid}) still runs 60 s after its worker ended (job {rows(root)['feat']['state']})"
        )
    finally:
        if dog is not None:
            try:
                os.kill(dog, signal.SIGCONT)
            except OSError:
                pass
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        drop_worktrees(root)


def test_a_display_nobody_reads_does_not_hold_off_the_stops(repo, tmp_path):
    """proctor work's output goes to a pipe nobody reads (a terminal paused with Ctrl-S, a full
    log pipe). The worker prints many final replies (a blocked Stop and a Stop, 3000 times): each
    prints a line on that output. Once the pipe is full, writing the display blocks the watch
    itself: the worker, silent afterwards, is never stopped."""
    mark = marker("display")
    pairs = tmp_path / "pairs.py"
    pairs.write_text(
        textwrap.dedent(f"""
        import sys, time
        for _ in range(3000):
            print({STOP_BLOCKED!r}); print({STOP_OK!r})
        sys.stdout.flush()
        time.sleep(300)
    """)
    )
    root = repo(
        config(
            idle="0.05",
            workers=f'\n[workers.one]\nexecutor = "claude"\ncommand = {json.dumps([PY, str(pairs), mark])}\n',
        )
    )
    full = dict(os.environ)
    proc = subprocess.Popen(
        [PY, "-m", "proctor", "work", "feat"],
        cwd=root,
        env=full,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "err.log", "w"),
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: with_marker(mark), timeout=30), "the worker did not start"
        gone = wait_for(lambda: not with_marker(mark), timeout=30)
        assert gone, "the worker is still running 30 s on: with a 3 s idle limit and a 5 s grace window"
    finally:
        kill_all(with_marker(mark))
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        drop_worktrees(root)


def test_code_the_worker_wrote_leaves_no_process_behind_through_the_check(repo, tmp_path):
    """The job's check runs code the worker wrote (as pytest or make would): here `python3
    src/a.py`, and the worker's src/a.py starts a process in the background, its output
    elsewhere, and passes. The attempt passes and lands; the process the worker's code started
    runs on after proctor work ended: the check proctor runs has no cgroup, no subreaper, and
    its tag is swept only when proctor is killed."""
    argv = sleeper("74.625")
    root = repo(
        config(targets=f'\n[targets.code]\ncommand = "{PY} src/a.py"\ntimeout = "30s"\n'),
        job={"id": "feat", "criteria": "make a ok", "write_paths": ["src/a.py"], "check": "code"},
    )
    code = (
        f"import subprocess\\nsubprocess.Popen({json.dumps(argv)}, stdin=subprocess.DEVNULL, "
        f"stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\\nok = True\\n"
    )
    proc = spawn_work(root, standin_env(STANDIN_WRITE=f"src/a.py={code}"), "-o", "json")
    survivors: list[int] = []
    try:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        assert "subprocess.Popen" in git(root, "show", "HEAD:src/a.py")
        time.sleep(1.0)
        survivors = running(argv)
        assert not survivors, f"a process the worker's code started (pid {survivors}) runs on after proctor work"
    finally:
        stop(proc)
        kill_all(survivors or running(argv))
