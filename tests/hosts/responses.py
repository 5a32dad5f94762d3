"""The OpenAI Responses API dialect of the scripted model (what Codex speaks).

POST <base_url>/responses with `stream: true`; the answer is server-sent events as the real API
sends them: response.created, response.in_progress, then per output item
response.output_item.added, its deltas (response.content_part.added, response.output_text.delta,
response.output_text.done, response.content_part.done for a message;
response.function_call_arguments.delta/done for a function call;
response.custom_tool_call_input.delta/done for a freeform tool such as Codex's `apply_patch`),
response.output_item.done, and finally response.completed with the whole response and its usage.

A `Tool(name, args)` becomes a `function_call` whose arguments are `json.dumps(args)`, unless the
request declares that tool as `type: "custom"` (freeform): then it is a `custom_tool_call` whose
input is `args["input"]` (Codex's `apply_patch` takes the patch text this way).
"""

from __future__ import annotations

import json
import time

from tests.hosts.model import Dialect, Turn, flatten, sse

USAGE = {
    "input_tokens": 100,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 120,
}


def _tool_kinds(body: dict) -> dict[str, str]:
    kinds = {}
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            name = tool.get("name") or (tool.get("function") or {}).get("name")
            if isinstance(name, str):
                kinds[name] = tool.get("type") or "function"
    return kinds


