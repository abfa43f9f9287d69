"""Shared fixtures: real PostgreSQL and Redis, one schema / key prefix per test.

Servers come from ``TENXGRAPH_TEST_PG_DSN`` (default ``postgresql://postgres@127.0.0.1:5432/test``)
and ``TENXGRAPH_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``). ``.ci/run`` starts them
when they are not answering. Each test gets its own Postgres schema (dropped afterwards) and its
own Redis key prefix (deleted afterwards), so tests can run in parallel (``pytest -n``).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

PG_DSN = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TENXGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def pg_dsn() -> str:
    """DSN of the test database (the server must be running)."""
    return PG_DSN


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh, empty Postgres schema name for this test; dropped with CASCADE afterwards."""
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
def anyio_backend() -> str:
    """Default anyio backend for ``@pytest.mark.anyio`` tests (asyncio; psycopg needs it)."""
    return "asyncio"
