"""Benchmark: the console with 2,000 jobs in headless Chromium, beside baselines measured in the
same run.

    python bench/console.py          # about two minutes; needs Debian's chromium

A store with JOBS jobs (100 roots, each with 19 children inside its paths) and a real server.
Baseline: `GET /api/v1/jobs`, the whole listing as a script reads it (median of 5: time and
bytes). Then, in Chromium at 1400x900 (the median of 3 fresh tabs each):

- first paint: from the navigation to the board and the tree drawn with every row;
- an update: a job forked by the API, from the fork's return to its row in the page, and the
  time the page spent applying the push (its own clock);
- the bytes of that push beside the listing a refetch would have read;
- requests in 10 s from one tab on the board and one on a job's page, while two monitors of
  that job print a line every second (the aim: at most 20 each), and the server's CPU over
  those 10 s beside the same 10 s with no tab open.

Prints each figure and its ratio to the baseline.
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

from _common import commit_all, isolated_env

JOBS = int(os.environ.get("BENCH_JOBS", "2000"))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def cli(root, env, *args):
    return subprocess.run(
        [sys.executable, "-m", "proctor", *args], cwd=root, env=env, capture_output=True, text=True, check=True
    )


def fill(root: str, env: dict, jobs: int) -> None:
    """JOBS jobs, forked in one process through the library door."""
    script = f"""
