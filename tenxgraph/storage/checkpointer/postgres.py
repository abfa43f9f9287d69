"""``PgCheckpointer``: Postgres as the source of truth, an in-process LRU and optionally Redis
above it (DESIGN section 4)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.postgres import PostgresStore, normalize_dsn

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


class PgCheckpointer(BaseCheckpointer):
    """Checkpoints in PostgreSQL (psycopg 3 + ``psycopg_pool``), cached in this process (LRU)
    and, when a Redis is given, in Redis shared by every instance. Every guarantee of DESIGN
    section 3 holds across processes and machines.

    Args:
        postgres_dsn: a libpq DSN or URL; a SQLAlchemy URL (``postgresql+asyncpg://``,
            ``postgresql+psycopg://``) is accepted. Exactly one of ``postgres_dsn`` and
            ``pg_pool``.
        pg_pool: an application's ``psycopg_pool.AsyncConnectionPool`` (autocommit
            connections).
        pool_config: settings of the pool the checkpointer creates (``min_size``,
            ``max_size``, ``timeout`` ...; see ``PostgresStore``).
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
        release_resources: on :meth:`aclose`, also close a ``pg_pool`` / ``redis`` client /
            ``redis_pool`` the application passed in (the checkpointer always closes what it
            created itself).
        table_prefix: prefix of every table name (default ``"tenxgraph_"``).
        redis_prefix: prefix of every Redis key (default ``"tenxgraph:"``). The checkpointer
            appends a digest of the database's host, port and name, the schema and the table
            prefix (``"tenxgraph:<12 hex>:"``), so checkpointers over different tables never
            share cache entries through one Redis; instances serving the same threads must
            therefore spell the DSN's host, port and database alike.
        lru_max_entries: threads kept decoded in the in-process LRU (count).

    Raises:
        ConfigError: ``CONFIG_001`` when neither or both of ``postgres_dsn`` / ``pg_pool`` are
            given, or an unknown ``user_id_type``.
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
        release_resources: bool = True,
        *,
        table_prefix: str = "tenxgraph_",
        redis_prefix: str = "tenxgraph:",
        lru_max_entries: int = 1024,
    ) -> None:
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
        self.schema = schema
        self.user_id_type = user_id_type
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
        if redis_client is not None or redis_url:
            from tenxgraph.storage.redis import RedisCache

            if redis_client is not None:
                caches.append(RedisCache(client=redis_client, prefix=redis_prefix, ttl_s=cache_ttl))
            else:
                # One client per event loop, built from the URL (and redis_pool_config).
                caches.append(
                    RedisCache(
                        redis_url,
                        prefix=redis_prefix,
                        ttl_s=cache_ttl,
                        client_kwargs=redis_pool_config,
                    )
                )
        super().__init__(
            LayeredStore(pg, caches=caches),
            state_history_limit=state_history_limit,
            enforce_user_isolation=enforce_user_isolation,
        )

    async def aclose(self) -> None:
        """Release the pools and clients this checkpointer created (and, with
        ``release_resources``, those the application passed in); idempotent."""
        await super().aclose()
        own, self._own_redis = self._own_redis, None
        if own is not None:
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
