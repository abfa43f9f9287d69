"""``OpenAICompatModel``: the OpenAI chat-completions API over httpx.

Speaks the ``POST {base_url}/chat/completions`` protocol that OpenAI defines and that vLLM,
Ollama (``http://localhost:11434/v1``), llama.cpp's server, LM Studio and most gateways serve.
No OpenAI SDK is needed.

Conversion of tenxgraph messages to the wire format:

* ``system`` / ``user``: ``{"role", "content": text}``; a user message with images or audio
  becomes a list of content parts (``text``, ``image_url``, ``input_audio``).
* ``assistant``: ``{"role": "assistant", "content": text or null, "tool_calls": [{"id",
  "type": "function", "function": {"name", "arguments": JSON string}}]}``.
* ``tool``: one ``{"role": "tool", "tool_call_id", "content": text}`` per
  ``ToolResultBlock`` (a dict or list result is sent as its JSON text).

The answer (``choices[0].message``) comes back as an assistant message built by
:func:`tenxgraph.models.base.assistant_message`: text, tool calls in both shapes,
``reasoning`` from ``reasoning_content`` / ``reasoning`` (vLLM, DeepSeek, Ollama), token usage,
and ``metadata`` ``{"model", "finish_reason", "response_id"}``.

:meth:`OpenAICompatModel.astream` asks for ``"stream": true`` (with
``stream_options.include_usage``) and reads the Server-Sent Events: it yields one ``delta``
message per text or reasoning fragment (never stored), then the complete message, built the
same way as a non-streamed answer (tool-call fragments joined by their ``index``).

Retries follow the OpenAI SDK's policy: HTTP 408, 409, 429 and 5xx answers and connection
errors or timeouts are retried up to ``max_retries`` times with exponential backoff (0.5 s
doubling to 8 s, +-25 % jitter); a ``retry-after-ms`` or ``Retry-After`` header (seconds or an
HTTP date) of at most 60 s is honoured instead. Other answers raise
:class:`~tenxgraph.models.base.ModelError` at once.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import orjson

from tenxgraph.core.exceptions import redact
from tenxgraph.core.llm import get_default_llm_timeout
from tenxgraph.core.state import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    TokenUsages,
    ToolResultBlock,
)

from .base import ModelError, assistant_message

__all__ = [
    "DEFAULT_BASE_URL",
    "PROVIDER_PREFIXES",
    "OpenAICompatModel",
    "from_openai_response",
    "strip_provider",
    "to_openai_messages",
]

#: Used when neither ``base_url=`` nor ``OPENAI_BASE_URL`` is given (as in the OpenAI SDK).
DEFAULT_BASE_URL = "https://api.openai.com/v1"

#: Model-name prefixes that only say "OpenAI-compatible endpoint" (LiteLLM style) and are
#: stripped: ``"openai/gpt-4o"`` -> ``"gpt-4o"``. Other prefixes are part of the model's name
#: on its server (``"meta-llama/Llama-3.1-8B-Instruct"`` on vLLM, ``"google/..."`` on a
#: gateway) and are sent unchanged.
PROVIDER_PREFIXES = ("openai/", "ollama/", "ollama_chat/", "hosted_vllm/")

_RETRY_STATUS = frozenset({408, 409, 429})
_BACKOFF_INITIAL_S = 0.5
_BACKOFF_MAX_S = 8.0
_BACKOFF_FACTOR = 2.0
_RETRY_AFTER_MAX_S = 60.0


def strip_provider(model: str) -> str:
    """``"openai/gpt-4o"`` -> ``"gpt-4o"`` (see :data:`PROVIDER_PREFIXES`)."""
    low = model.lower()
    for prefix in PROVIDER_PREFIXES:
        if low.startswith(prefix):
            return model[len(prefix) :]
    return model


# -- message conversion ------------------------------------------------------------------------------
def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _media_url(block: ImageBlock) -> str | None:
    media = block.media
    if media.kind == "url" and media.url:
        return media.url
    if media.kind == "data" and media.data_base64:
        return f"data:{media.mime_type or 'image/png'};base64,{media.data_base64}"
    return media.url


def _user_content(msg: Message) -> str | list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    rich = False
    for block in msg.content:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            url = _media_url(block)
            if url:
                rich = True
                parts.append({"type": "image_url", "image_url": {"url": url}})
        elif isinstance(block, AudioBlock) and block.media.data_base64:
            rich = True
            fmt = (block.media.mime_type or "audio/wav").rsplit("/", 1)[-1]
            parts.append(
                {
                    "type": "input_audio",
                    "input_audio": {"data": block.media.data_base64, "format": fmt},
                }
            )
        elif isinstance(block, DocumentBlock) and (block.text or block.excerpt):
            parts.append({"type": "text", "text": block.text or block.excerpt or ""})
        elif isinstance(block, DocumentBlock) and block.media and block.media.data_base64:
            rich = True  # chat completions' file part (PDFs), read by Gemini / Claude too
            mime = block.media.mime_type or "application/pdf"
            data_url = f"data:{mime};base64,{block.media.data_base64}"
            name = block.media.filename or "document.pdf"
            parts.append({"type": "file", "file": {"filename": name, "file_data": data_url}})
        elif isinstance(block, ToolResultBlock):
            parts.append({"type": "text", "text": _json_text(block.content)})
    if rich:
        return parts
    return "".join(p["text"] for p in parts)


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Convert tenxgraph messages to OpenAI chat-completions messages (module docstring).

    Args:
        messages: oldest first.

    Returns:
        The wire messages, oldest first; a tool message with several results becomes several
        ``tool`` messages.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        if msg.role == "assistant":
            text = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
            calls = msg.tool_calls()
            wire: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                raw_by_id = {r.get("id"): r for r in (msg.tools_calls or []) if isinstance(r, dict)}
                wire_calls = []
                for call in calls:
                    raw_fn = (raw_by_id.get(call.id) or {}).get("function") or {}
                    args = raw_fn.get("arguments")
                    if not isinstance(args, str) or raw_fn.get("name") != call.name:
                        args = _json_text(call.args)
                    wire_calls.append(
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": args},
                        }
                    )
                wire["tool_calls"] = wire_calls
            elif not text:
                wire["content"] = ""
            out.append(wire)
        elif msg.role == "tool":
            results = [b for b in msg.content if isinstance(b, ToolResultBlock)]
            if results:
                extra = "".join(b.text for b in msg.content if isinstance(b, TextBlock))
                for b in results:
                    content = _json_text(b.content)
                    if extra and len(results) == 1:
                        content = f"{content}\n{extra}" if content else extra
                    out.append({"role": "tool", "tool_call_id": b.tool_call_id, "content": content})
            else:
                out.append(
                    {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.text()}
                )
        else:
            out.append(
                {
                    "role": msg.role,
                    "content": _user_content(msg) if msg.role == "user" else msg.text(),
                }
            )
    return out


def _usage(raw: dict[str, Any] | None) -> TokenUsages | None:
    if not isinstance(raw, dict):
        return None
    completion_details = raw.get("completion_tokens_details") or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    return TokenUsages(
        completion_tokens=int(raw.get("completion_tokens") or 0),
        prompt_tokens=int(raw.get("prompt_tokens") or 0),
        total_tokens=int(raw.get("total_tokens") or 0),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
        cache_read_input_tokens=int(prompt_details.get("cached_tokens") or 0),
    )


def from_openai_response(data: dict[str, Any], *, model: str = "") -> Message:
    """Build the assistant :class:`Message` from a chat-completions response body.

    Args:
        data: the decoded JSON response (``{"id", "choices": [{"message", "finish_reason"}],
            "usage"}``).
        model: the requested model name (used when the response names none).

    Returns:
        An assistant message with a fresh uuid4 ``message_id``.

    Raises:
        ModelError: ``MODEL_001`` when ``data`` has no ``choices[0].message``.
    """
    try:
        choice = data["choices"][0]
        wire = choice["message"]
        if not isinstance(wire, dict):
            raise TypeError("message is not an object")
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelError(
            f"model {model!r} answered with a body that is not a chat completion "
            f"({type(exc).__name__}: no choices[0].message); check base_url points at an "
            "OpenAI-compatible /v1 endpoint",
            context={"model": model},
        ) from None
    content = wire.get("content")
    if isinstance(content, list):  # some servers return content parts
        content = "".join(
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", None)
        )
    calls = wire.get("tool_calls") or []
    if not calls and isinstance(wire.get("function_call"), dict):  # legacy functions API
        calls = [{"id": "", "function": wire["function_call"]}]
    reasoning = wire.get("reasoning_content") or wire.get("reasoning")
    metadata = {
        "model": data.get("model") or model,
        "finish_reason": choice.get("finish_reason"),
        "response_id": data.get("id"),
    }
    return assistant_message(
        content if isinstance(content, str) else None,
        [c for c in calls if isinstance(c, dict)],
        reasoning=reasoning if isinstance(reasoning, str) else None,
        usages=_usage(data.get("usage")),
        metadata={k: v for k, v in metadata.items() if v is not None},
    )


def _retry_after_s(response: httpx.Response) -> float | None:
    """The server's requested delay in seconds, if it gave a usable one (<= 60 s)."""
    ms = response.headers.get("retry-after-ms")
    value: float | None = None
    if ms is not None:
        try:
            value = float(ms) / 1000.0
        except ValueError:
            value = None
    if value is None:
        header = response.headers.get("retry-after")
        if header is not None:
            try:
                value = float(header)
            except ValueError:
                parsed = email.utils.parsedate_to_datetime(header) if header else None
                if parsed is not None:
                    value = parsed.timestamp() - time.time()
    if value is None or value < 0 or value > _RETRY_AFTER_MAX_S:
        return None
    return value


