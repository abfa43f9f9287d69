"""Runs server processes: uvicorn, one graph per process, graceful shutdown on SIGTERM.

``tenxgraph serve --config 10xgraph.json [--host] [--port] [--workers N]`` ends here. Each server
process (the only one, or each of the ``N`` uvicorn workers, which uvicorn starts with
``spawn``) builds its own graph, so no pool or event loop is shared across processes:

1. uvicorn calls :func:`process_app` (an app factory) in the process; it reads the config file
   named by ``TENXGRAPH_SERVE_CONFIG`` (set by :func:`serve`; workers inherit it) and returns a
   :class:`ProcessApp`.
2. At lifespan start, on the server's event loop, :class:`ProcessApp` imports the graph
   (``appconfig.load_graph``: the config's ``env`` file applied first; an ``async def``
   factory is awaited there, so its pools open on the loop that uses them), builds the ASGI
   app with the app factory (``create_app`` of :mod:`tenxgraph.server` unless
   ``TENXGRAPH_SERVE_APP`` names another ``module:attr``), wraps it in
   :class:`~tenxgraph.server._lifecycle.GracefulShutdown` and runs that app's own lifespan.
3. SIGTERM drains the process (see :mod:`tenxgraph.server._lifecycle`); uvicorn then waits up to
   ``graceful_timeout_s`` for the connections to close, runs the lifespan shutdown, and the
   graph is closed (``aclose``: its pools released).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenxgraph.appconfig import AppConfig, import_attr, load_config, load_graph
from tenxgraph.core.exceptions import ConfigError
from tenxgraph.server._lifecycle import ASGIApp, GracefulShutdown, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph

__all__ = ["APP_ENV", "CONFIG_ENV", "DEFAULT_APP", "ProcessApp", "process_app", "serve"]

#: Environment variable naming the config file of the server processes.
CONFIG_ENV = "TENXGRAPH_SERVE_CONFIG"
#: Environment variable naming the app factory (``module:attr``, called with the graph).
APP_ENV = "TENXGRAPH_SERVE_APP"
#: The app factory used when :data:`APP_ENV` is not set.
DEFAULT_APP = "tenxgraph.server:create_app"

AppFactory = Callable[..., ASGIApp]


class ProcessApp:
    """The ASGI app of one server process: loads the graph at lifespan start, then serves the
    app built on it, wrapped in :class:`GracefulShutdown`.

    Args:
        config: the parsed config file.
        factory: builds the ASGI app: ``factory(graph, config=config)`` when it accepts a
            ``config`` keyword, else ``factory(graph)``.

    Attributes:
        graph: the process's graph once started, else ``None``.
        app: the wrapped app once started, else ``None``.
    """

    def __init__(self, config: AppConfig, factory: AppFactory) -> None:
        self.config = config
        self.factory = factory
        self.graph: CompiledGraph[Any] | None = None
        self.app: GracefulShutdown | None = None
        self._inner_lifespan: asyncio.Task[None] | None = None
        self._to_inner: asyncio.Queue[Message] = asyncio.Queue()
        self._from_inner: asyncio.Queue[Message] = asyncio.Queue()

    def _build(self, graph: CompiledGraph[Any]) -> ASGIApp:
        try:
            return self.factory(graph, config=self.config)
        except TypeError as exc:
            if "config" not in str(exc):
                raise
            return self.factory(graph)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if self.app is None:
            raise RuntimeError("the server process received a request before its lifespan start")
        await self.app(scope, receive, send)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer uvicorn's lifespan messages; start and stop the graph and the wrapped app."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self._startup(scope)
                except BaseException as exc:
                    await self._close_graph()
                    await send({"type": "lifespan.startup.failed", "message": f"{exc!r}"})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await self._shutdown()
                finally:
                    await self._close_graph()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _startup(self, scope: Scope) -> None:
        graph = await load_graph(self.config)
        self.graph = graph
        self.app = GracefulShutdown(self._build(graph), graph)
        # Run the wrapped app's own lifespan (and the drain's signal hook) as a task fed from
        # here; an app without lifespan support simply has none.
        self._inner_lifespan = asyncio.get_running_loop().create_task(
            self._run_inner_lifespan(dict(scope))
        )
        await self._to_inner.put({"type": "lifespan.startup"})
        reply = await self._from_inner.get()
        if reply["type"] == "lifespan.startup.failed":
            raise RuntimeError(f"the app's lifespan start failed: {reply.get('message', '')}")

    async def _run_inner_lifespan(self, scope: Scope) -> None:
        assert self.app is not None
        try:
            await self.app(scope, self._to_inner.get, self._from_inner.put)
        except Exception:  # noqa: BLE001 - an app without lifespan support raises here
            await self._from_inner.put({"type": "lifespan.startup.complete"})
            await self._from_inner.put({"type": "lifespan.shutdown.complete"})

    async def _shutdown(self) -> None:
        task = self._inner_lifespan
        if task is None:
            return
        await self._to_inner.put({"type": "lifespan.shutdown"})
        await self._from_inner.get()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 5.0)

    async def _close_graph(self) -> None:
        graph, self.graph = self.graph, None
        if graph is not None:
            await graph.aclose()


def process_app() -> ProcessApp:
    """The app factory uvicorn calls in each server process.

    Raises:
        ConfigError: ``CONFIG_001`` when ``TENXGRAPH_SERVE_CONFIG`` is not set, or as
            :func:`~tenxgraph.appconfig.load_config` and ``import_attr`` raise.
    """
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise ConfigError(
            f"{CONFIG_ENV} is not set: start server processes with `tenxgraph serve`",
            context={"key": "config"},
        )
    config = load_config(path)
    factory: AppFactory = import_attr(os.environ.get(APP_ENV) or DEFAULT_APP)
    return ProcessApp(config, factory)


def serve(
    config_path: str | os.PathLike[str],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    workers: int = 1,
    graceful_timeout_s: float = 30.0,
    app_factory: str | None = None,
    log_level: str = "info",
) -> None:
    """Serve the config file's graph with uvicorn until SIGTERM / SIGINT (blocks).

    Args:
        config_path: the ``10xgraph.json`` / ``agentflow.json`` file.
        host: address to bind (``0.0.0.0`` for every interface).
        port: TCP port.
        workers: uvicorn worker processes sharing the port, each with its own graph and pools.
        graceful_timeout_s: seconds a SIGTERM waits for the requests in flight (their runs stop
            at their next node boundary) before cancelling what is left (uvicorn's
            ``timeout_graceful_shutdown``).
        app_factory: ``module:attr`` of the app factory, called with the graph (default
            :data:`DEFAULT_APP`).
        log_level: uvicorn's log level.

    Raises:
        ConfigError: ``CONFIG_001`` for a missing or invalid config file, ``workers < 1`` or a
            negative ``graceful_timeout_s`` (checked before anything starts).
    """
    import uvicorn

    config = load_config(config_path)
    if workers < 1:
        raise ConfigError(
            f"--workers must be at least 1, got {workers}", context={"key": "workers"}
        )
    if graceful_timeout_s < 0:
        raise ConfigError(
            f"--graceful-timeout must be >= 0 seconds, got {graceful_timeout_s}",
            context={"key": "graceful_timeout"},
        )
    os.environ[CONFIG_ENV] = str(Path(config.path))
    if app_factory is not None:
        os.environ[APP_ENV] = app_factory
    uvicorn.run(
        f"{__name__}:process_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        timeout_graceful_shutdown=math.ceil(graceful_timeout_s),
        log_level=log_level,
        lifespan="on",
    )
