"""Thread writes over HTTP wait for the thread's run lease, as a run does.

Under the server's multitask strategy (``enqueue`` by default) a run holds its thread's lease
from its first read to its last write. A ``PUT .../state``, ``POST .../messages`` or a delete
made meanwhile would bump the thread's version under the run, whose next checkpoint is then
refused (``STORAGE_CONFLICT``) and its turn lost. So these routes take the lease first
(waiting in the same queue as runs, ``enqueue``), write, and release it: the running turn
finishes, then the write follows.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from tenxgraph.core._lease import RunLease
from tenxgraph.core.graph.compiled_graph import CompiledGraph

from ._context import ServerContext

__all__ = ["thread_write_lease"]


def _strategy(ctx: ServerContext, graph: CompiledGraph[Any], cfg: dict[str, Any]) -> str | None:
    return (
        cfg.get("multitask_strategy")
        or graph.checkpointer.multitask_strategy
        or ctx.default_strategy
    )


@contextlib.asynccontextmanager
async def thread_write_lease(ctx: ServerContext, cfg: dict[str, Any]) -> AsyncIterator[None]:
    """Hold the thread's run lease around a write (no lease without a strategy or a built-in
    store: the write then goes through the store's compare-and-swap alone).

    Args:
        ctx: the server context (its graph and default strategy).
        cfg: the write's config (``thread_id``, ``user_id``); not modified.

    Raises:
        ThreadBusyError: ``STORAGE_BUSY_001`` when the thread stays busy past the
            checkpointer's ``enqueue_timeout_s``; nothing was written.
        StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
    """
    graph = ctx.graph
    cp = graph.checkpointer
    if cp.store is None or _strategy(ctx, graph, cfg) is None:
        yield
        return
    lease_cfg = dict(cfg)
    lease = RunLease(cp, lease_cfg, cp.key_for(lease_cfg), f"http-write-{uuid.uuid4().hex}")
    await lease.take("enqueue", graph.state_class)
    try:
        yield
    finally:
        await lease.release()
