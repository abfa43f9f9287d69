"""Reading and checking request input before anything runs or is written.

Bodies are read up to ``max_body_bytes`` (413 past it, whatever ``Content-Length`` claims),
parsed with orjson (malformed JSON: 400), validated against the route's model (unknown or bad
fields: 422 ``VALIDATION_ERROR``), and every id (thread, message) is checked for control
characters and length (422 ``VALIDATION_000``, tenxgraph's code for bad input).
"""

from __future__ import annotations

from typing import Any, TypeVar

import orjson
import pydantic
from starlette.requests import Request

from tenxgraph.core.state import Message

from ._envelope import ApiError

__all__ = ["check_id", "read_model"]

M = TypeVar("M", bound=pydantic.BaseModel)

#: longest id accepted (a thread id is at most 255 characters, docs/guarantees.md)
MAX_ID_CHARS = 255


def check_id(value: Any, what: str) -> str:
    """``value`` as an id string; refuses empty, over-long or control-character ids.

    Raises:
        ApiError: 422 ``VALIDATION_000``.
    """
    text = str(value)
    if not text.strip():
        raise ApiError(422, "VALIDATION_000", f"{what} cannot be empty or whitespace")
    if len(text) > MAX_ID_CHARS:
        raise ApiError(422, "VALIDATION_000", f"{what} is longer than {MAX_ID_CHARS} characters")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text):
        raise ApiError(422, "VALIDATION_000", f"{what} contains control characters")
    return text


async def _read(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise ApiError(413, "PAYLOAD_TOO_LARGE", f"request body over {max_bytes} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(413, "PAYLOAD_TOO_LARGE", f"request body over {max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_model(
    request: Request, model: type[M], max_bytes: int, *, optional: bool = False
) -> M:
    """Read, parse and validate the request body as ``model``.

    Args:
        request: the request.
        model: the body's pydantic model.
        max_bytes: the body size limit in bytes.
        optional: an empty body stands for ``{}`` (DELETE routes whose body is optional).

    Raises:
        ApiError: 413 ``PAYLOAD_TOO_LARGE``, 400 ``INVALID_JSON``, 422 ``VALIDATION_ERROR``.
    """
    raw = await _read(request, max_bytes)
    if not raw.strip() and optional:
        raw = b"{}"
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, "INVALID_JSON", f"request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(422, "VALIDATION_ERROR", "request body must be a JSON object")
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise _invalid(exc, "request body is invalid", ()) from None


def _invalid(exc: pydantic.ValidationError, message: str, prefix: tuple[Any, ...]) -> ApiError:
    details = [
        {"loc": [*prefix, *e["loc"]], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False)
    ]
    return ApiError(422, "VALIDATION_ERROR", message, details)


def parse_messages(items: list[Any], field: str) -> list[Any]:
    """``items`` with every dict parsed as a :class:`~tenxgraph.core.state.Message` (as the
    messages of an invoke body are; other items are left to the runtime's own check).

    Args:
        items: the values of a message-list field of a request body.
        field: the field's name (for the error's ``loc``).

    Raises:
        ApiError: 422 ``VALIDATION_ERROR`` for a dict that is not a valid message (details
            name ``[field, index, ...]``); 422 ``VALIDATION_000`` for a bad ``message_id``.
    """
    out: list[Any] = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            try:
                msg = Message.model_validate(item)
            except pydantic.ValidationError as exc:
                raise _invalid(exc, f"{field}[{i}] is not a valid message", (field, i)) from None
            check_id(msg.message_id, "message_id")
            out.append(msg)
        else:
            out.append(item)
    return out
