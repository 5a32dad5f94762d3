"""Claude Code: `claude -p <prompt> --output-format stream-json --verbose`.

The `result` event is the final reply; it is classified by `subtype` (and terminal_reason),
never by `is_error`, which a real error_max_turns result carries as false. The stream is
read to its end: a later result whose origin is a task notification is a follow-up.
"""

from __future__ import annotations

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False
PROVIDER_REASONS = ("api_error", "model_error", "prompt_too_long", "blocking_limit")


def argv(worker, prompt: str, resume: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["claude"]
    out = base + ["-p", prompt, "--output-format", "stream-json", "--verbose"]
    if not worker.command:
        out += ["--permission-mode", "acceptEdits"]  # unattended: edits must not wait for a person
    if worker.model:
        out += ["--model", worker.model]
    if resume:
        out += ["--resume", resume]
    return out


class Parser:
    # Lines that can carry an event; assistant and user lines (most of a stream) only show life.
    RELEVANT = (b'"result"', b'"system"')

    def __init__(self) -> None:
        self.cost = 0.0

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        out: list[Event] = []
        if kind == "system" and event.get("subtype") == "init" and isinstance(event.get("session_id"), str):
            out.append(Event("session", value=event["session_id"]))
        elif kind == "result":
            if isinstance(event.get("session_id"), str):
                out.append(Event("session", value=event["session_id"]))
            if isinstance(event.get("total_cost_usd"), (int, float)):
                self.cost = max(self.cost, float(event["total_cost_usd"]))
                out.append(Event("cost", value=self.cost))
            subtype = event.get("subtype") or ""
            reply = event.get("result") if isinstance(event.get("result"), str) else ""
            if subtype != "success":
                errors = event.get("errors") if isinstance(event.get("errors"), list) else []
                reply = reply or f"(no reply: {subtype}{': ' + '; '.join(map(str, errors)) if errors else ''})"
            origin = event.get("origin") if isinstance(event.get("origin"), dict) else {}
            if origin.get("kind") == "task-notification":
                return out  # a follow-up turn for a finished background task, not the reply
            if event.get("terminal_reason") in PROVIDER_REASONS or subtype == "error_during_execution":
                out.append(Event("provider_error", text=f"{subtype} {event.get('terminal_reason') or ''}".strip()))
            out.append(Event("final", text=reply, value=subtype))
        return out

    def close(self, exit_code: int | None) -> list[Event]:
        return []
