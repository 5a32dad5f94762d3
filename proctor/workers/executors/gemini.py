"""Gemini CLI: `gemini -p <prompt> --output-format stream-json --approval-mode yolo`
(`--resume <session_id>` to resume), tested with Gemini CLI 0.61.0.

Unattended: `-p` runs headless, where a tool call that would ask for approval is refused, so
the default command approves every call (`--approval-mode yolo`); proctor's guard, wired as
hooks, still judges each one. Gemini CLI loads a project's `.gemini/settings.json` (where
the guard may be wired) only in a trusted folder and exits 55 in an untrusted one; the worker
is started with `GEMINI_CLI_TRUST_WORKSPACE=true` (ENV), which trusts the checkout proctor
runs it in for that process only. (`--skip-trust` would not do: it runs without the project's
settings, hooks included.)

The stream: `init{session_id, model}`, `message` (the assistant's text in `delta` chunks),
`tool_use`, `tool_result`, `error{severity, message}` (a warning, such as an AfterAgent hook
handing the model a new prompt, or an error), `result{status, stats}`. The result is the final
reply; its `stats` count tokens only, never dollars, so `max_spend_usd` cannot be enforced on
a Gemini worker (`proctor config show` says so). A result with status `error` carrying an API
error (an HTTP 429 after the CLI's own ten retries, a 400, a 5xx; the process then exits with
the status modulo 256: 173, 144) or a network failure is a provider error, not counted
against the worker; exit 55 (an untrusted folder) is a setup problem, not the worker's either.
"""

from __future__ import annotations

import re

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False
ENV = {"GEMINI_CLI_TRUST_WORKSPACE": "true"}  # set in the worker's environment by proctor work
EXIT_UNTRUSTED = 55
PROVIDER_TEXT = re.compile(
    r"API Error|\b(?:status|code)\W{0,3}(?:4(?:08|29)|5\d\d)\b|RESOURCE_EXHAUSTED|UNAVAILABLE|INTERNAL|"
    r"DEADLINE_EXCEEDED|INVALID_ARGUMENT|UNAUTHENTICATED|PERMISSION_DENIED|quota|rate.?limit|"
    r"ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|fetch failed|socket hang up|Retry attempts exhausted",
    re.I)


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["gemini"]
    out = base + ["-p", prompt, "--output-format", "stream-json"]
    if not worker.command:
        out += ["--approval-mode", "yolo"]  # headless: a call needing approval would be refused
    if worker.model:
        out += ["-m", worker.model]
    if resume:
        out += ["--resume", resume]
    return out


class Parser:
    RELEVANT = (b'"init"', b'"message"', b'"tool_use"', b'"tool_result"', b'"result"', b'"error"')

    def __init__(self) -> None:
        self.reply: list[str] = []  # the assistant's text since its last tool call
        self.final_seen = False
        self.tokens = 0

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        out: list[Event] = []
        if kind == "init":
            if isinstance(event.get("session_id"), str) and event["session_id"]:
                out.append(Event("session", value=event["session_id"]))
        elif kind == "message":
            if event.get("role") == "assistant" and isinstance(event.get("content"), str):
                if event.get("delta") is True or not self.reply:
                    self.reply.append(event["content"])
                else:
                    self.reply = [event["content"]]
        elif kind in ("tool_use", "tool_result"):
            self.reply = []
        elif kind == "error":
            # a warning (an AfterAgent hook's new prompt, a loop detected) starts a new reply
            if event.get("severity") == "warning":
                self.reply = []
        elif kind == "result":
            stats = event.get("stats") if isinstance(event.get("stats"), dict) else {}
            if isinstance(stats.get("total_tokens"), int):
                self.tokens = stats["total_tokens"]
            status = event.get("status") if isinstance(event.get("status"), str) else "unknown"
            reply = "".join(self.reply)
            if status != "success":
                error = event.get("error") if isinstance(event.get("error"), dict) else {}
                message = str(error.get("message") or status)
                kind_text = str(error.get("type") or "")
                if PROVIDER_TEXT.search(message) or PROVIDER_TEXT.search(kind_text):
                    out.append(Event("provider_error", text=message[:500]))
                reply = reply or f"(no reply: {status}: {message[:500]})"
            self.final_seen = True
            out.append(Event("final", text=reply, value=status))
        return out

    def close(self, exit_code: int | None) -> list[Event]:
        if exit_code == EXIT_UNTRUSTED and not self.final_seen:
            return [Event("provider_error", text="gemini exited 55: the folder is not trusted "
                                                 "(set GEMINI_CLI_TRUST_WORKSPACE=true)")]
        return []
