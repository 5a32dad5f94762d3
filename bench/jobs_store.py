"""Benchmark: `proctor ls jobs -o json` and `proctor job fork` with 100, 1,000 and 10,000 live
jobs, each beside a bare `proctor --version` measured in the same run.

    python bench/jobs_store.py            # all three sizes
    python bench/jobs_store.py 1000       # one size

Each figure is the median wall time of real `proctor` processes. The store is filled through
proctor's own fork (one process, many calls), in a real git repository in a temp dir.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _common import commit_all, isolated_env  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "9"))


def proctor_argv() -> list[str]:
    exe = shutil.which("proctor", path=os.path.dirname(sys.executable)) or shutil.which("proctor")
    return [exe] if exe else [sys.executable, "-m", "proctor"]


def timed(argv: list[str], cwd: str, env: dict, runs: int = RUNS) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        samples.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode()}")
    return statistics.median(samples)


def fill(root: str, count: int) -> None:
    """`count` live jobs: roots of ten, children in their own dirs, some sharing a file."""
    from proctor.jobs import fork as jfork
    from proctor.jobs.lease import Caller
    from proctor.workspace import Workspace
    from proctor.vcs import checkpoint

    ws = Workspace(root, warn=lambda line: None)
    token = checkpoint.take(root).name
    caller = Caller(None, None, "bench")
    for n in range(count):
        group, member = divmod(n, 10)
        if member == 0:
            record = {"id": f"g{group}", "check": "test", "checkpoint": token, "criteria": "orchestrate"}
        else:
            shared = f"pkg{group % 50}/common.py" if member == 9 else f"pkg{group % 50}/m{group}/f{member}.py"
            record = {
                "id": f"g{group}/j{member}",
                "parent": f"g{group}",
                "check": "test",
                "checkpoint": token,
                "criteria": f"job {n}",
                "write_paths": [shared, f"pkg{group % 50}/m{group}/t{member}_test.py"],
            }
        jfork.fork(ws, record, caller)
    ws.close()


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [100, 1000, 10000]
    argv = proctor_argv()
    print(f"proctor: {' '.join(argv)}; median of {RUNS} runs each\n")
    print(
        f"{'live jobs':>10}  {'--version':>10}  {'ls jobs -o json':>16}  {'ratio':>6}  {'job fork':>10}  {'ratio':>6}"
    )
    for size in sizes:
        work = tempfile.mkdtemp(prefix="proctor-bench-")
        try:
            root = os.path.join(work, "repo")
            os.makedirs(root)
            env = isolated_env(work, PROCTOR_BUSY_TIMEOUT="60")
            with open(os.path.join(root, "proctor.toml"), "w") as handle:
                handle.write("[targets.test]\ncommand = 'true'\n")
            commit_all(root, env)
            os.environ.update({k: env[k] for k in ("PROCTOR_STATE_DIR", "XDG_CACHE_HOME")})
            started = time.perf_counter()
            fill(root, size)
            filled = time.perf_counter() - started
            version = timed([*argv, "--version"], root, env)
            listing = timed([*argv, "ls", "jobs", "-o", "json"], root, env)
            fork_samples = []
            for n in range(RUNS):
                start = time.perf_counter()
                subprocess.run(
                    [*argv, "job", "fork", f"bench/new{n}", "--check", "test", "--write-paths", f"new/{n}.py"],
                    cwd=root,
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                fork_samples.append(time.perf_counter() - start)
            forking = statistics.median(fork_samples)
            print(
                f"{size:>10}  {version * 1000:>8.1f}ms  {listing * 1000:>14.1f}ms  {listing / version:>5.2f}x"
                f"  {forking * 1000:>8.1f}ms  {forking / version:>5.2f}x   (filled in {filled:.1f}s)"
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
