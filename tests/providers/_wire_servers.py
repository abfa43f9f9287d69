"""Local HTTP servers on 127.0.0.1 speaking Gemini's, Anthropic's and OpenAI's wire protocols.

Each server answers from a queue of scripted :class:`Answer` s (text, function calls, or an
HTTP error) and records every request body. :class:`GeminiServer` serves
``POST /v1beta/models/{model}:generateContent`` (JSON) and ``:streamGenerateContent?alt=sse``
(one ``data:`` event per text piece, then the function calls and ``usageMetadata``).
:class:`AnthropicServer` serves ``POST /v1/messages``, as JSON or, for ``"stream": true``, as
the Messages API's event stream (``message_start``, ``content_block_*`` with ``text_delta`` /
``input_json_delta``, ``message_delta``, ``message_stop``). :class:`OpenAIServer` serves
``POST /v1/chat/completions`` (JSON, or ``chat.completion.chunk`` events ending in ``[DONE]``)
and ``POST /v1/responses`` (a response object, or the typed ``response.*`` events). The
official SDKs are pointed at them through ``base_url``. With ``auto`` set, a server whose
queue is empty asks ``auto(request_body)`` for the answer instead of answering "(default)".
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Answer:
    """One scripted answer: ``text`` and/or ``calls`` ``[(name, args)]``, or an error ``status``."""

    text: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: int = 200
    thought: str | None = None
    model: str | None = None  # the model the answer names (default: the one asked for)
    grounding: dict[str, Any] | None = None  # Gemini only: the candidate's groundingMetadata
    redacted: str | None = None  # Anthropic only: a redacted_thinking block's data
    drop_after: int | None = None  # streams: the connection breaks after this many events
    no_stop: bool = False  # Anthropic streams: end cleanly but without message_stop


class _Base:
    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.auto: Any = None
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                with outer._lock:
                    outer.requests.append(body)
                    outer.paths.append(self.path)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                    if outer.answers:
                        answer = outer.answers.pop(0)
                    elif outer.auto is not None:
                        answer = outer.auto(self.path, body)
                    else:
                        answer = Answer(text="(default)")
                outer.handle(self, self.path, body, answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], a: Answer) -> None:
        raise NotImplementedError  # each server overrides it

    @staticmethod
    def send_json(h: BaseHTTPRequestHandler, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    @staticmethod
    def send_sse(
        h: BaseHTTPRequestHandler,
        events: list[tuple[str | None, dict[str, Any]]],
        done: bool = False,
        drop_after: int | None = None,
    ) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Connection", "close")
        if drop_after is not None:  # chunked, so closing mid-body is a broken stream
            h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for i, (name, data) in enumerate(events):
            line = (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"
            if drop_after is not None:
                if i >= drop_after:
                    h.wfile.write(b"100\r\npartial")  # a chunk cut short, then the drop
                    h.wfile.flush()
                    h.close_connection = True
                    return
                raw = line.encode()
                h.wfile.write(f"{len(raw):x}\r\n".encode() + raw + b"\r\n")
            else:
                h.wfile.write(line.encode())
            h.wfile.flush()
        if done:
            h.wfile.write(b"data: [DONE]\n\n")
        h.close_connection = True

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


class GeminiServer(_Base):
    """Gemini API (``generateContent`` / ``streamGenerateContent``) on 127.0.0.1."""

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], a: Answer) -> None:
        model = path.split("/models/")[-1].split(":")[0]
        signed = model.startswith("gemini-3")  # Gemini 3 signs its parts and checks them
        if signed:
            missing = self._unsigned_calls(body)
            if missing:
                self.send_json(
                    h,
                    400,
                    {
                        "error": {
                            "code": 400,
                            "message": f"Function call is missing a thought_signature in "
                            f"functionCall parts: {missing}",
                            "status": "INVALID_ARGUMENT",
                        }
                    },
                )
                return
        if a.status != 200:
            self.send_json(
                h,
                a.status,
                {
                    "error": {
                        "code": a.status,
                        "message": "scripted failure",
                        "status": "UNAVAILABLE",
                    }
                },
            )
            return
        usage = {"promptTokenCount": 11, "candidatesTokenCount": 7, "totalTokenCount": 18}
        calls: list[dict[str, Any]] = [
            {"functionCall": {"id": "fc_" + uuid.uuid4().hex[:8], "name": n, "args": args}}
            for n, args in a.calls
        ]
        thought = [{"text": a.thought, "thought": True}] if a.thought else []
        text_sig: dict[str, Any] = {}
        if signed:
            for part in calls:
                part["thoughtSignature"] = self._sign(part["functionCall"]["id"])
            text_sig = {"thoughtSignature": self._sign("text")}
        if ":streamGenerateContent" in path:
            chunks = [[{"text": p}] for p in _pieces(a.text or "")] if a.text else []
            if chunks and text_sig:
                chunks[-1][0].update(text_sig)
            if thought:
                chunks.insert(0, thought)
            if calls:
                chunks.append(calls)
            events = []
            for i, parts in enumerate(chunks or [[]]):
                cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
                chunk: dict[str, Any] = {"candidates": [cand], "modelVersion": model}
                if i == len(chunks or [[]]) - 1:
                    cand["finishReason"] = "STOP"
                    chunk["usageMetadata"] = usage
                events.append((None, chunk))
            self.send_sse(h, events, drop_after=a.drop_after)
            return
        parts = [*thought, *([{"text": a.text, **text_sig}] if a.text else []), *calls]
        self.send_json(
            h,
            200,
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": parts},
                        "finishReason": "STOP",
                        "index": 0,
                        **({"groundingMetadata": a.grounding} if a.grounding else {}),
                    }
                ],
                "usageMetadata": usage,
                "modelVersion": model,
                "responseId": "resp_" + uuid.uuid4().hex[:8],
            },
        )

    def _sign(self, what: str) -> str:
        sig = base64.b64encode(b"\x00sig:" + what.encode()).decode()
        self.signatures.add(sig)
        return sig

    def _unsigned_calls(self, body: dict[str, Any]) -> list[str]:
        """Names of returned functionCall parts without a signature this server issued."""
        missing = []
        for turn in body.get("contents") or ():
            if turn.get("role") != "model":
                continue
            for part in turn.get("parts") or ():
                if "functionCall" in part and part.get("thoughtSignature") not in self.signatures:
                    missing.append(part["functionCall"].get("name"))
        return missing

    @property
    def signatures(self) -> set[str]:
        """The thought signatures this server has handed out."""
        if not hasattr(self, "_signatures"):
            self._signatures: set[str] = set()
        return self._signatures


class AnthropicServer(_Base):
    """Anthropic Messages API (``POST /v1/messages``, JSON and SSE) on 127.0.0.1."""

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], a: Answer) -> None:
        refusal = self._thinking_refusal(body)
        if refusal:
            self.send_json(
                h,
                400,
                {"type": "error", "error": {"type": "invalid_request_error", "message": refusal}},
            )
            return
        if a.status != 200:
            kind = "overloaded_error" if a.status >= 500 else "invalid_request_error"
            self.send_json(
                h,
                a.status,
                {"type": "error", "error": {"type": kind, "message": f"scripted {a.status}"}},
            )
            return
        blocks: list[dict[str, Any]] = []
        if a.thought:
            blocks.append({"type": "thinking", "thinking": a.thought, "signature": "sig"})
        if a.redacted:
            blocks.append({"type": "redacted_thinking", "data": a.redacted})
        if a.text:
            blocks.append({"type": "text", "text": a.text})
        for name, args in a.calls:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": "toolu_" + uuid.uuid4().hex[:8],
                    "name": name,
                    "input": args,
                }
            )
        stop = "tool_use" if a.calls else "end_turn"
        msg = {
            "id": "msg_" + uuid.uuid4().hex[:8],
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 6},
        }
        if not body.get("stream"):
            self.send_json(h, 200, msg)
            return
        start = {
            **msg,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        }
        events: list[tuple[str | None, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": start})
        ]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                for p in _pieces(b["text"]):
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": i,
                                "delta": {"type": "text_delta", "text": p},
                            },
                        )
                    )
            elif b["type"] == "redacted_thinking":
                events.append(
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": b},
                    )
                )
            elif b["type"] == "thinking":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "thinking_delta", "thinking": b["thinking"]},
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "signature_delta", "signature": "sig"},
                        },
                    )
                )
            else:
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {
                                "type": "tool_use",
                                "id": b["id"],
                                "name": b["name"],
                                "input": {},
                            },
                        },
                    )
                )
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {
                                "type": "input_json_delta",
                                "partial_json": json.dumps(b["input"]),
                            },
                        },
                    )
                )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 6},
                },
            )
        )
        if not a.no_stop:
            events.append(("message_stop", {"type": "message_stop"}))
        self.send_sse(h, events, drop_after=a.drop_after)

    @staticmethod
    def _thinking_refusal(body: dict[str, Any]) -> str | None:
        """The Messages API's rule: with thinking enabled, an assistant turn holding
        ``tool_use`` starts with a signed ``thinking`` (or a ``redacted_thinking``) block."""
        if (body.get("thinking") or {}).get("type") != "enabled":
            return None
        for turn in body.get("messages") or ():
            content = turn.get("content")
            if turn.get("role") != "assistant" or not isinstance(content, list):
                continue
            if not any(b.get("type") == "tool_use" for b in content):
                continue
            first = content[0]
            ok = (first.get("type") == "thinking" and first.get("signature")) or (
                first.get("type") == "redacted_thinking" and first.get("data")
            )
            if not ok:
                return (
                    "messages: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` "
                    "message must start with a thinking block"
                )
        return None


class OpenAIServer(_Base):
    """OpenAI chat completions and Responses API (JSON and SSE) on 127.0.0.1."""

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], a: Answer) -> None:
        if a.status != 200:
            kind = "server_error" if a.status >= 500 else "invalid_request_error"
            self.send_json(
                h, a.status, {"error": {"type": kind, "code": None, "message": "scripted"}}
            )
            return
        model = a.model or body.get("model")
        if path.rstrip("/").endswith("/responses"):
            self._responses(h, body, a, model)
        else:
            self._chat(h, body, a, model)

    def _chat(self, h: BaseHTTPRequestHandler, body: dict[str, Any], a: Answer, model: Any) -> None:
        rid = "chatcmpl-" + uuid.uuid4().hex[:8]
        calls = [
            {
                "id": "call_" + uuid.uuid4().hex[:8],
                "type": "function",
                "function": {"name": n, "arguments": json.dumps(args)},
            }
            for n, args in a.calls
        ]
        finish = "tool_calls" if calls else "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": a.text}
            if calls:
                message["tool_calls"] = calls
            if a.thought:
                message["reasoning_content"] = a.thought
            self.send_json(
                h,
                200,
                {
                    "id": rid,
                    "object": "chat.completion",
                    "created": 1,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                },
            )
            return
        base = {"id": rid, "object": "chat.completion.chunk", "created": 1, "model": model}
        deltas: list[dict[str, Any]] = [{"role": "assistant"}]
        if a.thought:
            deltas.append({"reasoning_content": a.thought})
        deltas += [{"content": p} for p in _pieces(a.text or "")] if a.text else []
        for i, c in enumerate(calls):
            head = {"index": i, "id": c["id"], "type": "function"}
            deltas.append({"tool_calls": [{**head, "function": {"name": c["function"]["name"]}}]})
            deltas.append(
                {
                    "tool_calls": [
                        {"index": i, "function": {"arguments": c["function"]["arguments"]}}
                    ]
                }
            )
        events: list[tuple[str | None, dict[str, Any]]] = [
            (None, {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
            for d in deltas
        ]
        events.append(
            (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        )
        events.append((None, {**base, "choices": [], "usage": usage}))
        self.send_sse(h, events, done=True)

    def _responses(
        self, h: BaseHTTPRequestHandler, body: dict[str, Any], a: Answer, model: Any
    ) -> None:
        output: list[dict[str, Any]] = []
        if a.thought:
            output.append(
                {
                    "type": "reasoning",
                    "id": "rs_" + uuid.uuid4().hex[:8],
                    "summary": [{"type": "summary_text", "text": a.thought}],
                }
            )
        if a.text:
            output.append(
                {
                    "type": "message",
                    "id": "msg_" + uuid.uuid4().hex[:8],
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": a.text, "annotations": []}],
                }
            )
        for n, args in a.calls:
            output.append(
                {
                    "type": "function_call",
                    "id": "fc_" + uuid.uuid4().hex[:8],
                    "call_id": "call_" + uuid.uuid4().hex[:8],
                    "name": n,
                    "arguments": json.dumps(args),
                    "status": "completed",
                }
            )
        resp = {
            "id": "resp_" + uuid.uuid4().hex[:8],
            "object": "response",
            "created_at": 1,
            "model": model,
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 10,
                "output_tokens": 5,
                "total_tokens": 15,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 3 if a.thought else 0},
            },
        }
        if not body.get("stream"):
            self.send_json(h, 200, resp)
            return
        seq = iter(range(1000))
        events: list[tuple[str | None, dict[str, Any]]] = []

        def ev(kind: str, **data: Any) -> None:
            events.append((kind, {"type": kind, "sequence_number": next(seq), **data}))

        ev("response.created", response={**resp, "status": "in_progress", "output": []})
        for i, item in enumerate(output):
            if item["type"] == "reasoning":
                ev(
                    "response.reasoning_summary_text.delta",
                    item_id=item["id"],
                    output_index=i,
                    summary_index=0,
                    delta=item["summary"][0]["text"],
                )
            elif item["type"] == "message":
                for p in _pieces(item["content"][0]["text"]):
                    ev(
                        "response.output_text.delta",
                        item_id=item["id"],
                        output_index=i,
                        content_index=0,
                        delta=p,
                        logprobs=[],
                    )
            ev("response.output_item.done", output_index=i, item=item)
        ev("response.completed", response=resp)
        self.send_sse(h, events)
