"""Google's Gemini API through the official ``google-genai`` SDK (extra ``google``).

:class:`GoogleModel` implements the chat-model protocol of :mod:`tenxgraph.models.base` over
``generateContent`` / ``streamGenerateContent``: system messages become
``system_instruction``, assistant turns ``model`` turns with ``function_call`` parts, tool
results ``function_response`` parts; tools are offered as ``function_declarations``, and
``reasoning_effort`` (set by ``Agent(reasoning_config=...)``) becomes
``thinking_config.thinking_budget`` (:data:`THINKING_BUDGETS`, thoughts included). SDK errors
become :class:`~tenxgraph.models.base.ModelError` (``MODEL_001``) with the provider's message,
``status_code`` and a ``retryable`` flag (429, 5xx, connection errors, a stream that breaks),
which ``Agent(fallback_models=...)`` reads; retryable failures are first retried with the
backoff of :class:`~tenxgraph.models.openai_compat.OpenAICompatModel` (``max_retries``).

Thought signatures: the ``thought_signature`` bytes Gemini puts on ``function_call`` and text
parts are kept, base64-encoded (JSON, so they survive checkpoints), in the assistant message's
``metadata["gemini_thought_signatures"]`` (``{"calls": {call_id: sig}, "text": sig}``) and
put back on the same parts of that model turn; Gemini 3 refuses a function call without one.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import anyio
import orjson
import pydantic

from tenxgraph._redact import redact
from tenxgraph.core.state import Message, TokenUsages
from tenxgraph.models._gemini_parts import content_parts_to_gemini
from tenxgraph.models.base import (
    ModelError,
    assistant_message,
    new_tool_call_id,
    transport_errors,
)
from tenxgraph.models.openai_compat import _backoff_s, to_openai_messages

__all__ = [
    "SIGNATURES_KEY",
    "THINKING_BUDGETS",
    "GoogleModel",
    "gemini_message",
    "gemini_stream",
    "to_gemini_request",
]

#: ``reasoning_effort`` -> Gemini ``thinking_config.thinking_budget`` (tokens).
THINKING_BUDGETS = {"minimal": 128, "low": 512, "medium": 8192, "high": 24576}
#: Message metadata key holding the answer's thought signatures (base64 text).
SIGNATURES_KEY = "gemini_thought_signatures"
_PASSED = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
    "stop": "stop_sequences",
    "stop_sequences": "stop_sequences",
    "seed": "seed",
}


def _sdk() -> tuple[Any, Any, Any]:
    try:
        genai = importlib.import_module("google.genai")
        types = importlib.import_module("google.genai.types")
        errors = importlib.import_module("google.genai.errors")
    except ImportError:
        raise ModelError(
            "provider='google' needs the official SDK: pip install 'tenxgraph[google]'",
            context={"model": "", "missing_package": "google-genai"},
        ) from None
    return genai, types, errors


def to_gemini_request(
    messages: list[Message], tools: list[dict[str, Any]] | None
) -> tuple[str | None, list[dict[str, Any]], list[dict[str, Any]] | None]:
    """Convert tenxgraph messages and OpenAI-style tools to Gemini's ``contents`` shape.

    Args:
        messages: the conversation, oldest first.
        tools: OpenAI function-calling specs, or ``None``.

    Returns:
        ``(system_instruction, contents, tools)``: the joined system text (or ``None``), the
        ``user`` / ``model`` turns (consecutive same-role turns merged; kept thought
        signatures, :data:`SIGNATURES_KEY`, back on their parts), and one
        ``{"function_declarations": [...]}`` tool (or ``None``).
    """
    system: list[str] = []
    # one assistant wire message per assistant Message, in order (to_openai_messages)
    assistants = iter([m for m in messages if m.role == "assistant"])
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if out and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})

    for wire in to_openai_messages(messages):
        role = wire["role"]
        if role == "system":
            system.append(str(wire.get("content") or ""))
        elif role == "assistant":
            source = next(assistants, None)
            sigs = source.metadata.get(SIGNATURES_KEY) if source is not None else None
            sigs = sigs if isinstance(sigs, dict) else {}
            kept_calls = sigs.get("calls")
            call_sigs: dict[str, Any] = kept_calls if isinstance(kept_calls, dict) else {}
            parts: list[dict[str, Any]] = []
            if wire.get("content"):
                parts.append({"text": wire["content"], **_signed(sigs.get("text"))})
            for call in wire.get("tool_calls") or ():
                fn = call["function"]
                names[call["id"]] = fn["name"]
                try:
                    args = orjson.loads(fn["arguments"] or "{}")
                except orjson.JSONDecodeError:
                    args = {"__raw_arguments__": fn["arguments"]}
                parts.append(
                    {
                        "function_call": {"id": call["id"], "name": fn["name"], "args": args},
                        **_signed(call_sigs.get(call["id"])),
                    }
                )
            add("model", parts)
        elif role == "tool":
            content = str(wire.get("content") or "")
            try:
                result = orjson.loads(content)
            except orjson.JSONDecodeError:
                result = content
            call_id = wire["tool_call_id"]
            response = result if isinstance(result, dict) else {"result": result}
            add(
                "user",
                [
                    {
                        "function_response": {
                            "id": call_id,
                            "name": names.get(call_id, call_id),
                            "response": response,
                        }
                    }
                ],
            )
        else:
            user = wire.get("content")
            if isinstance(user, list):  # images, audio, documents: inline_data / file_data
                add("user", content_parts_to_gemini(user, fetch=False))
            else:
                add("user", [{"text": str(user or "")}])
    specs = None
    if tools:
        decls = []
        for t in tools:
            fn = t["function"]
            decl: dict[str, Any] = {"name": fn["name"], "description": fn.get("description") or ""}
            if fn.get("parameters"):
                decl["parameters_json_schema"] = fn["parameters"]
            decls.append(decl)
        specs = [{"function_declarations": decls}]
    return ("\n\n".join(system) or None), out, specs


def _signed(sig: Any) -> dict[str, Any]:
    """``{"thought_signature": bytes}`` for a kept base64 signature, else ``{}``."""
    if not isinstance(sig, str) or not sig:
        return {}
    try:
        return {"thought_signature": base64.b64decode(sig, validate=True)}
    except (binascii.Error, ValueError):
        return {}


def _b64(sig: Any) -> str | None:
    return base64.b64encode(sig).decode() if isinstance(sig, bytes) and sig else None


def _usage(meta: Any) -> TokenUsages | None:
    if meta is None:
        return None
    return TokenUsages(
        prompt_tokens=int(getattr(meta, "prompt_token_count", 0) or 0),
        completion_tokens=int(getattr(meta, "candidates_token_count", 0) or 0),
        total_tokens=int(getattr(meta, "total_token_count", 0) or 0),
        reasoning_tokens=int(getattr(meta, "thoughts_token_count", 0) or 0),
        cache_read_input_tokens=int(getattr(meta, "cached_content_token_count", 0) or 0),
    )


def _parts(resp: Any) -> list[Any]:
    candidates = getattr(resp, "candidates", None) or []
    if not candidates or candidates[0].content is None:
        return []
    return list(candidates[0].content.parts or [])


def gemini_message(model: str, parts: list[Any], usage: Any, finish: Any, resp_id: Any) -> Message:
    """The assistant message of Gemini response ``parts`` (objects of ``google.genai.types``,
    or anything with the same attributes): text, ``function_call`` s as tool calls, thoughts
    as ``reasoning``, ``usage`` (``usage_metadata``) as token usages; ``metadata`` holds
    ``model``, ``provider`` (``"google"``), ``finish_reason``, ``response_id`` and the thought
    signatures (:data:`SIGNATURES_KEY`) when known."""
    text: list[str] = []
    thoughts: list[str] = []
    calls: list[dict[str, Any]] = []
    call_sigs: dict[str, str] = {}
    text_sig: str | None = None
    for part in parts:
        call = getattr(part, "function_call", None)
        sig = _b64(getattr(part, "thought_signature", None))
        if call is not None:
            call_id = getattr(call, "id", None) or new_tool_call_id()
            calls.append({"id": call_id, "name": call.name, "arguments": dict(call.args or {})})
            if sig:
                call_sigs[call_id] = sig
        elif getattr(part, "text", None):
            (thoughts if getattr(part, "thought", False) else text).append(part.text)
            if sig and not getattr(part, "thought", False):
                text_sig = sig
    metadata = {
        "model": model,
        "provider": "google",
        "finish_reason": str(getattr(finish, "value", finish)) if finish is not None else None,
        "response_id": resp_id,
        SIGNATURES_KEY: {k: v for k, v in (("calls", call_sigs), ("text", text_sig)) if v} or None,
    }
    return assistant_message(
        "".join(text) or None,
        calls,
        reasoning="".join(thoughts) or None,
        usages=_usage(usage),
        metadata={k: v for k, v in metadata.items() if v not in (None, "")},
    )


async def gemini_stream(model: str, chunks: AsyncIterable[Any]) -> AsyncIterator[Message]:
    """Messages of a Gemini response stream: a delta message per text or thought fragment
    (``delta=True``), then the whole answer (:func:`gemini_message`)."""
    parts: list[Any] = []
    usage: Any = None
    finish: Any = None
    resp_id: Any = None
    async for chunk in chunks:
        usage = getattr(chunk, "usage_metadata", None) or usage
        resp_id = getattr(chunk, "response_id", None) or resp_id
        cands = getattr(chunk, "candidates", None) or []
        if cands and cands[0].finish_reason is not None:
            finish = cands[0].finish_reason
        for part in _parts(chunk):
            parts.append(part)
            if getattr(part, "function_call", None) is None and getattr(part, "text", None):
                if getattr(part, "thought", False):
                    yield Message(role="assistant", content=[], reasoning=part.text, delta=True)
                else:
                    yield Message(role="assistant", content=part.text, delta=True)
    yield gemini_message(model, parts, usage, finish, resp_id)


class GoogleModel:
    """A Gemini model reached through ``google.genai.Client(...).aio``.

    Args:
        model: the model name (``"gemini-2.5-flash"``; a ``"google/"`` or ``"gemini/"`` prefix
            is dropped).
        api_key: the key (default: the SDK reads ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY``).
        base_url: another endpoint (default: the SDK's; ``GOOGLE_GEMINI_BASE_URL`` is read by
            the SDK too).
        timeout_s: per-request timeout in seconds (default: the SDK's).
        use_vertex_ai: route the calls through Vertex AI (``genai.Client(vertexai=True)``:
            Application Default Credentials with ``GOOGLE_CLOUD_PROJECT`` /
            ``GOOGLE_CLOUD_LOCATION``, or an API key in Vertex AI express mode;
            ``GOOGLE_VERTEX_BASE_URL`` is read by the SDK). ``False`` (default) leaves the
            choice to the SDK, which reads ``GOOGLE_GENAI_USE_VERTEXAI``.
        **params: default request parameters: ``temperature``, ``top_p``, ``top_k``,
            ``max_tokens``, ``stop``, ``seed``, ``reasoning_effort`` (mapped by
            :data:`THINKING_BUDGETS`), ``thinking_budget`` (tokens, passed as it is), ``thinking_level`` (mapped like an effort),
            ``response_format`` (``json_object`` / ``json_schema``: JSON output).
        max_retries: retries after the first attempt of a retryable failure (429, 5xx,
            connection errors; ``retry_statuses`` when given), with exponential backoff
            (``initial_delay_s`` doubled by ``backoff_factor`` up to ``max_delay_s``, +-25 %
            jitter), as :class:`~tenxgraph.models.openai_compat.OpenAICompatModel`. A stream is
            retried only before its first event. Default ``0``.
        retry_statuses: HTTP statuses retried (default: 429 and 5xx).
        initial_delay_s: backoff before the first retry, in seconds.
        backoff_factor: the backoff's growth per retry.
        max_delay_s: the longest backoff, in seconds.

    Raises:
        ModelError: ``MODEL_001`` when ``google-genai`` is not installed.
        ValueError: ``max_retries`` is negative.
    """

    provider = "google"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float | None = None,
        use_vertex_ai: bool = False,
        max_retries: int = 0,
        retry_statuses: frozenset[int] | set[int] | None = None,
        initial_delay_s: float = 0.5,
        backoff_factor: float = 2.0,
        max_delay_s: float = 8.0,
        **params: Any,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        genai, types, errors = _sdk()
        self.max_retries = max_retries
        self.retry_statuses = frozenset(retry_statuses) if retry_statuses is not None else None
        self.initial_delay_s = initial_delay_s
        self.backoff_factor = backoff_factor
        self.max_delay_s = max_delay_s
        head, sep, rest = model.partition("/")
        name = rest if sep and head.lower() in ("google", "gemini") else model
        self.model = name.removeprefix("models/")
        self.params = params
        self._types = types
        self._errors = errors
        self._transport = transport_errors()
        http: dict[str, Any] = {}
        if base_url is not None:
            http["base_url"] = base_url
        if timeout_s is not None:
            http["timeout"] = int(timeout_s * 1000)
        kwargs: dict[str, Any] = {}
        if api_key is not None:
            kwargs["api_key"] = api_key
        if use_vertex_ai:
            kwargs["vertexai"] = True
        self.use_vertex_ai = bool(use_vertex_ai)
        if http:
            kwargs["http_options"] = types.HttpOptions(**http)
        self._genai = genai
        self._client_kwargs = kwargs
        self._client_obj: Any = None

    @property
    def _client(self) -> Any:
        # built on first use: the SDK wants a key at construction, and an Agent is often
        # built at import time, before the environment is read (as 10xGraph's pages do)
        if self._client_obj is None:
            try:
                self._client_obj = self._genai.Client(**self._client_kwargs)
            except ValueError as exc:
                raise ModelError(
                    f"google model {self.model!r}: {exc} (set GEMINI_API_KEY or pass api_key=)",
                    context={"model": self.model, "provider": "google", "retryable": False},
                ) from None
        return self._client_obj

    def __repr__(self) -> str:
        return f"GoogleModel({self.model!r})"

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], Any]:
        params = {**self.params, **kwargs}
        system, contents, specs = to_gemini_request(messages, tools)
        config: dict[str, Any] = {}
        if system:
            config["system_instruction"] = system
        if specs:
            config["tools"] = specs
            config["automatic_function_calling"] = {"disable": True}
        for key, target in _PASSED.items():
            if params.get(key) is not None:
                config[target] = params[key]
        budget = params.get("thinking_budget")
        effort = params.get("thinking_level") or params.get("reasoning_effort")
        if budget is None and effort in THINKING_BUDGETS:
            budget = THINKING_BUDGETS[effort]
        if budget is not None:
            config["thinking_config"] = {"thinking_budget": int(budget), "include_thoughts": True}
        fmt = params.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
            config["response_mime_type"] = "application/json"
            schema = (fmt.get("json_schema") or {}).get("schema")
            if schema:
                config["response_json_schema"] = schema
        return contents, self._types.GenerateContentConfig(**config)

    def _error(self, exc: Exception) -> ModelError:
        if isinstance(exc, pydantic.ValidationError):  # the SDK could not read the answer
            return ModelError(
                f"google model {self.model!r} answered with a response the SDK could not "
                f"read ({exc.error_count()} validation error(s); first: "
                f"{exc.errors(include_url=False)[0]['msg']})",
                context={"model": self.model, "provider": "google", "retryable": False},
            )
        status = getattr(exc, "code", None)
        if not isinstance(status, int):
            retryable = True  # connection errors, timeouts
        elif self.retry_statuses is not None:
            retryable = status in self.retry_statuses
        else:
            retryable = status == 429 or status >= 500
        detail = getattr(exc, "message", None) if status else str(exc)
        return ModelError(
            f"google model {self.model!r} failed: {type(exc).__name__}"
            + (f" (HTTP {status}: {getattr(exc, 'status', '')})" if status else "")
            + (f": {redact(detail)[:500]}" if detail else ""),
            context={
                "model": self.model,
                "provider": "google",
                "status_code": status,
                "retryable": retryable,
                "provider_error": getattr(exc, "status", None),
            },
        )

    def _message(self, parts: list[Any], usage: Any, finish: Any, resp_id: Any) -> Message:
        return gemini_message(self.model, parts, usage, finish, resp_id)

    @property
    def _failures(self) -> tuple[type[Exception], ...]:
        return (self._errors.APIError, *self._transport, pydantic.ValidationError)

    async def _call(self, method: str, contents: list[dict[str, Any]], config: Any) -> Any:
        """One ``generate_content`` answer, or a ``generate_content_stream`` stream with its
        first chunk read (``(first_chunk, stream)``; the SDK sends the request lazily), retried
        as the class says; SDK and HTTP failures become ``ModelError``."""
        attempts = 0
        while True:
            attempts += 1
            try:
                got = await getattr(self._client.aio.models, method)(
                    model=self.model, contents=contents, config=config
                )
                if method == "generate_content":
                    return got
                return await anext(got, None), got
            except self._failures as exc:
                error = self._error(exc)
                if not error.context.get("retryable") or attempts > self.max_retries:
                    error.context["attempts"] = attempts
                    raise error from None
            await anyio.sleep(
                _backoff_s(
                    attempts - 1, self.initial_delay_s, self.backoff_factor, self.max_delay_s
                )
            )

    async def _generate(self, contents: list[dict[str, Any]], config: Any) -> Any:
        """One ``generateContent`` answer (:meth:`_call`)."""
        return await self._call("generate_content", contents, config)

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> Message:
        """Answer with one assistant message (protocol of :mod:`tenxgraph.models.base`).

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (see the class).

        Returns:
            The assistant message (text, function calls, thoughts as ``reasoning``, usage).

        Raises:
            ModelError: ``MODEL_001`` for an API / HTTP error (``context['retryable']``).
        """
        contents, config = self._request(messages, tools, kwargs)
        resp = await self._generate(contents, config)
        cands = resp.candidates or []
        finish = cands[0].finish_reason if cands else None
        return self._message(_parts(resp), resp.usage_metadata, finish, resp.response_id)

    async def agrounded_search(self, query: str) -> tuple[str, dict[str, Any] | None]:
        """Ask the model ``query`` with Gemini's Google Search grounding tool enabled.

        One ``generateContent`` call whose ``tools`` hold ``{"googleSearch": {}}`` (Gemini's
        search grounding); the model's sampling parameters apply.

        Args:
            query: the question, sent as one user turn.

        Returns:
            ``(text, grounding)``: the answer's text and its ``grounding_metadata`` as a JSON
            dict (``web_search_queries``, ``grounding_chunks``, ``grounding_supports``...;
            ``None`` when the answer carries none).

        Raises:
            ModelError: ``MODEL_001`` for an API / HTTP error (``context['retryable']``).
        """
        types = self._types
        contents = [{"role": "user", "parts": [{"text": query}]}]
        _, config = self._request([], None, {})
        config.tools = [types.Tool(google_search=types.GoogleSearch())]
        resp = await self._generate(contents, config)
        cands = resp.candidates or []
        text = "".join(
            p.text
            for p in ((cands[0].content.parts or []) if cands and cands[0].content else [])
            if getattr(p, "text", None) and not getattr(p, "thought", False)
        )
        meta = cands[0].grounding_metadata if cands else None
        grounding = meta.model_dump(mode="json", exclude_none=True) if meta is not None else None
        return text, grounding

    async def astream(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> AsyncIterator[Message]:
        """Stream (``streamGenerateContent``, SSE): text fragments, then the whole answer.

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (see the class).

        Yields:
            Delta messages (``delta=True``), then the final assistant message.

        Raises:
            ModelError: ``MODEL_001`` for an API / HTTP error, or a stream that breaks
                (retryable).
        """
        contents, config = self._request(messages, tools, kwargs)
        first, stream = await self._call("generate_content_stream", contents, config)

        async def chunks() -> AsyncIterator[Any]:
            if first is not None:
                yield first
                async for chunk in stream:
                    yield chunk

        events = 0
        try:
            async for message in gemini_stream(self.model, chunks()):
                events += 1
                yield message
        except self._transport as exc:  # the connection dropped mid-stream
            raise ModelError(
                f"the stream from google model {self.model!r} broke after {events} event(s) "
                f"({type(exc).__name__})",
                context={"model": self.model, "provider": "google", "retryable": True},
            ) from None
        except (self._errors.APIError, pydantic.ValidationError) as exc:
            raise self._error(exc) from None
