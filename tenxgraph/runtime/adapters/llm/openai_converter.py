"""``OpenAIConverter``: OpenAI chat-completions responses (SDK objects or decoded JSON) to
tenxgraph messages, using the same parsing as ``tenxgraph.models.openai_compat``."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from typing import Any

import orjson

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import Message
from tenxgraph.models.openai_compat import _StreamAccumulator, from_openai_response
from tenxgraph.runtime.publisher.events import EventModel

from .base_converter import BaseConverter

__all__ = ["OpenAIConverter"]


def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)  # the openai SDK's pydantic objects
    if callable(dump):
        data = dump()
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
        ValidationError: ``VALIDATION_000`` for a response that is neither a dict nor an object
            with ``model_dump()``.
    """

    async def convert_response(self, response: Any) -> Message:
        """Convert one ``ChatCompletion``.

        Args:
            response: the SDK object or its decoded JSON.

        Returns:
            Message: the assistant message.
        """
        return from_openai_response(_as_dict(response))

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

        if isinstance(response, AsyncIterable):
            async for chunk in response:
                for delta in feed(chunk):
                    yield delta
        elif isinstance(response, Iterable):
            for chunk in response:
                for delta in feed(chunk):
                    yield delta
        else:
            raise ValidationError(
                "OpenAIConverter streams take an iterable of chunks, got "
                f"{type(response).__name__}",
                context={"field": "response", "reason": "not iterable"},
            )
        final = acc.message()
        if meta:
            final.metadata.update(meta)
        yield final
