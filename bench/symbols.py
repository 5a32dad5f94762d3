"""Benchmark: symbol goals on a real tree, beside `git grep -w` of the same name.

    python bench/symbols.py

The tree is the standard library of the Python that runs proctor (its .py files, about
2,000), committed in a scratch repository. Measured in one run, median of BENCH_RUNS:
- the baseline, `git grep -w -l NAME` in that repository (a process, as proctor's own git is),
  interleaved with the warm check;
- a goal check (`absent`, `unreferenced`) cold (an empty cache: what the question needs is
  parsed), then warm (a new Index on the cache the cold one left), then warm after one file
  that names the symbol changed (that file re-parsed);
- for scale, a cold index of every file (what a question that needed all of them would pay).
Ratios are against `git grep -w` of the same name.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

from _common import commit_all, isolated_env

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

NAMES = [("OrderedDict", "unreferenced"), ("SequenceMatcher", "unreferenced"), ("NoSuchSymbolAnywhere", "absent")]


def copy_stdlib(dest: str) -> int:
    lib = sysconfig.get_paths()["stdlib"]
    count = 0
    for dirpath, dirnames, filenames in os.walk(lib):
        dirnames[:] = [d for d in dirnames if d not in ("site-packages", "__pycache__")]
        for name in filenames:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, name), lib)
                os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
                shutil.copyfile(os.path.join(dirpath, name), os.path.join(dest, rel))
                count += 1
    return count


def median(fn, runs: int = RUNS) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    work = tempfile.mkdtemp(prefix="proctor-bench-symbols-")
    try:
        env = isolated_env(work)
        os.environ.update({k: env[k] for k in ("PROCTOR_STATE_DIR", "XDG_CACHE_HOME")})
        root = os.path.join(work, "stdlib")
        os.makedirs(root)
        files = copy_stdlib(root)
        commit_all(root, env)
        from proctor.symbols import goals
        from proctor.symbols.index import Index, blob_id
        from proctor.symbols import languages

        print(f"tree: {files} .py files of {sysconfig.get_paths()['stdlib']}, median of {RUNS} runs")
        print(
            f"{'name':<22} {'expect':<13} {'git grep -w':>12} {'cold':>10} {'warm':>10} {'1 changed':>10}"
            f" {'warm/grep':>10} {'parsed cold':>12}"
        )
        for name, expect in NAMES:
            goal = {"symbols": [name], "expect": expect}
            shutil.rmtree(os.path.join(work, "cache"), ignore_errors=True)
            start = time.perf_counter()
            with Index(root) as index:
                cold_result = goals.grade(index, goal)
                parsed = index.parsed
            cold = time.perf_counter() - start

            def warm_check():
                with Index(root) as warm:
                    result = goals.grade(warm, goal)
                    assert warm.parsed == 0, "a warm check parses nothing"
                    assert result == cold_result

            # the stat records of files changed under RACY_SECONDS ago are not kept: let them age
            time.sleep(2.2)
            warm_check()
            # interleaved with the baseline, so a busy moment weighs on both alike
            pairs = [
                (
                    median(lambda: subprocess.run(["git", "grep", "-w", "-l", name], cwd=root, capture_output=True), 1),
                    median(warm_check, 1),
                )
                for _ in range(RUNS)
            ]
            grep = statistics.median(p[0] for p in pairs)
            warm = statistics.median(p[1] for p in pairs)
            target = None
            hits = subprocess.run(["git", "grep", "-l", "-w", name], cwd=root, capture_output=True, text=True).stdout
            target = (hits.split() or ["string.py"])[0]
            counter = [0]

            def changed_check():
                counter[0] += 1
                with open(os.path.join(root, target), "a") as handle:
                    handle.write(f"\n_bench_{counter[0]} = {counter[0]}\n")
                with Index(root) as changed:
                    goals.grade(changed, goal)
                    assert changed.parsed <= 1, changed.parsed

            changed = median(changed_check, max(3, RUNS // 3))
            subprocess.run(["git", "checkout", "-q", "--", target], cwd=root, check=True)
            print(
                f"{name:<22} {expect:<13} {grep * 1000:>10.1f}ms {cold * 1000:>8.0f}ms {warm * 1000:>8.1f}ms "
                f"{changed * 1000:>8.1f}ms {warm / grep:>9.2f}x {parsed:>12}"
            )
        # for scale: every file parsed, as a question needing all of them would
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True).stdout.split(b"\0")
        start = time.perf_counter()
        for path in listed:
            if path.endswith(b".py"):
                with open(os.path.join(root, path.decode()), "rb") as handle:
                    data = handle.read()
                languages.summarize(data, "python")
                blob_id(data)
        print(f"a cold summary of every file (for scale): {time.perf_counter() - start:.1f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
