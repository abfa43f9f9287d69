"""The ``store`` fixture: a fresh :class:`~tenxgraph.storage.base.StoreTier` per test, for every
backend, so one suite checks that every source of truth (and every cache stack over one) keeps
the same promises.

Backends (test ids): ``memory-asyncio``, ``memory-trio``, ``sqlite-asyncio``, ``sqlite-trio``
(a file in ``tmp_path``), ``postgres`` (its own schema), ``lru+redis+postgres`` and
``lru+sqlite``, and the production topologies of docs/deployment.md: ``postgres-pgbouncer``
(through PgBouncer in transaction mode, pooler detected), ``postgres-partitioned`` (the
hash-partitioned layout) and ``lru+rediscluster+postgres`` (a three-master Redis Cluster). The embedded stores also run under trio; psycopg needs asyncio. A backend whose
module does not exist yet is skipped; once it exists, an import error fails loudly.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

_CASES = [
    pytest.param("memory", "asyncio", id="memory-asyncio"),
    pytest.param("memory", "trio", id="memory-trio"),
    pytest.param("sqlite", "asyncio", id="sqlite-asyncio"),
    pytest.param("sqlite", "trio", id="sqlite-trio"),
    pytest.param("postgres", "asyncio", id="postgres", marks=pytest.mark.postgres),
    pytest.param(
        "lru+redis+postgres",
        "asyncio",
        id="lru+redis+postgres",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    ),
    pytest.param("lru+sqlite", "asyncio", id="lru+sqlite"),
    pytest.param(
        "postgres-pgbouncer", "asyncio", id="postgres-pgbouncer", marks=pytest.mark.postgres
    ),
    pytest.param(
        "postgres-partitioned", "asyncio", id="postgres-partitioned", marks=pytest.mark.postgres
    ),
    pytest.param(
        "lru+rediscluster+postgres",
        "asyncio",
        id="lru+rediscluster+postgres",
        marks=[pytest.mark.postgres, pytest.mark.redis],
    ),
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses ``store`` once per backend (and event loop)."""
    if "store" in metafunc.fixturenames:
        metafunc.parametrize(("store_kind", "anyio_backend"), _CASES)


def _module(name: str) -> ModuleType:
    """Import ``name``; skip the test while the module has not been written yet."""
    if importlib.util.find_spec(name) is None:
        pytest.importorskip(name)
    return importlib.import_module(name)


def _postgres(request: pytest.FixtureRequest, dsn_fixture: str = "pg_dsn", **kwargs: Any) -> Any:
    mod = _module("tenxgraph.storage.postgres")
    dsn = request.getfixturevalue(dsn_fixture)
    return mod.PostgresStore(dsn, schema=request.getfixturevalue("pg_schema"), **kwargs)


def _lru() -> Any:
    return _module("tenxgraph.storage.lru").LRUCache(max_entries=1024, max_bytes=64 * 2**20)


def _redis(request: pytest.FixtureRequest) -> Any:
    mod = _module("tenxgraph.storage.redis")
    return mod.RedisCache(
        url=request.getfixturevalue("redis_url"), prefix=request.getfixturevalue("redis_prefix")
    )


def _sqlite(tmp_path: Path) -> Any:
    from tenxgraph.storage.sqlite import SqliteStore

    return SqliteStore(tmp_path / "store.db")


def _build(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if kind == "memory":
        from tenxgraph.storage.memory import MemoryStore

        return MemoryStore()
    if kind == "sqlite":
        return _sqlite(tmp_path)
    if kind == "postgres":
        return _postgres(request)
    if kind == "postgres-pgbouncer":
        return _postgres(request, "pgbouncer_dsn")
    if kind == "postgres-partitioned":
        return _postgres(request, partitions=4)
    layered = _module("tenxgraph.storage.layered")
    if kind == "lru+redis+postgres":
        return layered.LayeredStore(_postgres(request), caches=[_lru(), _redis(request)])
    if kind == "lru+rediscluster+postgres":
        cluster = _module("tenxgraph.storage.redis").RedisCache(
            url=request.getfixturevalue("redis_cluster_url"),
            prefix=request.getfixturevalue("redis_cluster_prefix"),
            cluster=True,
        )
        return layered.LayeredStore(_postgres(request), caches=[_lru(), cluster])
    if kind == "lru+sqlite":
        return layered.LayeredStore(_sqlite(tmp_path), caches=[_lru()])
    raise AssertionError(f"unknown store kind {kind!r}")


@pytest.fixture
async def store(
    store_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Any]:
    """A fresh, set-up store of kind ``store_kind``; closed after the test."""
    st = _build(store_kind, request, tmp_path)
    await st.asetup()
    try:
        yield st
    finally:
        await st.aclose()
