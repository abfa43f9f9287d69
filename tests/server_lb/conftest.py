"""Module-scoped Postgres schema and Redis prefix for the load-balancer tests whose servers are
started once per module (each module still gets its own schema and prefix)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

# The same servers as tests/conftest.py's fixtures.
PG_DSN = os.environ.get("TENXGRAPH_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TENXGRAPH_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture(scope="module")
def pg_dsn_module() -> str:
    """DSN of the test database."""
    return PG_DSN


@pytest.fixture(scope="module")
def redis_url_module() -> str:
    """URL of the test Redis server."""
    return REDIS_URL


@pytest.fixture(scope="module")
def pg_schema_module() -> Iterator[str]:
    """A fresh Postgres schema for the module; dropped with CASCADE afterwards."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    try:
        yield name
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(scope="module")
def redis_prefix_module() -> Iterator[str]:
    """A unique Redis key prefix for the module; its keys are deleted afterwards."""
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
