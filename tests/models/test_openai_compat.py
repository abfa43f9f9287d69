"""OpenAICompatModel against a real HTTP server on 127.0.0.1 (no network beyond loopback)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tenxgraph.core.state import Message, ToolCallBlock
from tenxgraph.models import ModelError, OpenAICompatModel
from tenxgraph.models.openai_compat import strip_provider, to_openai_messages

pytestmark = pytest.mark.anyio


class CannedServer:
    """A chat-completions server answering from a queue of ``(status, headers, body)``."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, str], Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"null")
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers.items()), "body": body}
                )
                server.times.append(time.monotonic())
                status, headers, payload = (
                    server.replies.pop(0) if server.replies else (500, {}, {})
                )
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[CannedServer]:
    s = CannedServer()
    yield s
    s.close()


def completion(
    content: str | None = "Hello!", tool_calls: list[dict] | None = None, **extra: Any
) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 5,
            "total_tokens": 17,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
        **extra,
    }


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def conversation() -> list[Message]:
    assistant = Message(
        role="assistant",
        content=[ToolCallBlock(id="call_1", name="get_weather", args={"city": "Paris"})],
        tools_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
            }
        ],
    )
    return [
        Message.text_message("You are terse.", role="system"),
        Message.text_message("Weather in Paris?"),
        assistant,
        Message.tool_message({"temp_c": 21}, tool_call_id="call_1"),
    ]


async def test_request_shape_and_text_answer(server: CannedServer) -> None:
    server.replies.append((200, {}, completion("Sunny, 21 C.")))
    model = OpenAICompatModel(
        "openai/gpt-4o", base_url=server.base_url, api_key="sk-test", temperature=0.2
    )
    msg = await model.agenerate(conversation(), TOOLS, max_tokens=50)
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"] == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c":21}'},
        ],
        "tools": TOOLS,
        "temperature": 0.2,
        "max_tokens": 50,
    }
    assert msg.role == "assistant" and msg.text() == "Sunny, 21 C."
    assert msg.tool_calls() == [] and msg.tools_calls is None
    assert msg.usages is not None
    assert (msg.usages.prompt_tokens, msg.usages.completion_tokens, msg.usages.total_tokens) == (
        12,
        5,
        17,
    )
    assert (msg.usages.reasoning_tokens, msg.usages.cache_read_input_tokens) == (2, 4)
    assert msg.metadata == {
        "model": "gpt-4o-2024-08-06",
        "finish_reason": "stop",
        "response_id": "chatcmpl-1",
    }


async def test_tool_call_parsing(server: CannedServer) -> None:
    calls = [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
        },
        {
            "id": "call_b",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{bad json"},
        },
        {"id": "", "type": "function", "function": {"name": "get_weather", "arguments": ""}},
    ]
    server.replies.append((200, {}, completion(None, calls)))
    model = OpenAICompatModel("gpt-4o", base_url=server.base_url, api_key="k")
    msg = await model.agenerate([Message.text_message("hi")], TOOLS)
    blocks = msg.tool_calls()
    assert [b.id for b in blocks[:2]] == ["call_a", "call_b"]
    assert blocks[2].id.startswith("call_")  # a missing id is generated
    assert blocks[0].args == {"city": "Oslo"}
    assert blocks[1].args == {"__raw_arguments__": "{bad json"}
    assert blocks[2].args == {}
    assert msg.tools_calls is not None
    assert msg.tools_calls[0] == calls[0]
    assert [c["id"] for c in msg.tools_calls] == [b.id for b in blocks]
    assert msg.text() == ""
    # what the route functions of 10xGraph's guide test
    assert any(b.type == "tool_call" for b in msg.content)


async def test_retry_on_429_then_success(server: CannedServer) -> None:
    server.replies.append(
        (429, {"Retry-After": "0.2"}, {"error": {"message": "slow down", "type": "rate_limit"}})
    )
    server.replies.append((503, {"retry-after-ms": "50"}, {"error": {"message": "overloaded"}}))
    server.replies.append((200, {}, completion("ok")))
    model = OpenAICompatModel("gpt-4o", base_url=server.base_url, api_key="k", max_retries=3)
    msg = await model.agenerate([Message.text_message("hi")], None)
    assert msg.text() == "ok"
    assert len(server.requests) == 3
    assert server.times[1] - server.times[0] >= 0.19  # Retry-After honoured
    assert "tools" not in server.requests[0]["body"]


