"""The generic key-value cache behind a checkpointer's cache methods.

10xGraph's checkpointers offer a small cache for application values (``aput_cache_value``,
``aget_cache_value``, ``aclear_cache_value``, ``alist_cache_keys``) and a "state cache"
(``aput_state_cache`` / ``aget_state_cache``). tenxgraph keeps both in the store's cache tier:

* ``MemoryKV``: in this process (``InMemoryCheckpointer``, and ``PgCheckpointer`` without
  Redis), bounded by a number of entries, least recently used evicted first;
* ``RedisKV``: in Redis (``PgCheckpointer`` with Redis), shared by every instance;
* ``SqliteStore``'s ``kv_*`` methods: in the SQLite file (``SqliteCheckpointer``).

Values are opaque bytes here (the checkpointer encodes them); a TTL is in seconds, ``None``
meaning no expiry. None of this is the source of truth: these entries are never read by a run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable

from tenxgraph.core.exceptions import TransientStorageError

__all__ = ["CacheValueStore", "MemoryKV", "RedisKV"]

log = logging.getLogger("tenxgraph.kv")


@runtime_checkable
class CacheValueStore(Protocol):
    """What a checkpointer's cache methods need from a tier."""

    #: tier name (``"memory"``, ``"redis"``, ``"sqlite"``).
    name: str

    async def kv_put(self, namespace: str, key: str, value: bytes, ttl_s: float | None) -> None:
        """Store ``value`` under ``(namespace, key)``, replacing any previous one; it expires
        after ``ttl_s`` seconds (``None``: never)."""
        ...

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """The live value of ``(namespace, key)``, or ``None`` (missing or expired)."""
        ...

    async def kv_delete(self, namespace: str, key: str) -> bool:
        """Remove ``(namespace, key)``; ``True`` when a live value was there."""
        ...

    async def kv_keys(self, namespace: str, prefix: str | None) -> list[str]:
        """Live keys of ``namespace`` starting with ``prefix`` (all when ``None``), sorted."""
        ...


class MemoryKV:
    """Entries in this process, at most ``max_entries`` of them (least recently used evicted).

    Args:
        max_entries: bound on the number of entries (count), default 10,000.

    Safe to use from several threads (the sync twins run on tenxgraph's portal thread).
    """

    name = "memory"

    def __init__(self, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str], tuple[bytes, float | None]] = OrderedDict()
        self._lock = threading.Lock()

    def _live(self, k: tuple[str, str], now: float) -> bytes | None:
        item = self._data.get(k)
        if item is None:
            return None
        value, expires = item
        if expires is not None and expires <= now:
            del self._data[k]
            return None
        return value

    async def kv_put(self, namespace: str, key: str, value: bytes, ttl_s: float | None) -> None:
        """See ``CacheValueStore``."""
        expires = None if ttl_s is None else time.monotonic() + ttl_s
        with self._lock:
            self._data[(namespace, key)] = (value, expires)
            self._data.move_to_end((namespace, key))
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """See ``CacheValueStore``."""
        with self._lock:
            value = self._live((namespace, key), time.monotonic())
            if value is not None:
                self._data.move_to_end((namespace, key))
            return value

    async def kv_delete(self, namespace: str, key: str) -> bool:
        """See ``CacheValueStore``."""
        with self._lock:
            live = self._live((namespace, key), time.monotonic()) is not None
            self._data.pop((namespace, key), None)
            return live

    async def kv_keys(self, namespace: str, prefix: str | None) -> list[str]:
        """See ``CacheValueStore``."""
        now = time.monotonic()
        with self._lock:
            found = [
                k
                for (ns, k) in list(self._data)
                if ns == namespace
                and (prefix is None or k.startswith(prefix))
                and self._live((ns, k), now) is not None
            ]
        return sorted(found)

    async def aclose(self) -> None:
        """Nothing to release (entries stay until evicted or expired)."""


