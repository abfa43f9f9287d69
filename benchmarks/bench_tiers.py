"""Latency of a state read from each storage tier, and of a store-level turn with and without
the cache tiers, side by side in one run.

Run::

    pytest benchmarks/bench_tiers.py --benchmark-only

Servers and clean-up come from ``benchmarks/conftest.py`` (``--bench-dsn``,
``--bench-redis-url``): a private database and Redis key prefix for the session, removed at
the end; skipped without Redis.

The thread holds 100 messages of about 200 characters (the benchmark graph of benchmarks/README.md).
Groups:

* ``read-raw``: one tier's ``get``/``read`` alone (encoded blobs);
* ``read-state``: the same, plus turning the messages into ``Message`` objects, as the
  checkpointer does: an LRU entry with decoded objects attached skips that work;
* ``read-layered``: ``LayeredStore.read`` as a run does it: warm LRU (plus the one-``GET``
  stamp check), cold LRU served by Redis, everything cold served by Postgres;
* ``turn``: read the latest version and write one new message (compare-and-swap), on the bare
  Postgres store and through LRU + Redis.

Every sample runs one coroutine on one event loop (``run_until_complete``); ``baseline`` is
that overhead alone, to subtract when comparing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tenxgraph.core.state import Message
from tenxgraph.records import CheckpointWrite, StoredCheckpoint, ThreadKey
from tenxgraph.storage import serde
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.redis import RedisCache

N_MESSAGES = 100
KEY = ThreadKey("bench-thread", "bench-user")


def _write(rec: StoredCheckpoint | None, key: ThreadKey, msgs: list[Message]) -> CheckpointWrite:
    ver = rec.version if rec else 0
    nxt = rec.next_seq if rec else 1
    start = rec.ranges[0][0] if rec and rec.ranges else nxt
    end = nxt + len(msgs)
    return CheckpointWrite(
        thread_id=key.thread_id,
        user_id=key.user_id,
        expected_version=ver,
        values=b'{"context_summary":null}',
        new_messages=[(nxt + i, serde.encode_message(m)) for i, m in enumerate(msgs)],
        ranges=((start, end),),
        next_seq=end,
        status="running",
        history_limit=20,
        created_at=time.time(),
    )


def _message(i: int) -> Message:
    text = f"message {i}: " + "lorem ipsum dolor sit amet " * 7
    return Message.text_message(text[:200], role="user" if i % 2 else "assistant")


class Bench:
    """The servers, stores and a 100-message thread, on one event loop."""

    def __init__(self, dsn: str, redis_url: str, prefix: str) -> None:
        from tenxgraph.storage.postgres import PostgresStore

        self.loop = asyncio.new_event_loop()
        self.pg = PostgresStore(dsn, schema="tiers")
        self.lru = LRUCache()
        self.redis = RedisCache(redis_url, prefix=prefix + "tiers:")
        self.layered = LayeredStore(self.pg, [self.lru, self.redis])
        self.messages = [_message(i) for i in range(N_MESSAGES)]
        self.run(self._setup())

    async def _setup(self) -> None:
        await self.pg.asetup()
        rec = await self.layered.write(_write(None, KEY, self.messages))
        await self.layered.attach_decoded(KEY, rec.version, (self.messages, len(self.messages)))
        self.record = await self.pg.read(KEY)
        assert self.record is not None and len(self.record.messages or ()) == N_MESSAGES
        await self.redis.put(self.record)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.run(self.layered.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def bench(bench_db: Any, redis_url: str | None, redis_prefix: str) -> Iterator[Bench]:
    """The stores over the session's private database and key prefix (dropped by conftest)."""
    if redis_url is None:
        pytest.skip("Redis not answering")
    b = Bench(bench_db.dsn, redis_url, redis_prefix)
    try:
        yield b
    finally:
        b.close()


def _state(rec: StoredCheckpoint | None) -> list[Message]:
    """What the checkpointer does with a record: decoded objects when attached, else decode."""
    assert rec is not None
    if rec.decoded is not None:
        objs, n = rec.decoded
        return objs[:n]
    return [serde.decode_message(b) for b in rec.messages or ()]


async def _nothing() -> None:
    return None


