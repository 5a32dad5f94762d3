"""`proctor work <job>`: run a job with agent CLIs, unattended."""

from __future__ import annotations

import sys
import time

import click

from proctor.cli import emit_json
from proctor.cli.options import output_option


class Display:
    """What a person sees: one line per event; for a terminal the current line is rewritten in
    place. It updates on the worker's own output, never on a timer: the silence is shown as
    the time of the last output, so a silent worker costs no CPU here either."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.header = ""

    def __call__(self, kind: str, data: dict) -> None:
        if kind == "start":
            self.header = (f"{data['job']}: attempt {data['attempt']} on {data['worker']} ({data['executor']}), "
                           f"rung {data['rung']}/{data['rungs']}")
            self._line(self.header + ", starting", final=True)
        elif kind == "line" and self.tty:
            last = time.strftime("%H:%M:%S")
            text = data["last_line"].replace("\n", " ")[:80]
            self._line(f"{self.header}: last output {last}, spend ${data['cost']:.2f}: {text}")
        elif kind == "final":
            self._line(f"{self.header}: final reply received; grace window running", final=True)
        elif kind == "skip":
            self._line(f"{data['job']}: worker {data['worker']} skipped: {data['reason']}", final=True)
        elif kind == "attempt":
            verdict = "passed its gates" if data["passed"] else "did not pass"
            spend = f", spend ${data['cost']:.2f}" if data.get("cost") else ""
            self._line(f"{data['job']}: attempt {data['number']} {data['outcome']} ({data['reason']}){spend}; "
                       f"status {data['status']}; {verdict}", final=True)
            for failure in data.get("failures", [])[:8]:
                self._line(f"    {failure}", final=True)

    def _line(self, text: str, final: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
        elif final:
            self.stream.write(text + "\n")
        self.stream.flush()


@click.command()
@click.argument("job_id", metavar="JOB")
@click.option("--worker", "worker_name", metavar="NAME", help="Run this worker only (default: the ladder).")
@output_option("text", "json")
def work(job_id: str, worker_name: str | None, output: str) -> int:
    """Run JOB (or its children, in depends_on order) with the workers of proctor.toml.

    Each worker is an agent CLI ([workers.NAME] executor = claude, codex, gemini, opencode or
    command), started with BAGGAGE=proctor.lease=<job> (a claude worker is also handed
    proctor's hooks), stopped when silent past the idle limit, after the grace window that
    follows its final reply, at its wall clock or spend limit; a stop ends every process of
    the attempt, detached ones included. proctor
    runs the job's check itself, grades with the code of `proctor job wait`, and commits only
    the job's changed paths inside its write paths when they pass. Exit 0 when every job
    passed, 1 when one ran out of attempts and rungs, 2 when it could not start.
    """
    from proctor.jobs import reap
    from proctor.workers.work import work as run_work
    from proctor.workspace import Workspace

    display = Display(sys.stderr) if output == "json" else Display(sys.stdout)
    with Workspace() as ws:
        reap.end_unheld(ws.store, ws.config["jobs.stale_after"], ws.warn)
        outcomes = run_work(ws, job_id, worker_name, display)
    passed = all(o.passed for o in outcomes)
    if not outcomes and output != "json":
        click.echo(f"every child of {job_id} has passed; nothing to work")
    if output == "json":
        emit_json({"passed": passed, "jobs": [o.to_json() for o in outcomes]})
    else:
        for o in outcomes:
            tail = f", committed {o.commit[:12]}" if o.commit else ""
            click.echo(f"{o.id}: {'passed' if o.passed else 'failed'} after {len(o.attempts)} attempt(s){tail}"
                       + ("" if o.passed else f"; {o.reason}"))
    return 0 if passed else 1
