"""Reading provider response objects that may be SDK objects, plain objects or dicts."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state.message import _media_block
from tenxgraph.core.state.message_block import ContentBlock, MediaRef

__all__ = ["field", "items", "media_block", "plain"]


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for a dict, else ``getattr(obj, name)``; ``default`` when absent."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def plain(obj: Any) -> Any:
    """``obj`` as JSON-like data: dicts and lists recursively, pydantic objects through
    ``model_dump()``, other objects through their attributes (``vars``)."""
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return plain(dump())
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return {k: plain(v) for k, v in vars(obj).items() if not callable(v)}
    return obj


def media_block(data: Any, url: str | None, mime_type: str | None) -> ContentBlock | None:
    """A media block for inline ``data`` (``bytes`` or base64 text) or a ``url``, its kind by
    MIME type (image, audio, video, else document); ``None`` when there is neither."""
    if data:
        text = base64.b64encode(data).decode() if isinstance(data, bytes) else str(data)
        ref = MediaRef(kind="data", data_base64=text, mime_type=mime_type)
    elif url:
        ref = MediaRef(kind="url", url=str(url), mime_type=mime_type)
    else:
        return None
    return _media_block(ref)


async def items(stream: Any, who: str) -> AsyncIterator[Any]:
    """The chunks or events of ``stream``, an async iterable or a plain iterable.

    Args:
        stream: what a converter's ``convert_streaming_response`` was given.
        who: the converter's name, for the error message.

    Raises:
        ValidationError: ``VALIDATION_000`` when ``stream`` is neither.
    """
    if isinstance(stream, AsyncIterable):
        async for item in stream:
            yield item
    elif isinstance(stream, Iterable):
        for item in stream:
            yield item
    else:
        raise ValidationError(
            f"{who} streams take an iterable of chunks, got {type(stream).__name__}",
            context={"field": "response", "reason": "not iterable"},
        )
