"""Bounded memory: what the checkpointer facade and its tiers keep per thread is bounded (tied
to the LRU's size) and released by ``aclose()``, however many threads one process touches.

20,000 one-step runs on distinct threads through one checkpointer; after a garbage collection,
the process's resident memory (RSS) stays within a few MB of its value after the first 1,000,
and the number of live Python memory blocks (``sys.getallocatedblocks()``) grows by less than
one block per thread, so even a small per-thread leak fails (the leak this replaces kept about
6.7 MB per 1,000 threads). tracemalloc would measure bytes too but makes each run about four
times slower, too slow for 20,000 runs on a shared 2-core machine.

Postgres keeps the data in the server. On the memory store the threads' own data is deleted from the source of truth behind the
facade's back as the runs go (it is the data, not a leak); SQLite keeps its data in its file
(its page cache is bounded). The LRU and the facade keep what they keep.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer.base import SEEN_MAX_THREADS
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio

RUNS = int(os.environ.get("TENXGRAPH_MEMORY_RUNS", "20000"))
WARMUP = 1_000
SLACK_BYTES = 6 * 2**20
#: Runs in flight at once (distinct threads), to keep the wall time down on a shared machine.
WORKERS = 8


def _app(cp: Any) -> Any:
    async def hello(state: Any) -> str:
        return "hello"

    g = StateGraph()
    g.add_node("hello", hello)
    g.set_entry_point("hello")
    g.add_edge("hello", END)
    return g.compile(checkpointer=cp)


def _retained() -> tuple[int, int]:
    """``(resident bytes, live Python memory blocks)`` after a full collection."""
    gc.collect()
    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    return rss_pages * os.sysconf("SC_PAGE_SIZE"), sys.getallocatedblocks()


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def test_memory_stays_flat_over_20000_threads(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "memory":
        cp: Any = InMemoryCheckpointer()
    elif kind == "sqlite":
        cp = SqliteCheckpointer(str(tmp_path / "bounded.db"))
    else:
        from tenxgraph.storage.checkpointer import PgCheckpointer

        dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
        # No WAL flush wait per commit: changes nothing a client can observe, only what
        # survives a server crash.
        fast = {"kwargs": {"options": "-c synchronous_commit=off"}, "max_size": WORKERS}
        cp = PgCheckpointer(dsn, schema=schema, pool_config=fast)
    app = _app(cp)
    source = cp.store.source
    msg = Message.text_message("hi")

    async def runs(lo: int, hi: int) -> None:
        async def worker(w: int) -> None:
            for i in range(lo + w, hi, WORKERS):
                cfg = {"thread_id": f"mem-{i}", "user_id": "u"}
                await app.ainvoke({"messages": [msg.model_copy(update={"message_id": f"m{i}"})]}, cfg)
                if kind == "memory":
                    await source.delete_thread(cp.key_for(cfg))

        async with anyio.create_task_group() as tg:
            for w in range(WORKERS):
                tg.start_soon(worker, w)

    await runs(0, WARMUP)
    rss0, blocks0 = _retained()
    await runs(WARMUP, RUNS)
    rss1, blocks1 = _retained()
    assert rss1 - rss0 < SLACK_BYTES, f"resident memory grew by {(rss1 - rss0) / 2**20:.1f} MB"
    assert blocks1 - blocks0 < (RUNS - WARMUP) // 2, f"{blocks1 - blocks0} more live blocks"
    assert len(cp._seen) <= SEEN_MAX_THREADS
    await cp.aclose()
    assert len(cp._seen) == 0
