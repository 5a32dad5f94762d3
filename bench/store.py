"""Benchmark: the job store's two engines, side by side in one run.

    python bench/store.py

For the embedded SQLite store (PROCTOR_STORE_URL unset) and PostgreSQL (a throwaway cluster the
bench starts, tests/store/pgcluster.py; reached over TCP with SCRAM and over its Unix socket, each its
own database), interleaved so that machine load falls on every engine alike:

1. `proctor job fork` latency, median of BENCH_RUNS;
2. `proctor ls jobs -o json` with 1,000 live jobs, median of BENCH_RUNS;
3. `proctor hook claude` on a PreToolUse Bash and a Write event under a live lease, median of
   BENCH_HOOK_RUNS (aim: PostgreSQL within 1.5x of SQLite);
4. write latency under 16 and 32 (BENCH_WRITERS) concurrent writer processes, each doing BENCH_WRITES
   read-modify-write transactions of one shared job row (a counter in its doc), over
   BENCH_ROUNDS rounds: p50, p99, throughput, and a lost-update check (the counter must equal
   the transactions that committed). Aim: PostgreSQL p99 < 60 ms at 32 writers. Beside them,
   the floor: as many processes using psycopg alone, the same lock and statements on a one-row
   table, so the figure reads against what the driver, the server and the machine allow.

Every figure is from real processes. proctor runs from a snapshot of this checkout's proctor/
copied, at the start, into a scratch venv (`python -I -m proctor`, non-editable; its
dependencies from the interpreter running the bench, which must have psycopg), so the whole
run measures one version of the code however the tree changes meanwhile. `proctor --version`
and `python -I -S -c pass` are measured in the same runs as baselines. Each engine has its own
git repository, state and cache dirs under one temp dir; the store is filled with the same
1,000 jobs on every engine through proctor's own fork (bench/jobs_store.py's fill).

The cluster runs durable (fsync, synchronous_commit and full_page_writes on) as a production
server would, and as the SQLite store commits (WAL, synchronous=FULL); BENCH_PG_DURABLE=0 keeps
the test cluster's durability-off settings. BENCH_PG_UNIX=0 skips the Unix-socket engine.
Everything (temp dirs, the cluster, writer processes) is removed on exit, failure included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = int(os.environ.get("BENCH_RUNS", "9"))
HOOK_RUNS = int(os.environ.get("BENCH_HOOK_RUNS", "21"))
WRITES = int(os.environ.get("BENCH_WRITES", "40"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
WRITERS = [int(n) for n in os.environ.get("BENCH_WRITERS", "16,32").split(",") if n.strip()]
JOBS = 1000
PG_DURABLE = os.environ.get("BENCH_PG_DURABLE", "1") != "0"
PG_UNIX = os.environ.get("BENCH_PG_UNIX", "1") != "0"
COUNTER_JOB = "g99"  # a root job of the fill, no write paths; the writers' shared row
LEASE = "g3/j1"  # a job of the fill that may write pkg3/m3/f1.py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# -- the writer process (runs from the snapshot: python -I bench/store.py --writer ...) -----------


def _drive(count: int, write, undo=None) -> None:
    """Say ready, wait for go on stdin, then `count` calls of `write` (one transaction each);
    print their latencies, errors and span as JSON. A failed write is counted, and the first
    few shown (`undo` after it): the bench reports, it does not hide."""
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    latencies, errors = [], []
    first = time.monotonic()
    for _ in range(count):
        start = time.monotonic()
        try:
            write()
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            if undo is not None:
                undo()
            continue
        latencies.append(time.monotonic() - start)
    last = time.monotonic()
    sys.stdout.write(json.dumps({"lat": latencies, "errors": errors, "first": first, "last": last}) + "\n")


def writer(job_id: str, count: int) -> None:
    """Open the store, then `count` read-modify-write transactions of `job_id`, each
    incrementing its counter (_drive)."""
    from proctor.store import rows
    from proctor.timeutil import iso, now
    from proctor.workspace import Workspace

    ws = Workspace(os.getcwd(), warn=lambda line: None)
    store = ws.store
    with store.read() as tx:  # connected, and the row is there
        assert rows.get(tx, job_id) is not None, f"no job {job_id}"

    def write() -> None:
        with store.write() as tx:
            job = rows.get(tx, job_id)
            job["bench_counter"] = int(job.get("bench_counter") or 0) + 1
            job["updated"] = iso(now())
            rows.put(tx, job, job["_root"], job["_depth"])

    _drive(count, write)
    ws.close()


def bare_writer(count: int) -> None:
    """The floor: psycopg alone, no proctor. The same shape as `writer` (a repository-wide
    advisory lock, read the row, write it back, NOTIFY, COMMIT) on a one-row table of its own,
    so the figure is what the driver, the server and this machine allow at this many writers."""
    import psycopg

    conn = psycopg.connect(os.environ["PROCTOR_STORE_URL"], autocommit=True)
    conn.execute("SELECT doc FROM bench_floor WHERE id = 'x'").fetchone()

    def write() -> None:
        conn.execute("BEGIN; SELECT pg_advisory_xact_lock(4242)")
        doc = json.loads(conn.execute("SELECT doc FROM bench_floor WHERE id = %s", ("x",)).fetchone()[0])
        doc["bench_counter"] = int(doc.get("bench_counter") or 0) + 1
        conn.execute("UPDATE bench_floor SET doc = %s WHERE id = %s", (json.dumps(doc), "x"))
        conn.execute('NOTIFY "bench_floor"; COMMIT')

    _drive(count, write, undo=lambda: conn.execute("ROLLBACK"))
    conn.close()


def counter(job_id: str, action: str) -> None:
    """Reset the job's counter to 0 (`reset`) or print it (`read`); job `-` is the bare
    writers' row."""
    if job_id == "-":
        import psycopg

        with psycopg.connect(os.environ["PROCTOR_STORE_URL"], autocommit=True) as conn:
            if action == "reset":
                conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (id text PRIMARY KEY, doc text)")
                conn.execute(
                    "INSERT INTO bench_floor VALUES ('x', '{\"bench_counter\": 0}') "
                    "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc"
                )
            print(json.loads(conn.execute("SELECT doc FROM bench_floor WHERE id = 'x'").fetchone()[0])["bench_counter"])
        return
    from proctor.store import rows
    from proctor.workspace import Workspace

    ws = Workspace(os.getcwd(), warn=lambda line: None)
    if action == "reset":
        with ws.store.write() as tx:
            job = rows.get(tx, job_id)
            job["bench_counter"] = 0
            rows.put(tx, job, job["_root"], job["_depth"])
    with ws.store.read() as tx:
        print(int(rows.get(tx, job_id).get("bench_counter") or 0))
    ws.close()


