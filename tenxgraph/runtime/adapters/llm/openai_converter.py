"""``OpenAIConverter``: OpenAI chat-completions responses (SDK objects, other objects with the
same attributes, or decoded JSON) to tenxgraph messages, using the same parsing as
``tenxgraph.models.openai_compat``, plus the media a response can carry: ``message.audio``
(audio output: base64 ``data`` and ``transcript``) and ``message.images`` (image output, as
some OpenAI-compatible servers return it) become audio and image blocks."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import orjson

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import AudioBlock, ImageBlock, MediaRef
from tenxgraph.models.openai_compat import _StreamAccumulator, from_openai_response
from tenxgraph.runtime.publisher.events import EventModel

from ._fields import field, items, plain
from .base_converter import BaseConverter

__all__ = ["OpenAIConverter"]


def _as_dict(obj: Any) -> dict[str, Any]:
    data = plain(obj)  # the openai SDK's pydantic objects, or objects with its attributes
    if isinstance(data, dict):
        return data
    raise ValidationError(
        f"OpenAIConverter takes a chat-completions dict or SDK object, got {type(obj).__name__}",
        context={"field": "response", "reason": "unsupported type"},
    )


class OpenAIConverter(BaseConverter):
    """Converts OpenAI chat-completions responses.

    ``convert_response`` takes a ``ChatCompletion`` (or its JSON as a dict);
    ``convert_streaming_response`` takes an iterable or async iterable of
    ``ChatCompletionChunk`` (or dicts) and yields a delta message per text or reasoning piece,
    then the complete message (tool calls included).

    Raises:
        ValidationError: ``VALIDATION_000`` for a response that is not a dict, an SDK object
            (``model_dump()``) or an object with the same attributes.
    """

    async def convert_response(self, response: Any) -> Message:
        """Convert one ``ChatCompletion``.

        Args:
            response: the SDK object or its decoded JSON.

        Returns:
            Message: the assistant message.
        """
        data = _as_dict(response)
        message = from_openai_response(data)
        wire = data["choices"][0]["message"]  # from_openai_response checked it is a dict
        media: list[Any] = self._extract_image_blocks(wire.get("images") or [])
        audio = self._extract_audio_block(wire.get("audio"))
        if audio is not None:
            media.append(audio)
        if media:
            message.content.extend(media)
        return message

    def _extract_image_blocks(self, images: Any) -> list[ImageBlock]:
        """Image blocks for a response's ``images``: each a URL string, a ``{"url"}`` or
        ``{"image_url": {"url"}}`` dict, or an object with ``url`` (a ``data:`` URL stays a
        URL reference)."""
        blocks: list[ImageBlock] = []
        for image in images or ():
            url = image if isinstance(image, str) else field(image, "url")
            if url is None:
                inner = field(image, "image_url")
                url = inner if isinstance(inner, str) else field(inner, "url")
            if isinstance(url, str) and url:
                blocks.append(ImageBlock(media=MediaRef(kind="url", url=url)))
        return blocks

    def _extract_audio_block(self, audio: Any) -> AudioBlock | None:
        """An audio block for a response's ``audio`` (base64 ``data``, ``transcript``,
        ``format`` when given; WAV assumed otherwise), or ``None`` without data."""
        data = field(audio, "data") if audio is not None else None
        if not data:
            return None
        fmt = field(audio, "format") or "wav"
        return AudioBlock(
            media=MediaRef(kind="data", data_base64=str(data), mime_type=f"audio/{fmt}"),
            transcript=field(audio, "transcript"),
        )

    async def convert_streaming_response(
        self,
        config: dict[str, Any],
        node_name: str,
        response: Any,
        meta: dict[str, Any] | None = None,
    ) -> AsyncGenerator[Message | EventModel]:
        """Convert a stream of ``ChatCompletionChunk``.

        Args:
            config: the run config (unused by this converter beyond the interface).
            node_name: the node producing the response (unused likewise).
            response: an iterable or async iterable of chunks.
            meta: merged into the final message's ``metadata``.

        Yields:
            Message: the delta messages, then the complete message.
        """
        acc = _StreamAccumulator(model="")

        def feed(chunk: Any) -> list[Message]:
            return acc.feed("data: " + orjson.dumps(_as_dict(chunk)).decode())

        async for chunk in items(response, "OpenAIConverter"):
            for delta in feed(chunk):
                yield delta
        final = acc.message()
        if meta:
            final.metadata.update(meta)
        yield final
