"""Benchmark: a tool call through the MCP door against the same command through the CLI.

    python bench/mcp_door.py

A real repository with 1,000 live jobs. Measured, median of BENCH_RUNS each, in one run:
`proctor --version` and the CLI commands (`vcs checkpoint -o json`, `ls jobs -o json`,
`describe job`) as real processes; the same three as MCP tool calls on one open connection to
`proctor mcp` over stdio (the SDK's own client), and to the server's /mcp over HTTP; and the
start of `proctor mcp` (spawn, initialize, tools/list), which a host pays once per session.
Ratios are against the CLI command, the cost an agent pays without the door.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _common import commit_all, isolated_env, timed_proctor as cli

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
JOBS = int(os.environ.get("BENCH_JOBS", "1000"))
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

CALLS = [
    ("vcs checkpoint", ["vcs", "checkpoint", "-o", "json"], "vcs_checkpoint", {}),
    ("ls jobs", ["ls", "jobs", "-o", "json"], "jobs_list", {}),
    ("describe job", ["describe", "job", "j0"], "job_describe", {"id": "j0"}),
]


async def over(client, samples: dict) -> None:
    async with client as connected:
        for _ in range(RUNS):
            for label, _argv, tool, args in CALLS:
                start = time.perf_counter()
                result = await connected.call_tool(tool, args)
                samples[label].append(time.perf_counter() - start)
                if result.is_error:
                    raise SystemExit(f"{tool} failed: {result.content[0].text}")


async def start_once(params) -> float:
    from mcp import Client

    start = time.perf_counter()
    async with Client(params) as connected:
        await connected.list_tools()
        return time.perf_counter() - start


def main() -> None:
    import httpx2
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    work = tempfile.mkdtemp(prefix="proctor-bench-mcp-")
    root = os.path.join(work, "repo")
    os.makedirs(os.path.join(root, "src"))
    env = isolated_env(work)
    try:
        with open(os.path.join(root, "proctor.toml"), "w") as handle:
            handle.write('[targets.test]\ncommand = "true"\n')
        commit_all(root, env)
        sys.path.insert(0, os.path.dirname(HERE))
        os.environ.update({k: env[k] for k in ("PROCTOR_STATE_DIR", "XDG_CACHE_HOME")})
        from proctor import api

        for n in range(JOBS):
            api.fork({"id": f"j{n}", "write_paths": [f"src/m{n}.py"], "check": "test"}, cwd=root)
        cli(root, env, "server", "start")
        status = json.loads(
            subprocess.run(
                [sys.executable, "-m", "proctor", "server", "status", "-o", "json"],
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
            ).stdout
        )
        with open(status["token_path"]) as handle:
            token = handle.read().strip()
        samples: dict[str, list[float]] = {"version": []}
        for label, argv, _tool, _args in CALLS:
            samples[f"cli {label}"] = []
            for _ in range(RUNS):
                samples[f"cli {label}"].append(cli(root, env, *argv))
        for _ in range(RUNS):
            samples["version"].append(cli(root, env, "--version"))
        params = StdioServerParameters(command=sys.executable, args=["-m", "proctor", "mcp"], cwd=root, env=env)
        stdio = {label: [] for label, *_ in CALLS}
        asyncio.run(over(Client(params, read_timeout_seconds=120), stdio))

        async def http_run() -> None:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
                await over(Client(streamable_http_client(status["mcp"], http_client=client)), http)

        http = {label: [] for label, *_ in CALLS}
        asyncio.run(http_run())
        starts = [asyncio.run(start_once(params)) for _ in range(max(3, RUNS // 3))]

        ms = lambda values: statistics.median(values) * 1000  # noqa: E731
        print(f"proctor MCP door: {JOBS} live jobs; {os.cpu_count()} CPUs; median of {RUNS} each")
        print(f"  proctor --version (baseline)                    {ms(samples['version']):8.1f} ms")
        print(
            f"  proctor mcp start (spawn, initialize, tools)    {ms(starts):8.1f} ms   "
            f"{ms(starts) / ms(samples['version']):.2f}x --version; once per session"
        )
        for label, *_ in CALLS:
            base = ms(samples[f"cli {label}"])
            print(f"  {label:<14} CLI process                    {base:8.1f} ms")
            print(
                f"  {label:<14} MCP stdio, open connection     {ms(stdio[label]):8.1f} ms   "
                f"{ms(stdio[label]) / base:.2f}x the CLI"
            )
            print(
                f"  {label:<14} MCP HTTP /mcp, token           {ms(http[label]):8.1f} ms   "
                f"{ms(http[label]) / base:.2f}x the CLI"
            )
    finally:
        subprocess.run([sys.executable, "-m", "proctor", "server", "stop"], cwd=root, env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