# -- the bench --------------------------------------------------------------------------------


def snapshot(work: str) -> str:
    """A scratch venv holding a copy of this checkout's proctor/ (non-editable); its other
    dependencies on a path line to the running interpreter's site-packages. Its python."""
    import importlib.util

    spec = importlib.util.find_spec("psycopg")
    if spec is None or not spec.origin:
        raise SystemExit("bench/store.py needs psycopg importable: run it with the project's venv python")
    deps = os.path.dirname(os.path.dirname(spec.origin))
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    site = subprocess.run(
        [python, "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shutil.copytree(
        os.path.join(REPO, "proctor"),
        os.path.join(site, "proctor"),
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    # a path line only: the .pth files there (the editable install's finder) are not run
    with open(os.path.join(site, "zz_bench_deps.pth"), "w") as handle:
        handle.write(deps + "\n")
    subprocess.run([python, "-I", "-m", "compileall", "-q", os.path.join(site, "proctor")], check=True)
    where = subprocess.run(
        [python, "-I", "-c", "import proctor, psycopg; print(proctor.__file__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where.startswith(site), where
    return python


def start_cluster():
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from pgcluster import Cluster

    cluster = Cluster()
    cluster.start()
    return cluster


def make_durable(cluster) -> None:
    for setting in ("fsync", "synchronous_commit", "full_page_writes"):
        cluster.execute(f"ALTER SYSTEM SET {setting} = on")
    cluster.execute("SELECT pg_reload_conf()")
    for _ in range(50):
        time.sleep(0.1)
        got = [cluster.execute(f"SHOW {s}")[0][0] for s in ("fsync", "synchronous_commit", "full_page_writes")]
        if got == ["on", "on", "on"]:
            return
    raise RuntimeError(f"the cluster did not take fsync/synchronous_commit/full_page_writes = on: {got}")


class Engine:
    def __init__(self, name: str, url: str | None, work: str) -> None:
        from _common import isolated_env

        self.name, self.url = name, url
        self.dir = os.path.join(work, name)
        self.root = os.path.join(self.dir, "repo")
        os.makedirs(self.root)
        extra = {"PROCTOR_BUSY_TIMEOUT": "120"}
        if url:
            extra["PROCTOR_STORE_URL"] = url
        self.env = isolated_env(self.dir, **extra)
        if not url:
            self.env.pop("PROCTOR_STORE_URL", None)
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.env.pop("PROCTOR_TEST_STORE", None)
        self.errors: dict[str, str] = {}  # measure -> the first failure seen


def first_lines(text: str, n: int = 6) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n      ".join(lines[-n:])


def run_checked(argv, engine: Engine, data: bytes | None = None, capture: bool = False):
    proc = subprocess.run(
        argv,
        input=data,
        cwd=engine.root,
        env=engine.env,
        stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`{' '.join(argv[3:] if argv[1:3] == ['-I', '-m'] else argv)}` exited "
            f"{proc.returncode}: {first_lines(proc.stderr.decode(errors='replace'))}"
        )
    return proc


def timed(argv, engine: Engine, data: bytes | None = None) -> float:
    start = time.perf_counter()
    run_checked(argv, engine, data)
    return time.perf_counter() - start


def writer_batch(python: str, engine: Engine, count: int, bare: bool = False) -> dict:
    """`count` writer processes at once on `engine` (the bare psycopg ones with `bare`); their
    latencies, errors, span and the counter before and after."""
    me = os.path.abspath(__file__)
    row = "-" if bare else COUNTER_JOB
    before = int(run_checked([python, "-I", me, "--counter", row, "reset"], engine, capture=True).stdout)
    procs = []
    try:
        for _ in range(count):
            argv = (
                [python, "-I", me, "--bare-writer", str(WRITES)]
                if bare
                else [python, "-I", me, "--writer", COUNTER_JOB, str(WRITES)]
            )
            procs.append(
                subprocess.Popen(
                    argv,
                    cwd=engine.root,
                    env=engine.env,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
            )
        for proc in procs:
            if proc.stdout.readline().strip() != b"ready":
                proc.wait()
                raise RuntimeError(
                    f"a writer did not start: {first_lines(proc.stderr.read().decode(errors='replace'))}"
                )
        for proc in procs:
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        for proc in procs:
            proc.stdin.close()
            proc.stdin = None  # communicate() below must not flush it
        results = []
        for proc in procs:
            out, err = proc.communicate()
            if proc.returncode != 0:
                raise RuntimeError(f"a writer exited {proc.returncode}: {first_lines(err.decode(errors='replace'))}")
            results.append(json.loads(out))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    after = int(run_checked([python, "-I", me, "--counter", row, "read"], engine, capture=True).stdout)
    return {
        "lat": [x for r in results for x in r["lat"]],
        "errors": [e for r in results for e in r["errors"]],
        "span": max(r["last"] for r in results) - min(r["first"] for r in results),
        "before": before,
        "after": after,
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def main() -> None:
    from _common import commit_all

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = tempfile.mkdtemp(prefix="proctor-bench-store-")
    cluster = None
    started = time.perf_counter()
    try:
        print("snapshotting proctor/ into a scratch venv; starting a PostgreSQL cluster ...", file=sys.stderr)
        python = snapshot(work)
        cluster = start_cluster()
        if PG_DURABLE:
            make_durable(cluster)
        pg_version = cluster.execute("SHOW server_version")[0][0]
        engines = [Engine("sqlite", None, work)]
        engines.append(Engine("pg-tcp", cluster.url(cluster.create_database("bench_tcp")), work))
        if PG_UNIX:
            engines.append(Engine("pg-unix", cluster.url(cluster.create_database("bench_unix"), tcp=False), work))
        pgs = [e for e in engines if e.url]
        proctor = [python, "-I", "-m", "proctor"]

        # -- a repository per engine, and the same 1,000 jobs in each store ---------------------
        fill_seconds: dict[str, float] = {}
        for engine in engines:
            with open(os.path.join(engine.root, "proctor.toml"), "w") as handle:
                handle.write("[targets.test]\ncommand = 'true'\n")
            commit_all(engine.root, engine.env)
            print(f"filling {engine.name} with {JOBS} jobs ...", file=sys.stderr)
            try:
                fill_seconds[engine.name] = timed(
                    [
                        python,
                        "-I",
                        "-c",
                        f"import sys; sys.path.insert(0, {HERE!r}); "
                        f"from jobs_store import fill; fill({engine.root!r}, {JOBS})",
                    ],
                    engine,
                )
            except RuntimeError as exc:
                engine.errors["fill"] = str(exc)
        live = [e for e in engines if "fill" not in e.errors]

        samples: dict[tuple[str, str], list[float]] = {}

        def sample(engine: Engine, measure: str, argv, data: bytes | None = None) -> None:
            if measure in engine.errors:
                return
            try:
                samples.setdefault((engine.name, measure), []).append(timed(argv, engine, data))
            except RuntimeError as exc:
                engine.errors[measure] = str(exc)

        # -- 1, 2: proctor --version (baseline), ls jobs, then fork; interleaved --------------------
        print("ls jobs / job fork ...", file=sys.stderr)
        listed: dict[str, str] = {}
        for engine in live:  # warm each cache, and see that ls lists the jobs
            try:
                run_checked([*proctor, "--version"], engine)
                out = run_checked([*proctor, "ls", "jobs", "-o", "json"], engine, capture=True).stdout
                data = json.loads(out)
                items = data if isinstance(data, list) else data.get("jobs", data)
                listed[engine.name] = f"{len(items)} listed"
            except (RuntimeError, ValueError, AttributeError) as exc:
                engine.errors["ls"] = str(exc)
        for _ in range(RUNS):
            # what a CLI process on PostgreSQL loads besides (the hook's guard does not: pgwire.py)
            sample(engines[0], "import psycopg", [python, "-I", "-c", "import psycopg"])
            for engine in live:
                sample(engine, "version", [*proctor, "--version"])
                sample(engine, "ls", [*proctor, "ls", "jobs", "-o", "json"])
        for n in range(RUNS):
            for engine in live:
                sample(
                    engine,
                    "fork",
                    [*proctor, "job", "fork", f"bench/new{n}", "--check", "test", "--write-paths", f"new/{n}.py"],
                )

        # -- 3: the hook, under a live lease --------------------------------------------------------
        print("hook ...", file=sys.stderr)
        decisions: dict[tuple[str, str], str] = {}
        events: dict[str, dict[str, bytes]] = {}
        for engine in live:
            engine.env["BAGGAGE"] = f"proctor.lease={LEASE}"
            base = {
                "session_id": "bench",
                "transcript_path": "/tmp/x.jsonl",
                "cwd": engine.root,
                "permission_mode": "default",
                "hook_event_name": "PreToolUse",
                "tool_use_id": "toolu_1",
            }
            events[engine.name] = {
                "hook Bash": json.dumps(
                    {
                        **base,
                        "tool_name": "Bash",
                        "tool_input": {
                            "command": "python -m pytest -q pkg3/m3 > pkg3/m3/t1_test.log 2>&1",
                            "timeout": 120000,
                        },
                    }
                ).encode(),
                "hook Write": json.dumps(
                    {
                        **base,
                        "tool_name": "Write",
                        "tool_input": {"file_path": os.path.join(engine.root, "pkg3/m3/f1.py"), "content": "x = 1\n"},
                    }
                ).encode(),
            }
            for measure, payload in events[engine.name].items():  # warm, and see the answers
                try:
                    out = run_checked([*proctor, "hook", "claude"], engine, payload, capture=True).stdout
                    answer = json.loads(out) if out.strip() else {}
                    decisions[(engine.name, measure)] = answer.get("hookSpecificOutput", {}).get(
                        "permissionDecision"
                    ) or ("advise" if answer else "pass")
                except (RuntimeError, ValueError) as exc:
                    engine.errors[measure] = str(exc)
        bare = [sys.executable, "-I", "-S", "-c", "pass"]
        for _ in range(HOOK_RUNS):
            sample(engines[0], "python -I -S -c pass", bare)
            for engine in live:
                for measure, payload in events[engine.name].items():
                    sample(engine, measure, [*proctor, "hook", "claude"], payload)

        # -- 4: concurrent writers -------------------------------------------------------------------
        batches: dict[tuple[str, int], list[dict]] = {}
        for round_ in range(ROUNDS):
            for count in WRITERS:
                for engine in live:
                    key = f"writers {count}"
                    if key in engine.errors:
                        continue
                    print(f"writers: round {round_ + 1}/{ROUNDS}, {count} on {engine.name} ...", file=sys.stderr)
                    try:
                        batches.setdefault((engine.name, count), []).append(writer_batch(python, engine, count))
                    except RuntimeError as exc:
                        engine.errors[key] = str(exc)
                if pgs and f"bare {count}" not in pgs[0].errors:
                    print(
                        f"writers: round {round_ + 1}/{ROUNDS}, {count} bare psycopg on {pgs[0].name} ...",
                        file=sys.stderr,
                    )
                    try:
                        batches.setdefault(("bare", count), []).append(writer_batch(python, pgs[0], count, bare=True))
                    except RuntimeError as exc:
                        pgs[0].errors[f"bare {count}"] = str(exc)

        # -- the table ---------------------------------------------------------------------------------
        names = [e.name for e in engines]
        figures: dict[tuple[str, str], float | str] = {}
        for (name, measure), values in samples.items():
            if values:
                figures[(name, measure)] = statistics.median(values) * 1000
        for name in names:
            if name in fill_seconds:
                figures[(name, "fill")] = fill_seconds[name]
        lost: dict[tuple[str, int], str] = {}
        errors_seen: dict[tuple[str, int], list[str]] = {}
        for (name, count), runs in batches.items():
            lat = [x for b in runs for x in b["lat"]]
            committed = len(lat)
            figures[(name, f"w{count} p50")] = percentile(lat, 50) * 1000
            figures[(name, f"w{count} p99")] = percentile(lat, 99) * 1000
            figures[(name, f"w{count} max")] = max(lat) * 1000 if lat else float("nan")
            figures[(name, f"w{count} tx/s")] = sum(len(b["lat"]) for b in runs) / sum(b["span"] for b in runs)
            ok = all(b["before"] == 0 and b["after"] == len(b["lat"]) for b in runs)
            detail = ", ".join(f"{b['after']}/{len(b['lat'])}" for b in runs)
            lost[(name, count)] = f"{'PASS' if ok else 'FAIL'} ({detail})"
            errors_seen[(name, count)] = [e for b in runs for e in b["errors"]]
            if not committed:
                lost[(name, count)] = "FAIL (nothing committed)"

        rows_out = [
            ("fill", f"fill {JOBS} jobs (library, s)", "s"),
            ("version", "proctor --version (baseline)", "ms"),
            ("ls", f"ls jobs -o json, {JOBS} live", "ms"),
            ("fork", "job fork", "ms"),
            ("hook Bash", "hook claude: Bash", "ms"),
            ("hook Write", "hook claude: Write", "ms"),
        ]
        for count in WRITERS:
            rows_out += [
                (f"w{count} p50", f"{count} writers: p50", "ms"),
                (f"w{count} p99", f"{count} writers: p99", "ms"),
                (f"w{count} max", f"{count} writers: max", "ms"),
                (f"w{count} tx/s", f"{count} writers: throughput", "tx/s"),
            ]

        def cell(name: str, key: str, unit: str) -> str:
            value = figures.get((name, key))
            if value is None:
                failed = next(e for e in engines if e.name == name).errors
                source = f"writers {key[1:].split()[0]}" if key.startswith("w") else key
                return "ERROR" if source in failed or "fill" in failed else "-"
            if unit == "s":
                return f"{value:.1f}s"
            if unit == "tx/s":
                return f"{value:.0f}/s"
            return f"{value:.1f}ms"

        width = 34
        head = f"{'':<{width}}" + "".join(f"{n:>11}" for n in names) + "".join(f"{p.name + '/sqlite':>16}" for p in pgs)
        print()
        print(
            f"proctor store engines: SQLite (WAL) vs PostgreSQL {pg_version} "
            f"({'durable: fsync, synchronous_commit on' if PG_DURABLE else 'fsync/synchronous_commit OFF'}; "
            f"pg-tcp = 127.0.0.1 + SCRAM{', pg-unix = Unix socket, trust' if PG_UNIX else ''})"
        )
        print(
            f"proctor = `python -I -m proctor` from a non-editable snapshot of this checkout; {os.cpu_count()} CPUs; "
            f"medians of {RUNS} interleaved runs (CLI), {HOOK_RUNS} (hook); writers: {ROUNDS} round(s) x "
            f"{WRITES} read-modify-write transactions each, one shared job row"
        )
        print(head)
        for key, label, unit in rows_out:
            line = f"{label:<{width}}" + "".join(f"{cell(n, key, unit):>11}" for n in names)
            for pg in pgs:
                a, b = figures.get((pg.name, key)), figures.get(("sqlite", key))
                line += f"{(f'{a / b:.2f}x' if a is not None and b else '-'):>16}"
            print(line)
        for count in WRITERS:
            print(
                f"{f'{count} writers: lost-update check':<{width}}"
                + "  ".join(
                    f"{n}: {lost.get((n, count), 'ERROR')}"
                    for n in names + ["bare"]
                    if (n, count) in lost or n != "bare"
                )
            )
        if pgs:
            print(
                f"\nthe floor: {pgs[0].name} with psycopg alone (no proctor), the same lock and statements, "
                f"the same number of writer processes, measured between proctor's batches:"
            )
            for count in WRITERS:
                p50, p99 = figures.get(("bare", f"w{count} p50")), figures.get(("bare", f"w{count} p99"))
                ours = figures.get((pgs[0].name, f"w{count} p99"))
                if p50 is None or p99 is None:
                    print(f"  {count} writers: not measured")
                    continue
                ratio = f"; proctor's p99 is {ours / p99:.2f}x the floor's" if ours else ""
                print(
                    f"  {count} writers: p50 {p50:.1f} ms, p99 {p99:.1f} ms, "
                    f"{figures[('bare', f'w{count} tx/s')]:.0f} tx/s{ratio}"
                )
        for measure, label in (
            ("python -I -S -c pass", "python -I -S -c pass (baseline)"),
            ("import psycopg", "python -I -c 'import psycopg'"),
        ):
            value = figures.get(("sqlite", measure))
            if value:
                print(f"{label:<{width}}{value:>9.1f}ms")
        hook_answers = "; ".join(f"{n} {m.split()[-1]}={d}" for (n, m), d in decisions.items())
        print(f"hook answers: {hook_answers}")
        if listed:
            print("ls jobs -o json (warm-up): " + "; ".join(f"{n} {v}" for n, v in listed.items()))

        print("\naims:")
        for pg in pgs:
            for measure in ("hook Bash", "hook Write"):
                a, b = figures.get((pg.name, measure)), figures.get(("sqlite", measure))
                if a is not None and b:
                    print(
                        f"  {measure} on {pg.name}: {a / b:.2f}x SQLite (aim <= 1.50x): "
                        f"{'MET' if a / b <= 1.5 else 'NOT MET'}"
                    )
                else:
                    print(f"  {measure} on {pg.name}: not measured")
            top = max(WRITERS) if WRITERS else None
            p99 = figures.get((pg.name, f"w{top} p99"))
            if p99 is not None:
                print(
                    f"  p99 at {top} writers on {pg.name}: {p99:.1f} ms (aim < 60 ms): {'MET' if p99 < 60 else 'NOT MET'}"
                )
            else:
                print(f"  p99 at {top} writers on {pg.name}: not measured")
        failures = [(e.name, m, t) for e in engines for m, t in e.errors.items()]
        failures += [
            (n, f"writers {c}", f"{len(errs)} transaction(s) failed, first: {errs[0]}")
            for (n, c), errs in errors_seen.items()
            if errs
        ]
        if failures:
            print("\nerrors:")
            for name, measure, text in failures:
                print(f"  {name} / {measure}: {text}")
        print(f"\n(whole run {time.perf_counter() - started:.0f}s)")
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--writer"]:
        writer(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1:2] == ["--bare-writer"]:
        bare_writer(int(sys.argv[2]))
    elif sys.argv[1:2] == ["--counter"]:
        counter(sys.argv[2], sys.argv[3])
    else:
        sys.path.insert(0, HERE)
        main()
