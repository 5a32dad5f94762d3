"""Benchmark: the worker runner's stream handling and its idle stop.

1. One million lines through the runner, beside `cat file | cat > /dev/null` (the same bytes
   through a pipe, measured in the same round) and the older baselines (`cat` to /dev/null, `cat`
   into a pipe read by a plain Python reader), beside `cat file | cat > kept` (what writing the
   bytes to the file system the stream is kept on costs at all), and beside the time to start
   proctor at all (`proctor --version`, median of 5):
   - short lines, the `command` executor's parser (it keeps only the last lines);
   - Claude's stream, a realistic mix of the shapes in the captured 2.1.332 streams (mostly
     assistant and user lines, hook and task lines, one session, its Stop and result at the
     end), the `claude` parser;
   - one 5 MB line;
   each without and with the stream kept in a file (`stream_path`).
2. How long after the idle limit the worker's processes are gone, for a silent worker whose
   grandchild ignores SIGTERM.
3. The runner's CPU while its worker is silent.

    python bench/work.py
"""

from __future__ import annotations

import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from proctor.workers import runner
from proctor.workers.executors import claude, command

HOSTS = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "fixtures", "hosts", "claude-2.1.332")
RUNS = 5


def timed_run(argv, limits, parser=None, stream: str | None = None) -> tuple[float, runner.Attempt]:
    start = time.perf_counter()
    attempt = runner.run_attempt(
        argv, parser or command.Parser(), limits, os.getcwd(), dict(os.environ), stream_path=stream
    )
    elapsed = time.perf_counter() - start
    if stream:
        for path in (stream, stream + ".stderr"):
            if os.path.exists(path):
                os.unlink(path)
    return elapsed, attempt


def cat_baselines(path: str, kept: str) -> tuple[float, float, float, float]:
    """cat > /dev/null; cat | cat > /dev/null; cat | a Python reader; cat | cat > a file where
    the stream is kept (what writing those bytes to that file system costs at all)."""
    start = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    devnull = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run(["sh", "-c", 'cat "$1" | cat > /dev/null', "sh", path], check=True)
    cat_cat = time.perf_counter() - start
    start = time.perf_counter()
    proc = subprocess.Popen(["cat", path], stdout=subprocess.PIPE)
    for _line in proc.stdout:
        pass
    proc.wait()
    piped = time.perf_counter() - start
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    start = time.perf_counter()
    subprocess.run(["sh", "-c", 'cat "$1" | cat > "$2"', "sh", path, kept], check=True)
    to_file = time.perf_counter() - start
    os.unlink(kept)
    return devnull, cat_cat, piped, to_file


def proctor_start() -> float:
    """The median time of `proctor --version`: what starting proctor at all costs."""
    exe = os.path.join(os.path.dirname(sys.executable), "proctor")
    argv = [exe, "--version"] if os.path.exists(exe) else [sys.executable, "-m", "proctor", "--version"]
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def claude_mix(path: str, count: int) -> None:
    """`count` lines of the shapes Claude Code 2.1.332 prints (from the captures when present):
    mostly assistant and user lines, of the main thread and of subagents, hook and task lines
    between; one init first, the main agent's last text, its Stop and the result last."""
    pools: dict[str, list[str]] = {"assistant": [], "user": [], "other": []}
    init = stop = result = None
    names = sorted(os.listdir(HOSTS)) if os.path.isdir(HOSTS) else []
    for name in names:
        stream = os.path.join(HOSTS, name, "stream.jsonl")
        if not os.path.exists(stream):
            continue
        with open(stream) as handle:
            for line in handle:
                event = json.loads(line)
                kind, subtype = event.get("type"), event.get("subtype")
                if kind == "system" and subtype == "init":
                    init = init or line
                elif kind == "result":
                    result = result or (line if not event.get("origin") else None)
                elif kind == "system" and event.get("hook_event") == "Stop":
                    stop = stop or (line if subtype == "hook_response" else None)
                elif kind in ("assistant", "user"):
                    pools[kind].append(line)
                elif kind == "system" and subtype in ("hook_started", "hook_response", "task_progress"):
                    pools["other"].append(line)
    if not init:  # no captures: lines of the same shape
        session = '"session_id":"00000000-0000-0000-0000-000000000000"'
        init = '{"type":"system","subtype":"init",%s}\n' % session
        pools["assistant"] = [
            '{"type":"assistant","message":{"content":[{"type":"text","text":"working on %d"}]},'
            '"parent_tool_use_id":null,%s}\n' % (n, session)
            for n in range(50)
        ]
        pools["user"] = [
            '{"type":"user","message":{"content":[{"type":"tool_result","content":"%s"}]},'
            '"parent_tool_use_id":null,%s}\n' % ("x" * 400, session)
        ]
        pools["other"] = ['{"type":"system","subtype":"hook_started","hook_event":"PreToolUse",%s}\n' % session]
        stop = '{"type":"system","subtype":"hook_response","hook_event":"Stop","output":"{}","exit_code":0}\n'
        result = '{"type":"result","subtype":"success","result":"done","total_cost_usd":0.01,%s}\n' % session
    text = next(line for line in pools["assistant"] if '"parent_tool_use_id":null' in line and '"text"' in line)
    rng = random.Random(1)
    with open(path, "w") as handle:
        handle.write(init)
        for _ in range(count - 4):
            roll = rng.random()
            pool = pools["assistant"] if roll < 0.55 else pools["user"] if roll < 0.8 else pools["other"]
            handle.write(rng.choice(pool))
        handle.write(text)
        handle.write(stop)
        handle.write(result)


