"""The media of an Agent's prompt, made ready for its model.

Messages in a thread keep ``graph://media/{key}`` references (``compile(media_store=...)``);
no provider can fetch those, so the prompt an ``Agent`` sends carries the bytes instead, or a
signed URL under ``ImageHandling.URL``. A ``file_id`` reference naming a key of the graph's
media store (as 10xGraph's API server hands them out) is read the same way; any other file
id is a provider's and passes through. With ``Agent(multimodal_config=...)`` inline images
are validated and scaled down (:class:`~tenxgraph.storage.media.MediaProcessor`) and
documents are handled as ``document_handling`` says. The work is done on copies: the state
keeps its references and its original blocks.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from tenxgraph.core._context import current_run
from tenxgraph.core.exceptions import MediaNotFoundError, ValidationError
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    MediaRef,
    TextBlock,
    VideoBlock,
)
from tenxgraph.storage.media.config import DocumentHandling, ImageHandling, MultimodalConfig
from tenxgraph.storage.media.processor import MediaProcessor
from tenxgraph.storage.media.resolver import MediaRefResolver
from tenxgraph.storage.media.storage.base import BaseMediaStore, internal_key

__all__ = ["prepare_media"]

_log = logging.getLogger(__name__)

_MEDIA = (ImageBlock, AudioBlock, VideoBlock, DocumentBlock)


class _Preparer:
    def __init__(self, store: BaseMediaStore | None, config: MultimodalConfig | None) -> None:
        self.store = store
        self.config = config
        self.resolver = MediaRefResolver(media_store=store)
        self.processor = MediaProcessor(config) if config is not None else None

    async def _stored_key(self, ref: MediaRef) -> str | None:
        """The media-store key ``ref`` names: an internal URL, or a file id the graph's store
        holds (checked with one ``exists``), else ``None``."""
        if ref.kind == "url":
            return internal_key(ref.url)
        if ref.kind == "file_id" and self.store is not None and ref.file_id:
            try:
                return ref.file_id if await self.store.exists(ref.file_id) else None
            except ValidationError:  # not a key this store could have issued
                return None
        return None

    async def _deref(self, block: Any) -> Any:
        ref: MediaRef | None = block.media
        if ref is None:
            return block
        key = await self._stored_key(ref)
        if key is None:
            return block
        if (
            isinstance(block, ImageBlock)
            and self.config is not None
            and self.config.image_handling is ImageHandling.URL
        ):
            direct = await self.resolver.direct_url(key, ref.mime_type)
            if direct is not None:
                url_ref = MediaRef(kind="url", url=direct, mime_type=ref.mime_type)
                return block.model_copy(update={"media": url_ref})
        as_url = ref.model_copy(update={"kind": "url", "url": f"graph://media/{key}"})
        return block.model_copy(update={"media": await self.resolver.resolve_to_data(as_url)})

    def _document(self, block: DocumentBlock) -> DocumentBlock | None:
        config = self.config
        if config is None:
            return block
        handling = config.document_handling
        if handling is DocumentHandling.SKIP:
            return None
        media = block.media
        has_text = bool(block.text or block.excerpt)
        mime = (media.mime_type if media else None) or ""
        if handling is DocumentHandling.FORWARD_RAW and media is not None and media.data_base64:
            return block.model_copy(update={"text": None, "excerpt": None})
        if has_text:
            return block
        if mime.startswith("text/") or mime == "application/json":
            if media is not None and media.data_base64:
                try:
                    text = base64.b64decode(media.data_base64, validate=True).decode()
                except (binascii.Error, ValueError):
                    raise ValidationError(
                        f"document of type {mime} is not valid base64 text",
                        context={"field": "media.data_base64", "reason": "undecodable"},
                    ) from None
                return block.model_copy(update={"text": text})
            return block
        if mime and mime not in config.supported_doc_types:
            raise ValidationError(
                f"Unsupported document type: {mime} (accepted: "
                f"{', '.join(sorted(config.supported_doc_types))})",
                context={"field": "mime_type", "reason": "unsupported"},
            )
        return block

    async def block(self, block: Any) -> Any | None:
        if not isinstance(block, _MEDIA):
            return block
        try:
            block = await self._deref(block)
        except MediaNotFoundError as exc:
            # media deleted from the store (retention, a lost file) must not break the thread
            # for good: the model is told something was there, the state keeps its reference
            key = exc.context.get("key", "?")
            _log.warning("media %s of the prompt is gone from the media store; sent as a note", key)
            kind = type(block).__name__.removesuffix("Block").lower()
            return TextBlock(text=f"[{kind} no longer available: it was removed from storage]")
        if isinstance(block, DocumentBlock):
            return self._document(block)
        if isinstance(block, ImageBlock) and self.processor is not None:
            return self.processor.process(block)
        return block


async def prepare_media(
    messages: list[Message], config: MultimodalConfig | None = None
) -> list[Message]:
    """``messages`` made ready for the model (module docstring); the list itself when
    nothing needed changing. A referenced key the store no longer holds is sent as a short
    text note in place of the media (with a warning), as 10xGraph's Agent carries on past it,
    so deleting old media never makes a thread unusable.

    Args:
        messages: the prompt, oldest first.
        config: the Agent's ``multimodal_config``, or ``None``: references are read, nothing
            else is changed.

    Raises:
        MediaError: ``MEDIA_001`` when a message holds an internal reference but the graph was
            compiled without ``media_store=``.
        ValidationError: ``VALIDATION_000`` for an image or document the config refuses
            (unsupported type, too large).
    """
    run = current_run()
    store = getattr(run.graph, "media_store", None) if run is not None else None
    needed = config is not None or any(
        isinstance(b, _MEDIA)
        and b.media is not None
        and (
            (b.media.kind == "url" and internal_key(b.media.url) is not None)
            or (b.media.kind == "file_id" and store is not None)
        )
        for m in messages
        for b in m.content
    )
    if not needed:
        return messages
    prep = _Preparer(store, config)
    out: list[Message] = []
    for msg in messages:
        blocks: list[Any] = []
        changed = False
        for block in msg.content:
            new = await prep.block(block)
            changed = changed or new is not block
            if new is not None:
                blocks.append(new)
        out.append(msg.model_copy(update={"content": blocks}) if changed else msg)
    return out
