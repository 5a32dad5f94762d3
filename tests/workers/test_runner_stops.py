"""The runner's stops, with real processes: nothing of a worker survives any stop, proctor's own
interruption and death included; a prompt never blocks the watch; the whole stream is kept and
what the worker said so far is never lost; Claude's final reply is its main agent's Stop; a
spend known only from Claude's result leaves it its floor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support import alive_with
from tests.workers.world import HOSTS, _stream, needs_hosts
from proctor.process import cgroup_populated, tagged
from proctor.workers import runner
from proctor.workers.executors import claude, command

HAS_CGROUP = runner.containment().startswith("cgroup v2")
# a machine with no writable cgroup v2 skips these, saying what holds instead; CI's has one, and
# there they run (and fail, if it is missing)
needs_cgroup = pytest.mark.skipif(not HAS_CGROUP and os.environ.get("CI") != "true", reason=runner.containment())

# A worker that leaves four processes behind, each running SLEEPER with the marker in its command
# line: tagged (setsid'd, double-forked, keeps PROCTOR_WORKER_TAG), untagged (the same without the
# tag), stubborn (untagged, ignores SIGTERM), child (a setsid'd child, tagged). Then it says
# something (a main-thread assistant line) and goes silent. argv: marker, out directory.
SLEEPER = r"""
import os, signal, sys, time
if sys.argv[2] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = sys.argv[3]
with open(path + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.rename(path + ".tmp", path)
time.sleep(300)
"""
FORKER = (
    r"""
import json, os, sys, time
marker, out = sys.argv[1], sys.argv[2]
SLEEPER = %r

def spawn(name, env, double=True):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if double and os.fork() != 0:
            os._exit(0)
        os.execve(sys.executable, [sys.executable, "-c", SLEEPER, marker, name, os.path.join(out, name)], env)
    if double:
        os.waitpid(pid, 0)

untagged = {k: v for k, v in os.environ.items() if k != "PROCTOR_WORKER_TAG"}
spawn("tagged", dict(os.environ))
spawn("untagged", untagged)
spawn("stubborn", untagged)
spawn("child", dict(os.environ), double=False)
names = ("tagged", "untagged", "stubborn", "child")
while not all(os.path.exists(os.path.join(out, name)) for name in names):
    time.sleep(0.02)
print(json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "half way there"}]},
                  "parent_tool_use_id": None, "session_id": "s-1"}), flush=True)
open(os.path.join(out, "ready"), "w").close()
time.sleep(300)
"""
    % SLEEPER
)

# run_attempt inside a process of its own, as `proctor work` runs it: SIGTERM and SIGHUP raise
# runner.Interrupted, SIGINT KeyboardInterrupt; on_spawn's information and the attempt are printed.
RUNNER = r"""
import json, os, signal, sys
from proctor.workers import runner
from proctor.workers.executors import claude

def interrupted(signum, frame):
    raise runner.Interrupted(signum)

signal.signal(signal.SIGTERM, interrupted)
signal.signal(signal.SIGHUP, interrupted)
signal.signal(signal.SIGINT, signal.default_int_handler)
argv, cwd = json.loads(sys.argv[1]), sys.argv[2]

def heard(kind, attempt):  # the test signals only once the runner has read the worker's reply
    if "half way there" in (attempt.last_line or ""):
        open(os.path.join(cwd, "heard"), "w").close()

attempt = runner.run_attempt(argv, claude.Parser(), runner.Limits(idle=120, grace=60), cwd, dict(os.environ),
                             adopt_orphans=True, stream_path=os.path.join(cwd, "stream.out"),
                             on_spawn=lambda info: print(json.dumps({"spawned": info}), flush=True),
                             on_event=heard)
