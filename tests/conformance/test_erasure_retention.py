"""Erasure (``aerase_user``) and retention (``thread_ttl_s``, ``asweep_threads``) on every
checkpointer backend (docs/how-to/erasure-retention.md).

After an erasure, a generic scan finds nothing of the user, by user id or by the erased
threads' ids: every table of the store (Postgres: every table ``information_schema`` lists in
the test schema; SQLite: every table of ``sqlite_master``; memory: every object the store holds),
every Redis key under the prefix (names and values), the LRU and the state cache. A table added
later is scanned without changing this test. The other user's data is untouched and readable.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import (
    ConfigError,
    ResourceNotFoundError,
    StaleStateError,
    StorageError,
)
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.records import LedgerEntry
from tenxgraph.storage import serde
from tenxgraph.storage.retention import ERASE_TABLES, EraseResult, SweepResult
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


# -- populating ----------------------------------------------------------------------------------
def _echo_graph(cp: Any) -> Any:
    def reply(state: AgentState) -> str:
        return f"echo {state.context[-1].text()}"

    g = StateGraph(AgentState)
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=cp)


async def _populate(cp: Any, user: str, threads: list[str], ghost: str) -> None:
    """Threads with versions, messages, ledger rows, a stop request, a lease with a queued
    waiter, a submitted run and a state-cache entry; plus a stop request and a run on a
    thread id without a checkpoint (``ghost``)."""
    app = _echo_graph(cp)
    for tid in threads:
        cfg = {"thread_id": tid, "user_id": user}
        await app.ainvoke({"messages": [Message.text_message(f"hello from {user} on {tid}")]}, cfg)
        await app.ainvoke({"messages": [Message.text_message(f"again {user}")]}, dict(cfg))
        entry = LedgerEntry(f"call-{tid}", f"id-{tid}", "lookup", serde.dumps({"u": user}), 1.0)
        await cp.aledger_put(cfg, entry)
        await cp.aset_stop(cfg, True)
        await cp.aput_state_cache(cfg, AgentState(context=[Message.text_message(user)]))
    lease_cfg = {"thread_id": threads[0], "user_id": user}
    grant = await cp.alease_acquire(lease_cfg, f"holder-{user}", queue=False)
    assert grant.fence is not None
    await cp.alease_acquire(lease_cfg, f"waiter-{user}", queue=True)
    await app.asubmit({"messages": [Message.text_message(f"later {user}")]}, dict(lease_cfg))
    ghost_cfg = {"thread_id": ghost, "user_id": user}
    await cp.aset_stop(ghost_cfg, True)
    await app.asubmit({"messages": [Message.text_message(f"ghost {user}")]}, ghost_cfg)
    flush = getattr(cp.store, "aflush", None)
    if flush is not None:
        await flush()


# -- scanning ------------------------------------------------------------------------------------
def _hits(value: Any, needles: list[str]) -> list[str]:
    if isinstance(value, memoryview):
        value = bytes(value)
    if isinstance(value, bytes | bytearray):
        return [n for n in needles if n.encode() in value]
    if isinstance(value, str):
        return [n for n in needles if n in value]
    return []


def _walk(obj: Any, seen: set[int]) -> Iterator[Any]:
    """Every str / bytes reachable from ``obj`` (containers, dataclasses, slots, __dict__)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, str | bytes | bytearray | memoryview):
        yield obj
        return
    if isinstance(obj, int | float | bool) or obj is None:
        return
    if isinstance(obj, dict):
        for k, v in list(obj.items()):
            yield from _walk(k, seen)
            yield from _walk(v, seen)
        return
    if isinstance(obj, list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        for v in list(obj):
            yield from _walk(v, seen)
        return
    if callable(obj) and not hasattr(obj, "__dict__"):
        return
    names: list[str] = []
    for cls in type(obj).__mro__:
        names.extend(getattr(cls, "__slots__", ()))
    names.extend(getattr(obj, "__dict__", {}))
    for name in names:
        if name.startswith("__"):
            continue
        try:
            v = getattr(obj, name)
        except AttributeError:
            continue
        if type(v).__module__.startswith(("threading", "_thread", "asyncio", "logging")):
            continue
        yield from _walk(v, seen)


def _scan_objects(roots: list[Any], needles: list[str]) -> list[str]:
    found: list[str] = []
    seen: set[int] = set()
    for root in roots:
        for value in _walk(root, seen):
            found += _hits(value, needles)
    return found


async def _scan_postgres(schema: str, needles: list[str]) -> list[str]:
    import psycopg
    from psycopg import sql

    from tests.conftest import PG_DSN

    found: list[str] = []
    async with await psycopg.AsyncConnection.connect(PG_DSN, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = %s AND table_type = 'BASE TABLE'",
            (schema,),
        )
        tables = [r[0] for r in await cur.fetchall()]
        assert any(t.endswith("threads") for t in tables)
        for table in tables:
            cur = await conn.execute(
                sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table)), binary=True
            )
            for row in await cur.fetchall():
                for value in row:
                    found += [f"{table}:{n}" for n in _hits(value, needles)]
    return found


