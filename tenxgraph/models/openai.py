"""OpenAI through the official ``openai`` SDK (extra ``openai``): chat completions and the
Responses API.

:class:`OpenAIModel` is an :class:`~tenxgraph.models.openai_compat.OpenAICompatModel` whose
transport is ``openai.AsyncOpenAI`` instead of plain httpx: the same request body
(:meth:`~tenxgraph.models.openai_compat.OpenAICompatModel.build_request`), the same message
conversion, the same answer (``from_openai_response``), the same retry policy (HTTP 408, 409,
429, 5xx and connection errors, ``retry-after`` honoured, exponential backoff with jitter; the
SDK's own retries are switched off so ``RetryConfig`` decides alone). ``Agent(model=...,
provider="openai")`` builds one when the SDK is installed, else the httpx adapter (the same
behaviour, minus the Responses API).

``api_style="responses"`` speaks OpenAI's Responses API (``POST /responses``): system
messages, user turns, assistant turns and tool results become ``input`` items (tool calls as
``function_call`` / ``function_call_output`` items), tools are ``{"type": "function", "name",
"description", "parameters", "strict": false}``, ``reasoning_effort`` and
``reasoning_summary`` become ``reasoning={"effort", "summary"}`` (the summaries come back in
``Message.reasoning``), ``max_tokens`` becomes ``max_output_tokens`` and
``response_format`` becomes ``text.format``. Streaming reads the SDK's typed events
(``response.output_text.delta``, ``response.reasoning_summary_text.delta``,
``response.completed``).

SDK errors become :class:`~tenxgraph.models.base.ModelError` (``MODEL_001``) with
``status_code``, ``attempts``, ``provider_error`` and a ``retryable`` flag, which
``Agent(fallback_models=...)`` reads.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import anyio
import orjson

from tenxgraph.core.exceptions import redact
from tenxgraph.core.state import Message, TokenUsages

from .base import ModelError, assistant_message
from .openai_compat import (
    _HINTS,
    OpenAICompatModel,
    _backoff_s,
    _retry_after_s,
    _StreamAccumulator,
    from_openai_response,
    to_openai_messages,
)

__all__ = ["API_STYLES", "OpenAIModel", "sdk_available", "to_responses_request"]

#: the values ``api_style`` takes: chat completions, or the Responses API.
API_STYLES = ("chat", "responses")
_T = TypeVar("_T")


def sdk_available() -> bool:
    """Whether the official ``openai`` package can be imported."""
    try:
        importlib.import_module("openai")
    except ImportError:
        return False
    return True


def _sdk() -> Any:
    try:
        return importlib.import_module("openai")
    except ImportError:
        raise ModelError(
            "this needs the official OpenAI SDK: pip install -e '.[openai]' from the tenxgraph "
            "checkout (the Responses API has no httpx fallback)",
            context={"model": "", "missing_package": "openai"},
        ) from None


def _chat_params(sdk: Any) -> frozenset[str]:
    create = sdk.resources.chat.completions.AsyncCompletions.create
    return frozenset(inspect.signature(create).parameters) - {"self"}


def _responses_content(content: Any) -> Any:
    if not isinstance(content, list):
        return str(content or "")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            parts.append({"type": "input_text", "text": part.get("text", "")})
        elif kind == "image_url":
            parts.append({"type": "input_image", "image_url": part["image_url"]["url"]})
        else:
            raise ModelError(
                f"the Responses API adapter cannot send a {kind!r} content part; use "
                "api_style='chat' for audio input",
                context={"model": "", "part": kind},
            )
    return parts


def to_responses_request(
    messages: list[Message], tools: list[dict[str, Any]] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """Convert tenxgraph messages and OpenAI-style tools to Responses-API ``input`` / ``tools``.

    Args:
        messages: the conversation, oldest first.
        tools: chat-completions function specs (``{"type": "function", "function": {...}}``),
            or ``None``.

    Returns:
        ``(input_items, tools)``: role messages for system / user / assistant text,
        ``function_call`` items for the assistant's tool calls, ``function_call_output`` items
        for tool results; the Responses tool specs (or ``None``).

    Raises:
        ModelError: ``MODEL_001`` a user turn carries a part the Responses API cannot take
            here (audio).
    """
    items: list[dict[str, Any]] = []
    for wire in to_openai_messages(messages):
        role = wire["role"]
        if role == "assistant":
            if wire.get("content"):
                items.append({"role": "assistant", "content": wire["content"]})
            for call in wire.get("tool_calls") or ():
                fn = call["function"]
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call["id"],
                        "name": fn["name"],
                        "arguments": fn["arguments"] or "{}",
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": wire["tool_call_id"],
                    "output": str(wire.get("content") or ""),
                }
            )
        else:
            items.append({"role": role, "content": _responses_content(wire.get("content"))})
    specs = None
    if tools:
        specs = [
            {
                "type": "function",
                "name": t["function"]["name"],
                "description": t["function"].get("description") or "",
                "parameters": t["function"].get("parameters") or {"type": "object"},
                "strict": False,
            }
            for t in tools
        ]
    return items, specs


def _text_format(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        return {
            "type": "json_schema",
            "name": spec.get("name", "answer"),
            "schema": spec.get("schema") or {},
            "strict": bool(spec.get("strict", False)),
        }
    return {"type": str(kind or "text")}


def _from_response(data: dict[str, Any], model: str) -> Message:
    text: list[str] = []
    summary: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in data.get("output") or ():
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if part.get("type") == "output_text":
                    text.append(part.get("text") or "")
        elif kind == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "name": item.get("name"),
                    "arguments": item.get("arguments"),
                }
            )
        elif kind == "reasoning":
            summary.extend(s.get("text") or "" for s in item.get("summary") or ())
    usage = data.get("usage")
    usages = None
    if isinstance(usage, dict):
        usages = TokenUsages(
            prompt_tokens=int(usage.get("input_tokens") or 0),
            completion_tokens=int(usage.get("output_tokens") or 0),
            total_tokens=int(usage.get("total_tokens") or 0),
            reasoning_tokens=int(
                (usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0
            ),
            cache_read_input_tokens=int(
                (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
            ),
        )
    metadata = {
        "model": data.get("model") or model,
        "provider": "openai",
        "finish_reason": data.get("status"),
        "response_id": data.get("id"),
        "api_style": "responses",
    }
    return assistant_message(
        "".join(text) or None,
        calls,
        reasoning="\n\n".join(s for s in summary if s) or None,
        usages=usages,
        metadata={k: v for k, v in metadata.items() if v is not None},
    )


class OpenAIModel(OpenAICompatModel):
    """An OpenAI model reached through ``openai.AsyncOpenAI`` (module docstring).

    Args:
        model: the model name (an ``"openai/"`` prefix is dropped).
        base_url: the API root; default ``OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
        api_key: the key; default ``OPENAI_API_KEY``; may be absent for a local server (no
            ``Authorization`` header is sent then).
        timeout_s: seconds per request (default: the process-wide LLM timeout).
        max_retries: retries of retryable errors (as ``OpenAICompatModel``).
        api_style: ``"chat"`` (chat completions) or ``"responses"`` (the Responses API).
        keep_raw: keep the provider's response (as a dict) in ``Message.raw``.
        retry_statuses: as ``OpenAICompatModel``.
        initial_delay_s: as ``OpenAICompatModel``.
        backoff_factor: as ``OpenAICompatModel``.
        max_delay_s: as ``OpenAICompatModel``.
        **params: request parameters sent with every call. Chat: any chat-completions
            parameter (those the SDK does not name go in ``extra_body``). Responses:
            ``reasoning_effort`` / ``reasoning_summary``, ``max_tokens``, ``response_format``,
            ``temperature``, ``top_p``, ``tool_choice``, ``parallel_tool_calls`` are mapped;
            the others go in ``extra_body``.

    Raises:
        ModelError: ``MODEL_001`` when the ``openai`` package is not installed.
        ValueError: ``api_style`` is not one of :data:`API_STYLES`; ``reasoning_summary``
            with ``api_style="chat"`` (chat completions return no reasoning summary).
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float | None = None,
        max_retries: int = 3,
        *,
        api_style: str = "chat",
        keep_raw: bool = False,
        retry_statuses: frozenset[int] | set[int] | None = None,
        initial_delay_s: float = 0.5,
        backoff_factor: float = 2.0,
        max_delay_s: float = 8.0,
        **params: Any,
    ) -> None:
        if api_style not in API_STYLES:
            raise ValueError(f"api_style must be one of {API_STYLES}, got {api_style!r}")
        if api_style == "chat" and params.get("reasoning_summary") is not None:
            raise ValueError(
                "reasoning_summary needs api_style='responses' (chat completions return no "
                "reasoning summary)"
            )
        super().__init__(
            model,
            base_url,
            api_key,
            timeout_s,
            max_retries,
            keep_raw=keep_raw,
            retry_statuses=retry_statuses,
            initial_delay_s=initial_delay_s,
            backoff_factor=backoff_factor,
            max_delay_s=max_delay_s,
            **params,
        )
        sdk = _sdk()
        self._sdk = sdk
        self.api_style = api_style
        # a local server without a key: the SDK insists on one, and each request omits the
        # Authorization header explicitly (the way the SDK offers), so none is sent.
        # A client per call (as OpenAICompatModel without http_client): its connection pool
        # belongs to one event loop, and a graph may be run from several (invoke / stream)
        self._headers_kw: dict[str, Any] = (
            {} if self._api_key else {"extra_headers": {"Authorization": sdk.omit}}
        )
        self._known = _chat_params(sdk)

    def __repr__(self) -> str:
        return (
            f"OpenAIModel(model={self.model!r}, base_url={redact(self.base_url)!r}, "
            f"api_style={self.api_style!r})"
        )

    @property
    def endpoint(self) -> str:
        """The full URL requests are POSTed to."""
        path = "responses" if self.api_style == "responses" else "chat/completions"
        return f"{self.base_url}/{path}"

    # -- requests ------------------------------------------------------------------------------
    def _chat_kwargs(self, body: dict[str, Any]) -> dict[str, Any]:
        known = {k: v for k, v in body.items() if k in self._known}
        extra = {k: v for k, v in body.items() if k not in self._known}
        if extra:
            known["extra_body"] = extra
        return known

    def responses_request(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> dict[str, Any]:
        """The keyword arguments of ``client.responses.create`` for one call (no I/O).

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters; they override the constructor's ``params``.

        Returns:
            ``{"model", "input", "tools"?, "reasoning"?, "text"?, ...}`` (unmapped parameters
            under ``extra_body``).

        Raises:
            ModelError: ``MODEL_001`` as :func:`to_responses_request`.
        """
        params = {**self.params, **{k: v for k, v in kwargs.items() if v is not None}}
        items, specs = to_responses_request(messages, tools)
        body: dict[str, Any] = {"model": self.model, "input": items}
        if specs:
            body["tools"] = specs
            choice = params.pop("tool_choice", None)
            if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
                choice = {"type": "function", "name": choice["function"].get("name")}
            if choice is not None:
                body["tool_choice"] = choice
            if params.get("parallel_tool_calls") is not None:
                body["parallel_tool_calls"] = params["parallel_tool_calls"]
        params.pop("tool_choice", None)
        params.pop("parallel_tool_calls", None)
        reasoning = {
            key: params.pop(name)
            for key, name in (("effort", "reasoning_effort"), ("summary", "reasoning_summary"))
            if params.get(name) is not None
        }
        if reasoning:
            body["reasoning"] = reasoning
        limit = params.pop("max_tokens", None) or params.pop("max_completion_tokens", None)
        if limit is not None:
            body["max_output_tokens"] = int(limit)
        fmt = _text_format(params.pop("response_format", None))
        if fmt is not None:
            body["text"] = {"format": fmt}
        for name in ("temperature", "top_p", "metadata", "store", "user"):
            if params.get(name) is not None:
                body[name] = params.pop(name)
        params = {k: v for k, v in params.items() if v is not None}
        if params:
            body["extra_body"] = params
        return body

    # -- calls ---------------------------------------------------------------------------------
    def _new_client(self) -> Any:
        return self._sdk.AsyncOpenAI(
            base_url=self.base_url, max_retries=0, api_key=self._api_key or "no-key"
        )

    def _check_key(self) -> None:
        if not self._api_key and urlsplit(self.base_url).hostname == "api.openai.com":
            raise self._error(
                "no API key for api.openai.com: set OPENAI_API_KEY or pass api_key= (or point "
                "base_url= / OPENAI_BASE_URL at a local OpenAI-compatible server)"
            )

    def _sdk_error(self, exc: Exception, attempts: int, retryable: bool) -> ModelError:
        status = getattr(exc, "status_code", None)
        body = getattr(exc, "body", None)
        err = body.get("error", body) if isinstance(body, dict) else None
        info: dict[str, Any] = {}
        text = ""
        if isinstance(err, dict):
            info = {k: err[k] for k in ("type", "code") if err.get(k) is not None}
            text = str(err.get("message") or "")[:500]
        if status is None:
            return self._error(
                f"model {self.model!r} at {redact(self.base_url)} could not be reached after "
                f"{attempts} attempt(s) ({type(exc).__name__}); check base_url and that the "
                "server is running",
                attempts=attempts,
                retryable=retryable,
                provider="openai",
            )
        hint = _HINTS.get(status, "retry later" if retryable else "check the request")
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return self._error(
            f"model {self.model!r} at {redact(self.base_url)} answered HTTP {status}{tried}: "
            f"{text or '(no message)'}; {hint}",
            status_code=status,
            attempts=attempts,
            provider_error=info,
            retryable=retryable,
            provider="openai",
        )

    async def _with_retries(self, call: Callable[[], Awaitable[_T]]) -> _T:
        sdk = self._sdk
        attempts = 0
        while True:
            attempts += 1
            delay: float | None = None
            try:
                return await call()
            except sdk.APIStatusError as exc:
                retryable = self._retryable(exc.status_code)
                if not retryable or attempts > self.max_retries:
                    raise self._sdk_error(exc, attempts, retryable) from None
                delay = _retry_after_s(exc.response)
            except sdk.APIConnectionError as exc:  # also APITimeoutError
                if attempts > self.max_retries:
                    raise self._sdk_error(exc, attempts, True) from None
            except sdk.OpenAIError as exc:
                raise self._sdk_error(exc, attempts, False) from None
            except ValueError:  # the SDK could not decode the answer (json.JSONDecodeError)
                raise self._error(
                    f"model {self.model!r} answered with a body that is not JSON; check "
                    "base_url points at an OpenAI-compatible /v1 endpoint",
                    attempts=attempts,
                    retryable=False,
                    provider="openai",
                ) from None
            if delay is None:
                delay = _backoff_s(
                    attempts - 1, self.initial_delay_s, self.backoff_factor, self.max_delay_s
                )
            await anyio.sleep(delay)

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> Message:
        """Ask the model once (protocol of :mod:`tenxgraph.models.base`).

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (override the constructor's).

        Returns:
            The assistant message (text, tool calls, reasoning or reasoning summary, usage;
            ``metadata["model"]`` the model that answered).

        Raises:
            ModelError: ``MODEL_001``: no key for api.openai.com; an SDK / HTTP error after the
                retries (``context["retryable"]``, ``status_code``, ``attempts``).
        """
        self._check_key()
        timeout, hdr = self.timeout_s, self._headers_kw
        async with self._new_client() as client:
            if self.api_style == "responses":
                req = self.responses_request(messages, tools, **kwargs)
                resp = await self._with_retries(
                    lambda: client.responses.create(**req, **hdr, timeout=timeout)
                )
                data = resp.model_dump(mode="json")
                msg = _from_response(data, self.model)
            else:
                body = self._chat_kwargs(self.build_request(messages, tools, **kwargs))
                resp = await self._with_retries(
                    lambda: client.chat.completions.create(**body, **hdr, timeout=timeout)
                )
                data = resp.model_dump(mode="json")
                msg = from_openai_response(data, model=self.model)
                msg.metadata["provider"] = "openai"
        if self.keep_raw:
            msg.raw = data
        return msg

    async def astream(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> AsyncIterator[Message]:
        """Stream one answer: text / reasoning fragments (``delta=True``), then the whole answer.

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (override the constructor's).

        Yields:
            Delta messages sharing one ``message_id``, then the complete answer
            (``delta=False``), built as :meth:`agenerate` builds it.

        Raises:
            ModelError: ``MODEL_001`` as :meth:`agenerate`; a stream that breaks or ends
                without its last event (not retried: what was streamed cannot be taken back).
        """
        self._check_key()
        async with self._new_client() as client:
            async for msg in self._astream(client, messages, tools, kwargs):
                yield msg

    async def _astream(
        self,
        client: Any,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        kwargs: dict[str, Any],
    ) -> AsyncIterator[Message]:
        timeout, hdr = self.timeout_s, self._headers_kw
        if self.api_style == "responses":
            req = self.responses_request(messages, tools, **kwargs)
            stream = await self._with_retries(
                lambda: client.responses.create(**req, **hdr, stream=True, timeout=timeout)
            )
            async with stream:  # closes the response also when the caller stops early
                async for msg in self._responses_stream(stream):
                    yield msg
            return
        body = self.build_request(messages, tools, **kwargs)
        body.setdefault("stream_options", {"include_usage": True})
        chat = self._chat_kwargs(body)
        stream = await self._with_retries(
            lambda: client.chat.completions.create(**chat, **hdr, stream=True, timeout=timeout)
        )
        acc = _StreamAccumulator(self.model)
        try:
            async with stream:  # closes the response also when the caller stops early
                async for chunk in stream:
                    event = chunk.model_dump(mode="json", exclude_none=True)
                    for fragment in acc.feed_event(event):
                        yield fragment
        except self._sdk.OpenAIError as exc:
            raise self._error(
                f"the stream from model {self.model!r} broke after {acc.events} event(s) "
                f"({type(exc).__name__})",
                retryable=False,
                provider="openai",
            ) from None
        if not acc.finish_reason:
            raise self._error(
                f"the stream from model {self.model!r} ended before its last event",
                retryable=False,
                provider="openai",
            )
        final = acc.message()
        final.metadata["provider"] = "openai"
        yield final

    async def _responses_stream(self, stream: Any) -> AsyncIterator[Message]:
        delta_id = Message(role="assistant").message_id
        done: dict[str, Any] | None = None
        events = 0
        try:
            async for event in stream:
                events += 1
                kind = getattr(event, "type", "")
                if kind == "response.output_text.delta" and event.delta:
                    yield Message(
                        message_id=delta_id, role="assistant", content=event.delta, delta=True
                    )
                elif kind == "response.reasoning_summary_text.delta" and event.delta:
                    yield Message(
                        message_id=delta_id, role="assistant", reasoning=event.delta, delta=True
                    )
                elif kind == "response.completed":
                    done = event.response.model_dump(mode="json")
                elif kind in ("response.failed", "error"):
                    detail = (
                        getattr(event, "message", None)
                        or orjson.dumps(event.model_dump(mode="json"), default=str).decode()[:300]
                    )
                    raise self._error(
                        f"model {self.model!r} failed while streaming: {detail}",
                        retryable=False,
                        provider="openai",
                    )
        except self._sdk.OpenAIError as exc:
            raise self._error(
                f"the stream from model {self.model!r} broke after {events} event(s) "
                f"({type(exc).__name__})",
                retryable=False,
                provider="openai",
            ) from None
        if done is None:
            raise self._error(
                f"the stream from model {self.model!r} ended before response.completed",
                retryable=False,
                provider="openai",
            )
        msg = _from_response(done, self.model)
        if self.keep_raw:
            msg.raw = done
        yield msg
