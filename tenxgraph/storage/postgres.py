"""``PostgresStore``: PostgreSQL as the source of truth (:class:`~tenxgraph.storage.base.StoreTier`).

psycopg 3 (async) over a ``psycopg_pool.AsyncConnectionPool`` of autocommit connections. Every
operation is ONE statement, so one round trip and, for writes, one commit:

* a checkpoint write is a single statement of data-modifying CTEs (see
  :data:`tenxgraph.storage._sql.CHECKPOINT_CAS`): the compare-and-swap ``UPDATE threads ...
  WHERE version = expected RETURNING version`` gates the checkpoint insert, the insert of only
  the new message rows (``unnest`` of two arrays), and the pruning of old versions and
  unreachable message rows (a write outside a run lease, or with nothing to prune, sends a
  variant without those CTEs: :data:`tenxgraph.storage._sql.CHECKPOINT_WRITES`). Zero rows back
  means the CAS lost; only then a second query tells ``StaleStateError`` from forbidden
  access. Nothing of a losing write is ever visible;
* reads assemble a version's messages in the same statement that finds the version;
* ``history`` is two statements whatever the number of versions.

Because no statement ever spans two round trips there is nothing to pipeline on the hot path
and no transaction is held open across an ``await``; no lock in this process serializes
queries, so concurrency is bounded by the pool only.

Errors are translated here, at the one boundary with the driver: connection loss, pool
timeouts and SQLSTATE classes 08, 40, 53 and 57 become :class:`TransientStorageError`
(``context``: ``backend="postgresql"``, ``sqlstate``), anything else :class:`StorageError`;
every message passes through :func:`~tenxgraph.core.exceptions.redact`, so a DSN's password
never reaches an error, a log line or a span. A statement that fails because its pooled
connection turned out dead (e.g. after ``pg_terminate_backend`` or a server restart) is retried
once on a checked connection.

Checkpoint writes are idempotent: each carries a token (inside its ``values``, see
``tenxgraph.storage.base.CheckpointWrite.token``). When the connection breaks after the
write was sent, the store cannot know whether the server committed it; it reads the thread back
(``tenxgraph.storage._sql.WRITE_OUTCOME_PROBE``): the new version holding this write's
exact ``values`` means it committed (success, span event ``tenxgraph.commit.recovered``); the
thread still at the expected version means it did not (the write is sent again, once); another
write at that version is a real conflict (``StaleStateError``). When the read-back fails too
(it gives up after ``READ_BACK_BUDGET_S`` = 5 s in all, whatever the pool's ``timeout``), or
cannot tell (the version was pruned since), ``CommitOutcomeUnknownError`` says so; it is
never reported as a conflict.

Pools and event loops: the pool is created with ``open=False`` and opened lazily by the first
async call, inside the running loop. A call from another event loop (e.g. a second
``asyncio.run``) gets a pool of its own for that loop. A pool passed in by the application
(``pool=``) is used as is and never closed by the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import inspect
import logging
import math
import operator
import os
import re
import socket
import time
import weakref
from collections.abc import Awaitable, Callable, Generator, Sequence
from typing import Any, LiteralString, cast

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import ExecStatus
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout, TooManyRequests

from tenxgraph._redact import secret_candidates
from tenxgraph._url_check import url_problem
from tenxgraph.core._portal import ensure_no_running_loop
from tenxgraph.core.exceptions import (
    CommitOutcomeUnknownError,
    ConfigError,
    LedgerWriteError,
    SchemaVersionError,
    SerializationError,
    StorageConnectionError,
    StorageError,
    TenxGraphError,
    TransientStorageError,
    fence_lost,
    forbidden,
    redact,
    stale,
)
from tenxgraph.records import (
    CheckpointWrite,
    LeaseGrant,
    LedgerEntry,
    Range,
    StoredCheckpoint,
    ThreadInfo,
    ThreadKey,
    ranges_len,
)
from tenxgraph.run_records import RunRecord
from tenxgraph.storage import _rotate, _sql, serde
from tenxgraph.storage._lease_wake import LeaseWaiter, LeaseWakeups
from tenxgraph.storage._migrations import CURRENT_VERSION, MAX_PARTITIONS, MIGRATIONS, render_step
from tenxgraph.storage._pg_connect import aconnect_first, connect_first, parse_problem
from tenxgraph.storage._pg_types import BigInt, ByteaArray, Int8Array, Text, register
from tenxgraph.storage._pool_config import check_pool_config
from tenxgraph.storage._pq_exec import PqStatement, int8_rows, usable
from tenxgraph.storage._pq_exec import execute as pq_execute
from tenxgraph.storage._tasks import cancel_guards, keep_task, start_guard
from tenxgraph.storage.base import report_skipped, threads_from_rows
from tenxgraph.storage.memory import ledger_missing_thread, min_seq_of, thread_missing
from tenxgraph.storage.retention import Removal, row_counts
from tenxgraph.telemetry import ATTR, EVENT, SPAN, SpanKind, add_conflict_event, enabled, span

__all__ = [
    "CHECK_TIMEOUT_S",
    "DEFAULT_ANSWER_TIMEOUT_S",
    "DEFAULT_POOL_CONFIG",
    "POOLERS",
    "TCP_KEEPALIVES",
    "PostgresStore",
    "check_answer_timeout",
    "normalize_dsn",
]

logger = logging.getLogger("tenxgraph.postgres")

#: Seconds between two attempts to open the run lease's listening connection again.
LISTEN_RETRY_S = 1.0

#: Accepted values of ``pooler=``: ``"auto"`` (detect a pooler on the first connection),
#: ``"pgbouncer"`` (a transaction pooler that does not keep server-side prepared statements:
#: never prepare) and ``None`` (direct connection, or a pooler that keeps prepared statements,
#: e.g. PgBouncer 1.21+ with ``max_prepared_statements`` > 0: prepare, no detection).
POOLERS = ("auto", "pgbouncer", None)

#: SQLSTATEs of a server-side prepared statement that a transaction pooler lost or mixed up
#: between server connections (invalid SQL statement name, duplicate prepared statement): the
#: statement did not run, so it is retried unprepared.
#: Seconds the read-back after an ambiguous commit may take in all (every try, connection waits
#: included, whatever the pool's ``timeout``) before ``CommitOutcomeUnknownError``.
READ_BACK_BUDGET_S = 5.0
#: Default of ``answer_timeout_s``: seconds a statement may wait for the server's answer.
DEFAULT_ANSWER_TIMEOUT_S = 10.0

_PREPARED_LOST = frozenset({"26000", "42P05"})

#: Pool settings used when ``pool_config`` does not give them. ``prepare_threshold`` is the
#: number of executions of a statement on one connection after which psycopg prepares it
#: server-side (``None``: never, e.g. behind PgBouncer in transaction mode before 1.21).
DEFAULT_POOL_CONFIG: dict[str, Any] = {
    "min_size": 1,
    "max_size": 10,
    "timeout": 30.0,
    "prepare_threshold": 5,
}

#: SQLSTATE classes that mean "try again": connection exception, transaction rollback
#: (serialization failure, deadlock), insufficient resources, operator intervention.
_TRANSIENT_CLASSES = frozenset({"08", "40", "53", "57"})
#: SQLSTATEs (besides class 08) after which the connection itself is gone.
_CONNECTION_GONE = frozenset({"57P01", "57P02", "57P03"})

_SQLALCHEMY_DRIVER = re.compile(r"^(postgres(?:ql)?)\+[A-Za-z0-9_]+(?=://)", re.IGNORECASE)

_Rows = list[tuple[Any, ...]]
_Op = tuple[LiteralString | bytes, dict[str, Any]]

_TUPLES_OK = ExecStatus.TUPLES_OK

#: Attribute of a psycopg connection holding the cursor the store reuses on it (see
#: :func:`_adopt`); psycopg_pool keeps its own bookkeeping on pooled connections the same way.
_CURSOR_ATTR = "_tenxgraph_cursor"

#: PostgreSQL type of every parameter of the checkpoint writes (``_sql.CHECKPOINT_WRITES``),
#: which go through libpq directly (:mod:`tenxgraph.storage._pq_exec`).
_WRITE_KINDS: dict[str, str] = {
    "thread_id": "text",
    "owner": "text",
    "values": "bytea",
    "ranges": "int8[]",
    "min_seq": "int8",
    "next_seq": "int8",
    "status": "text",
    "created_at": "float8",
    "seqs": "int8[]",
    "datas": "bytea[]",
    "fence": "int8",
    "release": "bool",
    "expected": "int8",
    "prune_to": "int8",
    "expect_seen": "int8",
}


def normalize_dsn(dsn: str) -> str:
    """A libpq DSN from ``dsn``, accepting SQLAlchemy-style URLs.

    ``postgresql+asyncpg://u@h/db`` and ``postgresql+psycopg://u@h/db`` (any ``+driver``)
    become ``postgresql://u@h/db``; anything else is returned stripped, unchanged.

    Args:
        dsn: a libpq URL (``postgresql://...``), a SQLAlchemy URL or a key/value DSN
            (``host=... dbname=...``).

    Returns:
        The DSN libpq understands.
    """
    return _SQLALCHEMY_DRIVER.sub(r"\1", dsn.strip(), count=1)


@dataclasses.dataclass(slots=True)
class _LoopPool:
    """The pool of one event loop; ``ready`` once ``open()`` has completed; ``guard`` is the
    task that closes it when the loop shuts down (see :func:`_close_on_loop_shutdown`)."""

    pool: AsyncConnectionPool
    guard: asyncio.Task[None] | None = None
    ready: bool = False
    lock: asyncio.Lock = dataclasses.field(default_factory=asyncio.Lock)


@dataclasses.dataclass(slots=True)
class _LeaseListen:
    """The lease wake-ups of one event loop: the waiting runs (``hub``), the task holding the
    ``LISTEN`` connection that feeds them (``guard``), set ``tried`` once its first attempt to
    listen ended (up or failed)."""

    hub: LeaseWakeups
    guard: asyncio.Task[None]
    tried: asyncio.Event


class PostgresStore:
    """PostgreSQL source of truth implementing :class:`~tenxgraph.storage.base.StoreTier`.

    Args:
        dsn: libpq DSN or URL of the database; SQLAlchemy URLs (``postgresql+asyncpg://``,
            ``postgresql+psycopg://``) are accepted. Required unless ``pool`` is given.
        pool: an application-owned ``AsyncConnectionPool`` to use instead of creating one. It
            is opened if needed, never closed by the store; autocommit connections are
            recommended (otherwise each statement runs in its own explicit transaction, which
            costs a round trip for the ``COMMIT``).
        pool_config: settings for the pool the store creates (with ``pool``, only ``timeout``:
            how long the first connection is retried; any other key is refused):
            ``min_size`` (default 1), ``max_size`` (default 10), ``timeout`` (seconds to wait
            for a connection, default 30), ``max_waiting``, ``max_lifetime``, ``max_idle``,
            ``reconnect_timeout``, ``num_workers``, ``name``, ``connection_class``,
            ``configure``, ``reset``, ``check`` (as in ``psycopg_pool``),
            ``prepare_threshold`` (default 5; ``None`` disables server-side prepared
            statements) and ``kwargs`` (extra connection arguments).
        schema: Postgres schema holding the tables, created by ``setup`` when missing.
        table_prefix: prefix of every table and index name, so the tables can live beside an
            application's own.
        connect_timeout_s: seconds allowed to establish one connection (libpq
            ``connect_timeout``, rounded up to whole seconds, at least 2).
        answer_timeout_s: seconds a statement of the store may wait for the server's answer
            (default 10; ``None``: forever). Past it the connection is shut down and the call
            fails as on a lost connection (not retried): a read with ``TransientStorageError``
            within ``answer_timeout_s + CHECK_TIMEOUT_S`` of getting its connection, a
            checkpoint write by reading its outcome back (``READ_BACK_BUDGET_S``), so a
            black-holed connection (no packet in either direction) ends a write within
            ``answer_timeout_s + CHECK_TIMEOUT_S + READ_BACK_BUDGET_S`` (10 + 2 + 5 s by
            default), committed or ``CommitOutcomeUnknownError``. The store's connections also get TCP keepalives
            (libpq ``keepalives_idle`` 30 s, ``keepalives_interval`` 10 s,
            ``keepalives_count`` 3) unless the DSN or ``pool_config["kwargs"]`` sets them.
        pooler: what sits between the store and Postgres. ``"auto"`` (default): the first
            connection compares the backend process id the server reports
            (``pg_backend_pid()``) with the one the connection was given at startup; they
            differ only when a pooler or proxy answers in the server's place (PgBouncer sends
            its own cancel key), and then statements are never prepared (psycopg's
            ``prepare_threshold=None``): one extra query per store and event loop.
            ``"pgbouncer"``: a transaction-mode pooler that does not keep server-side
            prepared statements (PgBouncer before 1.21, or with
            ``max_prepared_statements = 0``): never prepare, no detection. ``None``: only for
            a direct connection or a pooler that keeps prepared statements (PgBouncer 1.21+
            with ``max_prepared_statements`` > 0): prepare after ``prepare_threshold``
            executions, no detection; through an older pooler another client's statement
            of the same psycopg name (``_pg3_N``) could run instead of ours. A statement that
            fails because a pooler lost its prepared statement (SQLSTATE 26000 or 42P05,
            raised before it runs) is retried unprepared, and the store stops preparing (one
            warning on the ``tenxgraph.postgres`` logger).
        partitions: ``None`` (default) for the plain layout; an int N (1 to 1024) to have
            ``setup`` create the thread-keyed tables hash-partitioned on ``thread_id`` into N
            partitions. Only a fresh schema can be created partitioned; the statements are the
            same for both layouts (every one filters on ``thread_id``, so each prunes to one
            partition). Later migration steps follow the layout found in the database.
        lease_listen: wake a run waiting for a thread's lease when it is released (one
            ``LISTEN`` connection per store and event loop, see :meth:`lease_waiter`);
            ``False``: waiting runs poll.
        listen_dsn: the DSN of that connection (a direct or session-mode one when ``dsn``
            goes through a transaction-mode pooler); ``None``: the store's own settings,
            not used behind a pooler (waiting runs then poll).

    Raises:
        ConfigError: ``CONFIG_001`` when neither or both of ``dsn`` and ``pool`` are given, the
            DSN cannot be parsed, ``pool`` is not an ``AsyncConnectionPool``, ``pool_config``
            holds an unknown key or a value of the wrong type or range (see
            :func:`~tenxgraph.storage._pool_config.check_pool_config`), ``pooler`` is not one
            of :data:`POOLERS` (or is ``"pgbouncer"`` with a non-``None``
            ``prepare_threshold``), ``partitions`` is not an int from 1 to 1024,
            ``lease_listen`` is not a bool or ``listen_dsn`` is empty.

    Example:
        >>> store = PostgresStore("postgresql://app@127.0.0.1/app", schema="agents")
        >>> await store.asetup()  # doctest: +SKIP
    """

    #: tier name used in telemetry.
    name = "postgresql"

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: AsyncConnectionPool | None = None,
        pool_config: dict[str, Any] | None = None,
        schema: str = "public",
        table_prefix: str = "tenxgraph_",
        connect_timeout_s: float = 5.0,
        pooler: str | None = "auto",
        partitions: int | None = None,
        answer_timeout_s: float | None = DEFAULT_ANSWER_TIMEOUT_S,
        lease_listen: bool = True,
        listen_dsn: str | None = None,
    ) -> None:
        self.answer_timeout_s = check_answer_timeout(answer_timeout_s)
        if not isinstance(lease_listen, bool):
            raise ConfigError(
                f"lease_listen must be True or False, not {lease_listen!r}",
                context={"key": "lease_listen"},
            )
        if listen_dsn is not None and (not isinstance(listen_dsn, str) or not listen_dsn.strip()):
            raise ConfigError(
                "listen_dsn must be a non-empty DSN string or None", context={"key": "listen_dsn"}
            )
        #: a run waiting for a lease is woken by the release (``LISTEN``), else it polls
        self.lease_listen = lease_listen
        #: the DSN of the lease wake-up connection (``None``: the store's own settings)
        self.listen_dsn = listen_dsn
        if pooler not in POOLERS:
            raise ConfigError(
                f"pooler must be one of {list(POOLERS)}, got {pooler!r}",
                context={"key": "pooler"},
            )
        if partitions is not None and (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= MAX_PARTITIONS
        ):
            raise ConfigError(
                f"partitions must be None (plain tables) or an int from 1 to {MAX_PARTITIONS}, "
                f"got {partitions!r}",
                context={"key": "partitions"},
            )
        if (dsn is None) == (pool is None):
            raise ConfigError(
                "PostgresStore needs exactly one of dsn= (a connection string) or pool= (an "
                "AsyncConnectionPool)",
                context={"key": "dsn"},
            )
        if not schema:
            raise ConfigError("schema must be a non-empty name", context={"key": "schema"})
        if pool is not None and not isinstance(pool, AsyncConnectionPool):
            raise ConfigError(
                f"pool must be a psycopg_pool.AsyncConnectionPool, got {type(pool).__name__}",
                context={"key": "pool"},
            )
        pool_config = check_pool_config(pool_config, app_pool=pool is not None)
        self._dsn = normalize_dsn(dsn) if dsn is not None else None
        self._user_pool = pool
        self._user_pool_ready = False
        self.schema = schema
        self.table_prefix = table_prefix
        self.connect_timeout_s = float(connect_timeout_s)
        self.pooler = pooler
        self.partitions = partitions
        #: ``True`` once statements are sent unprepared (``pooler="pgbouncer"``, or a pooler
        #: found losing prepared statements).
        self.unprepared = pooler == "pgbouncer"
        self._pooler_checked = pooler != "auto"
        if self.unprepared and (pool_config or {}).get("prepare_threshold") is not None:
            raise ConfigError(
                "pooler='pgbouncer' sends statements unprepared; drop "
                "pool_config['prepare_threshold'] (or set it to None)",
                context={"key": "pool_config"},
            )

        conninfo = self._dsn if self._dsn is not None else str(getattr(pool, "conninfo", ""))
        problem = url_problem(conninfo)
        if problem:
            raise ConfigError(f"cannot use the Postgres DSN: {problem}", context={"key": "dsn"})
        #: every string of the DSN that may be (part of) its password, masked wherever a
        #: message quotes it.
        candidates = secret_candidates(conninfo)
        try:
            params = conninfo_to_dict(conninfo)
        except psycopg.Error as exc:
            raise ConfigError(
                f"cannot parse the Postgres DSN: {parse_problem(exc, candidates)}",
                context={"key": "dsn"},
            ) from None
        password = str(params.get("password") or "")
        self._secrets: tuple[str, ...] = tuple(
            sorted({password, *candidates} - {""}, key=len, reverse=True)
        )
        user = params.get("user")
        self._user: str | None = str(user) if user is not None else None
        host = str(params.get("host") or params.get("hostaddr") or "localhost").split(",")[0]
        port = str(params.get("port") or "5432").split(",")[0]
        dbname = params.get("dbname") or params.get("user")
        self._target = redact(f"{host}:{port}/{dbname or ''}", self._secrets)

        self._pool_args, self._conn_kwargs = self._pool_settings(pool_config, params)
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPool] = (
            weakref.WeakKeyDictionary()
        )
        self._lease_listens: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LeaseListen] = (
            weakref.WeakKeyDictionary()
        )
        weakref.finalize(self, cancel_guards, self._lease_listens).atexit = False
        # A store dropped without aclose() closes its pools on their loops (no pending task
        # destroyed by the garbage collector, no connection left open on the server).
        weakref.finalize(self, _release_pools, self._pools).atexit = False

        # SQL rendered once for this schema and prefix, and encoded once: psycopg looks a
        # statement's parsed form up by its bytes, whose hash Python computes once per object.
        texts = _sql.render_all(schema, table_prefix)
        q = {name: text.encode() for name, text in texts.items()}
        self._q: dict[str, bytes] = q
        self._mac_key: bytes | None = None
        self._q_cas = q["CHECKPOINT_CAS"]
        # The checkpoint writes (one per durable step) skip psycopg's cursor: numbered and
        # typed once here, sent through libpq by tenxgraph.storage._pq_exec. Each write sends
        # the variant that holds only the CTEs it needs (_sql.CHECKPOINT_WRITES).
        self._writes: dict[tuple[bool, bool, bool], tuple[bytes, PqStatement]] = {
            key: (q[st.name], PqStatement(*_sql.positional(texts[st.name]), _WRITE_KINDS))
            for key, st in _sql.CHECKPOINT_WRITES.items()
        }
        self._q_since = q["READ_SINCE"]
        # LEASE_READ is longer than psycopg keeps parsed: sent numbered ($n) on a raw cursor.
        self._q_lease_read, names = _sql.positional(texts["LEASE_READ"])
        self._lease_read_args = operator.itemgetter(*names)
        self._migrations_table = _sql.qualified_name(schema, table_prefix, "migrations")
        self._threads_table = _sql.qualified_name(schema, table_prefix, "threads")
        digest = hashlib.blake2b(
            f"tenxgraph:{schema}:{table_prefix}".encode(), digest_size=8
        ).digest()
        self._lock_key = int.from_bytes(digest, "big", signed=True)

        namespace = f"{dbname}|{schema}" if dbname else schema
        self._attrs: dict[str, Any] = {
            ATTR.DB_SYSTEM: "postgresql",
            ATTR.DB_NAMESPACE: redact(namespace, self._secrets),
            ATTR.SERVER_ADDRESS: redact(host, self._secrets),
            ATTR.TIER: self.name,
        }
        if port.isdigit():
            self._attrs[ATTR.SERVER_PORT] = int(port)

    def __repr__(self) -> str:
        return (
            f"PostgresStore(target={self._target!r}, schema={self.schema!r}, "
            f"table_prefix={self.table_prefix!r})"
        )

    # -- configuration ---------------------------------------------------------------------------
    def _pool_settings(
        self, pool_config: dict[str, Any] | None, params: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Split ``pool_config`` into pool arguments and connection arguments."""
        # keys and values were checked by check_pool_config in __init__
        cfg = {**DEFAULT_POOL_CONFIG, **(pool_config or {})}
        threshold = cfg.pop("prepare_threshold")
        conn_kwargs: dict[str, Any] = {
            "autocommit": True,
            "prepare_threshold": None if self.pooler == "pgbouncer" else threshold,
            "connect_timeout": max(2, math.ceil(self.connect_timeout_s)),
        }
        if "application_name" not in params:
            conn_kwargs["application_name"] = "tenxgraph"
        # A dead peer or a black-holed route is noticed by the kernel (idle connections in
        # the pool too), not only by the answer timeout of a statement in flight.
        if not any(k.startswith("keepalives") for k in params):
            conn_kwargs.update(TCP_KEEPALIVES)
        conn_kwargs.update(cfg.pop("kwargs", None) or {})
        cfg["max_size"] = max(int(cfg["max_size"]), int(cfg["min_size"]))
        return cfg, conn_kwargs

    # -- pools -----------------------------------------------------------------------------------
    async def _get_pool(self) -> AsyncConnectionPool:
        """The open pool for the running event loop (created and opened on first use)."""
        if self._user_pool is not None:
            if not self._user_pool_ready:
                if self._user_pool.closed:
                    kwargs: Any = self._user_pool.kwargs
                    if callable(kwargs):  # psycopg_pool also takes a (possibly async) callable
                        kwargs = kwargs()
                        if inspect.isawaitable(kwargs):
                            kwargs = await kwargs
                    await self._first_connection(str(self._user_pool.conninfo), dict(kwargs or {}))
                    await self._user_pool.open()
                await self._detect_pooler(self._user_pool)
                self._user_pool_ready = True
            return self._user_pool
        loop = asyncio.get_running_loop()
        entry = self._pools.get(loop)
        if entry is None:
            self._retire_dead_loops()
            pool = AsyncConnectionPool(
                self._dsn or "", kwargs=dict(self._conn_kwargs), open=False, **self._pool_args
            )
            if self.answer_timeout_s is not None:
                # pool.check() (the error path's sweep of idle connections) probes each one
                # with an empty query: bounded too, or a black-holed idle connection hangs it.
                pool.check_connection = _bounded_check(  # type: ignore[method-assign]  # instance override of psycopg_pool's static probe
                    min(self.answer_timeout_s, CHECK_TIMEOUT_S)
                )
            # Tasks of the store (the guard, the pool's workers) start in an empty context:
            # one copied from the caller would hold the caller's run, hence the checkpointer,
            # and keep an unclosed store alive forever.
            guard = loop.create_task(_close_on_loop_shutdown(pool), context=contextvars.Context())
            entry = _LoopPool(pool, keep_task(guard))
            self._pools[loop] = entry
        if not entry.ready:
            async with entry.lock:  # concurrent first callers all wait here
                if not entry.ready:
                    await self._first_connection(self._dsn or "", self._conn_kwargs)
                    await loop.create_task(entry.pool.open(), context=contextvars.Context())
                    await self._detect_pooler(entry.pool)
                    entry.ready = True
        return entry.pool

    async def _first_connection(self, conninfo: str, kwargs: dict[str, Any]) -> None:
        """Connect once before a pool opens, so a permanent failure (authentication, unknown
        role or database, unresolvable host, TLS) raises at once instead of after the pool's
        timeout, and a transient one is retried with one log line per attempt
        (:mod:`tenxgraph.storage._pg_connect`)."""
        conn = await aconnect_first(
            conninfo,
            dict(kwargs),
            timeout_s=float(self._pool_args.get("timeout", 30.0)),
            target=self._target,
            user=self._user,
            secrets=self._secrets,
        )
        await conn.close()

    def _retire_dead_loops(self) -> None:
        """Forget the pools of event loops that are closed (their tasks died with them)."""
        for loop, entry in list(self._pools.items()):
            if loop.is_closed():
                self._pools.pop(loop, None)
                _abandon(entry.pool)

    def pool_stats(self) -> dict[str, int]:
        """``psycopg_pool`` statistics of the current event loop's pool (``{}`` if none yet).

        Keys as in ``AsyncConnectionPool.get_stats()``: ``pool_size``, ``pool_available``,
        ``requests_waiting``, ``requests_num``, ``connections_num`` ...
        """
        if self._user_pool is not None:
            return self._user_pool.get_stats()
        try:
            entry = self._pools.get(asyncio.get_running_loop())
        except RuntimeError:
            entry = None
        return {} if entry is None else entry.pool.get_stats()

    async def aclose(self) -> None:
        """Close the pools this store created; idempotent. An application's ``pool=`` is left
        open. A later call opens a fresh pool."""
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, listen in list(self._lease_listens.items()):
            self._lease_listens.pop(loop, None)
            if loop is current:
                listen.guard.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listen.guard
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    loop.call_soon_threadsafe(listen.guard.cancel)
        for loop, entry in list(self._pools.items()):
            self._pools.pop(loop, None)
            if loop is current:
                _CLOSED_POOLS.add(entry.pool.name)
                await entry.pool.close()
                if entry.guard is not None:
                    entry.guard.cancel()
            elif loop.is_closed():
                _abandon(entry.pool)
            elif loop.is_running() and entry.guard is not None:
                loop.call_soon_threadsafe(entry.guard.cancel)  # the guard closes the pool

    # -- execution and error translation ---------------------------------------------------------
    async def _fetch(
        self,
        query: bytes,
        params: dict[str, Any] | tuple[Any, ...],
        *,
        retry_dead: bool = True,
        wait_s: float | None = None,
        small: bool = False,
        pq: PqStatement | None = None,
    ) -> _Rows:
        """Run one statement on a pooled connection and return its rows (binary results).

        Retried once, on a checked connection, when the pooled connection was found dead
        (``retry_dead``); otherwise such a failure raises a ``TransientStorageError``
        for which ``_maybe_sent`` is true (the statement may have run). ``wait_s`` (seconds)
        caps the wait for a pooled connection below the pool's own ``timeout``. ``small``:
        the answer is small (a checkpoint write's, a read against a cached copy), so the
        connection's long-lived cursor runs it (a cursor keeps its last result until its next
        statement); any other statement gets a cursor of its own. ``params`` as a tuple: the
        statement is numbered (``$n``, see :func:`tenxgraph.storage._sql.positional`) and runs
        on a raw cursor of its own. ``pq``: the same statement prepared for libpq
        (:mod:`tenxgraph.storage._pq_exec`), run that way (its one ``int8`` column decoded)
        when the connection allows it; ``query`` is used otherwise.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
            StorageError: ``STORAGE_000`` on any other driver error.
        """
        for attempt in (0, 1):
            pool = await self._get_pool_translated()
            watchdog: _AnswerWatchdog | None = None
            try:
                # getconn/putconn rather than pool.connection(): the statement commits by
                # itself (autocommit), so the context's extra commit() check is not needed;
                # putconn still rolls back or discards a connection left in a bad state.
                conn = await (pool.getconn() if wait_s is None else pool.getconn(timeout=wait_s))
                watchdog = _AnswerWatchdog.arm(conn, self.answer_timeout_s)
                try:
                    if self.unprepared and conn.prepare_threshold is not None:
                        conn.prepare_threshold = None
                    if pq is not None and type(params) is dict and usable(conn):
                        return int8_rows(await pq_execute(conn, pq, params))
                    cur = getattr(conn, _CURSOR_ATTR, None) or _adopt(conn)
                    if type(params) is tuple:
                        cur = psycopg.AsyncRawCursor(conn, row_factory=tuple_row)
                    elif not small:
                        cur = conn.cursor(row_factory=tuple_row)
                    if conn.autocommit:
                        await cur.execute(query, params, binary=True)
                    else:  # an application pool without autocommit
                        async with conn.transaction():
                            await cur.execute(query, params, binary=True)
                    res = cur.pgresult
                    if res is None or res.status != _TUPLES_OK:
                        return []
                    return await cur.fetchall()
                finally:
                    if watchdog is not None:
                        watchdog.disarm()
                    await pool.putconn(conn)
            except psycopg.Error as raw:
                exc = raw
                if watchdog is not None and watchdog.fired:
                    exc = psycopg.OperationalError(
                        f"no answer from the server within answer_timeout_s="
                        f"{self.answer_timeout_s} s (the connection was shut down)"
                    )
                gone = _connection_gone(exc)
                if gone:
                    await _check_pool(pool)
                # A connection found dead is retried once on a checked one, but not one that
                # went silent (the answer timeout fired): the route itself may be lost, and a
                # retry would wait for the pool's timeout on top of the answer timeout.
                if attempt == 0 and gone and retry_dead and not (watchdog and watchdog.fired):
                    continue
                if attempt == 0 and getattr(exc, "sqlstate", None) in _PREPARED_LOST:
                    self._stop_preparing()
                    continue
                if isinstance(exc, PoolTimeout):
                    refused = await self._refused_for_good()
                    if refused is not None:
                        raise refused from None
                err = self._translate(exc)
                if gone:
                    err._tx_maybe_sent = True  # type: ignore[attr-defined]
                raise err from None
            except UnicodeEncodeError:
                raise StorageError(
                    "a thread id, user id or status is not valid Unicode text (lone "
                    "surrogate); Postgres text columns cannot store it",
                    context={"backend": "postgresql", "sqlstate": None},
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _detect_pooler(self, pool: AsyncConnectionPool) -> None:
        """With ``pooler="auto"``, once per store: stop preparing statements when a pooler
        answers in the server's place (the backend pid given at startup is not the server's)."""
        if self._pooler_checked:
            return
        async with pool.connection() as conn:
            cur = await conn.execute(self._q["BACKEND_PID"], prepare=False)
            row = await cur.fetchone()
            pooled = row is not None and row[0] != conn.info.backend_pid
        if pooled and not self.unprepared:
            logger.info(
                "Postgres at %s is reached through a pooler: statements are sent unprepared",
                self._target,
            )
            self._stop_preparing(quiet=True)
        self._pooler_checked = True

    def _stop_preparing(self, *, quiet: bool = False) -> None:
        """A pooler lost a prepared statement: send every statement unprepared from now on
        (connections already open switch at their next use; new ones start so)."""
        if not self.unprepared and not quiet:
            logger.warning(
                "Postgres at %s lost a server-side prepared statement: a transaction-mode "
                "pooler (PgBouncer < 1.21?) is in between; sending statements unprepared from "
                "now on (pass pooler='pgbouncer' to start so)",
                self._target,
            )
        self.unprepared = True
        self._conn_kwargs["prepare_threshold"] = None
        for entry in list(self._pools.values()):
            # the store builds its own pools with a dict of connection arguments
            cast("dict[str, Any]", entry.pool.kwargs)["prepare_threshold"] = None

    async def _refused_for_good(self) -> StorageConnectionError | None:
        """After a pool timeout, try one connection (error path only): when the server now
        refuses for good (password changed, role or database dropped while the pool was
        open), return that ``StorageConnectionError`` to raise instead of a retryable
        timeout; ``None`` when the failure is transient."""
        if self._dsn is None:
            return None  # an application's pool: its connection arguments are its own
        try:
            conn = await aconnect_first(
                self._dsn,
                dict(self._conn_kwargs),
                timeout_s=0.0,
                target=self._target,
                user=self._user,
                secrets=self._secrets,
            )
        except StorageConnectionError as exc:
            return exc
        except StorageError:
            return None  # transient: the timeout stands
        await conn.close()
        return None

    async def _get_pool_translated(self) -> AsyncConnectionPool:
        try:
            return await self._get_pool()
        except psycopg.Error as exc:
            raise self._translate(exc) from None

    def _translate(self, exc: psycopg.Error) -> StorageError:
        """The tenxgraph error for a driver error (message redacted, never raw)."""
        sqlstate = getattr(exc, "sqlstate", None)
        context = {"backend": "postgresql", "sqlstate": sqlstate}
        detail = redact(" ".join(str(exc).split()), self._secrets) or type(exc).__name__
        if isinstance(exc, PoolClosed):
            return StorageError(
                f"the Postgres connection pool for {self._target} is closed: {detail}",
                context=context,
            )
        if isinstance(exc, PoolTimeout | TooManyRequests):
            return TransientStorageError(
                f"no Postgres connection to {self._target} became available ({detail}): the "
                "server is unreachable or every pooled connection is busy; check the DSN and "
                "the server, or raise pool_config['max_size'] / ['timeout'], then retry",
                context=context,
            )
        # By SQLSTATE class when the server sent one (psycopg files some permanent ones, such
        # as 54000 program_limit_exceeded, under OperationalError); without one, an
        # OperationalError is the connection's (lost, refused, timed out): transient.
        if (sqlstate is None and isinstance(exc, psycopg.OperationalError)) or (
            sqlstate is not None and sqlstate[:2] in _TRANSIENT_CLASSES
        ):
            return TransientStorageError(
                f"Postgres at {self._target} failed transiently ({type(exc).__name__}: "
                f"{detail}); nothing partial was written, retry the call",
                context=context,
            )
        if sqlstate in ("42P01", "42703"):  # undefined table / column
            return StorageError(
                f"the tenxgraph tables in schema {self.schema!r} (prefix "
                f"{self.table_prefix!r}) are missing or outdated ({detail}); run setup() or "
                "await asetup() first",
                context=context,
            )
        return StorageError(
            f"Postgres at {self._target} rejected a statement ({type(exc).__name__}, "
            f"SQLSTATE {sqlstate}): {detail}",
            context=context,
        )

    def _span_attrs(self, operation: str, thread_id: str | None = None) -> dict[str, Any]:
        attrs = dict(self._attrs)
        attrs[ATTR.DB_OPERATION] = operation
        if thread_id is not None:
            attrs[ATTR.THREAD_ID] = thread_id
        return attrs

    # -- setup -----------------------------------------------------------------------------------
    async def asetup(self, conn: psycopg.AsyncConnection | None = None) -> None:
        """Create or migrate the schema to :data:`~tenxgraph.storage._migrations.CURRENT_VERSION`.

        Idempotent and safe from several processes at once: each step runs in one transaction
        with its migrations-table row, under ``pg_advisory_xact_lock``. When the schema is
        already current nothing is locked or altered (one catalog lookup and one read).

        Args:
            conn: run on this connection instead of a pooled one, e.g. inside the
                application's open transaction: steps then run as savepoints of it and
                become visible when the application commits.

        Raises:
            SchemaVersionError: ``STORAGE_SCHEMA_001`` when the database holds a newer schema
                than this code (``context``: ``found``, ``supported``).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the server is unreachable.
            StorageError: ``STORAGE_000`` on any other failure (e.g. missing privileges).
        """
        with span(SPAN.SETUP, SpanKind.CLIENT, self._span_attrs("CREATE")):
            try:
                if conn is not None:
                    await self._asetup_on(conn)
                    return
                pool = await self._get_pool()
                async with pool.connection() as pooled:
                    await self._asetup_on(pooled)
            except psycopg.Error as exc:
                raise self._translate(exc) from None

    async def aschema_status(self) -> tuple[int | None, int]:
        """The schema version found in the database and the one this code uses, without
        creating, migrating or locking anything (one catalog lookup, one read).

        Returns:
            ``(found, supported)``; ``found`` is ``None`` when the tables do not exist.

        Raises:
            SchemaVersionError: ``STORAGE_SCHEMA_001`` when the database holds a newer schema.
            StorageConnectionError: ``STORAGE_CONNECT_001`` when the server refuses for good.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the server is unreachable.
        """
        try:
            pool = await self._get_pool()
            async with pool.connection() as conn:
                found = await _adrive(conn, self._probe_plan(), tx=False)
        except psycopg.Error as exc:
            raise self._translate(exc) from None
        return found, CURRENT_VERSION

    def setup(self, conn: psycopg.Connection | None = None) -> None:
        """Sync twin of :meth:`asetup` on a plain (sync) psycopg connection.

        Works outside any event loop and opens no pool: a short-lived connection is used (or
        ``conn``, e.g. inside the application's open transaction).

        Raises:
            GraphError: ``GRAPH_007`` when called on a thread running an event loop (use
                ``await asetup()``).
            SchemaVersionError: ``STORAGE_SCHEMA_001`` as in :meth:`asetup`.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the server is unreachable.
            StorageError: ``STORAGE_000`` on any other failure.
        """
        ensure_no_running_loop("setup", "asetup")
        with span(SPAN.SETUP, SpanKind.CLIENT, self._span_attrs("CREATE")):
            try:
                if conn is not None:
                    self._setup_on(conn)
                    return
                with self._sync_connect() as own:
                    self._setup_on(own)
            except psycopg.Error as exc:
                raise self._translate(exc) from None

    def _sync_connect(self) -> psycopg.Connection:
        if self._dsn is not None:
            conninfo, kwargs = self._dsn, dict(self._conn_kwargs)
        else:
            pool = self._user_pool
            conninfo = str(getattr(pool, "conninfo", ""))
            kwargs = {**(getattr(pool, "kwargs", None) or {})}
            kwargs.setdefault("connect_timeout", max(2, math.ceil(self.connect_timeout_s)))
        kwargs["autocommit"] = True
        kwargs["prepare_threshold"] = None  # setup statements run once each
        kwargs.pop("row_factory", None)
        return connect_first(
            conninfo,
            kwargs,
            timeout_s=float(self._pool_args.get("timeout", 30.0)),
            target=self._target,
            user=self._user,
            secrets=self._secrets,
        )

    async def _asetup_on(self, conn: psycopg.AsyncConnection) -> None:
        # Setup statements run once each: never prepare them (a transaction pooler would lose
        # them between server connections).
        threshold, conn.prepare_threshold = conn.prepare_threshold, None
        try:
            await self._asetup_steps(conn)
        finally:
            conn.prepare_threshold = threshold

    async def _asetup_steps(self, conn: psycopg.AsyncConnection) -> None:
        found = await _adrive(conn, self._probe_plan(), tx=False)
        if found == CURRENT_VERSION:
            return
        found = await _adrive(conn, self._bootstrap_plan(), tx=True)
        for target in range(found + 1, CURRENT_VERSION + 1):
            await _adrive(conn, self._step_plan(target), tx=True)

    def _setup_on(self, conn: psycopg.Connection) -> None:
        threshold, conn.prepare_threshold = conn.prepare_threshold, None
        try:
            self._setup_steps(conn)
        finally:
            conn.prepare_threshold = threshold

    def _setup_steps(self, conn: psycopg.Connection) -> None:
        found = _drive(conn, self._probe_plan(), tx=False)
        if found == CURRENT_VERSION:
            return
        found = _drive(conn, self._bootstrap_plan(), tx=True)
        for target in range(found + 1, CURRENT_VERSION + 1):
            _drive(conn, self._step_plan(target), tx=True)

    def _check_version(self, found: int) -> None:
        if found > CURRENT_VERSION:
            raise SchemaVersionError(
                f"the tenxgraph schema in {self.schema!r} (prefix {self.table_prefix!r}) is at "
                f"version {found}, newer than this code understands ({CURRENT_VERSION}); "
                "upgrade tenxgraph",
                context={"found": found, "supported": CURRENT_VERSION},
            )

    def _probe_plan(self) -> Generator[_Op, _Rows, int | None]:
        """Lock-free look at the schema version (``None``: no migrations table yet)."""
        rows = yield self._q["TABLE_EXISTS"], {"qualified": self._migrations_table}
        if not rows[0][0]:
            return None
        rows = yield self._q["MIGRATION_VERSION"], {}
        found = int(rows[0][0])
        self._check_version(found)
        if self.partitions is not None and found >= 1:
            rows = yield self._q["TABLE_LAYOUT"], {"qualified": self._threads_table}
            self._check_layout(rows)
        return found

    def _check_layout(self, rows: _Rows) -> None:
        """Refuse ``partitions=N`` over tables that are not hash-partitioned into N."""
        found = int(rows[0][1]) if rows and rows[0][0] else None
        if found == self.partitions:
            return
        where = f"schema {self.schema!r} (prefix {self.table_prefix!r})"
        if found is None:
            msg = (
                f"the tenxgraph tables in {where} exist unpartitioned; partitions= applies "
                "only when setup() creates a fresh schema (tenxgraph does not repartition "
                "existing tables): drop partitions= to use them, or set up a new schema or "
                "table_prefix with partitions= and move the data"
            )
        else:
            msg = (
                f"the tenxgraph tables in {where} are hash-partitioned into {found} "
                f"partitions, not {self.partitions}; pass partitions={found} (or drop it)"
            )
        raise ConfigError(
            msg, context={"key": "partitions", "found": found, "requested": self.partitions}
        )

    def _bootstrap_plan(self) -> Generator[_Op, _Rows, int]:
        """Under the lock: create the schema and the migrations table if missing."""
        yield self._q["MIGRATION_LOCK"], {"lock_key": self._lock_key}
        rows = yield self._q["SCHEMA_EXISTS"], {"schema": self.schema}
        if not rows[0][0]:
            yield self._q["CREATE_SCHEMA"], {}
        rows = yield self._q["TABLE_EXISTS"], {"qualified": self._migrations_table}
        if not rows[0][0]:
            yield self._q["CREATE_MIGRATIONS_TABLE"], {}
        rows = yield self._q["MIGRATION_VERSION"], {}
        found = int(rows[0][0])
        self._check_version(found)
        yield from self._locked_layout_check(found)
        return found

    def _locked_layout_check(self, found: int) -> Generator[_Op, _Rows, None]:
        """Under the lock: with ``partitions=N``, refuse tables another process created in
        the meantime with another layout (the lock-free look of :meth:`_probe_plan` may have
        seen no tables yet)."""
        if self.partitions is not None and found >= 1:
            rows = yield self._q["TABLE_LAYOUT"], {"qualified": self._threads_table}
            self._check_layout(rows)

    def _step_plan(self, target: int) -> Generator[_Op, _Rows, None]:
        """Under the lock: apply step ``target`` unless another process already did."""
        yield self._q["MIGRATION_LOCK"], {"lock_key": self._lock_key}
        rows = yield self._q["MIGRATION_VERSION"], {}
        found = int(rows[0][0])
        self._check_version(found)
        yield from self._locked_layout_check(found)
        if found >= target:
            return
        if found != target - 1:  # pragma: no cover - steps are applied in order
            raise StorageError(
                f"schema step {target} cannot follow version {found}",
                context={"found": found, "target": target},
            )
        partitions = self.partitions
        if target > 1:  # later steps follow the layout the database has
            rows = yield self._q["TABLE_LAYOUT"], {"qualified": self._threads_table}
            partitions = int(rows[0][1]) if rows and rows[0][0] else None
        for ddl in render_step(MIGRATIONS[target - 1], self.schema, self.table_prefix, partitions):
            yield ddl, {}
        yield (
            self._q["MIGRATION_RECORD"],
            {"version": target, "summary": MIGRATIONS[target - 1].summary},
        )

    # -- checkpoints -----------------------------------------------------------------------------
    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` as version ``w.expected_version + 1``: one statement, one
        round trip, one commit.

        Inserts the version and ``w.new_messages`` (``O(k)`` rows for ``k`` new messages,
        whatever the thread's length), then prunes versions ``<= new - w.history_limit`` and
        the message rows below the smallest range start of every kept version.

        Returns:
            The new record, ``messages=None``.

        Raises:
            StaleStateError: ``STORAGE_CONFLICT_000`` when the thread is not at
                ``w.expected_version`` (``context``: ``thread_id``, ``expected_version``,
                ``current_version``, ``None`` for a missing thread); nothing of ``w`` is stored.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread;
                ``STORAGE_000`` when the server rejects the write (e.g. a reused seq).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure; nothing
                partial is visible.
        """
        expected = w.expected_version
        new_version = expected + 1
        ranges = w.ranges
        msgs = w.new_messages
        datas = ByteaArray([d for _, d in msgs])
        # Typed parameters: every integer is sent as int8 (psycopg would pick int2, int4 or
        # int8 by magnitude), the arrays as int8[] / bytea[] whatever their content
        # (tenxgraph.storage._pg_types), and no parameter is ever None, so each statement has
        # one parameter signature and psycopg prepares it once per connection, never again.
        params: dict[str, Any] = {
            "thread_id": w.thread_id,
            "owner": w.user_id,
            "values": w.values,
            "ranges": Int8Array([x for r in ranges for x in r]),
            "min_seq": BigInt(min_seq_of(ranges, w.next_seq)),
            "next_seq": BigInt(w.next_seq),
            "status": w.status,
            "created_at": float(w.created_at),
            "seqs": Int8Array([s for s, _ in msgs]),
            "datas": datas,
            "fence": BigInt(_sql.NO_FENCE if w.fence is None else w.fence),
            "release": w.release and w.fence is not None,
        }
        if expected == 0:
            operation = _sql.CHECKPOINT_CREATE.operation
            query, pq = self._writes[True, w.fence is not None, False]
        else:
            limit = w.history_limit if w.history_limit and w.history_limit > 0 else None
            prune_to = new_version - limit if limit is not None and new_version > limit else None
            params["expected"] = BigInt(expected)
            params["prune_to"] = BigInt(_sql.NO_VERSION if prune_to is None else prune_to)
            params["expect_seen"] = BigInt(
                expected if prune_to is not None and prune_to < expected else _sql.NO_VERSION
            )
            operation = _sql.CHECKPOINT_CAS.operation
            query, pq = self._writes[False, w.fence is not None, prune_to is not None]
        attrs = None
        if enabled():  # no attribute dict to build when nothing records spans
            attrs = self._span_attrs(operation, w.thread_id)
            attrs[ATTR.VERSION] = new_version
            attrs[ATTR.BYTES] = len(w.values) + sum(map(len, datas))
            attrs[ATTR.MESSAGES_WRITTEN] = len(msgs)
        with span(SPAN.CHECKPOINT_WRITE, SpanKind.CLIENT, attrs) as sp:
            for attempt in (0, 1):
                try:
                    rows = await self._fetch(query, params, retry_dead=False, small=True, pq=pq)
                except TransientStorageError as exc:
                    if not _maybe_sent(exc):
                        raise
                    committed = await self._write_outcome(w, exc, last=attempt == 1)
                    if committed:
                        sp.add_event(
                            EVENT.COMMIT_RECOVERED,
                            {ATTR.THREAD_ID: w.thread_id, ATTR.VERSION: new_version},
                        )
                        return w.to_record(None)
                    continue  # not committed: send it again (once)
                if not rows:
                    err = await self._lost_write(w, sp)
                    if err is not None:
                        raise err
                    sp.add_event(
                        EVENT.COMMIT_RECOVERED,
                        {ATTR.THREAD_ID: w.thread_id, ATTR.VERSION: new_version},
                    )
                break
        return w.to_record(None)

    async def _probe_outcome(
        self, w: CheckpointWrite, wait_s: float | None = None
    ) -> tuple[bool | None, int | None, bool]:
        """``(owned, current_version, ours)`` of the thread after an ambiguous write, where
        ``ours`` says the version ``w`` would have created holds ``w``'s exact values (token
        included). ``owned`` is ``None`` for a missing thread. ``wait_s``: as in ``_fetch``."""
        rows = await self._fetch(
            self._q["WRITE_OUTCOME_PROBE"],
            {"thread_id": w.thread_id, "owner": w.user_id, "version": w.expected_version + 1},
            wait_s=wait_s,
        )
        if not rows:
            return None, None, False
        owned, current, values = rows[0]
        # Only a write carrying a token can be recognised: without one, equal values may come
        # from another write.
        ours = bool(w.token) and values is not None and bytes(values) == w.values
        return bool(owned), int(current), ours

    async def _write_outcome(
        self, w: CheckpointWrite, cause: TransientStorageError, *, last: bool
    ) -> bool:
        """Settle a write whose connection broke after it may have been sent.

        Returns:
            ``True`` when ``w`` committed; ``False`` when it certainly did not (the thread is
            still at ``w.expected_version``, so sending it again is safe) and ``last`` is false.

        Raises:
            StaleStateError: another write created the version ``w`` would have created.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            CommitOutcomeUnknownError: the thread could not be read back (up to 4 tries, all
                within ``READ_BACK_BUDGET_S`` seconds whatever the pool's ``timeout``), the
                version was pruned since, or the second attempt failed the same way.
        """
        delay = 0.05
        probe_error: BaseException | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READ_BACK_BUDGET_S
        for _ in range(4):
            left = deadline - loop.time()
            if left <= 0:  # the budget is spent: unknown
                if isinstance(probe_error, TransientStorageError):
                    cause = probe_error
                break
            try:
                async with asyncio.timeout(left):
                    owned, current, ours = await self._probe_outcome(w, wait_s=left)
            except (TransientStorageError, TimeoutError) as exc:
                probe_error = exc
                await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
                delay *= 3
                continue
            if ours:
                return True
            if owned is False:
                raise forbidden(w.thread_id)
            if current is None if w.expected_version == 0 else current == w.expected_version:
                if last:
                    break
                return False
            if current is None:  # the thread was deleted meanwhile: this write cannot apply
                raise stale(w.thread_id, w.expected_version, None, w.fence)
            if current is not None and current > w.expected_version:
                # Another write holds the version this one would have created: a real conflict
                # (or this write committed and was pruned since: then unknown).
                if w.history_limit is None or current - w.history_limit < w.expected_version + 1:
                    raise stale(w.thread_id, w.expected_version, current, w.fence)
            break
        else:
            cause = probe_error if isinstance(probe_error, TransientStorageError) else cause
        raise CommitOutcomeUnknownError(
            f"the connection to Postgres at {self._target} broke while the checkpoint write of "
            f"thread {w.thread_id!r} (version {w.expected_version + 1}) was committing, and "
            "the outcome could not be read back; it either committed entirely or not at all. "
            "Read the thread's state or version (get_state / get_state_history) to find out; "
            "re-sending the same input Message (same message_id) is safe",
            context={
                "thread_id": w.thread_id,
                "attempted_version": w.expected_version + 1,
                "backend": "postgresql",
                "sqlstate": cause.context.get("sqlstate"),
            },
        )

    async def _lost_write(self, w: CheckpointWrite, sp: Any) -> StorageError | None:
        """Error path of a write whose CAS matched no row: forbidden or stale (a write that
        finds its own token at the new version was an earlier attempt of itself that
        committed: callers never get here for it, see ``write``)."""
        owned, current, ours = await self._probe_outcome(w)
        if ours:
            return None
        if owned is False:
            return forbidden(w.thread_id)
        add_conflict_event(sp, w.thread_id, w.expected_version, current)
        if w.fence is not None and (current or 0) == w.expected_version:
            # The version did not move: the fence condition refused the write.
            return fence_lost(w.thread_id, w.expected_version, w.fence)
        return stale(w.thread_id, w.expected_version, current, w.fence)

    async def read(
        self, key: ThreadKey, version: int | None = None, *, with_messages: bool = True
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, or the given kept version; one statement.

        Args:
            key: thread and owner scope.
            version: a kept version number, or ``None`` for the latest.
            with_messages: fill ``messages`` (list order, ``len == ranges_len(ranges)``);
                ``False`` leaves it ``None`` and reads no message row.

        Returns:
            The record, or ``None`` when the thread or version does not exist or another user
            owns the thread (exactly as if it did not exist).

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
            StorageError: ``STORAGE_000`` on another failure, or when a version's message rows
                are missing (a damaged database).
        """
        name = "READ_CHECKPOINT" if with_messages else "READ_CHECKPOINT_META"
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.CHECKPOINT_READ, SpanKind.CLIENT, attrs) as sp:
            rows = await self._fetch(
                self._q[name],
                {"thread_id": key.thread_id, "owner": key.user_id, "version": version},
            )
            if not rows:
                sp.set_attribute(ATTR.HIT, False)
                return None
            v, values, flat, next_seq, status, created_at, seqs, messages = rows[0]
            ranges = _checked_pairs(key.thread_id, v, flat, next_seq)
            messages = _in_list_order(ranges, seqs, messages)
            if messages is not None and len(messages) != ranges_len(ranges):
                raise StorageError(
                    f"version {v} of thread {key.thread_id!r} references message rows that "
                    "do not exist; the database was modified outside tenxgraph",
                    context={"thread_id": key.thread_id, "version": v},
                )
            sp.set_attribute(ATTR.HIT, True)
            sp.set_attribute(ATTR.VERSION, v)
            return StoredCheckpoint(
                thread_id=key.thread_id,
                user_id=key.user_id,
                version=v,
                values=values,
                ranges=ranges,
                messages=messages if with_messages else None,
                next_seq=next_seq,
                status=status,
                created_at=created_at,
            )

    async def read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, read against a cached copy ``known``: one
        statement (``READ_SINCE``), one round trip, whatever the thread's length. It is the
        first read of every run (``known=None`` without a cached copy: the full thread).

        Args:
            key: thread and owner scope.
            known: the copy a cache holds (its ``version`` and ``created_at`` name it; its
                ``messages`` are reused when the thread only appended since), or ``None``.

        Returns:
            ``known`` itself when it is still the latest version; else the latest version with
            its complete message list (the copy's messages followed by the new rows when the
            thread only appended, ``decoded`` carried over so only the new rows need decoding);
            ``None`` when the thread does not exist or another user owns it.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
            StorageError: ``STORAGE_000`` on another failure, or when a version's message rows
                are missing (a damaged database).
        """
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.CHECKPOINT_READ, SpanKind.CLIENT, attrs) as sp:
            rows = await self._fetch(
                self._q_since,
                {
                    "thread_id": key.thread_id,
                    "owner": key.user_id,
                    **_since_params(known),
                },
                small=known is not None,
            )
            if not rows:
                sp.set_attribute(ATTR.HIT, False)
                return None
            return _since_record(key, known, rows[0], sp)

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number, or ``None`` when missing or owned by another user.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.CURRENT_VERSION, SpanKind.CLIENT, attrs):
            rows = await self._fetch(
                self._q["CURRENT_VERSION"], {"thread_id": key.thread_id, "owner": key.user_id}
            )
        return int(rows[0][0]) if rows else None

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages; two statements whatever the count.

        The first reads the versions, the second the message rows of the union of their
        ranges (each row once). A version pruned by a concurrent write between the two (its
        rows then possibly gone) is left out, as it is no longer kept.

        Args:
            key: thread and owner scope.
            limit: at most this many versions (``None``: all kept; ``<= 0``: none).
            before: only versions ``< before`` when given.

        Returns:
            Records newest first; ``[]`` when the thread is missing or owned by another user.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        if limit is not None and limit <= 0:
            return []
        attrs = self._span_attrs("SELECT", key.thread_id)
        with span(SPAN.HISTORY, SpanKind.CLIENT, attrs) as sp:
            base = {"thread_id": key.thread_id, "owner": key.user_id}
            rows = await self._fetch(
                self._q["HISTORY_CHECKPOINTS"], {**base, "before": before, "limit": limit}
            )
            sp.set_attribute(ATTR.HIT, bool(rows))
            if not rows:
                return []
            parsed = []
            bad: list[SerializationError] = []
            for row in rows:
                try:
                    parsed.append((row, _checked_pairs(key.thread_id, row[0], row[2], row[3])))
                except SerializationError as exc:  # one damaged version: left out, reported
                    bad.append(exc)
            report_skipped("get_state_history", bad)
            starts, ends = _merge_ranges([r for _, rs in parsed for r in rs])
            data: dict[int, bytes] = {}
            if starts:
                msg_rows = await self._fetch(
                    self._q["HISTORY_MESSAGES"],
                    {**base, "starts": Int8Array(starts), "ends": Int8Array(ends)},
                )
                data = dict(msg_rows)
            out: list[StoredCheckpoint] = []
            for (v, values, _flat, next_seq, status, created_at), ranges in parsed:
                try:
                    messages = [data[seq] for s, e in ranges for seq in range(s, e)]
                except KeyError:
                    continue  # pruned (and its rows swept) between the two statements
                out.append(
                    StoredCheckpoint(
                        thread_id=key.thread_id,
                        user_id=key.user_id,
                        version=v,
                        values=values,
                        ranges=ranges,
                        messages=messages,
                        next_seq=next_seq,
                        status=status,
                        created_at=created_at,
                    )
                )
            return out

    # -- threads ---------------------------------------------------------------------------------
    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete every version, message row, ledger row and flag of the thread (one statement).

        Returns:
            ``True`` if the thread existed.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        with span(SPAN.THREAD_DELETE, SpanKind.CLIENT, self._span_attrs("DELETE", key.thread_id)):
            rows = await self._fetch(
                self._q["DELETE_THREAD"], {"thread_id": key.thread_id, "owner": key.user_id}
            )
        deleted, other_owner = rows[0]
        if deleted:
            return True
        if other_owner:
            raise forbidden(key.thread_id)
        return False

    async def list_threads(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ThreadInfo]:
        """Threads owned by ``user_id`` (``"*"``: every thread), most recently updated first
        (ties by ``thread_id``), paginated by ``offset`` and ``limit`` (counts).

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        if limit is not None and limit <= 0:
            return []
        name = "LIST_ALL_THREADS" if user_id == "*" else "LIST_THREADS"
        rows = await self._fetch(
            self._q[name], {"owner": user_id, "limit": limit, "offset": max(offset or 0, 0)}
        )
        return threads_from_rows(rows)

    async def set_thread_metadata(self, key: ThreadKey, metadata: dict[str, Any]) -> None:
        """Replace the application metadata of an existing thread (one statement).

        Args:
            key: thread and owner scope.
            metadata: JSON-compatible dict (the tagged types of :mod:`serde` are kept too).

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            SerializationError: ``STORAGE_SERIALIZATION_000`` for a value that cannot be stored.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        data = serde.dumps(dict(metadata), "$.metadata")
        rows = await self._fetch(
            self._q["SET_METADATA"],
            {"thread_id": key.thread_id, "owner": key.user_id, "metadata": data},
        )
        _changed_or_raise(rows, key)

    # -- run leases (SQL in tenxgraph.storage._lease_sql) ----------------------------------------
    async def lease_acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the thread's run lease (see ``StoreTier.lease_acquire``): one
        statement, one round trip; expiry on the server's clock.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["LEASE_ACQUIRE"],
            {
                "thread_id": key.thread_id,
                "owner": key.user_id,
                "holder": holder,
                "ttl_s": float(ttl_s),
                "lapse_s": float(lapse_s),
                "queue": bool(queue),
            },
        )
        fence, foreign, expires_in, ahead = rows[0]
        if fence is None and foreign:
            raise forbidden(key.thread_id)
        return LeaseGrant(
            None if fence is None else int(fence),
            None if expires_in is None else float(expires_in),
            None if fence is not None or ahead is None else int(ahead),
        )

    async def lease_read(
        self,
        key: ThreadKey,
        known: StoredCheckpoint | None,
        holder: str,
        *,
        ttl_s: float,
        lapse_s: float,
        queue: bool,
    ) -> tuple[LeaseGrant, StoredCheckpoint | None]:
        """One attempt to take the thread's run lease and, when granted, the thread's latest
        version read against ``known`` (see ``StoreTier.lease_read``): one statement
        (``LEASE_READ``), one round trip.

        The statement's read sees the snapshot taken when it started; when the acquisition had
        to wait for the previous holder's last write (the lease row it locked), that write is
        newer than the snapshot. The release recorded the version it left
        (``settled_version``): when it is newer than the version read, or the grant took the
        lease over from a holder that had not released it (``-1``), the thread is read again
        (``READ_SINCE``, a second round trip on that rare path only).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread;
                ``STORAGE_000`` when a version's message rows are missing.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        attrs = self._span_attrs("INSERT", key.thread_id)
        with span(SPAN.CHECKPOINT_READ, SpanKind.CLIENT, attrs) as sp:
            params = {
                "thread_id": Text(key.thread_id),
                "owner": Text(key.user_id),
                "holder": Text(holder),
                "ttl_s": float(ttl_s),
                "lapse_s": float(lapse_s),
                "queue": bool(queue),
                **_since_params(known),
            }
            rows = await self._fetch(self._q_lease_read, self._lease_read_args(params))
            fence, foreign, expires_in, ahead, settled = rows[0][:5]
            if fence is None:
                sp.set_attribute(ATTR.HIT, False)
                if foreign:
                    raise forbidden(key.thread_id)
                return LeaseGrant(
                    None,
                    None if expires_in is None else float(expires_in),
                    None if ahead is None else int(ahead),
                ), None
            grant = LeaseGrant(int(fence), None if expires_in is None else float(expires_in))
            read = rows[0][5:]
            rec = None if read[0] is None else _since_record(key, known, read, sp)
            if rec is None:
                sp.set_attribute(ATTR.HIT, False)
        if settled < 0 or settled > (0 if rec is None else rec.version):
            # Rare: the snapshot predates the previous holder's last write; read it now.
            rec = await self.read_since(key, rec if rec is not None else known)
        return grant, rec

    async def lease_peek(self, key: ThreadKey, holder: str, *, lapse_s: float) -> LeaseGrant:
        """What an acquisition attempt would find: one read-only statement, no row lock.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["LEASE_PEEK"],
            {"thread_id": key.thread_id, "holder": holder, "lapse_s": float(lapse_s)},
        )
        expires_in, ahead = rows[0]
        return LeaseGrant(None, float(expires_in), int(ahead))

    async def lease_renew(self, key: ThreadKey, holder: str, fence: int, ttl_s: float) -> bool:
        """Extend the holder's lease by ``ttl_s`` seconds from now (server clock); ``False``
        once another run took it.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["LEASE_RENEW"],
            {
                "thread_id": key.thread_id,
                "holder": holder,
                "fence": BigInt(fence),
                "ttl_s": float(ttl_s),
            },
        )
        return bool(rows)

    async def lease_release(self, key: ThreadKey, holder: str, fence: int | None) -> None:
        """Give the lease of ``fence`` up and withdraw ``holder`` from the queue.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        await self._fetch(
            self._q["LEASE_RELEASE"],
            {
                "thread_id": key.thread_id,
                "holder": holder,
                "fence": BigInt(_sql.NO_FENCE if fence is None else fence),
            },
        )

    # -- stop flags ------------------------------------------------------------------------------
    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record (``requested``) or withdraw the caller's stop request for the thread.

        A request is kept with its time, ``at`` (UNIX seconds, default now; the newest of
        several wins), also for a thread without a checkpoint yet, so the first node of a
        thread's first run can be stopped from another instance.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        params: dict[str, Any] = {"thread_id": key.thread_id, "owner": key.user_id}
        if requested:
            params["requested_at"] = float(time.time() if at is None else at)
            rows = await self._fetch(self._q["SET_STOP"], params)
        else:
            rows = await self._fetch(self._q["CLEAR_STOP"], params)
        if rows[0][0]:
            raise forbidden(key.thread_id)

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request for the thread, made at or after ``since``
        (UNIX seconds) when given (``False`` when another user owns the thread).

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["GET_STOP"], {"thread_id": key.thread_id, "owner": key.user_id}
        )
        return bool(rows) and (since is None or rows[0][0] >= since)

    # -- ledger ----------------------------------------------------------------------------------
    async def ledger_get(self, key: ThreadKey, call_key: str) -> LedgerEntry | None:
        """The recorded execution for ``call_key``, or ``None`` (also for a missing thread).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        with span(SPAN.LEDGER_READ, SpanKind.CLIENT, self._span_attrs("SELECT", key.thread_id)):
            rows = await self._fetch(
                self._q["LEDGER_GET"],
                {"thread_id": key.thread_id, "owner": key.user_id, "call_key": _utf8(call_key)},
            )
        if not rows:
            return None
        owned, tool_call_id, tool_name, result, created_at = rows[0]
        if not owned:
            raise forbidden(key.thread_id)
        if tool_call_id is None:
            return None
        return LedgerEntry(
            call_key=call_key,
            tool_call_id=_text(tool_call_id),
            tool_name=_text(tool_name),
            result=result,
            created_at=created_at,
        )

    async def ledger_put(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Record ``entry`` unless ``entry.call_key`` is recorded already; return the winner.

        One statement (``INSERT ... ON CONFLICT DO NOTHING``); only when it lost to a racing
        replay a second one reads the winner's row, so both racers get the same result.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            LedgerWriteError: ``STORAGE_LEDGER_001`` when the thread does not exist (a tool call
                is recorded only on a thread with a durable checkpoint) or the row could not be
                written (the driver error, translated, is the ``__cause__``); ``context``:
                ``thread_id``, ``tool_call_id``, ``tool``.
        """
        attrs = self._span_attrs("INSERT", key.thread_id)
        attrs[ATTR.TOOL_NAME] = entry.tool_name
        attrs[ATTR.TOOL_CALL_ID] = entry.tool_call_id
        with span(SPAN.LEDGER_WRITE, SpanKind.CLIENT, attrs):
            try:
                rows = await self._fetch(
                    self._q["LEDGER_PUT"],
                    {
                        "thread_id": key.thread_id,
                        "owner": key.user_id,
                        "call_key": _utf8(entry.call_key),
                        "tool_call_id": _utf8(entry.tool_call_id),
                        "tool_name": _utf8(entry.tool_name),
                        "result": entry.result,
                        "created_at": entry.created_at,
                    },
                )
                inserted, owned = rows[0]
                if inserted:
                    return dataclasses.replace(entry)
                if owned is None:
                    raise ledger_missing_thread(key, entry)
                if owned is False:
                    raise forbidden(key.thread_id)
                winner = await self.ledger_get(key, entry.call_key)
            except (LedgerWriteError, StorageError) as exc:
                if isinstance(exc, LedgerWriteError) or exc.error_code == "STORAGE_FORBIDDEN_001":
                    raise
                raise _ledger_error(key, entry, exc.message) from exc
            if winner is None:  # the thread was deleted between the two statements
                raise ledger_missing_thread(key, entry)
            return winner

    async def acache_mac_key(self) -> bytes:
        """The key of the MACs on shared cache entries (Redis), kept in the schema's
        ``cache_keys`` table (created with 32 random bytes by the schema step that adds it);
        read once per store, then remembered in this process.

        Returns:
            The key (at least 16 bytes).

        Raises:
            StorageError: ``STORAGE_000`` when the table holds no key (the schema was not set
                up to its current version, or the row was deleted).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        key = self._mac_key
        if key is not None:
            return key
        rows = await self._fetch(self._q["CACHE_MAC_KEY"], {})
        if not rows or rows[0][0] is None or len(bytes(rows[0][0])) < 16:
            raise StorageError(
                "the cache MAC key is missing from the cache_keys table: run setup() to "
                "bring the schema to its current version, or pass cache_mac_key=",
                context={"table": "cache_keys"},
            )
        key = bytes(rows[0][0])
        self._mac_key = key
        return key

    async def ledger_count(self, key: ThreadKey) -> int:
        """Number of ledger rows of the thread (0 when missing).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["LEDGER_COUNT"], {"thread_id": key.thread_id, "owner": key.user_id}
        )
        if not rows:
            return 0
        owned, count = rows[0]
        if not owned:
            raise forbidden(key.thread_id)
        return int(count)

    # -- key rotation (tenxgraph.storage._rotate) ------------------------------------------------
    async def rotate_page(
        self,
        table: str,
        after: tuple[str, int | str] | None,
        limit: int,
        header: bytes | None,
        older_than: float,
    ) -> list[tuple[str, str, int | str, bytes]]:
        """See :meth:`tenxgraph.storage._rotate.RotatableStore.rotate_page` (one statement).

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        ledger = table == "tool_executions"
        if after is None:
            after = ("", _rotate.START[table])
        name = "ROTATE_SCAN_" + _ROTATED[table]
        params: dict[str, Any] = {
            "after_thread": after[0],
            "after_pos": _rotate_pos(table, after[1]),
            "every": header is None,
            "hlen": len(header or b""),
            "header": header or b"",
            "limit": limit,
        }
        if table == "checkpoints":
            params["older_than"] = older_than
        rows = await self._fetch(self._q[name], params)
        return [
            (
                tid,
                owner,
                _text(pos) if ledger else pos,
                bytes(blob),
            )
            for tid, owner, pos, blob in rows
        ]

    async def rotate_swap(self, table: str, rows: list[tuple[str, int | str, bytes, bytes]]) -> int:
        """See :meth:`tenxgraph.storage._rotate.RotatableStore.rotate_swap`: one statement
        that skips rows another transaction holds (``FOR UPDATE SKIP LOCKED``).

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        if not rows:
            return 0
        done = await self._fetch(
            self._q["ROTATE_SWAP_" + _ROTATED[table]],
            {
                "thread_ids": [r[0] for r in rows],
                "positions": [_rotate_pos(table, r[1]) for r in rows],
                "olds": [r[2] for r in rows],
                "news": [r[3] for r in rows],
            },
        )
        return len(done)

    # -- time travel (tenxgraph.storage._fork) ---------------------------------------------------
    async def kept_versions(self, key: ThreadKey) -> tuple[int, int] | None:
        """``(oldest kept, latest)`` version of the thread (one statement), or ``None`` when
        missing or owned by another user.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["KEPT_VERSIONS"], {"thread_id": key.thread_id, "owner": key.user_id}
        )
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    async def fork(
        self,
        src: ThreadKey,
        version: int,
        w: CheckpointWrite,
        copy: tuple[Range, ...],
        metadata: bytes,
    ) -> StoredCheckpoint:
        """Create thread ``w.thread_id`` at version 1 from ``w``: one statement (``FORK``), one
        commit. The message rows of ``copy`` (seq ranges of version ``version`` of ``src``)
        are copied inside the server by one ``INSERT ... SELECT`` under the same seqs (the
        source version's row is locked ``FOR SHARE`` meanwhile, so pruning cannot take its
        rows away), ``w.new_messages`` inserted, ``src``'s ledger rows copied, ``metadata``
        (encoded JSON object) stored as the fork's thread metadata.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``src`` (for its owner) or
                its version ``version`` is not kept (``context["oldest_kept"]``).
            StaleStateError: ``STORAGE_CONFLICT_000`` when thread ``w.thread_id`` exists.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns ``w.thread_id``.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure (the fork
                was created entirely or not at all).
        """
        from tenxgraph.storage._fork import target_exists, version_missing

        msgs = w.new_messages
        params: dict[str, Any] = {
            "src_thread_id": src.thread_id,
            "src_version": BigInt(version),
            "thread_id": w.thread_id,
            "owner": w.user_id,
            "status": w.status,
            "created_at": float(w.created_at),
            "metadata": bytes(metadata),
            "values": w.values,
            "ranges": Int8Array([x for r in w.ranges for x in r]),
            "min_seq": BigInt(min_seq_of(w.ranges, w.next_seq)),
            "next_seq": BigInt(w.next_seq),
            "copy_starts": Int8Array([s for s, _ in copy]),
            "copy_ends": Int8Array([e for _, e in copy]),
            "seqs": Int8Array([s for s, _ in msgs]),
            "datas": ByteaArray([d for _, d in msgs]),
        }
        attrs = self._span_attrs(_sql.FORK.operation, w.thread_id)
        attrs[ATTR.VERSION] = 1
        attrs[ATTR.MESSAGES_WRITTEN] = len(msgs)
        with span(SPAN.CHECKPOINT_WRITE, SpanKind.CLIENT, attrs):
            rows = await self._fetch(self._q["FORK"], params, retry_dead=False)
        found, created, _copied, owned, current = rows[0]
        if created:
            return w.to_record(None)
        if not found:
            kept = await self.kept_versions(src)
            raise version_missing(src.thread_id, version, *(kept or (None, None)))
        if owned is False:
            raise forbidden(w.thread_id)
        raise target_exists(w.thread_id, current)

    # -- erasure and retention (tenxgraph.storage.retention) ------------------------------------
    async def erase_owner(
        self, owner: str, *, by_owner: bool, thread_ids: list[str] | tuple[str, ...] = ()
    ) -> Removal:
        """Delete every row of ``owner``'s threads (with ``by_owner``: every thread it owns and
        every stop request, lease and run it holds elsewhere; plus ``thread_ids``): the
        ``ERASE_OWNER`` statement, then the same statement once more over the thread ids the
        first one found. The second pass takes the rows a checkpoint write committed while
        the first statement waited for its ``threads`` row: that write's rows were not in the
        first statement's snapshot. No write of these threads can commit after the first
        pass (the compare-and-swap needs the ``threads`` row), so two passes leave nothing.

        Returns:
            The removed thread ids and the rows deleted per table.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure (the
                erasure is idempotent: run it again).
        """
        with span(SPAN.ERASE, SpanKind.CLIENT, self._span_attrs("DELETE")):
            first = await self._erase_pass(owner, by_owner, list(thread_ids))
            if not first.thread_ids:
                return first
            return first.merged(await self._erase_pass(owner, False, list(first.thread_ids)))

    async def _erase_pass(self, owner: str, by_owner: bool, thread_ids: list[str]) -> Removal:
        rows = await self._fetch(
            self._q["ERASE_OWNER"],
            {"owner": owner, "by_owner": by_owner, "thread_ids": [Text(t) for t in thread_ids]},
        )
        ids, *counts = rows[0]
        return Removal(thread_ids=tuple(ids or ()), rows=row_counts(counts))

    async def sweep_idle(self, now: float, default_ttl_s: float | None, limit: int) -> Removal:
        """Delete up to ``limit`` threads idle longer than their TTL (their own ``ttl_s``, else
        ``default_ttl_s``; ``None``: none) at ``now`` (UNIX seconds), oldest first, except
        those holding a live run lease (on the server's clock) or an open submitted run, with
        every row of them: one ``SWEEP_IDLE`` statement. A thread whose row a writer holds
        locked is skipped (``SKIP LOCKED``: it is not idle).

        Returns:
            The removed thread ids with their owners, and the rows deleted per table.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        with span(SPAN.SWEEP, SpanKind.CLIENT, self._span_attrs("DELETE")):
            rows = await self._fetch(
                self._q["SWEEP_IDLE"],
                {
                    "now": float(now),
                    "ttl_s": math.inf if default_ttl_s is None else float(default_ttl_s),
                    "limit": BigInt(limit),
                    "owner": "",
                    "by_owner": False,
                },
            )
        ids, owners, *counts = rows[0]
        return Removal(
            thread_ids=tuple(ids or ()), rows=row_counts(counts), owners=tuple(owners or ())
        )

    async def set_thread_ttl(self, key: ThreadKey, ttl_s: float | None) -> None:
        """Set (``None``: clear) the thread's own retention override, in seconds.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        rows = await self._fetch(
            self._q["SET_THREAD_TTL"],
            {"thread_id": key.thread_id, "owner": key.user_id, "ttl_s": ttl_s},
        )
        _changed_or_raise(rows, key)

    async def get_thread_ttl(self, key: ThreadKey) -> tuple[bool, float | None]:
        """``(exists, override)``: whether the caller's thread exists, and its own retention
        override in seconds (``None``: none)."""
        rows = await self._fetch(
            self._q["GET_THREAD_TTL"], {"thread_id": key.thread_id, "owner": key.user_id}
        )
        return (False, None) if not rows else (True, rows[0][0])

    # -- submitted runs (tenxgraph.storage.runs.RunStore) ---------------------------------------
    @property
    def runs_channel(self) -> str:
        """The ``LISTEN`` / ``NOTIFY`` channel of this schema's and prefix's submitted runs."""
        return _sql.runs_channel(self.schema, self.table_prefix)

    async def run_insert(self, key: ThreadKey, record: RunRecord) -> RunRecord:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_insert`: one statement records the
        run and sends ``NOTIFY`` on :attr:`runs_channel` (delivered when it commits).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure.
        """
        r = record
        rows = await self._fetch(
            self._q["RUN_INSERT"],
            {
                "thread_id": r.thread_id,
                "run_id": r.run_id,
                "owner": key.user_id,
                "input": r.input,
                "config": r.config,
                "now": float(r.created_at),
                "channel": self.runs_channel,
            },
        )
        if rows[0][0]:
            raise forbidden(key.thread_id)
        if rows[0][1]:
            return r
        found = await self.run_get(key, r.run_id)
        if found is None:  # deleted between the two statements: record it again
            return await self.run_insert(key, record)
        return found

    async def run_get(self, key: ThreadKey, run_id: str) -> RunRecord | None:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_get`."""
        rows = await self._fetch(
            self._q["RUN_GET"],
            {"thread_id": key.thread_id, "run_id": run_id, "owner": key.user_id},
        )
        return RunRecord.from_row(rows[0]) if rows else None

    async def run_list(
        self, user_id: str, *, status: str = "", thread_id: str = "", limit: int = 100
    ) -> list[RunRecord]:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_list`."""
        rows = await self._fetch(
            self._q["RUN_LIST"],
            {"owner": user_id, "status": status, "only_thread": thread_id, "limit": BigInt(limit)},
        )
        return [RunRecord.from_row(row) for row in rows]

    async def run_open(self, limit: int) -> list[RunRecord]:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_open`."""
        rows = await self._fetch(self._q["RUN_OPEN"], {"limit": BigInt(limit)})
        return [RunRecord.from_row(row) for row in rows]

    async def run_update(
        self, record: RunRecord, *, expect_status: str, expect_attempts: int, notify: bool = False
    ) -> bool:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_update` (``notify``: ``NOTIFY`` on
        :attr:`runs_channel` in the same statement)."""
        r = record
        rows = await self._fetch(
            self._q["RUN_UPDATE"],
            {
                "status": r.status,
                "attempts": BigInt(r.attempts),
                "crashes": BigInt(r.crashes),
                "holder": r.holder,
                "worker": r.worker,
                "last_error": r.last_error,
                "output": r.output,
                "now": float(r.updated_at),
                "thread_id": r.thread_id,
                "run_id": r.run_id,
                "expect_status": expect_status,
                "expect_attempts": BigInt(expect_attempts),
                "channel": self.runs_channel,
                "notify": bool(notify),
            },
        )
        return bool(rows[0][0])

    @property
    def lease_channel(self) -> str:
        """The ``LISTEN`` / ``NOTIFY`` channel on which lease releases of this schema and
        prefix wake the runs waiting for them."""
        return _sql.lease_channel(self.schema, self.table_prefix)

    async def lease_waiter(
        self, key: ThreadKey, holder: str, *, start: bool = True
    ) -> LeaseWaiter | None:
        """Register a run waiting for ``key``'s lease as ``holder``, to be woken when the
        holder releases it (see :mod:`tenxgraph.storage._lease_wake`).

        The first call of a process (per event loop) opens the store's one listening
        connection for the lease channel and waits for its first attempt (bounded by the
        connection timeout); later calls cost nothing. The connection uses ``listen_dsn``
        when given, else the store's own settings, and is not used when those reach Postgres
        through a pooler (a transaction-mode pooler does not keep ``LISTEN``): the waiter's
        ``live`` is then ``False`` and the caller polls (docs/how-to/run-lease.md).

        Args:
            key: the thread.
            holder: the waiting run's holder id.
            start: open the listening connection when this event loop has none
                (``False``: return ``None`` instead).

        Returns:
            The registration (close it when done waiting); ``None`` with
            ``lease_listen=False``, or with ``start=False`` before the first one.
        """
        if not self.lease_listen:
            return None
        loop = asyncio.get_running_loop()
        listen = self._lease_listens.get(loop)
        if listen is None or listen.guard.done():
            if not start:
                return None
            hub, tried = LeaseWakeups(), asyncio.Event()
            conninfo, kwargs = self._listen_settings(self.listen_dsn)
            guard = start_guard(
                loop,
                _lease_listen_loop(
                    hub,
                    tried,
                    functools.partial(
                        aconnect_first,
                        conninfo,
                        kwargs,
                        timeout_s=float(self._pool_args.get("timeout", 30.0)),
                        target=self._target,
                        user=self._user,
                        secrets=self._secrets,
                    ),
                    _sql.listen_statement(self.lease_channel),
                    self._q["BACKEND_PID"],
                    trust=self.listen_dsn is not None or self.pooler is None,
                ),
                "tenxgraph-lease-listen",
            )
            listen = self._lease_listens[loop] = _LeaseListen(hub, guard, tried)
        if not listen.tried.is_set():
            await listen.tried.wait()
        return listen.hub.waiter(key.thread_id, holder)

    def _listen_settings(self, dsn: str | None) -> tuple[str, dict[str, Any]]:
        """Connection info and keyword arguments of a listening connection (autocommit,
        never prepared): through ``dsn`` when given, else the store's own settings."""
        if dsn is not None:
            conninfo, kwargs = normalize_dsn(dsn), dict(self._conn_kwargs)
        elif self._dsn is not None:
            conninfo, kwargs = self._dsn, dict(self._conn_kwargs)
        else:
            pool = self._user_pool
            conninfo = str(getattr(pool, "conninfo", ""))
            kwargs = {**(getattr(pool, "kwargs", None) or {})}
        kwargs["autocommit"] = True
        kwargs["prepare_threshold"] = None
        kwargs.pop("row_factory", None)
        return conninfo, kwargs

    async def run_listen(self, dsn: str | None = None) -> psycopg.AsyncConnection[Any]:
        """A new autocommit connection listening on :attr:`runs_channel` (the caller reads its
        ``notifies()`` and closes it). It must reach Postgres directly or through a pooler in
        *session* mode: a transaction-mode pooler (PgBouncer's ``pool_mode = transaction``)
        does not keep ``LISTEN`` (docs/how-to/background-runs.md).

        Args:
            dsn: the DSN to listen through (``None``: the store's own connection settings).

        Raises:
            StorageConnectionError: ``STORAGE_CONNECT_001`` on a permanent failure.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the server stays unreachable.
        """
        conninfo, kwargs = self._listen_settings(dsn)
        conn = await aconnect_first(
            conninfo,
            kwargs,
            timeout_s=float(self._pool_args.get("timeout", 30.0)),
            target=self._target,
            user=self._user,
            secrets=self._secrets,
        )
        try:
            await conn.execute(_sql.listen_statement(self.runs_channel))
        except psycopg.Error as exc:
            await conn.close()
            raise self._translate(exc) from None
        return conn


# -- helpers --------------------------------------------------------------------------------------


def _changed_or_raise(rows: _Rows, key: ThreadKey) -> None:
    """Interpret ``(changed, owned)`` of an update of the caller's thread (``SET_METADATA``,
    ``SET_THREAD_TTL``): forbidden when another user owns it, not found when it is missing."""
    changed, owned = rows[0]
    if changed:
        return
    if owned is False:
        raise forbidden(key.thread_id)
    raise thread_missing(key.thread_id)


def _since_params(known: StoredCheckpoint | None) -> dict[str, Any]:
    """``READ_SINCE``'s parameters naming the caller's cached copy (typed, never NULL)."""
    return {
        "known_version": BigInt(_sql.NO_VERSION if known is None else known.version),
        "known_created_at": 0.0 if known is None else float(known.created_at),
        "delta_ok": known is not None and known.messages is not None,
    }


def _since_record(
    key: ThreadKey, known: StoredCheckpoint | None, row: Sequence[Any], sp: Any
) -> StoredCheckpoint:
    """The record of one ``READ_SINCE`` answer row (``known`` itself when it is current).

    Raises:
        StorageError: ``STORAGE_000`` when the version's message rows are missing.
    """
    v, values, flat, next_seq, status, created_at, base, seqs, messages = row
    sp.set_attribute(ATTR.HIT, True)
    sp.set_attribute(ATTR.VERSION, v)
    if base < 0 and known is not None:
        return known
    ranges = _checked_pairs(key.thread_id, v, flat, next_seq)
    messages = _in_list_order(ranges, seqs, messages)
    decoded = None
    if base > 0 and known is not None and known.messages is not None:
        messages = known.messages + messages
        decoded = known.decoded
    if len(messages) != ranges_len(ranges):
        raise StorageError(
            f"version {v} of thread {key.thread_id!r} references message rows that "
            "do not exist; the database was modified outside tenxgraph",
            context={"thread_id": key.thread_id, "version": v},
        )
    return StoredCheckpoint(
        thread_id=key.thread_id,
        user_id=key.user_id,
        version=v,
        values=values,
        ranges=ranges,
        messages=messages,
        next_seq=next_seq,
        status=status,
        created_at=created_at,
        decoded=decoded,
    )


def _in_list_order(ranges: tuple[Range, ...], seqs: Any, rows: Any) -> Any:
    """The message ``rows`` of a read, put in list order: they are the *last* ``len(rows)``
    messages of the version whose ``ranges`` are given (all of them for a full read, those after
    the cached copy's for a read that only appended), and ``seqs[i]`` is the seq of
    ``rows[i]``, in the order the server's scan found them (no ``ORDER BY`` sorts the rows and
    their data there; see ``_SINCE_ROWS`` in :mod:`tenxgraph.storage._sql`).

    ``O(len(rows))``: when the scan's order already is the list's (the usual case, one range
    read in seq order) ``rows`` itself is returned. When a seq is missing or extra, ``rows`` is
    returned as it is and the caller's length check reports the damaged database; ``None``
    rows (no message column in the answer) are returned as they are.

    Args:
        ranges: the version's ``[start, end)`` seq ranges, in list order.
        seqs: ``list[int]``, the seq of each row (or ``None``).
        rows: ``list[bytes]``, the rows' stored bytes (or ``None``).

    Returns:
        ``rows`` in list order (``rows`` itself when already so).
    """
    if rows is None or seqs is None or len(seqs) != len(rows):
        return rows
    n = len(rows)
    want: list[range] = []  # the seqs of the list's last n messages, in list order
    need = n
    for s, e in reversed(ranges):
        if need <= 0:
            break
        take = min(need, e - s)
        want.append(range(e - take, e))
        need -= take
    if need > 0:
        return rows
    want.reverse()
    pos = 0
    for r in want:
        k = len(r)
        if seqs[pos : pos + k] != list(r):
            break
        pos += k
    else:
        return rows
    where = {q: i for i, q in enumerate(seqs)}
    try:
        return [rows[where[q]] for r in want for q in r]
    except KeyError:
        return rows


def _checked_pairs(
    thread_id: str, version: int, flat: list[int] | None, next_seq: int
) -> tuple[Range, ...]:
    """``_pairs`` of a stored row, validated: an even number of integers (no ``NULL``) forming
    ranges ``0 <= start <= end <= next_seq``, with ``next_seq`` an integer.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` for a damaged row (``context``:
            ``thread_id``, ``version``, ``path`` ``"$.ranges"``).
    """
    if (
        type(next_seq) is int
        and (
            not flat
            or (
                len(flat) % 2 == 0
                and all(type(x) is int for x in flat)  # no NULL, bool or other type in the array
                and all(0 <= a <= b <= next_seq for a, b in zip(flat[::2], flat[1::2], strict=True))
            )
        )
    ):
        return _pairs(flat)
    raise SerializationError(
        f"the stored checkpoint of thread {thread_id!r} version {version} is damaged (its "
        "message ranges are not what tenxgraph wrote); restore the row, delete the thread, or "
        "read another version",
        context={"thread_id": thread_id, "version": version, "path": "$.ranges", "type": "ranges"},
    )


def _pairs(flat: list[int] | None) -> tuple[Range, ...]:
    """``[s1, e1, s2, e2, ...]`` -> ``((s1, e1), (s2, e2), ...)``."""
    if not flat:
        return ()
    it = iter(flat)
    return tuple(zip(it, it, strict=True))


def _merge_ranges(ranges: list[Range]) -> tuple[list[int], list[int]]:
    """Disjoint, sorted cover of ``ranges`` as ``(starts, ends)`` (empty ranges dropped)."""
    starts: list[int] = []
    ends: list[int] = []
    for s, e in sorted(r for r in ranges if r[1] > r[0]):
        if ends and s <= ends[-1]:
            if e > ends[-1]:
                ends[-1] = e
        else:
            starts.append(s)
            ends.append(e)
    return starts, ends


#: The statement suffix (``ROTATE_SCAN_*`` / ``ROTATE_SWAP_*``) of each rotated table.
_ROTATED: dict[str, str] = {
    "checkpoints": "CHECKPOINTS",
    "messages": "MESSAGES",
    "tool_executions": "LEDGER",
    "runs.input": "RUN_INPUTS",
    "runs.output": "RUN_OUTPUTS",
}


def _rotate_pos(table: str, pos: int | str) -> int | str | bytes:
    """A rotation position as its column takes it: the ledger's call key as ``bytea``, a run
    id as text, a version or seq as ``int8``."""
    if table == "tool_executions":
        return _utf8(str(pos))
    return str(pos) if table.startswith("runs.") else int(pos)


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8 bytes, lone surrogates included (for the ``bytea`` ledger keys)."""
    return text.encode("utf-8", "surrogatepass")


def _text(data: bytes) -> str:
    """Inverse of :func:`_utf8`."""
    return bytes(data).decode("utf-8", "surrogatepass")


def _maybe_sent(exc: StorageError) -> bool:
    """Whether ``exc`` (from ``PostgresStore._fetch``) lost the connection while the
    statement may have been sent, so its outcome must be read back."""
    return bool(getattr(exc, "_tx_maybe_sent", False))


#: libpq TCP keepalive settings given to the store's connections unless the DSN sets its own.
TCP_KEEPALIVES: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


def check_answer_timeout(value: Any) -> float | None:
    """``answer_timeout_s`` checked: a positive number of seconds, or ``None``.

    Raises:
        ConfigError: ``CONFIG_001`` for anything else.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(
            f"answer_timeout_s must be a positive number of seconds or None, got {value!r}",
            context={"key": "answer_timeout_s"},
        )
    return float(value)


class _AnswerWatchdog:
    """Shuts a connection's socket down when a statement gets no answer in time.

    Shutting the socket down (rather than closing the descriptor) wakes whatever waits on it,
    libpq's read sees the end of the stream, and the statement fails as on a lost connection:
    no server-side cancel is attempted (it could not get through either), the pool discards
    the connection, and a write reads its outcome back. One timer per statement
    (``loop.call_later``), cancelled when the answer comes.
    """

    __slots__ = ("_handle", "fired")

    def __init__(self) -> None:
        self._handle: asyncio.TimerHandle | None = None
        self.fired = False

    @classmethod
    def arm(
        cls, conn: psycopg.AsyncConnection[Any], timeout_s: float | None
    ) -> _AnswerWatchdog | None:
        if timeout_s is None:
            return None
        dog = cls()
        dog._handle = asyncio.get_running_loop().call_later(timeout_s, dog._fire, conn)
        return dog

    def _fire(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.fired = True
        try:
            fd = conn.pgconn.socket
        except psycopg.OperationalError:
            return  # already closed
        with contextlib.suppress(OSError):
            sock = socket.socket(fileno=os.dup(fd))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    def disarm(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


def _connection_gone(exc: psycopg.Error) -> bool:
    """Whether ``exc`` says the pooled connection itself was dead (safe to retry once)."""
    if isinstance(exc, PoolTimeout | PoolClosed | TooManyRequests):
        return False
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate is None:
        return isinstance(exc, psycopg.OperationalError)
    return sqlstate.startswith("08") or sqlstate in _CONNECTION_GONE


def _adopt(conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncCursor[Any]:
    """First use of ``conn`` by a store: teach it tenxgraph's parameter types
    (:mod:`tenxgraph.storage._pg_types`) and give it the cursor the store reuses on it for
    statements with small answers (a cursor reused for the same statement keeps its adapters'
    lookups, a fresh one redoes them)."""
    register(conn)
    cur = conn.cursor(row_factory=tuple_row)
    setattr(conn, _CURSOR_ATTR, cur)
    return cur


#: Longest wait (seconds) for the answer to one idle connection's probe in ``pool.check()``.
CHECK_TIMEOUT_S = 2.0


def _bounded_check(timeout_s: float) -> Any:
    """psycopg_pool's connection probe (an empty query), failed as a lost connection when no
    answer comes within ``timeout_s`` seconds (see :class:`_AnswerWatchdog`)."""

    async def check(conn: psycopg.AsyncConnection[Any]) -> None:
        dog = _AnswerWatchdog.arm(conn, timeout_s)
        try:
            await AsyncConnectionPool.check_connection(conn)
        finally:
            if dog is not None:
                dog.disarm()

    return check


async def _check_pool(pool: AsyncConnectionPool) -> None:
    """Drop every dead idle connection of ``pool`` (one probe each; error path only)."""
    try:
        await pool.check()
    except Exception:  # noqa: BLE001 - best effort; the retry reports the real error
        pass


#: Names of the pools this module has closed (or is closing). A connection attempt that such a
#: pool had in flight fails when the pool or its loop goes away, and psycopg_pool reports it as
#: "error connecting in 'pool-N'"; that line is noise about a pool already released on purpose.
_CLOSED_POOLS: set[str] = set()


class _ClosedPoolNoise(logging.Filter):
    """Drops psycopg_pool's "error connecting" records of pools in ``_CLOSED_POOLS`` (logger
    ``psycopg.pool``); every other record of that logger passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (
            isinstance(record.msg, str)
            and record.msg.startswith("error connecting in")
            and isinstance(args, tuple)
            and args
            and args[0] in _CLOSED_POOLS
        )


logging.getLogger("psycopg.pool").addFilter(_ClosedPoolNoise())


async def _lease_listen_loop(
    hub: LeaseWakeups,
    tried: asyncio.Event,
    connect: Callable[[], Awaitable[psycopg.AsyncConnection[Any]]],
    listen: bytes,
    backend_pid: bytes,
    *,
    trust: bool,
) -> None:
    """Hold the lease channel's listening connection of one store and event loop, feeding
    release notifications to ``hub``, until cancelled (the store closes, or its loop ends).

    A connection whose server-side backend is not the one it was given at startup is a
    pooler's (unless ``trust``: a ``listen_dsn``, or ``pooler=None``): ``LISTEN`` would not
    stay on it, so none is held and the waiters poll. A broken connection is opened again
    after ``LISTEN_RETRY_S``; meanwhile, and when it comes back, every waiter is woken (a
    release may have been missed) and ``hub.live`` is false (waiters poll).
    """
    try:
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await connect()
                if not trust:
                    cur = await conn.execute(backend_pid, prepare=False)
                    row = await cur.fetchone()
                    if row is None or row[0] != conn.info.backend_pid:
                        logger.info(
                            "run lease waiters poll: the store reaches Postgres through a "
                            "pooler, which does not keep LISTEN (pass listen_dsn= to be woken)"
                        )
                        return
                await conn.execute(listen, prepare=False)
                hub.live = True
                tried.set()
                hub.wake_all()  # anything released while no connection listened
                async for note in conn.notifies():
                    hub.dispatch(note.payload)
            except (psycopg.Error, TenxGraphError, OSError) as exc:
                logger.warning(
                    "the run lease's listening connection failed (%s); waiters poll until "
                    "it is back",
                    type(exc).__name__,
                )
            finally:
                hub.live = False
                tried.set()
                hub.wake_all()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close())
            await asyncio.sleep(LISTEN_RETRY_S)
    finally:
        hub.live = False
        tried.set()


async def _close_on_loop_shutdown(pool: AsyncConnectionPool) -> None:
    """Wait forever; when cancelled (the loop is shutting down, e.g. at the end of
    ``asyncio.run``, or :meth:`PostgresStore.aclose` ran), close ``pool``.

    Without it, a pool left open when its loop ends can hang the loop's shutdown:
    ``psycopg_pool`` keeps a worker alive that swallows the cancellation of a connection
    attempt in flight and reschedules it.
    """
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        _CLOSED_POOLS.add(pool.name)
        try:
            await pool.close(timeout=1.0)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass


def _release_pools(pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPool]) -> None:
    """Finalizer of a :class:`PostgresStore` collected without ``aclose()``: ask each pool's
    guard to close it on its own loop (thread-safe), or drop the sockets of a closed loop."""
    for loop, entry in list(pools.items()):
        if entry.guard is None or entry.guard.done():
            continue
        if loop.is_closed():
            _abandon(entry.pool)
            continue
        try:
            loop.call_soon_threadsafe(entry.guard.cancel)
        except RuntimeError:  # the loop closed meanwhile
            _abandon(entry.pool)


def _abandon(pool: AsyncConnectionPool) -> None:
    """Best-effort cleanup of a pool whose event loop is closed.

    Its worker tasks died with the loop and its connections cannot be closed through it, so
    the idle connections' sockets are closed directly (``PGconn.finish``), which also spares
    their "deleted while still open" warnings.
    """
    _CLOSED_POOLS.add(pool.name)
    for conn in list(getattr(pool, "_pool", ())):
        try:
            conn.pgconn.finish()
        except Exception:  # noqa: BLE001 - best effort
            pass


def _ledger_error(key: ThreadKey, entry: LedgerEntry, detail: str) -> LedgerWriteError:
    return LedgerWriteError(
        f"could not record tool call {entry.tool_call_id!r} ({entry.tool_name}) on thread "
        f"{key.thread_id!r}: {detail}; the run stops so the tool cannot run again unrecorded",
        context={
            "thread_id": key.thread_id,
            "tool_call_id": entry.tool_call_id,
            "tool": entry.tool_name,
        },
    )


async def _adrive(
    conn: psycopg.AsyncConnection[Any], plan: Generator[_Op, _Rows, Any], *, tx: bool
) -> Any:
    """Run a setup plan on ``conn``, in a transaction (a savepoint inside an open one) when
    ``tx`` or when ``conn`` is not autocommit; return the plan's result."""
    if tx or not conn.autocommit:
        async with conn.transaction():
            return await _adrive_steps(conn, plan)
    return await _adrive_steps(conn, plan)


async def _adrive_steps(
    conn: psycopg.AsyncConnection[Any], plan: Generator[_Op, _Rows, Any]
) -> Any:
    cur = conn.cursor(row_factory=tuple_row)
    rows: _Rows | None = None
    try:
        while True:
            query, params = plan.send(rows)  # type: ignore[arg-type]
            await cur.execute(query, params)
            rows = await cur.fetchall() if cur.description is not None else []
    except StopIteration as stop:
        return stop.value


def _drive(conn: psycopg.Connection[Any], plan: Generator[_Op, _Rows, Any], *, tx: bool) -> Any:
    """Sync twin of :func:`_adrive`."""
    if tx or not conn.autocommit:
        with conn.transaction():
            return _drive_steps(conn, plan)
    return _drive_steps(conn, plan)


def _drive_steps(conn: psycopg.Connection[Any], plan: Generator[_Op, _Rows, Any]) -> Any:
    cur = conn.cursor(row_factory=tuple_row)
    rows: _Rows | None = None
    try:
        while True:
            query, params = plan.send(rows)  # type: ignore[arg-type]
            cur.execute(query, params)
            rows = cur.fetchall() if cur.description is not None else []
    except StopIteration as stop:
        return stop.value
