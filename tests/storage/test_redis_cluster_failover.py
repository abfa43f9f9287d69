"""A Redis Cluster master killed in the middle of graph runs is a cache miss, never a failed run.

The test starts a three-master cluster of its own on free loopback ports (so the shared one on
7001-7003 is never disturbed), runs several threads through ``PgCheckpointer(...,
redis_cluster=True)``, kills the master serving one of the threads in the middle, and checks
that every run finishes with exactly the state it would have had without Redis.
"""

from __future__ import annotations

import logging
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import redis
from redis.asyncio.cluster import RedisCluster
from redis.crc import key_slot

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.records import StoredCheckpoint, ThreadKey
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.redis import RedisCache
from tenxgraph.utils import END

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]

STEPS = 24
THREADS = [f"failover-{i}" for i in range(6)]
GO = {"messages": [{"role": "user", "content": "go"}]}


class Counter(AgentState):
    counter: int = 0


def _cluster_ports(n: int) -> list[int]:
    """``n`` free loopback ports whose cluster bus ports (port + 10000) are free too (a cluster
    node's port must be at most 55535)."""
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < n:
        port = rng.randrange(30000, 45000)
        if port in ports:
            continue
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        ports.append(port)
    return ports


class OwnCluster:
    """Three cluster-enabled ``redis-server`` processes of this test, joined as masters."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ports = _cluster_ports(3)
        self.url = f"redis://127.0.0.1:{self.ports[0]}"

    def start(self) -> None:
        for port in self.ports:
            d = self.tmp / str(port)
            d.mkdir()
            subprocess.run(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--cluster-enabled", "yes", "--cluster-config-file", str(d / "nodes.conf"),
                 "--cluster-node-timeout", "1000", "--save", "", "--appendonly", "no",
                 "--daemonize", "yes", "--dir", str(d), "--logfile", str(d / "redis.log")],
                check=True,
            )  # fmt: skip
        self._wait(lambda c: c.ping())
        subprocess.run(
            ["redis-cli", "--cluster", "create",
             *(f"127.0.0.1:{p}" for p in self.ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True,
        )  # fmt: skip
        self._wait(lambda c: b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO"))

    def _wait(self, ready) -> None:
        """Until ``ready(client)`` holds on every node."""
        deadline = time.monotonic() + 20
        while True:
            try:
                ok = True
                for port in self.ports:
                    with redis.Redis(port=port, socket_timeout=0.5) as c:
                        ok = ok and bool(ready(c))
                if ok:
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the test's Redis Cluster did not come up")
            time.sleep(0.05)

    def master_of(self, key: str) -> int:
        """The port of the master serving ``key``'s slot."""
        slot = key_slot(key.encode())
        with redis.Redis(port=self.ports[0]) as c:
            for start, end, master, *_ in c.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return int(master[1])
        raise AssertionError(f"slot {slot} not served")

    def kill(self, port: int) -> None:
        subprocess.run(
            ["redis-cli", "-p", str(port), "shutdown", "nosave"], capture_output=True, check=False
        )

    def stop(self) -> None:
        for port in self.ports:
            self.kill(port)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[OwnCluster]:
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        pytest.skip("redis-server / redis-cli are not installed")
    cluster = OwnCluster(tmp_path)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _graph() -> StateGraph:
    async def tick(state: Counter) -> dict[str, int]:
        await anyio.sleep(0.02)
        return {"counter": state.counter + 1}

    g = StateGraph(Counter)
    g.add_node("tick", tick)
    g.set_entry_point("tick")
    g.add_conditional_edges(
        "tick",
        lambda state: END if state.counter % STEPS == 0 else "tick",  # STEPS steps per run
        {"tick": "tick", END: END},
    )
    return g


