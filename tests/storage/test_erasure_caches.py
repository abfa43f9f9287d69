"""Erasure and the cache tiers: no write-back brings an erased thread back into Redis (the
erasure marker, on a single Redis and on a Redis Cluster, where the marker must share the
thread's slot), and an unreachable Redis is reported as pending and cleaned on its return."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis as redis_sync
from redis.cluster import RedisCluster as SyncCluster
from test_layered import texts_of, turn

from tenxgraph.records import ThreadKey
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.postgres import PostgresStore
from tenxgraph.storage.redis import RedisCache

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["single", "cluster"])
async def stack(
    request: pytest.FixtureRequest, pg_dsn: str, pg_schema: str
) -> AsyncIterator[tuple[LayeredStore, RedisCache, Any]]:
    if request.param == "single":
        url, prefix = request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")
        raw: Any = redis_sync.Redis.from_url(url)
        tier = RedisCache(url, prefix=prefix)
    else:
        url = request.getfixturevalue("redis_cluster_url")
        prefix = request.getfixturevalue("redis_cluster_prefix")
        raw = SyncCluster.from_url(url)
        tier = RedisCache(url, prefix=prefix, cluster=True)
    store = LayeredStore(PostgresStore(pg_dsn, schema=pg_schema), caches=[LRUCache(), tier])
    await store.asetup()
    try:
        yield store, tier, raw
    finally:
        await store.aclose()
        raw.close()


async def test_a_late_write_back_cannot_bring_an_erased_thread_back(
    stack: tuple[LayeredStore, RedisCache, Any],
) -> None:
    store, tier, raw = stack
    key = ThreadKey(f"t{uuid.uuid4().hex[:8]}", "mallory")
    await turn(store, key, "one")
    await turn(store, key, "two")
    await store.aflush()
    meta = tier.keys(key.thread_id)[0]
    assert raw.exists(meta)
    # What another instance read before the erasure, and would write back after it.
    copy = await store.source.read(key)
    assert copy is not None and texts_of(copy) == ["one", "two"]

    removed = await store.erase_owner("mallory", by_owner=True)

    assert removed.thread_ids == (key.thread_id,)
    assert removed.caches == {"lru": 1, "redis": 1} and removed.pending == ()
    assert not raw.exists(meta)
    assert await tier.put(copy) is True  # a full read fill, as another instance sends it
    assert not any(raw.exists(k) for k in tier.keys(key.thread_id))
    assert await tier.get(key) is None
    # The marker holds no data and does not name the thread.
    markers = [k for k in raw.scan_iter(match=tier.prefix + "*")]
    assert markers and all(key.thread_id.encode() not in k for k in markers)
    assert all(raw.get(k) == b"1" for k in markers)


async def test_an_unreachable_redis_is_reported_and_cleaned_when_back(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    tier = RedisCache(redis_url, prefix=redis_prefix)
    store = LayeredStore(PostgresStore(pg_dsn, schema=pg_schema), caches=[LRUCache(), tier])
    await store.asetup()
    raw = redis_sync.Redis.from_url(redis_url)
    try:
        key = ThreadKey("down", "oscar")
        await turn(store, key, "one")
        await store.aflush()
        assert raw.exists(tier.keys("down")[0])
        tier._down_until = float("inf")  # backing off, as after a connection failure

        removed = await store.erase_owner("oscar", by_owner=True)

        assert removed.thread_ids == ("down",)
        assert removed.pending == ("redis",)
        assert removed.rows["threads"] == 1
        tier._down_until = 0.0  # Redis answers again: the next call deletes what is owed
        assert await tier.get(ThreadKey("other", "oscar")) is None
        assert not raw.exists(tier.keys("down")[0])
    finally:
        raw.close()
        await store.aclose()