async def test_retries_exhausted(server: CannedServer) -> None:
    for _ in range(3):
        server.replies.append(
            (500, {"Retry-After": "0"}, {"error": {"message": "boom", "type": "server_error"}})
        )
    model = OpenAICompatModel("gpt-4o", base_url=server.base_url, api_key="k", max_retries=2)
    with pytest.raises(ModelError) as info:
        await model.agenerate([Message.text_message("hi")], None)
    err = info.value
    assert err.error_code == "MODEL_001"
    assert err.context["status_code"] == 500 and err.context["attempts"] == 3
    assert "HTTP 500 after 3 attempts: boom" in str(err)


async def test_client_error_not_retried_and_key_not_leaked(server: CannedServer) -> None:
    server.replies.append(
        (
            401,
            {},
            {
                "error": {
                    "message": "Incorrect API key provided: sk-secret",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        )
    )
    model = OpenAICompatModel("gpt-4o", base_url=server.base_url, api_key="sk-secret")
    with pytest.raises(ModelError) as info:
        await model.agenerate([Message.text_message("hi")], None)
    assert len(server.requests) == 1
    text = str(info.value)
    assert "sk-secret" not in text and "OPENAI_API_KEY" in text
    assert info.value.context["provider_error"] == {
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    }


async def test_connection_error_retried_then_raises() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAICompatModel(
        "m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, timeout_s=2
    )
    with pytest.raises(ModelError) as info:
        await model.agenerate([Message.text_message("hi")], None)
    assert info.value.context["attempts"] == 2
    assert "could not be reached after 2 attempt(s) (ConnectError)" in str(info.value)


async def test_not_a_completion(server: CannedServer) -> None:
    server.replies.append((200, {}, {"object": "list", "data": []}))
    model = OpenAICompatModel("m", base_url=server.base_url)
    with pytest.raises(ModelError, match="not a chat completion"):
        await model.agenerate([Message.text_message("hi")], None)


async def test_no_key_for_openai_refused_without_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAICompatModel("gpt-4o")
    assert model.endpoint == "https://api.openai.com/v1/chat/completions"
    with pytest.raises(ModelError, match="set OPENAI_API_KEY"):
        await model.agenerate([Message.text_message("hi")], None)


def test_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    model = OpenAICompatModel("ollama/llama3.2")
    assert model.base_url == "http://localhost:11434/v1"
    assert model.model == "llama3.2"
    assert model._headers()["Authorization"] == "Bearer from-env"
    explicit = OpenAICompatModel("m", base_url="http://h/v1", api_key="k2")
    assert (
        explicit.base_url == "http://h/v1" and explicit._headers()["Authorization"] == "Bearer k2"
    )


def test_strip_provider() -> None:
    assert strip_provider("openai/gpt-4o") == "gpt-4o"
    assert strip_provider("gpt-4o") == "gpt-4o"
    assert strip_provider("meta-llama/Llama-3.1-8B-Instruct") == "meta-llama/Llama-3.1-8B-Instruct"


def test_build_request_drops_tool_choice_without_tools() -> None:
    model = OpenAICompatModel("m", base_url="http://h/v1", tool_choice="auto", seed=None)
    body = model.build_request([Message.text_message("hi")], None)
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    body = model.build_request([Message.text_message("hi")], TOOLS)
    assert body["tool_choice"] == "auto" and body["tools"] == TOOLS


def test_message_conversion_details() -> None:
    from tenxgraph.core.state import ImageBlock, MediaRef, TextBlock

    user = Message(
        role="user",
        content=[
            TextBlock(text="what is this?"),
            ImageBlock(media=MediaRef(url="https://x/img.png")),
        ],
    )
    plain_assistant = Message.text_message("hello", role="assistant")
    assert to_openai_messages([user, plain_assistant]) == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/img.png"}},
            ],
        },
        {"role": "assistant", "content": "hello"},
    ]
    # a tool call held only as a ToolCallBlock gets its JSON arguments built
    only_block = Message(role="assistant", content=[ToolCallBlock(id="c", name="f", args={"x": 1})])
    assert to_openai_messages([only_block])[0]["tool_calls"] == [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    ]
    error = Message.tool_message("Error: boom", tool_call_id="c", is_error=True)
    assert to_openai_messages([error]) == [
        {"role": "tool", "tool_call_id": "c", "content": "Error: boom"}
    ]


async def test_reasoning_content(server: CannedServer) -> None:
    body = completion("4")
    body["choices"][0]["message"]["reasoning_content"] = "2+2"
    server.replies.append((200, {}, body))
    msg = await OpenAICompatModel("m", base_url=server.base_url).agenerate(
        [Message.text_message("2+2?")], None
    )
    assert msg.reasoning == "2+2" and msg.text() == "4"
    assert "Authorization" not in server.requests[0]["headers"]  # no key: no header