def _scan_sqlite(path: str, needles: list[str]) -> list[str]:
    import sqlite3

    found: list[str] = []
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert "threads" in tables
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 - test scan
                for value in row:
                    found += [f"{table}:{n}" for n in _hits(value, needles)]
    finally:
        conn.close()
    return found


def _scan_redis(url: str, prefix: str, needles: list[str], cluster: bool) -> list[str]:
    import redis
    from redis.cluster import RedisCluster

    client: Any = RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    found: list[str] = []
    try:
        for key in client.scan_iter(match=prefix + "*", count=1000):
            found += [f"key {key!r}:{n}" for n in _hits(key, needles)]
            kind = client.type(key)
            if kind == b"hash":
                values: list[Any] = list(client.hgetall(key).items())
            elif kind == b"string":
                values = [client.get(key)]
            else:
                values = [kind]
            for v in values:
                for part in v if isinstance(v, tuple) else (v,):
                    found += [f"value of {key!r}:{n}" for n in _hits(part, needles)]
    finally:
        client.close()
    return found


async def _scan(backend: Backend, cp: Any, needles: list[str]) -> list[str]:
    """Everything of ``needles`` left anywhere in ``backend`` (see the module docstring)."""
    found = _scan_objects([getattr(cp.store, "caches", ()), cp.cache_values, cp._seen], needles)
    kind = backend.kind
    if kind == "memory":
        found += _scan_objects([cp.store.source], needles)
    elif kind == "sqlite":
        found += _scan_sqlite(str(backend._tmp / "graph.db"), needles)
    else:
        assert backend.pg_schema is not None
        found += await _scan_postgres(backend.pg_schema, needles)
    if backend.redis_url is not None:
        from tenxgraph.storage.redis import _owner

        assert backend.redis_prefix is not None
        digests = needles + [_owner(n) for n in needles]
        found += _scan_redis(
            backend.redis_url, backend.redis_prefix, digests, kind == "postgres+rediscluster"
        )
    return found


# -- erasure -------------------------------------------------------------------------------------
async def test_erase_user_leaves_nothing_of_the_user(backend: Backend) -> None:
    cp = backend.new()
    tag = uuid.uuid4().hex[:8]
    alice, bob = f"alice{tag}", f"bob{tag}"
    a_threads = [f"ta{tag}-{i}" for i in range(3)]
    b_threads = [f"tb{tag}-{i}" for i in range(2)]
    await _populate(cp, alice, a_threads, f"ghosta{tag}")
    await _populate(cp, bob, b_threads, f"ghostb{tag}")
    needles = [alice, *a_threads, f"ghosta{tag}"]
    assert await _scan(backend, cp, needles)  # the scan sees the data before

    result = await cp.aerase_user(alice)

    assert isinstance(result, EraseResult)
    assert result.thread_ids == tuple(sorted([*a_threads, f"ghosta{tag}"]))
    assert result.complete
    assert set(result.rows) == set(ERASE_TABLES)
    assert result.rows["threads"] == 3
    assert result.rows["checkpoints"] >= 6  # two runs of one step each, at least
    assert result.rows["messages"] == 12  # two turns of input + answer per thread
    assert result.rows["tool_executions"] == 3
    assert result.rows["stop_requests"] == 4  # three threads and the ghost
    assert result.rows["runs"] == 2
    assert result.caches["state_cache"] == 3
    assert await _scan(backend, cp, needles) == []

    # The other user: untouched and readable, from this instance and from a fresh one.
    for reader in (cp, backend.peer(cp)):
        for tid in b_threads:
            cfg = {"thread_id": tid, "user_id": bob}
            state = await reader.aget_state(cfg)
            assert state is not None
            assert [m.text() for m in state.context][-1] == f"echo again {bob}"
            assert await reader.aledger_count(cfg) == 1
            if reader is cp:  # without Redis the state cache is in-process
                assert await reader.aget_state_cache(cfg) is not None
        threads = await reader.alist_threads({"user_id": bob})
        assert sorted(t.thread_id for t in threads) == b_threads
        assert await reader.alist_threads({"user_id": alice}) == []
    runs = await cp.store.run_list(bob)
    assert len(runs) == 2

    # Idempotent: a second erasure finds nothing.
    again = await cp.aerase_user(alice)
    assert again.thread_ids == () and again.total_rows == 0


