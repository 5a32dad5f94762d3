"""Any line-printing program: the prompt on its stdin, its exit is its final reply (the last
lines it printed)."""

from __future__ import annotations

from proctor.workers.executors import Event

PROMPT_ON_STDIN = True
SPEND = "none"  # a program of one's own reports no spend (config reads this line)
TAIL = 20


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    return list(worker.command)


class Parser:
    TAIL = TAIL  # only the last lines matter: they are the reply

    def __init__(self) -> None:
        from collections import deque

        self.tail: deque[str] = deque(maxlen=TAIL)

    def feed(self, line: str) -> list[Event]:
        self.tail.append(line)
        return []

    def close(self, exit_code: int | None) -> list[Event]:
        return [Event("final", text="\n".join(self.tail), value=f"exit {exit_code}")]
