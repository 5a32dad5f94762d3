"""Any line-printing program: the prompt on its stdin, its exit is its final reply (the last
lines it printed)."""

from __future__ import annotations

from proctor.workers.executors import Event

PROMPT_ON_STDIN = True
TAIL = 20


def argv(worker, prompt: str, resume: str | None = None) -> list[str]:
    return list(worker.command)


class Parser:
    def __init__(self) -> None:
        self.tail: list[str] = []

    def feed(self, line: str) -> list[Event]:
        self.tail = (self.tail + [line])[-TAIL:]
        return []

    def close(self, exit_code: int | None) -> list[Event]:
        return [Event("final", text="\n".join(self.tail), value=f"exit {exit_code}")]
