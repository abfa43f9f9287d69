"""A minimal app factory for the lifecycle tests: ``GET /ping`` and ``POST /v1/graph/invoke``
(body ``{"messages": [...], "config": {...}}``, answered ``{"data": result}``) on a graph.

It tests the server runner and the drain on their own, under real uvicorn processes,
independently of the server's routes: ``serve(..., app_factory="_drain_app:make_app")``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from tenxgraph.core.state import Message


def make_app(graph: Any) -> Starlette:
    """The app on ``graph`` (its lifespan sets the schema up)."""

    async def ping(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"pong {os.getpid()}")

    async def invoke(request: Request) -> JSONResponse:
        body = await request.json()
        messages = [Message.model_validate(m) for m in body["messages"]]
        result = await graph.ainvoke({"messages": messages}, dict(body["config"]))
        result["messages"] = [m.model_dump(mode="json") for m in result["messages"]]
        return JSONResponse({"data": result})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await graph.checkpointer.asetup()
        yield

    return Starlette(
        routes=[Route("/ping", ping), Route("/v1/graph/invoke", invoke, methods=["POST"])],
        lifespan=lifespan,
    )
