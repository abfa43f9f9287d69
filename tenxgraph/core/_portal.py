"""The only bridge from sync to async.

Every sync method of tenxgraph (``invoke``, ``stream``, ``setup``, ``get_state`` ...) is one line
through :func:`run_sync`, which runs the async twin on ONE process-wide event loop held by an
anyio blocking portal (asyncio backend, because psycopg's async driver needs asyncio). Using one
loop for every sync call means a connection pool opened by a sync ``setup()`` is still on the
right loop for a later sync ``invoke()``. The portal starts lazily and stops at interpreter exit.

Called on a thread that is running an event loop, a sync method refuses with
``GraphError(GRAPH_007)`` naming the ``await`` to use instead (as LangGraph's Postgres saver does).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager
from typing import Any, TypeVar, cast

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal

from .exceptions import SyncInEventLoopError

__all__ = ["ensure_no_running_loop", "iterate_sync", "run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_portal: BlockingPortal | None = None
_portal_cm: AbstractContextManager[BlockingPortal] | None = None


def _in_event_loop() -> bool:
    try:
        anyio.get_current_task()
    except Exception:  # noqa: BLE001 - no async library running on this thread
        pass
    else:
        return True
    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def ensure_no_running_loop(sync_name: str, async_name: str) -> None:
    """Raise ``SyncInEventLoopError(GRAPH_007)`` (a ``GraphError`` and a ``RuntimeError``, as
    10xGraph's reference page says) when called on a thread running an event loop.

    Args:
        sync_name: the sync method called, e.g. ``"invoke"``.
        async_name: its async twin, e.g. ``"ainvoke"``.
    """
    if _in_event_loop() or getattr(_portal_thread, "active", False):
        raise SyncInEventLoopError(
            f"{sync_name}() was called inside a running event loop; use 'await "
            f"{async_name}(...)' instead",
            error_code="GRAPH_007",
            context={"method": sync_name, "use": async_name},
        )


_portal_thread = threading.local()


def _reset_after_fork() -> None:
    """In a forked child the portal's thread does not exist: start a new portal on first use
    (gunicorn --preload, Celery and multiprocessing's fork start method fork after imports)."""
    global _lock, _portal, _portal_cm
    # Keep the parent's portal objects referenced forever: collecting its context manager
    # would run its exit, which waits for a thread that does not exist in this process.
    _orphans.append((_portal, _portal_cm))
    _lock = threading.Lock()
    _portal = None
    _portal_cm = None


_orphans: list[tuple[Any, Any]] = []


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _get_portal() -> BlockingPortal:
    global _portal, _portal_cm
    with _lock:
        if _portal is None:
            _portal_cm = start_blocking_portal(backend="asyncio")
            portal = _portal = _portal_cm.__enter__()
            portal.call(_mark_portal_thread)
            atexit.register(_shutdown)
            return portal
        return _portal


async def _mark_portal_thread() -> None:
    _portal_thread.active = True


def _shutdown() -> None:
    global _portal, _portal_cm
    with _lock:
        cm, _portal, _portal_cm = _portal_cm, None, None
    if cm is not None:
        try:
            cm.__exit__(None, None, None)
        except Exception:  # noqa: BLE001 - interpreter is exiting
            pass


def run_sync(
    func: Callable[..., Coroutine[Any, Any, T]],
    *args: Any,
    sync_name: str,
    async_name: str,
    **kwargs: Any,
) -> T:
    """Run ``await func(*args, **kwargs)`` on the shared portal loop and return its result.

    Raises:
        GraphError: ``GRAPH_007`` when called inside a running event loop.
        Whatever ``func`` raises, unchanged.
    """
    ensure_no_running_loop(sync_name, async_name)
    portal = _get_portal()
    ok, value = portal.call(_guarded, func, args, kwargs)
    if not ok:
        raise value
    return cast(T, value)  # ok: value is what ``await func(...)`` returned


async def _guarded(
    func: Callable[..., Awaitable[T]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[bool, Any]:
    """Run ``func`` on the portal loop, handing any exception back to the calling thread as a
    value: a ``BaseException`` (``KeyboardInterrupt``, ``SystemExit``...) escaping into the
    portal's task group would otherwise stop the one shared loop for every later sync call."""
    try:
        return True, await func(*args, **kwargs)
    except anyio.get_cancelled_exc_class():
        raise
    except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
        return False, exc


def iterate_sync(
    agen_factory: Callable[[], AsyncIterator[T]], *, sync_name: str, async_name: str
) -> Iterator[T]:
    """Iterate an async iterator from sync code, one item per portal call.

    The async iterator is closed (``aclose``) when the sync iterator is closed or garbage
    collected early.
    """
    ensure_no_running_loop(sync_name, async_name)
    portal = _get_portal()
    agen = portal.call(_make, agen_factory)
    try:
        while True:
            ok, item = portal.call(_guarded, agen.__anext__, (), {})
            if not ok:
                if isinstance(item, StopAsyncIteration):
                    return
                raise item
            yield item
    finally:
        aclose = getattr(agen, "aclose", None)
        if aclose is not None:
            try:
                portal.call(aclose)
            except Exception:  # noqa: BLE001 - best effort on early exit
                pass


async def _make(factory: Callable[[], AsyncIterator[T]]) -> AsyncIterator[T]:
    return factory()
