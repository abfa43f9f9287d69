"""Replay of the real trajectories bundled in ``tenxgraph/data/*.jsonl``, end to end, on
SQLite and Postgres: turns/s (``extra_info``), one conversation at a time and 8 at a time.
Every thread is compared with its recording afterwards (``mismatches`` must be 0)."""

from __future__ import annotations

import asyncio
import os

import pytest
from _replay import load, replay

LIMIT = 30


@pytest.fixture(scope="module")
def trajectories():
    return load(limit=LIMIT)


@pytest.mark.parametrize("concurrency", [1, 8])
@pytest.mark.parametrize("store", ["SQLite", "Postgres"])
def bench_replay(benchmark, request, workdir, trajectories, store: str, concurrency: int) -> None:
    from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer

    dsn = request.getfixturevalue("bench_db").dsn if store == "Postgres" else None

    async def one():
        if store == "SQLite":
            cp = SqliteCheckpointer(
                os.path.join(workdir, f"replay-{concurrency}-{os.getpid()}.sqlite")
            )
        else:
            cp = PgCheckpointer(dsn, schema=f"replay_{concurrency}", pool_config={"max_size": 20})
        await cp.asetup()
        try:
            return await replay(store, cp, trajectories, concurrency)
        finally:
            await cp.aclose()

    benchmark.group = "replay of recorded conversations"
    r = benchmark.pedantic(lambda: asyncio.run(one()), rounds=1, iterations=1)
    benchmark.extra_info.update(r.as_dict())
    assert r.mismatches == 0
