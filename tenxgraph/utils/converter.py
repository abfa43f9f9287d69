"""``convert_messages``: a prompt list of plain ``{"role", "content"}`` dicts, as 10xGraph's
``tenxgraph.utils.converter`` builds it for a model call.

The dicts follow OpenAI's chat-completions shape: a text-only message's content is a string;
a message with media blocks has a list of content parts (``text``, ``image_url``,
``input_audio``, and 10xGraph's neutral ``document`` and ``video`` parts, which each provider
adapter maps to its own wire form); a tool message carries ``tool_call_id``, an assistant
message that calls tools keeps its ``tools_calls`` as stored. tenxgraph's own model adapters
(``tenxgraph.models``) build their wire format themselves; this module serves code written
against 10xGraph that assembles prompts by hand, and :func:`strip_media_blocks` /
:func:`resolve_media_refs` for prompts sent to text-only models and for internal media
references.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    VideoBlock,
)

if TYPE_CHECKING:
    from tenxgraph.storage.media.resolver import MediaRefResolver

__all__ = ["convert_messages", "resolve_media_refs", "strip_media_blocks"]

_MEDIA_TYPES = frozenset({"image", "audio", "video", "document"})
#: Content-part types removed by :func:`strip_media_blocks`.
_MEDIA_PARTS = frozenset({"image_url", "input_audio", "document", "video", "file", "image"})

logger = logging.getLogger(__name__)


def _tool_call_id(message: Message) -> str:
    for block in message.content or ():
        if isinstance(block, ToolResultBlock):
            return block.tool_call_id
    return ""


def _block_type(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else getattr(block, "type", None)


def _has_multimodal_blocks(blocks: Sequence[Any]) -> bool:
    """Whether any block (model or dict) is an image, audio, video or document block."""
    return any(_block_type(b) in _MEDIA_TYPES for b in blocks)


def _image_block_to_openai(block: ImageBlock) -> dict[str, Any]:
    """An ``image_url`` part: the URL, the file id, or a ``data:`` URL (``image/png`` when
    the MIME type is unknown)."""
    media = block.media
    if media.kind == "data":
        url = f"data:{media.mime_type or 'image/png'};base64,{media.data_base64 or ''}"
    elif media.kind == "file_id":
        url = media.file_id or ""
    else:
        url = media.url or ""
    return {"type": "image_url", "image_url": {"url": url}}


def _audio_block_to_openai(block: AudioBlock) -> dict[str, Any]:
    """An ``input_audio`` part for inline audio (format from the MIME subtype, ``wav`` by
    default); audio by URL or file id, which chat completions cannot take, becomes a text
    part naming it."""
    media = block.media
    if media.kind == "data" and media.data_base64:
        fmt = (media.mime_type or "audio/wav").split("/", 1)[-1].split(";", 1)[0]
        fmt = {"x-wav": "wav", "wave": "wav", "mpeg": "mp3"}.get(fmt, fmt)
        return {"type": "input_audio", "input_audio": {"data": media.data_base64, "format": fmt}}
    where = media.url or media.file_id or ""
    return {"type": "text", "text": f"[Audio: {where}]"}


def _document_block_to_openai(block: DocumentBlock) -> list[dict[str, Any]]:
    """The parts for a document: its ``excerpt`` or ``text`` as a text part when it has one;
    else a neutral ``document`` part with the inline data (``data``, ``mime_type``) or the
    URL; a document known only by a provider file id becomes a text part naming it."""
    if block.excerpt or block.text:
        return [{"type": "text", "text": block.excerpt or block.text or ""}]
    media = block.media
    if media is None:
        return []
    if media.kind == "data":
        doc: dict[str, Any] = {"data": media.data_base64, "mime_type": media.mime_type}
    elif media.kind == "url":
        doc = {"url": media.url, "mime_type": media.mime_type}
    else:
        return [{"type": "text", "text": f"[Document: {media.file_id}]"}]
    if media.filename:
        doc["filename"] = media.filename
    return [{"type": "document", "document": doc}]


def _video_block_to_openai(block: VideoBlock) -> dict[str, Any]:
    """A neutral ``video`` part: ``{"data", "mime_type"}`` for inline video, ``{"url",
    "mime_type"}`` otherwise (a file id is passed as the URL)."""
    media = block.media
    if media.kind == "data":
        return {"type": "video", "video": {"data": media.data_base64, "mime_type": media.mime_type}}
    return {
        "type": "video",
        "video": {"url": media.url or media.file_id, "mime_type": media.mime_type},
    }


def _build_content(blocks: Sequence[Any]) -> str | list[dict[str, Any]]:
    """A message's content for a prompt dict: the joined text when it has no media block,
    else a list of parts in block order (empty text blocks left out; tool calls and other
    non-content blocks are not content)."""
    if not _has_multimodal_blocks(blocks):
        return "".join(b.text for b in blocks if isinstance(b, TextBlock))
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, TextBlock):
            if block.text:
                parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock):
            parts.append(_image_block_to_openai(block))
        elif isinstance(block, AudioBlock):
            parts.append(_audio_block_to_openai(block))
        elif isinstance(block, DocumentBlock):
            parts.extend(_document_block_to_openai(block))
        elif isinstance(block, VideoBlock):
            parts.append(_video_block_to_openai(block))
    return parts


def strip_media_blocks(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Prompt dicts without media parts, for a model that takes text only.

    Image, audio, video, document and file parts are removed; a message left with one text
    part gets that text as its string content, with none ``""``; several text parts stay a
    list. String contents are unchanged. Returns new dicts; the input is not modified.
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.get("content")
        if not isinstance(content, list):
            out.append(msg)
            continue
        kept = [p for p in content if not (isinstance(p, dict) and p.get("type") in _MEDIA_PARTS)]
        new: str | list[Any]
        if not kept:
            new = ""
        elif len(kept) == 1 and isinstance(kept[0], dict) and kept[0].get("type") == "text":
            new = str(kept[0].get("text", ""))
        else:
            new = kept
        out.append({**msg, "content": new})
    return out


async def resolve_media_refs(
    messages: Sequence[Message], resolver: MediaRefResolver
) -> list[Message]:
    """The messages with each internal media reference (``graph://media/{key}``) replaced by
    its bytes, inline (``kind="data"``), for a provider that cannot fetch them.

    Messages without internal references are returned as they are; the others are copies
    (the originals, which may be in a thread's state, are never changed). External URLs,
    file ids and inline data are left alone.

    Args:
        messages: the messages, in order.
        resolver: reads the store (``MediaRefResolver(media_store=...)``).

    Raises:
        MediaError: ``MEDIA_001`` when the resolver has no media store.
        MediaNotFoundError: ``MEDIA_NOT_FOUND_000`` when a key is missing from the store.
    """
    from tenxgraph.storage.media.storage.base import internal_key

    out: list[Message] = []
    for msg in messages:
        blocks: list[Any] = []
        changed = False
        for block in msg.content:
            media = getattr(block, "media", None)
            if (
                isinstance(block, (ImageBlock, AudioBlock, VideoBlock, DocumentBlock))
                and media is not None
                and media.kind == "url"
                and internal_key(media.url) is not None
            ):
                block = block.model_copy(update={"media": await resolver.resolve_to_data(media)})
                changed = True
            blocks.append(block)
        out.append(msg.model_copy(update={"content": blocks}) if changed else msg)
    return out


def _convert_dict(message: Message) -> dict[str, Any]:
    """One message as a prompt dict (a message whose ``content`` is ``None`` counts as empty):
    user and system messages with media blocks get a list of parts (:func:`_build_content`),
    every other message its plain text."""
    content: str | list[dict[str, Any]]
    if message.content is None:
        content = ""
    elif message.role in ("user", "system") and _has_multimodal_blocks(message.content):
        content = _build_content(message.content)
    else:
        content = message.text()
    out: dict[str, Any] = {"role": message.role, "content": content}
    if message.role == "tool":
        out["tool_call_id"] = _tool_call_id(message) if message.content is not None else ""
    elif message.role == "assistant" and message.tools_calls:
        out["tool_calls"] = list(message.tools_calls)
    return out


def convert_messages(
    system_prompts: list[dict[str, Any]],
    state: Any = None,
    extra_messages: Iterable[Message] | None = None,
) -> list[dict[str, Any]]:
    """Build a prompt: the system prompts, the state's summary and context, then extra messages.

    Args:
        system_prompts (list[dict]): leading ``{"role": "system", "content": ...}`` dicts, kept
            as given.
        state (AgentState | None): its ``context_summary`` (when not empty) becomes an
            assistant message, followed by each message of ``context``.
        extra_messages (Iterable[Message] | None): appended last.

    Returns:
        list[dict]: the prompt dicts, in that order.

    Raises:
        ValidationError: ``error_code="VALIDATION_000"`` when ``system_prompts`` is ``None``
            (a ``ValueError``).
    """
    if system_prompts is None:
        logger.error("System prompts are None")
        raise ValidationError(
            "System prompts cannot be None", context={"argument": "system_prompts"}
        )
    out: list[dict[str, Any]] = list(system_prompts)
    if state is not None:
        summary = getattr(state, "context_summary", None)
        if summary:
            out.append({"role": "assistant", "content": summary})
        out.extend(_convert_dict(m) for m in getattr(state, "context", None) or ())
    if extra_messages is not None:
        out.extend(_convert_dict(m) for m in extra_messages)
    logger.debug("Number of Converted messages: %s", len(out))
    return out
