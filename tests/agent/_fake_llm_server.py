"""A scripted OpenAI-compatible chat-completions server for the tests (a real HTTP server).

It listens on 127.0.0.1 (stdlib ``ThreadingHTTPServer`` in a daemon thread), records every
request (path, headers, decoded JSON body) and answers each ``POST .../chat/completions`` from
a queue of scripted replies, or from a ``responder(body) -> Reply`` function when the queue is
empty (deterministic answers that depend on what was asked, for crash tests that compare a
resumed run with an uninterrupted one).

A reply whose request asked for ``"stream": true`` is sent as Server-Sent Events the way
OpenAI streams: one ``chat.completion.chunk`` per text piece, tool calls as indexed argument
fragments, a final chunk with ``finish_reason`` (and ``usage`` when asked), then
``data: [DONE]``. ``Reply.chunk_delay_s`` spaces the events (a crash test kills the client
mid-stream).

``ScriptedLLMServer(strict=True)`` also checks the tool-call pairing rule OpenAI enforces:
an assistant message with ``tool_calls`` must be followed directly by one ``tool`` message per
call id, and a ``tool`` message must answer a call of that run of messages. A request breaking
it gets HTTP 400 with an ``invalid_request_error`` body, as OpenAI answers (the reply queue is
left untouched).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Reply",
    "ScriptedLLMServer",
    "error",
    "malformed",
    "pairing_violation",
    "plausible_reply",
    "text",
    "tool_calls",
]


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        status: HTTP status.
        content: the assistant's text (``None``: no text).
        calls: tool calls ``[{"id", "name", "arguments": dict | str}]``.
        headers: extra response headers (``Retry-After``...).
        body: a raw body sent as it is (errors, malformed answers); wins over ``content``.
        chunk_delay_s: seconds between streamed events.
        pieces: how the text is cut for streaming (default: one piece per word).
        reasoning: ``reasoning_content`` of the answer.
        delay_s: seconds to wait before answering at all (timeouts).
    """

    status: int = 200
    content: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    chunk_delay_s: float = 0.0
    pieces: list[str] | None = None
    reasoning: str | None = None
    delay_s: float = 0.0


def text(content: str, **kw: Any) -> Reply:
    """A text answer."""
    return Reply(content=content, **kw)


def tool_calls(
    *calls: tuple[str, dict[str, Any]] | dict[str, Any], content: str | None = None, **kw: Any
) -> Reply:
    """An answer calling tools: each ``(name, args)`` or ``{"id", "name", "arguments"}``."""
    out = []
    for i, c in enumerate(calls):
        if isinstance(c, tuple):
            c = {"name": c[0], "arguments": c[1]}
        out.append({"id": c.get("id") or f"call_{i}_{c['name']}", **c})
    return Reply(content=content, calls=out, **kw)


def error(
    status: int, message: str = "scripted error", headers: dict[str, str] | None = None
) -> Reply:
    """An OpenAI-style error answer."""
    body = json.dumps({"error": {"message": message, "type": "scripted"}}).encode()
    return Reply(status=status, body=body, headers=headers or {})


def pairing_violation(messages: Any) -> str | None:
    """Why ``messages`` breaks OpenAI's tool-call pairing rule, or ``None`` when it does not."""
    if not isinstance(messages, list):
        return None
    pending: list[str] = []  # call ids of the last assistant message not answered yet
    in_results = False  # inside the run of tool messages that follows an assistant's calls
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":
            cid = m.get("tool_call_id")
            if not in_results or cid not in pending:
                return (
                    f"messages[{i}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            pending.remove(cid)
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}"
            )
        calls = m.get("tool_calls") if role == "assistant" else None
        pending = [str(c.get("id")) for c in calls] if calls else []
        in_results = bool(pending)
    if pending:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            f"responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(pending)}"
        )
    return None


def malformed(raw: str = "{not json") -> Reply:
    """A 200 answer whose body is not JSON."""
    return Reply(body=raw.encode())


def _completion(reply: Reply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": _args(c["arguments"])},
            }
            for c in reply.calls
        ]
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if reply.calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _args(a: Any) -> str:
    return a if isinstance(a, str) else json.dumps(a)


def _stream_events(reply: Reply, model: str, include_usage: bool) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning:
        events.append(chunk({"reasoning_content": reply.reasoning}))
    if reply.content:
        pieces = reply.pieces
        if pieces is None:
            words = reply.content.split(" ")
            pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
        events.extend(chunk({"content": p}) for p in pieces)
    for i, c in enumerate(reply.calls):
        args = _args(c["arguments"])
        half = len(args) // 2
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": c["id"],
                            "type": "function",
                            "function": {"name": c["name"], "arguments": args[:half]},
                        }
                    ]
                }
            )
        )
        events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]}))
    events.append(chunk({}, "tool_calls" if reply.calls else "stop"))
    if include_usage:
        events.append(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        )
    return events


