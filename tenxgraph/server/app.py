"""``create_app``: the ASGI app serving one compiled graph with 10xGraph's REST API."""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from tenxgraph.appconfig import AppConfig, apply_env, load_graph
from tenxgraph.core.config import check_strategy
from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph.compiled_graph import CompiledGraph

from ._context import ServerContext
from ._envelope import ApiError, error_response, json_response
from ._graph_routes import GraphRoutes
from ._telemetry import TracingMiddleware
from ._thread_routes import ThreadRoutes
from ._unsupported import unsupported_routes
from .auth import BaseAuth, build_auth

__all__ = ["DEFAULT_MAX_BODY_BYTES", "app_from_config", "create_app", "lifespan"]

logger = logging.getLogger("tenxgraph.server")

#: default request body limit (bytes): 10 MiB, as 10xGraph's request-size middleware
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024


class _App(Starlette):
    """Starlette whose failed start-up reports a config error as its one-line message.

    Starlette hands the server a traceback when the lifespan raises; for a graph module that
    cannot be imported (``CONFIG_001``, whose message already names the module and the cause)
    the server prints that message alone before exiting.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            inner = send

            async def send_one_line(message: Message) -> None:
                error = getattr(self.state, "tenxgraph_startup_error", None)
                if message["type"] == "lifespan.startup.failed" and error:
                    message = {**message, "message": error}
                await inner(message)

            send = send_one_line
        await super().__call__(scope, receive, send)


def _guard(
    handler: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Every exception of a handler becomes the error envelope (never a bare 500 page)."""

    async def guarded(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:  # noqa: BLE001 - mapped to a status by status_for
            if not isinstance(exc, ApiError):
                level = logging.ERROR if not hasattr(exc, "error_code") else logging.WARNING
                logger.log(
                    level, "request failed: %s %s", request.method, request.url.path, exc_info=exc
                )
            return error_response(request, exc)

    return guarded


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    """Start-up and shut-down of the served graph: loads it (an app built from a config file),
    warns when auth is off, opens the task group of streamed runs (a run whose client dropped
    the connection finishes there); at exit waits for those runs, then closes the graph (its
    pools are released)."""
    ctx: ServerContext = app.state.tenxgraph
    loader: AppConfig | None = getattr(app.state, "tenxgraph_config", None)
    if ctx.served is None and loader is not None:
        try:
            ctx.served = await load_graph(loader)
        except ConfigError as exc:
            # reported as one line by _App (the cause is in the message), not a traceback
            app.state.tenxgraph_startup_error = str(exc)
            raise
    if ctx.auth is None:
        logger.warning(
            "tenxgraph serve: authentication is off; every request runs as user 'anonymous' "
            '(set "auth" in the config file)'
        )
    try:
        async with contextlib.AsyncExitStack() as stack:
            graph = ctx.served
            if (
                ctx.recovery is not None
                and graph is not None
                and graph.checkpointer.store is not None
            ):
                # every API instance also runs background runs and finishes cut-off ones
                # (docs/how-to/background-runs.md); a checkpointer of the application's own
                # keeps no runs, so there is nothing to recover
                await stack.enter_async_context(graph.recovery(**ctx.recovery))
            runs = await stack.enter_async_context(anyio.create_task_group())
            ctx.runs = runs
            try:
                yield
            finally:
                # streamed runs whose client left may finish, for up to the graph's
                # shutdown_timeout (seconds); then they are cancelled (their lease lapses and
                # the next request on the thread finishes them)
                ctx.runs = None
                timeout = ctx.served.shutdown_timeout if ctx.served is not None else 0.0
                runs.cancel_scope.deadline = anyio.current_time() + timeout
    finally:
        if ctx.served is not None:
            await ctx.served.aclose()


def create_app(
    graph: CompiledGraph[Any] | None,
    *,
    auth: BaseAuth | str | dict[str, Any] | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    multitask_strategy: str | None = "enqueue",
    auth_folder: Path | None = None,
    recovery: bool | dict[str, Any] = True,
) -> Starlette:
    """An ASGI app (Starlette) serving ``graph`` with 10xGraph's REST API.

    Routes (10xGraph's paths, bodies and envelopes; docs/how-to/serve.md): ``GET /ping``,
    ``GET /health/ready``, ``POST /v1/graph/invoke``, ``POST /v1/graph/stream``,
    ``POST /v1/graph/stop``, ``GET /v1/graph``, ``GET /v1/graph:StateSchema``,
    ``GET /v1/graph/tools``, the ``/v1/threads`` routes, and 501 for 10xGraph features
    tenxgraph lacks.

    Args:
        graph: the compiled graph; the app closes it at shutdown. ``None`` only for
            :func:`app_from_config`, whose lifespan loads it.
        auth: a :class:`BaseAuth`, or the config file's ``auth`` value (``None``, ``"jwt"``,
            ``{"method": "custom", "path": "module:attr"}``); ``None`` serves everyone as
            ``"anonymous"`` (warned at start).
        max_body_bytes: larger request bodies are refused with 413 (bytes, at least 1).
        multitask_strategy: the strategy of runs whose request config and checkpointer name
            none (default ``"enqueue"``: one run per thread at a time, others wait their turn);
            ``None`` leaves the compare-and-swap alone.
        auth_folder: folder a custom auth class path is imported from (the config's folder).
        recovery: run the graph's recovery loop while the app runs (``True``, the default:
            with ``CompiledGraph.recovery``'s defaults; a dict: its options, e.g.
            ``{"concurrency": 4}``; ``False``: none), so every API instance also runs
            submitted background runs and finishes cut-off ones. Only for a checkpointer with
            a built-in store.

    Returns:
        The Starlette app; mount it or serve it with uvicorn.

    Raises:
        ConfigError: ``CONFIG_001`` for a bad ``auth``, strategy or limit.
    """
    from tenxgraph.core.exceptions import ConfigError

    if not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ConfigError(
            "max_body_bytes must be a positive int", context={"key": "max_body_bytes"}
        )
    if not isinstance(recovery, bool | dict):
        raise ConfigError(
            "recovery must be True, False or a dict of CompiledGraph.recovery options",
            context={"key": "recovery"},
        )
    ctx = ServerContext(
        served=graph,
        auth=build_auth(auth, auth_folder),
        max_body_bytes=max_body_bytes,
        default_strategy=check_strategy(multitask_strategy, "multitask_strategy"),
        recovery=(dict(recovery) if isinstance(recovery, dict) else {}) if recovery else None,
    )
    g = GraphRoutes(ctx)
    t = ThreadRoutes(ctx)

    async def ping(request: Request) -> Response:
        return json_response(request, "pong")

    health_user = f"health-{uuid.uuid4().hex}"

    async def ready(request: Request) -> Response:
        # one store round trip (a read of a user no client knows), so "ready" means the store
        # answers and its tables are set up
        await ctx.graph.checkpointer.alist_threads({"user_id": health_user}, limit=1)
        return json_response(request, {"status": "ready"})

    routes = [
        Route("/ping", _guard(ping), methods=["GET"]),
        Route("/health/ready", _guard(ready), methods=["GET"]),
        Route("/v1/graph/invoke", _guard(g.invoke), methods=["POST"]),
        Route("/v1/graph/stream", _guard(g.stream), methods=["POST"]),
        Route("/v1/graph/stop", _guard(g.stop), methods=["POST"]),
        Route("/v1/graph/tools", _guard(g.tools), methods=["GET"]),
        Route("/v1/graph:StateSchema", _guard(g.state_schema), methods=["GET"]),
        Route("/v1/graph", _guard(g.details), methods=["GET"]),
        Route("/v1/threads", _guard(t.list_threads), methods=["GET"]),
        Route("/v1/threads/{thread_id}", _guard(t.get_thread), methods=["GET"]),
        Route("/v1/threads/{thread_id}", _guard(t.delete_thread), methods=["DELETE"]),
        Route("/v1/threads/{thread_id}/state", _guard(t.get_state), methods=["GET"]),
        Route("/v1/threads/{thread_id}/state", _guard(t.put_state), methods=["PUT"]),
        Route("/v1/threads/{thread_id}/state", _guard(t.clear_state), methods=["DELETE"]),
        Route("/v1/threads/{thread_id}/messages", _guard(t.list_messages), methods=["GET"]),
        Route("/v1/threads/{thread_id}/messages", _guard(t.put_messages), methods=["POST"]),
        Route(
            "/v1/threads/{thread_id}/messages/{message_id}", _guard(t.get_message), methods=["GET"]
        ),
        Route(
            "/v1/threads/{thread_id}/messages/{message_id}",
            _guard(t.delete_message),
            methods=["DELETE"],
        ),
        *unsupported_routes(),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        code = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTPException")
        return error_response(request, ApiError(exc.status_code, code, str(exc.detail)))

    app = _App(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: http_error},
    )
    app.state.tenxgraph = ctx
    app.add_middleware(TracingMiddleware)
    return app


def app_from_config(config: AppConfig, **options: Any) -> Starlette:
    """The app for a parsed config file: its ``auth``, its graph loaded at start-up (on the
    server's event loop, so the graph's pools belong to it).

    Args:
        config: the parsed config (``tenxgraph.appconfig.load_config``).
        **options: ``max_body_bytes``, ``multitask_strategy`` and ``recovery`` as for
            :func:`create_app`.

    Raises:
        ConfigError: ``CONFIG_001`` for a config key the server does not implement (any but
            ``agent``, ``env`` and ``auth``: never silently ignored), a bad ``auth`` (at
            once) or a graph that does not load (at start-up).
    """
    if config.extra:
        from tenxgraph.core.exceptions import ConfigError

        key = sorted(config.extra)[0]
        raise ConfigError(
            f"tenxgraph serve does not implement the config key {key!r} of 10xGraph's server "
            f"(keys read: agent, env, auth); remove it ({', '.join(sorted(config.extra))}). "
            "docs/how-to/migrate-10xgraph-server.md says what each one maps to",
            context={"key": key},
        )
    apply_env(config)
    app = create_app(None, auth=config.auth, auth_folder=config.folder, **options)
    app.state.tenxgraph_config = config
    return app
