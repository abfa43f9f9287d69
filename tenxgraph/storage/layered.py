"""``LayeredStore``: cache tiers stacked over a source of truth, itself a ``StoreTier``.

```
checkpointer ──> LayeredStore ──> caches[0] (LRU) ──> caches[1] (Redis) ──> source (Postgres,
                                                                            SQLite, memory)
```

Caches are validated against the source of truth, never against each other:

* **Reads** of the latest version look for a copy down the cache tiers, top first (an LRU
  hit costs nothing; on an LRU miss, one Redis round trip). With a copy, the source is asked
  *one* conditional question (:meth:`StoreTier.read_since
  <tenxgraph.storage.base.StoreTier.read_since>`, Postgres: the ``READ_SINCE`` statement):
  "is version v, created at t, still the latest? If not, what changed?". The answer is the copy
  itself (unchanged), the copy plus the message rows it lacks (the thread only appended), or
  the full latest version. Without a copy it is one plain read. Either way a read costs one
  source round trip plus at most one Redis round trip, and a run never relies on a cached copy
  the source has not confirmed: a writer without Redis, a Redis flushed, partitioned or down,
  or a write-through lost in a crash can make a copy old, never make a run read old state.
  The tiers above the one that answered are filled on the way back.
* **Writes** go to the source first (the compare-and-swap decides), then through to the cache
  tiers with only the new message rows (``put(record, new_messages)``): process-private tiers
  (the LRU, ``shared = False``) at once, shared tiers (Redis) in the background
  (:class:`~tenxgraph.storage._behind.WriteBehind`: bounded, in order, dropped on failure or
  when full, never waited for inside a step). A tier that ``coalesces`` (Redis) gets one call
  for several steps: a mid-run write-through lingers ``linger_s`` seconds and the thread's next
  write-throughs merge into it (their rows appended, the latest record kept); a run's last
  checkpoint goes out at once with what merged; an invalidation is never merged past. When
  the source refuses a write (``StaleStateError``, forbidden, or any failure whose outcome is
  unknown) the thread is dropped from every cache tier before the error is re-raised (a
  ``tenxgraph.cache.invalidated`` span event).
* A cache tier that raises or answers nonsense is a miss (warning on the ``tenxgraph.storage``
  logger and a ``tenxgraph.cache.failure`` span event), never an error for a read or a write.
  ``aflush()`` waits for the background updates of the running event loop; ``aclose()``
  flushes them before closing the tiers.

Everything else (history, ledger, stop flags, thread listing and metadata, setup) is the
source's; attributes not defined here are looked up on the source.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

import anyio
from opentelemetry import trace

from tenxgraph.core.exceptions import StorageError
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
from tenxgraph.storage._behind import WriteBehind
from tenxgraph.storage._lease_wake import LeaseWaiter
from tenxgraph.storage.base import CacheTier, StoreTier
from tenxgraph.storage.retention import Removal
from tenxgraph.telemetry import ATTR, EVENT

__all__ = ["LayeredStore"]

logger = logging.getLogger("tenxgraph.storage")

#: background cache updates allowed to wait per event loop before new ones are dropped.
BEHIND_MAX_PENDING = 4096

#: seconds a write-through to a shared tier waits in the background lane for the next steps'
#: write-throughs of its thread to merge into it (one Redis call for several steps).
BEHIND_LINGER_S = 0.02

#: status of a checkpoint taken mid-run (``ExecutionStatus.RUNNING``): more steps follow.
_MID_RUN = "running"

#: at most this many bytes of message rows are merged into one write-through (beyond it, a
#: write-through of its own starts).
MERGE_MAX_BYTES = 1 << 20


def _same_checkpoint(a: StoredCheckpoint, b: StoredCheckpoint) -> bool:
    """Whether two records are the same checkpoint (version and creation time)."""
    return a.version == b.version and a.created_at == b.created_at


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
            ``[LRUCache(), RedisCache(url)]``. Empty: every call goes to the source. A tier
            whose ``shared`` attribute is true (Redis) is updated in the background.
        validate: validate every cached copy against the source before returning it
            (default). Pass ``False`` only when this store is the single writer of its
            source (one process, e.g. an in-memory source), where a cache cannot go stale.
        max_pending: background updates of shared tiers allowed to wait per event loop
            (count); beyond it an update is dropped (a later read fixes the tier).
        linger_s: seconds a write-through to a shared tier that merges writes (``coalesces``,
            Redis) waits for the thread's next write-throughs to merge into it (their rows
            accumulated, the latest version's metadata kept): consecutive steps of a run cost
            one call instead of one each. ``0``: only write-throughs queued behind a running
            call merge.

    Attributes:
        source: the source of truth.
        caches: the cache tiers, top first.
        validate: whether cached copies are validated.
    """

    name = "layered"

    def __init__(
        self,
        source: StoreTier,
        caches: Sequence[CacheTier] = (),
        *,
        validate: bool = True,
        max_pending: int = BEHIND_MAX_PENDING,
        linger_s: float = BEHIND_LINGER_S,
    ) -> None:
        self.source = source
        self.caches: tuple[CacheTier, ...] = tuple(caches)
        self.validate = validate
        self._private = tuple(c for c in self.caches if not getattr(c, "shared", False))
        self._shared = tuple(c for c in self.caches if getattr(c, "shared", False))
        # Private tiers that declare ``suspends = False`` (the LRU) never yield to the event
        # loop inside an operation, so no cancellation can land in one: their write-through
        # needs no shielding cancel scope (one less object per step).
        self._private_suspends = any(getattr(c, "suspends", True) for c in self._private)
        #: ``(tier, its attach_decoded)`` of the private tiers that keep decoded messages
        self._attachers = tuple(
            (c, attach)
            for c in self._private
            if (attach := getattr(c, "attach_decoded", None)) is not None
        )
        self._behind = WriteBehind(max_pending, linger_s)
        self._since = getattr(source, "read_since", None)
        self._stats = {
            "reads": 0,
            "cache_hits": 0,
            "source_reads": 0,
            "validations": 0,
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

    async def aflush(self) -> None:
        """Wait until the background updates of shared cache tiers submitted on the running
        event loop have run (they never raise)."""
        await self._behind.flush()

    async def aclose(self) -> None:
        """Flush the background cache updates, close every cache tier, then the source;
        idempotent. A cache failing to close is logged, never raised."""
        with anyio.CancelScope(shield=True):
            await self._behind.flush()
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
        """The latest version of ``key`` (a cached copy validated by the source, or the
        source's), or the given kept version (source).

        Args:
            key: the thread and the caller's owner scope.
            version: a kept version to read from the source; ``None`` for the latest.
            with_messages: when ``True`` the returned record has ``messages`` filled in list
                order (and ``decoded`` when a private tier kept decoded objects of a prefix
                of them). When ``False`` only metadata is needed; a cached copy may still
                carry its messages.

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
        known, at, decoded_only = await self._cached_copy(key, with_messages)
        if known is None:
            self._stats["source_reads"] += 1
            if with_messages and self._since is not None:
                # the same statement as a confirmation (Postgres: READ_SINCE), so a run's
                # first read is always one named statement
                rec = await self._since(key, None)
            else:
                rec = await self.source.read(key, with_messages=with_messages)
        elif not self.validate:
            self._stats["cache_hits"] += 1
            await self._fill(self.caches[:at], known)
            return known
        else:
            self._stats["validations"] += 1
            rec = await self._read_since(key, known)
            if rec is known:
                self._stats["cache_hits"] += 1
                await self._fill(self.caches[:at], known)
                return known
            self._stats["stale"] += 1
            if rec is None:  # deleted since the copy was taken
                await self._invalidate_all(key, "deleted")
                return None
            at = len(self.caches)
        return await self._from_source(rec, at, decoded_only)

    async def _cached_copy(
        self, key: ThreadKey, with_messages: bool
    ) -> tuple[StoredCheckpoint | None, int, StoredCheckpoint | None]:
        """The first usable cached copy of ``key`` (``None``: none), the index of its tier
        (``len(caches)`` without one), and a copy carrying only decoded objects (usable if the
        source returns the same checkpoint)."""
        at = len(self.caches)
        decoded_only: StoredCheckpoint | None = None
        for i, cache in enumerate(self.caches):
            rec = await self._cache_get(cache, key)
            if rec is None:
                continue
            if rec.messages is None and with_messages:
                if rec.decoded is not None and decoded_only is None:
                    decoded_only = rec
                continue
            return rec, i, decoded_only
        return None, at, decoded_only

    async def _from_source(
        self, rec: StoredCheckpoint | None, at: int, decoded_only: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """A record the source returned: take the decoded objects of ``decoded_only`` when it
        is the same checkpoint, and fill the cache tiers above ``at`` with it."""
        if rec is not None and rec.messages is not None:
            if decoded_only is not None and rec.decoded is None:
                if _same_checkpoint(rec, decoded_only):
                    rec.decoded = decoded_only.decoded
            await self._fill(self.caches[:at], rec)
        return rec

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
        """The first read of a run that needs the lease (see :meth:`StoreTier.lease_read
        <tenxgraph.storage.base.StoreTier.lease_read>`): one acquisition attempt and, when
        granted, the latest version, in one operation of the source, read against ``known``
        or, when ``None``, the copy the caches hold (confirmed, extended or replaced by the
        source exactly as :meth:`read` does; also without ``validate``: the source has to be
        asked for the lease anyway).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable source failure.
        """
        at = len(self.caches)
        decoded_only: StoredCheckpoint | None = None
        if known is None and self.caches:
            self._stats["reads"] += 1
            known, at, decoded_only = await self._cached_copy(key, True)
        grant, rec = await self.source.lease_read(
            key, known, holder, ttl_s=ttl_s, lapse_s=lapse_s, queue=queue
        )
        if grant.fence is None:
            return grant, None
        if known is None:
            self._stats["source_reads"] += 1
        else:
            self._stats["validations"] += 1
            if rec is known:
                self._stats["cache_hits"] += 1
                await self._fill(self.caches[:at], known)
                return grant, known
            self._stats["stale"] += 1
            if rec is None:
                await self._invalidate_all(key, "deleted")
                return grant, None
            at = len(self.caches)
        return grant, await self._from_source(rec, at, decoded_only)

    async def _read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The source's answer about ``known`` (see ``StoreTier.read_since``); a source
        without ``read_since`` reads the version row, then the full version if it changed."""
        if self._since is not None:
            rec: StoredCheckpoint | None = await self._since(key, known)
            return rec
        if known is None:
            return await self.source.read(key)
        meta = await self.source.read(key, with_messages=False)
        if meta is None:
            return None
        if _same_checkpoint(meta, known):
            return known
        return await self.source.read(key)

    async def peek(self, key: ThreadKey) -> StoredCheckpoint | None:
        """The latest checkpoint of ``key`` as the first private (in-process) cache tier holds
        it, unvalidated and without any round trip; ``None`` when no private tier holds it.

        Private tiers are this process's memory, written only with what the source confirmed
        or committed, so their copy of a given checkpoint (version and ``created_at``) is that
        checkpoint's content; whether it is still the *latest* is not checked here (the
        caller compares it with the checkpoint it expects, and the compare-and-swap of a write
        decides).
        """
        for cache in self._private:
            rec = await self._cache_get(cache, key)
            if rec is not None:
                return rec
        return None

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number from the source (authoritative), or ``None``."""
        return await self.source.current_version(key)

    async def read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The source's conditional read (see :meth:`StoreTier.read_since
        <tenxgraph.storage.base.StoreTier.read_since>`); the caches are not consulted."""
        return await self._read_since(key, known)

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages, from the source (see
        :meth:`StoreTier.history <tenxgraph.storage.base.StoreTier.history>`)."""
        return await self.source.history(key, limit=limit, before=before)

    # ------------------------------------------------------------------ writes

    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` in the source, then write it through to the cache tiers.

        Each cache tier receives ``put(record, new_messages=w.new_messages)``: only the new
        rows, applied on top of the previous version it holds. Private tiers (the LRU) are
        updated before this returns, shared tiers (Redis) in the background: no round trip to
        them is waited for. Cache failures are logged and ignored. The checkpointer may then
        call :meth:`attach_decoded` with the decoded message objects.

        Returns:
            The source's new record (``messages`` may be ``None``).

        Raises:
            StaleStateError: (``STORAGE_CONFLICT_000``) the source holds another version; the
                thread was dropped from every cache tier.
            StorageError: (``STORAGE_FORBIDDEN_001``) another user owns the thread; the
                thread was dropped from every cache tier.
            TransientStorageError: (``STORAGE_TRANSIENT_001``) retryable source failure; the
                caches dropped the thread (the write may or may not have committed).
        """
        try:
            rec = await self.source.write(w)
        except StorageError as exc:
            if self.caches:
                with anyio.CancelScope(shield=True):
                    await self._invalidate_all(ThreadKey(w.thread_id, w.user_id), exc.error_code)
            raise
        except BaseException as exc:  # cancelled or unexpected: the outcome is unknown
            if self.caches:
                with anyio.CancelScope(shield=True):
                    await self._invalidate_all(
                        ThreadKey(w.thread_id, w.user_id), type(exc).__name__
                    )
            raise
        if self._private_suspends:
            with anyio.CancelScope(shield=True):
                for cache in self._private:
                    await self._cache_put(cache, rec, w.new_messages, w.base_created_at)
        else:
            for cache in self._private:
                await self._cache_put(cache, rec, w.new_messages, w.base_created_at)
        for cache in self._shared:
            self._later_put(
                _PutOp(self, cache, rec, w.new_messages, w.base_created_at, w.expected_version)
            )
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
        for cache, attach in self._attachers:
            try:
                attached = bool(await attach(key, version, decoded)) or attached
            except Exception as exc:
                self._cache_failed(cache, exc, "attach_decoded")
        return attached

    async def invalidate(self, key: ThreadKey) -> None:
        """Drop the thread from every cache tier (any owner scope) and wait until the shared
        tiers did; the source is untouched. Never raises for a cache failure."""
        await self._invalidate_all(key, "requested")
        await self._behind.flush()

    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete the thread in the source, then drop it from every cache tier (waiting for
        the shared tiers too).

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
                await self._invalidate_all(key, "deleted")
                await self._behind.flush()
        return existed

    # ------------------------------------------------------------------ erasure and retention

    async def erase_owner(
        self, owner: str, *, by_owner: bool, thread_ids: list[str] | tuple[str, ...] = ()
    ) -> Removal:
        """Erase in the source (see ``MemoryStore.erase_owner``), then drop the removed
        threads, and with ``by_owner`` every entry of the owner's scope, from every cache tier
        (:meth:`_forget_removed`).

        Returns:
            The source's removal with the cache tiers' counts and unreachable tiers.

        Raises:
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the source failed in a
                retryable way (nothing is lost by running the erasure again).
        """
        removed: Removal = await self.source.erase_owner(  # type: ignore[attr-defined]
            owner, by_owner=by_owner, thread_ids=thread_ids
        )
        return await self._forget_removed(removed, owner if by_owner else None)

    async def sweep_idle(self, now: float, default_ttl_s: float | None, limit: int) -> Removal:
        """One retention batch in the source (see ``MemoryStore.sweep_idle``), then the
        removed threads dropped from every cache tier."""
        removed: Removal = await self.source.sweep_idle(  # type: ignore[attr-defined]
            now, default_ttl_s, limit
        )
        return await self._forget_removed(removed, None)

    async def _forget_removed(self, removed: Removal, owner: str | None) -> Removal:
        """Drop ``removed``'s threads (and ``owner``'s scope) from every cache tier, after the
        background updates queued before (shielded from cancellation: the source has removed
        them already). A tier's ``erase`` answering ``None`` or failing is listed as pending.
        """
        if not self.caches:
            return removed
        ids = removed.thread_ids
        counts: dict[str, int] = {}
        pending: list[str] = []
        with anyio.CancelScope(shield=True):
            await self._behind.flush()
            for cache in self.caches:
                erase = getattr(cache, "erase", None)
                if erase is None:  # a tier of the application's own: one invalidation each
                    for tid in ids:
                        await self._cache_invalidate(cache, ThreadKey(tid, owner or "*"))
                    continue
                try:
                    n = await erase(ids, owner)
                except Exception as exc:
                    self._cache_failed(cache, exc, "erase")
                    n = None
                if n is None:
                    pending.append(cache.name)
                else:
                    counts[cache.name] = counts.get(cache.name, 0) + int(n)
            await self._behind.flush()
        if ids:
            self._stats["invalidations"] += 1
        return removed.with_caches(counts, pending)

    # ------------------------------------------------------------------ delegated

    async def kept_versions(self, key: ThreadKey) -> tuple[int, int] | None:
        """The source's ``(oldest kept, latest)`` version of the thread (or ``None``)."""
        return await self.source.kept_versions(key)

    async def fork(
        self,
        src: ThreadKey,
        version: int,
        w: CheckpointWrite,
        copy: tuple[Range, ...],
        metadata: bytes,
    ) -> StoredCheckpoint:
        """Fork in the source (see ``StoreTier.fork``), then drop whatever the cache tiers
        hold under the new thread's id (a thread of that id deleted earlier); the fork's
        first read fills them.

        Raises:
            As ``StoreTier.fork``; nothing changes in the caches when the source refuses.
        """
        rec = await self.source.fork(src, version, w, copy, metadata)
        if self.caches:
            await self._invalidate_all(ThreadKey(w.thread_id, w.user_id), "forked")
        return rec

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

    # ------------------------------------------------------------------ run lease (the source's)

    async def lease_acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the thread's run lease: the source's (caches never hold a
        lease; see :meth:`StoreTier.lease_acquire
        <tenxgraph.storage.base.StoreTier.lease_acquire>`)."""
        return await self.source.lease_acquire(
            key, holder, ttl_s=ttl_s, lapse_s=lapse_s, queue=queue
        )

    async def lease_waiter(
        self, key: ThreadKey, holder: str, *, start: bool = True
    ) -> LeaseWaiter | None:
        """The source's wake-up registration of a waiting run (``None`` when the source has
        none: the run polls; see :mod:`tenxgraph.storage._lease_wake`)."""
        waiter = getattr(self.source, "lease_waiter", None)
        if waiter is None:
            return None
        return cast("LeaseWaiter | None", await waiter(key, holder, start=start))

    async def lease_peek(self, key: ThreadKey, holder: str, *, lapse_s: float) -> LeaseGrant:
        """The source's answer to a waiting run's poll (changes nothing)."""
        return await self.source.lease_peek(key, holder, lapse_s=lapse_s)

    async def lease_renew(self, key: ThreadKey, holder: str, fence: int, ttl_s: float) -> bool:
        """Extend the holder's lease at the source; ``False`` once another run took it."""
        return await self.source.lease_renew(key, holder, fence, ttl_s)

    async def lease_release(self, key: ThreadKey, holder: str, fence: int | None) -> None:
        """Give the lease of ``fence`` up at the source and withdraw ``holder`` from the
        queue."""
        await self.source.lease_release(key, holder, fence)

    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record or withdraw the caller's timed stop request in the source."""
        await self.source.set_stop(key, requested, at)

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request (at or after ``since``), from the source."""
        return await self.source.get_stop(key, since)

    # ------------------------------------------------------------------ stats

    def stats(self) -> dict[str, Any]:
        """Counters since creation: ``reads`` (latest reads through the caches),
        ``cache_hits`` (copies the source confirmed current, or used unvalidated),
        ``source_reads`` (no copy anywhere), ``validations`` (conditional reads of a copy),
        ``stale`` (copies the source found out of date), ``invalidations``,
        ``cache_failures``, ``behind`` (the background updates' ``submitted`` / ``merged`` /
        ``done`` / ``dropped`` / ``failed``), and each tier's own ``stats()`` under its name."""
        out: dict[str, Any] = dict(self._stats)
        out["behind"] = self._behind.stats()
        for cache in self.caches:
            fn = getattr(cache, "stats", None)
            if callable(fn):
                out[cache.name] = fn()
        return out

    # ------------------------------------------------------------------ internals

    def _later(self, op: Any, cache: CacheTier, thread_id: str) -> None:
        """Run ``op`` (a coroutine function) in the background lane, urgently (an
        invalidation: nothing queued for the thread may merge past it); when there is no
        asyncio loop to run it on, it is dropped (counted by the lane as not submitted)."""
        self._behind.submit(op, (id(cache), thread_id))

    def _later_put(self, op: _PutOp) -> None:
        """Queue a put of a shared tier. The write-through of a checkpoint taken mid-run
        (status ``"running"``) lingers, so the run's next steps merge into it; any other (a
        run's last checkpoint, a fill) is urgent: it goes out at once, with what merged."""
        urgent = op.rows is None or op.rec.status != _MID_RUN
        self._behind.submit(op, (id(op.cache), op.rec.thread_id), linger=not urgent)

    async def _private_copy(self, key: ThreadKey) -> StoredCheckpoint | None:
        """The complete latest record a private tier holds for ``key``, or ``None``."""
        for cache in self._private:
            rec = await self._cache_get(cache, key)
            if rec is not None and rec.messages is not None:
                return rec
        return None

    def _invalidate_op(self, cache: CacheTier, key: ThreadKey) -> Any:
        async def op() -> None:
            await self._cache_invalidate(cache, key)

        return op

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
            if cache in self._shared:
                self._later(self._invalidate_op(cache, key), cache, key.thread_id)
            else:
                await self._cache_invalidate(cache, key)
            return None
        return rec

    async def _cache_put(
        self,
        cache: CacheTier,
        rec: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None = None,
        base_created_at: float | None = None,
        base_version: int | None = None,
    ) -> bool | None:
        """``cache.put`` (its answer: ``False`` when a tier says it could not apply the
        record); on failure, log it, drop the thread from that tier and answer ``None``.
        ``base_version`` (a merged write-through's) goes only to a tier that ``coalesces``."""
        try:
            # The protocol's put returns None; RedisCache.put answers whether it applied.
            if base_version is None:
                applied: bool | None = await cache.put(  # type: ignore[func-returns-value]
                    rec, new_messages, base_created_at
                )
            else:
                # only a tier that ``coalesces`` (RedisCache) takes base_version
                put: Any = cache.put
                applied = await put(rec, new_messages, base_created_at, base_version=base_version)
        except Exception as exc:
            self._cache_failed(cache, exc, "put")
            await self._cache_invalidate(cache, ThreadKey(rec.thread_id, rec.user_id))
            return None
        return applied

    async def _cache_invalidate(self, cache: CacheTier, key: ThreadKey) -> None:
        """``cache.invalidate``, logging (never raising) a failure."""
        try:
            await cache.invalidate(key)
        except Exception as exc:
            self._cache_failed(cache, exc, "invalidate")

    async def _fill(self, tiers: Sequence[CacheTier], rec: StoredCheckpoint) -> None:
        """Put the complete ``rec`` into ``tiers``: private ones now, shared ones in the
        background."""
        for cache in tiers:
            if cache in self._shared:
                self._later_put(_PutOp(self, cache, rec, None, None, None))
            else:
                await self._cache_put(cache, rec)

    async def _invalidate_all(self, key: ThreadKey, reason: str) -> None:
        """Drop the thread from every cache tier (private ones now, shared ones in the
        background, after the updates queued before); span event with ``reason``."""
        self._stats["invalidations"] += 1
        for cache in self._private:
            await self._cache_invalidate(cache, key)
        for cache in self._shared:
            self._later(self._invalidate_op(cache, key), cache, key.thread_id)
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


