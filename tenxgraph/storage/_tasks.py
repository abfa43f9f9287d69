"""Background tasks of the storage tiers that must neither die early nor keep their owner alive.

asyncio keeps only a weak reference to a task, so a guard task (one that waits for its event
loop to shut down and then closes a pool or a client there) must be referenced elsewhere; and a
task created with the caller's context would keep the caller's run, hence the checkpointer that
owns the guard, alive forever. ``start_guard`` does both right; ``cancel_guards`` is the
finalizer of an owner collected without ``aclose()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Coroutine, Mapping
from typing import Any

__all__ = ["cancel_guards", "keep_task", "start_guard"]

_LIVE_TASKS: set[asyncio.Task[Any]] = set()


def keep_task(task: asyncio.Task[Any]) -> asyncio.Task[Any]:
    """Keep ``task`` referenced until it is done; return it."""
    _LIVE_TASKS.add(task)
    task.add_done_callback(_LIVE_TASKS.discard)
    return task


def start_guard(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, None], name: str
) -> asyncio.Task[None]:
    """Start ``coro`` on ``loop`` in an empty context and keep the task referenced.

    Args:
        loop: the running event loop.
        coro: the guard coroutine (waits until cancelled, then releases its resource).
        name: the task's name (shown by asyncio's debug output).

    Returns:
        The task.
    """
    task = loop.create_task(coro, name=name, context=contextvars.Context())
    keep_task(task)
    return task


def cancel_guards(guards: Mapping[asyncio.AbstractEventLoop, Any]) -> None:
    """Finalizer of an owner collected without ``aclose()``: cancel each loop's guard on its own
    loop (thread-safe), so it releases its resource there now.

    Args:
        guards: event loop -> guard task, or an object whose ``guard`` attribute is the task.
    """
    for loop, item in list(guards.items()):
        task = getattr(item, "guard", item)
        if task is None or task.done() or loop.is_closed():
            continue
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(task.cancel)
