"""Shared fixtures: real PostgreSQL and Redis, one schema / key prefix per test.

Servers come from ``TENXGRAPH_TEST_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and ``TENXGRAPH_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). ``.ci/run`` starts them
when they are not answering, and also the production topologies (``scripts/services.sh``):
PgBouncer in transaction mode in front of the same database (``TENXGRAPH_TEST_PGBOUNCER_DSN``,
default ``postgresql://postgres@127.0.0.1:6432/test``) and a three-master Redis Cluster
(``TENXGRAPH_TEST_REDIS_CLUSTER_URL``, default ``redis://127.0.0.1:7001``). A test needing one
of those fails in CI (``CI=true``) when it is not answering and skips elsewhere, naming it. Each test gets its own Postgres schema (dropped afterwards) and its
own Redis key prefix (deleted afterwards), so tests can run in parallel (``pytest -n``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_DSN = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TENXGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
PGBOUNCER_DSN = os.environ.get(
    "TENXGRAPH_TEST_PGBOUNCER_DSN", "postgresql://postgres@127.0.0.1:6432/test"
)
REDIS_CLUSTER_URL = os.environ.get("TENXGRAPH_TEST_REDIS_CLUSTER_URL", "redis://127.0.0.1:7001")

_ANSWERING: dict[str, str | None] = {}


def require_service(name: str) -> None:
    """Fail (in CI, ``CI=true``) or skip (elsewhere) unless the service ``"pgbouncer"`` or
    ``"redis-cluster"`` answers; checked once per process."""
    if name not in _ANSWERING:
        _ANSWERING[name] = _probe(name)
    problem = _ANSWERING[name]
    if problem is None:
        return
    msg = f"{problem}; start it with scripts/services.sh"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"CI: {msg}", pytrace=False)
    pytest.skip(msg)


def _probe(name: str) -> str | None:
    """``None`` when the service answers, else why not."""
    if name == "pgbouncer":
        import psycopg

        try:
            with psycopg.connect(PGBOUNCER_DSN, connect_timeout=3, autocommit=True) as conn:
                conn.execute("SELECT 1", prepare=False)
        except psycopg.Error as exc:
            return f"PgBouncer at {PGBOUNCER_DSN} is not answering ({type(exc).__name__})"
        return None
    if name == "redis-cluster":
        import redis
        from redis.cluster import RedisCluster

        try:
            client = RedisCluster.from_url(REDIS_CLUSTER_URL, socket_connect_timeout=3)
            try:
                info = client.cluster_info()
            finally:
                client.close()
        except (redis.RedisError, OSError) as exc:
            return f"the Redis Cluster at {REDIS_CLUSTER_URL} is not answering ({exc!r})"
        if info.get("cluster_state") != "ok":
            return (
                f"the Redis Cluster at {REDIS_CLUSTER_URL} is not ok ({info.get('cluster_state')})"
            )
        return None
    raise AssertionError(f"unknown service {name!r}")


@pytest.fixture
def pg_dsn() -> str:
    """DSN of the test database (the server must be running)."""
    return PG_DSN


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh, empty Postgres schema name for this test; dropped with CASCADE afterwards."""
    yield from _fresh_schema()


@pytest.fixture(scope="module")
def pg_schema_module() -> Iterator[str]:
    """As ``pg_schema``, shared by one test module (for servers started once per module)."""
    yield from _fresh_schema()


def _fresh_schema() -> Iterator[str]:
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def redis_url() -> str:
    """URL of the test Redis server."""
    return REDIS_URL


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    """A unique Redis key prefix for this test; its keys are deleted afterwards."""
    yield from _single_redis_prefix()


@pytest.fixture
def redis_prefix_single() -> Iterator[str]:
    """Same as ``redis_prefix``, under a name that modules overriding ``redis_prefix`` (to run
    on several Redis topologies) can still reach."""
    yield from _single_redis_prefix()


@pytest.fixture(scope="module")
def redis_prefix_module() -> Iterator[str]:
    """As ``redis_prefix``, shared by one test module."""
    yield from _single_redis_prefix()


def _single_redis_prefix() -> Iterator[str]:
    import redis

    prefix = f"txtest:{uuid.uuid4().hex[:12]}:"
    try:
        yield prefix
    finally:
        client = redis.Redis.from_url(REDIS_URL)
        try:
            keys = list(client.scan_iter(match=prefix + "*", count=1000))
            if keys:
                client.delete(*keys)
        finally:
            client.close()


@pytest.fixture
def pgbouncer_dsn() -> str:
    """DSN of the test database through PgBouncer in transaction mode (fails in CI, skips
    elsewhere, when PgBouncer is not answering)."""
    require_service("pgbouncer")
    return PGBOUNCER_DSN


@pytest.fixture
def redis_cluster_url() -> str:
    """URL of one node of the test Redis Cluster (fails in CI, skips elsewhere, when the
    cluster is not answering)."""
    require_service("redis-cluster")
    return REDIS_CLUSTER_URL


@pytest.fixture
def redis_cluster_prefix() -> Iterator[str]:
    """A unique key prefix for this test on the Redis Cluster; its keys are deleted from every
    master afterwards."""
    from redis.cluster import RedisCluster

    prefix = f"txtest:{uuid.uuid4().hex[:12]}:"
    try:
        yield prefix
    finally:
        client = RedisCluster.from_url(REDIS_CLUSTER_URL, socket_connect_timeout=3)
        try:
            for key in client.scan_iter(match=prefix + "*", count=1000, target_nodes="primaries"):
                client.delete(key)
        finally:
            client.close()


@pytest.fixture
def anyio_backend() -> str:
    """Default anyio backend for ``@pytest.mark.anyio`` tests (asyncio; psycopg needs it)."""
    return "asyncio"
