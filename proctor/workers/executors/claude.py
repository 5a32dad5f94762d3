"""Claude Code: `claude -p <prompt> --output-format stream-json --verbose`.

The `result` event is the final reply; it is classified by `subtype` (and terminal_reason),
never by `is_error`, which a real error_max_turns result carries as false. The stream is
read to its end: a later result whose origin is a task notification is a follow-up.

Unattended, nobody answers a permission prompt, and `claude -p` refuses whatever would ask
one. Under `--permission-mode acceptEdits` that is every shell command but a few file
commands (Claude Code 2.1.332), so a worker could not run its check or `proctor job exit`.
The worker is started instead with `--allowedTools` naming the tools its prompt asks for
(the shell and the file tools): it works as root without claiming a sandbox
(`bypassPermissions` starts as root only under IS_SANDBOX=1), and tools that reach out
(WebFetch, WebSearch) stay refused. What those tools may touch is the guard's to judge: the
worker is handed proctor's hooks with `--settings`, the same hooks `proctor describe harness
--host claude` prints, so every tool call is judged under the job's lease whether or not
the checkout wires them. They carry `disableAllHooks: false`: settings given on the command
line outrank the checkout's and the person's, so a `.claude/settings.json` that turns hooks
off cannot turn off the worker's guard (a managed policy still can).
"""

from __future__ import annotations

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False
PROVIDER_REASONS = ("api_error", "model_error", "prompt_too_long", "blocking_limit")
# The shell, the file tools, and stopping a background task the guard names. MultiEdit, Glob
# and Grep are tools of older Claude Code versions; a name the CLI does not have is ignored.
ALLOWED_TOOLS = ("Bash", "Edit", "Write", "MultiEdit", "NotebookEdit", "Read", "Glob", "Grep", "TaskStop")
# A command that already says how permissions go keeps its own say.
PERMISSION_FLAGS = ("--permission-mode", "--allowedTools", "--allowed-tools", "--dangerously-skip-permissions")


def hooks_settings(lease: str | None = None) -> str:
    """The hooks `proctor describe harness --host claude` prints, as a `--settings` value,
    with hooks switched on whatever lower settings say.

    With the worker's job, each hook's command is pinned (`pinned_hook`): a checkout's
    `.claude/settings*.json` may set `env` for every command Claude runs, hooks included, and a
    worker can write one mid-session; a PATH, PROCTOR_STATE_DIR or BAGGAGE from there would
    otherwise point the hook at another proctor, an empty store or no lease."""
    import json

    from proctor.hook import claude as wiring

    text = "\n".join(line for line in wiring.wiring().splitlines() if not line.lstrip().startswith("#"))
    settings = json.loads(text)
    settings["disableAllHooks"] = False
    if lease:
        command = pinned_hook(lease)
        for groups in settings["hooks"].values():
            for group in groups:
                for hook in group["hooks"]:
                    hook["command"] = command
    return json.dumps(settings, separators=(",", ":"))


def pinned_hook(lease: str) -> str:
    """`proctor hook claude --lease <job>`, run by this proctor's own interpreter in an
    environment of proctor's choosing (`env -i`): no variable from Claude's settings reaches it."""
    import os
    import shlex
    import sys

    from proctor.paths import cache_base, state_base

    keep = {"PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
            "HOME": os.path.expanduser("~"), "LANG": "C.UTF-8",
            "PROCTOR_STATE_DIR": state_base(), "XDG_CACHE_HOME": os.path.dirname(cache_base())}
    words = ["/usr/bin/env", "-i", *(f"{key}={value}" for key, value in keep.items()),
             sys.executable, "-I", "-m", "proctor", "hook", "claude", "--lease", lease]
    return " ".join(shlex.quote(word) for word in words)


def argv(worker, prompt: str, resume: str | None = None, lease: str | None = None) -> list[str]:
    base = list(worker.command) if worker.command else ["claude"]
    out = base + ["-p", prompt, "--output-format", "stream-json", "--verbose"]
    if not any(word.split("=", 1)[0] in PERMISSION_FLAGS for word in base):
        out += ["--allowedTools", ",".join(ALLOWED_TOOLS)]
    out += ["--settings", hooks_settings(lease)]  # the guard, whatever the checkout wires
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
