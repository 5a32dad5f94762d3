"""The Gemini API dialect of the scripted model (Gemini CLI).

`POST <base>/<version>/models/<model>:streamGenerateContent?alt=sse` answers with SSE
`data:` lines, each one GenerateContentResponse chunk (candidates[0].content.parts holding
`text` or `functionCall {name, args, id}`, `finishReason` on the last, `usageMetadata`);
`:generateContent` answers with one GenerateContentResponse. A request offering tools
(`tools[].functionDeclarations`) takes a scripted step; one without tools (the CLI's side calls:
routing, next-speaker checks, summaries) is answered harmlessly. `:countTokens` and model
listings get a small answer.

Gemini CLI points at it with `GOOGLE_GEMINI_BASE_URL=<model.url>` and `GEMINI_API_KEY=dummy`.
"""

from __future__ import annotations

import json

from tests.hosts.model import Dialect, Turn, flatten


def _is_json(text: str | None) -> bool:
    try:
        json.loads(text or "")
    except ValueError:
        return False
    return True


def _instance(schema: dict):
    """A small value satisfying a Gemini (OpenAPI-style) schema."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type") or "OBJECT").upper()
    if kind == "OBJECT":
        props = schema.get("properties") or {}
        return {name: _instance(sub) for name, sub in props.items()}
    if kind == "ARRAY":
        return []
    if kind == "INTEGER":
        return 10
    if kind == "NUMBER":
        return 0.5
    if kind == "BOOLEAN":
        return False
    return "scripted"


def sse_data(data: dict) -> bytes:
    return ("data: " + json.dumps(data, separators=(",", ":")) + "\r\n\r\n").encode()


class Gemini(Dialect):
    name = "gemini"

    def handles(self, method: str, path: str) -> bool:
        head = path.split("?")[0]
        return method == "POST" and (head.endswith(":streamGenerateContent") or head.endswith(":generateContent"))

    def offers_tools(self, body: dict) -> bool:
        tools = body.get("tools")
        if not isinstance(tools, list):
            return False
        return any(isinstance(t, dict) and t.get("functionDeclarations") for t in tools)

    def wants_stream(self, path: str, body: dict) -> bool:
        return path.split("?")[0].endswith(":streamGenerateContent")

    def other(self, method: str, path: str):
        head = path.split("?")[0]
        if head.endswith(":countTokens"):
            return 200, "application/json", b'{"totalTokens": 100}'
        if head.rstrip("/").endswith("/models"):
            return 200, "application/json", json.dumps({"models": []}).encode()
        return None

    def error_body(self, status: int, body: dict | None) -> bytes:
        names = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            403: "PERMISSION_DENIED",
            404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED",
            500: "INTERNAL",
            503: "UNAVAILABLE",
        }
        return json.dumps(
            body
            or {
                "error": {"code": status, "message": f"scripted error {status}", "status": names.get(status, "UNKNOWN")}
            }
        ).encode()

    def render(self, turn: Turn, body: dict, stream: bool, call_ids: list[str]):
        parts: list[dict] = []
        text = turn.text
        config = body.get("generationConfig") if isinstance(body.get("generationConfig"), dict) else {}
        if config.get("responseMimeType") == "application/json" and not turn.tools and not _is_json(text):
            # a side call asking for JSON (routing, next-speaker checks): an instance of its schema
            schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
            text = json.dumps(_instance(schema))
        if text:
            parts.append({"text": text})
        for tool, call_id in zip(turn.tools, call_ids):
            parts.append({"functionCall": {"name": tool.name, "args": tool.args, "id": call_id}})
        usage = {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
        version = "scripted-gemini"
        if not stream:
            return "application/json", json.dumps(
                {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": parts or [{"text": ""}]},
                            "finishReason": "STOP",
                            "index": 0,
                        }
                    ],
                    "usageMetadata": usage,
                    "modelVersion": version,
                }
            ).encode()
        chunks: list[bytes] = []
        # text first, in two pieces (the CLI sees deltas), then each function call, then the end
        text_parts = [p for p in parts if "text" in p]
        call_parts = [p for p in parts if "functionCall" in p]
        for part in text_parts:
            text = part["text"]
            half = max(1, len(text) // 2)
            for piece in (text[:half], text[half:]):
                if piece:
                    chunks.append(
                        sse_data(
                            {
                                "candidates": [{"content": {"role": "model", "parts": [{"text": piece}]}, "index": 0}],
                                "modelVersion": version,
                            }
                        )
                    )
        if call_parts:
            chunks.append(
                sse_data(
                    {
                        "candidates": [{"content": {"role": "model", "parts": call_parts}, "index": 0}],
                        "modelVersion": version,
                    }
                )
            )
        chunks.append(
            sse_data(
                {
                    "candidates": [
                        {"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}
                    ],
                    "usageMetadata": usage,
                    "modelVersion": version,
                }
            )
        )
        return "text/event-stream", chunks

    def told(self, body: dict) -> str:
        """The contents after the model's last turn: function responses (their `response`, the
        `error` or `output` the CLI sends) and any text parts the CLI added."""
        contents = body.get("contents") or []
        last = max((i for i, c in enumerate(contents) if isinstance(c, dict) and c.get("role") == "model"), default=-1)
        out: list[str] = []
        for content in contents[last + 1 :]:
            if not isinstance(content, dict):
                continue
            for part in content.get("parts") or []:
                if not isinstance(part, dict):
                    continue
                if "functionResponse" in part:
                    response = part["functionResponse"] or {}
                    out.append(f"[{response.get('name')}] " + flatten(response.get("response")))
                else:
                    out.append(flatten(part))
        return "\n".join(out)
