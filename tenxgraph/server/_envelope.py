"""10xGraph's response envelope and the mapping of errors to status codes.

A success is ``{"success": true, "data": ..., "metadata": {"request_id", "timestamp",
"message"}}``; a failure is ``{"error": {"code", "message", "details"}, "metadata": {...}}``.
``data``, ``error`` and ``metadata`` are what 10xGraph's server sends; ``success`` is what its
REST reference pages show, so clients written from either find their keys. ``request_id`` is the request's ``X-Request-ID`` header when it is a sane token, else a
new uuid4 hex; it is also sent back in the ``X-Request-ID`` response header.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from tenxgraph.core.exceptions import (
    CommitOutcomeUnknownError,
    ConfigError,
    GraphError,
    GraphRecursionError,
    InterruptPendingError,
    ResourceNotFoundError,
    SchemaVersionError,
    StaleStateError,
    StorageConnectionError,
    StorageError,
    TenxGraphError,
    ThreadBusyError,
    TransientStorageError,
    ValidationError,
)

__all__ = ["ApiError", "error_response", "json_response", "request_meta", "status_for"]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


class ApiError(Exception):
    """An HTTP-level failure answered with the error envelope.

    Args:
        status: HTTP status code (int).
        code: the envelope's ``error.code`` (a tenxgraph ``error_code`` or an HTTP-level code
            such as ``"VALIDATION_ERROR"``).
        message: human-readable text naming the fix.
        details: extra structured details (list of dicts), default empty.
    """

    def __init__(
        self, status: int, code: str, message: str, details: list[Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []


def request_meta(request: Request, message: str = "OK") -> dict[str, Any]:
    """The ``metadata`` block of an envelope: request id, ISO time, message."""
    rid = getattr(request.state, "request_id", None)
    if rid is None:
        header = request.headers.get("x-request-id", "")
        rid = header if _REQUEST_ID.match(header) else uuid.uuid4().hex
        request.state.request_id = rid
    return {
        "request_id": rid,
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "message": message,
    }


def _dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=_default, option=orjson.OPT_NON_STR_KEYS)


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def json_response(
    request: Request,
    data: Any,
    *,
    status: int = 200,
    message: str = "OK",
    headers: dict[str, str] | None = None,
) -> Response:
    """A success envelope ``{"success": true, "data": data, "metadata": ...}`` as JSON."""
    meta = request_meta(request, message)
    return Response(
        _dumps({"success": True, "data": data, "metadata": meta}),
        status_code=status,
        media_type="application/json",
        headers={"x-request-id": meta["request_id"], **(headers or {})},
    )


#: the message of a 500 for a foreign (non-tenxgraph) exception, whose own text may carry
#: internals: it goes to the server log only
INTERNAL_MESSAGE = "internal server error; see the server log"


#: pydantic's "For further information visit https://errors.pydantic.dev/..." line
_PYDANTIC_URL = re.compile(r"\s*For further information visit https://errors\.pydantic\.dev/\S*")


def public_text(message: str) -> str:
    """``message`` without pydantic's documentation links (a validation error's text as sent
    to a client)."""
    return _PYDANTIC_URL.sub("", message)


def status_for(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and envelope code of an exception raised while serving a request.

    Client mistakes are 4xx (bad input 422, not found 404, another user's thread 403, a busy
    or conflicting thread 409, a pending interrupt 409); a store that is unreachable or whose
    commit outcome is unknown is 503 (retry the same request); other graph failures are 500,
    as 10xGraph's server answers them. The code is the exception's ``error_code``.
    """
    if isinstance(exc, ApiError):
        return exc.status, exc.code
    code = getattr(exc, "error_code", None) or type(exc).__name__
    if isinstance(exc, ThreadBusyError | StaleStateError | InterruptPendingError):
        return 409, code
    if isinstance(exc, ResourceNotFoundError):
        return 404, code
    if isinstance(exc, TransientStorageError | StorageConnectionError | CommitOutcomeUnknownError):
        return 503, code
    if isinstance(exc, SchemaVersionError):
        return 422, code
    if isinstance(exc, StorageError) and code == "STORAGE_FORBIDDEN_001":
        return 403, code
    if isinstance(exc, ConfigError | ValidationError):
        return 422, code
    if isinstance(exc, GraphRecursionError | GraphError | TenxGraphError):
        return 500, code
    return 500, "INTERNAL_ERROR"


def error_response(request: Request, exc: BaseException) -> Response:
    """The error envelope for ``exc`` (see :func:`status_for`); 5xx hide foreign messages."""
    status, code = status_for(exc)
    if isinstance(exc, ApiError):
        message, details = exc.message, exc.details
    elif isinstance(exc, TenxGraphError):
        message, details = public_text(exc.message), [exc.context] if exc.context else []
    else:
        message, details = INTERNAL_MESSAGE, []
    meta = request_meta(request, message)
    body = {"error": {"code": code, "message": message, "details": details}, "metadata": meta}
    return Response(
        _dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"x-request-id": meta["request_id"]},
    )
