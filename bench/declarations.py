"""Benchmark: `proctor job wait` on a job whose diff touches 2,000 files, each claimed by
declaration (`src/mNNNN.py#f0`, the edit inside it), beside the same wait on a job claiming
`src/**`, `git diff --name-only` of the same tree (the issue's baseline), and `git diff -U0`
(the changed lines, which any footprint by declaration must read: the floor for this work).
Medians of real processes, one run.

    python bench/declarations.py
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

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
FILES = 2000


def main() -> None:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import commit_all, isolated_env
    from verify_and_run import clock, proctor_argv, sh

    argv = proctor_argv()
    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        root = os.path.join(work, "repo")
        os.makedirs(os.path.join(root, "src"))
        env = isolated_env(work)
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write("[targets.check]\ncommand = 'true'\n")
        body = "import os\n\n\n" + "".join(f"def f{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(8))
        for n in range(FILES):
            with open(os.path.join(root, "src", f"m{n:04d}.py"), "w") as handle:
                handle.write(body)
        commit_all(root, env)
        base = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, env=env, capture_output=True, text=True
        ).stdout.strip()
        for n in range(FILES):
            with open(os.path.join(root, "src", f"m{n:04d}.py"), "w") as handle:
                handle.write(body.replace("    y = x + 0\n", f"    y = x + 0 + {n}\n"))
        changed = [f"src/m{n:04d}.py" for n in range(FILES)]

        names = statistics.median(clock(["git", "diff", "--name-only", base], root, env) for _ in range(RUNS))
        hunks = statistics.median(clock(["git", "diff", "-U0", base], root, env) for _ in range(RUNS))
        version = statistics.median(clock([*argv, "--version"], root, env) for _ in range(RUNS))
        results = {}
        for label, paths in (("src/**", ["src/**"]), ("by declaration", [f"{p}#f0" for p in changed])):
            waits = []
            for n in range(RUNS):
                job = f"bench/{'d' if '#' in paths[0] else 'w'}{n}"
                record = {"id": job, "write_paths": paths, "check": "check", "checkpoint": base}
                sh([*argv, "job", "fork", "--stdin"], root, env, stdin=json.dumps(record).encode())
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
                verdict = sh([*argv, "job", "wait", job], root, env, out=subprocess.PIPE)
                waits.append(time.perf_counter() - start)
                if verdict.returncode != 0:
                    raise SystemExit(f"wait did not pass: {verdict.stdout.decode()[-2000:]}")
                if "#" in paths[0] and b"in def f0(x):" not in verdict.stdout:
                    raise SystemExit("the footprint does not name the declaration")
            results[label] = statistics.median(waits)
        print(f"job wait, {FILES} files changed (median of {RUNS}):")
        print(f"  git diff --name-only                 {names * 1000:8.1f} ms")
        print(f"  git diff -U0                         {hunks * 1000:8.1f} ms   {hunks / names:.2f}x name-only")
        print(f"  proctor --version (startup alone)    {version * 1000:8.1f} ms   {version / names:.2f}x name-only")
        for label, took in results.items():
            print(
                f"  proctor job wait, claims {label:<14} {took * 1000:8.1f} ms   {took / names:.2f}x name-only, "
                f"{took / hunks:.2f}x -U0"
            )
        print(
            f"  declarations cost                    "
            f"{(results['by declaration'] - results['src/**']) * 1000:8.1f} ms   "
            f"{results['by declaration'] / results['src/**']:.2f}x the same wait on src/**"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
