"""Anthropic's Messages API through the official ``anthropic`` SDK (extra ``anthropic``).

:class:`AnthropicModel` implements the chat-model protocol of :mod:`tenxgraph.models.base`:
the conversation is converted to Messages-API blocks (``system`` apart, tool calls as
``tool_use`` blocks, results as ``tool_result`` blocks in a ``user`` turn), tools are offered as
``{"name", "description", "input_schema"}``, and ``reasoning_effort`` (what
``Agent(reasoning_config=...)`` sets) becomes ``thinking={"type": "enabled", "budget_tokens":
n}``. Streaming uses the SDK's ``messages.stream`` helper (server-sent events). SDK errors
become :class:`~tenxgraph.models.base.ModelError` (``MODEL_001``) with the provider's message,
``status_code`` and a ``retryable`` flag (429, 5xx, connection errors, a stream that breaks or
ends without ``message_stop``), which ``Agent(fallback_models=...)`` reads.

Extended thinking with tools: the answer's ``thinking`` blocks (text and ``signature``) and
``redacted_thinking`` blocks (``data``) are kept, in order, in the assistant message's
``metadata["anthropic_thinking"]`` (plain JSON, so they survive checkpoints) and sent back at
the head of that assistant turn, as the Messages API requires before ``tool_use`` blocks.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from typing import Any

import orjson

from tenxgraph._redact import redact
from tenxgraph.core.state import Message, TokenUsages
from tenxgraph.models._anthropic_parts import content_parts_to_anthropic
from tenxgraph.models.base import ModelError, assistant_message, transport_errors
from tenxgraph.models.openai_compat import to_openai_messages

__all__ = ["THINKING_BUDGETS", "THINKING_KEY", "AnthropicModel", "to_anthropic_request"]

#: ``reasoning_effort`` -> Anthropic ``thinking.budget_tokens``.
THINKING_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
_DEFAULT_MAX_TOKENS = 4096
# above this the SDK expects a request to outlast its 10-minute timeout and asks for streaming
_NONSTREAMING_MAX_TOKENS = 21_000
_PASSED = ("temperature", "top_p", "top_k", "stop_sequences", "metadata")
#: Message metadata key holding the answer's thinking / redacted_thinking blocks.
THINKING_KEY = "anthropic_thinking"


def _sdk() -> Any:
    try:
        return importlib.import_module("anthropic")
    except ImportError:
        raise ModelError(
            "provider='anthropic' needs the official SDK: pip install 'tenxgraph[anthropic]'",
            context={"model": "", "missing_package": "anthropic"},
        ) from None


def to_anthropic_request(
    messages: list[Message], tools: list[dict[str, Any]] | None
) -> tuple[str | None, list[dict[str, Any]], list[dict[str, Any]] | None]:
    """Convert tenxgraph messages and OpenAI-style tools to the Messages API's shape.

    Args:
        messages: the conversation, oldest first (system messages anywhere).
        tools: OpenAI function-calling specs, or ``None``.

    Returns:
        ``(system, messages, tools)``: the joined system text (or ``None``), the alternating
        ``user`` / ``assistant`` turns (consecutive same-role turns merged, as the API asks;
        an assistant turn starts with its kept thinking blocks, :data:`THINKING_KEY`), and
        the Anthropic tool specs (or ``None``).
    """
    system: list[str] = []
    # one assistant wire message per assistant Message, in order (to_openai_messages)
    assistants = iter([m for m in messages if m.role == "assistant"])
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for wire in to_openai_messages(messages):
        role = wire["role"]
        if role == "system":
            system.append(str(wire.get("content") or ""))
        elif role == "assistant":
            source = next(assistants, None)
            kept = source.metadata.get(THINKING_KEY) if source is not None else None
            blocks: list[dict[str, Any]] = [
                dict(b) for b in kept or () if isinstance(b, dict) and _valid_thinking(b)
            ]
            if wire.get("content"):
                blocks.append({"type": "text", "text": wire["content"]})
            for call in wire.get("tool_calls") or ():
                fn = call["function"]
                try:
                    args = orjson.loads(fn["arguments"] or "{}")
                except orjson.JSONDecodeError:
                    args = {"__raw_arguments__": fn["arguments"]}
                blocks.append(
                    {"type": "tool_use", "id": call["id"], "name": fn["name"], "input": args}
                )
            add("assistant", blocks)
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": wire["tool_call_id"],
                        "content": str(wire.get("content") or ""),
                    }
                ],
            )
        else:
            content = wire.get("content")
            if isinstance(content, list):  # images and documents: content blocks
                add("user", content_parts_to_anthropic(content))
            else:
                add("user", [{"type": "text", "text": str(content or "")}])
    specs = None
    if tools:
        specs = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description") or "",
                "input_schema": t["function"].get("parameters") or {"type": "object"},
            }
            for t in tools
        ]
    return ("\n\n".join(system) or None), out, specs


def _valid_thinking(block: dict[str, Any]) -> bool:
    if block.get("type") == "thinking":
        return isinstance(block.get("thinking"), str) and isinstance(block.get("signature"), str)
    return block.get("type") == "redacted_thinking" and isinstance(block.get("data"), str)


def _message(resp: Any, model: str) -> Message:
    text: list[str] = []
    thinking: list[str] = []
    kept: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in resp.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            text.append(block.text)
        elif kind == "thinking":
            thinking.append(block.thinking)
            kept.append(
                {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
            )
        elif kind == "redacted_thinking":
            kept.append({"type": "redacted_thinking", "data": block.data})
        elif kind == "tool_use":
            calls.append({"id": block.id, "name": block.name, "arguments": dict(block.input)})
    usage = getattr(resp, "usage", None)
    usages = None
    if usage is not None:
        inp, outp = int(usage.input_tokens or 0), int(usage.output_tokens or 0)
        usages = TokenUsages(
            prompt_tokens=inp,
            completion_tokens=outp,
            total_tokens=inp + outp,
            cache_creation_input_tokens=int(getattr(usage, "cache_creation_input_tokens", 0) or 0),
            cache_read_input_tokens=int(getattr(usage, "cache_read_input_tokens", 0) or 0),
        )
    metadata = {
        "model": getattr(resp, "model", None) or model,
        "provider": "anthropic",
        "finish_reason": getattr(resp, "stop_reason", None),
        "response_id": getattr(resp, "id", None),
        THINKING_KEY: kept or None,
    }
    return assistant_message(
        "".join(text) or None,
        calls,
        reasoning="".join(thinking) or None,
        usages=usages,
        metadata={k: v for k, v in metadata.items() if v is not None},
    )


class AnthropicModel:
    """A Claude model reached through ``anthropic.AsyncAnthropic``.

    Args:
        model: the model name (``"claude-sonnet-4-5"``; an ``"anthropic/"`` prefix is dropped).
        api_key: the key (default: the SDK reads ``ANTHROPIC_API_KEY``).
        base_url: another endpoint (default: the SDK reads ``ANTHROPIC_BASE_URL``).
        timeout_s: per-request timeout in seconds (default: the SDK's).
        max_retries: the SDK's own retries of 408/409/429/5xx and connection errors.
        **params: default request parameters: ``max_tokens`` (default 4096), ``temperature``,
            ``top_p``, ``top_k``, ``stop_sequences``, ``reasoning_effort`` (mapped to
            ``thinking`` by :data:`THINKING_BUDGETS`), ``thinking`` (passed as it is),
            ``response_format`` (``json_object`` / ``json_schema``: sent as
            ``output_config.format``, Claude's structured outputs).

    Raises:
        ModelError: ``MODEL_001`` when the ``anthropic`` package is not installed.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float | None = None,
        max_retries: int = 0,
        **params: Any,
    ) -> None:
        sdk = _sdk()
        self.model = model.removeprefix("anthropic/")
        self.params = params
        kwargs: dict[str, Any] = {"max_retries": max_retries}
        if api_key is not None:
            kwargs["api_key"] = api_key
        if base_url is not None:
            kwargs["base_url"] = base_url
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        self._sdk = sdk
        self._client = sdk.AsyncAnthropic(**kwargs)

    def __repr__(self) -> str:
        return f"AnthropicModel({self.model!r})"

    def _request(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        client = self._client
        if not any(getattr(client, k, None) for k in ("api_key", "auth_token", "credentials")):
            # checked here, not at construction: an Agent is often built before the
            # environment is read; the SDK itself would raise a bare TypeError
            raise ModelError(
                f"anthropic model {self.model!r}: no API key; set ANTHROPIC_API_KEY or pass "
                "api_key=",
                context={"model": self.model, "provider": "anthropic", "retryable": False},
            )
        params = {**self.params, **kwargs}
        system, wire, specs = to_anthropic_request(messages, tools)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "max_tokens": int(params.get("max_tokens") or _DEFAULT_MAX_TOKENS),
        }
        if system:
            body["system"] = system
        if specs:
            body["tools"] = specs
        for key in _PASSED:
            if params.get(key) is not None:
                body[key] = params[key]
        fmt = params.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
            # structured outputs: Claude answers with JSON matching the schema
            schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        effort = params.get("reasoning_effort")
        if params.get("thinking") is not None:
            body["thinking"] = params["thinking"]
        elif effort in THINKING_BUDGETS:
            budget = THINKING_BUDGETS[effort]
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            body["max_tokens"] = max(body["max_tokens"], budget + 1024)
        return body

    def _error(self, exc: Exception) -> ModelError:
        sdk = self._sdk
        status = getattr(exc, "status_code", None)
        retryable = isinstance(exc, sdk.APIConnectionError) or (
            isinstance(status, int) and (status in (408, 409, 429) or status >= 500)
        )
        body = getattr(exc, "body", None)
        err = body.get("error") if isinstance(body, dict) else None
        context: dict[str, Any] = {
            "model": self.model,
            "provider": "anthropic",
            "status_code": status,
            "retryable": retryable,
        }
        detail = ""
        if isinstance(err, dict):
            context["provider_error"] = err.get("type")
            detail = str(err.get("message") or "")
        elif isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else str(exc)
        return ModelError(
            f"anthropic model {self.model!r} failed: {type(exc).__name__}"
            + (f" (HTTP {status})" if status else "")
            + (f": {redact(detail)[:500]}" if detail else ""),
            context=context,
        )

    def _broken(self, events: int, why: str) -> ModelError:
        return ModelError(
            f"the stream from anthropic model {self.model!r} broke after {events} event(s) ({why})",
            context={"model": self.model, "provider": "anthropic", "retryable": True},
        )

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> Message:
        """Answer with one assistant message (protocol of :mod:`tenxgraph.models.base`).

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (see the class).

        Returns:
            The assistant message (text, ``tool_use`` calls, thinking as ``reasoning``, usage).

        Raises:
            ModelError: ``MODEL_001`` for an SDK / HTTP error (``context['retryable']``).
        """
        body = self._request(messages, tools, kwargs)
        try:
            if body["max_tokens"] > _NONSTREAMING_MAX_TOKENS:
                # the SDK refuses long non-streamed requests; the stream helper collects them
                async with self._client.messages.stream(**body) as stream:
                    resp = await stream.get_final_message()
            else:
                resp = await self._client.messages.create(**body)
        except self._sdk.AnthropicError as exc:
            raise self._error(exc) from None
        return _message(resp, self.model)

    async def astream(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> AsyncIterator[Message]:
        """Stream: text / thinking fragments (``delta=True``), then the whole answer.

        Args:
            messages: the conversation, oldest first.
            tools: OpenAI-style tool specs, or ``None``.
            **kwargs: per-call parameters (see the class).

        Yields:
            Delta messages, then the final assistant message (``delta=False``).

        Raises:
            ModelError: ``MODEL_001`` for an SDK / HTTP error.
        """
        body = self._request(messages, tools, kwargs)
        events, stopped = 0, False
        try:
            async with self._client.messages.stream(**body) as stream:
                async for event in stream:
                    events += 1
                    kind = getattr(event, "type", None)
                    stopped = stopped or kind == "message_stop"
                    if kind == "text" and event.text:
                        yield Message(role="assistant", content=event.text, delta=True)
                    elif kind == "thinking" and event.thinking:
                        yield Message(
                            role="assistant", content=[], reasoning=event.thinking, delta=True
                        )
                if not stopped:  # a truncated answer is no answer
                    raise self._broken(events, "it ended without message_stop")
                final = await stream.get_final_message()
        except self._sdk.AnthropicError as exc:
            raise self._error(exc) from None
        except transport_errors() as exc:  # the connection dropped mid-stream
            raise self._broken(events, type(exc).__name__) from None
        yield _message(final, self.model)
