"""Cheap event-loop primitives for the hot path, asyncio-native when asyncio runs.

anyio dispatches every primitive through ``sniffio.current_async_library()`` and its backend
object (~1-2 microseconds per call); on the step path that is paid several times per step.
These helpers test for asyncio directly and fall back to anyio under any other library (trio).
"""

from __future__ import annotations

import asyncio
from typing import Any

import sniffio
from anyio import lowlevel as _anyio_lowlevel

__all__ = ["asyncio_task", "checkpoint"]

_thread_local = sniffio.thread_local
_library_cvar = sniffio.current_async_library_cvar
_current_task = asyncio.current_task
_running_loop = asyncio._get_running_loop  # noqa: SLF001 - the C accessor (no exception)
_sleep = asyncio.sleep


def _not_asyncio() -> bool:
    """Whether sniffio names another library (trio sets it while it runs, trio-asyncio in
    its trio mode)."""
    name = _thread_local.name or _library_cvar.get()
    return name is not None and name != "asyncio"


def asyncio_task() -> asyncio.Task[Any] | None:
    """The running asyncio task, or ``None`` under another library (trio) or outside a task.

    Returns:
        ``asyncio.current_task()`` when asyncio runs this code, else ``None``.
    """
    if _not_asyncio() or _running_loop() is None:
        return None
    return _current_task()


async def checkpoint() -> None:
    """Yield to the event loop once, honouring cancellation, like
    ``anyio.lowlevel.checkpoint()`` (``asyncio.sleep(0)`` on asyncio, anyio's otherwise)."""
    if _not_asyncio() or _running_loop() is None:
        await _anyio_lowlevel.checkpoint()
    else:
        await _sleep(0)
