"""Routes of 10xGraph's server for features tenxgraph does not have: 501 with the envelope.

A client calling them gets a clear ``NOT_IMPLEMENTED`` answer naming the feature instead of a
404 that reads like a typo or a 500 that reads like a crash.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ._envelope import ApiError, error_response

__all__ = ["UNSUPPORTED_ROUTES", "unsupported_routes"]

#: (path, methods, feature) of every 10xGraph route tenxgraph answers with 501
UNSUPPORTED_ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("/v1/graph/setup", ("POST",), "remote tools"),
    ("/v1/graph/fix", ("POST",), "state repair (tenxgraph finishes cut-off runs itself)"),
    ("/v1/graph/ws", ("GET",), "WebSocket streaming"),
    ("/v1/graph/live", ("GET",), "realtime audio"),
    ("/v1/store/memories", ("POST",), "memory store"),
    ("/v1/store/search", ("POST",), "memory store"),
    ("/v1/store/memories/list", ("POST",), "memory store"),
    ("/v1/store/memories/forget", ("POST",), "memory store"),
    ("/v1/store/memories/{memory_id}", ("POST", "PUT", "DELETE"), "memory store"),
    ("/v1/files/upload", ("POST",), "files and media"),
    ("/v1/files/{file_id}", ("GET",), "files and media"),
    ("/v1/files/{file_id}/info", ("GET",), "files and media"),
    ("/v1/files/{file_id}/url", ("GET",), "files and media"),
    ("/v1/config/multimodal", ("GET",), "files and media"),
    ("/v1/evals/{rest:path}", ("GET", "POST"), "evaluation"),
    ("/a2a/{rest:path}", ("GET", "POST"), "agent-to-agent (A2A)"),
)


def _handler(feature: str):  # type: ignore[no-untyped-def]
    async def not_implemented(request: Request) -> Response:
        return error_response(
            request,
            ApiError(501, "NOT_IMPLEMENTED", f"tenxgraph's server does not implement {feature}"),
        )

    return not_implemented


def unsupported_routes() -> list[Route]:
    """One Starlette route per entry of :data:`UNSUPPORTED_ROUTES`."""
    return [
        Route(path, _handler(feature), methods=list(methods))
        for path, methods, feature in UNSUPPORTED_ROUTES
    ]
