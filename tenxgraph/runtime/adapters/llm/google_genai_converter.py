"""``GoogleGenAIConverter``: Gemini responses (``google.genai`` objects) to tenxgraph messages,
with the same parsing as ``tenxgraph.models.google`` (10xGraph's converter name ``"google"``).

The SDK is not imported: responses are read by attribute (``candidates``, ``usage_metadata``,
``response_id``, ``model_version``), so objects shaped like the SDK's work too.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.models.google import _parts, gemini_message, gemini_stream
from tenxgraph.runtime.publisher.events import EventModel

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
    if isinstance(response, AsyncIterable):
        async for chunk in response:
            _check(chunk)
            yield chunk
    elif isinstance(response, Iterable):
        for chunk in response:
            _check(chunk)
            yield chunk
    else:
        raise ValidationError(
            "GoogleGenAIConverter streams take an iterable of responses, got "
            f"{type(response).__name__}",
            context={"field": "response", "reason": "not iterable"},
        )


class GoogleGenAIConverter(BaseConverter):
    """Converts Gemini ``GenerateContentResponse`` s.

    ``convert_response`` takes one response; ``convert_streaming_response`` takes an iterable
    or async iterable of them (as ``generate_content_stream`` yields) and yields a delta message
    per text or thought fragment, then the complete message (function calls included).

    Raises:
        ValidationError: ``VALIDATION_000`` for a response without ``candidates``.
    """

    async def convert_response(self, response: Any) -> Message:
        """Convert one response.

        Args:
            response: a ``google.genai.types.GenerateContentResponse`` (or alike).

        Returns:
            Message: the assistant message.
        """
        _check(response)
        cands = response.candidates or []
        return gemini_message(
            str(getattr(response, "model_version", "") or ""),
            _parts(response),
            getattr(response, "usage_metadata", None),
            cands[0].finish_reason if cands else None,
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
        async for message in gemini_stream("", _chunks(response)):
            if not message.delta and meta:
                message.metadata.update(meta)
            yield message