async def test_master_killed_mid_run_is_a_cache_miss(
    own_cluster: OwnCluster, pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    cp = PgCheckpointer(pg_dsn, schema=pg_schema, redis_url=own_cluster.url, redis_cluster=True)
    await cp.asetup()
    app = _graph().compile(checkpointer=cp)
    cache = cp.store.caches[-1]
    victim = own_cluster.master_of(cache.keys(THREADS[0])[0])
    try:
        # warm up: one run per thread with the whole cluster up, so Redis holds every thread
        for tid in THREADS:
            await app.ainvoke(GO, {"thread_id": tid, "recursion_limit": 100})
        assert cache.stats()["writes"] > 0 and cache.stats()["failures"] == 0
        done: dict[str, int] = {}

        async def run(tid: str) -> None:
            out = await app.ainvoke(
                GO,
                {"thread_id": tid, "recursion_limit": 100},
                response_granularity="full",
            )
            done[tid] = out["state"].counter

        with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
            async with anyio.create_task_group() as tg:
                for tid in THREADS:
                    tg.start_soon(run, tid)
                await anyio.sleep(0.3)  # every run is a few steps in
                await anyio.to_thread.run_sync(own_cluster.kill, victim)
                assert not done, "the master must die while the runs are in progress"
        # every run finished, each with all its steps (a second run of STEPS on each thread)
        assert done == {tid: 2 * STEPS for tid in THREADS}
        assert cache.stats()["failures"] + cache.stats()["garbage"] > 0  # Redis was missed
    finally:
        await cp.aclose()
    # the source of truth agrees, read without any Redis
    plain = PgCheckpointer(pg_dsn, schema=pg_schema)
    try:
        for tid in THREADS:
            state = await plain.aget_state({"thread_id": tid}, Counter)
            assert state is not None and state.counter == 2 * STEPS
    finally:
        await plain.aclose()


def _record(tid: str, version: int = 1) -> StoredCheckpoint:
    return StoredCheckpoint(
        thread_id=tid, user_id="u1", version=version, values=b'{"counter": 1}',
        ranges=((0, 1),), messages=[b'{"role": "user"}'], next_seq=1, status="done",
        created_at=1.0,
    )  # fmt: skip


async def test_cluster_down_is_a_failure_with_backoff_not_garbage(
    own_cluster: OwnCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """While a master is dead (the cluster then reports CLUSTERDOWN), every call is a cache
    failure: counted in ``failures``, the tier backs off, and a few warnings at most are
    logged for the whole outage, none saying the data is unusable."""
    cache = RedisCache(
        own_cluster.url, cluster=True, prefix=f"cd{random.randrange(10**9)}:",
        reconnect_backoff_s=1.0,
    )  # fmt: skip
    try:
        tids = [f"down-{i}" for i in range(12)]  # spread over the three masters
        for tid in tids:
            await cache.put(_record(tid))
        assert (await cache.get(ThreadKey(tids[0], "u1"))) is not None
        victim = own_cluster.ports[1]  # not the node of the URL (the default node)
        on_victim = [t for t in tids if own_cluster.master_of(cache.keys(t)[0]) == victim]
        assert 0 < len(on_victim) < len(tids)
        with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
            await anyio.to_thread.run_sync(own_cluster.kill, victim)
            calls = 0
            deadline = time.monotonic() + 5.0  # the cluster state turns to fail after ~1 s
            while time.monotonic() < deadline:
                for tid in tids:
                    await cache.get(ThreadKey(tid, "u1"))
                    calls += 1
                await anyio.sleep(0.02)
        stats = cache.stats()
        assert stats["garbage"] == 0, [r.getMessage() for r in caplog.records]
        assert stats["failures"] > 0
        msgs = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert not [m for m in msgs if "unusable" in m], msgs
        assert 1 <= len(msgs) <= 3, msgs  # the outage, and the cluster going down meanwhile
        assert calls > 50
    finally:
        await cache.aclose()


class _FlakyCluster(RedisCluster):
    """A real cluster client that can be made to fail inside ``execute_command`` the way
    redis-py's cluster client did once during a killed-master run (an ``AttributeError`` on a
    node object reset by a concurrent reinitialisation)."""

    broken = False

    async def execute_command(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.broken:
            node = None
            return await node.execute_command(*args)  # type: ignore[attr-defined]
        return await super().execute_command(*args, **kwargs)


async def test_unexpected_client_error_is_a_failure_not_an_escape(
    redis_cluster_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Any exception other than a Redis answer coming out of the client is a miss with
    backoff and one warning (with its traceback); errors outside the client call still
    raise."""
    client = _FlakyCluster.from_url(redis_cluster_url)
    cache = RedisCache(
        client=client, prefix=f"ae{random.randrange(10**9)}:", reconnect_backoff_s=0.2
    )
    key = ThreadKey("flaky", "u1")
    try:
        await cache.put(_record("flaky"))
        client.broken = True
        with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
            assert await cache.get(key) is None
            await cache.put(_record("flaky", 2))
            await cache.invalidate(key)
            assert await cache.get(key) is None
        assert cache.available is False
        assert cache.stats()["failures"] == 4 and cache.stats()["garbage"] == 0
        (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert "unexpected error of the Redis client" in warning.getMessage()
        assert warning.exc_info is not None and warning.exc_info[0] is AttributeError
        client.broken = False
        await anyio.sleep(0.5)  # the probe reconnects
        assert cache.available is True
        assert (await cache.get(key)) is None  # the lost put and invalidate were flushed
        await cache.put(_record("flaky", 3))
        rec = await cache.get(key)
        assert rec is not None and rec.version == 3
        with pytest.raises(AttributeError):  # our own mistakes are not swallowed
            await cache.get("not a ThreadKey")  # type: ignore[arg-type]
    finally:
        await cache.aclose()
        await client.aclose()