def _glob_escape(text: str) -> str:
    """Escape Redis glob metacharacters so ``text`` matches only itself in ``SCAN MATCH``."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


class RedisKV:
    """Entries in Redis, shared by every instance using the same Redis and prefix.

    Keys are ``{prefix}{kv:<len>:<namespace>}:<key>``: the namespace is the hash tag, so all
    keys of one namespace live on one Redis Cluster slot, and its length makes the split
    between namespace and key unambiguous. ``SET ... PX`` / ``GET`` / ``DEL`` / ``SCAN``.

    Args:
        client: a ``redis.asyncio.Redis`` (or ``RedisCluster``) client (bytes responses).
        prefix: the checkpointer's Redis key prefix (``tenxgraph:<digest>:``).
        client_fn: instead of ``client``, a function returning the client to use for each call
            (the Redis tier's client of the running event loop).

    Raises:
        ConfigError: ``CONFIG_001`` when neither or both of ``client`` and ``client_fn`` are
            given.

    Reads that fail are misses (logged as a warning); writes and deletes that fail raise
    ``TransientStorageError`` (``STORAGE_TRANSIENT_001``) so the caller knows the value was not
    stored.
    """

    name = "redis"

    def __init__(
        self, client: Any = None, prefix: str = "tenxgraph:", *, client_fn: Any = None
    ) -> None:
        if (client is None) == (client_fn is None):
            from tenxgraph.core.exceptions import ConfigError

            raise ConfigError(
                "RedisKV needs exactly one of client= or client_fn=", context={"key": "client"}
            )
        self._client_fn = client_fn if client_fn is not None else (lambda: client)
        self.prefix = prefix

    @property
    def _client(self) -> Any:
        return self._client_fn()

    def _ns(self, namespace: str) -> str:
        return f"{self.prefix}{{kv:{len(namespace)}:{namespace}}}:"

    async def _write(self, op: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from redis.exceptions import RedisError

        try:
            return await fn(*args, **kwargs)
        except (RedisError, OSError) as exc:
            raise TransientStorageError(
                f"Redis {op} of a cache value failed ({type(exc).__name__}); retry",
                context={"backend": "redis"},
            ) from None

    async def kv_put(self, namespace: str, key: str, value: bytes, ttl_s: float | None) -> None:
        """See ``CacheValueStore``."""
        px = None if ttl_s is None else max(1, int(ttl_s * 1000))
        await self._write("SET", self._client.set, self._ns(namespace) + key, value, px=px)

    async def kv_get(self, namespace: str, key: str) -> bytes | None:
        """See ``CacheValueStore``."""
        from redis.exceptions import RedisError

        try:
            value: bytes | None = await self._client.get(self._ns(namespace) + key)
            return value
        except (RedisError, OSError) as exc:
            log.warning(
                "Redis GET of a cache value failed (%s): treated as a miss", type(exc).__name__
            )
            return None

    async def kv_delete(self, namespace: str, key: str) -> bool:
        """See ``CacheValueStore``."""
        return bool(await self._write("DEL", self._client.delete, self._ns(namespace) + key))

    async def kv_delete_many(self, namespace: str, keys: list[str]) -> int:
        """Remove ``(namespace, key)`` for each of ``keys`` in pipelined round trips of 500
        (erasure and retention); returns how many existed.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when Redis could not delete them.
        """
        base = self._ns(namespace)
        found = 0
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]

            async def go(names: list[str] = chunk) -> Any:
                async with self._client.pipeline(transaction=False) as pipe:
                    for name in names:
                        pipe.delete(base + name)
                    return await pipe.execute()

            found += sum(1 for n in await self._write("DEL", go) if n)
        return found

    async def kv_keys(self, namespace: str, prefix: str | None) -> list[str]:
        """See ``CacheValueStore``."""
        from redis.exceptions import RedisError

        base = self._ns(namespace)
        match = _glob_escape(base) + _glob_escape(prefix or "") + "*"
        found: set[str] = set()
        try:
            async for raw in self._client.scan_iter(match=match, count=500):
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
                found.add(name[len(base) :])
        except (RedisError, OSError) as exc:
            log.warning("Redis SCAN of cache keys failed (%s): listed as empty", type(exc).__name__)
            return []
        return sorted(found)

    async def aclose(self) -> None:
        """The client belongs to the checkpointer's Redis tier, which closes it."""
