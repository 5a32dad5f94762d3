"""Claude Code: `claude -p <prompt> --output-format stream-json --verbose`.

The final reply is the main agent's Stop. Claude Code 2.1.332 withholds its `result` until its
background agents end, up to ten minutes after the main agent finished its turn; but since
proctor always hands Claude its hooks, the stream carries the Stop hook's response
(`{"type":"system","subtype":"hook_response","hook_event":"Stop",...,"output","exit_code"}`)
the moment the main agent ends its turn (a subagent's is SubagentStop). A Stop that did not
block (exit code 0 and an output that is not a JSON object with `"decision": "block"`; exit
code 2 blocks too) is the final reply, Event("final", value="stop"), whose text is the last
text of the main thread before it: the last `assistant` event whose `parent_tool_use_id` is
null. A Stop that blocked (a monitor's follow-up, say) means the agent carries on:
Event("step"). The later `result` only confirms it (Event("confirm")): its text and subtype
become the reply's, and its cost arrives with it. Without a Stop before it (a checkout whose
hooks are off, an error ending the turn), the `result` is the final reply, as before; it is
classified by `subtype` (and terminal_reason), never by `is_error`, which a real
error_max_turns result carries as false. The stream is read to its end: a later result whose
origin is a task notification is a follow-up, not the reply.

Parsing stays cheap: the runner feeds only lines holding one of RELEVANT (`"result"`,
`"Stop"`, and `"init"` until the session is known); between them it hands `skim` the stretch
of lines it did not feed, where the last main-thread assistant line with text is found with a
backward byte search and kept raw, decoded only when a Stop, `partial()` or `close()` wants
its text.

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

import json

from proctor.workers.executors import Event, decode

PROMPT_ON_STDIN = False
SPEND = "usd"  # its result carries total_cost_usd: max_spend_usd is enforced (config reads this line)
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

    from proctor.hosts import claude as wiring

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
    """`proctor hook claude --lease <job>`, pinned (executors.pinned_hook)."""
    from proctor.workers.executors import pinned_hook as pinned

    return pinned(lease, "claude")


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
    # Lines that can carry an event (the init only until the session is known: an instance
    # drops it then). Assistant and user lines, most of a stream, are skimmed (`skim`).
    RELEVANT: tuple[bytes, ...] = (b'"result"', b'"Stop"', b'"init"')

    def __init__(self) -> None:
        self.cost = 0.0
        self.session: str | None = None
        self.final_sent = False  # a final reply handed out, and no step since
        self.result_seen = False  # the result arrived: from then on only the grace window counts
        self.main_raw: bytes | None = None  # the last main-thread assistant line with text, undecoded
        self.main_text: str | None = None

    def feed(self, line: str) -> list[Event]:
        event = decode(line)
        if event is None:
            return []
        kind = event.get("type")
        out: list[Event] = []
        if kind == "assistant":
            if event.get("parent_tool_use_id") is None:
                text = _text(event)
                if text is not None:
                    self.main_raw, self.main_text = None, text
            self._session(event, out, quiet=True)
        elif kind == "system":
            subtype = event.get("subtype")
            if subtype == "init":
                self._session(event, out)
            elif subtype == "hook_response" and event.get("hook_event") == "Stop":
                if self.result_seen:
                    pass  # after the result, output buys no time (the spec's rule for Claude)
                elif _blocked(event):
                    self.final_sent = False
                    out.append(Event("step"))  # the Stop hook kept it working
                elif not self.final_sent:  # a Stop after the reply ends a follow-up turn (a task notification)
                    self.final_sent = True
                    out.append(Event("final", text=self.partial() or "", value="stop"))
        elif kind == "result":
            self._session(event, out)
            if isinstance(event.get("total_cost_usd"), (int, float)):
                self.cost = max(self.cost, float(event["total_cost_usd"]))
                out.append(Event("cost", value=self.cost))
            subtype = event.get("subtype") or ""
            reply = event.get("result") if isinstance(event.get("result"), str) else ""
            if subtype != "success":
                errors = event.get("errors") if isinstance(event.get("errors"), list) else []
                reply = reply or f"(no reply: {subtype}{': ' + '; '.join(map(str, errors)) if errors else ''})"
            origin = event.get("origin")
            if not isinstance(origin, dict):
                origin = {}
            if origin.get("kind") == "task-notification":
                return out  # a follow-up turn for a finished background task, not the reply
            if event.get("terminal_reason") in PROVIDER_REASONS or subtype == "error_during_execution":
                out.append(Event("provider_error", text=f"{subtype} {event.get('terminal_reason') or ''}".strip()))
            out.append(Event("confirm" if self.final_sent else "final", text=reply, value=subtype))
            self.final_sent = self.result_seen = True
        return out

    def _session(self, event: dict, out: list, quiet: bool = False) -> None:
        session = event.get("session_id")
        if isinstance(session, str) and session and session != self.session:
            if quiet and self.session is not None:
                return
            self.session = session
            self.RELEVANT = (b'"result"', b'"Stop"')  # the init carries nothing more
            out.append(Event("session", value=session))

    def skim(self, data, start: int, end: int) -> None:
        """`data[start:end]`, whole lines the runner did not feed (it holds none of RELEVANT):
        keep the last main-thread assistant line with text in it, undecoded."""
        high = end
        while high > start:
            at = data.rfind(b'"assistant"', start, high)
            if at < 0:
                return
            begin = data.rfind(b"\n", start, at) + 1 or start
            stop = data.find(b"\n", at, end)
            line = bytes(data[begin : stop if stop >= 0 else end])
            if _main_text_line(line):
                self.main_raw = line  # its text replaces main_text once decoded
                return
            high = begin

    def partial(self) -> str | None:
        """What the main agent has said so far: the text of its last assistant line."""
        if self.main_raw is not None:
            event = decode(self.main_raw.decode("utf-8", "replace"))
            text = _text(event) if event is not None and event.get("parent_tool_use_id") is None else None
            self.main_raw = None
            if text is not None:
                self.main_text = text
            if event is not None and self.session is None and isinstance(event.get("session_id"), str):
                self.session = event["session_id"]
        return self.main_text

    def close(self, exit_code: int | None) -> list[Event]:
        if self.session is None:
            self.partial()  # the session is in every line; the kept one says it when no init was read
            if self.session is not None:
                return [Event("session", value=self.session)]
        return []


def _text(event: dict) -> str | None:
    """The text of an assistant event, or None when it holds none (a tool call, thinking)."""
    message = event.get("message")
    if not isinstance(message, dict):
        message = {}
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def _main_text_line(line: bytes) -> bool:
    """Whether a raw line looks like a main-thread assistant event with text (decoded later)."""
    return (
        (b'"type":"assistant"' in line or b'"type": "assistant"' in line)
        and (b'"type":"text"' in line or b'"type": "text"' in line)
        and (
            b'"parent_tool_use_id":null' in line
            or b'"parent_tool_use_id": null' in line
            or b'"parent_tool_use_id"' not in line
        )
    )


def _blocked(event: dict) -> bool:
    """Whether a Stop hook's response kept the agent working: exit code 2, or an output that is a
    JSON object with "decision": "block"."""
    if event.get("exit_code") == 2:
        return True
    for key in ("output", "stdout"):
        text = event.get(key)
        if isinstance(text, str) and text.strip():
            try:
                decision = json.loads(text)
            except ValueError:
                continue
            return isinstance(decision, dict) and decision.get("decision") == "block"
    return False
