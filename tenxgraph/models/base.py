"""The chat-model protocol every model adapter implements, and the model error.

A chat model is any object with one async method::

    async def agenerate(
        self, messages: list[Message], tools: list[dict] | None, **kwargs
    ) -> Message

* ``messages``: the conversation to answer, oldest first: the agent's system prompt (as
  ``role="system"`` messages), then the thread's messages (``user``, ``assistant`` with tool
  calls, ``tool`` results). The model must not mutate them.
* ``tools``: the tools the model may call, in OpenAI's function-calling shape
  (``{"type": "function", "function": {"name", "description", "parameters"}}``), or ``None``
  when no tool is offered.
* ``kwargs``: per-call sampling parameters (``temperature``, ``max_tokens``, ``tool_choice``...);
  an adapter ignores those it does not understand or passes them to its provider.
* Returns an ``assistant`` :class:`~tenxgraph.core.state.Message` whose ``content`` holds its
  text blocks and one :class:`~tenxgraph.core.state.ToolCallBlock` per tool call (``id``,
  ``name``, ``args`` as a dict), in the model's order, and whose ``tools_calls`` holds the same
  calls in OpenAI's raw shape (``{"id", "type": "function", "function": {"name",
  "arguments": <JSON string>}}``) so 10xGraph-style routers that test ``last.tools_calls`` work.
  :func:`assistant_message` builds such a message. The message must have a fresh
  ``message_id`` on every call (the ledger keys tool calls by it).

Adapters in this package: :class:`~tenxgraph.models.openai_compat.OpenAICompatModel` (any
OpenAI-compatible chat-completions server: OpenAI, vLLM, Ollama, llama.cpp) and
:class:`~tenxgraph.models.scripted.ScriptedModel` (a fixed list of answers, for tests and
examples).
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

import orjson

from tenxgraph.core.exceptions import TenxGraphError
from tenxgraph.core.state import Message, TextBlock, TokenUsages, ToolCallBlock

__all__ = [
    "transport_errors",
    "ChatModel",
    "ModelError",
    "StructuredOutputError",
    "assistant_message",
    "new_tool_call_id",
    "normalize_assistant",
]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model (see the module docstring for the contract of :meth:`agenerate`)."""

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> Message:
        """Answer ``messages`` with one assistant message (text and/or tool calls).

        Args:
            messages: the conversation, oldest first (system prompt first).
            tools: OpenAI-style tool specs the model may call, or ``None``.
            **kwargs: per-call parameters (``temperature``, ``max_tokens``...).

        Returns:
            An ``assistant`` message with a fresh ``message_id``; tool calls as
            ``ToolCallBlock`` s in ``content`` and in OpenAI raw shape in ``tools_calls``.

        Raises:
            ModelError: ``MODEL_001``; the model could not answer (HTTP error, bad response,
                script exhausted).
        """
        ...


class ModelError(TenxGraphError):
    """A chat model could not produce an answer (error code ``MODEL_001``).

    Raised by the adapters for a provider error that retries did not cure (HTTP 4xx other
    than 429, 5xx / 429 / connection errors after ``max_retries`` retries), a response that is
    not a chat completion, a missing API key for api.openai.com, or an exhausted
    :class:`~tenxgraph.models.scripted.ScriptedModel`. The message names the fix and never
    holds an API key.

    ``context``: ``model`` (the model name), and where relevant ``status_code`` (int),
    ``attempts`` (int), ``base_url`` (passwords redacted), ``provider_error`` (the provider's
    ``error.type`` / ``error.code``), ``retryable`` (bool: 408/409/429/5xx and connection
    errors; ``Agent(fallback_models=...)`` moves to the next model only for these; set by the
    provider adapters, absent for other models, which count as retryable).
    """

    default_code = "MODEL_001"


class StructuredOutputError(ModelError):
    """The model's answer never matched the agent's ``output_schema`` (``MODEL_002``).

    Raised by ``Agent(output_schema=...)`` after the local repair and ``output_retries``
    corrections failed. ``context``: ``schema`` (the model class name), ``attempts`` (int),
    ``errors`` (the last validation errors, text).
    """

    default_code = "MODEL_002"


def new_tool_call_id() -> str:
    """A fresh tool-call id in OpenAI's style (``call_`` + 24 hex characters)."""
    return "call_" + uuid.uuid4().hex[:24]


def _args_json(args: Any) -> str:
    if isinstance(args, str):
        return args
    return orjson.dumps(args, option=orjson.OPT_NON_STR_KEYS, default=str).decode()