@pytest.mark.benchmark(group="baseline")
def bench_baseline_event_loop_round(benchmark, bench: Bench) -> None:
    benchmark(lambda: bench.run(_nothing()))


# ---------------------------------------------------------------------- one tier alone


@pytest.mark.benchmark(group="read-raw")
def bench_raw_lru_get(benchmark, bench: Bench) -> None:
    rec = benchmark(lambda: bench.run(bench.lru.get(KEY)))
    assert rec is not None and rec.version == 1


@pytest.mark.benchmark(group="read-raw")
def bench_raw_redis_get(benchmark, bench: Bench) -> None:
    rec = benchmark(lambda: bench.run(bench.redis.get(KEY)))
    assert rec is not None and len(rec.messages) == N_MESSAGES


@pytest.mark.benchmark(group="read-raw")
def bench_raw_postgres_read(benchmark, bench: Bench) -> None:
    rec = benchmark(lambda: bench.run(bench.pg.read(KEY)))
    assert rec is not None and len(rec.messages) == N_MESSAGES


@pytest.mark.benchmark(group="read-state")
def bench_state_lru_with_decoded(benchmark, bench: Bench) -> None:
    async def once() -> list[Message]:
        return _state(await bench.lru.get(KEY))

    assert len(benchmark(lambda: bench.run(once()))) == N_MESSAGES


@pytest.mark.benchmark(group="read-state")
def bench_state_redis_and_decode(benchmark, bench: Bench) -> None:
    async def once() -> list[Message]:
        return _state(await bench.redis.get(KEY))

    assert len(benchmark(lambda: bench.run(once()))) == N_MESSAGES


@pytest.mark.benchmark(group="read-state")
def bench_state_postgres_and_decode(benchmark, bench: Bench) -> None:
    async def once() -> list[Message]:
        return _state(await bench.pg.read(KEY))

    assert len(benchmark(lambda: bench.run(once()))) == N_MESSAGES


# ---------------------------------------------------------------------- the layered paths


@pytest.mark.benchmark(group="read-layered")
def bench_layered_warm_lru_plus_stamp(benchmark, bench: Bench) -> None:
    rec = benchmark(lambda: bench.run(bench.layered.read(KEY)))
    assert rec is not None and rec.decoded is not None


@pytest.mark.benchmark(group="read-layered")
def bench_layered_cold_lru_redis_hit(benchmark, bench: Bench) -> None:
    async def once() -> StoredCheckpoint | None:
        await bench.lru.invalidate(KEY)
        return await bench.layered.read(KEY)

    rec = benchmark(lambda: bench.run(once()))
    assert rec is not None and len(rec.messages) == N_MESSAGES


@pytest.mark.benchmark(group="read-layered")
def bench_layered_all_cold_postgres(benchmark, bench: Bench) -> None:
    async def once() -> StoredCheckpoint | None:
        await bench.lru.invalidate(KEY)
        await bench.redis.invalidate(KEY)
        return await bench.layered.read(KEY)

    rec = benchmark(lambda: bench.run(once()))
    assert rec is not None and len(rec.messages) == N_MESSAGES


# ---------------------------------------------------------------------- a turn


def _turn(store: Any, key: ThreadKey) -> Any:
    async def once() -> StoredCheckpoint:
        rec = await store.read(key)
        return await store.write(_write(rec, key, [_message(rec.next_seq)]))

    return once


def _fresh_thread(bench: Bench, store: Any) -> ThreadKey:
    key = ThreadKey(f"turn-{uuid.uuid4().hex[:8]}", "bench-user")
    bench.run(store.write(_write(None, key, bench.messages)))
    return key


@pytest.mark.benchmark(group="turn")
def bench_turn_postgres_only(benchmark, bench: Bench) -> None:
    key = _fresh_thread(bench, bench.pg)
    rec = benchmark(lambda: bench.run(_turn(bench.pg, key)()))
    assert rec.version > 1


@pytest.mark.benchmark(group="turn")
def bench_turn_lru_redis_postgres(benchmark, bench: Bench) -> None:
    key = _fresh_thread(bench, bench.layered)
    rec = benchmark(lambda: bench.run(_turn(bench.layered, key)()))
    assert rec.version > 1
