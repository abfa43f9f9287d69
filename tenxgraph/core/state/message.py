"""The :class:`Message` model: one turn of a conversation, made of typed content blocks."""

from __future__ import annotations

import base64
import mimetypes
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tenxgraph._uuid import uuid4_str

from .message_block import (
    AudioBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)

if TYPE_CHECKING:
    from tenxgraph.storage.media.storage.base import BaseMediaStore

__all__ = ["Message", "TokenUsages", "Role", "generate_id"]

#: The roles a message may have; anything else is rejected at construction.
Role = Literal["user", "assistant", "system", "tool"]


def _new_id() -> str:
    return uuid4_str()


def generate_id(default_id: str | int | None = None) -> str | int:
    """A message id: ``default_id`` when given, else a fresh uuid4 string.

    Args:
        default_id: an id the caller already has (``str`` or ``int``).
    """
    return default_id if default_id is not None else _new_id()


MediaKind = Literal["image", "audio", "video", "document"]


def _media_block(media: MediaRef, as_type: MediaKind | None = None) -> ContentBlock:
    """The content block for ``media``: ``as_type``, or chosen by its MIME type (``image/*``,
    ``audio/*``, ``video/*``, anything else a document)."""
    kind = as_type or (media.mime_type or "").split("/", 1)[0]
    if kind == "image":
        return ImageBlock(media=media)
    if kind == "audio":
        return AudioBlock(media=media)
    if kind == "video":
        return VideoBlock(media=media)
    if as_type not in (None, "document"):
        raise ValueError(f"as_type must be image, audio, video or document, not {as_type!r}")
    return DocumentBlock(media=media)


def _read_file(path: str | Path, mime_type: str | None) -> tuple[bytes, str, str]:
    """``(bytes, MIME type, file name)`` of a file; the type guessed from its name when not
    given (``application/octet-stream`` when unknown). Raises ``FileNotFoundError``."""
    p = Path(path)
    data = p.read_bytes()
    mime = mime_type or mimetypes.guess_type(p.name)[0] or "application/octet-stream"
    return data, mime, p.name


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

    @classmethod
    def image_message(
        cls,
        image_url: str | None = None,
        image_base64: str | None = None,
        mime_type: str | None = None,
        text: str | None = None,
        role: Role = "user",
    ) -> Message:
        """A message with an optional text block followed by one image.

        Args:
            image_url: the image's URL (``http(s)://``, ``data:`` or ``graph://media/{key}``).
            image_base64: the image's bytes as standard base64 (used when ``image_url`` is
                not given).
            mime_type: the image's MIME type, e.g. ``"image/jpeg"``.
            text: text placed before the image.
            role: the message's role (default ``"user"``).

        Raises:
            ValueError: when neither ``image_url`` nor ``image_base64`` is given.
        """
        if image_url:
            media = MediaRef(kind="url", url=image_url, mime_type=mime_type)
        elif image_base64:
            media = MediaRef(kind="data", data_base64=image_base64, mime_type=mime_type)
        else:
            raise ValueError("Message.image_message needs image_url or image_base64")
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        blocks.append(ImageBlock(media=media))
        return cls(role=role, content=blocks)

    @classmethod
    def multimodal_message(cls, content: Sequence[Any], role: Role = "user") -> Message:
        """A message made of the given content blocks, in order.

        Args:
            content: content blocks (``TextBlock``, ``ImageBlock`` ... or their dicts).
            role: the message's role (default ``"user"``).
        """
        return cls(role=role, content=list(content))

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        text: str | None = None,
        mime_type: str | None = None,
        role: Role = "user",
    ) -> Message:
        """A message carrying a local file inline (base64), after an optional text block.

        The block is an image, audio, video or document block by MIME type (guessed from the
        file name when ``mime_type`` is not given). Inline data is kept in the thread's
        checkpoints unless a media store offloads it: for large files use
        :meth:`with_file`, or compile the graph with ``media_store=``.

        Raises:
            FileNotFoundError: when ``path`` does not exist.
        """
        data, mime, name = _read_file(path, mime_type)
        media = MediaRef(
            kind="data",
            data_base64=base64.b64encode(data).decode(),
            mime_type=mime,
            filename=name,
            size_bytes=len(data),
        )
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        blocks.append(_media_block(media))
        return cls(role=role, content=blocks)

    @classmethod
    async def with_image(
        cls,
        data: bytes,
        mime_type: str,
        store: BaseMediaStore,
        text: str | None = None,
        role: Role = "user",
    ) -> Message:
        """Store image bytes in ``store`` and build a message referencing them
        (``graph://media/{key}``), after an optional text block.

        Args:
            data: the image's bytes.
            mime_type: their MIME type.
            store: the media store (``tenxgraph.storage.media``).
            text: text placed before the image.
            role: the message's role (default ``"user"``).
        """
        key = await store.store(data, mime_type)
        media = store.to_media_ref(key, mime_type, size_bytes=len(data))
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        blocks.append(ImageBlock(media=media))
        return cls(role=role, content=blocks)

    @classmethod
    async def with_file(
        cls,
        path: str | Path,
        store: BaseMediaStore,
        text: str | None = None,
        mime_type: str | None = None,
        role: Role = "user",
    ) -> Message:
        """Store a local file in ``store`` and build a message referencing it, the block
        chosen by MIME type as in :meth:`from_file`.

        Raises:
            FileNotFoundError: when ``path`` does not exist (nothing is stored).
        """
        data, mime, name = _read_file(path, mime_type)
        key = await store.store(data, mime, {"filename": name})
        media = store.to_media_ref(key, mime, filename=name, size_bytes=len(data))
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        blocks.append(_media_block(media))
        return cls(role=role, content=blocks)

    def attach_media(self, media: MediaRef, as_type: MediaKind | None = None) -> Message:
        """Append a media block to this message, in place, and return it.

        Use it while building a message, before it enters a thread's state.

        Args:
            media: the reference.
            as_type: ``"image"``, ``"audio"``, ``"video"`` or ``"document"``; chosen from
                ``media.mime_type`` when ``None``.

        Raises:
            ValueError: for another ``as_type``.
        """
        self.content.append(_media_block(media, as_type))
        return self

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
