"""``LayeredStore``: cache tiers stacked over a source of truth, itself a ``StoreTier``.

```
checkpointer ──> LayeredStore ──> caches[0] (LRU) ──> caches[1] (Redis) ──> source (Postgres,
                                                                            SQLite, memory)
```

* **Reads** of the latest version go down the cache tiers, top first, and fill the tiers above
  on the way back (``put`` with complete messages). A hit in a tier private to this process
  (``shared = False``, the LRU) is used only after a cheap validation, so an instance whose
  LRU is old never gives a run a stale state (and the run a spurious ``StaleStateError``): its
  version must equal the thread's version stamp in a shared tier that keeps one (Redis, one
  ``MGET`` of the stamp and the pending floor), or, without such a tier, while its stamps are
  not trusted (Redis failing or just back from an outage) or while a write of the thread is
  in flight, the source's ``current_version``. A hit in a shared tier is
  trusted as it is, except when this read already learned the latest version (it must then
  match) or while the stamps are not trusted (then it is checked against the source too).
  Reads of a given version and ``history`` go to the source.
* **Writes** first announce the version they are about to write to every tier that tracks
  writes in flight (``mark_pending(key, version)``: Redis raises the thread's pending floor,
  one ``EVALSHA``), then go to the source (the compare-and-swap decides), then through to
  every cache tier with only the new message rows (``put(record, new_messages)``), which
  settles the announcement. A writer that dies (or whose write-through is lost) after its
  commit thus leaves the shared tier reporting a write in flight, never the old version as
  the latest; see :mod:`tenxgraph.storage.redis`. When the source
  refuses the write (``StaleStateError``, forbidden, or any other failure whose outcome is
  unknown) the thread is dropped from every cache tier before the error is re-raised, and a
  ``tenxgraph.cache.invalidated`` span event is added.
* A cache tier that raises or answers nonsense is a miss (warning on the
  ``tenxgraph.storage`` logger and a ``tenxgraph.cache.failure`` span event), never an error for
  a read or a write. Cache updates after a successful write run shielded from cancellation so
  a cancelled run cannot leave a cache behind the source.

Everything else (history, ledger, stop flags, thread listing and metadata, setup) is the
source's; attributes not defined here are looked up on the source.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio
from opentelemetry import trace

from tenxgraph.core.exceptions import StorageError
from tenxgraph.records import (
    CheckpointWrite,
    LedgerEntry,
    StoredCheckpoint,
    ThreadInfo,
    ThreadKey,
    ranges_len,
)
from tenxgraph.telemetry import ATTR, EVENT

from .base import CacheTier, StoreTier

__all__ = ["LayeredStore"]

logger = logging.getLogger("tenxgraph.storage")


def _ms(created_at: float) -> int:
    """``created_at`` (UNIX seconds) in whole milliseconds (the stamp's precision)."""
    return round(created_at * 1000)


class _Truth:
    """What a read learned about the thread's latest version: from the stamp (``version``
    and ``created_ms``, ``version is None`` when there is no stamp) or from the source's
    ``current_version`` (``created_ms is None``)."""

    __slots__ = ("created_ms", "version")

    def __init__(self, version: int | None, created_ms: int | None) -> None:
        self.version = version
        self.created_ms = created_ms

    def matches(self, rec: StoredCheckpoint) -> bool:
        """Whether ``rec`` is the version this truth names (and, from a stamp, the same
        checkpoint, not a version number reused after a delete)."""
        return self.version == rec.version and (
            self.created_ms is None or self.created_ms == _ms(rec.created_at)
        )


def _same_checkpoint(a: StoredCheckpoint, b: StoredCheckpoint) -> bool:
    """Whether two records are the same checkpoint (version and creation time)."""
    return a.version == b.version and _ms(a.created_at) == _ms(b.created_at)


def _event(name: str, attributes: dict[str, Any]) -> None:
    """Add span event ``name`` to the current span when it records."""
    sp = trace.get_current_span()
    if sp.is_recording():
        sp.add_event(name, attributes)


class LayeredStore:
    """A source of truth with cache tiers above it; implements
    :class:`~tenxgraph.storage.base.StoreTier` (``name == "layered"``).

    Args:
        source: the source of truth (``PostgresStore``, ``SqliteStore``, ``MemoryStore``...).
        caches: cache tiers, top (fastest, read first) to bottom, e.g.
            ``[LRUCache(), RedisCache(url)]``. Empty: every call goes to the source.
        validate: validate hits of process-private tiers before using them (default). Pass
            ``False`` only when this store is the single writer of its source (one process,
            e.g. an in-memory source), where a private cache cannot go stale.

    Attributes:
        source: the source of truth.
        caches: the cache tiers, top first.
        validate: whether private-tier hits are validated.
    """

    name = "layered"

    def __init__(
        self, source: StoreTier, caches: Sequence[CacheTier] = (), *, validate: bool = True
    ) -> None:
        self.source = source
        self.caches: tuple[CacheTier, ...] = tuple(caches)
        self.validate = validate
        self._stamper: Any = next(
            (c for c in self.caches if callable(getattr(c, "read_stamp", None))), None
        )
        # Tiers that track writes in flight (Redis): told before every source write; their
        # ``invalidate`` accepts ``deleted=True`` (the thread was deleted in the source).
        self._markers: tuple[Any, ...] = tuple(
            c for c in self.caches if callable(getattr(c, "mark_pending", None))
        )
        self._stats = {
            "reads": 0,
            "cache_hits": 0,
            "source_reads": 0,
            "validations": 0,
            "source_checks": 0,
            "stale": 0,
            "invalidations": 0,
            "cache_failures": 0,
        }

    def __repr__(self) -> str:
        """``LayeredStore(lru -> redis -> postgresql)``."""
        tiers = " -> ".join([c.name for c in self.caches] + [self.source.name])
        return f"LayeredStore({tiers})"

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes not found normally: delegate to the source.
        """Look up attributes this class does not define on the source (delegation)."""
        if name in ("source", "caches", "__setstate__") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.source, name)

    # ------------------------------------------------------------------ lifecycle

    async def asetup(self) -> None:
        """Create or migrate the source's schema (idempotent; see the source), then let each
        cache tier with an ``acheck()`` method check its configuration against its server
        (e.g. ``RedisCache`` with ``cluster=True`` refuses a Redis that is not a cluster).

        Raises:
            ConfigError: (``CONFIG_001``) a cache tier is misconfigured for its server.
        """
        await self.source.asetup()
        for cache in self.caches:
            check = getattr(cache, "acheck", None)
            if check is not None:
                await check()

    async def aclose(self) -> None:
        """Close every cache tier, then the source; idempotent. A cache failing to close is
        logged, never raised."""
        for cache in self.caches:
            try:
                await cache.aclose()
            except Exception as exc:
                self._cache_failed(cache, exc, "aclose")
        await self.source.aclose()

    # ------------------------------------------------------------------ reads

    async def read(
        self, key: ThreadKey, version: int | None = None, *, with_messages: bool = True
    ) -> StoredCheckpoint | None:
        """The latest version of ``key`` (down the tiers), or the given kept version (source).

        Args:
            key: the thread and the caller's owner scope.
            version: a kept version to read from the source; ``None`` for the latest.
            with_messages: when ``True`` the returned record has ``messages`` filled in list
                order (and ``decoded`` when a private tier kept decoded objects of that
                version). When ``False`` only metadata is needed; a cache hit may still carry
                its messages.

        Returns:
            The record, or ``None`` when the thread does not exist or belongs to another user.

        Raises:
            TransientStorageError: (``STORAGE_TRANSIENT_001``) the source failed in a retryable
                way (cache failures never raise).
            StorageError: (``STORAGE_000``) other source failures.
        """
        if version is not None or not self.caches:
            return await self.source.read(key, version, with_messages=with_messages)
        self._stats["reads"] += 1
        truth: _Truth | None = None
        decoded_only: StoredCheckpoint | None = None
        for i, cache in enumerate(self.caches):
            rec = await self._cache_get(cache, key)
            if rec is None:
                continue
            if rec.messages is None and with_messages:
                if rec.decoded is not None and decoded_only is None:
                    decoded_only = rec  # usable if a lower tier returns the same checkpoint
                continue
            if self.validate and (
                not getattr(cache, "shared", False)
                or truth is not None
                or not self._stamps_trusted()
            ):
                if truth is None:
                    truth = await self._truth(key)
                if not truth.matches(rec):
                    self._stats["stale"] += 1
                    if truth.version is None or rec.version <= truth.version:
                        # outdated (a newer version raced in after the check is left alone)
                        await self._cache_invalidate(cache, key)
                    continue
            if (
                decoded_only is not None
                and rec.decoded is None
                and _same_checkpoint(rec, decoded_only)
            ):
                rec.decoded = decoded_only.decoded
            self._stats["cache_hits"] += 1
            await self._fill(self.caches[:i], rec)
            return rec
        self._stats["source_reads"] += 1
        rec = await self.source.read(key, with_messages=with_messages)
        if rec is not None and rec.messages is not None:
            if decoded_only is not None and _same_checkpoint(rec, decoded_only):
                rec.decoded = decoded_only.decoded
            await self._fill(self.caches, rec)
        return rec

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number from the source (authoritative), or ``None``."""
        return await self.source.current_version(key)

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages, from the source (see
        :meth:`StoreTier.history <tenxgraph.storage.base.StoreTier.history>`)."""
        return await self.source.history(key, limit=limit, before=before)

    # ------------------------------------------------------------------ writes

    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` in the source, then write it through to every cache tier.

        First, tiers that track writes in flight receive ``mark_pending(key, version)`` (Redis:
        one ``EVALSHA``), so that until this write-through reaches them they never report the
        previous version as the latest, even if this process dies in between. Then each cache
        tier receives ``put(record, new_messages=w.new_messages)``: only the new
        rows, applied on top of the previous version it holds. Cache failures are logged and
        ignored. The checkpointer may then call :meth:`attach_decoded` with the decoded
        message objects.

        Returns:
            The source's new record (``messages`` may be ``None``).

        Raises:
            StaleStateError: (``STORAGE_CONFLICT_000``) the source holds another version; the
                thread was dropped from every cache tier first.
            StorageError: (``STORAGE_FORBIDDEN_001``) another user owns the thread; the
                thread was dropped from every cache tier first.
            TransientStorageError: (``STORAGE_TRANSIENT_001``) retryable source failure; the
                caches dropped the thread (the write may or may not have committed).
        """
        key = ThreadKey(w.thread_id, w.user_id)
        if self._markers:
            await self._mark_pending(key, w.expected_version + 1)
        try:
            rec = await self.source.write(w)
        except StorageError as exc:
            if self.caches:
                with anyio.CancelScope(shield=True):
                    await self._invalidate_all(key, exc.error_code)
            raise
        except BaseException as exc:  # cancelled or unexpected: the outcome is unknown
            if self.caches:
                with anyio.CancelScope(shield=True):
                    await self._invalidate_all(key, type(exc).__name__)
            raise
        if self.caches:
            with anyio.CancelScope(shield=True):
                for cache in self.caches:
                    await self._cache_put(cache, rec, w.new_messages)
        return rec

    async def attach_decoded(self, key: ThreadKey, version: int, decoded: Any) -> bool:
        """Attach in-process decoded message objects to ``version`` of ``key`` in every tier
        that keeps them (the LRU), so the next warm read skips decoding.

        Args:
            key: the thread and its owner scope.
            version: the version ``decoded`` belongs to (ignored by a tier holding another).
            decoded: ``(message_list, length)`` by convention (see
                :meth:`LRUCache.attach_decoded <tenxgraph.storage.lru.LRUCache.attach_decoded>`).

        Returns:
            ``True`` when at least one tier attached it.
        """
        attached = False
        for cache in self.caches:
            fn = getattr(cache, "attach_decoded", None)
            if fn is None:
                continue
            try:
                attached = bool(await fn(key, version, decoded)) or attached
            except Exception as exc:
                self._cache_failed(cache, exc, "attach_decoded")
        return attached

    async def invalidate(self, key: ThreadKey) -> None:
        """Drop the thread from every cache tier (any owner scope); the source is untouched.
        Never raises for a cache failure."""
        await self._invalidate_all(key, "requested")

    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete the thread in the source, then drop it from every cache tier.

        Returns:
            ``True`` if the thread existed.

        Raises:
            StorageError: (``STORAGE_FORBIDDEN_001``) another user owns the thread (caches
                are left alone: nothing changed).
            TransientStorageError: (``STORAGE_TRANSIENT_001``) retryable source failure (the
                caches dropped the thread).
        """
        try:
            existed = await self.source.delete_thread(key)
        except StorageError as exc:
            if exc.error_code != "STORAGE_FORBIDDEN_001" and self.caches:
                with anyio.CancelScope(shield=True):
                    await self._invalidate_all(key, exc.error_code)
            raise
        if self.caches:
            with anyio.CancelScope(shield=True):
                await self._invalidate_all(key, "deleted", deleted=True)
        return existed

    # ------------------------------------------------------------------ delegated

    async def list_threads(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ThreadInfo]:
        """Threads owned by ``user_id`` (``"*"``: all), from the source."""
        return await self.source.list_threads(user_id, limit=limit, offset=offset)

    async def set_thread_metadata(self, key: ThreadKey, metadata: dict[str, Any]) -> None:
        """Replace the thread's application metadata in the source (owner only)."""
        await self.source.set_thread_metadata(key, metadata)

    async def ledger_get(self, key: ThreadKey, call_key: str) -> LedgerEntry | None:
        """The recorded tool execution for ``call_key``, from the source."""
        return await self.source.ledger_get(key, call_key)

    async def ledger_put(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Record a tool execution durably in the source; returns the winning row.

        Raises:
            LedgerWriteError: (``STORAGE_LEDGER_001``) the source could not record it.
        """
        return await self.source.ledger_put(key, entry)

    async def ledger_count(self, key: ThreadKey) -> int:
        """Number of ledger rows of the thread, from the source."""
        return await self.source.ledger_count(key)

    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record or withdraw the caller's timed stop request in the source."""
        await self.source.set_stop(key, requested, at)

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request (at or after ``since``), from the source."""
        return await self.source.get_stop(key, since)

    # ------------------------------------------------------------------ stats

    def stats(self) -> dict[str, Any]:
        """Counters since creation: ``reads`` (latest reads through the caches),
        ``cache_hits``, ``source_reads``, ``validations`` (cache hits checked),
        ``source_checks`` (of which against the source's ``current_version``), ``stale``
        (hits rejected as out of date), ``invalidations``, ``cache_failures``, and each tier's
        own ``stats()`` under its name."""
        out: dict[str, Any] = dict(self._stats)
        for cache in self.caches:
            fn = getattr(cache, "stats", None)
            if callable(fn):
                out[cache.name] = fn()
        return out

    # ------------------------------------------------------------------ internals

    def _stamps_trusted(self) -> bool:
        """Whether the stamp tier's stamps can validate hits now (``True`` without one)."""
        return self._stamper is None or bool(getattr(self._stamper, "stamps_trusted", True))

    async def _truth(self, key: ThreadKey) -> _Truth:
        """The thread's latest version, cheaply: the stamp tier's stamp (one ``GET``) when
        its stamps are trusted, else the source's ``current_version``."""
        self._stats["validations"] += 1
        if self._stamper is not None and self._stamps_trusted():
            try:
                stamp = await self._stamper.read_stamp(key)
            except Exception as exc:
                if not isinstance(exc, StorageError):
                    self._cache_failed(self._stamper, exc, "read_stamp")
            else:
                if stamp is None:
                    return _Truth(None, None)
                return _Truth(stamp.version, stamp.created_ms)
        self._stats["source_checks"] += 1
        return _Truth(await self.source.current_version(key), None)

    def _usable(self, key: ThreadKey, rec: Any) -> bool:
        """Whether a cache tier's answer is a consistent record of ``key`` (else: garbage)."""
        return (
            isinstance(rec, StoredCheckpoint)
            and rec.thread_id == key.thread_id
            and rec.user_id == key.user_id
            and (rec.messages is None or len(rec.messages) == ranges_len(rec.ranges))
        )

    async def _cache_get(self, cache: CacheTier, key: ThreadKey) -> StoredCheckpoint | None:
        """``cache.get`` as a miss on any failure or inconsistent answer."""
        try:
            rec = await cache.get(key)
        except Exception as exc:
            self._cache_failed(cache, exc, "get")
            return None
        if rec is None:
            return None
        if not self._usable(key, rec):
            self._cache_failed(cache, ValueError("inconsistent record"), "get")
            await self._cache_invalidate(cache, key)
            return None
        return rec

    async def _cache_put(
        self,
        cache: CacheTier,
        rec: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None = None,
    ) -> None:
        """``cache.put``; on failure, log it and drop the thread from that tier."""
        try:
            await cache.put(rec, new_messages)
        except Exception as exc:
            self._cache_failed(cache, exc, "put")
            await self._cache_invalidate(cache, ThreadKey(rec.thread_id, rec.user_id))

    async def _cache_invalidate(
        self, cache: CacheTier, key: ThreadKey, *, deleted: bool = False
    ) -> None:
        """``cache.invalidate`` (``deleted=True`` passed on to tiers tracking writes in
        flight), logging (never raising) a failure."""
        try:
            if deleted and cache in self._markers:
                await cache.invalidate(key, deleted=True)  # type: ignore[call-arg]
            else:
                await cache.invalidate(key)
        except Exception as exc:
            self._cache_failed(cache, exc, "invalidate")

    async def _mark_pending(self, key: ThreadKey, version: int) -> None:
        """Announce the write of ``version`` to every tier tracking writes in flight, before
        the source write; a failure is logged, never raised (the tier handles its own)."""
        for cache in self._markers:
            try:
                await cache.mark_pending(key, version)
            except Exception as exc:
                self._cache_failed(cache, exc, "mark_pending")

    async def _fill(self, tiers: Sequence[CacheTier], rec: StoredCheckpoint) -> None:
        """Put the complete ``rec`` into ``tiers``, nearest the source first."""
        for cache in reversed(tiers):
            await self._cache_put(cache, rec)

    async def _invalidate_all(self, key: ThreadKey, reason: str, *, deleted: bool = False) -> None:
        """Drop the thread from every cache tier (``deleted``: it was deleted in the source);
        span event with ``reason``."""
        self._stats["invalidations"] += 1
        for cache in self.caches:
            await self._cache_invalidate(cache, key, deleted=deleted)
        _event(
            EVENT.CACHE_INVALIDATED,
            {ATTR.THREAD_ID: key.thread_id, ATTR.INVALIDATION_REASON: reason},
        )

    def _cache_failed(self, cache: Any, exc: BaseException, op: str) -> None:
        """Log a cache tier failure (warning) and add a cache-failure span event."""
        self._stats["cache_failures"] += 1
        tier = getattr(cache, "name", type(cache).__name__)
        logger.warning(
            "cache tier %r failed in %s (%s); treated as a miss", tier, op, type(exc).__name__
        )
        _event(EVENT.CACHE_FAILURE, {ATTR.TIER: tier, ATTR.ERROR_TYPE: type(exc).__name__})
