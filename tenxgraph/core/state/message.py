"""The :class:`Message` model: one turn of a conversation, made of typed content blocks."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tenxgraph._uuid import uuid4_str

from .message_block import ContentBlock, TextBlock, ToolCallBlock, ToolResultBlock

__all__ = ["Message", "TokenUsages", "Role"]

#: The roles a message may have; anything else is rejected at construction.
Role = Literal["user", "assistant", "system", "tool"]


def _new_id() -> str:
    return uuid4_str()


class TokenUsages(BaseModel):
    """Token counts of one model call (counts, not bytes)."""

    completion_tokens: int = 0
    prompt_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    image_tokens: int | None = 0
    audio_tokens: int | None = 0


class Message(BaseModel):
    """One message of a conversation (10xGraph-compatible).

    Attributes:
        message_id: unique id within a thread (``str`` or ``int``); a uuid4 string when absent.
            ``add_messages`` de-duplicates by it.
        role: ``"user"``, ``"assistant"``, ``"system"`` or ``"tool"``; any other value raises
            pydantic's ``ValidationError`` (a ``ValueError``).
        content: list of typed blocks (``tenxgraph.core.state.message_block``); a plain
            ``str`` becomes one ``TextBlock``.
        delta: ``True`` for streaming fragments; ``add_messages`` never stores them.
        tools_calls: raw tool calls in OpenAI's shape
            (``{"id", "type": "function", "function": {"name", "arguments"}}``), or ``None``.
        tool_call_id: for ``role="tool"``, the id of the call this message answers.
        timestamp: UNIX time in seconds; set at creation.
        metadata: free-form JSON-compatible dict.
        usages: token counts of the model call that produced it.
        raw: the provider's raw response, if kept.

    Messages are values: once a message is in a thread's state, build a new one rather than
    mutating it in place (the runtime shares message objects between steps and its in-process
    cache; only changes made through reducers reach the store).
    """

    model_config = ConfigDict(extra="ignore")

    message_id: str | int = Field(default_factory=_new_id)
    role: Role
    content: list[ContentBlock] = Field(default_factory=list)
    delta: bool = False
    tools_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    reasoning: str | None = None
    timestamp: float | None = Field(default_factory=time.time)
    metadata: dict[str, Any] = Field(default_factory=dict)
    usages: TokenUsages | None = None
    raw: dict[str, Any] | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _str_to_block(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        if isinstance(value, (TextBlock, ToolCallBlock, ToolResultBlock)):
            return [value]
        return value

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def text_message(
        cls, content: str, role: Role = "user", message_id: str | int | None = None
    ) -> Message:
        """Build a message holding one text block.

        Args:
            content: the text.
            role: ``"user"`` (default), ``"assistant"``, ``"system"`` or ``"tool"``.
            message_id: explicit id; a uuid4 string when ``None``.
        """
        kwargs: dict[str, Any] = {"role": role, "content": [TextBlock(text=content)]}
        if message_id is not None:
            kwargs["message_id"] = message_id
        return cls(**kwargs)

    @classmethod
    def tool_message(
        cls,
        content: Any,
        tool_call_id: str | None = None,
        message_id: str | int | None = None,
        meta: dict[str, Any] | None = None,
        *,
        is_error: bool = False,
    ) -> Message:
        """Build a ``role="tool"`` message answering one tool call.

        Args:
            content: a list of content blocks, or the tool's result (``str``, ``dict`` or
                ``list``), which becomes one :class:`ToolResultBlock`.
            tool_call_id: the id of the call answered; required when ``content`` is a result.
            message_id: explicit id; a uuid4 string when ``None``.
            meta: metadata dict.
            is_error: mark the result as a tool failure.
        """
        if isinstance(content, list) and content and all(isinstance(b, BaseModel) for b in content):
            blocks = content
            if tool_call_id is None:
                for b in blocks:
                    if isinstance(b, ToolResultBlock):
                        tool_call_id = b.tool_call_id
                        break
        else:
            if tool_call_id is None:
                raise ValueError("Message.tool_message needs tool_call_id when content is a result")
            blocks = [
                ToolResultBlock(tool_call_id=tool_call_id, content=content, is_error=is_error)
            ]
        kwargs: dict[str, Any] = {
            "role": "tool",
            "content": blocks,
            "tool_call_id": tool_call_id,
            "metadata": dict(meta or {}),
        }
        if message_id is not None:
            kwargs["message_id"] = message_id
        return cls(**kwargs)

    # -- accessors ------------------------------------------------------------------------------
    def text(self) -> str:
        """The plain text: text blocks joined; for a tool message without text blocks, the
        result content (``str`` as is, anything else as JSON)."""
        parts = [b.text for b in self.content if isinstance(b, TextBlock)]
        if parts:
            return "".join(parts)
        for b in self.content:
            if isinstance(b, ToolResultBlock):
                if isinstance(b.content, str):
                    return b.content
                if b.content is None:
                    return ""
                import orjson

                return orjson.dumps(b.content).decode()
        return ""

    def tool_calls(self) -> list[ToolCallBlock]:
        """The tool calls this (assistant) message makes, in the model's order: its
        :class:`ToolCallBlock` s, or those parsed from ``tools_calls`` when it has none."""
        blocks = [b for b in self.content if isinstance(b, ToolCallBlock)]
        if blocks or not self.tools_calls:
            return blocks
        import orjson

        out: list[ToolCallBlock] = []
        for raw in self.tools_calls:
            fn = raw.get("function", raw)
            args = fn.get("arguments", fn.get("args", {}))
            if isinstance(args, str):
                try:
                    args = orjson.loads(args) if args else {}
                except orjson.JSONDecodeError:
                    args = {"__raw_arguments__": args}
            out.append(ToolCallBlock(id=str(raw.get("id", "")), name=fn.get("name", ""), args=args))
        return out
