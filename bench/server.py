"""Benchmark: a real server under two loads, each figure beside a baseline measured in the same run.

Baselines, first: a bare `proctor --version` (median of 5), the API on the idle server (p50,
p95 of /api/v1/status and /api/v1/monitors), the idle server's CPU.

1. `yes` as a monitor (every 10 s; each run ends at its 10 s timeout), one per job on
   YES_JOBS jobs, on the fresh store: events stored per second, the store's growth per hour
   (extrapolated from the growth measured over the window after the first YES_WARMUP
   seconds, so the first fill of an empty store does not count), the API's p95 while it runs
   (beside the idle p95), schedule drift, and the server's CPU while it runs.
2. 100 monitors over 13 jobs, each printing 1,000 lines per run every 10 s: events stored per
   second (counted from the runs' records: past [monitors] max_waiting a job's oldest
   undelivered events are dropped), the delay from a line printed to its event stored, how
   close runs keep to their schedule under the four-at-once cap.
Then the idle CPU again, once every monitor is removed.

    python bench/server.py            # about four minutes
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

MONITORS, JOBS, LINES = 100, 13, 1000
SECONDS = int(os.environ.get("BENCH_SECONDS", "35"))
YES_SECONDS = int(os.environ.get("BENCH_YES_SECONDS", "140"))
YES_JOBS = int(os.environ.get("BENCH_YES_JOBS", "1"))
YES_WARMUP = 60.0  # seconds of `yes` before the store's growth is measured: its WAL is full-grown by then


def cli(root, env, *args):
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )


def clock_ticks(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


class Poller(threading.Thread):
    """Calls /api/v1/status and /api/v1/monitors in turn, five times a second, timing each."""

    def __init__(self, call) -> None:
        super().__init__(daemon=True)
        self.call, self.times, self.failures, self.stopping = call, [], 0, threading.Event()

    def run(self) -> None:
        paths = ("/api/v1/status", "/api/v1/monitors")
        n = 0
        while not self.stopping.is_set():
            started = time.perf_counter()
            try:
                self.call("GET", paths[n % 2])
                self.times.append(time.perf_counter() - started)
            except Exception:  # noqa: BLE001 - counted
                self.failures += 1
            n += 1
            self.stopping.wait(0.2)


def store_size(db: str) -> tuple[int, int]:
    """(the main file, its write-ahead log): SQLite reuses the log after each checkpoint, so it
    stays at the largest size it reached."""
    return tuple(os.path.getsize(db + suffix) if os.path.exists(db + suffix) else 0 for suffix in ("", "-wal"))


def drift_of(runs: list[tuple], interval: float = 10.0) -> list[float]:
    from proctor.timeutil import parse_iso

    drift, previous = [], {}
    for monitor, run_start, run_end in runs:
        if previous.get(monitor):
            drift.append(parse_iso(run_start) - (parse_iso(previous[monitor]) + interval))
        previous[monitor] = run_end
    return drift


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
        handle.write(
            f"import time, sys\nw = sys.stdout.write\nfor n in range({LINES}):\n    w(f'{{time.time():.6f}} {{n}}\\n')\n"
        )
    try:
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write("[targets.t]\ncommand = 'true'\n")
        commit_all(root, env)
        # running, without binding this checkout: the orchestrator records the state
        for n in range(max(JOBS, YES_JOBS)):
            subprocess.run(
                [sys.executable, "-m", "proctor", "job", "fork", "--stdin"],
                cwd=root,
                env=env,
                check=True,
                input=json.dumps({"id": f"card{n}", "write_paths": [f"f{n}.py"], "check": "t", "state": "running"}),
                capture_output=True,
                text=True,
            )
        version_times = []
        for _ in range(5):
            started = time.perf_counter()
            cli(root, env, "--version")
            version_times.append(time.perf_counter() - started)
        version = statistics.median(version_times)
        cli(root, env, "server", "start")
        status = json.loads(cli(root, env, "server", "status", "-o", "json").stdout)
        port, pid = int(status["console"].rsplit(":", 1)[1].strip("/")), status["pid"]
        token = open(status["token_path"]).read().strip()
        from proctor.paths import find_checkout, repo_state_dir

        os.environ.update({"PROCTOR_STATE_DIR": env["PROCTOR_STATE_DIR"], "XDG_CACHE_HOME": env["XDG_CACHE_HOME"]})
        db_path = os.path.join(repo_state_dir(find_checkout(root)), "proctor.db")

        def call(method, path, body=None):
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}",
                method=method,
                data=json.dumps(body).encode() if body else None,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read())

        def remove_all():
            for monitor in call("GET", "/api/v1/monitors")["monitors"]:
                call("DELETE", f"/api/v1/monitors/{monitor['id']}")

        def cpu_over(seconds: float) -> float:
            before, t = clock_ticks(pid), time.time()
            time.sleep(seconds)
            return (clock_ticks(pid) - before) / (time.time() - t)

        # -- baselines
        time.sleep(3)
        idle_poll = Poller(call)
        idle_poll.start()
        time.sleep(20)
        idle_poll.stopping.set()
        idle_poll.join()
        api_p50, api_p95 = statistics.median(idle_poll.times), pct(idle_poll.times, 0.95)
        idle_before = cpu_over(30)

        # -- 1. yes, on the fresh store
        yes_started = time.time()
        poll = Poller(call)
        poll.start()
        for n in range(YES_JOBS):
            call(
                "POST",
                "/api/v1/monitors",
                {"job": f"card{n}", "command": "yes", "interval": "10s", "cwd": root, "allow_unsandboxed": True},
            )
        time.sleep(YES_WARMUP)
        size_from, ticks_from, t_from = store_size(db_path), clock_ticks(pid), time.time()
        time.sleep(max(10.0, YES_SECONDS - YES_WARMUP))
        size_to, ticks_to, t_to = store_size(db_path), clock_ticks(pid), time.time()
        poll.stopping.set()
        poll.join()
        remove_all()
        time.sleep(12)
        db = sqlite3.connect(db_path)
        yes_runs = db.execute(
            "SELECT monitor, started, ended, lines, timed_out FROM monitor_runs ORDER BY monitor, id"
        ).fetchall()
        waiting = db.execute(
            "SELECT COUNT(*), MAX(bytes), MAX(events) FROM followups WHERE delivered IS NULL"
        ).fetchone()
        kept = db.execute("SELECT COUNT(*) FROM monitor_events").fetchone()[0]
        last_run = db.execute("SELECT MAX(id) FROM monitor_runs").fetchone()[0] or 0
        db.close()
        yes_window = max(parse_iso(r[2]) for r in yes_runs if r[2]) - yes_started
        yes_lines = sum(r[3] for r in yes_runs)
        yes_drift = drift_of([(r[0], r[1], r[2]) for r in yes_runs])
        growth = [(after - before) / (t_to - t_from) * 3600 for before, after in zip(size_from, size_to)]
        yes_cpu = (ticks_to - ticks_from) / (t_to - t_from)
        # -- 2. 100 monitors, 1,000 lines a run
        started = time.time()
        for m in range(MONITORS):
            call(
                "POST",
                "/api/v1/monitors",
                {
                    "job": f"card{m % JOBS}",
                    "command": f"{sys.executable} {printer}",
                    "interval": "10s",
                    "cwd": root,
                    "allow_unsandboxed": True,
                },
            )
        time.sleep(SECONDS)
        ended = time.time()
        remove_all()
        time.sleep(15)  # the last events' 10 s grouping window closes
        db = sqlite3.connect(db_path)
        # what a job's agent does not take is dropped past [monitors] max_waiting (10 follow-ups):
        # the events inserted are counted from the runs' records, the delays read from those kept
        events = db.execute("SELECT time, line FROM monitor_events WHERE run > ?", (last_run,)).fetchall()
        runs = db.execute(
            "SELECT monitor, started, ended, lines FROM monitor_runs WHERE id > ? ORDER BY monitor, id", (last_run,)
        ).fetchall()
        inserted = sum(r[3] for r in runs)
        delays = sorted(parse_iso(stored) - float(line.split()[0]) for stored, line in events)
        window = max(parse_iso(r[2]) for r in runs) - min(parse_iso(r[1]) for r in runs)
        drift = drift_of([r[:3] for r in runs])
        db.close()

        idle_after = cpu_over(30)

        print("baselines, same run:")
        print(f"  proctor --version        median {version * 1000:.0f} ms (of 5)")
        print(
            f"  API on the idle server   p50 {api_p50 * 1000:.1f} ms, p95 {api_p95 * 1000:.1f} ms over "
            f"{len(idle_poll.times)} calls (/api/v1/status and /api/v1/monitors in turn)"
        )
        print(f"  idle CPU, before         {idle_before * 100:.2f}% of one core over 30 s")
        print(
            f"yes as a monitor on {YES_JOBS} job{'s' if YES_JOBS > 1 else ''}, every 10 s, for {yes_window:.0f} s "
            f"({len(yes_runs)} runs, {sum(r[4] for r in yes_runs)} timed out):"
        )
        print(
            f"  events stored            {yes_lines:,} in {yes_window:.0f} s: {yes_lines / yes_window:,.0f} events/s "
            f"({kept:,} still kept after the drops; {waiting[0]} follow-ups waiting, largest {waiting[1]} B "
            f"and {waiting[2]} events)"
        )
        print(
            f"  store growth             main file {growth[0] / 1e6:+.1f} MB/hour, its log {growth[1] / 1e6:+.1f} MB/hour "
            f"(extrapolated from {(size_to[0] - size_from[0]) / 1e6:+.2f} and {(size_to[1] - size_from[1]) / 1e6:+.2f} MB "
            f"over the {t_to - t_from:.0f} s after the first {YES_WARMUP:.0f} s; now {size_to[0] / 1e6:.1f} MB and "
            f"{size_to[1] / 1e6:.1f} MB)"
        )
        print(
            f"  API while it runs        p50 {statistics.median(poll.times) * 1000:.1f} ms, "
            f"p95 {pct(poll.times, 0.95) * 1000:.1f} ms ({pct(poll.times, 0.95) / api_p95:.2f}x idle p95), "
            f"max {max(poll.times) * 1000:.0f} ms over {len(poll.times)} calls, {poll.failures} failed"
        )
        if yes_drift:
            print(
                f"  schedule drift           median {statistics.median(yes_drift) * 1000:.0f} ms, "
                f"max {max(yes_drift) * 1000:.0f} ms over {len(yes_drift)} repeat runs"
            )
        print(f"  server CPU meanwhile     {yes_cpu * 100:.1f}% of one core")
        print(f"{MONITORS} monitors over {JOBS} jobs, {LINES} lines a run, every 10 s, for {ended - started:.0f} s:")
        print(
            f"  events stored            {inserted:,} in {window:.1f} s: {inserted / window:,.0f} events/s over "
            f"the whole window, runs every 10 s ({len(events):,} kept past the drops)"
        )
        print(
            f"  line printed -> stored   median {statistics.median(delays) * 1000:.0f} ms, "
            f"p95 {pct(delays, 0.95) * 1000:.0f} ms, max {delays[-1] * 1000:.0f} ms "
            f"({statistics.median(delays) / version:.1f}x proctor --version)"
        )
        print(
            f"  schedule drift           median {statistics.median(drift) * 1000:.0f} ms, "
            f"max {max(drift) * 1000:.0f} ms over {len(drift)} repeat runs (4 at once)"
        )
        print("every monitor removed:")
        print(
            f"  idle CPU, after          {idle_after * 100:.2f}% of one core over 30 s "
            f"({idle_after / max(idle_before, 1e-4):.2f}x before)"
        )
        cli(root, env, "server", "stop")
    finally:
        subprocess.run([sys.executable, "-m", "proctor", "server", "stop"], cwd=root, env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
