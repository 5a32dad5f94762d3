"""Benchmark: the worker runner's stream handling and its idle stop.

1. One million lines, and separately one 5 MB line, streamed by a worker through the runner
   (the `command` executor's parser), beside `cat` of the same bytes into a pipe read by a
   plain Python reader, and beside `cat` to /dev/null.
2. How long after the idle limit the worker's process group is gone, for a silent worker
   whose grandchild ignores SIGTERM.
3. The runner's CPU while its worker is silent.

    python bench/work.py
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import tempfile
import time

from proctor.workers import runner
from proctor.workers.executors import command


def timed_run(argv, limits) -> tuple[float, runner.Attempt]:
    start = time.perf_counter()
    attempt = runner.run_attempt(argv, command.Parser(), limits, os.getcwd(), dict(os.environ))
    return time.perf_counter() - start, attempt


def cat_baselines(path: str) -> tuple[float, float]:
    start = time.perf_counter()
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)
    devnull = time.perf_counter() - start
    start = time.perf_counter()
    proc = subprocess.Popen(["cat", path], stdout=subprocess.PIPE)
    for _line in proc.stdout:
        pass
    proc.wait()
    return devnull, time.perf_counter() - start


def main() -> None:
    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        lines = os.path.join(work, "lines.txt")
        with open(lines, "w") as handle:
            for n in range(1_000_000):
                handle.write(f'{{"type":"assistant","n":{n},"text":"a line of agent output"}}\n')
        big = os.path.join(work, "big.txt")
        with open(big, "w") as handle:
            handle.write("x" * (5 << 20) + "\n")
        limits = runner.Limits(idle=600, grace=60)
        print("streaming through the runner (median of 3):")
        for name, path in (("1,000,000 lines", lines), ("one 5 MB line", big)):
            devnull, piped = min(cat_baselines(path) for _ in range(3))
            samples = sorted(timed_run(["cat", path], limits)[0] for _ in range(3))
            median = samples[1]
            print(f"  {name:<16} cat>/dev/null {devnull * 1000:7.1f} ms   cat|python readline {piped * 1000:7.1f} ms   "
                  f"runner {median * 1000:7.1f} ms   {median / piped:.2f}x the piped read, {median / devnull:.1f}x cat")

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
        print(f"\nidle stop, a grandchild ignoring SIGTERM: group gone {min(gone):.2f} to {max(gone):.2f} s after "
              f"the idle limit (5 runs)")

        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        timed_run([script], runner.Limits(idle=5.0, grace=60))
        after = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.perf_counter() - start
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"runner CPU while its worker was silent for {wall:.1f} s: {cpu * 1000:.1f} ms "
              f"({cpu / wall * 100:.2f}% of one core)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
