"""``BackgroundTaskManager``: fire-and-forget coroutines started by nodes, tracked and drained.

Every ``StateGraph`` owns one; a node receives it by declaring a parameter annotated
``BackgroundTaskManager`` (or named ``task_manager``), and ``app.aclose()`` shuts it down with
``compile(shutdown_timeout=...)``. Tasks are ``asyncio`` tasks of the loop that created them.
The manager may be used from several event loops (the sync ``invoke`` runs on tenxgraph's
portal loop): waiting polls ``task.done()`` and cancelling goes through the task's own loop,
so no loop ever awaits another loop's task.

Counters (``tenxgraph.utils.metrics``, hence OpenTelemetry): ``background_task_manager.
tasks_created``, ``_completed``, ``_failed``, ``_dropped``, ``_cancelled``, ``_timed_out``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import anyio

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.telemetry import METRIC
from tenxgraph.utils.metrics import counter

__all__ = ["BackgroundTaskManager", "TaskMetadata"]

logger = logging.getLogger(__name__)
_POLL_S = 0.01
_DROP_LOG_EVERY_S = 10.0


@dataclass(slots=True)
class TaskMetadata:
    """What the manager knows about one task.

    Attributes:
        name: the label given to ``create_task``.
        created_at: UNIX time (seconds) of creation.
        timeout: seconds after which the task is cancelled, or ``None``.
        context: the extra key/values given to ``create_task`` (logged with errors).
    """

    name: str
    created_at: float
    timeout: float | None = None
    context: dict[str, Any] | None = field(default=None)


def _check_seconds(what: str, value: Any, allow_none: bool) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValidationError(
            f"{what} must be a number of seconds >= 0{' or None' if allow_none else ''}, "
            f"got {value!r}",
            context={"argument": what},
        )
    return float(value)


def _cancel(task: asyncio.Task[Any]) -> None:
    loop = task.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is running:
        task.cancel()
    elif not loop.is_closed():
        loop.call_soon_threadsafe(task.cancel)


class BackgroundTaskManager:
    """Runs coroutines in the background and keeps track of them until they end.

    ``async with BackgroundTaskManager() as m:`` calls ``m.shutdown()`` on exit.

    Args:
        default_shutdown_timeout (float): seconds ``shutdown()`` waits when called without a
            timeout (default 30.0).
        max_pending_tasks (int): tasks allowed in flight at once; beyond it ``create_task``
            drops the new coroutine (closed, never run) and returns ``None``. ``0`` means no
            limit. Default 1000.

    Raises:
        ValidationError: ``VALIDATION_000`` for a negative or non-numeric argument.
    """

    def __init__(
        self, default_shutdown_timeout: float = 30.0, max_pending_tasks: int = 1000
    ) -> None:
        self.default_shutdown_timeout = _check_seconds(
            "default_shutdown_timeout", default_shutdown_timeout, allow_none=False
        )
        if (
            isinstance(max_pending_tasks, bool)
            or not isinstance(max_pending_tasks, int)
            or max_pending_tasks < 0
        ):
            raise ValidationError(
                f"max_pending_tasks must be an int >= 0, got {max_pending_tasks!r}",
                context={"argument": "max_pending_tasks"},
            )
        self.max_pending_tasks = max_pending_tasks
        # the tasks tracked, and each one's metadata (the two names 10xGraph uses)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._task_metadata: dict[asyncio.Task[Any], TaskMetadata] = {}
        self._lock = threading.Lock()
        self._last_drop_log = 0.0
        self._dropped_since_log = 0
        self._shut_down = False

    # -- starting --------------------------------------------------------------------------------
    def create_task(
        self,
        coro: Coroutine[Any, Any, Any],
        name: str = "background_task",
        timeout: float | None = None,
        context: dict[str, Any] | None = None,
    ) -> asyncio.Task[Any] | None:
        """Start ``coro`` as a task of the running event loop and track it.

        Call it from async code (an ``async def`` node). From a sync node, which runs in a
        worker thread, the task is started on the graph's event loop.

        Args:
            coro: a coroutine object (``send(x)``, not ``send``).
            name: label for logs and ``get_task_info()``.
            timeout: seconds after which the task is cancelled (and counted as timed out);
                ``None`` for no limit.
            context: extra key/values kept with the task and logged with its errors.

        Returns:
            The ``asyncio.Task``, or ``None`` when ``max_pending_tasks`` tasks are already in
            flight (the coroutine is closed without running).

        Raises:
            ValidationError: ``VALIDATION_000`` when ``coro`` is not a coroutine object (a
                coroutine function is named in the message), for a bad ``timeout``, or when
                there is no asyncio event loop to run it on (outside any loop, or under trio).
        """
        if not inspect.iscoroutine(coro):
            hint = " (pass send(x), not send)" if callable(coro) else ""
            raise ValidationError(
                f"create_task() takes a coroutine object, got {type(coro).__name__}{hint}",
                context={"task": name},
            )
        try:
            timeout = _check_seconds("timeout", timeout, allow_none=True)
        except ValidationError:
            coro.close()
            raise
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            try:
                return anyio.from_thread.run_sync(self._start, coro, name, timeout, context)
            except RuntimeError:
                coro.close()
                raise ValidationError(
                    "create_task() needs a running asyncio event loop (background tasks are "
                    "asyncio tasks; trio is not supported): call it from an async function or "
                    "a node of a graph run under asyncio",
                    context={"task": name},
                ) from None
        return self._start(coro, name, timeout, context)

    def _start(
        self,
        coro: Coroutine[Any, Any, Any],
        name: str,
        timeout: float | None,
        context: dict[str, Any] | None,
    ) -> asyncio.Task[Any] | None:
        with self._lock:
            pending = sum(1 for t in self._tasks if not t.done())
            full = self.max_pending_tasks and pending >= self.max_pending_tasks
            if full:
                self._dropped_since_log += 1
        if full:
            coro.close()
            counter(METRIC.TASKS_DROPPED).inc()
            self._log_drop(name)
            return None
        meta = TaskMetadata(name=name, created_at=time.time(), timeout=timeout, context=context)
        task = asyncio.get_running_loop().create_task(self._run(coro, meta), name=name)
        with self._lock:
            self._tasks.add(task)
            self._task_metadata[task] = meta
            self._shut_down = False
        task.add_done_callback(lambda t: self._forget(t, coro))
        counter(METRIC.TASKS_CREATED).inc()
        return task

    def _log_drop(self, name: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last_drop_log < _DROP_LOG_EVERY_S:
                return
            self._last_drop_log = now
            dropped, self._dropped_since_log = self._dropped_since_log, 0
        logger.warning(
            "background task %r dropped: %d tasks in flight (max_pending_tasks); %d dropped "
            "since the last warning",
            name,
            self.max_pending_tasks,
            dropped,
        )

    async def _run(self, coro: Coroutine[Any, Any, Any], meta: TaskMetadata) -> Any:
        try:
            if meta.timeout is None:
                result = await coro
            else:
                with anyio.fail_after(meta.timeout):
                    result = await coro
        except TimeoutError:
            counter(METRIC.TASKS_TIMED_OUT).inc()
            logger.warning(
                "background task %r timed out after %ss (context=%r)",
                meta.name,
                meta.timeout,
                meta.context,
            )
            raise
        except Exception as exc:
            counter(METRIC.TASKS_FAILED).inc()
            # the exception's text in the message itself (10xGraph's log line), traceback too
            logger.error(
                f"Background task raised an exception: task {meta.name!r} failed: "  # noqa: G004
                f"{type(exc).__name__}: {exc} (context={meta.context!r})",
                exc_info=True,
            )
            raise
        counter(METRIC.TASKS_COMPLETED).inc()
        return result

    def _forget(self, task: asyncio.Task[Any], coro: Coroutine[Any, Any, Any]) -> None:
        with self._lock:
            self._tasks.discard(task)
            self._task_metadata.pop(task, None)
        if task.cancelled():
            counter(METRIC.TASKS_CANCELLED).inc()
            coro.close()  # cancelled before it started: no "never awaited" warning
        else:
            task.exception()  # retrieved: already logged by _run, no "never retrieved" noise

    # -- inspecting ------------------------------------------------------------------------------
    @property
    def pending_count(self) -> int:
        """Tasks still running (the same number as ``get_task_count()``)."""
        return self.get_task_count()

    def get_task_count(self) -> int:
        """Tasks still running.

        Returns:
            The number of tracked tasks not yet done.
        """
        with self._lock:
            return sum(1 for t in self._tasks if not t.done())

    def get_task_info(self) -> list[dict[str, Any]]:
        """One dict per tracked task.

        Returns:
            Dicts with ``name`` (str), ``age_seconds`` (float), ``timeout`` (float or None),
            ``context`` (dict), ``done`` (bool), ``cancelled`` (bool, meaningful once done).
        """
        now = time.time()
        with self._lock:
            items = list(self._task_metadata.items())
        return [
            {
                "name": meta.name,
                "age_seconds": now - meta.created_at,
                "timeout": meta.timeout,
                "context": dict(meta.context or {}),
                "done": task.done(),
                "cancelled": task.cancelled(),
            }
            for task, meta in items
        ]

    def _snapshot(self) -> list[asyncio.Task[Any]]:
        with self._lock:
            return list(self._task_metadata)  # creation order

    # -- ending ----------------------------------------------------------------------------------
    async def wait_for_all(
        self,
        timeout: float | None = None,  # noqa: ASYNC109 - 10xGraph's documented signature
        return_exceptions: bool = False,
    ) -> list[Any]:
        """Wait until every task tracked now has finished.

        Args:
            timeout: seconds to wait at most (a warning is logged when they run out); ``None``
                waits as long as it takes.
            return_exceptions: give a failed task's exception as its result instead of
                raising it.

        Returns:
            The results of the tasks that finished, in creation order (a cancelled task's
            result is its ``CancelledError`` when ``return_exceptions``, else it is skipped).

        Raises:
            ValidationError: ``VALIDATION_000`` for a bad ``timeout``.
            Exception: the first failed task's exception, unless ``return_exceptions``.
        """
        timeout = _check_seconds("timeout", timeout, allow_none=True)
        tasks = self._snapshot()
        with anyio.move_on_after(timeout) as scope:
            while not all(t.done() for t in tasks):  # noqa: ASYNC110 - tasks may live on other loops
                await anyio.sleep(_POLL_S)
        if scope.cancelled_caught:
            logger.warning(
                "wait_for_all: %d background task(s) still running after %ss",
                sum(1 for t in tasks if not t.done()),
                timeout,
            )
        with self._lock:  # finished tasks are forgotten now, not a loop step later
            for task in tasks:
                if task.done():
                    self._tasks.discard(task)
                    self._task_metadata.pop(task, None)
        results: list[Any] = []
        for task in tasks:
            if not task.done():
                continue
            if task.cancelled():
                if return_exceptions:
                    results.append(asyncio.CancelledError())
                continue
            exc = task.exception()
            if exc is not None:
                if not return_exceptions:
                    raise exc
                results.append(exc)
            else:
                results.append(task.result())
        return results

    async def __aenter__(self) -> BackgroundTaskManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    async def cancel_all(self) -> None:
        """Request cancellation of every tracked task; does not wait for them to end."""
        for task in self._snapshot():
            if not task.done():
                _cancel(task)

    async def shutdown(self, timeout: float | None = None) -> dict[str, Any]:  # noqa: ASYNC109
        """Cancel every task and wait up to ``timeout`` seconds for them to end.

        Args:
            timeout: seconds; ``None`` uses ``default_shutdown_timeout``.

        Returns:
            ``{"status": "completed" | "timed_out", "initial_tasks": int, "completed_tasks":
            int, "remaining_tasks": int, "duration_seconds": float}``; ``completed_tasks``
            counts the tasks that ended (cancelled or not) within the wait. A call made when an
            earlier one has started and no task has been started since returns at once
            ``{"status": "already_shutdown", "tasks_remaining": int}`` (as 10xGraph's does;
            ``tasks_remaining`` counts tasks the first call is still waiting for).

        Raises:
            ValidationError: ``VALIDATION_000`` for a bad ``timeout``.
        """
        limit = (
            self.default_shutdown_timeout
            if timeout is None
            else _check_seconds("timeout", timeout, allow_none=False)
        )
        started = time.monotonic()
        tasks = [t for t in self._snapshot() if not t.done()]
        with self._lock:
            if self._shut_down:
                return {"status": "already_shutdown", "tasks_remaining": len(tasks)}
            self._shut_down = True
        for task in tasks:
            _cancel(task)
        with anyio.move_on_after(limit):
            while not all(t.done() for t in tasks):  # noqa: ASYNC110 - tasks may live on other loops
                await anyio.sleep(_POLL_S)
        remaining = sum(1 for t in tasks if not t.done())
        if remaining:
            logger.warning(
                "shutdown: %d background task(s) did not end within %ss", remaining, limit
            )
        return {
            "status": "timed_out" if remaining else "completed",
            "initial_tasks": len(tasks),
            "completed_tasks": len(tasks) - remaining,
            "remaining_tasks": remaining,
            "duration_seconds": time.monotonic() - started,
        }
