"""The Redis cache tier (``tenxgraph.storage.redis.RedisCache``) against a real Redis server.

Most tests use the shared test server (``redis_url``) with a key prefix of their own, and run
again on the three-master Redis Cluster (``[cluster]``, see ``_redis_topology``). Tests that
stop or pause Redis start a dedicated ``redis-server`` on a free port, so they never disturb
other tests.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import AsyncIterator, Iterator

import anyio
import orjson
import pytest
import redis
import redis.asyncio as aioredis
from _dedicated_redis import DedicatedRedis, _free_port
from _redis_topology import (  # noqa: F401 - fixtures and the parametrizing hook
    pytest_generate_tests,
    redis_cluster_flag_fixture,
    redis_prefix_fixture,
    sync_client,
)
from opentelemetry import trace
from redis.crc import key_slot

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.records import StoredCheckpoint, ThreadKey, expand_ranges
from tenxgraph.storage.base import CacheTier
from tenxgraph.storage.redis import RedisCache

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

KEY = ThreadKey("t1", "alice")


def blob(seq: int, size: int = 20) -> bytes:
    return orjson.dumps({"message_id": f"m{seq}", "text": "x" * size})


def record(
    version: int,
    ranges: tuple[tuple[int, int], ...],
    *,
    messages: bool = True,
    key: ThreadKey = KEY,
    created_at: float | None = None,
) -> StoredCheckpoint:
    seqs = expand_ranges(ranges)
    return StoredCheckpoint(
        thread_id=key.thread_id,
        user_id=key.user_id,
        version=version,
        values=orjson.dumps({"version": version}),
        ranges=ranges,
        messages=[blob(s) for s in seqs] if messages else None,
        next_seq=(max(seqs) + 1) if seqs else 1,
        status="running",
        created_at=created_at if created_at is not None else 1_700_000_000.0 + version,
    )


def cache_is_cluster(cache: RedisCache) -> bool:
    return not hasattr(cache._client, "connection_pool")


def rows(*seqs: int) -> list[tuple[int, bytes]]:
    return [(s, blob(s)) for s in seqs]


class CountingRedis(aioredis.Redis):
    """A real redis-py asyncio client that records every command it sends."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands: list[tuple] = []

    async def execute_command(self, *args, **options):
        self.commands.append(args)
        return await super().execute_command(*args, **options)


@pytest.fixture
async def cache(
    redis_cluster_flag: tuple[str, bool], redis_prefix: str
) -> AsyncIterator[RedisCache]:
    url, cluster = redis_cluster_flag
    c = RedisCache(url, prefix=redis_prefix, ttl_s=600, cluster=cluster)
    yield c
    await c.aclose()


@pytest.fixture
def raw(redis_cluster_flag: tuple[str, bool]) -> Iterator[redis.Redis]:
    """A plain synchronous client for looking at (and corrupting) the keys."""
    client = sync_client(*redis_cluster_flag)
    yield client
    client.close()


