"""Benchmark: the hook on a 300 MB Claude Code transcript built from real line shapes.

It runs the hook once to take the checkpoint (timed beside `cat` of the same file), appends a
few lines, and times the next call beside the same call on a 10 KB transcript, in the same
run. Medians of real `proctor hook claude` processes.

    python bench/transcript.py            # 300 MB
    BENCH_MB=50 python bench/transcript.py
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MB = int(os.environ.get("BENCH_MB", "300"))
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
FIXTURES = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "fixtures", "claude", "transcripts"
)


def real_lines() -> list[bytes]:
    lines = []
    for name in sorted(os.listdir(FIXTURES)):
        with open(os.path.join(FIXTURES, name), "rb") as handle:
            lines.extend(line.rstrip(b"\n") for line in handle if line.strip())
    return lines


def build(path: str, size: int, lines: list[bytes]) -> None:
    written, n = 0, 0
    with open(path, "wb") as out:
        while written < size:
            for line in lines:
                # keep the shapes, vary the ids so every cycle is a new part of the session
                data = line.replace(b'"uuid":"', b'"uuid":"c%d-' % n) + b"\n"
                out.write(data)
                written += len(data)
            n += 1


def timed(argv, data, env, cwd) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    return elapsed


def main() -> None:
    import proctor
    from _common import commit_all, isolated_env

    if not os.path.isdir(FIXTURES):
        raise SystemExit(f"fixtures not found at {FIXTURES}")
    compileall.compile_dir(os.path.dirname(proctor.__file__), quiet=1)
    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        root = os.path.join(work, "repo")
        os.makedirs(root)
        env = isolated_env(work)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        commit_all(root, env)
        lines = real_lines()
        big, small = os.path.join(work, "big.jsonl"), os.path.join(work, "small.jsonl")
        build(big, MB << 20, lines)
        build(small, 10 << 10, lines)
        hook = [sys.executable, "-m", "proctor", "hook", "claude"]

        def event(transcript: str) -> bytes:
            return json.dumps(
                {
                    "session_id": "bench",
                    "transcript_path": transcript,
                    "cwd": root,
                    "hook_event_name": "PreToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": "make build > out.txt"},
                }
            ).encode()

        cat = statistics.median(timed(["cat", big], None, env, root) for _ in range(3))
        first = timed(hook, event(big), env, root)
        timed(hook, event(small), env, root)
        appended = b"".join(line + b"\n" for line in lines[:5])
        big_samples, small_samples = [], []
        for _ in range(RUNS):
            for path, samples in ((big, big_samples), (small, small_samples)):
                with open(path, "ab") as handle:
                    handle.write(appended)
                samples.append(timed(hook, event(path), env, root))
        big_next, small_next = statistics.median(big_samples), statistics.median(small_samples)
        print(f"transcript of {os.path.getsize(big) / (1 << 20):.0f} MB ({len(lines)} real line shapes, cycled):")
        print(f"  cat of the file            {cat * 1000:8.1f} ms")
        print(f"  first hook call            {first * 1000:8.1f} ms   {first / cat:.2f}x cat")
        print(f"next call after appending 5 lines (median of {RUNS}):")
        print(f"  on the 10 KB transcript    {small_next * 1000:8.1f} ms")
        print(f"  on the {MB} MB transcript   {big_next * 1000:8.1f} ms   {big_next / small_next:.2f}x the 10 KB call")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
