"""The ``node_timeout`` deadline of a run's nodes.

A node's deadline is ``node_timeout`` seconds after it starts; every piece of its code (the
call, or each step of a generator node) runs under it, and one that is still running at the
deadline is cancelled and raises ``TimeoutError`` (the runner turns it into
``NodeTimeoutError``).

Two ways to enforce it, chosen per call:

* **asyncio, plain ``async def`` node code** (``native=True`` on an asyncio task): one timer
  per run instead of one cancel scope per call. Arming it for a call is two attribute writes;
  the timer, when it fires, either finds the current deadline passed and cancels the task
  with ``Task.cancel()`` (told apart from any other cancellation with
  ``Task.cancelling()`` / ``Task.uncancel()``, exactly as ``asyncio.timeout`` does), or
  re-schedules itself at the current deadline. This is asyncio's own timeout semantics, not
  anyio's: an ``anyio.CancelScope(shield=True)`` inside the node does not hold the node
  timeout back (as it does not hold back ``asyncio.timeout``), while anyio task groups and
  cancel scopes inside the node see the cancellation as any native one and propagate it.
* **everything else** (trio, sync nodes run in a worker thread, ``Agent`` / ``ToolNode``
  nodes, whose cleanup relies on shielded scopes): ``anyio.fail_after`` around the call, the
  semantics the runtime always had.

The native path saves the ~15 microseconds per node that ``anyio.fail_after`` costs (backend
lookup through sniffio, two generator-based context managers, a cancel scope and a timer per
call) on the default 900 s deadline that almost never fires.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ._aio import asyncio_task

__all__ = ["NodeDeadline"]


class NodeDeadline:
    """The node deadline of one run (see the module docstring).

    Args:
        timeout: ``node_timeout`` in seconds (> 0).

    Use: :meth:`begin` when a node starts, :meth:`call` for each piece of its code,
    :meth:`close` when the run ends (drops the timer).
    """

    __slots__ = (
        "_cancelling",
        "_fired",
        "_handle",
        "_loop",
        "_scheduled",
        "_task",
        "at",
        "timeout",
    )

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        #: ``time.monotonic()`` deadline of the current node
        self.at = 0.0
        self._task: asyncio.Task[Any] | None = None  # the task running node code now
        self._cancelling = 0  # its ``cancelling()`` when the call started
        self._fired = False  # this deadline cancelled ``_task``
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = 0.0  # the monotonic time ``_handle`` fires at

    def begin(self) -> None:
        """A node starts: its deadline is ``timeout`` seconds from now."""
        self.at = time.monotonic() + self.timeout

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any, native: bool) -> Any:
        """``await fn(*args)`` under the current node's deadline.

        Args:
            fn: an async callable.
            *args: its arguments.
            native: the code is a plain ``async def`` (no shielded cleanup of the runtime's
                own inside): on asyncio the per-run timer may enforce the deadline.

        Raises:
            TimeoutError: the deadline passed while ``fn`` ran (it was cancelled).
        """
        task = self.enter() if native else None
        if task is None:
            with anyio.fail_after(max(self.at - time.monotonic(), 0.0)):
                return await fn(*args)
        try:
            return await fn(*args)
        except asyncio.CancelledError:
            if self.settle(task):
                raise TimeoutError from None
            raise
        finally:
            self.settle(task)

    def enter(self) -> asyncio.Task[Any] | None:
        """The native path of :meth:`call`, for a caller that awaits the code itself (one
        coroutine less per node): arm the timer on the running asyncio task and return it, to
        be passed to :meth:`settle` when the code ends; ``None`` when asyncio does not run this
        code (then use :meth:`call`).

        The caller's code must be a plain ``async def`` (``native``), and the caller must do
        what :meth:`call` does: on ``asyncio.CancelledError``, ``settle(task)`` true means the
        deadline passed (raise ``TimeoutError``), else re-raise; ``settle(task)`` in every case.
        """
        task = asyncio_task()
        if task is not None:
            self._arm(task)
        return task

    def settle(self, task: asyncio.Task[Any]) -> bool:
        """End the call of ``task`` started by :meth:`enter`; whether its cancellation was this
        deadline's alone (idempotent: ``False`` once settled)."""
        return self._settle(task)

    def close(self) -> None:
        """Drop the timer (the run ended; idempotent)."""
        self._task = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    # -- the asyncio timer -----------------------------------------------------------------------
    def _arm(self, task: asyncio.Task[Any]) -> None:
        self._task = task
        self._cancelling = task.cancelling()
        self._fired = False
        loop = task.get_loop()
        h = self._handle
        if h is not None and loop is self._loop and self._scheduled <= self.at:
            return  # it fires at or before this deadline and re-schedules itself then
        if h is not None:
            h.cancel()
        self._loop = loop
        self._schedule(loop)

    def _schedule(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = self.at
        self._handle = loop.call_later(max(self.at - time.monotonic(), 0.0), self._fire)

    def _fire(self) -> None:
        self._handle = None
        task = self._task
        if task is None or self._fired or self._loop is None:
            return  # no node code running: the next call arms the timer again
        if time.monotonic() < self.at:
            self._schedule(self._loop)
            return
        self._fired = True
        task.cancel()

    def _settle(self, task: asyncio.Task[Any]) -> bool:
        """End the call of ``task``; whether its cancellation was this deadline's alone."""
        if self._task is not task:
            return False  # settled already
        self._task = None
        if not self._fired:
            return False
        self._fired = False
        return task.uncancel() <= self._cancelling