@pytest.fixture
def dedicated(tmp_path) -> Iterator[DedicatedRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    srv = DedicatedRedis(str(tmp_path))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


# --------------------------------------------------------------------------- basics


async def test_is_a_cache_tier(cache: RedisCache) -> None:
    assert isinstance(cache, CacheTier)
    assert cache.name == "redis" and cache.shared is True


async def test_config_errors() -> None:
    with pytest.raises(ConfigError) as ei:
        RedisCache("redis://127.0.0.1:6379/0", prefix="app:{x}:")
    assert ei.value.error_code == "CONFIG_001"
    with pytest.raises(ConfigError):
        RedisCache()
    with pytest.raises(ConfigError):
        RedisCache("redis://127.0.0.1:6379/0", ttl_s=0)


async def test_round_trip_key_layout_and_ttl(
    cache: RedisCache, raw: redis.Redis, redis_prefix: str
) -> None:
    assert await cache.get(KEY) is None
    await cache.put(record(1, ((1, 4),)))
    rec = await cache.get(KEY)
    assert rec == record(1, ((1, 4),))
    assert rec.messages == [blob(1), blob(2), blob(3)]
    keys = sorted(k.decode() for k in raw.keys(redis_prefix + "*"))
    assert keys == [f"{redis_prefix}{{t1}}:{s}" for s in ("lens", "meta", "msgs")]
    # one hash tag per thread: every key of the thread lives in the slot of "t1"
    assert {key_slot(k.encode()) for k in keys} == {key_slot(b"t1")}
    if cache_is_cluster(cache):  # the cluster agrees (CLUSTER KEYSLOT), all on one master
        assert {raw.cluster_keyslot(k) for k in keys} == {key_slot(b"t1")}
        assert len({raw.get_node_from_key(k).name for k in keys}) == 1
    for k in keys:
        assert 0 < raw.ttl(k) <= 600
    meta = raw.hgetall(f"{redis_prefix}{{t1}}:meta")
    assert meta[b"owner"] != b"alice" and b"alice" not in b"".join(meta.values())  # digest only
    # the rows as one string, joined by commas, and their lengths beside it
    assert raw.get(f"{redis_prefix}{{t1}}:msgs") == b",".join(blob(s) for s in (1, 2, 3))
    assert raw.get(f"{redis_prefix}{{t1}}:lens") == b",".join(
        str(len(blob(s))).encode() for s in (1, 2, 3)
    )
    assert cache.stats()["hits"] == 1 and cache.stats()["misses"] == 1


async def test_hash_tag_with_braces_in_thread_id(cache: RedisCache) -> None:
    key = ThreadKey("a}b{c", "alice")
    await cache.put(record(1, ((1, 2),), key=key))
    assert (await cache.get(key)).messages == [blob(1)]
    assert len({key_slot(k.encode()) for k in cache.keys(key.thread_id)}) == 1
    if cache_is_cluster(cache):
        slots = {await cache._client.cluster_keyslot(k) for k in cache.keys(key.thread_id)}
        assert slots == {key_slot(cache.keys(key.thread_id)[0].encode())}
    assert await cache.get(ThreadKey("a", "alice")) is None


async def test_owner_scope_is_part_of_the_check(cache: RedisCache) -> None:
    await cache.put(record(1, ((1, 2),)))
    assert await cache.get(ThreadKey("t1", "mallory")) is None
    assert await cache.get(KEY) is not None
    await cache.invalidate(ThreadKey("t1", "mallory"))  # invalidation is for every owner
    assert await cache.get(KEY) is None


async def test_incremental_put_sends_only_new_rows(redis_url: str, redis_prefix: str) -> None:
    client = CountingRedis.from_url(redis_url)
    cache = RedisCache(client=client, prefix=redis_prefix)
    try:
        await cache.put(record(1, ((1, 51),)))
        client.commands.clear()
        await cache.put(record(2, ((1, 53),), messages=False), rows(51, 52))
        [cmd] = client.commands  # one round trip
        assert cmd[0] == "EVALSHA"
        # the rows, framed: seqs, lengths, rows joined by commas; then the base's created_at
        # and version
        seqs, lens, body, base, base_version = cmd[-7:-2]
        assert (seqs, body, base, base_version) == ("51,52", blob(51) + b"," + blob(52), "", 1)
        assert lens == f"{len(blob(51))},{len(blob(52))}".encode()
        assert sum(len(a) for a in cmd[1:] if isinstance(a, bytes | str)) < 600  # not O(n)
        client.commands.clear()
        rec = await cache.get(KEY)
        assert [c[0] for c in client.commands] == ["EVALSHA"]  # meta + messages in one trip
        assert rec.version == 2 and rec.messages == [blob(s) for s in range(1, 53)]
    finally:
        await cache.aclose()
        await client.aclose()


async def test_incremental_put_extends_only_the_same_checkpoint(
    cache: RedisCache, redis_prefix: str
) -> None:
    """A version number alone does not name a checkpoint (a deleted thread created anew
    counts from 1 again): rows are applied only on top of the copy created at the base's
    ``created_at``, and a complete record replaces a same-numbered copy of another time."""
    await cache.put(record(1, ((1, 3),), created_at=100.0))
    # the writer's version 1 was created at 200.0: Redis holds another thread's version 1,
    # which the rows do not extend (the caller sends the complete record instead)
    assert await cache.put(record(2, ((1, 4),), messages=False), rows(3), 200.0) is False
    held = await cache.get(KEY)
    assert held is not None and (held.version, held.created_at) == (1, 100.0)
    await cache.invalidate(KEY)
    await cache.put(record(1, ((1, 3),), created_at=200.0))
    assert await cache.put(record(2, ((1, 4),), messages=False), rows(3), 200.0) is True
    rec = await cache.get(KEY)
    assert rec is not None and rec.version == 2 and rec.messages == [blob(s) for s in (1, 2, 3)]
    # a read fill of the same version number created at another time replaces the copy
    await cache.put(record(2, ((1, 2),), created_at=300.0))
    rec = await cache.get(KEY)
    assert rec is not None and rec.created_at == 300.0 and rec.messages == [blob(1)]


async def test_incremental_put_on_another_version_drops_data(
    cache: RedisCache, raw, redis_prefix
) -> None:
    await cache.put(record(1, ((1, 3),)))
    # Redis holds 1, not 2: not applied (no round trip: this tier's hash chain is of 1)
    assert await cache.put(record(3, ((1, 4),), messages=False), rows(3)) is False
    assert (await cache.get(KEY)).version == 1
    # a chain that agrees but an entry that does not (another writer's): Redis drops it
    cache._chains["t1"].version = 2
    assert await cache.put(record(3, ((1, 4),), messages=False), rows(3)) is False
    assert await cache.get(KEY) is None
    assert not raw.exists(*(f"{redis_prefix}{{t1}}:{k}" for k in ("meta", "msgs", "lens")))
    # nothing cached at all: rows alone install nothing
    assert await cache.put(record(4, ((1, 5),), messages=False), rows(4)) is False
    assert await cache.get(KEY) is None
    # the rows of a thread's first version are the whole record
    key2 = ThreadKey("t2", "alice")
    await cache.put(record(1, ((1, 3),), messages=False, key=key2), rows(1, 2))
    assert (await cache.get(key2)).messages == [blob(1), blob(2)]


async def test_replaced_ranges_prune_rows(cache: RedisCache, raw, redis_prefix) -> None:
    await cache.put(record(1, ((1, 6),)))
    # not an append: the rows alone cannot be tagged, the caller sends the complete record
    assert await cache.put(record(2, ((9, 10), (2, 3), (5, 6)), messages=False), rows(9)) is False
    assert (await cache.get(KEY)).version == 1
    full = record(2, ((9, 10), (2, 3), (5, 6)))
    full.messages = [blob(9), blob(2), blob(5)]
    assert await cache.put(full) is True
    rec = await cache.get(KEY)
    assert rec.messages == [blob(9), blob(2), blob(5)] and rec.ranges == ((9, 10), (2, 3), (5, 6))
    # the list was rewritten: only the rows of the new ranges are left, in list order
    assert raw.get(f"{redis_prefix}{{t1}}:msgs") == b",".join([blob(9), blob(2), blob(5)])


async def test_never_goes_backwards(cache: RedisCache) -> None:
    await cache.put(record(1, ((1, 2),)))
    await cache.put(record(2, ((1, 3),), messages=False), rows(2))
    await cache.put(record(1, ((1, 2),)))  # a late read fill of an older version
    assert (await cache.get(KEY)).version == 2
    # a late write-through of an older version does not destroy the newer one either
    await cache.put(record(3, ((1, 4),), messages=False), rows(3))
    await cache.put(record(2, ((1, 3),), messages=False), rows(2))
    assert (await cache.get(KEY)).version == 3


async def test_framing_is_byte_exact(cache: RedisCache) -> None:
    odd = [
        b'{"a":",,,"}',
        b"{\x00,\n\r\n,}",
        b"{}",
        b'{"\xc3\xa9":"\xf0\x9f\x8e\x89"}',
        b"{" + b"," * 5000 + b"}",
    ]
    rec = record(1, ((1, 6),))
    rec.messages = list(odd)
    await cache.put(rec)
    assert (await cache.get(KEY)).messages == odd
    await cache.put(record(2, ((1, 7),), messages=False), [(6, b"{\x00}")])
    assert (await cache.get(KEY)).messages == [*odd, b"{\x00}"]


async def test_large_thread_round_trip(cache: RedisCache) -> None:
    n = 3000
    await cache.put(record(1, ((1, n + 1),)))
    await cache.put(record(2, ((1, n + 2),), messages=False), rows(n + 1))
    rec = await cache.get(KEY)
    assert (
        len(rec.messages) == n + 1
        and rec.messages[0] == blob(1)
        and rec.messages[-1] == blob(n + 1)
    )


# --------------------------------------------------------------------------- garbage


GARBAGE = {
    "meta is a string": lambda r, p: r.set(f"{p}{{t1}}:meta", b"garbage"),
    "meta without fields": lambda r, p: (
        r.delete(f"{p}{{t1}}:meta"),
        r.hset(f"{p}{{t1}}:meta", "x", 1),
    ),
    "version not a number": lambda r, p: r.hset(f"{p}{{t1}}:meta", "version", b"abc"),
    "ranges not json": lambda r, p: r.hset(f"{p}{{t1}}:meta", "ranges", b"[[1,"),
    "ranges beyond the rows": lambda r, p: r.hset(f"{p}{{t1}}:meta", "ranges", b"[[1,1000000000]]"),
    "a message row missing": lambda r, p: r.set(f"{p}{{t1}}:msgs", b",".join([blob(1), blob(2)])),
    "lengths do not frame the rows": lambda r, p: r.append(f"{p}{{t1}}:lens", b",1"),
    "lengths not numbers": lambda r, p: r.set(f"{p}{{t1}}:lens", b"a,b,c"),
    "lengths missing": lambda r, p: r.delete(f"{p}{{t1}}:lens"),
    "msgs is a list": lambda r, p: (r.delete(f"{p}{{t1}}:msgs"), r.rpush(f"{p}{{t1}}:msgs", b"x")),
    "lens is a hash": lambda r, p: (r.delete(f"{p}{{t1}}:lens"), r.hset(f"{p}{{t1}}:lens", "a", 1)),
    "a message blob garbage": lambda r, p: r.setrange(f"{p}{{t1}}:msgs", 0, b"\x00\xff"),
    "the previous layout": lambda r, p: (
        r.delete(f"{p}{{t1}}:msgs", f"{p}{{t1}}:lens"),
        r.hset(f"{p}{{t1}}:meta", "fmt", b"1"),
        r.hset(f"{p}{{t1}}:msgs", mapping={"1": blob(1), "2": blob(2), "3": blob(3)}),
    ),
    "values garbage": lambda r, p: r.hset(f"{p}{{t1}}:meta", "values", b"{not json"),
    "unknown layout": lambda r, p: r.hset(f"{p}{{t1}}:meta", "fmt", b"99"),
    "status not utf-8": lambda r, p: r.hset(f"{p}{{t1}}:meta", "status", b"\xff\xfe"),
}


@pytest.mark.parametrize("how", list(GARBAGE))
async def test_garbage_is_a_miss_with_a_warning(
    how, cache: RedisCache, raw, redis_prefix, caplog
) -> None:
    await cache.put(record(1, ((1, 4),)))
    GARBAGE[how](raw, redis_prefix)
    with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
        assert await cache.get(KEY) is None
    # structurally broken data is garbage; data that parses but was changed fails its MAC
    assert any(
        "unusable data" in r.getMessage() or "does not verify" in r.getMessage()
        for r in caplog.records
    ), how
    assert cache.stats()["garbage"] + cache.stats()["rejected"] >= 1
    # the broken keys are gone: the next fill repairs the entry
    await cache.put(record(1, ((1, 4),)))
    assert (await cache.get(KEY)).messages == [blob(1), blob(2), blob(3)]


# --------------------------------------------------------------------------- failures


async def test_redis_down_is_a_miss_never_an_error(caplog) -> None:
    url = f"redis://:s3cr3t-pw@127.0.0.1:{_free_port()}/0"  # nothing listens there
    cache = RedisCache(url, timeout_s=0.2, reconnect_backoff_s=30)
    try:
        with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
            assert await cache.get(KEY) is None
            await cache.put(record(1, ((1, 2),)))
            await cache.invalidate(KEY)
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "unavailable" in warnings[0]  # once per outage
        assert "s3cr3t" not in caplog.text and "***" in warnings[0]
        assert not cache.available  # backing off: the next calls do not touch the network
        t0 = time.perf_counter()
        for _ in range(100):
            assert await cache.get(KEY) is None
        assert time.perf_counter() - t0 < 0.1
        assert cache.stats()["dirty"] == 1  # the put and the invalidation are owed to Redis
    finally:
        await cache.aclose()


async def test_reconnects_after_restart(dedicated: DedicatedRedis, caplog) -> None:
    cache = RedisCache(dedicated.url, prefix="x:", timeout_s=0.25, reconnect_backoff_s=0.2)
    try:
        await cache.put(record(1, ((1, 2),)))
        assert await cache.get(KEY) is not None
        dedicated.stop()
        with caplog.at_level(logging.INFO, logger="tenxgraph.redis"):
            assert await cache.get(KEY) is None
            await cache.put(record(2, ((1, 3),), messages=False), rows(2))  # lost: owed
            dedicated.start()
            await anyio.sleep(0.25)
            assert await cache.get(KEY) is None  # a fresh server: empty
            await cache.put(record(2, ((1, 3),)))
            assert (await cache.get(KEY)).version == 2
        assert any("reachable again" in r.getMessage() for r in caplog.records)
        assert cache.stats()["dirty"] == 0
    finally:
        await cache.aclose()


async def test_idle_tier_reconnects_and_flushes_lost_threads(
    dedicated: DedicatedRedis,
) -> None:
    cache = RedisCache(dedicated.url, prefix="x:", timeout_s=0.2, reconnect_backoff_s=0.1)
    try:
        await cache.put(record(1, ((1, 2),)))
        assert cache.available
        dedicated.stop()
        await cache.put(record(2, ((1, 3),), messages=False), rows(2))  # lost: owed
        assert not cache.available and cache.stats()["dirty"] == 1
        dedicated.start()
        with dedicated.client() as raw:
            raw.hset("x:{t1}:meta", "version", b"1")  # stands for data Redis kept
        for _ in range(250):  # no call at all: the probe reconnects and flushes
            if not cache.stats()["dirty"]:
                break
            await anyio.sleep(0.02)
        assert cache.stats()["dirty"] == 0
        with dedicated.client() as raw:
            assert not raw.exists("x:{t1}:meta")
        assert cache.available and await cache.get(KEY) is None
    finally:
        await cache.aclose()


async def test_slow_redis_times_out_and_lost_writes_are_not_served_stale(
    dedicated: DedicatedRedis,
) -> None:
    """Past ``timeout_s`` a call is a miss; data Redis kept through the stall while a
    write-through was lost is deleted before it can be served."""
    cache = RedisCache(dedicated.url, prefix="x:", timeout_s=0.2, reconnect_backoff_s=0.1)
    try:
        await cache.put(record(1, ((1, 2),)))
        await cache.put(record(2, ((1, 3),), messages=False), rows(2))
        dedicated.pause(700)
        t0 = time.perf_counter()
        await cache.put(record(3, ((1, 4),), messages=False), rows(3))  # times out
        assert time.perf_counter() - t0 < 0.5
        assert cache.stats()["failures"] == 1 and cache.stats()["dirty"] == 1
        await anyio.sleep(0.8)  # the pause is over; Redis still holds version 2
        rec = await cache.get(KEY)
        assert rec is None  # not the stale version 2: the thread's keys were dropped first
    finally:
        await cache.aclose()


async def test_user_client_is_not_closed(redis_url: str, redis_prefix: str) -> None:
    client = aioredis.Redis.from_url(redis_url)
    cache = RedisCache(client=client, prefix=redis_prefix)
    await cache.put(record(1, ((1, 2),)))
    await cache.aclose()
    await cache.aclose()
    assert await client.ping()
    await client.aclose()


# --------------------------------------------------------------------------- telemetry


async def test_spans_and_failure_events(cache: RedisCache, span_exporter) -> None:
    await cache.put(record(1, ((1, 2),)))
    await cache.get(KEY)
    await cache.get(ThreadKey("t1", "mallory"))
    spans = [
        s
        for s in span_exporter.get_finished_spans()
        if s.attributes.get("tenxgraph.cache.tier") == "redis"
    ]
    assert [s.name for s in spans] == [
        "tenxgraph.checkpoint.write",
        "tenxgraph.checkpoint.read",
        "tenxgraph.checkpoint.read",
    ]
    for s in spans:
        assert s.kind == trace.SpanKind.CLIENT
        assert s.attributes["db.system.name"] == "redis"
        if not cache_is_cluster(cache):  # a cluster call goes to the master of its slot
            assert s.attributes["server.port"] == 6379
        assert "db.system" not in s.attributes and "db.statement" not in s.attributes
    assert spans[1].attributes["tenxgraph.cache.hit"] is True
    assert spans[1].attributes["tenxgraph.checkpoint.version"] == 1
    assert spans[2].attributes["tenxgraph.cache.hit"] is False
    assert "alice" not in str([dict(s.attributes) for s in spans])

    down = RedisCache(f"redis://127.0.0.1:{_free_port()}/0", timeout_s=0.2)
    try:
        await down.get(KEY)
    finally:
        await down.aclose()
    [failed] = [
        s
        for s in span_exporter.get_finished_spans()
        if s.attributes.get("server.port") == down._server_attrs["server.port"]
    ]
    assert [e.name for e in failed.events] == ["tenxgraph.cache.failure"]
    assert failed.events[0].attributes["tenxgraph.cache.tier"] == "redis"


@pytest.fixture
def span_exporter():
    """Finished spans of this test (installs an SDK tracer provider once per process)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


async def test_merged_rows_of_several_versions_apply_on_their_base(cache: RedisCache) -> None:
    """A merged write-through (versions 2 and 3 in one call) applies on top of version 1 when
    it appends; one that does not append (rows a later step dropped again) cannot be tagged
    from its rows alone: refused without a round trip, the complete record goes instead."""
    await cache.put(record(1, ((1, 6),)))
    assert await cache.put(record(3, ((1, 8),), messages=False), rows(6, 7), base_version=1)
    got = await cache.get(KEY)
    assert got is not None and got.version == 3 and got.messages == [blob(s) for s in range(1, 8)]
    # v4 appended seq 8, v5 dropped 1, 3-5 and 8 again and added 9: not an append
    assert not await cache.put(
        record(5, ((2, 3), (6, 8), (9, 10)), messages=False), rows(8, 9), base_version=3
    )
    assert (await cache.get(KEY)).version == 3
    full = record(5, ((2, 3), (6, 8), (9, 10)))
    assert await cache.put(full)
    # appending on top of the complete record
    assert await cache.put(record(6, ((2, 3), (6, 8), (9, 11)), messages=False), rows(10))
    got = await cache.get(KEY)
    assert got is not None and got.messages == [blob(s) for s in (2, 6, 7, 9, 10)]
    # a merged put naming a base the cache does not hold is refused; the copy is kept
    assert not await cache.put(
        record(9, ((2, 3), (6, 8), (9, 12)), messages=False), rows(11), base_version=7
    )
    assert (await cache.get(KEY)).version == 6