print(json.dumps({"attempt": attempt.to_json()}), flush=True)
"""


def _marker(name: str) -> str:
    return f"RUNSTOP{name}{os.getpid()}x{time.monotonic_ns() % 10**9}"


def _kill_marked(marker: str) -> None:
    for pid in alive_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _forker(tmp_path, marker: str) -> list[str]:
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    return [sys.executable, str(script), marker, str(out)]


def _left(marker: str, tag: str | None) -> list[int]:
    found = set(alive_with(marker))
    if tag:
        found.update(tagged(runner.TAG, tag))
    return sorted(found)


# ------------------------------------------------------------------ (a) an idle stop ends everything


@pytest.mark.parametrize("adopt", [True, pytest.param(False, marks=needs_cgroup)])
def test_idle_stop_leaves_no_descendant(tmp_path, adopt):
    """Stopped at its idle limit, the worker's setsid'd children and double-forked orphans, the
    ones that dropped the tag too, are gone: without adoption (as in the server) only the cgroup
    reaches an untagged orphan reparented to init."""
    marker = _marker("idle")
    seen: dict = {}
    try:
        attempt = runner.run_attempt(
            _forker(tmp_path, marker),
            claude.Parser(),
            runner.Limits(idle=2, grace=60),
            str(tmp_path),
            dict(os.environ),
            adopt_orphans=adopt,
            on_spawn=seen.update,
        )
        assert attempt.stop == "idle" and attempt.outcome == "aborted", attempt.reason
        assert (tmp_path / "out" / "ready").exists()
        assert _left(marker, seen["tag"]) == []
        if HAS_CGROUP:
            assert seen["cgroup"] and not os.path.exists(seen["cgroup"]), "the attempt's cgroup is removed"
        assert attempt.reply == "half way there" and attempt.reply_kind == "partial"
    finally:
        _kill_marked(marker)


def test_containment_names_what_holds():
    note = runner.containment()
    assert note.startswith("cgroup v2 at ") or note.startswith("no writable cgroup")
    assert "tag" in note and "parent-death signal" in note


# ------------------------------------------------------------------ (b) proctor itself interrupted


def _start_runner(tmp_path, marker: str):
    argv = _forker(tmp_path, marker)
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, json.dumps(argv), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    info = json.loads(line)["spawned"]
    assert set(info) >= {"pid", "start_time", "pgid", "tag", "cgroup"}
    assert _wait_for(lambda: (tmp_path / "out" / "ready").exists()), "the worker is up"
    # the runner has read what the worker said (under load it may lag the worker's files)
    assert _wait_for(lambda: (tmp_path / "heard").exists()), "the runner read the worker's reply"
    return proc, info


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_interrupted_runner_sweeps_and_returns_the_attempt(tmp_path, signum):
    """SIGTERM or SIGHUP (runner.Interrupted) or SIGINT (KeyboardInterrupt) while the attempt
    runs: every process of the worker is ended, and the attempt comes back `interrupted`, with
    what the worker had said."""
    marker = _marker("int")
    proc = None
    try:
        proc, info = _start_runner(tmp_path, marker)
        assert len(set(alive_with(marker)) - {proc.pid}) == 5  # the worker and its four (the runner names it)
        if info["cgroup"]:
            assert cgroup_populated(info["cgroup"])
        os.kill(proc.pid, signum)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        attempt = json.loads(stdout.strip().splitlines()[-1])["attempt"]
        name = signal.Signals(signum).name
        assert attempt["outcome"] == "interrupted" and attempt["stop"] == "interrupted"
        assert attempt["counts"] is False and attempt["interrupted_by"] == signum
        assert attempt["reason"] == f"stopped: proctor was interrupted ({name})"
        assert attempt["reply"] == "half way there" and attempt["reply_kind"] == "partial"
        assert _left(marker, info["tag"]) == []
        if info["cgroup"]:
            assert not os.path.exists(info["cgroup"])
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_marked(marker)


def test_a_second_signal_does_not_cut_the_sweep_short(tmp_path):
    """SIGTERM, then SIGINT and SIGHUP while the sweep waits out a grandchild that ignores
    SIGTERM: the sweep runs whole and the attempt is still returned, interrupted by the first."""
    marker = _marker("twice")
    proc = None
    try:
        proc, info = _start_runner(tmp_path, marker)
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.15)
        os.kill(proc.pid, signal.SIGINT)
        time.sleep(0.1)
        os.kill(proc.pid, signal.SIGHUP)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 0, stderr
        attempt = json.loads(stdout.strip().splitlines()[-1])["attempt"]
        assert attempt["outcome"] == "interrupted" and attempt["interrupted_by"] == signal.SIGTERM
        assert _left(marker, info["tag"]) == []
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_marked(marker)


def test_runner_killed_with_sigkill_then_swept_from_outside(tmp_path):
    """The runner dies by SIGKILL: the worker dies with it (the parent-death signal), what it left
    runs on until `runner.sweep(info)`, called from another process as the watchdog calls it,
    ends all of it."""
    marker = _marker("kill")
    proc = None
    try:
        proc, info = _start_runner(tmp_path, marker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert _wait_for(lambda: not _live(info["pid"]), 10), "the worker died with its runner"
        time.sleep(0.3)
        survivors = alive_with(marker)  # the runner, which named the marker, is dead
        # nothing ended them: each of the four runs on, the tagged ones and the untagged ones
        names = ("tagged", "untagged", "stubborn", "child")
        pids = {name: int((tmp_path / "out" / name).read_text()) for name in names}
        assert sorted(survivors) == sorted(pids.values())
        if info["cgroup"]:
            assert cgroup_populated(info["cgroup"])
        runner.sweep(info)
        if info["cgroup"]:
            assert _left(marker, info["tag"]) == []
            assert not os.path.exists(info["cgroup"])
        else:  # without a cgroup only the tag reaches an orphan of a dead runner
            assert not _live(pids["tagged"]) and not _live(pids["child"])
            assert tagged(runner.TAG, info["tag"]) == []
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_marked(marker)


def test_sweep_of_an_ended_attempt_is_harmless(tmp_path):
    """The watchdog may sweep an attempt that already ended (its pid perhaps reused): nothing
    that is not the worker's is touched."""
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        runner.sweep(
            {"pid": bystander.pid, "pgid": bystander.pid, "start_time": 1, "tag": "nobody" * 4, "cgroup": None}
        )
        assert bystander.poll() is None, "a pid whose start time differs is someone else's"
    finally:
        bystander.kill()
        bystander.wait()


