"""Checkpointer backends for the graph-level conformance suite.

Every test that requests ``backend`` (async tests) or ``sync_backend`` (sync tests) runs once per
checkpointer: ``memory``, ``sqlite`` (a file in ``tmp_path``), ``postgres`` (``PgCheckpointer``
on its own schema, LRU + Postgres) and ``postgres+redis`` (LRU + Redis + Postgres, its own key
prefix), and the production topologies (issue 18, docs/deployment.md): ``postgres-pgbouncer``
(the same database through PgBouncer in transaction mode, ``pooler`` left at its default so
the pooler is detected), ``postgres-partitioned`` (the hash-partitioned layout,
``partitions=4``) and ``postgres+rediscluster`` (LRU + a three-master Redis Cluster +
Postgres). Async tests on the embedded stores run under asyncio and trio; psycopg's async driver
needs asyncio, so the Postgres backends run under asyncio only.

A :class:`Backend` builds checkpointers on one storage location: :meth:`Backend.new` makes a
checkpointer (each ``new`` on the memory backend is an independent store), :meth:`Backend.peer`
a second instance over the same data as a given one (another process would see exactly this:
same SQLite file, same Postgres schema and Redis prefix, but its own in-process LRU; for the
memory backend the peer is the checkpointer itself, the only way to share an in-memory store).

Import ``backend_fixture`` / ``sync_backend_fixture`` (fixtures named ``backend`` and
``sync_backend``) and ``pytest_generate_tests`` into a test module (``from graph_backends import
...``): they live here, not in ``conftest.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.storage.checkpointer.base import BaseCheckpointer

__all__ = [
    "ASYNC_CASES",
    "DURABLE",
    "Backend",
    "SYNC_CASES",
    "TOPOLOGIES",
    "backend_fixture",
    "build_from_spec",
    "only",
    "pytest_generate_tests",
    "sync_backend_fixture",
]

_PG = [pytest.mark.postgres]
_PG_REDIS = [pytest.mark.postgres, pytest.mark.redis]

ASYNC_CASES = [
    pytest.param("memory", "asyncio", id="memory-asyncio"),
    pytest.param("memory", "trio", id="memory-trio"),
    pytest.param("sqlite", "asyncio", id="sqlite-asyncio"),
    pytest.param("sqlite", "trio", id="sqlite-trio"),
    pytest.param("postgres", "asyncio", id="postgres", marks=_PG),
    pytest.param("postgres+redis", "asyncio", id="postgres+redis", marks=_PG_REDIS),
    pytest.param("postgres-pgbouncer", "asyncio", id="postgres-pgbouncer", marks=_PG),
    pytest.param("postgres-partitioned", "asyncio", id="postgres-partitioned", marks=_PG),
    pytest.param("postgres+rediscluster", "asyncio", id="postgres+rediscluster", marks=_PG_REDIS),
]

SYNC_CASES = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=_PG),
    pytest.param("postgres+redis", id="postgres+redis", marks=_PG_REDIS),
    pytest.param("postgres-pgbouncer", id="postgres-pgbouncer", marks=_PG),
    pytest.param("postgres-partitioned", id="postgres-partitioned", marks=_PG),
    pytest.param("postgres+rediscluster", id="postgres+rediscluster", marks=_PG_REDIS),
]

#: The production topologies: the whole suite runs on them too.
TOPOLOGIES = frozenset({"postgres-pgbouncer", "postgres-partitioned", "postgres+rediscluster"})

#: Partition count of the ``postgres-partitioned`` backend.
PARTITIONS = 4

DURABLE = frozenset({"sqlite", "postgres", "postgres+redis"}) | TOPOLOGIES


def only(*kinds: str) -> Callable[[Any], Any]:
    """Restrict a test to some backend kinds (e.g. ``@only(*DURABLE)`` for process kills)."""

    def deco(fn: Any) -> Any:
        fn._graph_backends = frozenset(kinds)
        return fn

    return deco


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``backend_kind`` (and ``anyio_backend`` for async tests)."""
    if "backend_kind" not in metafunc.fixturenames:
        return
    wanted = getattr(metafunc.function, "_graph_backends", None)
    if inspect.iscoroutinefunction(metafunc.function):
        cases = [c for c in ASYNC_CASES if wanted is None or c.values[0] in wanted]
        metafunc.parametrize(("backend_kind", "anyio_backend"), cases)
    else:
        cases = [c for c in SYNC_CASES if wanted is None or c.values[0] in wanted]
        metafunc.parametrize("backend_kind", cases)