async def test_erase_with_isolation_off_takes_the_named_threads(backend: Backend) -> None:
    cp = backend.new(enforce_user_isolation=False)
    tag = uuid.uuid4().hex[:8]
    mine, other = [f"tm{tag}-0", f"tm{tag}-1"], [f"to{tag}-0"]
    app = _echo_graph(cp)
    for tid in [*mine, *other]:
        await app.ainvoke({"messages": [Message.text_message(f"text {tid}")]}, {"thread_id": tid})
    with pytest.raises(ConfigError) as e:
        await cp.aerase_user("someone")
    assert e.value.context["key"] == "thread_ids"

    result = await cp.aerase_user("someone", thread_ids=mine)

    assert result.thread_ids == tuple(mine)
    assert result.rows["threads"] == 2
    assert await _scan(backend, cp, mine) == []
    assert await cp.aget_state({"thread_id": other[0]}) is not None


async def test_erase_refuses_bad_arguments_before_writing(backend: Backend) -> None:
    cp = backend.new()
    await _echo_graph(cp).ainvoke(
        {"messages": [Message.text_message("x")]}, {"thread_id": "keep", "user_id": "u1"}
    )
    for bad in ("*", "", None, 7):
        with pytest.raises(ConfigError):
            await cp.aerase_user(bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        await cp.aerase_user("u1", thread_ids=["keep"])  # isolation on: ownership is known
    assert await cp.aget_state({"thread_id": "keep", "user_id": "u1"}) is not None


async def test_a_run_going_on_during_the_erasure_cannot_write_the_thread_back(
    backend: Backend,
) -> None:
    cp = backend.new()
    entered, release = anyio.Event(), anyio.Event()

    async def slow(state: AgentState) -> str:
        entered.set()
        await release.wait()
        return "late answer"

    g = StateGraph(AgentState)
    g.add_node("first", lambda state: "first answer")
    g.add_node("slow", slow)
    g.set_entry_point("first")
    g.add_edge("first", "slow")
    g.add_edge("slow", END)
    app = g.compile(checkpointer=cp)
    tag = uuid.uuid4().hex[:8]
    eve, busy = f"eve{tag}", f"busy{tag}"
    cfg = {"thread_id": busy, "user_id": eve}
    outcome: list[BaseException] = []

    async def run() -> None:
        try:
            await app.ainvoke({"messages": [Message.text_message("secret of eve")]}, cfg)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await entered.wait()  # the first node's checkpoint is durable
        result = await cp.aerase_user(eve)
        assert result.thread_ids == (busy,)
        release.set()
    assert len(outcome) == 1 and isinstance(outcome[0], StaleStateError)
    assert await cp.aget_state(cfg) is None
    flush = getattr(cp.store, "aflush", None)
    if flush is not None:
        await flush()
    left = await _scan(backend, cp, [busy, eve])
    assert left == [], left


# -- retention -----------------------------------------------------------------------------------
async def _thread(cp: Any, tid: str, user: str = "ret") -> dict[str, Any]:
    cfg = {"thread_id": tid, "user_id": user}
    await _echo_graph(cp).ainvoke({"messages": [Message.text_message(f"hi {tid}")]}, dict(cfg))
    return cfg


async def test_sweep_expires_idle_threads_by_their_ttl(backend: Backend) -> None:
    cp = backend.new(thread_ttl_s=3600)
    t = uuid.uuid4().hex[:8]
    plain = await _thread(cp, f"plain{t}")
    short = await _thread(cp, f"short{t}")
    forever = await _thread(cp, f"forever{t}")
    leased = await _thread(cp, f"leased{t}")
    queued = await _thread(cp, f"queued{t}")
    await cp.aset_thread_ttl(short, 60)
    await cp.aset_thread_ttl(forever, math.inf)
    assert await cp.aget_thread_ttl(short) == 60
    assert await cp.aget_thread_ttl(plain) == 3600
    assert await cp.aget_thread_ttl(forever) == math.inf
    await cp.aput_state_cache(short, AgentState())
    now = time.time()

    first = await cp.asweep_threads(now=now + 120)  # idle 2 min: only the 60 s TTL expired

    assert isinstance(first, SweepResult)
    assert first.thread_ids == (f"short{t}",)
    assert first.rows["threads"] == 1 and first.rows["messages"] == 2
    assert first.caches["state_cache"] == 1
    assert await cp.aget_state(short) is None
    assert await cp.aget_state(plain) is not None

    grant = await cp.alease_acquire(leased, "runner", queue=False)  # a run holds it
    assert grant.fence is not None
    await _echo_graph(cp).asubmit({"messages": [Message.text_message("later")]}, dict(queued))

    second = await cp.asweep_threads(now=now + 7200)  # idle 2 h: past the default 1 h

    assert second.thread_ids == (f"plain{t}",)  # leased, queued (open run) and forever kept
    for cfg in (leased, queued, forever):
        assert await cp.aget_state(cfg) is not None
    assert await _scan(backend, cp, [f"short{t}", f"plain{t}"]) == []

    await cp.alease_release(leased, "runner", grant.fence)
    third = await cp.asweep_threads(now=now + 7200)
    assert third.thread_ids == (f"leased{t}",)
    assert (await cp.asweep_threads(now=now + 7200)).thread_ids == ()


async def test_thread_ttl_values_are_checked(backend: Backend) -> None:
    for bad in (0, -1, math.nan, "60", True):
        with pytest.raises(ConfigError) as e:
            backend.new(thread_ttl_s=bad)
        assert e.value.context["key"] == "thread_ttl_s"
    cp = backend.new()
    cfg = await _thread(cp, "t")
    for bad in (0, -5, math.nan, "x", False):
        with pytest.raises(ConfigError):
            await cp.aset_thread_ttl(cfg, bad)
    with pytest.raises(ResourceNotFoundError):
        await cp.aset_thread_ttl({"thread_id": "missing", "user_id": "ret"}, 10)
    with pytest.raises(StorageError) as f:
        await cp.aset_thread_ttl({"thread_id": "t", "user_id": "intruder"}, 10)
    assert f.value.error_code == "STORAGE_FORBIDDEN_001"
    assert await cp.aget_thread_ttl(cfg) is None  # no default, no override: never
    await cp.aset_thread_ttl(cfg, 5)
    await cp.aset_thread_ttl(cfg, None)  # back to the default (none)
    assert (await cp.asweep_threads(now=time.time() + 1e6)).thread_ids == ()


async def test_the_worker_recovery_loop_sweeps(backend: Backend) -> None:
    cp = backend.new(thread_ttl_s=0.2)
    cfg = await _thread(cp, "expiring")
    app = _echo_graph(cp)
    async with app.recovery(retention_interval_s=0.05, listen=False) as rec:
        with anyio.fail_after(20):
            # the sweep's counters are updated after its delete commits: wait for both
            while (  # noqa: ASYNC110 - polls the store
                await cp.aget_state(cfg) is not None or rec.stats["threads_expired"] < 1
            ):
                await anyio.sleep(0.05)
    assert rec.stats["retention_sweeps"] >= 1
    assert rec.stats["threads_expired"] >= 1


async def test_a_checkpointer_of_your_own_is_told_what_is_missing() -> None:
    from tenxgraph.storage.checkpointer import BaseCheckpointer

    class Mine(BaseCheckpointer[AgentState]):
        async def aget_state(self, config: dict[str, Any]) -> AgentState | None:
            return None

        async def aput_state(self, config: dict[str, Any], state: AgentState) -> AgentState:
            return state

    cp = Mine()
    for call in (cp.aerase_user("u"), cp.asweep_threads()):
        with pytest.raises(StorageError) as e:
            await call
        assert e.value.error_code == "STORAGE_000"