# ------------------------------------------------------------------ prompts never block


@pytest.mark.parametrize("size", [84_000, 3_000_000])
def test_a_worker_that_never_reads_its_prompt_is_stopped_on_time(tmp_path, size):
    """An 84 KB prompt (larger than a default pipe) and a 3 MB one (larger than ours) to a worker
    that never reads its stdin: stopped at its idle limit, not held up by the write."""
    started = time.monotonic()
    attempt = runner.run_attempt(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        command.Parser(),
        runner.Limits(idle=2, grace=5),
        str(tmp_path),
        dict(os.environ),
        stdin_text="p" * size,
    )
    elapsed = time.monotonic() - started
    assert attempt.stop == "idle", attempt.reason
    assert elapsed < 2 + 6, f"stopped {elapsed:.1f} s after it started, idle limit 2 s"


def test_a_slow_reader_gets_the_whole_prompt(tmp_path):
    out = tmp_path / "got"
    reader = (
        "import sys, time\nchunks = []\nwhile True:\n    time.sleep(0.01)\n"
        "    chunk = sys.stdin.buffer.read1(65536)\n    if not chunk:\n        break\n    chunks.append(chunk)\n"
        f"open({str(out)!r}, 'wb').write(b''.join(chunks))\nprint('read it')\n"
    )
    prompt = "ünïcödé prompt\n" * 150_000
    attempt = runner.run_attempt(
        [sys.executable, "-c", reader],
        command.Parser(),
        runner.Limits(idle=30, grace=5),
        str(tmp_path),
        dict(os.environ),
        stdin_text=prompt,
    )
    assert attempt.stop is None and attempt.reply == "read it", attempt.reason
    assert out.read_bytes() == prompt.encode()


def test_fits_argv():
    assert runner.fits_argv("short")
    assert runner.fits_argv("x" * 99_000)
    assert not runner.fits_argv("x" * 100_000)
    assert not runner.fits_argv("é" * 60_000), "bytes, not characters, count"
    assert not runner.fits_argv("x" * (200 << 10))


# ------------------------------------------------------------------ the stream kept


WRITER = r"""
import sys, time
out = sys.stdout.buffer
for piece in PIECES:
    out.write(piece)
    out.flush()
    time.sleep(0.03)
sys.stderr.buffer.write(b"E" * 200_000 + b"\xc3")
sys.stderr.flush()
"""
PIECES = [
    b"first line\n",
    b"a line in ",
    b"three ",
    b"pieces\n",
    bytes(b for b in range(256) if b != 10) + b"\n",
    b"y" * 3_000_000 + b"\n",
    b"\n",
    b"tail without a newline",
]


