"""One chaos run: a cluster, the driver, the kill loop and the check, shared by the CI test and
``benchmarks/server_chaos.py``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import _lb_graph
from _lb_cluster import Cluster
from _lb_driver import Counts, Driver, chaos_loop


def chaos_env(pg_dsn: str, schema: str, redis_url: str, redis_prefix: str) -> dict[str, str]:
    """The servers' settings (``_lb_graph``): short nodes, a 2 s lease so a killed server's
    threads are taken over quickly."""
    return {
        "LB_PG_DSN": pg_dsn,
        "LB_PG_SCHEMA": schema,
        "LB_REDIS_URL": redis_url,
        "LB_REDIS_PREFIX": redis_prefix,
        "LB_NODE_S": "0.02",
        "LB_LEASE_TTL_S": "2",
    }


async def _drive(cluster: Cluster, driver: Driver, kill_every_s: float) -> None:
    stop = asyncio.Event()
    chaos = asyncio.create_task(chaos_loop(cluster, kill_every_s, stop))
    try:
        await driver.run()
    finally:
        stop.set()
        await chaos
    driver.counts.kills = cluster.kills
    driver.counts.problems = driver.problems
    graph = _lb_graph.build()
    try:
        await driver.verify(graph)
    finally:
        await graph.aclose()


def run_chaos(
    folder: Path,
    env: dict[str, str],
    threads: int,
    turns: int,
    kill_every_s: float,
    servers: int = 3,
    deadline_s: float = 600.0,
    streamed: bool = True,
) -> tuple[Counts, Cluster]:
    """Start HAProxy and ``servers`` servers, send ``threads`` x ``turns`` turns while killing
    a server every ``kill_every_s`` seconds, stop everything, check the store.

    ``env`` is also set in this process (the check reads the store with the same graph).
    ``streamed`` is passed to :class:`Driver`.
    """
    os.environ.update(env)
    cluster = Cluster(folder, "_lb_graph:make_graph", env=env, n=servers)
    with cluster:
        # HAProxy's port is known once the cluster started.
        driver = Driver(
            cluster.url, threads=threads, turns=turns, deadline_s=deadline_s, streamed=streamed
        )
        asyncio.run(_drive(cluster, driver, kill_every_s))
    return driver.counts, cluster