_VALUES = {"string": "Lisbon", "integer": 2, "number": 0.9, "boolean": True}


def _example(schema: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties", {})
    return {k: _VALUES.get(v.get("type"), "x") for k, v in props.items()}


def plausible_reply(body: dict[str, Any]) -> Reply:
    """A deterministic stand-in for a model, for examples and docs: with a JSON schema asked
    for, a JSON object of it; a router prompt ("one word"), one word; a request for a story, a
    long slowly streamed text; with tools offered, a call of the first one (a handoff tool only
    when it has no other) with sample arguments; after a tool result, an answer quoting it."""
    messages = body.get("messages") or [{"role": "user", "content": ""}]
    system = " ".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    last = messages[-1]
    content = str(last.get("content") or "")
    tools = [t["function"] for t in body.get("tools") or []]
    plain = [t for t in tools if not t["name"].startswith("transfer_to_")]
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema" and last.get("role") != "tool":
        return text(json.dumps(_example(fmt["json_schema"]["schema"])))
    if "one word" in system:
        low = content.lower()
        return text("CV" if "cv" in low else "JD" if "jd" in low else "OTHER")
    if last.get("role") == "user" and "story" in content:
        return text(" ".join(f"word{i}" for i in range(200)), chunk_delay_s=0.03)
    handed_off = last.get("role") == "tool" and content.startswith("Handed off")
    if (last.get("role") == "user" or handed_off) and tools:
        target = plain[0] if plain else tools[0]
        return tool_calls((target["name"], _example(target.get("parameters", {}))))
    if last.get("role") == "tool":
        return text(f"Here is what I found: {content}")
    if "summar" in system.lower():
        return text("Summary: the user and the assistant talked.")
    return text("Happy to help with that.")


class ScriptedLLMServer:
    """The server (see the module docstring). Use as a context manager or call ``close()``.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``.
        requests: ``[{"path", "headers", "body"}]`` in arrival order.
        replies: the queue of scripted replies (``add`` appends).
        responder: answers when the queue is empty; default: a 500 error.
        strict: answer 400 (as OpenAI does) to a conversation breaking the tool-call
            pairing rule (module docstring).
    """

    def __init__(
        self, responder: Callable[[dict[str, Any]], Reply] | None = None, *, strict: bool = False
    ) -> None:
        self.strict = strict
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.responder = responder
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                violation = (
                    pairing_violation(body.get("messages"))
                    if server.strict and isinstance(body, dict)
                    else None
                )
                with server._lock:
                    server.requests.append(
                        {"path": self.path, "headers": dict(self.headers.items()), "body": body}
                    )
                    server.times.append(time.monotonic())
                    if violation is not None:
                        reply = Reply(
                            status=400,
                            body=json.dumps(
                                {
                                    "error": {
                                        "message": violation,
                                        "type": "invalid_request_error",
                                        "param": "messages",
                                        "code": None,
                                    }
                                }
                            ).encode(),
                        )
                    elif server.replies:
                        reply = server.replies.pop(0)
                    elif server.responder is not None:
                        reply = None
                    else:
                        reply = error(500, "no scripted reply left")
                if reply is None:
                    assert server.responder is not None
                    reply = server.responder(body if isinstance(body, dict) else {})
                self._answer(reply, body if isinstance(body, dict) else {})

            def _answer(self, reply: Reply, body: dict[str, Any]) -> None:
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                model = str(body.get("model") or "scripted")
                if reply.body is not None or reply.status >= 300 or not body.get("stream"):
                    data = (
                        reply.body
                        if reply.body is not None
                        else json.dumps(_completion(reply, model)).encode()
                    )
                    try:
                        self.send_response(reply.status)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        for k, v in reply.headers.items():
                            self.send_header(k, v)
                        self.end_headers()
                        self.wfile.write(data)
                    except (BrokenPipeError, ConnectionResetError):
                        self.close_connection = True  # the client gave up (a timeout test)
                    return
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for ev in _stream_events(reply, model, include_usage):
                        self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
                        self.wfile.flush()
                        if reply.chunk_delay_s:
                            time.sleep(reply.chunk_delay_s)
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def add(self, *replies: Reply) -> ScriptedLLMServer:
        """Queue replies, answered in order before the responder is asked."""
        with self._lock:
            self.replies.extend(replies)
        return self

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The decoded JSON bodies of the requests, in arrival order."""
        return [r["body"] for r in self.requests]

    def close(self) -> None:
        """Stop serving and release the port."""
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ScriptedLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
