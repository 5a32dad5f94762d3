"""Benchmark: 100 monitors over 13 jobs, each printing 1,000 lines per run, on a real server.

Prints the event throughput beside `cat` of the same lines, the delay from a line being
printed to its event being stored, how close runs keep to their schedule under the
four-at-once cap, and the server's CPU while idle.

    python bench/server.py            # about a minute
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
import urllib.request

MONITORS, JOBS, LINES, SECONDS = 100, 13, 1000, int(os.environ.get("BENCH_SECONDS", "35"))


def cli(root, env, *args):
    return subprocess.run([sys.executable, "-m", "proctor", *args], cwd=root, env=env, capture_output=True,
                          text=True, check=True)


def clock_ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    from proctor.timeutil import parse_iso

    work = tempfile.mkdtemp(prefix="proctor-bench-")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _common import commit_all, isolated_env

    env = isolated_env(work)
    root = os.path.join(work, "repo")
    os.makedirs(root)
    printer = os.path.join(work, "print.py")
    with open(printer, "w") as handle:
        handle.write(f"import time, sys\nw = sys.stdout.write\nfor n in range({LINES}):\n    w(f'{{time.time():.6f}} {{n}}\\n')\n")
    try:
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write("[targets.t]\ncommand = 'true'\n")
        commit_all(root, env)
        for n in range(JOBS):
            cli(root, env, "job", "fork", f"card{n}", "--write-paths", f"f{n}.py", "--check", "t")
        # running, without binding this checkout: the orchestrator records the state
        for n in range(JOBS):
            subprocess.run([sys.executable, "-m", "proctor", "job", "fork", "--stdin"], cwd=root, env=env, check=True,
                           input=json.dumps({"id": f"card{n}", "write_paths": [f"f{n}.py"], "check": "t",
                                             "state": "running"}), capture_output=True, text=True)
        cli(root, env, "server", "start")
        status = json.loads(cli(root, env, "server", "status", "-o", "json").stdout)
        port, pid = int(status["console"].rsplit(":", 1)[1].strip("/")), status["pid"]
        token = open(status["token_path"]).read().strip()

        def call(method, path, body=None):
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                             data=json.dumps(body).encode() if body else None,
                                             headers={"Authorization": f"Bearer {token}",
                                                      "Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())

        started = time.time()
        for m in range(MONITORS):
            call("POST", "/api/v1/monitors", {"job": f"card{m % JOBS}", "command": f"{sys.executable} {printer}",
                                              "interval": "10s", "cwd": root, "allow_unsandboxed": True})
        time.sleep(SECONDS)
        ended = time.time()
        monitors = call("GET", "/api/v1/monitors")["monitors"]
        for monitor in monitors:
            call("DELETE", f"/api/v1/monitors/{monitor['id']}")
        time.sleep(15)  # the last events' 10 s grouping window closes before idle is measured
        import sqlite3
        from proctor.paths import find_checkout, repo_state_dir
        os.environ.update({"PROCTOR_STATE_DIR": env["PROCTOR_STATE_DIR"], "XDG_CACHE_HOME": env["XDG_CACHE_HOME"]})
        db = sqlite3.connect(os.path.join(repo_state_dir(find_checkout(root)), "proctor.db"))
        events = db.execute("SELECT time, line FROM monitor_events").fetchall()
        runs = db.execute("SELECT monitor, started, ended FROM monitor_runs ORDER BY monitor, id").fetchall()
        delays = sorted(parse_iso(stored) - float(line.split()[0]) for stored, line in events)
        window = max(parse_iso(e[0]) for e in events) - min(parse_iso(e[0]) for e in events)
        drift, previous = [], {}
        for monitor, run_start, run_end in runs:
            if monitor in previous and previous[monitor]:
                drift.append(parse_iso(run_start) - (parse_iso(previous[monitor]) + 10))
            previous[monitor] = run_end
        lines_file = os.path.join(work, "lines.txt")
        with open(lines_file, "w") as handle:
            for stored, line in events:
                handle.write(line + "\n")
        t = time.perf_counter()
        subprocess.run(["cat", lines_file], stdout=subprocess.DEVNULL, check=True)
        cat = time.perf_counter() - t
        before, t = clock_ticks(pid), time.time()
        time.sleep(10)
        idle_cpu = (clock_ticks(pid) - before) / (time.time() - t)
        print(f"{MONITORS} monitors over {JOBS} jobs, {LINES} lines a run, every 10 s, for {ended - started:.0f} s:")
        print(f"  events stored            {len(events)} in {window:.1f} s: {len(events) / window:,.0f} events/s "
              f"(cat of the same lines: {len(events) / cat:,.0f} lines/s)")
        print(f"  line printed -> stored   median {statistics.median(delays) * 1000:.0f} ms, "
              f"p95 {delays[int(len(delays) * 0.95)] * 1000:.0f} ms, max {delays[-1] * 1000:.0f} ms")
        print(f"  schedule drift           median {statistics.median(drift) * 1000:.0f} ms, "
              f"max {max(drift) * 1000:.0f} ms over {len(drift)} repeat runs (4 at once)")
        print(f"  idle CPU                 {idle_cpu * 100:.2f}% of one core over 10 s")
        cli(root, env, "server", "stop")
    finally:
        subprocess.run([sys.executable, "-m", "proctor", "server", "stop"], cwd=root, env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
