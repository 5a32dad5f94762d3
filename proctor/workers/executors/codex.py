"""Codex: `codex exec --json <prompt>` (`codex exec resume <id>` to resume).

`turn.completed` is the final reply (the last agent_message); `turn.failed` is a provider
failure; an `error` event is a failure too.
"""

from __future__ import annotations

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False


def argv(worker, prompt: str, resume: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["codex"]
    out = base + ["exec"]
    if resume:
        out += ["resume", resume]
    out += ["--json"]
    if not worker.command:
        out += ["--full-auto"]  # exec defaults to a read-only sandbox
    if worker.model:
        out += ["-m", worker.model]
    return out + [prompt]


class Parser:
    RELEVANT = (b"thread.started", b"turn.", b"agent_message", b'"error"')

    def __init__(self) -> None:
        self.last_message = ""

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        out: list[Event] = []
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            out.append(Event("session", value=event["thread_id"]))
        elif kind == "item.completed":
            item = event.get("item") if isinstance(event.get("item"), dict) else {}
            if item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                self.last_message = item["text"]
        elif kind == "turn.started":
            out.append(Event("step"))
        elif kind == "turn.completed":
            out.append(Event("final", text=self.last_message, value="completed"))
        elif kind == "turn.failed":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            message = str(error.get("message") or "turn failed")
            out.append(Event("provider_error", text=message))
            out.append(Event("final", text=self.last_message or f"(turn failed: {message})", value="failed"))
        elif kind == "error":
            out.append(Event("provider_error", text=str(event.get("message") or "codex error")))
        return out

    def close(self, exit_code: int | None) -> list[Event]:
        return []
