"""Benchmark: `proctor job wait` on a job whose diff touches 2,000 files, beside
`git diff --name-only` and `git diff --stat` of the same tree; and `proctor run` of a target
printing 50 MB, beside `cat` of the same bytes. Medians of real processes, one run.

    python bench/verify_and_run.py
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
FILES = 2000
BIG_MB = 50


def proctor_argv() -> list[str]:
    exe = shutil.which("proctor", path=os.path.dirname(sys.executable)) or shutil.which("proctor")
    return [exe] if exe else [sys.executable, "-m", "proctor"]


def sh(argv, cwd, env, stdin=None, out=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, input=stdin, stdout=out, stderr=subprocess.PIPE)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()}")
    return proc


def clock(argv, cwd, env, out=subprocess.DEVNULL) -> float:
    start = time.perf_counter()
    sh(argv, cwd, env, out=out)
    return time.perf_counter() - start


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import commit_all, isolated_env

    argv = proctor_argv()
    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        root = os.path.join(work, "repo")
        os.makedirs(os.path.join(root, "src"))
        env = isolated_env(work)
        big = os.path.join(work, "big.txt")
        with open(big, "wb") as handle:
            line = b"benchmark output line, long enough to look like a test log entry: ok\n"
            handle.write(line * (BIG_MB * 1024 * 1024 // len(line)))
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write(f"[targets.check]\ncommand = 'true'\n[targets.big]\ncommand = 'cat {big}'\n")
        for n in range(FILES):
            with open(os.path.join(root, "src", f"m{n:04d}.py"), "w") as handle:
                handle.write("".join(f"value_{i} = {i}\n" for i in range(40)))
        commit_all(root, env)
        base = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, env=env, capture_output=True, text=True
        ).stdout.strip()
        for n in range(FILES):
            with open(os.path.join(root, "src", f"m{n:04d}.py"), "a") as handle:
                handle.write(f"added_{n} = True\n")
        changed = [f"src/m{n:04d}.py" for n in range(FILES)]

        names = statistics.median(clock(["git", "diff", "--name-only", base], root, env) for _ in range(RUNS))
        stat = statistics.median(clock(["git", "diff", "--stat", base], root, env) for _ in range(RUNS))
        waits = []
        for n in range(RUNS):
            job = f"bench/w{n}"
            sh(
                [*argv, "job", "fork", job, "--check", "check", "--write-paths", "src/**", "--checkpoint", base],
                root,
                env,
            )
            sh([*argv, "job", "exec", job], root, env)
            made = json.loads(sh([*argv, "run", "check", "-o", "json"], root, env, out=subprocess.PIPE).stdout)
            result = json.dumps(
                {
                    "schema_version": 2,
                    "changed_paths": changed,
                    "status": "done",
                    "validation": [{"run": made["id"], "output_ref": made["output_ref"]}],
                }
            ).encode()
            sh([*argv, "job", "exit", job, "--stdin"], root, env, stdin=result)
            start = time.perf_counter()
            verdict = sh([*argv, "job", "wait", job], root, env)
            waits.append(time.perf_counter() - start)
            if verdict.returncode != 0:
                raise SystemExit(f"wait did not pass: {verdict.stderr.decode()}")
        wait = statistics.median(waits)
        print(f"job wait, {FILES} files changed (median of {RUNS}):")
        print(f"  git diff --name-only  {names * 1000:8.1f} ms")
        print(f"  git diff --stat       {stat * 1000:8.1f} ms")
        print(
            f"  proctor job wait      {wait * 1000:8.1f} ms   {wait / names:.2f}x name-only, {wait / stat:.2f}x --stat"
        )

        version = statistics.median(clock([*argv, "--version"], root, env) for _ in range(RUNS))
        cat = statistics.median(clock(["cat", big], root, env) for _ in range(RUNS))
        shell_cat = statistics.median(clock(["/bin/sh", "-c", f"cat {big}"], root, env) for _ in range(RUNS))
        runs = statistics.median(clock([*argv, "run", "big"], root, env) for _ in range(RUNS))
        print(f"\nproctor run of a target printing {BIG_MB} MB to a pipe (median of {RUNS}):")
        print(f"  cat                   {cat * 1000:8.1f} ms")
        print(f"  sh -c cat             {shell_cat * 1000:8.1f} ms")
        print(f"  proctor --version     {version * 1000:8.1f} ms   (startup alone)")
        print(
            f"  proctor run big       {runs * 1000:8.1f} ms   {runs / cat:.2f}x cat; recording overhead "
            f"beyond startup {(runs - version) / cat:.2f}x cat"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