import sys
from proctor import api
roots = max(1, {jobs} // 20)
for r in range(roots):
    api.fork({{"id": f"r{{r}}", "write_paths": [f"src/r{{r}}/**"], "check": "test"}}, cwd={root!r})
    for c in range(19):
        if r * 20 + c + 1 >= {jobs}:
            break
        api.fork({{"id": f"r{{r}}/c{{c}}", "parent": f"r{{r}}", "write_paths": [f"src/r{{r}}/c{{c}}.py"], "check": "test"}},
                 cwd={root!r}, lease=api.ORCHESTRATOR)
"""
    subprocess.run([sys.executable, "-c", script], cwd=root, env=env, check=True)


def main() -> None:
    from playwright.sync_api import sync_playwright

    work = tempfile.mkdtemp(prefix="proctor-bench-console-")
    root = os.path.join(work, "repo")
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "proctor.toml"), "w") as handle:
        handle.write("[targets.test]\ncommand = 'true'\n")
    env = isolated_env(work)
    commit_all(root, env)
    os.environ.update({k: v for k, v in env.items() if k.startswith(("PROCTOR_", "XDG_"))})
    started = time.perf_counter()
    fill(root, env, JOBS)
    print(f"{JOBS} jobs forked in {time.perf_counter() - started:.1f} s")
    cli(root, env, "server", "start")
    try:
        status = json.loads(cli(root, env, "server", "status", "-o", "json").stdout)
        port = int(status["console"].rsplit(":", 1)[1].strip("/"))
        with open(status["token_path"]) as handle:
            token = handle.read().strip()

        def get(path: str) -> tuple[float, int]:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"}
            )
            begun = time.perf_counter()
            with urllib.request.urlopen(request, timeout=60) as response:
                size = len(response.read())
            return time.perf_counter() - begun, size

        baseline = [get("/api/v1/jobs") for _ in range(5)]
        base_ms = statistics.median(t for t, _ in baseline) * 1000
        base_bytes = baseline[0][1]
        print(f"baseline GET /api/v1/jobs: {base_ms:.0f} ms, {base_bytes / 1e6:.2f} MB")

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox"])
            context = browser.new_context(viewport={"width": 1400, "height": 900})
            link = json.loads(cli(root, env, "server", "status", "-o", "json").stdout)["login_link"]
            login = context.new_page()
            login.goto(link)
            login.wait_for_selector("body[data-loaded=yes]", timeout=60000)
            login.close()

            paints = []
            for _ in range(3):
                page = context.new_page()
                begun = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_function(f"document.body.dataset.jobs >= {JOBS}", timeout=60000)
                paints.append(time.perf_counter() - begun)
                page.close()
            paint_ms = statistics.median(paints) * 1000

            page = context.new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function(f"document.body.dataset.jobs >= {JOBS}", timeout=60000)
            from proctor import api

            updates, applies = [], []
            for n in range(3):
                api.fork({"id": f"late{n}", "write_paths": [f"late/{n}.py"], "check": "test"}, cwd=root)
                begun = time.perf_counter()
                page.wait_for_selector(f"tr[data-job='late{n}']", state="attached", timeout=30000)
                updates.append(time.perf_counter() - begun)
                applies.append(float(page.evaluate("document.body.dataset.applied")))
            update_ms, apply_ms = statistics.median(updates) * 1000, statistics.median(applies)
            # what one such push weighs: read off a stream of our own
            push_bytes = _push_bytes(port, token, root)
            print(f"first paint, {JOBS} jobs: {paint_ms:.0f} ms  ({paint_ms / base_ms:.2f}x the listing's GET alone)")
            print(f"an update, fork to row: {update_ms:.0f} ms; applied by the page in {apply_ms:.1f} ms")
            print(
                f"one update's push: {push_bytes} B  ({push_bytes / base_bytes:.5f}x the {base_bytes} B a refetch reads)"
            )

            # two chatty monitors on a running job, one tab on the board and one on its page
            api.fork({"id": "chatty", "write_paths": ["chatty/x.py"], "check": "test"}, cwd=root)
            worktree = os.path.join(work, "wt")
            subprocess.run(["git", "worktree", "add", "-q", "-b", "wt", worktree], cwd=root, env=env, check=True)
            api.exec_job("chatty", cwd=worktree)
            for n in range(2):
                body = json.dumps(
                    {
                        "job": "chatty",
                        "command": f"while true; do echo line-{n}; sleep 1; done",
                        "interval": "10s",
                        "cwd": root,
                        "allow_unsandboxed": True,
                    }
                ).encode()
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/v1/monitors",
                    data=body,
                    method="POST",
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                )
                urllib.request.urlopen(request, timeout=30).read()
            time.sleep(3)
            pid = status["pid"]
            cpu_before = cpu(pid)
            time.sleep(10)
            idle_cpu = cpu(pid) - cpu_before
            tabs, seen = {}, {}
            for where in ("/", "/jobs/chatty"):
                tab = context.new_page()
                seen[where] = []
                tab.on("request", lambda request, log=seen[where]: log.append(request.url))
                tab.goto(f"http://127.0.0.1:{port}{where}")
                tab.wait_for_selector("body[data-loaded=yes]", timeout=60000)
                tabs[where] = tab
            lines = "(document.querySelector('pre.events') || {}).textContent || ''"
            before = tabs["/jobs/chatty"].evaluate(lines).count("line-")
            for log in seen.values():
                log.clear()
            cpu_before = cpu(pid)
            time.sleep(10)
            open_cpu = cpu(pid) - cpu_before
            after = tabs["/jobs/chatty"].evaluate(lines).count("line-")
            for where, log in seen.items():
                extra = f"; its output list took {after - before} new lines" if where != "/" else ""
                print(
                    f"requests in 10 s from a tab on {where}, two monitors printing every second: {len(log)} "
                    f"(aim <= 20){extra}"
                )
            print(
                f"server CPU over 10 s with both tabs open: {open_cpu:.2f} s, beside {idle_cpu:.2f} s with none "
                f"({open_cpu / max(idle_cpu, 0.01):.2f}x)"
            )
            browser.close()
    finally:
        subprocess.run([sys.executable, "-m", "proctor", "server", "stop"], cwd=root, env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


def cpu(pid: int) -> float:
    """CPU seconds (user and system) process `pid` has used."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _push_bytes(port: int, token: str, root: str) -> int:
    """The size of the `jobs` push that follows one fork, read off a raw stream."""
    import socket
    import threading

    from proctor import api

    sock = socket.create_connection(("127.0.0.1", port), timeout=0.5)
    sock.sendall(
        f"GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    data = bytearray()

    def read(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                continue
            if not chunk:
                return
            data.extend(chunk)

    read(3)  # the first push: every row
    first = len(data)
    reader = threading.Thread(target=read, args=(3,))
    reader.start()
    api.fork({"id": "weighed", "write_paths": ["late/w.py"], "check": "test"}, cwd=root)
    reader.join()
    sock.close()
    pushes = [block for block in bytes(data[first:]).split(b"\n\n") if b"event: jobs" in block]
    return max((len(block) for block in pushes), default=0)


if __name__ == "__main__":
    main()
