"""Moving inline media out of messages and into a media store.

``ensure_media_offloaded`` replaces each inline ``data_base64`` payload of a message's image,
audio, video and document blocks with a ``graph://media/{key}`` reference to a copy kept in a
:class:`~tenxgraph.storage.media.storage.base.BaseMediaStore`. A graph compiled with
``media_store=`` does this to every input message before the run starts, so checkpoints hold
the reference (about a hundred bytes), never the bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from enum import StrEnum

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.message_block import AudioBlock, DocumentBlock, ImageBlock, VideoBlock

from .storage.base import BaseMediaStore

__all__ = ["DEFAULT_MAX_INLINE_BYTES", "MediaOffloadPolicy", "ensure_media_offloaded"]

#: Decoded size in bytes above which the ``THRESHOLD`` policy offloads a payload.
DEFAULT_MAX_INLINE_BYTES = 50_000

_MEDIA_BLOCKS = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)


class MediaOffloadPolicy(StrEnum):
    """When inline media is moved into the media store."""

    NEVER = "never"
    THRESHOLD = "threshold"
    ALWAYS = "always"


async def ensure_media_offloaded(
    message: Message,
    store: BaseMediaStore,
    policy: MediaOffloadPolicy = MediaOffloadPolicy.THRESHOLD,
    max_inline_bytes: int = DEFAULT_MAX_INLINE_BYTES,
) -> Message:
    """Offload the inline media of ``message`` into ``store``, in place.

    Each image, audio, video or document block whose ``media`` is ``kind="data"`` with
    ``data_base64`` is decoded; under ``ALWAYS``, or ``THRESHOLD`` when the decoded size
    exceeds ``max_inline_bytes``, the bytes are stored and ``block.media`` becomes
    ``MediaRef(kind="url", url="graph://media/{key}")`` keeping ``mime_type``, ``filename``,
    ``width``, ``height``, ``duration_ms`` and ``page``, with ``size_bytes`` and ``sha256``
    of the bytes. URL and file-id references and other blocks are left alone.

    Args:
        message: the message to change (mutated, and returned). Call this before the message
            enters a thread's state: messages in state are values and must not change.
        store: where the bytes go.
        policy: :class:`MediaOffloadPolicy` (default ``THRESHOLD``).
        max_inline_bytes: the ``THRESHOLD`` limit in decoded bytes (default 50,000).

    Returns:
        Message: ``message`` itself.

    Raises:
        ValidationError: ``VALIDATION_000`` when a payload is not valid standard base64
            (checked before anything of that block is stored).
    """
    policy = MediaOffloadPolicy(policy)
    if policy is MediaOffloadPolicy.NEVER:
        return message
    for block in message.content:
        if not isinstance(block, _MEDIA_BLOCKS):
            continue
        media = block.media
        if media is None or media.kind != "data" or not media.data_base64:
            continue
        try:
            raw = base64.b64decode(media.data_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ValidationError(
                f"{block.type} block holds data_base64 that is not standard base64",
                context={"field": "media.data_base64", "reason": "invalid base64"},
            ) from None
        if policy is MediaOffloadPolicy.THRESHOLD and len(raw) <= max_inline_bytes:
            continue
        mime = media.mime_type or "application/octet-stream"
        key = await store.store(raw, mime)
        block.media = store.to_media_ref(
            key,
            mime,
            filename=media.filename,
            width=media.width,
            height=media.height,
            duration_ms=media.duration_ms,
            page=media.page,
            size_bytes=len(raw),
            sha256=hashlib.sha256(raw).hexdigest(),
        )
    return message
