"""``GoogleGenAIConverter``: Gemini responses (``google.genai`` objects) to tenxgraph messages,
with the same parsing as ``tenxgraph.models.google`` (10xGraph's converter name ``"google"``).

The SDK is not imported: responses are read by attribute (``candidates``, ``usage_metadata``,
``response_id``, ``model_version``), so objects shaped like the SDK's work too. Text,
``function_call`` s, thoughts and usage are read as the Gemini adapter reads them
(:func:`tenxgraph.models.google.gemini_message`); thoughts also become a ``ReasoningBlock``,
and media parts become blocks after the text: ``inline_data`` an image, audio, video or
document block by MIME type (bytes base64-encoded), ``file_data`` the same referencing its
file URI.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ReasoningBlock, TextBlock
from tenxgraph.models.google import _parts, gemini_message
from tenxgraph.runtime.publisher.events import EventModel

from ._fields import field, items, media_block
from .base_converter import BaseConverter

__all__ = ["GoogleGenAIConverter"]


def _check(response: Any) -> None:
    if not hasattr(response, "candidates"):
        raise ValidationError(
            "GoogleGenAIConverter takes a GenerateContentResponse (an object with "
            f"'candidates'), got {type(response).__name__}",
            context={"field": "response", "reason": "unsupported type"},
        )


async def _chunks(response: Any) -> AsyncIterator[Any]:
    async for chunk in items(response, "GoogleGenAIConverter"):
        _check(chunk)
        yield chunk


class GoogleGenAIConverter(BaseConverter):
    """Converts Gemini ``GenerateContentResponse`` s (module docstring).

    ``convert_response`` takes one response; ``convert_streaming_response`` takes an iterable
    or async iterable of them (as ``generate_content_stream`` yields) and yields a delta message
    per text or thought fragment and per media part, then the complete message (function
    calls included).

    Raises:
        ValidationError: ``VALIDATION_000`` for a response without ``candidates``.
    """

    def _process_inline_media_part(self, part: Any, blocks: list[Any]) -> None:
        """Append the media block of a part's ``inline_data``, if it has one."""
        inline = field(part, "inline_data")
        if inline is not None:
            block = media_block(field(inline, "data"), None, field(inline, "mime_type"))
            if block is not None:
                blocks.append(block)

    def _process_file_media_part(self, part: Any, blocks: list[Any]) -> None:
        """Append the media block of a part's ``file_data`` (its ``file_uri``), if any."""
        ref = field(part, "file_data")
        if ref is not None:
            block = media_block(None, field(ref, "file_uri"), field(ref, "mime_type"))
            if block is not None:
                blocks.append(block)

    def _media(self, part: Any) -> list[Any]:
        blocks: list[Any] = []
        self._process_inline_media_part(part, blocks)
        self._process_file_media_part(part, blocks)
        return blocks

    def _complete(
        self, model: str, parts: list[Any], usage: Any, finish: Any, resp_id: Any
    ) -> Message:
        msg = gemini_message(model, parts, usage, finish, resp_id)
        lead: list[Any] = [ReasoningBlock(thinking=msg.reasoning)] if msg.reasoning else []
        media = [b for part in parts for b in self._media(part)]
        if lead or media:
            msg.content = lead + list(msg.content) + media
        return msg

    async def convert_response(self, response: Any) -> Message:
        """Convert one response.

        Args:
            response: a ``google.genai.types.GenerateContentResponse`` (or alike).

        Returns:
            Message: the assistant message.
        """
        _check(response)
        cands = response.candidates or []
        return self._complete(
            str(getattr(response, "model_version", "") or ""),
            _parts(response),
            getattr(response, "usage_metadata", None),
            getattr(cands[0], "finish_reason", None) if cands else None,
            getattr(response, "response_id", None),
        )

    async def convert_streaming_response(
        self,
        config: dict[str, Any],
        node_name: str,
        response: Any,
        meta: dict[str, Any] | None = None,
    ) -> AsyncGenerator[Message | EventModel]:
        """Convert a stream of responses.

        Args:
            config: the run config (unused by this converter beyond the interface).
            node_name: the node producing the response (unused likewise).
            response: an iterable or async iterable of responses.
            meta: merged into the final message's ``metadata``.

        Yields:
            Message: the delta messages, then the complete message.
        """
        del config, node_name
        parts: list[Any] = []
        usage: Any = None
        finish: Any = None
        resp_id: Any = None
        delta_id = Message(role="assistant").message_id
        async for chunk in _chunks(response):
            usage = getattr(chunk, "usage_metadata", None) or usage
            resp_id = getattr(chunk, "response_id", None) or resp_id
            cands = getattr(chunk, "candidates", None) or []
            if cands and getattr(cands[0], "finish_reason", None) is not None:
                finish = cands[0].finish_reason
            for part in _parts(chunk):
                parts.append(part)
                text = getattr(part, "text", None)
                blocks: list[Any] = []
                if getattr(part, "function_call", None) is None and text:
                    thought = bool(getattr(part, "thought", False))
                    blocks.append(
                        ReasoningBlock(thinking=text) if thought else TextBlock(text=text)
                    )
                blocks.extend(self._media(part))
                for block in blocks:
                    yield Message(
                        message_id=delta_id, role="assistant", content=[block], delta=True
                    )
        final = self._complete("", parts, usage, finish, resp_id)
        if meta:
            final.metadata.update(meta)
        yield final
