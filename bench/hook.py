"""Benchmark: `proctor hook claude` on a PreToolUse Bash event and a Write event, with a live
lease and 1,000 jobs in the store, beside a bare interpreter start (`python -I -S -c pass`),
interleaved in the same run. Medians of real processes.

    python bench/hook.py                      # this checkout
    BENCH_AGAINST=<revision> python bench/hook.py   # and that revision's hook, in the same run

The hook runs from a NON-editable install of this checkout in a scratch venv, as a worker's
pinned hook runs it (`python -I -m proctor hook claude`); the editable venv's own start, which
its import finder inflates, is shown beside it. With BENCH_AGAINST the hook of another
revision (git archive, installed the same way) is measured in the same interleaved runs, so
a change's cost shows as a ratio that machine load cannot fake. Needs the package registry for
setuptools (pip's build isolation).
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

RUNS = int(os.environ.get("BENCH_RUNS", "41"))
JOBS = 1000


def install(source: str, venv: str) -> str:
    """A non-editable install of `source` in a new venv; its python, byte-compiled."""
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", source], check=True, stdout=subprocess.DEVNULL)
    return python


def export(revision: str, target: str) -> str:
    """`revision` of this repository as a source tree (git archive)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(target)
    archive = subprocess.run(["git", "archive", revision], cwd=here, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", target], input=archive, check=True)
    return target


def main() -> None:
    from _common import commit_all, isolated_env

    work = tempfile.mkdtemp(prefix="proctor-bench-")
    try:
        print("installing proctor (non-editable) in scratch venvs ...", file=sys.stderr)
        pythons = {
            "this checkout": install(export("HEAD", os.path.join(work, "src-head")), os.path.join(work, "v-head"))
        }
        if (
            subprocess.run(
                ["git", "diff", "--quiet", "HEAD", "--", "proctor"],
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            ).returncode
            != 0
        ):
            print("note: proctor/ has uncommitted changes; HEAD is what is measured", file=sys.stderr)
        against = os.environ.get("BENCH_AGAINST")
        if against:
            pythons[against] = install(
                export(against, os.path.join(work, "src-against")), os.path.join(work, "v-against")
            )
        root = os.path.join(work, "repo")
        os.makedirs(root)
        env = isolated_env(work)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write("[targets.test]\ncommand = 'true'\n")
        commit_all(root, env)
        lease = "g3/j1"  # writes pkg3/m3/f1.py
        env["BAGGAGE"] = f"proctor.lease={lease}"
        base = {
            "session_id": "bench",
            "transcript_path": "/tmp/x.jsonl",
            "cwd": root,
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_use_id": "toolu_1",
        }
        events = {
            "Bash": {
                **base,
                "tool_name": "Bash",
                "tool_input": {"command": "python -m pytest -q pkg3/m3 > pkg3/m3/t1_test.log 2>&1", "timeout": 120000},
            },
            "Write": {
                **base,
                "tool_name": "Write",
                "tool_input": {"file_path": os.path.join(root, "pkg3/m3/f1.py"), "content": "x = 1\n"},
            },
        }
        runs: dict[str, tuple[list[str], bytes | None, dict]] = {
            "python -I -S -c pass": ([sys.executable, "-I", "-S", "-c", "pass"], None, env),
            "editable venv: python -c pass": ([sys.executable, "-c", "pass"], None, env),
        }
        bench_dir = os.path.dirname(os.path.abspath(__file__))
        for index, (label, python) in enumerate(pythons.items()):
            # each revision its own cache and its own store, filled by its own code: their settings
            # caches differ in format, and a revision cannot read a store of a newer schema (it
            # would judge nothing and look fast)
            own = {
                **env,
                "XDG_CACHE_HOME": os.path.join(work, f"cache-{index}"),
                "PROCTOR_STATE_DIR": os.path.join(work, f"state-{index}"),
            }
            subprocess.run(
                [
                    python,
                    "-I",
                    "-c",
                    f"import sys; sys.path.insert(0, {bench_dir!r}); "
                    f"from jobs_store import fill; fill({root!r}, {JOBS})",
                ],
                env=own,
                cwd=root,
                check=True,
            )
            for name, payload in events.items():
                runs[f"{label}: {name}"] = (
                    [python, "-I", "-m", "proctor", "hook", "claude"],
                    json.dumps(payload).encode(),
                    own,
                )
        decisions = {}
        for name, (argv, data, run_env) in runs.items():  # warm the caches, and see the answers
            proc = subprocess.run(argv, input=data, capture_output=True, env=run_env, cwd=root)
            assert proc.returncode == 0, proc.stderr
            if data is not None:
                answer = json.loads(proc.stdout)
                decisions[name] = answer.get("hookSpecificOutput", {}).get("permissionDecision") or (
                    "advise" if answer else "pass"
                )
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(RUNS):
            for name, (argv, data, run_env) in runs.items():
                start = time.perf_counter()
                subprocess.run(argv, input=data, stdout=subprocess.DEVNULL, env=run_env, cwd=root, check=True)
                samples[name].append(time.perf_counter() - start)
        baseline = statistics.median(samples["python -I -S -c pass"])
        print(
            f"proctor hook claude (python -I -m proctor, non-editable install), {JOBS} jobs in the store, "
            f"a live lease; median of {RUNS} interleaved runs:"
        )
        for name in runs:
            median = statistics.median(samples[name])
            line = f"  {name:<34} {median * 1000:7.1f} ms   {median / baseline:5.2f}x python -I -S -c pass"
            if name in decisions:
                line += f"   ({decisions[name]})"
            if against and name.startswith("this checkout: "):
                other = statistics.median(samples[f"{against}: {name.split(': ', 1)[1]}"])
                line += f"   {median / other:5.2f}x {against}"
            print(line)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
