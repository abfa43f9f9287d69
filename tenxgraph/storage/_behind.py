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

**Coalescing.** An update submitted with a ``key`` (the layered store uses the tier and the
thread) and ``linger=True`` waits in the lane for ``linger_s`` seconds before it runs; while it
waits, a later update with the same key is offered to it (its ``absorb(later)`` method) and,
when absorbed, costs no call of its own: the write-throughs of a run's consecutive steps
become one Redis call. An update that cannot be absorbed (another owner, a version gap, an
invalidation) closes the key: it is queued after the waiting one, and later updates of that
key merge into it instead, never into one queued before it, so the order of a key's updates
is kept (an invalidation submitted after a write is never undone by an earlier put). An
update submitted with ``linger=False`` (an invalidation) is urgent: the lane stops lingering
and runs everything queued before it at once; ``flush`` does the same. ``max_pending`` counts
queued updates, so absorbed ones take no place.

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
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

__all__ = ["WriteBehind"]

logger = logging.getLogger("tenxgraph.storage")

#: An update: a coroutine function taking no argument; its failures are caught by the lane.
#: An update may also have an ``absorb(later) -> bool`` method (see the module docs).
Update = Callable[[], Awaitable[None]]


class _Lane:
    """The pending updates of one event loop and the task draining them."""

    __slots__ = ("ops", "open", "task", "urgent", "waiter")

    def __init__(self) -> None:
        #: ``[update, key, due]``, oldest first; ``due`` is the loop time (s) before which a
        #: lingering update does not run, ``None`` for an urgent one.
        self.ops: deque[list[Any]] = deque()
        #: per key, the entry of the queued update later ones of that key may merge into
        self.open: dict[Hashable, list[Any]] = {}
        self.task: asyncio.Task[None] | None = None
        #: urgent updates queued plus flushes waiting: while positive, nothing lingers
        self.urgent = 0
        self.waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """Stop the lingering wait of the draining task, if any."""
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    def pop(self) -> Update:
        """Take the oldest update off the lane (it no longer accepts merges)."""
        entry = self.ops.popleft()
        op: Update = entry[0]
        key, due = entry[1], entry[2]
        if key is not None and self.open.get(key) is entry:
            del self.open[key]
        if due is None:
            self.urgent -= 1
        return op


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class WriteBehind:
    """Runs submitted updates in order, in the background, per event loop.

    Args:
        max_pending: updates allowed to wait per event loop (count, at least 1); a submit
            beyond it is dropped (``stats()["dropped"]``).
        linger_s: how long (seconds, at least 0) an update submitted with ``linger=True``
            waits for later updates of its key to merge into it; ``0``: updates run as soon
            as the lane gets to them (merging only those queued behind a running one).

    Raises:
        ValueError: ``max_pending`` is below 1 or ``linger_s`` is negative.
    """

    def __init__(self, max_pending: int = 1024, linger_s: float = 0.0) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending!r}")
        if not linger_s >= 0:
            raise ValueError(f"linger_s must be at least 0, got {linger_s!r}")
        self.max_pending = max_pending
        self.linger_s = float(linger_s)
        self._lanes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = (
            weakref.WeakKeyDictionary()
        )
        self._stats = {"submitted": 0, "merged": 0, "done": 0, "dropped": 0, "failed": 0}

    def submit(self, op: Update, key: Hashable | None = None, *, linger: bool = False) -> bool:
        """Queue ``op`` to run after every update submitted before it on this event loop.

        Args:
            op: the update.
            key: what ``op`` updates (e.g. a tier and a thread); updates of one key may merge.
            linger: let ``op`` wait ``linger_s`` for later updates of ``key`` to merge into
                it; ``False``: ``op`` is urgent (what is queued before it runs now). Merged
                into a lingering update, an urgent one makes that update urgent.

        Returns:
            ``True`` when queued or merged into a queued update of ``key``; ``False`` when
            there is no running asyncio loop (the caller should run ``op`` itself) or the lane
            is full (``op`` is dropped and counted).
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        lane = self._lanes.get(loop)
        if lane is None:
            lane = self._lanes[loop] = _Lane()
        if key is not None:
            prev = lane.open.pop(key, None)
            if prev is not None and prev[0].absorb(op):
                lane.open[key] = prev
                self._stats["merged"] += 1
                if not linger and prev[2] is not None:  # urgent now: run it without waiting
                    prev[2] = None
                    lane.urgent += 1
                    lane.wake()
                return True
        if len(lane.ops) >= self.max_pending:
            self._stats["dropped"] += 1
            return False
        due = loop.time() + self.linger_s if linger else None
        entry = [op, key, due]
        lane.ops.append(entry)
        if key is not None and getattr(op, "absorb", None) is not None:
            lane.open[key] = entry
        if due is None:
            lane.urgent += 1
            lane.wake()
        self._stats["submitted"] += 1
        if lane.task is None or lane.task.done():
            # An empty context: the updates are not part of the caller's trace (their spans
            # are roots), and the caller's context variables are not kept alive by the lane.
            lane.task = loop.create_task(self._drain(lane), context=contextvars.Context())
        return True

    async def flush(self) -> None:
        """Wait until every update submitted on the running event loop has run, without
        lingering (cancelling the waiter does not cancel the updates). When the lane's task
        is gone (a closing loop cancelled it before it started), the updates left run here,
        in order."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        lane = self._lanes.get(loop)
        if lane is None:
            return
        lane.urgent += 1
        lane.wake()
        try:
            while lane.ops or (lane.task is not None and not lane.task.done()):
                if lane.task is not None and not lane.task.done():
                    with contextlib.suppress(asyncio.CancelledError):
                        await asyncio.shield(lane.task)
                    continue
                await self._run(lane.pop())
        finally:
            lane.urgent -= 1

    def pending(self) -> int:
        """Updates waiting on the running event loop (0 without one)."""
        try:
            lane = self._lanes.get(asyncio.get_running_loop())
        except RuntimeError:
            return 0
        return 0 if lane is None else len(lane.ops)

    def stats(self) -> dict[str, int]:
        """Counters since creation: ``submitted`` (queued), ``merged`` (absorbed by a queued
        update of their key: no call of their own), ``done``, ``dropped`` (lane full, or left
        when the loop closed), ``failed`` (the update raised)."""
        return dict(self._stats)

    async def _drain(self, lane: _Lane) -> None:
        loop = asyncio.get_running_loop()
        try:
            while lane.ops:
                due = lane.ops[0][2]
                if due is not None and lane.urgent <= 0:
                    delay = due - loop.time()
                    if delay > 0:
                        fut: asyncio.Future[None] = loop.create_future()
                        lane.waiter = fut
                        timer = loop.call_later(delay, _wake, fut)
                        try:
                            await fut
                        finally:
                            timer.cancel()
                            lane.waiter = None
                        continue
                await self._run(lane.pop())
        except asyncio.CancelledError:
            # Only a closing event loop cancels the lane (``asyncio.run`` cancels every task):
            # the updates left are dropped (the caches stay correct, merely colder).
            self._stats["dropped"] += len(lane.ops)
            lane.urgent -= sum(1 for _, _, due in lane.ops if due is None)
            lane.ops.clear()
            lane.open.clear()
            raise

    async def _run(self, op: Update) -> None:
        try:
            await op()
        except Exception as exc:  # an update's failure never reaches a run
            self._stats["failed"] += 1
            logger.warning("background cache update failed (%s)", type(exc).__name__)
        else:
            self._stats["done"] += 1
