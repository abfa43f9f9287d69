"""``PgCheckpointer``: Postgres as the source of truth, an in-process LRU and optionally Redis
above it (see the "layered store" concepts page of the docs)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import weakref
from typing import TYPE_CHECKING, Any

from tenxgraph.core.config import check_lease_timing, check_strategy
from tenxgraph.core.exceptions import ConfigError
from tenxgraph.storage._cache_mac import check_key
from tenxgraph.storage._tasks import keep_task
from tenxgraph.storage.checkpointer.base import BaseCheckpointer, StateT
from tenxgraph.storage.kv import MemoryKV, RedisKV
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.postgres import DEFAULT_ANSWER_TIMEOUT_S, PostgresStore, normalize_dsn

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PgCheckpointer"]


def redis_namespace(conninfo: str, schema: str, table_prefix: str) -> str:
    """A short digest naming one set of tables: ``host|port|dbname|schema|table_prefix``.

    Appended to the Redis key prefix so that checkpointers over different databases, schemas
    or table prefixes that share a Redis never read each other's cache entries.
    """
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(normalize_dsn(conninfo))
    except Exception:  # noqa: BLE001 - PostgresStore reports a bad DSN
        params = {}
    host = str(params.get("host") or params.get("hostaddr") or "")
    port = str(params.get("port") or "5432")
    db = str(params.get("dbname") or params.get("user") or "")
    raw = "|".join((host, port, db, schema, table_prefix))
    return hashlib.blake2b(raw.encode(), digest_size=6).hexdigest()


class PgCheckpointer(BaseCheckpointer[StateT]):
    """Checkpoints in PostgreSQL (psycopg 3 + ``psycopg_pool``), cached in this process (LRU)
    and, when a Redis is given, in Redis shared by every instance. Every guarantee listed on
    the "Guarantees and decisions" page of the docs (versioned history, compare-and-swap,
    user isolation, diff-only writes, the tool ledger) holds across processes and machines.

    Args:
        postgres_dsn: a libpq DSN or URL; a SQLAlchemy URL (``postgresql+asyncpg://``,
            ``postgresql+psycopg://``) is accepted. Exactly one of ``postgres_dsn`` and
            ``pg_pool``.
        pg_pool: an application's ``psycopg_pool.AsyncConnectionPool`` (autocommit
            connections).
        pool_config: settings of the pool the checkpointer creates: ``min_size`` (default
            1), ``max_size`` (default 10), ``timeout`` (seconds to wait for a connection,
            default 30), ``max_waiting``, ``max_lifetime``, ``max_idle``,
            ``reconnect_timeout``, ``num_workers``, ``name``, ``connection_class``,
            ``configure``, ``reset``, ``check`` (as in ``psycopg_pool``),
            ``prepare_threshold`` (default 5; ``None`` disables server-side prepared
            statements) and ``kwargs`` (extra connection arguments); an unknown key or a
            value of the wrong type or range is refused (``CONFIG_001``) before anything
            connects. With ``pg_pool`` the application's pool keeps its own settings and only
            ``timeout`` is accepted here (how long the first connection is retried before its
            error is raised); any other key is refused: size that pool yourself.
        redis_url: URL of the shared Redis cache (``redis://...``); without ``redis_url``,
            ``redis`` or ``redis_pool`` there is no Redis tier (LRU + Postgres).
        redis: an application's ``redis.asyncio.Redis`` client (bytes responses).
        redis_pool: an application's ``redis.asyncio.ConnectionPool``.
        redis_pool_config: keyword arguments for the Redis client built from ``redis_url``
            (e.g. ``{"max_connections": 50}``).
        schema: the Postgres schema of the tables (default ``"public"``).
        cache_ttl: seconds a thread's Redis keys live after its last write (default 86400).
        state_history_limit: versions kept per thread (default 20; ``0``/``None`` keeps all).
        enforce_user_isolation: default ``True`` (see :class:`BaseCheckpointer`).
        user_id_type: kept for 10xGraph compatibility; user ids are stored as text whatever
            their type (``"string"``, ``"int"``, ``"bigint"`` are accepted).
        id_type: 10xGraph's type of thread and message ids (``"string"``, ``"int"``,
            ``"bigint"``); tenxgraph stores ids as text and accepts ``int`` thread ids in the
            config whatever this says, so it is only checked.
        release_resources: on :meth:`aclose`, also close a ``pg_pool`` / ``redis`` client /
            ``redis_pool`` the application passed in (the checkpointer always closes what it
            created itself). Default ``False`` (the application closes what it owns), as 10xGraph's
            durability guide gives it.
        db_url: the name 10xGraph's Postgres integration page uses for ``postgres_dsn`` (the
            reference page's name); accepted as an alias, not together with it.
        table_prefix: prefix of every table name (default ``"tenxgraph_"``).
        redis_prefix: prefix of every Redis key (default ``"tenxgraph:"``). The checkpointer
            appends a digest of the database's host, port and name, the schema and the table
            prefix (``"tenxgraph:<12 hex>:"``), so checkpointers over different tables never
            share cache entries through one Redis; instances serving the same threads must
            therefore spell the DSN's host, port and database alike.
        lru_max_entries: threads kept decoded in the in-process LRU (count).
        pooler: ``"auto"`` (default: detect a connection pooler and then send statements
            unprepared), ``"pgbouncer"`` (a transaction-mode pooler without prepared
            statement support, PgBouncer < 1.21 or ``max_prepared_statements = 0``: never
            prepare) or ``None`` (direct, or a pooler that keeps prepared statements). See the
            "Deploy on PgBouncer, Redis Cluster, partitions" page of the docs.
        partitions: ``None`` (default, plain tables) or N (1 to 1024): ``setup()`` creates a
            fresh schema with its thread-keyed tables hash-partitioned on ``thread_id`` into N
            partitions; refused (``CONFIG_001``) over existing tables of another layout.
        redis_cluster: ``redis_url`` names a node of a Redis Cluster (the client is a
            ``redis.asyncio.cluster.RedisCluster``); or pass a ``RedisCluster`` as ``redis=``.
        multitask_strategy: the default strategy of runs whose config names none: ``None``
            (default: the compare-and-swap alone), ``"reject"``, ``"enqueue"``,
            ``"interrupt"``, ``"rollback"`` (see :class:`BaseCheckpointer` and the "Run lease"
            page of the docs).
        lease_ttl_s: seconds a run lease lasts after its holder's last renewal (default 5.0).
        lease_renew_s: seconds between two renewals by a running holder (default 2.0).
        enqueue_timeout_s: seconds a queued run (or a resume) waits for the lease before
            ``ThreadBusyError`` (default 300.0; ``None``: no limit).
        thread_ttl_s: seconds without a checkpoint after which a thread expires (the
            retention sweep deletes it); ``None`` (default): only threads given their own TTL
            (``aset_thread_ttl``) expire. See docs/how-to/erasure-retention.md.
        answer_timeout_s: seconds a statement may wait for Postgres's answer (default 10.0;
            ``None``: no limit). A connection that stays silent longer (a black-holed route,
            a frozen server) is shut down: a read fails with ``TransientStorageError``, a
            checkpoint write reads its outcome back and ends within ``answer_timeout_s`` +
            7 s, committed or with ``CommitOutcomeUnknownError``. Connections also get TCP
            keepalives (idle 30 s, interval 10 s, 3 probes) unless the DSN sets its own.
        lease_listen: a run waiting for a thread's lease is woken by the release (one
            ``LISTEN`` connection per process and event loop, opened when a run first has to
            wait; default ``True``); ``False``: waiting runs poll with backoff.
        listen_dsn: the DSN of that connection when ``postgres_dsn`` goes through a pooler in
            transaction mode (PgBouncer), which does not keep ``LISTEN``: a direct or
            session-mode DSN to the same database. Without it, a store behind a pooler polls
            (docs/how-to/run-lease.md).
        cache_mac_key: the secret (``bytes``, at least 16; e.g. ``os.urandom(32)`` kept in
            the application's secret store) of the keyed MAC each Redis entry carries: a
            cached copy is served only when its tag verifies, so a copy altered in Redis is
            never served nor written back. Every instance needs the same key. ``None``
            (default): the key ``setup()`` drew and keeps in Postgres (table
            ``cache_keys``), read once. Needs a Redis tier.

    The cache methods (``aput_cache_value``, ``aput_state_cache`` ...) keep their entries in
    Redis when there is a Redis tier (shared by every instance; the state cache expires after
    ``cache_ttl``), else in this process.

    Raises:
        ConfigError: ``CONFIG_001`` when neither or both of ``postgres_dsn`` / ``pg_pool`` are
            given, both ``postgres_dsn`` and ``db_url``, ``pg_pool`` is not an
            ``AsyncConnectionPool``, a bad ``pool_config`` (see above), an unknown
            ``user_id_type`` or ``id_type``, a bad ``pooler`` or ``partitions``,
            ``redis_cluster=True`` without ``redis_url`` (or with ``redis``/``redis_pool``), an
            unknown ``multitask_strategy`` or bad lease timing, a ``cache_mac_key`` that is not
            bytes of at least 16, or one given without a Redis tier, a ``lease_listen`` that is
            not a bool or an empty ``listen_dsn``.
    """

    def __init__(
        self,
        postgres_dsn: str | None = None,
        pg_pool: AsyncConnectionPool | None = None,
        pool_config: dict[str, Any] | None = None,
        redis_url: str | None = None,
        redis: Any = None,
        redis_pool: Any = None,
        redis_pool_config: dict[str, Any] | None = None,
        schema: str = "public",
        cache_ttl: int = 86400,
        state_history_limit: int | None = 20,
        enforce_user_isolation: bool = True,
        user_id_type: str = "string",
        release_resources: bool = False,
        id_type: str = "string",
        *,
        db_url: str | None = None,
        table_prefix: str = "tenxgraph_",
        redis_prefix: str = "tenxgraph:",
        lru_max_entries: int = 1024,
        pooler: str | None = "auto",
        partitions: int | None = None,
        redis_cluster: bool = False,
        multitask_strategy: str | None = None,
        lease_ttl_s: float = 5.0,
        lease_renew_s: float = 2.0,
        enqueue_timeout_s: float | None = 300.0,
        thread_ttl_s: float | None = None,
        answer_timeout_s: float | None = DEFAULT_ANSWER_TIMEOUT_S,
        cache_mac_key: bytes | None = None,
        lease_listen: bool = True,
        listen_dsn: str | None = None,
    ) -> None:
        check_strategy(multitask_strategy, "multitask_strategy")
        check_lease_timing(lease_ttl_s, lease_renew_s, enqueue_timeout_s)
        if db_url is not None:
            if postgres_dsn is not None:
                raise ConfigError(
                    "give postgres_dsn= or its alias db_url=, not both",
                    context={"key": "db_url"},
                )
            postgres_dsn = db_url
        if (postgres_dsn is None) == (pg_pool is None):
            raise ConfigError(
                "PgCheckpointer needs exactly one of postgres_dsn= or pg_pool=",
                context={"key": "postgres_dsn"},
            )
        if user_id_type not in ("string", "int", "bigint"):
            raise ConfigError(
                f"user_id_type must be 'string', 'int' or 'bigint', got {user_id_type!r}",
                context={"key": "user_id_type"},
            )
        if redis_cluster and (not redis_url or redis is not None or redis_pool is not None):
            raise ConfigError(
                "redis_cluster=True needs redis_url= (a node of the cluster) and neither "
                "redis= nor redis_pool= (pass a RedisCluster as redis= instead)",
                context={"key": "redis_cluster"},
            )
        if cache_mac_key is not None:
            if redis is None and redis_pool is None and not redis_url:
                raise ConfigError(
                    "cache_mac_key= keys the MACs of Redis cache entries: it needs a Redis "
                    "tier (redis_url=, redis= or redis_pool=)",
                    context={"key": "cache_mac_key"},
                )
            check_key(cache_mac_key)
        if id_type not in ("string", "int", "bigint"):
            raise ConfigError(
                f"id_type must be 'string', 'int' or 'bigint', got {id_type!r}",
                context={"key": "id_type"},
            )
        self.schema = schema
        self.user_id_type = user_id_type
        self.id_type = id_type
        self.release_resources = release_resources
        self._user_pg_pool = pg_pool
        self._user_redis: Any = redis
        self._user_redis_pool: Any = redis_pool
        self._own_redis: Any = None
        pg = PostgresStore(
            postgres_dsn,
            pool=pg_pool,
            pool_config=pool_config,
            schema=schema,
            table_prefix=table_prefix,
            pooler=pooler,
            partitions=partitions,
            answer_timeout_s=answer_timeout_s,
            lease_listen=lease_listen,
            listen_dsn=listen_dsn,
        )
        conninfo = (
            postgres_dsn if postgres_dsn is not None else str(getattr(pg_pool, "conninfo", ""))
        )
        redis_prefix = f"{redis_prefix}{redis_namespace(conninfo, schema, table_prefix)}:"
        caches: list[Any] = [LRUCache(max_entries=lru_max_entries)]
        redis_client = redis
        if redis_client is None and redis_pool is not None:
            import redis.asyncio as aioredis

            redis_client = aioredis.Redis(connection_pool=redis_pool)
            self._own_redis = redis_client
        kv: Any = MemoryKV()
        if redis_client is not None or redis_url:
            from tenxgraph.storage.redis import RedisCache

            # The MAC key: the application's, else the one kept in Postgres, read once on
            # the tier's first use (never sent to Redis).
            keying: dict[str, Any] = (
                {"mac_key": cache_mac_key}
                if cache_mac_key is not None
                else {"mac_key_loader": pg.acache_mac_key}
            )
            if redis_client is not None:
                tier = RedisCache(
                    client=redis_client, prefix=redis_prefix, ttl_s=cache_ttl, **keying
                )
            else:
                # One client per event loop, built from the URL (and redis_pool_config).
                tier = RedisCache(
                    redis_url,
                    prefix=redis_prefix,
                    ttl_s=cache_ttl,
                    cluster=redis_cluster,
                    client_kwargs=redis_pool_config,
                    **keying,
                )
            caches.append(tier)
            # the running loop's client of the tier, looked up per call
            kv = RedisKV(client_fn=lambda: tier.client, prefix=redis_prefix)
        super().__init__(
            LayeredStore(pg, caches=caches),
            state_history_limit=state_history_limit,
            enforce_user_isolation=enforce_user_isolation,
            cache_values=kv,
            state_cache_ttl_s=float(cache_ttl),
            multitask_strategy=multitask_strategy,
            lease_ttl_s=lease_ttl_s,
            lease_renew_s=lease_renew_s,
            enqueue_timeout_s=enqueue_timeout_s,
            thread_ttl_s=thread_ttl_s,
        )
        self._loop_guards: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Task[None]
        ] = weakref.WeakKeyDictionary()
        weakref.finalize(self, _cancel_guards, self._loop_guards).atexit = False
        self._redis_pools = self._own_redis_pools()  # fixed at construction; read per call

    def __repr__(self) -> str:
        source = getattr(self.store, "source", self.store)
        redis = [c for c in getattr(self.store, "caches", ()) if getattr(c, "name", "") == "redis"]
        cache = f", redis={redis[0]!r}" if redis else ""
        return f"PgCheckpointer(postgres={source!r}{cache})"

    async def _ensure_setup(self) -> None:
        self._guard_loop()
        await super()._ensure_setup()

    def _guard_loop(self) -> None:
        """On the first call from an event loop, start a task that disconnects the Redis
        connections this checkpointer created when that loop shuts down (``asyncio.run``
        cancels it), so an application that never calls ``aclose()`` leaves no unclosed
        socket behind (no ``ResourceWarning``). Postgres pools do the same in
        ``PostgresStore``. The clients stay usable: a later call reconnects."""
        pools = self._redis_pools
        if not pools:
            return
        loop = asyncio.get_running_loop()
        if loop in self._loop_guards:
            return
        for old in [lp for lp in self._loop_guards if lp.is_closed()]:
            self._loop_guards.pop(old, None)
        # held here: the loop itself keeps only a weak reference to its tasks
        self._loop_guards[loop] = keep_task(
            loop.create_task(
                _disconnect_on_loop_shutdown(pools),
                name="tenxgraph-redis-guard",
                context=contextvars.Context(),  # not the caller's: it would hold this object
            )
        )

    def _own_redis_pools(self) -> list[Any]:
        """The redis-py connection pools of the Redis clients this checkpointer created."""
        clients = [self._own_redis] if self._own_redis is not None else []
        for cache in getattr(self.store, "caches", ()):
            if getattr(cache, "_owns_client", False):
                clients.append(getattr(cache, "_client", None))
        return [c.connection_pool for c in clients if getattr(c, "connection_pool", None)]

    async def aclose(self) -> None:
        """Release the pools and clients this checkpointer created (and, with
        ``release_resources``, those the application passed in); idempotent."""
        await super().aclose()
        own, self._own_redis = self._own_redis, None
        if own is not None and not hasattr(own, "connection_pool"):
            await own.aclose()  # a RedisCluster (redis_cluster=True): its node pools are its own
        elif own is not None:
            await own.aclose(
                close_connection_pool=self._user_redis_pool is None or self.release_resources
            )
        if self.release_resources:
            pool, self._user_pg_pool = self._user_pg_pool, None
            if pool is not None and not pool.closed:
                await pool.close()
            client, self._user_redis = self._user_redis, None
            if client is not None:
                await client.aclose()
            rpool, self._user_redis_pool = self._user_redis_pool, None
            if rpool is not None:
                await rpool.aclose()


async def _disconnect_on_loop_shutdown(pools: list[Any]) -> None:
    """Wait until cancelled (the loop is shutting down), then disconnect ``pools``."""
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        for pool in pools:
            with contextlib.suppress(Exception):  # best effort at shutdown
                await pool.disconnect()


def _cancel_guards(
    guards: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[None]],
) -> None:
    """Finalizer of a checkpointer collected without ``aclose()``: let each loop's guard
    disconnect the Redis connections now (thread-safe)."""
    for loop, task in list(guards.items()):
        if not task.done() and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)
