"""Benchmark: what the store broker costs a sandboxed worker's proctor commands.

    python bench/broker.py

A sandboxed worker's `proctor` hands its command to the broker of its attempt, which starts it
in the worker's grant (proctor/broker.py): one more interpreter start per command. Measured in
one run, interleaved, median of BENCH_RUNS real processes each, with 200 jobs in the store and
the worker's job plan/c holding src/m1*.py:

- `proctor hook claude` on a PreToolUse Write of the job's own file, run directly (as an
  unsandboxed worker's hook) and through a broker serving in this process, whose domain is
  the real one (`runs.sandboxed(..., worker=True)`, Landlock);
- `proctor ls jobs -o json`, the same two ways;
- `python -I -S -c pass`, the floor of any process.

Prints each median and the brokered/direct ratio. Needs a kernel with Landlock.
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

from _common import commit_all, isolated_env, timed_proctor as proctor

RUNS = int(os.environ.get("BENCH_RUNS", "21"))
JOBS = 200
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from proctor import broker, sandbox  # noqa: E402
from proctor.jobs import runs  # noqa: E402


def main() -> None:
    abi = sandbox.kernel_abi()
    if not abi:
        raise SystemExit("this kernel offers no Landlock: nothing to measure")
    work = tempfile.mkdtemp(prefix="proctor-bench-broker-")
    served = None
    try:
        root = os.path.join(work, "repo")
        os.makedirs(os.path.join(root, "src"))
        for n in range(50):
            with open(os.path.join(root, "src", f"m{n}.py"), "w") as handle:
                handle.write(f"x = {n}\n")
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write('[targets.noop]\ncommand = "true"\n\n[sandbox]\nmode = "landlock"\nworkers = true\n')
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
        for n in range(JOBS - 2):
            proctor(
                root,
                env,
                "job",
                "fork",
                "--stdin",
                data=json.dumps(
                    {"id": f"other{n}", "criteria": "o", "check": "noop", "write_paths": [f"src/m{2 + n % 40}.py"]}
                ),
            )
        env["BAGGAGE"] = "proctor.lease=plan/c"
        os.environ.update({k: env[k] for k in ("PROCTOR_STATE_DIR", "XDG_CACHE_HOME")})
        from proctor.workspace import Workspace

        ws = Workspace(root, warn=lambda line: None)
        boxed = runs.sandboxed(ws, "plan/c", extra_regions=tuple(broker.interpreter_regions()), worker=True)
        assert boxed is not None, "plan/c narrows nothing: the benchmark measures no sandbox"
        served = broker.Broker(
            broker.socket_for(ws.state_dir, "plan/c"), "plan/c", root, boxed, dict(env), lambda pid: True
        ).start()
        through = dict(env, **{broker.ENV: served.path})
        payload = json.dumps(
            {
                "session_id": "bench",
                "transcript_path": "/tmp/x.jsonl",
                "cwd": root,
                "permission_mode": "default",
                "hook_event_name": "PreToolUse",
                "tool_use_id": "t1",
                "tool_name": "Write",
                "tool_input": {"file_path": os.path.join(root, "src/m1.py"), "content": "x = 1\n"},
            }
        ).encode()
        hook = [sys.executable, "-m", "proctor", "hook", "claude"]
        ls = [sys.executable, "-m", "proctor", "ls", "jobs", "-o", "json"]
        cases = {
            "python -I -S -c pass": ([sys.executable, "-I", "-S", "-c", "pass"], None, env),
            "hook, direct": (hook, payload, env),
            "hook, through the broker": (hook, payload, through),
            "ls jobs, direct": (ls, None, env),
            "ls jobs, through the broker": (ls, None, through),
        }
        answers = {}
        for name, (argv, data, run_env) in cases.items():  # warm, and check both ways answer alike
            proc = subprocess.run(argv, input=data, capture_output=True, env=run_env, cwd=root)
            if proc.returncode != 0:
                raise SystemExit(f"{name} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
            answers[name] = proc.stdout
        assert answers["hook, direct"] == answers["hook, through the broker"], answers
        assert len(json.loads(answers["ls jobs, through the broker"])["jobs"]) == JOBS
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(RUNS):
            for name, (argv, data, run_env) in cases.items():
                start = time.perf_counter()
                subprocess.run(argv, input=data, stdout=subprocess.DEVNULL, env=run_env, cwd=root, check=True)
                samples[name].append(time.perf_counter() - start)
        med = {name: statistics.median(v) * 1000 for name, v in samples.items()}
        floor = med["python -I -S -c pass"]
        print(
            f"proctor broker: Landlock ABI {abi}; {os.cpu_count()} CPUs; {JOBS} jobs; "
            f"median of {RUNS} interleaved real processes each"
        )
        for name, value in med.items():
            line = f"  {name:<30} {value:8.1f} ms   {value / floor:5.2f}x python -I -S -c pass"
            if name.endswith("through the broker"):
                direct = med[name.replace("through the broker", "direct")]
                line += f"   {value / direct:5.2f}x direct (+{value - direct:.1f} ms)"
            print(line)
        print(f"  the broker served {served.served} commands, refused {len(served.refused)}")
    finally:
        if served is not None:
            served.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
