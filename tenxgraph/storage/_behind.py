"""Cache updates off the critical path: a bounded FIFO per event loop, drained by one task.

A shared cache tier (Redis) is never waited for inside a step: the layered store hands each
update of it (a write-through, a fill after a read, an invalidation) to a :class:`WriteBehind`
lane, which runs them in submission order on a task of the caller's event loop. Correctness
never depends on these updates (every cached copy is validated against the source of truth
before a run relies on it), so a full lane drops the update (counted) instead of waiting, and
a failing update is logged and forgotten. ``flush`` waits for what was submitted (tests and
``aclose`` use it, so nothing is left running when a store closes). A loop that closes with
updates still queued (``asyncio.run`` returning right after a write) drops them: a later
write-through finding Redis without the version its rows apply to sends the complete record.

Only asyncio loops are served (the shared tiers use asyncio clients); without a running asyncio
loop ``submit`` refuses and the caller runs the update itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import weakref
from collections import deque
from collections.abc import Awaitable, Callable

__all__ = ["WriteBehind"]

logger = logging.getLogger("tenxgraph.storage")

#: An update: a coroutine function taking no argument; its failures are caught by the lane.
Update = Callable[[], Awaitable[None]]


class _Lane:
    """The pending updates of one event loop and the task draining them."""

    __slots__ = ("ops", "task")

    def __init__(self) -> None:
        self.ops: deque[Update] = deque()
        self.task: asyncio.Task[None] | None = None


class WriteBehind:
    """Runs submitted updates in order, in the background, per event loop.

    Args:
        max_pending: updates allowed to wait per event loop (count, at least 1); a submit
            beyond it is dropped (``stats()["dropped"]``).

    Raises:
        ValueError: ``max_pending`` is below 1.
    """

    def __init__(self, max_pending: int = 1024) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending!r}")
        self.max_pending = max_pending
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = (
            weakref.WeakKeyDictionary()
        )
        self._stats = {"submitted": 0, "done": 0, "dropped": 0, "failed": 0}

    def submit(self, op: Update) -> bool:
        """Queue ``op`` to run after every update submitted before it on this event loop.

        Returns:
            ``True`` when queued; ``False`` when there is no running asyncio loop (the caller
            should run ``op`` itself) or the lane is full (``op`` is dropped and counted).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        lane = self._lanes.get(loop)
        if lane is None:
            lane = self._lanes[loop] = _Lane()
        if len(lane.ops) >= self.max_pending:
            self._stats["dropped"] += 1
            return False
        lane.ops.append(op)
        self._stats["submitted"] += 1
        if lane.task is None or lane.task.done():
            # An empty context: the updates are not part of the caller's trace (their spans
            # are roots), and the caller's context variables are not kept alive by the lane.
            lane.task = loop.create_task(self._drain(lane), context=contextvars.Context())
        return True

    async def flush(self) -> None:
        """Wait until every update submitted on the running event loop has run (cancelling
        the waiter does not cancel the updates). When the lane's task is gone (a closing
        loop cancelled it before it started), the updates left run here, in order."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        lane = self._lanes.get(loop)
        while lane is not None and (lane.ops or (lane.task is not None and not lane.task.done())):
            if lane.task is not None and not lane.task.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(lane.task)
                continue
            await self._run(lane.ops.popleft())

    def pending(self) -> int:
        """Updates waiting on the running event loop (0 without one)."""
        try:
            lane = self._lanes.get(asyncio.get_running_loop())
        except RuntimeError:
            return 0
        return 0 if lane is None else len(lane.ops)

    def stats(self) -> dict[str, int]:
        """Counters since creation: ``submitted``, ``done``, ``dropped`` (lane full),
        ``failed`` (the update raised)."""
        return dict(self._stats)

    async def _drain(self, lane: _Lane) -> None:
        try:
            while lane.ops:
                await self._run(lane.ops.popleft())
        except asyncio.CancelledError:
            # Only a closing event loop cancels the lane (``asyncio.run`` cancels every task):
            # the updates left are dropped (the caches stay correct, merely colder).
            self._stats["dropped"] += len(lane.ops)
            lane.ops.clear()
            raise

    async def _run(self, op: Update) -> None:
        try:
            await op()
        except Exception as exc:  # an update's failure never reaches a run
            self._stats["failed"] += 1
            logger.warning("background cache update failed (%s)", type(exc).__name__)
        else:
            self._stats["done"] += 1
