"""Benchmark: `proctor hook claude` on a PreToolUse Bash event and a Write event, with a live
lease and 1,000 jobs in the store, beside a bare interpreter start of the same venv
(`python -c pass`), interleaved in the same run. Medians of real processes.

    python bench/hook.py

The package is byte-compiled first and PYTHONDONTWRITEBYTECODE is cleared for the runs, as a
`pip install` leaves it: otherwise every run would compile proctor's sources again.
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

RUNS = int(os.environ.get("BENCH_RUNS", "41"))
JOBS = 1000


def main() -> None:
    import proctor
    from _common import commit_all, isolated_env
    from jobs_store import fill

    compileall.compile_dir(os.path.dirname(proctor.__file__), quiet=1)
    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        root = os.path.join(work, "repo")
        os.makedirs(root)
        env = isolated_env(work)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write("[targets.test]\ncommand = 'true'\n")
        commit_all(root, env)
        os.environ.update({k: env[k] for k in ("PROCTOR_STATE_DIR", "XDG_CACHE_HOME")})
        fill(root, JOBS)
        lease = "g3/j1"  # writes pkg3/m3/f1.py
        env["BAGGAGE"] = f"proctor.lease={lease}"
        base = {"session_id": "bench", "transcript_path": "/tmp/x.jsonl", "cwd": root, "permission_mode": "default",
                "hook_event_name": "PreToolUse", "tool_use_id": "toolu_1"}
        events = {
            "Bash": {**base, "tool_name": "Bash", "tool_input": {
                "command": "python -m pytest -q pkg3/m3 > pkg3/m3/t1_test.log 2>&1", "timeout": 120000}},
            "Write": {**base, "tool_name": "Write", "tool_input": {
                "file_path": os.path.join(root, "pkg3/m3/f1.py"), "content": "x = 1\n"}},
        }
        hook = [sys.executable, "-m", "proctor", "hook", "claude"]
        for payload in events.values():  # warm the settings cache, and check the answers
            proc = subprocess.run(hook, input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=root)
            assert proc.returncode == 0, proc.stderr
        samples: dict[str, list[float]] = {"python -c pass": [], "Bash": [], "Write": []}
        for _ in range(RUNS):
            for name in samples:
                argv = [sys.executable, "-c", "pass"] if name == "python -c pass" else hook
                data = None if name == "python -c pass" else json.dumps(events[name]).encode()
                start = time.perf_counter()
                subprocess.run(argv, input=data, stdout=subprocess.DEVNULL, env=env, cwd=root, check=True)
                samples[name].append(time.perf_counter() - start)
        baseline = statistics.median(samples["python -c pass"])
        print(f"proctor hook claude, {JOBS} jobs in the store, a live lease (median of {RUNS} runs):")
        print(f"  python -c pass        {baseline * 1000:7.1f} ms")
        for name in ("Bash", "Write"):
            median = statistics.median(samples[name])
            print(f"  PreToolUse {name:<6}     {median * 1000:7.1f} ms   {median / baseline:.2f}x interpreter start")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