def _backoff_s(
    attempt: int,
    initial_s: float = _BACKOFF_INITIAL_S,
    factor: float = _BACKOFF_FACTOR,
    max_s: float = _BACKOFF_MAX_S,
) -> float:
    base = min(initial_s * (factor**attempt), max_s)
    return base * random.uniform(0.75, 1.25)  # noqa: S311 - jitter, not security


def _provider_error(response: httpx.Response) -> tuple[str, dict[str, Any]]:
    """``(message, {type, code})`` from an OpenAI-style error body, best effort."""
    try:
        body = response.json()
    except ValueError:
        text = response.text.strip().replace("\n", " ")
        return text[:300], {}
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict):
        info = {k: err.get(k) for k in ("type", "code") if err.get(k) is not None}
        return str(err.get("message") or "")[:500], info
    if isinstance(err, str):
        return err[:500], {}
    return str(body)[:300], {}


_HINTS = {
    401: "check the API key (api_key= or OPENAI_API_KEY)",
    403: "check the API key's permissions for this model",
    404: "check the model name and that base_url ends with the API root (e.g. .../v1)",
    400: "the server refused the request; check the messages, tools and parameters",
    422: "the server refused the request; check the messages, tools and parameters",
}


class OpenAICompatModel:
    """A chat model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: the model name; a LiteLLM-style provider prefix such as ``"openai/"`` is
            stripped (:data:`PROVIDER_PREFIXES`).
        base_url: the API root, e.g. ``"http://localhost:8000/v1"`` for vLLM. Default: the
            ``OPENAI_BASE_URL`` environment variable, else ``https://api.openai.com/v1`` (read
            when the model is created, as the OpenAI SDK does).
        api_key: sent as ``Authorization: Bearer <key>``. Default: ``OPENAI_API_KEY``; may be
            absent for local servers. Never logged nor put into errors.
        timeout_s: seconds allowed for each HTTP request (connect, read, write, pool);
            ``None`` (default): the process-wide default, resolved per request
            (:func:`tenxgraph.core.llm.get_default_llm_timeout`, 600 s unless set).
        max_retries: retries after the first attempt for 408/409/429/5xx answers, connection
            errors and timeouts (``0`` disables retrying).
        retry_statuses: HTTP statuses retried besides connection errors and timeouts
            (default: 408, 409, 429 and every 5xx).
        initial_delay_s: backoff before the first retry, in seconds (default 0.5); doubled
            (``backoff_factor``) after each retry, capped at ``max_delay_s`` (default 8.0),
            +-25 % jitter.
        backoff_factor: the multiplier of the backoff (default 2.0).
        max_delay_s: the cap of the backoff, in seconds.
        http_client: an ``httpx.AsyncClient`` to reuse (connection pooling); the caller owns
            and closes it. Default: a client per call, closed after it.
        keep_raw: keep the provider's raw response body in ``Message.raw`` (stored with the
            thread: off by default).
        **params: request parameters sent with every call (``temperature``, ``max_tokens``,
            ``top_p``, ``stop``, ``seed``, ``response_format``, ``tool_choice``,
            ``parallel_tool_calls``, ``reasoning_effort``...); ``None`` values are omitted.

    Raises:
        ValueError: ``model`` is empty or ``max_retries`` is negative.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float | None = None,
        max_retries: int = 3,
        *,
        http_client: httpx.AsyncClient | None = None,
        keep_raw: bool = False,
        retry_statuses: frozenset[int] | set[int] | None = None,
        initial_delay_s: float = _BACKOFF_INITIAL_S,
        backoff_factor: float = _BACKOFF_FACTOR,
        max_delay_s: float = _BACKOFF_MAX_S,
        **params: Any,
    ) -> None:
        if not model or not isinstance(model, str):
            raise ValueError("OpenAICompatModel needs a model name, e.g. 'gpt-4o'")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = strip_provider(model)
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip(
            "/"
        )
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._timeout_s = timeout_s
        self.max_retries = max_retries
        self.http_client = http_client
        self.keep_raw = keep_raw
        self.retry_statuses = frozenset(retry_statuses) if retry_statuses is not None else None
        self.initial_delay_s = initial_delay_s
        self.backoff_factor = backoff_factor
        self.max_delay_s = max_delay_s
        self.params = {k: v for k, v in params.items() if v is not None}

    def __repr__(self) -> str:
        return f"OpenAICompatModel(model={self.model!r}, base_url={redact(self.base_url)!r})"

    @property
    def timeout_s(self) -> float:
        """Seconds allowed per HTTP request (the explicit one, else the process default)."""
        if self._timeout_s is not None:
            return self._timeout_s
        return get_default_llm_timeout()

    @property
    def endpoint(self) -> str:
        """The full URL requests are POSTed to."""
        return f"{self.base_url}/chat/completions"

    def build_request(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> dict[str, Any]:
        """The JSON body of one request (no I/O; for inspection and tests).

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None`` / ``[]`` for none.
            **kwargs: per-call parameters; they override the constructor's ``params``.

        Returns:
            ``{"model", "messages", "tools"?, **params}``; ``tool_choice`` and
            ``parallel_tool_calls`` are dropped when no tools are sent.
        """
        body: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages)}
        params = {**self.params, **{k: v for k, v in kwargs.items() if v is not None}}
        if tools:
            body["tools"] = tools
        else:
            params.pop("tool_choice", None)
            params.pop("parallel_tool_calls", None)
        body.update(params)
        return body

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _error(self, text: str, **context: Any) -> ModelError:
        ctx = {"model": self.model, "base_url": redact(self.base_url), **context}
        if self._api_key:
            text = text.replace(self._api_key, "***")
        return ModelError(text, context=ctx)

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> Message:
        """Call the endpoint and return the assistant message (see ``ChatModel``).

        Raises:
            ModelError: ``MODEL_001``: no API key for api.openai.com; an HTTP error that is not
                retryable (``context["status_code"]``, ``context["provider_error"]``); the
                retries exhausted (``context["attempts"]``); a body that is not a chat
                completion.
        """
        if not self._api_key and urlsplit(self.base_url).hostname == "api.openai.com":
            raise self._error(
                "no API key for api.openai.com: set OPENAI_API_KEY or pass api_key= (or point "
                "base_url= / OPENAI_BASE_URL at a local OpenAI-compatible server)"
            )
        body = orjson.dumps(self.build_request(messages, tools, **kwargs), default=str)
        if self.http_client is not None:
            data = await self._post(self.http_client, body)
        else:
            async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s)) as client:
                data = await self._post(client, body)
        msg = from_openai_response(data, model=self.model)
        if self.keep_raw:
            msg.raw = data
        return msg

    async def _post(self, client: httpx.AsyncClient, body: bytes) -> dict[str, Any]:
        attempts = 0
        last: str = ""
        while True:
            attempts += 1
            delay: float | None = None
            try:
                response = await client.post(
                    self.endpoint, content=body, headers=self._headers(), timeout=self.timeout_s
                )
            except httpx.TransportError as exc:  # connect errors, timeouts, broken connections
                last = f"{type(exc).__name__}"
                if attempts > self.max_retries:
                    raise self._error(
                        f"model {self.model!r} at {redact(self.base_url)} could not be reached "
                        f"after {attempts} attempt(s) ({last}); check base_url and that the "
                        "server is running",
                        attempts=attempts,
                        retryable=True,
                    ) from None
            else:
                status = response.status_code
                if status < 300:
                    try:
                        data = response.json()
                    except ValueError:
                        raise self._error(
                            f"model {self.model!r} answered HTTP {status} with a body that is "
                            "not JSON; check base_url points at an OpenAI-compatible /v1 endpoint",
                            status_code=status,
                        ) from None
                    if not isinstance(data, dict):
                        raise self._error(
                            f"model {self.model!r} answered with a JSON {type(data).__name__}, "
                            "not a chat completion",
                            status_code=status,
                        )
                    return data
                text, info = _provider_error(response)
                retryable = self._retryable(status)
                last = f"HTTP {status}"
                if not retryable or attempts > self.max_retries:
                    hint = _HINTS.get(status, "retry later" if retryable else "check the request")
                    tried = f" after {attempts} attempts" if attempts > 1 else ""
                    raise self._error(
                        f"model {self.model!r} at {redact(self.base_url)} answered HTTP "
                        f"{status}{tried}: {text or '(no message)'}; {hint}",
                        status_code=status,
                        attempts=attempts,
                        provider_error=info,
                        retryable=retryable,
                    )
                delay = _retry_after_s(response)
            if delay is None:
                delay = _backoff_s(
                    attempts - 1, self.initial_delay_s, self.backoff_factor, self.max_delay_s
                )
            await anyio.sleep(delay)

    def _retryable(self, status: int) -> bool:
        if self.retry_statuses is not None:
            return status in self.retry_statuses
        return status in _RETRY_STATUS or status >= 500

    async def astream(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> AsyncIterator[Message]:
        """Call the endpoint with ``"stream": true``; yield the fragments, then the answer.

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (override the constructor's).

        Yields:
            ``assistant`` messages with ``delta=True``: one per text fragment (its text) or
            reasoning fragment (``reasoning``), all sharing one ``message_id``; then the
            complete answer (``delta=False``, a fresh ``message_id``), built as
            :meth:`agenerate` builds it.

        Raises:
            ModelError: ``MODEL_001`` as :meth:`agenerate`; also when the stream breaks
                before its end (a failure after the first fragment is not retried: what was
                streamed cannot be taken back) or an event is not JSON.
        """
        if not self._api_key and urlsplit(self.base_url).hostname == "api.openai.com":
            raise self._error(
                "no API key for api.openai.com: set OPENAI_API_KEY or pass api_key= (or point "
                "base_url= / OPENAI_BASE_URL at a local OpenAI-compatible server)"
            )
        request = self.build_request(messages, tools, **kwargs)
        request["stream"] = True
        request.setdefault("stream_options", {"include_usage": True})
        body = orjson.dumps(request, default=str)
        if self.http_client is not None:
            async for msg in self._stream(self.http_client, body):
                yield msg
        else:
            async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s)) as client:
                async for msg in self._stream(client, body):
                    yield msg

    async def _stream(self, client: httpx.AsyncClient, body: bytes) -> AsyncIterator[Message]:
        attempts = 0
        headers = {**self._headers(), "Accept": "text/event-stream"}
        while True:
            attempts += 1
            delay: float | None = None
            try:
                async with client.stream(
                    "POST", self.endpoint, content=body, headers=headers, timeout=self.timeout_s
                ) as response:
                    status = response.status_code
                    if status < 300:
                        acc = _StreamAccumulator(self.model)
                        try:
                            async for line in response.aiter_lines():
                                for fragment in acc.feed(line):
                                    yield fragment
                        except httpx.TransportError as exc:
                            raise self._error(
                                f"the stream from model {self.model!r} broke after "
                                f"{acc.events} event(s) ({type(exc).__name__})",
                                attempts=attempts,
                            ) from None
                        except ValueError:
                            raise self._error(
                                f"model {self.model!r} streamed an event that is not JSON; "
                                "check base_url points at an OpenAI-compatible /v1 endpoint",
                                status_code=status,
                            ) from None
                        if not acc.done and not acc.finish_reason:
                            raise self._error(
                                f"the stream from model {self.model!r} ended before its last event",
                                attempts=attempts,
                            )
                        yield acc.message()
                        return
                    await response.aread()
                    text, info = _provider_error(response)
                    retryable = self._retryable(status)
                    if not retryable or attempts > self.max_retries:
                        hint = _HINTS.get(
                            status, "retry later" if retryable else "check the request"
                        )
                        tried = f" after {attempts} attempts" if attempts > 1 else ""
                        raise self._error(
                            f"model {self.model!r} at {redact(self.base_url)} answered HTTP "
                            f"{status}{tried}: {text or '(no message)'}; {hint}",
                            status_code=status,
                            attempts=attempts,
                            provider_error=info,
                            retryable=retryable,
                        )
                    delay = _retry_after_s(response)
            except httpx.TransportError as exc:
                if attempts > self.max_retries:
                    raise self._error(
                        f"model {self.model!r} at {redact(self.base_url)} could not be reached "
                        f"after {attempts} attempt(s) ({type(exc).__name__}); check base_url "
                        "and that the server is running",
                        attempts=attempts,
                        retryable=True,
                    ) from None
            if delay is None:
                delay = _backoff_s(
                    attempts - 1, self.initial_delay_s, self.backoff_factor, self.max_delay_s
                )
            await anyio.sleep(delay)


class _StreamAccumulator:
    """Joins the ``chat.completion.chunk`` events of one streamed answer."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.events = 0
        self.done = False
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.delta_id = str(uuid.uuid4())

    def feed(self, line: str) -> list[Message]:
        """The delta messages of one SSE line (``[]`` for comments, blanks, ``[DONE]``).

        Raises:
            ValueError: the event's data is not JSON.
        """
        line = line.strip()
        if not line.startswith("data:"):
            return []
        data = line[5:].strip()
        if data == "[DONE]":
            self.done = True
            return []
        return self.feed_event(orjson.loads(data))

    def feed_event(self, event: Any) -> list[Message]:
        """The delta messages of one decoded ``chat.completion.chunk`` event (also the
        official SDK's chunk objects, dumped to a dict)."""
        self.events += 1
        if not isinstance(event, dict):
            return []
        self.response_id = event.get("id") or self.response_id
        self.response_model = event.get("model") or self.response_model
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
        out: list[Message] = []
        for choice in event.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            if isinstance(piece, str) and piece:
                self.text.append(piece)
                out.append(
                    Message(
                        message_id=self.delta_id,
                        role="assistant",
                        content=[TextBlock(text=piece)],
                        delta=True,
                    )
                )
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
                out.append(
                    Message(
                        message_id=self.delta_id, role="assistant", reasoning=thought, delta=True
                    )
                )
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                slot = self.calls.setdefault(
                    int(call.get("index", len(self.calls))),
                    {"id": "", "name": "", "arguments": ""},
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                fn = call.get("function") or {}
                if fn.get("name"):
                    slot["name"] += fn["name"]
                if isinstance(fn.get("arguments"), str):
                    slot["arguments"] += fn["arguments"]
        return out

    def message(self) -> Message:
        """The complete answer."""
        calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for _, c in sorted(self.calls.items())
        ]
        metadata = {
            "model": self.response_model or self.model,
            "finish_reason": self.finish_reason,
            "response_id": self.response_id,
        }
        return assistant_message(
            "".join(self.text) or None,
            calls,
            reasoning="".join(self.reasoning) or None,
            usages=_usage(self.usage),
            metadata={k: v for k, v in metadata.items() if v is not None},
        )
