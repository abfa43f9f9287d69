"""The contenders: one class per runtime, one interface, one timing method.

Every contender offers ``open()``, ``prepare(history) -> thread_id`` (untimed) and
``run(thread_id) -> Sample`` which executes ONE run of the benchmark graph on that thread
(:data:`~_workload.STEPS_PER_RUN` steps) and times it with the same clocks for everybody:
``time.perf_counter()`` for wall time and ``time.process_time()`` for the CPU time of the
whole client process (all threads, so worker threads and pool threads count too).

tenxgraph is async first, so its runs are ``await graph.ainvoke(...)`` on a long-lived asyncio
loop and the clocks are read inside that loop, around the ``await``. LangGraph's
``PostgresSaver`` is its sync saver, so its runs are ``graph.invoke(...)`` and the clocks are
read around the call. The floor is the cheapest durable write a client can do: ``BEGIN``,
``INSERT`` of a payload of the same size, ``COMMIT``, pipelined in one round trip, timed the
same way (one "run" is :data:`STEPS_PER_RUN` such transactions).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from typing import Any

from _workload import (
    STEPS_PER_RUN,
    build_lg_graph,
    build_tx_graph,
    lg_history_input,
    lg_input,
    tx_history_input,
    tx_input,
)

#: Bytes of the floor's payload (a 200-character message, its JSON envelope and the state's
#: other fields come to well under this; see the results page).
FLOOR_PAYLOAD_BYTES = 1024


@dataclass(slots=True)
class Sample:
    """One timed run: wall and CPU seconds, and the number of steps it executed."""

    wall_s: float
    cpu_s: float
    steps: int

    @property
    def ms_per_step(self) -> float:
        return self.wall_s * 1e3 / self.steps

    @property
    def cpu_ms_per_step(self) -> float:
        return self.cpu_s * 1e3 / self.steps


class Contender:
    """Base class: a named runtime + store configuration."""

    family = "?"
    #: "memory", "sqlite", "postgres", "postgres+redis"
    store = "?"
    durable = True
    uses_postgres = False
    sqlite_path: str | None = None

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self) -> None:  # pragma: no cover - interface
        pass

    def close(self) -> None:  # pragma: no cover - interface
        pass

    def prepare(self, history: int) -> str:
        raise NotImplementedError

    def run(self, thread_id: str) -> Sample:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{self.name}>"


def new_thread_id(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# -- tenxgraph -----------------------------------------------------------------------------------
class TenxContender(Contender):
    """tenxgraph on one of its stores.

    Args:
        name: display name.
        store: ``"memory"``, ``"sqlite"``, ``"postgres"`` or ``"postgres+redis"``.
        durable: ``durable_checkpoint_every_step`` (``False``: one checkpoint at the end of the run).
        dsn: Postgres DSN (the bench database) for the Postgres stores.
        redis_url, redis_prefix: Redis for ``"postgres+redis"``.
        schema: Postgres schema of this contender's tables.
        sync_nodes: ``def`` nodes (run in a worker thread) instead of ``async def``.
        pool_max: ``max_size`` of the Postgres pool.
        pool_min: ``min_size`` of the Postgres pool (connections the pool opens and keeps
            from the start; the concurrency section opens as many as it has callers).
    """

    family = "tenxgraph"

    def __init__(
        self,
        name: str,
        store: str,
        *,
        durable: bool = True,
        dsn: str | None = None,
        redis_url: str | None = None,
        redis_prefix: str | None = None,
        schema: str | None = None,
        sync_nodes: bool = False,
        pool_max: int = 10,
        pool_min: int = 1,
        workdir: str | None = None,
    ) -> None:
        super().__init__(name)
        self.store = store
        self.durable = durable
        self.dsn = dsn
        self.redis_url = redis_url
        self.redis_prefix = redis_prefix
        self.schema = schema or ("tx_" + store.replace("+", "_"))
        self.sync_nodes = sync_nodes
        self.pool_max = pool_max
        self.pool_min = pool_min
        self.uses_postgres = store.startswith("postgres")
        self.workdir = workdir
        self.runner: asyncio.Runner | None = None
        self.cp: Any = None
        self.app: Any = None

    def make_checkpointer(self) -> Any:
        from tenxgraph.storage.checkpointer import (
            InMemoryCheckpointer,
            PgCheckpointer,
            SqliteCheckpointer,
        )

        if self.store == "memory":
            return InMemoryCheckpointer()
        if self.store == "sqlite":
            folder = self.workdir or tempfile.mkdtemp(prefix="tenxbench-")
            self.sqlite_path = os.path.join(folder, f"{self.schema}.sqlite")
            return SqliteCheckpointer(self.sqlite_path)
        kw: dict[str, Any] = {
            "postgres_dsn": self.dsn,
            "schema": self.schema,
            "pool_config": {"max_size": self.pool_max, "min_size": self.pool_min},
        }
        if self.store == "postgres+redis":
            kw["redis_url"] = self.redis_url
            kw["redis_prefix"] = f"{self.redis_prefix}{self.schema}:"
        return PgCheckpointer(**kw)

    def open(self) -> None:
        self.runner = asyncio.Runner()
        self.cp = self.make_checkpointer()
        self.app = build_tx_graph(self.cp, sync_nodes=self.sync_nodes)
        self.runner.run(self.cp.asetup())

    def close(self) -> None:
        if self.runner is not None:
            try:
                self.runner.run(self.cp.aclose())
            finally:
                self.runner.close()
                self.runner = None

    def config(self, thread_id: str) -> dict[str, Any]:
        return {
            "thread_id": thread_id,
            "user_id": "bench",
            "durable_checkpoint_every_step": self.durable,
            "recursion_limit": 1000,
        }

    def prepare(self, history: int) -> str:
        tid = new_thread_id("tx")
        if history >= 2:
            assert self.runner is not None
            self.runner.run(self.app.ainvoke(tx_history_input(history), self.config(tid)))
        return tid

    async def _timed(self, thread_id: str) -> Sample:
        inp = tx_input()
        cfg = self.config(thread_id)
        c0 = time.process_time()
        t0 = time.perf_counter()
        await self.app.ainvoke(inp, cfg)
        t1 = time.perf_counter()
        c1 = time.process_time()
        return Sample(t1 - t0, c1 - c0, STEPS_PER_RUN)

    def run(self, thread_id: str) -> Sample:
        assert self.runner is not None
        return self.runner.run(self._timed(thread_id))

    def arun_coro(self, coro: Any) -> Any:
        assert self.runner is not None
        return self.runner.run(coro)


# -- LangGraph -------------------------------------------------------------------------------------
class LangGraphContender(Contender):
    """LangGraph 1.x ``StateGraph`` with ``InMemorySaver`` or the sync ``PostgresSaver``.

    Args:
        store: ``"memory"`` (``InMemorySaver``) or ``"postgres"`` (``PostgresSaver`` on one
            connection, as ``PostgresSaver.from_conn_string`` makes it; with ``pool_max`` a
            ``psycopg_pool.ConnectionPool`` instead, for concurrent callers, holding
            ``pool_min`` connections from the start).
        durability: ``"sync"`` (a checkpoint after every step, written before the next step
            starts) or ``"exit"`` (at the end of the run).
    """

    family = "langgraph"

    def __init__(
        self,
        name: str,
        store: str,
        *,
        durability: str = "sync",
        dsn: str | None = None,
        pool_max: int | None = None,
        pool_min: int = 1,
    ) -> None:
        super().__init__(name)
        self.store = store
        self.durability = durability
        self.durable = durability == "sync"
        self.dsn = dsn
        self.pool_max = pool_max
        self.pool_min = pool_min
        self.uses_postgres = store == "postgres"
        self._conn: Any = None
        self.saver: Any = None
        self.app: Any = None

    def open(self) -> None:
        if self.store == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            self.saver = InMemorySaver()
        else:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg import Connection
            from psycopg.rows import dict_row

            kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
            if self.pool_max:
                from psycopg_pool import ConnectionPool

                self._conn = ConnectionPool(
                    self.dsn,
                    min_size=min(self.pool_min, self.pool_max),
                    max_size=self.pool_max,
                    kwargs=kwargs,
                    open=True,
                )
                self._conn.wait(timeout=60.0)  # every pool_min connection open before timing
            else:
                self._conn = Connection.connect(self.dsn, **kwargs)
            self.saver = PostgresSaver(self._conn)
            self.saver.setup()
        self.app = build_lg_graph(self.saver)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def config(self, thread_id: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread_id}, "recursion_limit": 1000}

    def prepare(self, history: int) -> str:
        tid = new_thread_id("lg")
        if history >= 2:
            self.app.invoke(lg_history_input(history), self.config(tid), durability=self.durability)
        return tid

    def run(self, thread_id: str) -> Sample:
        inp = lg_input()
        cfg = self.config(thread_id)
        c0 = time.process_time()
        t0 = time.perf_counter()
        self.app.invoke(inp, cfg, durability=self.durability)
        t1 = time.perf_counter()
        c1 = time.process_time()
        return Sample(t1 - t0, c1 - c0, STEPS_PER_RUN)


# -- the floor -------------------------------------------------------------------------------------
FLOOR_DDL = (
    "CREATE TABLE IF NOT EXISTS tenxbench_floor ("
    " id bigserial PRIMARY KEY, thread_id text NOT NULL, payload bytea NOT NULL)"
)
FLOOR_INSERT = "INSERT INTO tenxbench_floor (thread_id, payload) VALUES (%s, %s)"


class FloorContender(Contender):
    """A bare psycopg ``BEGIN; INSERT ...; COMMIT`` of :data:`FLOOR_PAYLOAD_BYTES` bytes,
    pipelined in ONE round trip, once per step (a "run" is :data:`STEPS_PER_RUN` of them)."""

    family = "floor"
    store = "postgres"
    uses_postgres = True

    def __init__(self, name: str, dsn: str, payload_bytes: int = FLOOR_PAYLOAD_BYTES) -> None:
        super().__init__(name)
        self.dsn = dsn
        self.payload = os.urandom(payload_bytes)
        self.conn: Any = None

    def open(self) -> None:
        import psycopg

        self.conn = psycopg.connect(self.dsn, autocommit=True)
        self.conn.execute(FLOOR_DDL)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def prepare(self, history: int) -> str:
        return new_thread_id("fl")

    def commit_once(self, thread_id: str) -> None:
        conn = self.conn
        with conn.pipeline():
            conn.execute("BEGIN")
            conn.execute(FLOOR_INSERT, (thread_id, self.payload))
            conn.execute("COMMIT")

    def run(self, thread_id: str) -> Sample:
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(STEPS_PER_RUN):
            self.commit_once(thread_id)
        t1 = time.perf_counter()
        c1 = time.process_time()
        return Sample(t1 - t0, c1 - c0, STEPS_PER_RUN)
