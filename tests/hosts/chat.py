"""The OpenAI chat-completions dialect (opencode's `@ai-sdk/openai-compatible` provider).

`POST .../chat/completions`: with `stream: true` the answer is `chat.completion.chunk` events
on SSE (a role chunk, `delta.content`, `delta.tool_calls` opened with index, id and function
name and then filled with the arguments, a last chunk with `finish_reason` and `usage`, then
`data: [DONE]`); without it, one `chat.completion` object.

    model = ScriptedModel(Chat(), [Turn(tools=[Tool("bash", {"command": "echo hi"})]), Turn("done")])
"""

from __future__ import annotations

import json
import time

from tests.hosts.model import Dialect, Turn, flatten


def _data(payload) -> bytes:
    body = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return ("data: " + body + "\n\n").encode()


class Chat(Dialect):
    name = "chat"

    def handles(self, method: str, path: str) -> bool:
        return method == "POST" and path.split("?")[0].rstrip("/").endswith("/chat/completions")

    def offers_tools(self, body: dict) -> bool:
        return bool(body.get("tools"))

    def other(self, method: str, path: str):
        if path.split("?")[0].rstrip("/").endswith("/models"):
            return 200, "application/json", json.dumps({"object": "list", "data": []}).encode()
        return None

    def error_body(self, status: int, body: dict | None) -> bytes:
        return json.dumps(
            body or {"error": {"message": f"scripted error {status}", "type": "invalid_request_error", "code": None}}
        ).encode()

    def render(self, turn: Turn, body: dict, stream: bool, call_ids: list[str]):
        model = body.get("model") or "scripted"
        completion_id = "chatcmpl-" + f"{time.time_ns():x}"[-16:]
        created = int(time.time())
        finish = "tool_calls" if turn.tools else "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        calls = [
            {"id": call_id, "type": "function", "function": {"name": tool.name, "arguments": json.dumps(tool.args)}}
            for tool, call_id in zip(turn.tools, call_ids)
        ]
        if not stream:
            message: dict = {"role": "assistant", "content": turn.text if turn.text else None}
            if calls:
                message["tool_calls"] = calls
            return "application/json", json.dumps(
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            ).encode()

        def chunk(delta: dict, finish_reason=None, **extra) -> bytes:
            return _data(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                    **extra,
                }
            )

        chunks = [chunk({"role": "assistant", "content": ""})]
        if turn.text:
            chunks.append(chunk({"content": turn.text}))
        for index, call in enumerate(calls):
            chunks.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            chunks.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]})
            )
        chunks.append(chunk({}, finish, usage=usage))
        chunks.append(_data("[DONE]"))
        return "text/event-stream", chunks

    def told(self, body: dict) -> str:
        """The messages after the last assistant message: tool results and any user or
        system text the host added."""
        messages = body.get("messages") or []
        last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
        out = []
        for message in messages[last + 1 :]:
            content = message.get("content")
            out.append(flatten(content) if not isinstance(content, str) else content)
        return "\n".join(out)
