"""A scripted model server on 127.0.0.1, one per test, speaking one host's API dialect.

A scenario is a list of steps. Each request that offers tools (a host's main loop or a
subagent's) takes the first unconsumed step whose `when` matches it; a request without tools
(titles, summaries, a host's side calls) is answered harmlessly and takes nothing. Every
request is recorded, so a test asserts what the model was told after each tool call: a deny
reason, an advisory, a follow-up.

    model = ScriptedModel(Anthropic(), [
        Turn(tools=[Tool("Write", {"file_path": "src/b.py", "content": "x\\n"})]),
        Turn(text="done"),
    ])
    ...
    assert "lease-write-scope" in model.told_after(1)

Steps: `Turn(text, tools)` (the model's answer); `Stall(seconds, then=Turn)` (the answer
comes late, or never when `then` is None and the client gives up); `HttpError(status, body)`;
a function of the recorded request returning one of these (a step computed from what the host
sent, e.g. citing an id a tool result carried).
When the script is used up, every further tool-offering request gets `Turn(text="done.")`.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Tool:
    name: str
    args: dict
    id: str | None = None  # filled in when served, unique per call


@dataclass
class Turn:
    text: str | None = None
    tools: list[Tool] = field(default_factory=list)
    when: Callable[[dict], bool] | None = None  # (recorded request) -> whether this step answers it


@dataclass
class Stall:
    seconds: float
    then: Turn | None = None
    when: Callable[[dict], bool] | None = None


@dataclass
class HttpError:
    status: int
    body: dict | None = None
    when: Callable[[dict], bool] | None = None


DONE = Turn(text="done.")


class Dialect:
    """One API's wire format. Subclasses answer `paths`, `offers_tools`, `render` and
    `told` (the tool results and system/developer messages since the model's last turn)."""

    name = "?"

    def handles(self, method: str, path: str) -> bool:
        raise NotImplementedError

    def offers_tools(self, body: dict) -> bool:
        raise NotImplementedError

    def wants_stream(self, path: str, body: dict) -> bool:
        return bool(body.get("stream"))

    def render(self, turn: Turn, body: dict, stream: bool, call_ids: list[str]) -> tuple[str, bytes | list[bytes]]:
        """(content type, the whole body, or the SSE chunks in order)."""
        raise NotImplementedError

    def told(self, body: dict) -> str:
        """Everything the host sent the model after the model's last turn, as one text."""
        raise NotImplementedError

    def error_body(self, status: int, body: dict | None) -> bytes:
        return json.dumps(body or {"error": {"message": f"scripted error {status}", "code": status}}).encode()

    def other(self, method: str, path: str) -> tuple[int, str, bytes] | None:
        """A request that is not a model call (model lists, counts): an answer, or None for 404."""
        return None


class ScriptedModel:
    def __init__(self, dialect: Dialect, steps: list, default: Turn = DONE) -> None:
        self.dialect = dialect
        self.steps = list(steps)
        self.used = [False] * len(self.steps)
        self.default = default
        self.requests: list[dict] = []  # every request: {"method", "path", "body", "tools", "step"}
        self.lock = threading.Lock()
        self.counter = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                model._serve(self, "GET")

            def do_POST(self) -> None:
                model._serve(self, "POST")

            def do_HEAD(self) -> None:
                model._serve(self, "HEAD")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    # --- what a test reads ---------------------------------------------------------------

    def main_requests(self) -> list[dict]:
        """The tool-offering requests, in arrival order."""
        with self.lock:
            return [r for r in self.requests if r["tools"]]

    def told_after(self, step: int) -> str:
        """What the host told the model in the request answered by step `step + 1`, i.e. the
        results of the tool calls that step `step` made (0-based steps)."""
        for request in self.main_requests():
            if request.get("step") == step + 1 or (
                request.get("step") is None and step + 1 >= len(self.steps) and request.get("after") == step
            ):
                return self.dialect.told(request["body"])
        raise AssertionError(f"no request followed step {step}; requests: {self.summary()}")

    def told_all(self) -> str:
        """Everything the host told the model after any model turn, across every request."""
        return "\n".join(self.dialect.told(r["body"]) for r in self.main_requests())

    def all_text(self) -> str:
        with self.lock:
            return "\n".join(json.dumps(r["body"]) for r in self.requests)

    def consumed(self) -> int:
        with self.lock:
            return sum(self.used)

    def wait_consumed(self, count: int, timeout: float = 60) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.consumed() >= count:
                return True
            time.sleep(0.05)
        return False

    def summary(self) -> str:
        with self.lock:
            return "; ".join(
                f"{r['method']} {r['path']} tools={r['tools']} step={r.get('step')}" for r in self.requests
            )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "ScriptedModel":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- serving -------------------------------------------------------------------------

    def _next(self, record: dict):
        with self.lock:
            for index, step in enumerate(self.steps):
                if self.used[index]:
                    continue
                when = getattr(step, "when", None)
                if when is not None and not when(record):
                    continue
                self.used[index] = True
                record["step"] = index
                return step
            record["step"] = None
            record["after"] = len(self.steps) - 1
            return self.default

    def _ids(self, turn: Turn) -> list[str]:
        ids = []
        with self.lock:
            for tool in turn.tools:
                self.counter += 1
                ids.append(tool.id or f"call_{self.counter:04d}_{int(time.time() * 1000) % 100000:05d}")
        return ids

    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = _read_chunked(handler.rfile)
        path = handler.path
        try:
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except ValueError:
            body = {}
        if not self.dialect.handles(method, path):
            answer = self.dialect.other(method, path)
            status, ctype, data = answer if answer else (404, "application/json", b'{"error":"not found"}')
            with self.lock:
                self.requests.append({"method": method, "path": path, "body": body, "tools": False, "other": True})
            _send(handler, status, ctype, data)
            return
        tools = self.dialect.offers_tools(body)
        record = {
            "method": method,
            "path": path,
            "body": body,
            "tools": tools,
            "headers": dict(handler.headers.items()),
        }
        step = self._next(record) if tools else Turn(text="ok")
        if callable(step):
            step = step(record)
        with self.lock:
            self.requests.append(record)
        stream = self.dialect.wants_stream(path, body)
        if isinstance(step, HttpError):
            _send(handler, step.status, "application/json", self.dialect.error_body(step.status, step.body))
            return
        if isinstance(step, Stall):
            time.sleep(step.seconds)
            if step.then is None:
                handler.close_connection = True
                return
            step = step.then
        ids = self._ids(step)
        record["call_ids"] = ids
        ctype, payload = self.dialect.render(step, body, stream, ids)
        try:
            if isinstance(payload, list):
                handler.send_response(200)
                handler.send_header("Content-Type", ctype)
                handler.send_header("Cache-Control", "no-cache")
                handler.send_header("Transfer-Encoding", "chunked")
                handler.end_headers()
                for chunk in payload:
                    handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    handler.wfile.flush()
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
            else:
                _send(handler, 200, ctype, payload)
        except (BrokenPipeError, ConnectionResetError):
            pass


def _send(handler, status: int, ctype: str, data: bytes) -> None:
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", ctype)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass


def _read_chunked(rfile) -> bytes:
    out = b""
    while True:
        size_line = rfile.readline().strip()
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            rfile.readline()
            return out
        out += rfile.read(size)
        rfile.readline()


def sse(event: str | None, data: dict) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()


def flatten(value) -> str:
    """Every string inside a JSON value, joined by newlines (for 'was the model told X')."""
    out: list[str] = []

    def walk(v) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return "\n".join(out)


# --- Anthropic Messages (Claude Code) -------------------------------------------------------


class Anthropic(Dialect):
    """POST /v1/messages, streaming exactly as the real API: message_start, ping,
    content_block_start/delta/stop per block, message_delta, message_stop."""

    name = "anthropic"

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.split("?")[0].rstrip("/").endswith("/v1/messages")

    def offers_tools(self, body: dict) -> bool:
        return bool(body.get("tools"))

    def other(self, method: str, path: str):
        if path.split("?")[0].endswith("/v1/messages/count_tokens"):
            return 200, "application/json", b'{"input_tokens": 100}'
        if path.split("?")[0].rstrip("/").endswith("/v1/models"):
            return 200, "application/json", json.dumps({"data": [], "has_more": False}).encode()
        return None

    def render(self, turn: Turn, body: dict, stream: bool, call_ids: list[str]):
        model = body.get("model") or "claude-scripted"
        message_id = "msg_" + (call_ids[0] if call_ids else f"{time.time_ns():x}")[-20:]
        blocks: list[dict] = []
        if turn.text:
            blocks.append({"type": "text", "text": turn.text})
        for tool, call_id in zip(turn.tools, call_ids):
            blocks.append({"type": "tool_use", "id": "toolu_" + call_id, "name": tool.name, "input": tool.args})
        stop = "tool_use" if turn.tools else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not stream:
            return "application/json", json.dumps(
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                }
            ).encode()
        chunks = [
            sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            ),
            sse("ping", {"type": "ping"}),
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                chunks.append(
                    sse(
                        "content_block_start",
                        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
                    )
                )
                chunks.append(
                    sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    )
                )
            else:
                chunks.append(
                    sse(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {
                                "type": "tool_use",
                                "id": block["id"],
                                "name": block["name"],
                                "input": {},
                            },
                        },
                    )
                )
                chunks.append(
                    sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                        },
                    )
                )
            chunks.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        chunks.append(
            sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            )
        )
        chunks.append(sse("message_stop", {"type": "message_stop"}))
        return "text/event-stream", chunks

    def told(self, body: dict) -> str:
        """The messages after the last assistant message: tool results (with is_error marked)
        and the system messages Claude Code adds for additionalContext and Stop blocks."""
        messages = body.get("messages") or []
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        out = []
        for message in messages[last + 1 :]:
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        mark = "[error] " if block.get("is_error") else ""
                        out.append(mark + flatten(block.get("content")))
                    else:
                        out.append(flatten(block))
            else:
                out.append(flatten(content))
        return "\n".join(out)
