"""``LayeredStore`` (LRU -> Redis -> source of truth) against real Redis and real sources.

Every test runs over each source of truth: ``MemoryStore``, ``SqliteStore`` (a file) and
``PostgresStore`` (its own schema), and those using ``make_stack`` with a single Redis and a
Redis Cluster. Several ``LayeredStore`` objects over one source play
several application instances; multi-process tests use ``multiprocessing`` (spawn). Round
trips are counted with a counting ``StoreTier`` wrapper and a redis-py client subclass that
records the commands it sends: both talk to the real servers.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import shutil
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest
import redis
from _counting_redis import CountingRedis
from _dedicated_redis import DedicatedRedis
from _redis_topology import (  # noqa: F401 - fixtures and the parametrizing hook
    pytest_generate_tests,
    redis_cluster_flag_fixture,
    redis_prefix_fixture,
)
from opentelemetry import trace

from tenxgraph.core.exceptions import StaleStateError, StorageError
from tenxgraph.records import CheckpointWrite, LedgerEntry, StoredCheckpoint, ThreadKey
from tenxgraph.storage.base import StoreTier
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.redis import RedisCache

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

KEY = ThreadKey("thread-1", "alice")


# --------------------------------------------------------------------------- helpers


def blob(text: str) -> bytes:
    return orjson.dumps({"message_id": text, "role": "user", "text": text})


def texts_of(rec: StoredCheckpoint | None) -> list[str]:
    if rec is None:
        return []
    assert rec.messages is not None
    return [orjson.loads(b)["text"] for b in rec.messages]


def next_write(rec: StoredCheckpoint | None, key: ThreadKey, texts: list[str]) -> CheckpointWrite:
    """The facade's append-only write of ``texts`` on top of ``rec`` (no I/O)."""
    ver = rec.version if rec else 0
    nxt = rec.next_seq if rec else 1
    ranges = list(rec.ranges) if rec else []
    end = nxt + len(texts)
    if ranges and ranges[-1][1] == nxt:
        ranges[-1] = (ranges[-1][0], end)
    elif texts:
        ranges.append((nxt, end))
    return CheckpointWrite(
        thread_id=key.thread_id,
        user_id=key.user_id,
        expected_version=ver,
        values=orjson.dumps({"turns": ver + 1}),
        new_messages=[(nxt + i, blob(t)) for i, t in enumerate(texts)],
        ranges=tuple(ranges),
        next_seq=end,
        status="running",
        history_limit=None,
        created_at=time.time(),
    )


async def turn(store: StoreTier, key: ThreadKey, text: str) -> StoredCheckpoint:
    rec = await store.read(key)
    return await store.write(next_write(rec, key, [text]))


class CountingStore:
    """A real ``StoreTier`` that forwards to another and counts the calls it forwards."""

    def __init__(self, inner: StoreTier) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await attr(*args, **kwargs)

        return counted


class BrokenCache:
    """A cache tier whose every call raises (a bug in a third-party tier)."""

    name = "broken"
    shared = False

    async def get(self, key: ThreadKey) -> StoredCheckpoint | None:
        raise RuntimeError("boom")

    async def put(self, record: StoredCheckpoint, new_messages: Any = None) -> None:
        raise RuntimeError("boom")

    async def invalidate(self, key: ThreadKey) -> None:
        raise RuntimeError("boom")

    async def aclose(self) -> None:
        raise RuntimeError("boom")


