"""`proctor work <job>`: run a job with agent CLIs, unattended."""

from __future__ import annotations

import json
import shutil
import signal
import sys
import threading
import time

import click

from proctor.cli import emit_json
from proctor.cli.options import output_option

HEARTBEAT = 60.0  # seconds between status lines when stderr is no terminal
QUEUED = 1000  # lines waiting for the output at most


def _span(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def words(line: str) -> str:
    """A stream line in words: what the worker last did, not the first characters of raw JSON."""
    try:
        event = json.loads(line)
    except ValueError:
        return line.strip()[:200]
    if not isinstance(event, dict):
        return line.strip()[:200]
    kind = str(event.get("type") or "")
    message = event.get("message")
    if not isinstance(message, dict):
        message = {}
    part = event.get("part")
    if not isinstance(part, dict):
        part = {}
    item = event.get("item")
    if not isinstance(item, dict):
        item = {}
    if kind in ("assistant", "user") and isinstance(message.get("content"), list):
        for block in message["content"]:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                detail = block.get("input")
                if not isinstance(detail, dict):
                    detail = {}
                target = detail.get("command") or detail.get("file_path") or detail.get("description") or ""
                return f"runs {block.get('name')}: {str(target).splitlines()[0] if target else ''}".rstrip(": ")
            if block.get("type") == "tool_result":
                return "reads a tool's result" + (" (an error)" if block.get("is_error") else "")
            if block.get("type") == "text" and block.get("text"):
                return "says: " + " ".join(str(block["text"]).split())
            if block.get("type") == "thinking":
                return "thinks"
    if kind == "system":
        sub = event.get("subtype") or ""
        if sub in ("hook_started", "hook_response"):
            return f"hook {event.get('hook_name') or ''} {'starts' if sub == 'hook_started' else 'answered'}"
        return f"system: {sub}" + (f" ({event.get('description')})" if event.get("description") else "")
    if kind == "result":
        return f"result: {event.get('subtype') or event.get('status') or ''}"
    if kind == "tool_use":
        tool = part.get("tool") or event.get("tool_name") or ""
        return f"runs {tool}"
    if kind == "text" and part.get("text"):
        return "says: " + " ".join(str(part["text"]).split())
    if kind == "message" and isinstance(event.get("content"), str):
        return "says: " + " ".join(event["content"].split())
    if kind.startswith("item.") and item:
        text = item.get("text") or item.get("command") or ""
        return f"{item.get('type') or 'item'}: " + " ".join(str(text).split())
    if kind:
        return kind.replace("_", " ")
    return line.strip()[:200]


class Display:
    """What a person sees. For a terminal, one line rewritten in place: attempt, worker,
    elapsed, silence against the idle limit, the next deadline, spend and the last event in
    words, cut to the terminal's width and ticking every second; otherwise one line per event
    and a heartbeat line every minute."""

    def __init__(self, stream) -> None:
        import queue

        self.stream = stream
        self.tty = stream.isatty()
        self.lock = threading.Lock()
        self.live: dict | None = None
        self.waiting: dict | None = None  # a job waiting for its monitors' next follow-up
        self.stopped = threading.Event()
        # Lines are written by a thread of their own: a terminal nobody reads (paused with
        # Ctrl-S, a pipe never drained) blocks that thread, never the watch that stops workers.
        # Past QUEUED lines waiting, the live line's rewrites are dropped, then the rest.
        self.lines: "queue.Queue[tuple[str, bool] | None]" = queue.Queue(maxsize=QUEUED)
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.writer.start()
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def close(self) -> None:
        """Stop ticking and write what is queued (waiting a moment at most for a stuck output)."""
        if self.stopped.is_set():
            return
        self.stopped.set()
        try:
            self.lines.put_nowait(None)
        except Exception:
            return
        self.writer.join(timeout=2.0)

    def __call__(self, kind: str, data: dict) -> None:
        with self.lock:
            self._event(kind, data)

    def _event(self, kind: str, data: dict) -> None:
        at = time.monotonic()
        if kind == "start":
            self.waiting = None
            self.live = {
                "job": data["job"],
                "worker": data["worker"],
                "executor": data["executor"],
                "attempt": data["attempt"],
                "started": at,
                "output": at,
                "final": None,
                "idle": data.get("idle"),
                "grace": data.get("grace"),
                "wall": data.get("wall"),
                "cost": 0.0,
                "last": "starting",
            }
            resumed = ", resuming its last session" if data.get("resumed") else ""
            if data.get("followup") is not None:
                resumed = f", resuming its last session with follow-up {data['followup']}"
            self._line(
                f"{data['job']}: attempt {data['attempt']} on {data['worker']} ({data['executor']}), "
                f"rung {data['rung']}/{data['rungs']}{resumed}, in {data.get('worktree')}",
                final=True,
            )
            if data.get("note"):
                self._line(f"    {data['note']}", final=True)
        elif kind == "line" and self.live is not None:
            attempt = data["data"]
            self.live.update(output=at, cost=attempt.cost, last=words(attempt.last_line))
            if self.tty:
                self._line(self._status())
        elif kind == "final" and self.live is not None:
            self.live["final"] = at
            self._line(f"{self.live['job']}: final reply received; {self.live['grace']:g} s of grace", final=True)
        elif kind == "step" and self.live is not None:
            self.live["final"] = None
        elif kind == "monitors":
            first = self.waiting is None
            self.waiting = {"job": data["job"], "live": data["live"], "since": data["since"], "bound": data["bound"]}
            if first:
                self._line(
                    f"{self._waiting_status()} (a follow-up resumes its worker here; up to "
                    f"{_span(round(data['bound']))}: the idle limit, within the worker's wall clock)",
                    final=True,
                )
            elif self.tty:
                self._line(self._waiting_status())
        elif kind == "sandbox":
            box = data["sandbox"]
            self._line(
                f"{data['job']}: the worker starts in its job's sandbox (Landlock ABI {box['abi']}): inside "
                f"{', '.join(box['narrowed'])} it may write only {len(box['grant'])} granted path"
                f"{'s' if len(box['grant']) != 1 else ''}",
                final=True,
            )
        elif kind == "followup":
            self.waiting = None
            self._line(
                f"{data['job']}: follow-up {data['id']} from its monitors ({data['events']} event"
                f"{'s' if data['events'] != 1 else ''}): the worker's session resumes with it",
                final=True,
            )
        elif kind == "wait_over":
            self.waiting = None
            self._line(f"{data['job']}: {data['reason']}; the attempt's verdict stands", final=True)
        elif kind == "waiting":
            self._line(
                f"{data['job']}: waiting for a {data['executor']} slot ({data['slots']} on this machine, held "
                f"by pid {', '.join(data['holders']) or '?'})",
                final=True,
            )
        elif kind == "skip":
            self._line(f"{data['job']}: worker {data['worker']} skipped: {data['reason']}", final=True)
        elif kind == "retry":
            self._line(f"{data['job']}: declared again (--retry); its history stays", final=True)
        elif kind == "landing":
            self._line(f"{data['job']}: passed, but not landed: {data['reason']}", final=True)
        elif kind == "root":
            if data.get("skipped"):
                self._line(f"{data['job']}: {data['skipped']}", final=True)
            else:
                self._line(
                    f"{data['job']}: its own check on the landed steps: {'passed' if data['passed'] else 'failed'}",
                    final=True,
                )
                for failure in data.get("failures", [])[:8]:
                    self._line(f"    {failure}", final=True)
        elif kind == "attempt":
            self.live = None
            self.waiting = None
            verdict = "passed its gates" if data["passed"] else "did not pass"
            spend = f", spend ${data['cost']:.2f}" if data.get("cost") else ""
            self._line(
                f"{data['job']}: attempt {data['number']} {data['outcome']} ({data['reason']}){spend}; "
                f"status {data['status']}; {verdict}",
                final=True,
            )
            for failure in data.get("failures", [])[:8]:
                self._line(f"    {failure}", final=True)
            for notice in data.get("noticed", []):
                self._line(f"    note: {notice}", final=True)

    def _status(self) -> str:
        live, at = self.live, time.monotonic()
        assert live is not None  # only called while an attempt is live (checked under the lock)
        silent = at - live["output"]
        deadlines = []
        if live["final"] is None and live["idle"]:
            deadlines.append((live["output"] + live["idle"], "idle stop"))
        if live["final"] is not None:
            deadlines.append((live["final"] + live["grace"], "grace ends"))
        if live["wall"]:
            deadlines.append((live["started"] + live["wall"], "wall clock"))
        due = min(deadlines, default=None)
        parts = [
            f"{live['job']}: attempt {live['attempt']} {live['worker']}",
            _span(at - live["started"]),
            f"silent {_span(silent)}/{_span(live['idle'])}",
        ]
        if due:
            parts.append(f"{due[1]} in {_span(due[0] - at)}")
        parts.append(f"${live['cost']:.2f}")
        parts.append(live["last"])
        return " · ".join(parts)

    def _waiting_status(self) -> str:
        waiting = self.waiting
        assert waiting is not None  # only called right after it is set, or when checked under the lock
        return (
            f"{waiting['job']}: waiting for the monitors of {waiting['job']}: {waiting['live']} live · "
            f"{_span(time.monotonic() - waiting['since'])}/{_span(round(waiting['bound']))}"
        )

    def _tick(self) -> None:
        last_beat = time.monotonic()
        while not self.stopped.wait(1.0):
            with self.lock:
                status = (
                    self._status
                    if self.live is not None
                    else self._waiting_status
                    if self.waiting is not None
                    else None
                )
                if status is None:
                    continue
                if self.tty:
                    self._line(status())
                elif time.monotonic() - last_beat >= HEARTBEAT:
                    last_beat = time.monotonic()
                    self._line(status(), final=True)

    def _line(self, text: str, final: bool = False) -> None:
        import queue

        if self.stopped.is_set() and not final:
            return
        if not final and self.lines.qsize() > QUEUED // 2:
            return  # the output is behind: a rewrite of the live line is dropped, a final line kept
        try:
            self.lines.put_nowait((text, final))
        except queue.Full:
            pass

    def _write(self) -> None:
        while True:
            item = self.lines.get()
            if item is None:
                return
            self._put(*item)

    def _put(self, text: str, final: bool) -> None:
        try:
            if self.tty:
                width = shutil.get_terminal_size((100, 20)).columns
                shown = text if final else text[: max(10, width - 1)]
                self.stream.write("\r\x1b[K" + shown + ("\n" if final else ""))
            elif final:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed terminal does not stop the work


def _executors_named() -> str:
    from proctor.config import EXECUTORS

    *rest, last = EXECUTORS
    return f"{', '.join(rest)} or {last}"


@click.command()
@click.argument("job_id", metavar="JOB")
@click.option("--worker", "worker_name", metavar="NAME", help="Run this worker only (default: the ladder).")
@click.option(
    "--retry",
    "again",
    is_flag=True,
    help="Work JOB (or its children) again where it failed or ended without a return, keeping its history.",
)
@output_option("text", "json")
def work(job_id: str, worker_name: str | None, again: bool, output: str) -> int:
    """Run JOB (or its children, in depends_on order) with the workers of proctor.toml.

    Each worker is an agent CLI ([workers.NAME] executor = EXECUTORS), started with BAGGAGE=proctor.lease=<job> and proctor's hooks, in a git worktree
    of its own at the step's checkpoint (the tree after the steps it depends on landed); it is
    stopped when silent past the idle limit, after the grace window that follows its final
    reply, at its wall clock (an hour unless set) or spend limit; a stop, and proctor's own
    interruption or death, end every process of the attempt. proctor runs the job's check,
    grades with the code of `proctor job wait`, and commits, hooks off, only the job's changed
    paths inside its write paths when they pass; an attempt that committed or moved a ref
    fails. After every child passed the root's own check runs. One `proctor work` per job.

    With [sandbox] workers = true the worker starts inside its job's Landlock grant, which
    denies proctor's state: its proctor commands (its hook, its check, its result) are run for
    it, as its job, by a broker this process keeps for the attempt (PROCTOR_BROKER).

    Follow-ups: an attempt that did not pass, whose worker ended its turn while the job has
    live monitors (run by `proctor server`) or a follow-up not yet delivered, is not retried
    blind: the job stays live (exited, its monitors running, its worktree kept) and proctor
    waits for the monitors' next follow-up, up to the idle limit (within the worker's wall
    clock from its session's first attempt): "waiting for the monitors of JOB: N live". A
    follow-up resumes the same session with its text as a new attempt in the same worktree
    (the CLI's own resume, such as claude --resume or codex exec resume; never the plain
    command), guarded, graded and landed like any other; none coming, the attempt's verdict
    stands. An attempt that passes lands and ends the job, and its monitors with it; nothing
    is resumed after the job ended.

    Exit 0 when every job passed, 1 when one ran out of attempts and rungs, 2 when it could
    not start or a pass could not be landed, 128+N when interrupted by signal N.
    """
    from proctor.jobs import reap
    from proctor.workers import runner
    from proctor.workers.work import WorkInterrupted
    from proctor.workers.work import work as run_work
    from proctor.workspace import Workspace

    display = Display(sys.stderr) if output == "json" else Display(sys.stdout)

    seen: list[int] = []

    def interrupted(signum, frame):
        # the first signal stops the work; the ones after it (Ctrl-C pressed again) must not cut
        # short the recording and clean-up it started
        if seen:
            return
        seen.append(signum)
        raise runner.Interrupted(signum)

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        with Workspace() as ws:
            reap.end_unheld(ws.store, ws.config["jobs.stale_after"], ws.warn)
            outcomes = run_work(ws, job_id, worker_name, display, again=again)
    except WorkInterrupted as exc:
        display.close()
        click.echo(
            f"proctor work: {exc.message}; the worker was ended and the attempt recorded "
            f"(proctor ls attempts {job_id}); proctor work {job_id} starts it again",
            err=True,
        )
        sys.exit(128 + (exc.signum or 2))
    except KeyboardInterrupt:
        display.close()
        click.echo(f"proctor work: interrupted; proctor ls attempts {job_id} shows what was recorded", err=True)
        sys.exit(130)
    finally:
        display.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    passed = all(o.passed for o in outcomes)
    if not outcomes and output != "json":
        click.echo(f"every child of {job_id} has passed; nothing to work")
    if output == "json":
        emit_json({"passed": passed, "jobs": [o.to_json() for o in outcomes]})
    else:
        for o in outcomes:
            tail = f", committed {o.commit[:12]}" if o.commit else ""
            click.echo(
                f"{o.id}: {'passed' if o.passed else 'failed'} after {len(o.attempts)} attempt(s){tail}"
                + ("" if o.passed else f"; {o.reason}")
            )
    return 0 if passed else 1


# The executors a worker may name are the modules of proctor/workers/executors/ (the config's
# registry reads them); the help says which, so adding an executor needs no edit here.
work.help = (work.help or "").replace("EXECUTORS", _executors_named())