def main() -> None:
    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        lines = os.path.join(work, "lines.txt")
        with open(lines, "w") as handle:
            for n in range(1_000_000):
                handle.write(f'{{"type":"assistant","n":{n},"text":"a line of agent output"}}\n')
        mix = os.path.join(work, "claude.jsonl")
        claude_mix(mix, 1_000_000)
        big = os.path.join(work, "big.txt")
        with open(big, "w") as handle:
            handle.write("x" * (5 << 20) + "\n")
        stream = os.path.join(work, "kept", "stream.out")
        start_proctor = proctor_start()
        print(f"containment: {runner.containment()}")
        print(f"proctor --version (median of 5): {start_proctor * 1000:.1f} ms")
        print(
            f"\nstreaming through the runner (median of {RUNS} rounds; each ratio the median of the rounds' "
            f"own, against baselines measured in the same round; `kept`: the stream kept in a file, as `proctor "
            f"work` keeps it, in {os.path.dirname(stream)}):"
        )
        limits = runner.Limits(idle=600, grace=60)
        cases = (
            ("1,000,000 short lines, command parser", lines, command.Parser),
            ("1,000,000 Claude lines, claude parser", mix, claude.Parser),
            ("one 5 MB line, command parser", big, command.Parser),
        )
        for name, path, parser in cases:
            size = os.path.getsize(path)
            rounds = []  # baselines and runs interleaved, round by round: the machine's drift hits both
            for _ in range(RUNS):
                devnull, cat_cat, piped, to_file = cat_baselines(path, stream + ".cat")
                bare = timed_run(["cat", path], limits, parser())
                kept = timed_run(["cat", path], limits, parser(), stream)
                rounds.append((devnull, cat_cat, piped, to_file, bare[0], kept[0]))
                attempt = kept[1]
                assert attempt.lines == (1 if path == big else 1_000_000), attempt.lines
                if parser is claude.Parser:
                    assert attempt.reply and attempt.reply_kind == "success", (attempt.reply, attempt.reply_kind)
            devnull, cat_cat, piped, to_file, bare_time, kept_time = (
                statistics.median(r[i] for r in rounds) for i in range(6)
            )
            bare_ratio = statistics.median(r[4] / r[1] for r in rounds)
            kept_ratio = statistics.median(r[5] / r[1] for r in rounds)
            kept_file_ratio = statistics.median(r[5] / r[3] for r in rounds)
            print(f"  {name} ({size / 1e6:.0f} MB)")
            print(
                f"    cat > /dev/null {devnull * 1000:7.1f} ms   cat | cat {cat_cat * 1000:7.1f} ms   "
                f"cat | python readline {piped * 1000:7.1f} ms   cat | cat > file {to_file * 1000:7.1f} ms"
            )
            print(
                f"    runner          {bare_time * 1000:7.1f} ms   {bare_ratio:.2f}x cat | cat   "
                f"{bare_time / piped:.2f}x the Python reader   {bare_time / start_proctor:.2f}x proctor --version"
            )
            print(
                f"    runner, kept    {kept_time * 1000:7.1f} ms   {kept_ratio:.2f}x cat | cat   "
                f"{kept_file_ratio:.2f}x cat | cat > file   {kept_time / start_proctor:.2f}x proctor --version"
            )

        script = os.path.join(work, "silent.sh")
        with open(script, "w") as handle:
            handle.write("#!/bin/sh\necho started\n(trap '' TERM; sleep 300) &\nsleep 300\n")
        os.chmod(script, 0o755)
        idle = 1.0
        gone = []
        for _ in range(5):
            start = time.time()
            _elapsed, attempt = timed_run([script], runner.Limits(idle=idle, grace=60))
            limit_at = start + idle
            gone.append(attempt.gone_at - limit_at)
            assert attempt.stop == "idle", attempt.reason
        print(
            f"\nidle stop, a grandchild ignoring SIGTERM: all gone {min(gone):.2f} to {max(gone):.2f} s after "
            f"the idle limit (5 runs)"
        )

        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        timed_run([script], runner.Limits(idle=5.0, grace=60))
        after = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.perf_counter() - start
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(
            f"runner CPU while its worker was silent for {wall:.1f} s: {cpu * 1000:.1f} ms "
            f"({cpu / wall * 100:.2f}% of one core)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
