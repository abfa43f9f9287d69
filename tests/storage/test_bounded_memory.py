"""Bounded memory: what the checkpointer facade and its tiers keep per thread is bounded (tied
to the LRU's size) and released by ``aclose()``, however many threads one process touches.

20,000 one-step runs on distinct threads through one checkpointer; after a garbage collection,
the process's resident memory (RSS) stays within a few MB of its value after the first 1,000,
and the number of live Python memory blocks (``sys.getallocatedblocks()``) grows by less than
one block per thread, so even a small per-thread leak fails (the leak this replaces kept about
6.7 MB per 1,000 threads). tracemalloc would measure bytes too but makes each run about four
times slower, too slow for 20,000 runs on a shared 2-core machine.

The runs happen in a fresh interpreter: a test process may hold global state that grows with
every run by design (an in-memory span exporter installed by the telemetry tests keeps every
span), which would hide what the checkpointer itself keeps.

Postgres keeps the data in the server. On the memory store the threads' own data is deleted
from the source of truth behind the facade's back as the runs go (it is the data, not a leak);
SQLite keeps its data in its file (its page cache is bounded). The LRU and the facade keep what
they keep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tenxgraph

RUNS = int(os.environ.get("TENXGRAPH_MEMORY_RUNS", "20000"))
WARMUP = 1_000
SLACK_BYTES = 6 * 2**20
#: Runs in flight at once (distinct threads), to keep the wall time down on a shared machine.
WORKERS = 8

_CHILD = r"""
import asyncio, gc, json, os, sys

import anyio

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.storage.checkpointer.base import SEEN_MAX_THREADS
from tenxgraph.utils import END

kind, where, schema, runs_n, warmup, workers = sys.argv[1:7]
runs_n, warmup, workers = int(runs_n), int(warmup), int(workers)


def retained():
    gc.collect()
    with open("/proc/self/statm") as f:
        rss_pages = int(f.read().split()[1])
    return rss_pages * os.sysconf("SC_PAGE_SIZE"), sys.getallocatedblocks()


async def main():
    if kind == "memory":
        cp = InMemoryCheckpointer()
    elif kind == "sqlite":
        cp = SqliteCheckpointer(where)
    else:
        from tenxgraph.storage.checkpointer import PgCheckpointer

        # No WAL flush wait per commit: changes nothing a client can observe, only what
        # survives a server crash.
        fast = {"kwargs": {"options": "-c synchronous_commit=off"}, "max_size": workers}
        cp = PgCheckpointer(where, schema=schema, pool_config=fast)

    async def hello(state):
        return "hello"

    g = StateGraph()
    g.add_node("hello", hello)
    g.set_entry_point("hello")
    g.add_edge("hello", END)
    app = g.compile(checkpointer=cp)
    source = cp.store.source
    msg = Message.text_message("hi")

    async def runs(lo, hi):
        async def worker(w):
            for i in range(lo + w, hi, workers):
                cfg = {"thread_id": f"mem-{i}", "user_id": "u"}
                await app.ainvoke({"messages": [msg.model_copy(update={"message_id": f"m{i}"})]}, cfg)
                if kind == "memory":
                    await source.delete_thread(cp.key_for(cfg))

        async with anyio.create_task_group() as tg:
            for w in range(workers):
                tg.start_soon(worker, w)

    await runs(0, warmup)
    rss0, blocks0 = retained()
    await runs(warmup, runs_n)
    rss1, blocks1 = retained()
    seen = len(cp._seen)
    await cp.aclose()
    print(json.dumps({"rss": rss1 - rss0, "blocks": blocks1 - blocks0, "seen": seen,
                      "seen_max": SEEN_MAX_THREADS, "seen_after_close": len(cp._seen)}))


asyncio.run(main())
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_memory_stays_flat_over_20000_threads(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where, schema = str(tmp_path / "bounded.db"), ""
    if kind == "postgres":
        where, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    repo = Path(tenxgraph.__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(repo)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, where, schema, str(RUNS), str(WARMUP), str(WORKERS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["rss"] < SLACK_BYTES, f"resident memory grew by {got['rss'] / 2**20:.1f} MB"
    assert got["blocks"] < (RUNS - WARMUP) // 2, f"{got['blocks']} more live blocks"
    assert got["seen"] <= got["seen_max"]
    assert got["seen_after_close"] == 0