def test_the_stream_file_holds_every_byte(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(f"PIECES = {PIECES!r}\n" + WRITER)
    stream = tmp_path / "deep" / "er" / "stream.out"
    stream.parent.mkdir(parents=True)
    stream.write_bytes(b"kept from before\n")  # appended to, never truncated
    attempt = runner.run_attempt(
        [sys.executable, str(script)],
        command.Parser(),
        runner.Limits(idle=30, grace=5),
        str(tmp_path),
        dict(os.environ),
        stream_path=str(stream),
    )
    assert attempt.stop is None and attempt.exit_code == 0
    assert stream.read_bytes() == b"kept from before\n" + b"".join(PIECES)
    assert (tmp_path / "deep" / "er" / "stream.out.stderr").read_bytes() == b"E" * 200_000 + b"\xc3"
    assert attempt.stream_path == str(stream)
    assert attempt.lines == 6 and attempt.last_line == "tail without a newline"
    assert len(attempt.stderr_tail) == runner.STDERR_KEEP
    fresh = tmp_path / "new" / "dirs" / "s.out"
    runner.run_attempt(
        [sys.executable, "-c", "print('hi')"],
        command.Parser(),
        runner.Limits(idle=30, grace=5),
        str(tmp_path),
        dict(os.environ),
        stream_path=str(fresh),
    )
    assert fresh.read_bytes() == b"hi\n", "its directories are made"


def _feed_by_lines(parser, data: bytes) -> tuple[list, int, str]:
    events = []
    lines = data.split(b"\n")
    tail = lines.pop()
    for raw in lines:
        events += parser.feed(raw.decode())
    count = len(lines)
    last = lines[-1][:300].decode() if lines else ""
    if tail:
        events += parser.feed(tail.decode())
        count, last = count + 1, tail[:300].decode()
    return [(e.kind, e.text, e.value) for e in events], count, last


def _feed_by_reads(parser, data: bytes, sizes) -> tuple[list, int, str]:
    attempt = runner.Attempt(started=0)
    events: list = []
    lines = runner._Lines(parser, attempt, lambda found: events.extend((e.kind, e.text, e.value) for e in found))
    position, index = 0, 0
    while position < len(data):
        size = min(sizes[index % len(sizes)], len(data) - position, runner.READ_SIZE)
        index += 1
        lines.chunk(data[position : position + size])
        position += size
    lines.finish()
    return events, attempt.lines, attempt.last_line


@needs_hosts
@pytest.mark.parametrize("sizes", [[1], [7, 300, 1], [4096], [1 << 20], [65536, 3, 200000]])
def test_reads_of_any_size_give_the_lines_and_events_of_the_whole_stream(sizes):
    """The runner counts lines and cuts out only the relevant ones (the rest skimmed): whatever
    the reads, the count, the last line and the parser's events are those of feeding every line."""
    names = sorted(n for n in os.listdir(HOSTS) if os.path.exists(os.path.join(HOSTS, n, "stream.jsonl")))
    for name in names:
        with open(os.path.join(HOSTS, name, "stream.jsonl"), "rb") as handle:
            data = handle.read()
        for tail in (b"", b'{"partial'):
            whole = _feed_by_lines(claude.Parser(), data + tail)
            assert whole[1] >= 10 and any(kind == "final" for kind, _t, _v in whole[0])
            assert _feed_by_reads(claude.Parser(), data + tail, sizes) == whole, name
    # and a long stream of many turns: the lines of every capture, but one session
    lines = [line for name in names for line in _stream(name)]
    lines = lines[:1] + [line for line in lines[1:] if not any(m in line for m in ('"result"', '"Stop"', '"init"'))]
    data = ("\n".join(lines) + "\n").encode()
    whole = _feed_by_lines(claude.Parser(), data)
    assert _feed_by_reads(claude.Parser(), data, sizes) == whole
    said = claude.Parser()
    _feed_by_reads(said, data, sizes)
    assert said.partial() == "[fake-turn 2] done."


# ------------------------------------------------------------------ Claude: the Stop hook is the final reply


STANDIN = r"""
import sys, time
with open(sys.argv[1]) as handle:
    for line in handle:
        sys.stdout.write(line)
        sys.stdout.flush()
time.sleep(float(sys.argv[2]))
"""


def _standin(tmp_path, lines: list[str], hang: float = 300) -> list[str]:
    stream = tmp_path / "replay.jsonl"
    stream.write_text("".join(line + "\n" for line in lines))
    script = tmp_path / "standin.py"
    script.write_text(STANDIN)
    return [sys.executable, str(script), str(stream), str(hang)]


def _first_stop(lines: list[str]) -> int:
    return next(i for i, line in enumerate(lines) if '"hook_event":"Stop"' in line and "hook_response" in line)


@needs_hosts
def test_the_grace_window_starts_at_the_main_stop(tmp_path):
    """A stand-in prints f_bg up to the main agent's Stop hook response and hangs, as Claude Code
    does while its background agent runs: the attempt is finished a grace window later, not
    stopped at the idle limit."""
    lines = _stream("f_bg")
    argv = _standin(tmp_path, lines[: _first_stop(lines) + 1])
    started = time.monotonic()
    attempt = runner.run_attempt(
        argv, claude.Parser(), runner.Limits(idle=30, grace=1), str(tmp_path), dict(os.environ)
    )
    assert attempt.stop == "grace" and attempt.outcome == "finished" and attempt.counts, attempt.reason
    assert attempt.reply == "[fake-turn 1] Main finished." and attempt.reply_kind == "stop"
    assert attempt.session and time.monotonic() - started < 20


@needs_hosts
def test_what_was_said_is_kept_on_an_idle_stop(tmp_path):
    lines = _stream("f_bg")
    text = next(i for i, line in enumerate(lines) if "[fake-turn 1] Main finished." in line)
    argv = _standin(tmp_path, lines[: text + 3])  # the reply's text, then silence before the Stop
    attempt = runner.run_attempt(
        argv, claude.Parser(), runner.Limits(idle=1.5, grace=60), str(tmp_path), dict(os.environ)
    )
    assert attempt.stop == "idle"
    assert attempt.reply == "[fake-turn 1] Main finished." and attempt.reply_kind == "partial"
    assert attempt.session == json.loads(lines[0])["session_id"]


@needs_hosts
def test_a_spend_known_after_the_final_reply_leaves_the_floor(tmp_path):
    """The Stop, then at once the result whose cost is past max_spend_usd: the worker is not
    killed before SPEND_FLOOR seconds from its final reply, and the attempt is finished."""
    lines = _stream("f_bg")
    result = next(line for line in lines if '"origin"' not in line and json.loads(line).get("type") == "result")
    argv = _standin(tmp_path, lines[: _first_stop(lines) + 1] + [result])
    finals = []
    attempt = runner.run_attempt(
        argv,
        claude.Parser(),
        runner.Limits(idle=60, grace=60, spend=0.001),
        str(tmp_path),
        dict(os.environ),
        on_event=lambda kind, a: finals.append(time.time()) if kind == "final" else None,
    )
    assert attempt.stop == "spend" and attempt.outcome == "finished" and attempt.counts is True, attempt.reason
    assert "max_spend_usd $0.001" in attempt.reason and "after the final reply" in attempt.reason
    assert attempt.reply == "[fake-turn 1] Main finished." and attempt.reply_kind == "success"
    assert attempt.stopped_at - finals[0] >= runner.SPEND_FLOOR - 0.3
    assert attempt.stopped_at - finals[0] < 30


@needs_hosts
def test_a_spend_crossed_in_the_result_that_is_the_final_reply_keeps_the_floor(tmp_path):
    lines = _stream("f_bg")
    result = next(line for line in lines if '"origin"' not in line and json.loads(line).get("type") == "result")
    stop = _first_stop(lines)
    argv = _standin(tmp_path, lines[: stop - 3] + [result])  # no Stop: the result is cost and reply at once
    started = time.monotonic()
    attempt = runner.run_attempt(
        argv, claude.Parser(), runner.Limits(idle=60, grace=60, spend=0.001), str(tmp_path), dict(os.environ)
    )
    # Claude reports cost only in its result: crossed there, the worker keeps its 5 s floor and
    # the attempt is finished (the words), not aborted
    assert attempt.stop == "spend" and attempt.outcome == "finished" and attempt.counts is True
    assert 4.5 <= time.monotonic() - started < 30