def _args_dict(args: Any) -> dict[str, Any]:
    if args is None or args == "":
        return {}
    if isinstance(args, (bytes, str)):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return {"__raw_arguments__": args if isinstance(args, str) else args.decode()}
    if not isinstance(args, dict):
        return {"__raw_arguments__": _args_json(args)}
    return args


def assistant_message(
    text: str | None = None,
    tool_calls: Iterable[Mapping[str, Any] | ToolCallBlock] | None = None,
    *,
    message_id: str | int | None = None,
    reasoning: str | None = None,
    usages: TokenUsages | None = None,
    metadata: dict[str, Any] | None = None,
    raw: dict[str, Any] | None = None,
) -> Message:
    """Build an ``assistant`` message with text and tool calls in both shapes.

    Args:
        text: the answer's text (``None`` or ``""``: no text block).
        tool_calls: each a :class:`ToolCallBlock`, an ``{"id", "name", "arguments"}`` dict
            (``arguments`` a dict or a JSON string; also ``args``), or an OpenAI raw call
            (``{"id", "type": "function", "function": {"name", "arguments"}}``). A missing or
            empty ``id`` gets a fresh one (:func:`new_tool_call_id`). Arguments that are not a
            JSON object are kept as ``{"__raw_arguments__": text}`` so the tool node can report
            them to the model.
        message_id: explicit id (default: a fresh uuid4 string).
        reasoning: the model's reasoning text, if it returned one.
        usages: token counts.
        metadata: extra metadata (``model``, ``finish_reason``...).
        raw: the provider's raw response, if it is to be kept.

    Returns:
        The message; ``tools_calls`` is ``None`` when there are no calls.
    """
    blocks: list[Any] = []
    if text:
        blocks.append(TextBlock(text=text))
    raw_calls: list[dict[str, Any]] = []
    for call in tool_calls or ():
        if isinstance(call, ToolCallBlock):
            cid, name, args_in = call.id, call.name, call.args
        else:
            inner = call.get("function")
            fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else call
            cid = str(call.get("id") or "")
            name = str(fn.get("name") or "")
            args_in = fn.get("arguments", fn.get("args"))
        cid = cid or new_tool_call_id()
        args = _args_dict(args_in)
        blocks.append(ToolCallBlock(id=cid, name=name, args=args))
        raw_args = args_in if isinstance(args_in, str) else _args_json(args)
        raw_calls.append(
            {"id": cid, "type": "function", "function": {"name": name, "arguments": raw_args}}
        )
    kwargs: dict[str, Any] = {
        "role": "assistant",
        "content": blocks,
        "tools_calls": raw_calls or None,
        "reasoning": reasoning,
        "usages": usages,
        "metadata": dict(metadata or {}),
        "raw": raw,
    }
    if message_id is not None:
        kwargs["message_id"] = message_id
    return Message(**kwargs)


def normalize_assistant(msg: Message) -> Message:
    """Make an assistant message carry its tool calls in both shapes, every call with an id.

    A message with ``ToolCallBlock`` s but no ``tools_calls`` (or the reverse), or with calls
    lacking an ``id``, is rebuilt (same ``message_id``, text, reasoning, usages, metadata);
    a consistent message is returned as it is.

    Args:
        msg: a message from a model.

    Returns:
        ``msg`` itself, or a corrected copy.
    """
    calls = msg.tool_calls()
    if not calls:
        return msg
    blocks = [b for b in msg.content if isinstance(b, ToolCallBlock)]
    raw = msg.tools_calls or []
    consistent = (
        len(blocks) == len(calls)
        and len(raw) == len(calls)
        and all(c.id for c in calls)
        and all(
            isinstance(r, dict) and r.get("id") == c.id for r, c in zip(raw, calls, strict=True)
        )
    )
    if consistent:
        return msg
    calls = [c if c.id else c.model_copy(update={"id": new_tool_call_id()}) for c in calls]
    others = [b for b in msg.content if not isinstance(b, ToolCallBlock)]
    raw_calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": _args_json(c.args)},
        }
        for c in calls
    ]
    return msg.model_copy(update={"content": [*others, *calls], "tools_calls": raw_calls})


def transport_errors() -> tuple[type[Exception], ...]:
    """The exception classes of a broken or unreachable HTTP connection in the providers'
    SDKs: ``TransportError`` of ``httpx`` and, when installed, of ``httpx2`` (which newer
    ``google-genai`` and ``anthropic`` releases use), and ``OSError``."""
    found: list[type[Exception]] = [OSError]
    for name in ("httpx", "httpx2"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)