class Responses(Dialect):
    name = "responses"

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.split("?")[0].rstrip("/").endswith("/responses")

    def offers_tools(self, body: dict) -> bool:
        return bool(body.get("tools"))

    def wants_stream(self, path: str, body: dict) -> bool:
        return body.get("stream") is not False

    def other(self, method: str, path: str):
        if path.split("?")[0].rstrip("/").endswith("/models"):
            return 200, "application/json", json.dumps({"object": "list", "data": [], "models": []}).encode()
        return None

    def error_body(self, status: int, body: dict | None) -> bytes:
        return json.dumps(
            body
            or {"error": {"message": f"scripted error {status}", "type": "invalid_request_error", "code": "scripted"}}
        ).encode()

    def items(self, turn: Turn, body: dict, call_ids: list[str]) -> list[dict]:
        kinds = _tool_kinds(body)
        stamp = f"{time.time_ns():x}"
        out: list[dict] = []
        if turn.text:
            out.append(
                {
                    "id": f"msg_{stamp}",
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
                }
            )
        for index, (tool, call_id) in enumerate(zip(turn.tools, call_ids)):
            if kinds.get(tool.name) == "custom":
                out.append(
                    {
                        "id": f"ctc_{stamp}_{index}",
                        "type": "custom_tool_call",
                        "status": "completed",
                        "call_id": call_id,
                        "name": tool.name,
                        "input": str(tool.args.get("input", "")),
                    }
                )
            else:
                out.append(
                    {
                        "id": f"fc_{stamp}_{index}",
                        "type": "function_call",
                        "status": "completed",
                        "call_id": call_id,
                        "name": tool.name,
                        "arguments": json.dumps(tool.args),
                    }
                )
        return out

    def render(self, turn: Turn, body: dict, stream: bool, call_ids: list[str]):
        model = body.get("model") or "gpt-scripted"
        response_id = f"resp_{time.time_ns():x}"
        items = self.items(turn, body, call_ids)
        head = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "status": "in_progress",
            "output": [],
            "usage": None,
        }
        done = {**head, "status": "completed", "output": items, "usage": USAGE}
        if not stream:
            return "application/json", json.dumps(done).encode()
        seq = iter(range(1 << 30))
        chunks = [
            sse("response.created", {"type": "response.created", "sequence_number": next(seq), "response": head}),
            sse(
                "response.in_progress", {"type": "response.in_progress", "sequence_number": next(seq), "response": head}
            ),
        ]
        for index, item in enumerate(items):
            base = {"output_index": index}
            if item["type"] == "message":
                text = item["content"][0]["text"]
                chunks.append(
                    sse(
                        "response.output_item.added",
                        {
                            "type": "response.output_item.added",
                            "sequence_number": next(seq),
                            **base,
                            "item": {**item, "status": "in_progress", "content": []},
                        },
                    )
                )
                part = {"item_id": item["id"], **base, "content_index": 0}
                chunks.append(
                    sse(
                        "response.content_part.added",
                        {
                            "type": "response.content_part.added",
                            "sequence_number": next(seq),
                            **part,
                            "part": {"type": "output_text", "text": "", "annotations": []},
                        },
                    )
                )
                chunks.append(
                    sse(
                        "response.output_text.delta",
                        {"type": "response.output_text.delta", "sequence_number": next(seq), **part, "delta": text},
                    )
                )
                chunks.append(
                    sse(
                        "response.output_text.done",
                        {"type": "response.output_text.done", "sequence_number": next(seq), **part, "text": text},
                    )
                )
                chunks.append(
                    sse(
                        "response.content_part.done",
                        {
                            "type": "response.content_part.done",
                            "sequence_number": next(seq),
                            **part,
                            "part": item["content"][0],
                        },
                    )
                )
            elif item["type"] == "function_call":
                chunks.append(
                    sse(
                        "response.output_item.added",
                        {
                            "type": "response.output_item.added",
                            "sequence_number": next(seq),
                            **base,
                            "item": {**item, "status": "in_progress", "arguments": ""},
                        },
                    )
                )
                chunks.append(
                    sse(
                        "response.function_call_arguments.delta",
                        {
                            "type": "response.function_call_arguments.delta",
                            "sequence_number": next(seq),
                            "item_id": item["id"],
                            **base,
                            "delta": item["arguments"],
                        },
                    )
                )
                chunks.append(
                    sse(
                        "response.function_call_arguments.done",
                        {
                            "type": "response.function_call_arguments.done",
                            "sequence_number": next(seq),
                            "item_id": item["id"],
                            **base,
                            "arguments": item["arguments"],
                        },
                    )
                )
            else:
                chunks.append(
                    sse(
                        "response.output_item.added",
                        {
                            "type": "response.output_item.added",
                            "sequence_number": next(seq),
                            **base,
                            "item": {**item, "status": "in_progress", "input": ""},
                        },
                    )
                )
                chunks.append(
                    sse(
                        "response.custom_tool_call_input.delta",
                        {
                            "type": "response.custom_tool_call_input.delta",
                            "sequence_number": next(seq),
                            "item_id": item["id"],
                            **base,
                            "delta": item["input"],
                        },
                    )
                )
                chunks.append(
                    sse(
                        "response.custom_tool_call_input.done",
                        {
                            "type": "response.custom_tool_call_input.done",
                            "sequence_number": next(seq),
                            "item_id": item["id"],
                            **base,
                            "input": item["input"],
                        },
                    )
                )
            chunks.append(
                sse(
                    "response.output_item.done",
                    {"type": "response.output_item.done", "sequence_number": next(seq), **base, "item": item},
                )
            )
        chunks.append(
            sse("response.completed", {"type": "response.completed", "sequence_number": next(seq), "response": done})
        )
        return "text/event-stream", chunks

    def told(self, body: dict) -> str:
        """The input items after the model's last output (its message or tool calls): tool
        outputs, and the developer and user messages Codex adds (hook context, Stop blocks)."""
        items = [i for i in body.get("input") or () if isinstance(i, dict)]
        model_kinds = ("function_call", "custom_tool_call", "reasoning")
        last = max(
            (
                n
                for n, i in enumerate(items)
                if i.get("type") in model_kinds or (i.get("type") == "message" and i.get("role") == "assistant")
            ),
            default=-1,
        )
        out = []
        for item in items[last + 1 :]:
            kind = item.get("type")
            if kind in ("function_call_output", "custom_tool_call_output"):
                out.append(flatten(item.get("output")))
            elif kind == "message":
                out.append(f"[{item.get('role')}] " + flatten(item.get("content")))
            else:
                out.append(flatten(item))
        return "\n".join(out)
