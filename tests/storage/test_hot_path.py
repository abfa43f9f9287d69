"""The hot path's round trips, counted on the real servers, and the caches' validation.

* Postgres round trips are counted by a TCP relay in front of the real server (the
  ``RoundTripProxy`` of ``benchmarks/_pg.py``: one turnaround each time the server answers
  after the client sent something). A run costs one round trip to load its thread, however
  warm or cold the caches are, and one per step.
* Redis commands are counted client-side on a real connection, and attributed to the run when
  they are sent from the run's context (a context variable set around ``ainvoke``; the
  layered store's background lane runs in a context of its own). A run waits for no Redis
  round trip inside a step, and for one (the ``EVALSHA`` of the read) only when the
  in-process LRU misses.
* An instance without Redis, or a Redis flushed mid-run (a private ``redis-server``), never
  makes a Redis-backed instance read an old state or raise ``StaleStateError``.
"""

from __future__ import annotations

import contextvars
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from _dedicated_redis import DedicatedRedis

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils import END

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _pg import RoundTripProxy  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis]

IN_RUN: contextvars.ContextVar[bool] = contextvars.ContextVar("in_run", default=False)
STEPS = 3


class AttributingRedis(aioredis.Redis):
    """A real redis-py asyncio client recording each command it sends, and whether it was
    sent from inside a run (``IN_RUN``) or from elsewhere (the background lane)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_run: list[str] = []
        self.outside: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        (self.in_run if IN_RUN.get() else self.outside).append(str(args[0]).upper())
        return await super().execute_command(*args, **options)


def three_steps(cp: PgCheckpointer) -> Any:
    async def a(state: Any) -> str:
        return "a"

    async def b(state: Any) -> str:
        return "b"

    async def c(state: Any) -> str:
        return "c"

    g = StateGraph()
    for name, fn in (("a", a), ("b", b), ("c", c)):
        g.add_node(name, fn)
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=cp)


async def run_counted(app: Any, cfg: dict[str, Any], text: str) -> dict[str, Any]:
    token = IN_RUN.set(True)
    try:
        return await app.ainvoke({"messages": [Message.text_message(text)]}, dict(cfg))
    finally:
        IN_RUN.reset(token)


@pytest.fixture
def pg_proxy() -> Any:
    proxy = RoundTripProxy("127.0.0.1", 5432)
    yield proxy
    proxy.close()


async def test_a_step_is_one_postgres_round_trip_and_no_awaited_redis_one(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str, pg_proxy: RoundTripProxy
) -> None:
    client = AttributingRedis.from_url(redis_url)
    cp = PgCheckpointer(
        pg_proxy.dsn(pg_dsn),
        schema=pg_schema,
        redis=client,
        redis_prefix=redis_prefix,
        pool_config={"min_size": 1, "max_size": 1},
    )
    try:
        await cp.asetup()
        app = three_steps(cp)
        cfg = {"thread_id": "hot", "user_id": "u"}
        # create the thread, warm every tier, and let psycopg prepare the hot statements
        # (after ``prepare_threshold`` = 5 executions it spends one round trip preparing):
        # versions 2-20 use the CAS without pruning, from 21 on (past the history limit of
        # 20) the one with pruning, whose sixth execution (version 26) is its prepared one
        for i in range(10):
            await run_counted(app, cfg, f"warm-up {i}")
        await cp.store.aflush()

        def measure_pg() -> int:
            return pg_proxy.snapshot()["turnarounds"]

        # warm LRU: one Postgres round trip to load (READ_SINCE), one per step, no Redis
        for i in range(3):
            client.in_run.clear()
            before = measure_pg()
            out = await run_counted(app, cfg, f"warm {i}")
            assert measure_pg() - before == 1 + STEPS
            assert client.in_run == []
            assert [m.text() for m in out["messages"][-4:]] == [f"warm {i}", "a", "b", "c"]
        await cp.store.aflush()

        # LRU cold, Redis warm: one Redis round trip, then one Postgres round trip to load
        lru = cp.store.caches[0]
        await lru.aclose()
        client.in_run.clear()
        before = measure_pg()
        await run_counted(app, cfg, "cold lru")
        assert measure_pg() - before == 1 + STEPS
        assert client.in_run == ["EVALSHA"]

        # every cache cold: the same (a Redis miss, then a plain Postgres read)
        await cp.store.invalidate(cp.key_for(cfg))
        await lru.aclose()
        client.in_run.clear()
        before = measure_pg()
        await run_counted(app, cfg, "cold")
        assert measure_pg() - before == 1 + STEPS
        assert client.in_run == ["EVALSHA"]

        # get_state: one Postgres round trip (warm LRU), no Redis
        client.in_run.clear()
        before = measure_pg()
        token = IN_RUN.set(True)
        try:
            state = await cp.aget_state(dict(cfg))
        finally:
            IN_RUN.reset(token)
        assert measure_pg() - before == 1 and client.in_run == []
        assert [m.text() for m in state.context][-4:] == ["cold", "a", "b", "c"]

        # the write-throughs did happen, in the background, outside the run
        await cp.store.aflush()
        assert "EVALSHA" in client.outside
    finally:
        await cp.aclose()
        await client.aclose()


def _cp(pg_dsn: str, schema: str, redis_url: str | None, prefix: str) -> PgCheckpointer:
    if redis_url is None:
        return PgCheckpointer(pg_dsn, schema=schema)
    return PgCheckpointer(pg_dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix)


async def _alternate(apps: list[Any], cfg: dict[str, Any], turns: int, texts: list[str]) -> None:
    """``turns`` runs alternating between ``apps``; each must see exactly the truth."""
    for _ in range(turns):
        app = apps[(len(texts) // 4) % len(apps)]
        text = f"turn {len(texts) // 4}"
        await app.ainvoke({"messages": [Message.text_message(text)]}, dict(cfg))
        texts.extend([text, "a", "b", "c"])
        # the instance that ran reads back exactly the thread (its caches validated)
        state = await app.checkpointer.aget_state(dict(cfg))
        assert [m.text() for m in state.context] == texts


async def test_a_writer_without_redis_never_makes_a_redis_reader_stale(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    with_redis = _cp(pg_dsn, pg_schema, redis_url, redis_prefix)
    other_with_redis = _cp(pg_dsn, pg_schema, redis_url, redis_prefix)
    without = _cp(pg_dsn, pg_schema, None, redis_prefix)
    try:
        for cp in (with_redis, other_with_redis, without):
            await cp.asetup()
        apps = [three_steps(with_redis), three_steps(without), three_steps(other_with_redis)]
        cfg = {"thread_id": "mixed", "user_id": "u"}
        texts: list[str] = []
        # every run starts from a thread another instance (with or without Redis) moved on:
        # a StaleStateError or an old state would fail the run or the comparison
        await _alternate(apps, cfg, 12, texts)
        for cp in (with_redis, other_with_redis):
            await cp.store.aflush()
        # the Redis-backed instances' copies were old at every turn and never served as is
        assert with_redis.store.stats()["stale"] >= 3
        state = await other_with_redis.aget_state(dict(cfg))
        assert [m.text() for m in state.context] == texts
    finally:
        for cp in (with_redis, other_with_redis, without):
            await cp.aclose()


async def test_a_thread_recreated_without_redis_never_mixes_with_its_old_copy(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    """Version numbers restart at 1 when a thread is deleted and created anew. An instance
    without Redis does that up to the version Redis still holds of the deleted thread; a
    Redis-backed instance then writes the next version. Its rows must not be applied on top
    of the deleted thread's copy (that hybrid would carry the new version's identity and be
    confirmed by every later read): a fresh Redis-backed reader and a run see the new thread
    only."""
    a = _cp(pg_dsn, pg_schema, redis_url, redis_prefix)
    b = _cp(pg_dsn, pg_schema, None, redis_prefix)
    try:
        for cp in (a, b):
            await cp.asetup()
        app_a, app_b = three_steps(a), three_steps(b)
        cfg = {"thread_id": "recreated", "user_id": "u"}

        async def say(app: Any, text: str) -> None:
            await app.ainvoke({"messages": [Message.text_message(text)]}, dict(cfg))

        await say(app_a, "old 1")
        await say(app_a, "old 2")
        await a.store.aflush()  # Redis now holds the deleted thread's latest version
        await b.aclean_thread(dict(cfg))
        await say(app_b, "new 1")
        await say(app_b, "new 2")
        await say(app_a, "new 3")  # written through on top of what Redis holds
        await a.store.aflush()
        expected = [t for n in (1, 2, 3) for t in (f"new {n}", "a", "b", "c")]
        reader = _cp(pg_dsn, pg_schema, redis_url, redis_prefix)
        try:
            state = await reader.aget_state(dict(cfg))
            assert [m.text() for m in state.context] == expected
            await say(three_steps(reader), "new 4")
            state = await reader.aget_state(dict(cfg))
            assert [m.text() for m in state.context] == [*expected, "new 4", "a", "b", "c"]
        finally:
            await reader.aclose()
    finally:
        for cp in (a, b):
            await cp.aclose()


async def test_a_redis_flushed_mid_run_never_makes_a_reader_stale(
    pg_dsn: str, pg_schema: str, tmp_path: Path
) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    srv = DedicatedRedis(str(tmp_path))
    srv.start()
    a = _cp(pg_dsn, pg_schema, srv.url, "flush:")
    b = _cp(pg_dsn, pg_schema, srv.url, "flush:")
    try:
        await a.asetup()
        await b.asetup()
        apps = [three_steps(a), three_steps(b)]
        cfg = {"thread_id": "flushed", "user_id": "u"}
        texts: list[str] = []
        raw = aioredis.Redis(port=srv.port)
        try:
            for _ in range(4):
                await _alternate(apps, cfg, 2, texts)
                await a.store.aflush()
                await b.store.aflush()
                await raw.flushall()  # a private server: flushing it touches no one else
                await _alternate(apps, cfg, 1, texts)  # a write-through lands on nothing
                await raw.flushall(asynchronous=False)
        finally:
            await raw.aclose()
        state = await a.aget_state(dict(cfg))
        assert [m.text() for m in state.context] == texts
    finally:
        await a.aclose()
        await b.aclose()
        srv.stop()


async def test_a_delete_that_happened_is_not_reported_failed_when_redis_is_gone(
    pg_dsn: str, pg_schema: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``aclean_thread`` deletes the thread in Postgres first; Redis unreachable afterwards
    (the state-cache entry cannot be removed) is a warning, never an error that would make
    the caller retry a delete that happened."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    srv = DedicatedRedis(str(tmp_path))
    srv.start()
    cp = _cp(pg_dsn, pg_schema, srv.url, "gone:")
    try:
        await cp.asetup()
        cfg = {"thread_id": "deleted-while-redis-is-down", "user_id": "u"}
        await three_steps(cp).ainvoke({"messages": [Message.text_message("hi")]}, dict(cfg))
        await cp.store.aflush()
        srv.stop()
        with caplog.at_level("WARNING", logger="tenxgraph.checkpointer"):
            assert await cp.aclean_thread(dict(cfg)) is True
        assert any("state-cache entry could not be removed" in r.message for r in caplog.records)
        assert await cp.aget_state(dict(cfg)) is None
    finally:
        await cp.aclose()
        srv.stop()