class Backend:
    """Builds checkpointers of one kind on one storage location (see the module docstring).

    Attributes:
        kind: ``"memory"``, ``"sqlite"``, ``"postgres"`` or ``"postgres+redis"``.
        durable: ``True`` when the data outlives the process (every kind but memory).
    """

    def __init__(self, kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.kind = kind
        self.durable = kind in DURABLE
        self._tmp = tmp_path
        self._made: list[BaseCheckpointer] = []
        self._kwargs: dict[int, dict[str, Any]] = {}
        self.pg_dsn: str | None = None
        self.pg_schema: str | None = None
        self.redis_url: str | None = None
        self.redis_prefix: str | None = None
        if kind.startswith("postgres"):
            pytest.importorskip("tenxgraph.storage.postgres")
            dsn_fixture = "pgbouncer_dsn" if kind == "postgres-pgbouncer" else "pg_dsn"
            self.pg_dsn = request.getfixturevalue(dsn_fixture)
            self.pg_schema = request.getfixturevalue("pg_schema")
        if kind == "postgres+redis":
            pytest.importorskip("tenxgraph.storage.redis")
            self.redis_url = request.getfixturevalue("redis_url")
            self.redis_prefix = request.getfixturevalue("redis_prefix")
        if kind == "postgres+rediscluster":
            self.redis_url = request.getfixturevalue("redis_cluster_url")
            self.redis_prefix = request.getfixturevalue("redis_cluster_prefix")

    def __repr__(self) -> str:
        return f"Backend({self.kind!r})"

    # -- building --------------------------------------------------------------------------------
    def spec(self, **kwargs: Any) -> dict[str, Any]:
        """A JSON-able description of this location, for :func:`build_from_spec` in a child
        process."""
        return {
            "kind": self.kind,
            "sqlite_path": str(self._tmp / "graph.db"),
            "pg_dsn": self.pg_dsn,
            "pg_schema": self.pg_schema,
            "redis_url": self.redis_url,
            "redis_prefix": self.redis_prefix,
            "kwargs": kwargs,
        }

    def new(self, **kwargs: Any) -> BaseCheckpointer:
        """A checkpointer on this backend's location with the facade's ``kwargs``
        (``state_history_limit``, ``enforce_user_isolation``)."""
        if self.kind == "memory":
            from tenxgraph.storage.checkpointer import InMemoryCheckpointer

            cp: BaseCheckpointer = InMemoryCheckpointer(**kwargs)
        else:
            cp = build_from_spec(self.spec(**kwargs))
        self._made.append(cp)
        self._kwargs[id(cp)] = dict(kwargs)
        return cp

    def peer(self, cp: BaseCheckpointer) -> BaseCheckpointer:
        """Another instance over the same data as ``cp`` (``cp`` itself for memory)."""
        if self.kind == "memory":
            return cp
        return self.new(**self._kwargs.get(id(cp), {}))

    # -- teardown --------------------------------------------------------------------------------
    async def aclose(self) -> None:
        for cp in reversed(self._made):
            await cp.aclose()
        self._made.clear()

    def close(self) -> None:
        for cp in reversed(self._made):
            cp.close()
        self._made.clear()


def build_from_spec(spec: dict[str, Any]) -> BaseCheckpointer:
    """Build the checkpointer a :meth:`Backend.spec` describes (also used by child processes)."""
    kind = spec["kind"]
    kwargs = dict(spec.get("kwargs") or {})
    if kind == "memory":
        from tenxgraph.storage.checkpointer import InMemoryCheckpointer

        return InMemoryCheckpointer(**kwargs)
    if kind == "sqlite":
        from tenxgraph.storage.checkpointer import SqliteCheckpointer

        return SqliteCheckpointer(spec["sqlite_path"], **kwargs)
    from tenxgraph.storage.checkpointer import PgCheckpointer

    if kind == "postgres+redis":
        kwargs.update(redis_url=spec["redis_url"], redis_prefix=spec["redis_prefix"])
    if kind == "postgres+rediscluster":
        kwargs.update(
            redis_url=spec["redis_url"], redis_prefix=spec["redis_prefix"], redis_cluster=True
        )
    if kind == "postgres-partitioned":
        kwargs.setdefault("partitions", PARTITIONS)
    return PgCheckpointer(spec["pg_dsn"], schema=spec["pg_schema"], **kwargs)


@pytest.fixture(name="backend")
async def backend_fixture(
    backend_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Backend]:
    """The :class:`Backend` of this test (async tests); closes every checkpointer it made."""
    b = Backend(backend_kind, request, tmp_path)
    try:
        yield b
    finally:
        await b.aclose()


@pytest.fixture(name="sync_backend")
def sync_backend_fixture(
    backend_kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Backend]:
    """The :class:`Backend` of this test (sync tests, using ``invoke``); closes what it made."""
    b = Backend(backend_kind, request, tmp_path)
    try:
        yield b
    finally:
        b.close()
