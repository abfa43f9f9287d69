"""A minimal ASGI app around :class:`GracefulShutdown`, for the SIGTERM test.

It tests the drain on its own, under a real uvicorn process, independent of the server's routes:
``GET /ping`` and ``POST /v1/graph/invoke`` (body ``{"messages": [...], "config": {...}}``,
answered with ``{"data": result}``) on the graph of ``_lb_graph``. Started by
``uvicorn --factory _drain_app:app``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from _lb_graph import build
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from tenxgraph.core.state import Message
from tenxgraph.server._lifecycle import GracefulShutdown

_graph: Any = None


async def ping(request: Request) -> PlainTextResponse:
    return PlainTextResponse("pong")


async def invoke(request: Request) -> JSONResponse:
    body = await request.json()
    messages = [Message.model_validate(m) for m in body["messages"]]
    result = await _graph.ainvoke({"messages": messages}, dict(body["config"]))
    result["messages"] = [m.model_dump(mode="json") for m in result["messages"]]
    return JSONResponse({"data": result})


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    await _graph.checkpointer.asetup()
    try:
        yield
    finally:
        await _graph.aclose()


def app() -> GracefulShutdown:
    """The app factory (the graph is built here, in the server process; set up in the
    lifespan, on the server's event loop)."""
    global _graph
    _graph = build()
    inner = Starlette(
        routes=[Route("/ping", ping), Route("/v1/graph/invoke", invoke, methods=["POST"])],
        lifespan=lifespan,
    )
    return GracefulShutdown(inner, _graph)
