"""Run the Redis tier tests on a single Redis and on a Redis Cluster (docs/deployment.md).

Import ``pytest_generate_tests``, ``redis_prefix_fixture`` and ``redis_cluster_flag_fixture``
(fixtures named ``redis_prefix`` and ``redis_cluster_flag``) into a test module. Every test that uses
``redis_prefix`` then runs twice: ``single`` (the shared server) and ``cluster`` (the
three-master cluster, its own key prefix), except tests that take ``redis_url`` or
``dedicated`` themselves: they build plain clients of a single server, so they run once.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

__all__ = [
    "pytest_generate_tests",
    "redis_cluster_flag_fixture",
    "redis_prefix_fixture",
    "sync_client",
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``redis_topology``: both, or ``single`` for tests that take ``redis_url``."""
    if "redis_topology" not in metafunc.fixturenames:
        return
    own = inspect.signature(metafunc.function).parameters
    single_only = "redis_url" in own or "dedicated" in own
    cases = ["single"] if single_only else ["single", "cluster"]
    metafunc.parametrize("redis_topology", cases)


@pytest.fixture(name="redis_prefix")
def redis_prefix_fixture(redis_topology: str, request: pytest.FixtureRequest) -> str:
    """This test's key prefix on the Redis of its topology (cleaned up afterwards)."""
    if redis_topology == "cluster":
        return request.getfixturevalue("redis_cluster_prefix")
    return request.getfixturevalue("redis_prefix_single")


@pytest.fixture(name="redis_cluster_flag")
def redis_cluster_flag_fixture(
    redis_topology: str, request: pytest.FixtureRequest
) -> tuple[str, bool]:
    """``(url, cluster)`` for a ``RedisCache`` of this test's topology."""
    if redis_topology == "cluster":
        return request.getfixturevalue("redis_cluster_url"), True
    return request.getfixturevalue("redis_url"), False


def sync_client(url: str, cluster: bool) -> Any:
    """A synchronous client for looking at the keys (the caller closes it); on a cluster,
    ``keys()`` asks every master."""
    return _ClusterClient.from_url(url) if cluster else redis.Redis.from_url(url)


class _ClusterClient(RedisCluster):
    """``RedisCluster`` whose ``keys(pattern)`` lists the matching keys of every master."""

    def keys(self, pattern: Any = "*", **kwargs: Any) -> Any:
        kwargs.setdefault("target_nodes", RedisCluster.PRIMARIES)
        return super().keys(pattern, **kwargs)