@dataclass
class Backend:
    """A source of truth under test; ``new()`` opens another store object over the same
    data (another application instance)."""

    kind: str
    new: Callable[[], StoreTier]
    spec: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(
    params=[
        pytest.param("memory"),
        pytest.param("sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
async def backend(request: pytest.FixtureRequest, tmp_path) -> AsyncIterator[Backend]:
    kind = request.param
    opened: list[StoreTier] = []
    spec: dict[str, Any] = {"kind": kind}
    if kind == "memory":
        from tenxgraph.storage.memory import MemoryStore

        shared = MemoryStore()

        def new() -> StoreTier:
            return shared

    elif kind == "sqlite":
        from tenxgraph.storage.sqlite import SqliteStore

        spec["path"] = str(tmp_path / "store.db")

        def new() -> StoreTier:
            s = SqliteStore(spec["path"])
            opened.append(s)
            return s

    else:
        postgres = pytest.importorskip("tenxgraph.storage.postgres")
        spec["dsn"] = request.getfixturevalue("pg_dsn")
        spec["schema"] = request.getfixturevalue("pg_schema")

        def new() -> StoreTier:
            s = postgres.PostgresStore(spec["dsn"], schema=spec["schema"])
            opened.append(s)
            return s

    await new().asetup()
    try:
        yield Backend(kind, new, spec)
    finally:
        for s in opened:
            await s.aclose()


@pytest.fixture
async def make_stack(
    backend: Backend, redis_cluster_flag: tuple[str, bool], redis_prefix: str
) -> AsyncIterator[Callable[..., LayeredStore]]:
    """Build ``LayeredStore(LRU -> Redis -> source)`` instances; their caches are closed after
    the test (the sources by the ``backend`` fixture). The Redis is the single server or the
    Redis Cluster (``[single]`` / ``[cluster]``; tests that take ``redis_url`` themselves run
    on the single server only)."""
    redis_url, cluster = redis_cluster_flag
    made: list[LayeredStore] = []

    def make(
        *,
        redis_cache: RedisCache | None = None,
        lru: bool = True,
        redis_on: bool = True,
        source: StoreTier | None = None,
        validate: bool = True,
    ) -> LayeredStore:
        caches: list[Any] = [LRUCache()] if lru else []
        if redis_on:
            caches.append(
                redis_cache or RedisCache(redis_url, prefix=redis_prefix, cluster=cluster)
            )
        st = LayeredStore(source or backend.new(), caches, validate=validate)
        made.append(st)
        return st

    yield make
    for st in made:
        for c in st.caches:
            await c.aclose()


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


def redis_of(store: LayeredStore) -> RedisCache:
    return next(c for c in store.caches if isinstance(c, RedisCache))


def lru_of(store: LayeredStore) -> LRUCache:
    return next(c for c in store.caches if isinstance(c, LRUCache))


# --------------------------------------------------------------------------- read path


async def test_a_read_is_one_source_round_trip_however_warm(
    backend: Backend, make_stack, redis_url, redis_prefix
) -> None:
    """Cold: one source read (the same statement, without a copy). Warm (LRU): one conditional
    source read, no Redis. LRU cold, Redis warm: one Redis round trip, then one conditional
    source read."""
    source = backend.new()
    for i in range(3):  # written straight to the source: every cache is cold
        await source.write(next_write(await source.read(KEY), KEY, [f"m{i}"]))
    counting = CountingStore(backend.new())
    client = CountingRedis.from_url(redis_url)
    try:
        store = make_stack(
            source=counting, redis_cache=RedisCache(client=client, prefix=redis_prefix)
        )
        rec = await store.read(KEY)
        assert rec.version == 3 and texts_of(rec) == ["m0", "m1", "m2"]
        assert counting.calls == {"read_since": 1} and client.commands == ["EVALSHA"]
        assert (await lru_of(store).get(KEY)).version == 3  # filled on the way back
        await store.aflush()  # Redis is filled in the background
        assert (await redis_of(store).get(KEY)).version == 3

        counting.calls.clear()
        client.commands.clear()
        warm = await store.read(KEY)
        assert texts_of(warm) == ["m0", "m1", "m2"] and warm.version == 3
        assert counting.calls == {"read_since": 1}  # confirmed by the source
        assert client.commands == []  # Redis is not asked

        # a second instance with a cold LRU: one EVALSHA, then the source confirms the copy
        other = make_stack(
            source=counting, redis_cache=RedisCache(client=client, prefix=redis_prefix)
        )
        counting.calls.clear()
        assert (await other.read(KEY)).version == 3
        assert counting.calls == {"read_since": 1} and client.commands == ["EVALSHA"]
        assert other.stats()["cache_hits"] == 1
    finally:
        await client.aclose()


async def test_warm_read_without_redis_is_confirmed_by_the_source(
    backend: Backend, make_stack
) -> None:
    counting = CountingStore(backend.new())
    store = make_stack(source=counting, redis_on=False)
    await turn(store, KEY, "a")
    counting.calls.clear()
    assert texts_of(await store.read(KEY)) == ["a"]
    assert counting.calls == {"read_since": 1}  # one conditional read, nothing else
    trusting = make_stack(source=counting, redis_on=False, validate=False)
    await trusting.read(KEY)
    counting.calls.clear()
    assert texts_of(await trusting.read(KEY)) == ["a"]
    assert counting.calls == {}


async def test_versions_and_history_go_to_the_source(backend: Backend, make_stack) -> None:
    counting = CountingStore(backend.new())
    store = make_stack(source=counting)
    for t in "abc":
        await turn(store, KEY, t)
    counting.calls.clear()
    assert texts_of(await store.read(KEY, version=2)) == ["a", "b"]
    assert [r.version for r in await store.history(KEY)] == [3, 2, 1]
    assert await store.current_version(KEY) == 3
    assert counting.calls == {"read": 1, "history": 1, "current_version": 1}
    meta = await store.read(KEY, with_messages=False)
    assert meta.version == 3


async def test_other_owner_reads_nothing_through_the_caches(backend: Backend, make_stack) -> None:
    store = make_stack()
    await turn(store, KEY, "secret")
    assert await store.read(KEY) is not None
    mallory = ThreadKey(KEY.thread_id, "mallory")
    assert await store.read(mallory) is None
    assert await lru_of(store).get(mallory) is None and await redis_of(store).get(mallory) is None


# --------------------------------------------------------------------------- write path


async def test_write_through_is_incremental_and_off_the_step(
    backend: Backend, make_stack, redis_url, redis_prefix
) -> None:
    client = CountingRedis.from_url(redis_url)
    try:
        store = make_stack(redis_cache=RedisCache(client=client, prefix=redis_prefix))
        for i in range(5):
            await turn(store, KEY, f"m{i}")
        await store.aflush()
        client.commands.clear()
        rec = await turn(store, KEY, "m5")
        # the read is an LRU hit confirmed by the source, the write goes to the source: no
        # Redis command was sent, let alone waited for, during the turn
        assert client.commands == []
        assert (await lru_of(store).get(KEY)).version == rec.version == 6
        await store.aflush()  # the write-through: one EVALSHA carrying one message
        assert client.commands == ["EVALSHA"]
        cached = await redis_of(store).get(KEY)
        assert cached.version == 6 and texts_of(cached) == [f"m{i}" for i in range(6)]
    finally:
        await client.aclose()


async def test_attach_decoded(backend: Backend, make_stack) -> None:
    a, b = make_stack(), make_stack()
    rec = await turn(a, KEY, "x")
    objs = ["decoded-x"]
    assert await a.attach_decoded(KEY, rec.version, (objs, 1))
    warm = await a.read(KEY)
    assert warm.decoded == (objs, 1) and texts_of(warm) == ["x"]
    await turn(b, KEY, "y")  # another instance appends
    fresh = await a.read(KEY)
    # the source sent only the new row; the decoded objects still cover the first message
    assert fresh.version == 2 and texts_of(fresh) == ["x", "y"]
    if backend.kind != "sqlite":  # SQLite's read_since re-reads a changed thread whole
        assert fresh.decoded == (objs, 1)


async def test_conflict_invalidates_every_tier(
    backend: Backend, make_stack, redis_url, redis_prefix, span_exporter
) -> None:
    a, b = make_stack(), make_stack()
    await turn(a, KEY, "one")
    ra, rb = await a.read(KEY), await b.read(KEY)
    await a.write(next_write(ra, KEY, ["two-a"]))
    await a.aflush()  # a's write-through (mid-run: it lingers) lands before b's invalidation
    with trace.get_tracer("test").start_as_current_span("test-write"):
        with pytest.raises(StaleStateError) as ei:
            await b.write(next_write(rb, KEY, ["two-b"]))
    assert ei.value.error_code == "STORAGE_CONFLICT_000"
    assert ei.value.context["current_version"] == 2
    assert await lru_of(b).get(KEY) is None
    await b.aflush()  # Redis drops it in the background
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.keys(redis_prefix + "*") == []
    [parent] = [s for s in span_exporter.get_finished_spans() if s.name == "test-write"]
    assert "tenxgraph.cache.invalidated" in [e.name for e in parent.events]
    # recovery: call again; the next read sees the winner's state
    rec = await turn(b, KEY, "two-b")
    assert rec.version == 3 and texts_of(await a.read(KEY)) == ["one", "two-a", "two-b"]


async def test_forbidden_write_invalidates_and_raises(backend: Backend, make_stack) -> None:
    store = make_stack()
    await turn(store, KEY, "mine")
    mallory = ThreadKey(KEY.thread_id, "mallory")
    with pytest.raises(StorageError) as ei:
        await store.write(next_write(None, mallory, ["hers"]))
    assert ei.value.error_code == "STORAGE_FORBIDDEN_001"
    assert await lru_of(store).get(KEY) is None
    assert texts_of(await store.read(KEY)) == ["mine"]


async def test_delete_then_recreate_never_serves_the_old_thread(
    backend: Backend, make_stack
) -> None:
    a, b = make_stack(), make_stack()
    for t in ("old-1", "old-2"):
        await turn(a, KEY, t)
    assert texts_of(await a.read(KEY)) == ["old-1", "old-2"]  # a's LRU holds version 2
    assert await b.delete_thread(KEY) is True
    # the same owner re-creates the thread up to the same version number
    await turn(b, KEY, "new-1")
    await asyncio.sleep(0.002)
    await turn(b, KEY, "new-2")
    rec = await a.read(KEY)
    assert rec.version == 2 and texts_of(rec) == ["new-1", "new-2"]
    # and another owner re-creating it sees nothing of the old one
    assert await b.delete_thread(KEY) is True
    bob = ThreadKey(KEY.thread_id, "bob")
    await turn(b, bob, "bob-1")
    assert await a.read(KEY) is None
    assert texts_of(await a.read(bob)) == ["bob-1"]


async def test_delegates_everything_else(backend: Backend, make_stack) -> None:
    store = make_stack()
    await turn(store, KEY, "a")
    entry = LedgerEntry("ck", "call-1", "tool", b'{"r":1}', 1.0)
    assert await store.ledger_put(KEY, entry) == entry
    assert await store.ledger_get(KEY, "ck") == entry
    assert await store.ledger_count(KEY) == 1
    await store.set_stop(KEY, True)
    assert await store.get_stop(KEY) is True
    await store.set_thread_metadata(KEY, {"title": "t"})
    [info] = await store.list_threads("alice")
    assert info.thread_id == KEY.thread_id and info.metadata == {"title": "t"}
    assert isinstance(store, StoreTier) and store.name == "layered"
    assert "lru -> redis" in repr(store)


async def test_a_failing_cache_tier_never_fails_reads_or_writes(backend: Backend, caplog) -> None:
    store = LayeredStore(backend.new(), [BrokenCache(), LRUCache()])
    with caplog.at_level(logging.WARNING, logger="tenxgraph.storage"):
        for t in "abc":
            await turn(store, KEY, t)
        assert texts_of(await store.read(KEY)) == ["a", "b", "c"]
        a2 = LayeredStore(backend.new(), [BrokenCache()])
        with pytest.raises(StaleStateError):
            await a2.write(next_write(None, KEY, ["x"]))
    assert any("'broken' failed" in r.getMessage() for r in caplog.records)
    assert store.stats()["cache_failures"] > 0


# --------------------------------------------------------------------------- many instances


async def test_two_instances_taking_turns_never_conflict(backend: Backend, make_stack) -> None:
    for with_redis in (True, False):
        key = ThreadKey(f"alt-{with_redis}", "alice")
        a, b = make_stack(redis_on=with_redis), make_stack(redis_on=with_redis)
        texts: list[str] = []
        for i in range(30):
            st = (a, b)[i % 2]
            rec = await st.read(key)
            assert texts_of(rec) == texts and (rec.version if rec else 0) == i
            await st.write(next_write(rec, key, [f"t{i}"]))
            texts.append(f"t{i}")
        assert a.stats()["stale"] > 0  # each instance's LRU went stale and was not used


async def test_concurrent_writers_lose_no_update(backend: Backend, make_stack) -> None:
    writers, each = 4, 12
    stores = [make_stack() for _ in range(writers)]
    conflicts = Counter()

    async def writer(n: int) -> None:
        done = 0
        while done < each:
            rec = await stores[n].read(KEY)
            try:
                await stores[n].write(next_write(rec, KEY, [f"w{n}-{done}"]))
                done += 1
            except StaleStateError:
                conflicts[n] += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        for n in range(writers):
            tg.start_soon(writer, n)
    final = await backend.new().read(KEY)
    got = texts_of(final)
    assert final.version == writers * each
    assert sorted(got) == sorted(f"w{n}-{i}" for n in range(writers) for i in range(each))
    for n in range(writers):  # each writer's messages in its own order
        mine = [t for t in got if t.startswith(f"w{n}-")]
        assert mine == [f"w{n}-{i}" for i in range(each)]
    hist = await backend.new().history(KEY)
    assert [h.version for h in hist] == list(range(writers * each, 0, -1))
    for h in hist:  # every version is a prefix of the final list: nothing lost, nothing rewritten
        assert texts_of(h) == got[: h.version]
    # a fresh instance reads exactly the final state through the caches
    assert texts_of(await make_stack().read(KEY)) == got


def _alternate_worker(
    role: int,
    spec: dict[str, Any],
    redis_url: str,
    prefix: str,
    turns: int,
    mine: Any,
    theirs: Any,
    results: Any,
) -> None:
    """Child process: take every other turn on one thread through LRU + Redis + source."""
    asyncio.run(_alternate(role, spec, redis_url, prefix, turns, mine, theirs, results))


async def _alternate(role, spec, redis_url, prefix, turns, mine, theirs, results) -> None:
    if spec["kind"] == "sqlite":
        from tenxgraph.storage.sqlite import SqliteStore

        source = SqliteStore(spec["path"])
    else:
        from tenxgraph.storage.postgres import PostgresStore

        source = PostgresStore(spec["dsn"], schema=spec["schema"])
    store = LayeredStore(source, [LRUCache(), RedisCache(redis_url, prefix=prefix)])
    key = ThreadKey("two-procs", "alice")
    errors: list[str] = []
    stale = 0
    try:
        for k in range(turns):
            await anyio.to_thread.run_sync(mine.get, True, 120)
            expected = 2 * k + role
            try:
                rec = await store.read(key)
                got = rec.version if rec else 0
                if got != expected or len(rec.messages if rec else []) != expected:
                    errors.append(f"turn {expected}: read version {got}")
                await store.write(next_write(rec, key, [f"{'AB'[role]}-{expected + 1}"]))
            except StaleStateError as exc:
                stale += 1
                errors.append(f"turn {expected}: {exc}")
            except Exception as exc:
                errors.append(f"turn {expected}: {exc!r}")
            finally:
                theirs.put(expected + 1)
    finally:
        results.put((role, stale, errors, store.stats()))
        await store.aclose()


@pytest.mark.slow
async def test_two_processes_alternating_200_writes(
    backend: Backend, redis_url: str, redis_prefix: str
) -> None:
    if backend.kind == "memory":
        pytest.skip("an in-memory source cannot be shared between processes")
    ctx = multiprocessing.get_context("spawn")
    qa, qb, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [
        ctx.Process(
            target=_alternate_worker,
            args=(0, backend.spec, redis_url, redis_prefix, 100, qa, qb, results),
        ),
        ctx.Process(
            target=_alternate_worker,
            args=(1, backend.spec, redis_url, redis_prefix, 100, qb, qa, results),
        ),
    ]
    for p in procs:
        p.start()
    qa.put(0)  # process A takes the first turn
    try:
        outcome = [await anyio.to_thread.run_sync(results.get, True, 240) for _ in procs]
    finally:
        for p in procs:
            await anyio.to_thread.run_sync(p.join, 30)
            if p.is_alive():
                p.kill()
    for role, stale, errors, stats in outcome:
        assert stale == 0 and errors == [], (role, errors[:5])
        # the other instance's write: the LRU copy extended by the source's delta
        assert stats["stale"] >= 90 and stats["validations"] >= 99
        assert stats["source_reads"] <= 1
    key = ThreadKey("two-procs", "alice")
    expected = [f"{'AB'[i % 2]}-{i + 1}" for i in range(200)]
    src = backend.new()
    hist = await src.history(key)
    assert [h.version for h in hist] == list(range(200, 0, -1))
    for h in hist:
        assert texts_of(h) == expected[: h.version]
        assert orjson.loads(h.values) == {"turns": h.version}


# --------------------------------------------------------------------------- Redis trouble


async def _alternating_turns(
    stores: list[LayeredStore], key: ThreadKey, texts: list[str], n: int
) -> None:
    """``n`` turns alternating between ``stores``; every read must be exactly the truth."""
    for _ in range(n):
        st = stores[len(texts) % len(stores)]
        rec = await st.read(key)
        assert texts_of(rec) == texts and (rec.version if rec else 0) == len(texts)
        text = f"t{len(texts)}"
        await st.write(next_write(rec, key, [text]))
        texts.append(text)
        await st.aflush()  # the other instance reads after the write-through landed


def _redis_hits(stores: list[LayeredStore]) -> int:
    return sum(redis_of(s).stats()["hits"] for s in stores)


async def test_redis_stopped_mid_run_then_back(
    backend: Backend, make_stack, dedicated: DedicatedRedis, caplog
) -> None:
    def cache() -> RedisCache:
        return RedisCache(dedicated.url, prefix="it:", timeout_s=0.25, reconnect_backoff_s=0.2)

    # no LRU: every read goes to Redis first, so the trouble is felt on every turn
    stores = [make_stack(redis_cache=cache(), lru=False) for _ in range(2)]
    texts: list[str] = []
    await _alternating_turns(stores, KEY, texts, 10)
    before = _redis_hits(stores)
    assert before >= 8
    with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
        await anyio.to_thread.run_sync(dedicated.stop)
        await _alternating_turns(stores, KEY, texts, 10)  # every turn succeeds without Redis
    assert any("unavailable" in r.getMessage() for r in caplog.records)
    assert _redis_hits(stores) == before
    await anyio.to_thread.run_sync(dedicated.start)
    await anyio.sleep(0.3)  # past the backoff
    await _alternating_turns(stores, KEY, texts, 10)
    assert _redis_hits(stores) >= before + 8  # the cache is used again
    assert texts_of(await backend.new().read(KEY)) == texts


async def test_redis_paused_mid_run(
    backend: Backend, make_stack, dedicated: DedicatedRedis
) -> None:
    def cache() -> RedisCache:
        return RedisCache(dedicated.url, prefix="it:", timeout_s=0.2, reconnect_backoff_s=0.1)

    stores = [make_stack(redis_cache=cache(), lru=False) for _ in range(2)]
    texts: list[str] = []
    await _alternating_turns(stores, KEY, texts, 6)
    dedicated.pause(900)  # Redis keeps its data but answers nothing for 0.9 s
    t0 = time.monotonic()
    await _alternating_turns(stores, KEY, texts, 6)
    while time.monotonic() - t0 < 1.0:
        await _alternating_turns(stores, KEY, texts, 1)
    await anyio.sleep(0.2)
    before = _redis_hits(stores)
    await _alternating_turns(stores, KEY, texts, 10)  # Redis back: no stale data served
    assert _redis_hits(stores) >= before + 8
    assert texts_of(await backend.new().read(KEY)) == texts


async def test_a_writer_without_redis_leaves_an_old_redis_copy_that_is_never_served(
    backend: Backend, make_stack
) -> None:
    """An instance without Redis moves the thread on: Redis keeps the previous version. A
    Redis-backed instance with a cold LRU gets that copy from Redis and the source, in the
    read's one round trip, sends the row it lacks: the old copy is never served."""
    a = make_stack(lru=False)
    await turn(a, KEY, "one")
    await a.aflush()  # Redis: version 1
    other = make_stack(redis_on=False)  # an instance without Redis
    await turn(other, KEY, "two")
    raw_meta = await redis_of(a).get(KEY)
    assert raw_meta is not None and raw_meta.version == 1  # Redis still says version 1
    rec = await a.read(KEY)
    assert rec.version == 2 and texts_of(rec) == ["one", "two"]
    assert a.stats()["stale"] == 1 and redis_of(a).stats()["hits"] == 2
    await turn(a, KEY, "three")  # no StaleStateError
    assert texts_of(await other.read(KEY)) == ["one", "two", "three"]


async def test_garbage_in_redis_returns_correct_data(
    backend: Backend, make_stack, redis_url, redis_prefix, caplog
) -> None:
    writer = make_stack()
    for t in "abc":
        await turn(writer, KEY, t)
    await writer.aflush()  # mid-run write-throughs linger: none may land after a corruption
    tid = KEY.thread_id
    meta, msgs = (f"{redis_prefix}{{{tid}}}:{s}" for s in ("meta", "msgs"))
    corruptions = [
        lambda r: r.set(meta, b"\x00garbage"),
        lambda r: r.setrange(msgs, r.strlen(msgs) - 4, b"\x00j\xffs"),
        lambda r: r.hset(meta, "ranges", b"{]"),
        lambda r: (r.delete(msgs), r.set(msgs, b"x")),
    ]
    with (
        redis.Redis.from_url(redis_url) as raw,
        caplog.at_level(logging.WARNING, logger="tenxgraph.redis"),
    ):
        for corrupt in corruptions:
            await writer.read(KEY)  # make sure Redis holds a good copy first
            filler = make_stack()
            await filler.read(KEY)
            await filler.aflush()
            corrupt(raw)
            cold = make_stack()  # empty LRU: goes to Redis, finds garbage, falls through
            rec = await cold.read(KEY)
            assert texts_of(rec) == ["a", "b", "c"] and rec.version == 3
            # unparseable (garbage) or parseable but altered (its MAC fails: rejected)
            stats = redis_of(cold).stats()
            assert stats["garbage"] + stats["rejected"] == 1
    assert (
        sum(
            "unusable data" in r.getMessage() or "does not verify" in r.getMessage()
            for r in caplog.records
        )
        >= 4
    )
    # and everything keeps working afterwards
    await turn(writer, KEY, "d")
    assert texts_of(await make_stack().read(KEY)) == ["a", "b", "c", "d"]


# --------------------------------------------------------------------------- writes in flight


def _die_after_commit_worker(
    dsn: str, schema: str, redis_url: str, prefix: str, events: Any, go: Any
) -> None:
    """Child process: write version 1 through ``PgCheckpointer`` (LRU + Redis + Postgres),
    then version 2, dying (``os._exit``, as under SIGKILL) right after its Postgres commit,
    before Redis is updated."""
    asyncio.run(_die_after_commit(dsn, schema, redis_url, prefix, events, go))


async def _die_after_commit(dsn, schema, redis_url, prefix, events, go) -> None:
    import os

    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import PgCheckpointer

    cp = PgCheckpointer(dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix)
    await cp.asetup()
    cfg = {"thread_id": "crash", "user_id": "u"}
    await cp.aput_messages(cfg, [Message.text_message("first", message_id="m1")])
    await cp.store.aflush()  # Redis holds version 1
    events.put("v1")
    await anyio.to_thread.run_sync(go.get, True, 60)

    async def die(self: Any, *args: Any, **kwargs: Any) -> None:
        os._exit(9)  # the background write-through never lands

    RedisCache.put = die  # type: ignore[method-assign]
    await cp.aput_messages(cfg, [Message.text_message("second", message_id="m2")])
    os._exit(9)  # after the Postgres commit (the LRU was updated), before Redis


@pytest.mark.postgres
async def test_writer_killed_between_commit_and_redis_update(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    """The DESIGN section 3 promise ("caches never cause spurious conflicts") across a crash:
    a process killed after its Postgres commit and before its Redis write-through leaves
    Redis with the previous version, which nobody may serve as the latest."""
    import psycopg

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import PgCheckpointer
    from tenxgraph.utils import END

    def checkpointer() -> PgCheckpointer:
        return PgCheckpointer(
            pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
        )

    def texts(state: Any) -> list[str]:
        return [m.text() for m in state.context]

    cfg = {"thread_id": "crash", "user_id": "u"}
    ctx = multiprocessing.get_context("spawn")
    events, go = ctx.Queue(), ctx.Queue()
    child = ctx.Process(
        target=_die_after_commit_worker,
        args=(pg_dsn, pg_schema, redis_url, redis_prefix, events, go),
    )
    child.start()
    warm = checkpointer()  # an instance that read version 1 before the crash
    fresh = checkpointer()
    try:
        assert await anyio.to_thread.run_sync(events.get, True, 120) == "v1"
        assert texts(await warm.aget_state(dict(cfg))) == ["first"]  # its LRU: version 1
        go.put(True)
        await anyio.to_thread.run_sync(child.join, 60)
        assert child.exitcode == 9
        with psycopg.connect(pg_dsn) as conn:
            [[pg_version]] = conn.execute(
                f'SELECT max(version) FROM "{pg_schema}".tenxgraph_checkpoints'
            ).fetchall()
        assert pg_version == 2
        redis_cache = next(c for c in fresh.store.caches if isinstance(c, RedisCache))
        with redis.Redis.from_url(redis_url) as raw:  # Redis still holds version 1
            meta = redis_cache.keys("crash")[0]
            assert raw.hget(meta, "version") == b"1"

        # a fresh instance (Redis, then Postgres) and the warm one (LRU validated) read v2
        c1 = dict(cfg)
        assert texts(await fresh.aget_state(c1)) == ["first", "second"]
        assert c1["_checkpoint_version"] == 2
        c2 = dict(cfg)
        assert texts(await warm.aget_state(c2)) == ["first", "second"]
        assert c2["_checkpoint_version"] == 2

        # and turns on it succeed, alternating between the instances, with no conflict
        async def reply(state: Any) -> str:
            return "hello"

        g = StateGraph()
        g.add_node("reply", reply)
        g.set_entry_point("reply")
        g.add_edge("reply", END)
        for i, cp in enumerate([fresh, warm, fresh]):
            app = g.compile(checkpointer=cp)
            await app.ainvoke({"messages": [Message.text_message(f"turn {i}")]}, dict(cfg))
        final = await checkpointer().aget_state(dict(cfg))
        assert texts(final) == ["first", "second"] + [
            t for i in range(3) for t in (f"turn {i}", "hello")
        ]
        assert fresh.store.stats()["stale"] >= 1  # the Redis copy, extended by the source
    finally:
        if child.is_alive():
            child.kill()
        await warm.aclose()
        await fresh.aclose()


async def test_a_write_through_timing_out_after_the_commit_is_not_served_stale(
    backend: Backend, make_stack, redis_url: str, redis_prefix: str
) -> None:
    """Writer ``a`` commits version 2 but its Redis write-through times out (and never lands):
    Redis keeps version 1. The write did not wait for it; other instances, with a warm LRU or
    a cold one, read version 2 and take their turns without a conflict."""
    a = make_stack(redis_cache=RedisCache(redis_url, prefix=redis_prefix, timeout_s=0.2))
    b, c = make_stack(), make_stack()
    await turn(a, KEY, "one")
    await a.aflush()
    assert texts_of(await b.read(KEY)) == ["one"]  # b's LRU holds version 1
    cache_a = redis_of(a)

    async def stuck(*args: Any) -> Any:
        await anyio.sleep(5)  # cancelled by the tier's timeout

    cache_a._put_script = stuck  # type: ignore[method-assign]
    t0 = time.monotonic()
    rec = await turn(a, KEY, "two")
    assert rec.version == 2 and time.monotonic() - t0 < 0.15  # not waited for
    await a.aflush()
    assert cache_a.stats()["failures"] >= 1  # the rows, then the complete record: stuck
    with redis.Redis.from_url(redis_url) as raw:  # Redis: still version 1
        assert raw.hget(cache_a.keys(KEY.thread_id)[0], "version") == b"1"
    got = await b.read(KEY)  # warm LRU (version 1) extended by the source
    assert got.version == 2 and texts_of(got) == ["one", "two"]
    got = await c.read(KEY)  # cold LRU: Redis's copy, confirmed or extended by the source
    assert got.version == 2 and texts_of(got) == ["one", "two"]
    assert redis_of(c).stats()["hits"] == 1
    await turn(b, KEY, "three")  # no StaleStateError
    await b.aflush()
    await c.aflush()
    await lru_of(c).aclose()
    got = await c.read(KEY)
    assert texts_of(got) == ["one", "two", "three"]


async def test_a_late_fill_of_an_old_version_is_never_served(
    backend: Backend, make_stack, redis_url: str, redis_prefix: str
) -> None:
    """A reader reads version 1 from the source; an instance without Redis commits version 2;
    the reader's late fill of version 1 lands in Redis. Every reader still gets version 2."""
    a = make_stack()
    await turn(a, KEY, "one")
    await a.aflush()
    await redis_of(a).invalidate(KEY)  # Redis cold: the next reader fills it
    source = backend.new()
    old = await source.read(KEY)
    await source.write(next_write(old, KEY, ["two"]))  # committed without Redis
    late = make_stack(lru=False)
    await redis_of(late).put(old)  # the late fill of version 1
    for reader in (make_stack(), make_stack(lru=False), a):
        assert texts_of(await reader.read(KEY)) == ["one", "two"]


async def test_delete_drops_every_tier(
    backend: Backend, make_stack, redis_url: str, redis_prefix: str
) -> None:
    a = make_stack()
    for t in "abc":
        await turn(a, KEY, t)
    assert await a.delete_thread(KEY) is True  # waits for Redis too
    with redis.Redis.from_url(redis_url) as raw:
        assert raw.keys(redis_prefix + "*") == []
    await turn(a, KEY, "new")  # version numbers start again; Redis serves them
    await a.aflush()
    cold = make_stack()
    assert texts_of(await cold.read(KEY)) == ["new"] and redis_of(cold).stats()["hits"] == 1
