"""Benchmark: what the sandbox costs a target run.

    python bench/sandbox.py

`proctor run noop --lease plan/c` (a target that runs `true`) in a real repository, with
`[sandbox] mode = "off"` and `"landlock"`, interleaved, median of BENCH_RUNS real processes
each; and, in this process, building a grant and its Landlock rules (sandbox.plan + Ruleset)
for a checkout whose parent directory holds 10, 1,000 and 10,000 siblings (every entry beside
the path from / to the checkout is a rule). Baselines from the same run: `proctor --version`,
and the mode-off run. Needs a kernel with Landlock.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from _common import commit_all, isolated_env, timed_proctor as proctor

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from proctor import sandbox  # noqa: E402


def main() -> None:
    abi = sandbox.kernel_abi()
    if not abi:
        raise SystemExit("this kernel offers no Landlock: nothing to measure")
    work = tempfile.mkdtemp(prefix="proctor-bench-sandbox-")
    try:
        root = os.path.join(work, "repo")
        os.makedirs(os.path.join(root, "src"))
        for n in range(200):
            with open(os.path.join(root, "src", f"m{n}.py"), "w") as handle:
                handle.write(f"x = {n}\n")
        config = '[targets.noop]\ncommand = "true"\n\n[sandbox]\nmode = "{mode}"\n'
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write(config.format(mode="off"))
        env = isolated_env(work)
        commit_all(root, env)
        proctor(root, env, "job", "fork", "--stdin", data=json.dumps({"id": "plan", "criteria": "p", "check": "noop"}))
        proctor(
            root,
            env,
            "job",
            "fork",
            "--stdin",
            data=json.dumps(
                {"id": "plan/c", "parent": "plan", "criteria": "c", "check": "noop", "write_paths": ["src/m1*.py"]}
            ),
        )
        samples: dict[str, list[float]] = {"version": [], "off": [], "landlock": []}
        for _ in range(RUNS):
            samples["version"].append(proctor(root, env, "--version"))
            for mode in ("off", "landlock"):
                with open(os.path.join(root, "proctor.toml"), "w") as handle:
                    handle.write(config.format(mode=mode))
                samples[mode].append(proctor(root, env, "run", "noop", "--lease", "plan/c", "-o", "json"))
        med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
        print(f"proctor sandbox: Landlock ABI {abi}; {os.cpu_count()} CPUs; median of {RUNS} real processes each")
        print(f"  proctor --version (baseline)            {med['version']:8.1f} ms")
        print(f"  proctor run noop, [sandbox] mode off    {med['off']:8.1f} ms")
        print(
            f"  proctor run noop, mode landlock         {med['landlock']:8.1f} ms   "
            f"{med['landlock'] / med['off']:.2f}x mode off (+{med['landlock'] - med['off']:.1f} ms)"
        )

        print("\ngrant + rules in this process (sandbox.plan + Ruleset), by the checkout's siblings:")
        job = {"id": "plan/c", "parent": "plan", "state": "running", "write_paths": ["src/m1*.py"]}
        for siblings in (10, 1000, 10000):
            parent = os.path.join(work, f"parent{siblings}")
            os.makedirs(parent)
            for n in range(siblings):
                open(os.path.join(parent, f"s{n}"), "w").close()
            checkout = os.path.join(parent, "repo")
            shutil.copytree(root, checkout, symlinks=True)
            times, rules = [], 0
            for _ in range(RUNS):
                start = time.perf_counter()
                grant = sandbox.plan(job, checkout, os.path.join(work, "cache"))
                ruleset = sandbox.Ruleset(grant, abi)
                times.append(time.perf_counter() - start)
                rules = ruleset.rules
                ruleset.close()
                grant.cleanup()
            print(f"  {siblings:>6} siblings: {statistics.median(times) * 1000:8.2f} ms ({rules} rules)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
