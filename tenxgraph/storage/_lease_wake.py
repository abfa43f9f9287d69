"""Wake-ups of runs waiting for a run lease, inside one process (no I/O).

A run queued for a thread's lease (``enqueue``, ``interrupt``, ``rollback``, a resume) should
try again as soon as the holder releases it, not at its next poll. A store that can tell this
process about releases (Postgres: a ``NOTIFY`` sent by the releasing statement, received by
one ``LISTEN`` connection per store and event loop) feeds them to a :class:`LeaseWakeups`;
each waiting run registers a :class:`LeaseWaiter` and sleeps on it until it is woken or its
own timeout passes (it then tries anyway: a lapsed holder sends no release, and a place in the
queue must be refreshed).

A release names the first run in line when it can see it; only that run is woken (one
attempt per release, not one per waiter: no thundering herd). When it cannot (the waiter
queued while the release ran), it names none and every run of this process waiting for that
thread is woken: each tries once, the first in line gets the lease.
"""

from __future__ import annotations

import asyncio
import time

import orjson

__all__ = ["LeaseWaiter", "LeaseWakeups"]


class LeaseWaiter:
    """One waiting run's registration (see :meth:`LeaseWakeups.waiter`).

    Attributes:
        thread_id: the thread whose lease the run waits for.
        holder: the run's holder id (its place in the queue).
        woken_at: ``time.monotonic()`` of the last wake-up not yet consumed by :meth:`wait`
            (``None``: none).
    """

    __slots__ = ("_event", "_hub", "holder", "thread_id", "woken_at")

    def __init__(self, hub: LeaseWakeups, thread_id: str, holder: str) -> None:
        self._hub = hub
        self.thread_id = thread_id
        self.holder = holder
        self._event = asyncio.Event()
        self.woken_at: float | None = None

    @property
    def live(self) -> bool:
        """Whether releases reach this process now (the listening connection is up)."""
        return self._hub.live

    def wake(self) -> None:
        """Wake the run (kept until its next :meth:`wait` when it is not waiting yet)."""
        if self.woken_at is None:
            self.woken_at = time.monotonic()
        self._event.set()

    async def wait(self, timeout_s: float) -> bool:
        """Sleep until woken or ``timeout_s`` seconds passed.

        Args:
            timeout_s: the longest sleep, seconds (``<= 0``: do not sleep).

        Returns:
            ``True`` when woken by a release (also one that came before this call).
        """
        if not self._event.is_set() and timeout_s > 0:
            try:
                await asyncio.wait_for(self._event.wait(), timeout_s)
            except TimeoutError:
                pass
        woken = self._event.is_set()
        self._event.clear()
        self.woken_at = None
        return woken

    def close(self) -> None:
        """Unregister (idempotent)."""
        self._hub.drop(self)


class LeaseWakeups:
    """The waiting runs of one store in one process (one event loop), by thread and holder.

    Attributes:
        live: the store's listening connection is up: a release reaches this process.
        received: release notifications received (all threads).
        woken: waiters woken by them.
    """

    def __init__(self) -> None:
        self._waiting: dict[str, dict[str, LeaseWaiter]] = {}
        self.live = False
        self.received = 0
        self.woken = 0

    def waiter(self, thread_id: str, holder: str) -> LeaseWaiter:
        """Register a run waiting for ``thread_id``'s lease as ``holder``; close it when the
        run stops waiting."""
        w = LeaseWaiter(self, thread_id, holder)
        self._waiting.setdefault(thread_id, {})[holder] = w
        return w

    def drop(self, w: LeaseWaiter) -> None:
        """Unregister ``w`` (no error when it is not registered)."""
        by_holder = self._waiting.get(w.thread_id)
        if by_holder is not None and by_holder.get(w.holder) is w:
            del by_holder[w.holder]
            if not by_holder:
                del self._waiting[w.thread_id]

    def dispatch(self, payload: str) -> None:
        """Handle one release notification: ``["<thread_id>", "<first in line>" | null]``
        (JSON). Wakes that run when it waits here, or every run of this process waiting for
        the thread when none is named. A payload of another shape is ignored."""
        self.received += 1
        try:
            thread_id, first = orjson.loads(payload)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return
        by_holder = self._waiting.get(thread_id) if isinstance(thread_id, str) else None
        if not by_holder:
            return
        if first is None:
            for w in list(by_holder.values()):
                w.wake()
                self.woken += 1
            return
        named = by_holder.get(first)
        if named is not None:
            named.wake()
            self.woken += 1

    def wake_all(self) -> None:
        """Wake every waiting run (the listening connection came up again or broke: a release
        may have been missed)."""
        for by_holder in list(self._waiting.values()):
            for w in list(by_holder.values()):
                w.wake()
