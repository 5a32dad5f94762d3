"""opencode: `opencode run --format json <prompt>`.

Final is a last step ending in `stop` (any reason but tool-calls), or a step with text and
no tool calls when no reason is given; `done`, where a version emits it, is authoritative.
A new step after a final-looking reply means the worker carried on: the idle clock resumes.
An `error` event is fatal: the runner stops the worker 20 seconds later. Its text is in
`error.data.message` (`{error: {name, data: {message, statusCode, isRetryable}}}`).
opencode takes its project directory from `$PWD`, not from its cwd: the runner sets `PWD`.
"""

from __future__ import annotations

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False
SPEND = "usd"  # each step carries its cost in dollars: max_spend_usd is enforced (config reads this line)


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["opencode"]
    out = base + ["run", "--format", "json"]
    if not worker.command:
        out += ["--auto"]  # non-interactive runs reject permission requests unless --auto is given
    if worker.model:
        out += ["--model", worker.model]
    if resume:
        out += ["--session", resume]
    return out + [prompt]


class Parser:
    def __init__(self) -> None:
        self.cost = 0.0
        self.step_text: list[str] = []
        self.step_tools = 0
        self.final_seen = False
        self.last_text = ""

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        part = event.get("part")
        if not isinstance(part, dict):
            part = {}
        out: list[Event] = []
        if isinstance(event.get("sessionID"), str):
            out.append(Event("session", value=event["sessionID"]))
        if kind == "step_start":
            if self.final_seen:
                self.final_seen = False
                out.append(Event("step"))
            self.step_text, self.step_tools = [], 0
        elif kind == "text" and isinstance(part.get("text"), str):
            self.step_text.append(part["text"])
            self.last_text = part["text"]
        elif kind == "tool_use":
            self.step_tools += 1
        elif kind == "step_finish":
            if isinstance(part.get("cost"), (int, float)):
                self.cost += float(part["cost"])
                out.append(Event("cost", value=self.cost))
            reason = part.get("reason")
            final = (reason is not None and reason != "tool-calls") or (
                reason is None and self.step_text and not self.step_tools
            )
            if final:
                self.final_seen = True
                out.append(Event("final", text="\n".join(self.step_text) or self.last_text, value=reason))
        elif kind == "done":
            self.final_seen = True
            out.append(Event("final", text=self.last_text, value="done"))
        elif kind == "error":
            out.append(Event("fatal", text=error_text(event.get("error"))))
        return out

    def partial(self) -> str | None:
        """What the worker has said so far: its current step's text, else its last text."""
        return "\n".join(self.step_text) or self.last_text or None

    def close(self, exit_code: int | None) -> list[Event]:
        return []


def error_text(error) -> str:
    """A session error's message: `{name, data: {message, statusCode, isRetryable}}` since 1.x
    (the text is in data.message), a bare `{message}` or a string in older builds."""
    if not isinstance(error, dict):
        return str(error or "opencode error")
    data = error.get("data")
    if not isinstance(data, dict):
        data = {}
    message = data.get("message") or error.get("message")
    name = error.get("name") if isinstance(error.get("name"), str) else ""
    status = data.get("statusCode")
    text = str(message) if message else (name or "opencode error")
    if name and message:
        text = f"{name}: {text}"
    if isinstance(status, int):
        text += f" (HTTP {status})"
    return text