class _PutOp:
    """A put of a shared tier waiting in the background lane: a write-through (the rows of
    one or, merged, several consecutive versions, on top of ``base_version``) or a read fill
    (a complete record). A write-through absorbs the next version's write-through of the same
    thread and owner (its rows appended, its record kept as the latest) when the tier
    ``coalesces`` and the rows stay under :data:`MERGE_MAX_BYTES`; fills absorb nothing."""

    __slots__ = (
        "base_created_at",
        "base_version",
        "cache",
        "nbytes",
        "owned",
        "rec",
        "rows",
        "store",
    )

    def __init__(
        self,
        store: LayeredStore,
        cache: CacheTier,
        rec: StoredCheckpoint,
        rows: list[tuple[int, bytes]] | None,
        base_created_at: float | None,
        base_version: int | None,
    ) -> None:
        self.store = store
        self.cache = cache
        self.rec = rec
        self.rows = rows
        self.base_created_at = base_created_at
        self.base_version = base_version
        self.nbytes = sum(len(b) for _, b in rows) if rows is not None else 0
        self.owned = False  # ``rows`` is the writer's list until a merge copies it

    def absorb(self, later: Any) -> bool:
        """Merge ``later`` (the write-through of the next version) into this one.

        Returns:
            ``True`` when merged (``later`` must not run), ``False`` when it cannot be (it
            is then queued after this one).
        """
        if (
            type(later) is not _PutOp
            or later.cache is not self.cache
            or self.rows is None
            or later.rows is None
            or not getattr(self.cache, "coalesces", False)
        ):
            return False
        a, b = self.rec, later.rec
        if (
            b.thread_id != a.thread_id
            or b.user_id != a.user_id
            or b.version != a.version + 1
            or later.base_version != a.version
            or (later.base_created_at is not None and later.base_created_at != a.created_at)
            or self.nbytes + later.nbytes > MERGE_MAX_BYTES
        ):
            return False
        if not self.owned:
            self.rows = list(self.rows)
            self.owned = True
        self.rows.extend(later.rows)
        self.nbytes += later.nbytes
        self.rec = b
        return True

    async def __call__(self) -> None:
        store, cache, rec, rows = self.store, self.cache, self.rec, self.rows
        merged = rows is not None and self.base_version is not None
        applied = await store._cache_put(
            cache,
            rec,
            rows,
            self.base_created_at,
            self.base_version if merged and self.base_version != rec.version - 1 else None,
        )
        if applied is False and rows is not None:
            # The tier lacks the version the rows apply to (a write-through of it was lost
            # or dropped): send the complete record when a private tier holds it, so a
            # thread whose LRU stays warm does not stay out of Redis. The private copy may
            # be newer than ``rec`` (a later write of this process, whose own write-through
            # was lost with a closed event loop): it is committed too, so it goes instead.
            full = await store._private_copy(ThreadKey(rec.thread_id, rec.user_id))
            if full is not None and (_same_checkpoint(full, rec) or full.version > rec.version):
                await store._cache_put(cache, full)
