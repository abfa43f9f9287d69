"""Graceful shutdown of a server process: SIGTERM drains the runs it serves.

What a process does when it is asked to stop (SIGTERM from an orchestrator, a deploy, ``kill``;
SIGINT / Ctrl-C alike), wrapped around the ASGI app by :class:`GracefulShutdown`:

1. It stops taking requests. uvicorn closes the listening socket and the idle keep-alive
   connections; a request that still reaches the app answers ``503`` with ``Retry-After`` and
   ``Connection: close`` (so ``GET /ping`` fails and a load balancer's health check takes the
   instance out at once).
2. Every run of the process is asked to stop at its next node boundary: the node running now
   finishes and is checkpointed with status ``stopped``, and that checkpoint write releases the
   run's lease in the same statement (docs/how-to/run-lease.md). A run waiting in a thread's
   queue stops before its first node once it gets the lease. The request is made in process
   only (never the durable stop flag of ``astop``, which would also stop another instance's
   run of the same thread), and renewed until the process's runs are gone.
3. An ``invoke`` whose run ended after the drain began answers ``503`` (``Retry-After``) instead
   of its result, so the client re-sends the same message: any other instance then finishes the
   stopped run (at most the node that was running is not re-run: it was checkpointed) and
   answers, as for any retried turn (docs/idempotent-turns.md). A stream under way is cut
   (no line after the drain began, the connection closed without the response's end): the
   client resumes it like any broken stream, and the instance that answers replays the
   messages committed since and finishes the run.
4. uvicorn waits for the connections to close (``--graceful-timeout``, after which it cancels
   what is left: a cancelled run leaves its queue and releases its lease), then runs the
   lifespan shutdown (the graph's ``aclose``).

SIGKILL, a crash or a lost machine gets none of this: the lease lapses after ``lease_ttl_s`` and
the next request of the thread (or a recovery worker) finishes the run.

The signal hook chains onto the handler uvicorn installs (uvicorn keeps signals with
``signal.signal``, in each worker process of ``--workers N`` too); under another ASGI server,
call :meth:`GracefulShutdown.begin` from its shutdown hook.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from types import FrameType
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from tenxgraph.server._envelope import ApiError, error_response

if TYPE_CHECKING:
    from tenxgraph.core.graph.compiled_graph import CompiledGraph

__all__ = ["DRAIN_ERROR_CODE", "GracefulShutdown"]

log = logging.getLogger("tenxgraph.server")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: ``error.code`` of the ``503`` answered while the process drains.
DRAIN_ERROR_CODE = "SERVER_SHUTTING_DOWN_001"

#: Signals that start the drain (uvicorn's own shutdown signals).
_SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: Seconds between two renewals of the in-process stop requests while draining.
_STOP_EVERY_S = 0.05


def _is_turn(scope: Scope) -> bool:
    """Whether a request starts a turn whose answer can be replaced by a 503 (a retry of the
    same message is idempotent): ``POST .../graph/invoke``."""
    return scope.get("method") == "POST" and str(scope.get("path", "")).endswith("/graph/invoke")


def _is_stream(scope: Scope) -> bool:
    """Whether a request is a stream (``POST .../graph/stream``)."""
    return scope.get("method") == "POST" and str(scope.get("path", "")).endswith("/graph/stream")


class GracefulShutdown:
    """ASGI middleware that drains a server process on SIGTERM (see the module docstring).

    Args:
        app: the ASGI app (``create_app(graph)``).
        graph: the compiled graph whose runs are stopped at their next node boundary, or a
            function returning it (``None`` while not loaded yet: an app built from a config
            file loads its graph at lifespan start).
        retry_after_s: the ``Retry-After`` (whole seconds) of the ``503`` answers.
        install_signal_handlers: chain onto the process's SIGTERM / SIGINT handlers at
            lifespan start (main thread only); ``False``: call :meth:`begin` yourself.

    Attributes:
        draining: the drain has begun.
        stopped_runs: in-process stop requests made so far (one per run and renewal).
    """

    def __init__(
        self,
        app: ASGIApp,
        graph: CompiledGraph[Any] | Callable[[], CompiledGraph[Any] | None],
        *,
        retry_after_s: int = 1,
        install_signal_handlers: bool = True,
    ) -> None:
        self.app = app
        self._graph = graph
        self.retry_after_s = int(retry_after_s)
        self.install_signal_handlers = install_signal_handlers
        self.draining = False
        self.stopped_runs = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._previous: dict[int, Any] = {}

    @property
    def graph(self) -> CompiledGraph[Any] | None:
        """The graph whose runs are drained (``None`` while not loaded)."""
        from tenxgraph.core.graph.compiled_graph import CompiledGraph

        g = self._graph
        if isinstance(g, CompiledGraph):
            return g
        return g()

    # -- the drain -------------------------------------------------------------------------------
    def begin(self) -> None:
        """Start draining (idempotent; safe from a signal handler or another thread)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self.draining = True
            return
        # A signal handler runs on the main thread between two bytecodes of whatever the loop
        # was doing: schedule the drain, never run it from here.
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        if self._task is not None:
            return
        self.draining = True
        log.info("draining: no new requests; runs stop at their next node boundary")
        self._task = asyncio.get_running_loop().create_task(self._stop_runs())

    async def _stop_runs(self) -> None:
        """Ask every run of this process to stop at its next node boundary, until none is left.

        Through ``CompiledGraph.request_stop_all`` (the in-process half of ``astop``): nothing
        is written to the store.
        """
        while True:
            graph = self.graph
            if graph is None:
                await asyncio.sleep(_STOP_EVERY_S)
                continue
            self.stopped_runs += graph.request_stop_all()
            await asyncio.sleep(_STOP_EVERY_S)

    async def aclose(self) -> None:
        """Stop the drain's renewal task (lifespan shutdown)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- signals ---------------------------------------------------------------------------------
    def _install(self) -> None:
        if not self.install_signal_handlers:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)
            self._previous[sig] = previous

            def handler(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                self.begin()
                if callable(previous):
                    previous(signum, frame)
                elif previous == signal.SIG_DFL and signum == signal.SIGINT:
                    raise KeyboardInterrupt

            signal.signal(sig, handler)

    # -- ASGI ------------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            self._loop = asyncio.get_running_loop()
            self._install()
            try:
                await self.app(scope, receive, send)
            finally:
                await self.aclose()
            return
        if kind != "http":
            await self.app(scope, receive, send)
            return
        if self.draining:
            await self._refuse(scope, receive, send)
            return
        if _is_stream(scope):
            await self._stream(scope, receive, send)
            return
        if not _is_turn(scope):
            await self.app(scope, receive, send)
            return
        replaced = False

        async def guarded_send(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and self.draining:
                replaced = True
                await self._refuse(scope, receive, send)
                return
            if replaced:
                return
            await send(message)

        await self.app(scope, receive, guarded_send)

    async def _stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A stream under way when the drain begins is cut, not ended: the lines produced
        after that (the run's ``stopped`` chunks among them) are consumed but not sent, so the
        run reaches its node boundary and releases its lease, and the response is left
        unfinished (uvicorn closes the connection): the client sees a broken stream and
        resumes it on another instance (``Last-Event-ID``), which replays the messages
        committed since and finishes the stopped run. Ending it cleanly would hand the client
        a ``stopped`` run as if it were the answer."""
        cut = False

        async def guarded_send(message: Message) -> None:
            nonlocal cut
            if message["type"] == "http.response.start" and self.draining:
                cut = True
                await self._refuse(scope, receive, send)
                return
            if cut or (message["type"] == "http.response.body" and self.draining):
                cut = True
                return
            await send(message)

        await self.app(scope, receive, guarded_send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ``503`` of a draining process, in the server's error envelope."""
        text = "this instance is shutting down; send the request again (same message ids)"
        response = error_response(Request(scope), ApiError(503, DRAIN_ERROR_CODE, text))
        response.headers["retry-after"] = str(self.retry_after_s)
        response.headers["connection"] = "close"
        await response(scope, receive, send)
