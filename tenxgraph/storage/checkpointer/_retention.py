"""The checkpointer's erasure and retention API (``aerase_user``, ``asweep_threads``,
``aset_thread_ttl``, ``aget_thread_ttl`` and their sync twins), mixed into
:class:`~tenxgraph.storage.checkpointer.base.BaseCheckpointer`.

The rules and result types are :mod:`tenxgraph.storage.retention`; each store's part is its
``erase_owner`` / ``sweep_idle`` (one transaction in the source, then the cache tiers, see
:class:`~tenxgraph.storage.layered.LayeredStore`). What is left here is what only the facade
knows: the meaning of ``user_id`` under its isolation setting, the state-cache entries, the
versions it remembers, and the counters.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import orjson

from tenxgraph.core._portal import run_sync
from tenxgraph.core.config import normalize_config
from tenxgraph.core.exceptions import ConfigError, TransientStorageError, ValidationError
from tenxgraph.records import ThreadKey
from tenxgraph.storage.base import StoreTier
from tenxgraph.storage.kv import CacheValueStore
from tenxgraph.storage.retention import (
    SWEEP_BATCH,
    EraseResult,
    Removal,
    SweepResult,
    check_thread_ttl,
)
from tenxgraph.telemetry import ATTR, METRIC, SPAN, counter, span

__all__ = ["STATE_CACHE_NS", "RetentionMixin"]

log = logging.getLogger("tenxgraph.checkpointer")

#: The namespace of the state-cache entries (``aput_state_cache``); keys are the JSON array
#: ``[owner scope, thread id]``.
STATE_CACHE_NS = "__tenxgraph_state__"


class RetentionMixin:
    """Erasure and retention methods of a checkpointer (see the module docstring)."""

    # Provided by BaseCheckpointer.
    store: StoreTier | None
    cache_values: CacheValueStore
    enforce_user_isolation: bool
    thread_ttl_s: float | None
    _seen: OrderedDict[ThreadKey, Any]
    _metric_attrs: dict[str, Any]

    if TYPE_CHECKING:  # BaseCheckpointer defines them; declared here for the type checkers

        def _tier(self, method: str) -> StoreTier: ...

        def _key(self, config: dict[str, Any] | None) -> ThreadKey: ...

        def _forget(self, key: ThreadKey) -> None: ...

        async def _ensure_setup(self) -> None: ...

    def _store_op(self, api: str, op: str) -> Any:
        """The store's ``op`` method, for the public ``api``; a store without it (a tier of the
        application's own) raises ``StorageError`` (``STORAGE_000``) naming what is missing."""
        from tenxgraph.core.exceptions import StorageError

        fn = getattr(self._tier(api), op, None)
        if fn is None:
            raise StorageError(
                f"{api}() needs a store with {op}(); {type(self.store).__name__} has none "
                "(the built-in memory, SQLite and Postgres stores do)",
                context={"method": api},
            )
        return fn

    # -- erasure ---------------------------------------------------------------------------------
    async def aerase_user(
        self, user_id: str, *, thread_ids: list[str] | None = None
    ) -> EraseResult:
        """Remove everything stored of a user, from every tier: each thread the user owns
        with all its versions, message rows, tool-ledger entries, stop requests, run leases
        and queued waiters, submitted (background) runs, the cached copies in this process's
        LRU and in Redis, and the user's state-cache entries; also the stop requests, leases
        and runs the user holds on thread ids without a checkpoint.

        With ``enforce_user_isolation=True`` (the default) ``user_id`` is the owner recorded
        by the user's first write of each thread. With isolation off the store records no
        owner (every thread belongs to one shared scope), so ``user_id`` cannot select
        anything: pass the user's threads as ``thread_ids`` (the application knows them);
        they are removed whoever wrote them, and ``user_id`` is only validated.

        A run of the user going on meanwhile cannot bring anything back: the source removes
        the threads in one transaction, after which every checkpoint write, ledger write and
        lease renewal of those threads is refused (``StaleStateError``, ``LedgerWriteError``,
        a lost lease), and a cache write-back queued before is ignored (Redis keeps a
        data-free marker per thread for ``RedisCache.erase_marker_s`` seconds). What a run
        writes *after* the erasure (a thread created anew by a run that had not written
        anything yet) is new data: stop the user's traffic first, or erase again; the call
        is idempotent. Other instances' in-process LRUs never serve an erased thread (every
        cached copy is confirmed by the source, which answers that it is gone, and the copy
        is dropped then); until then it stays in their memory, bounded by their LRU size.

        Args:
            user_id: the user (a non-empty ``str``; ``"*"`` is refused).
            thread_ids: with isolation off, the user's thread ids (required then); with
                isolation on, refused (ownership is recorded, nothing needs naming).

        Returns:
            An :class:`~tenxgraph.storage.retention.EraseResult`: the erased thread ids, rows
            deleted per table, entries removed per cache tier, and any cache tier that could
            not be reached (``pending``: it is cleaned by this process when back).

        Raises:
            ConfigError: ``CONFIG_001`` for an invalid ``user_id``, ``thread_ids`` given with
                isolation on, or missing (or holding an invalid id) with isolation off.
            StorageError: ``STORAGE_000`` for a checkpointer without a built-in store (or
                whose store has no ``erase_owner``).
            TransientStorageError: ``STORAGE_TRANSIENT_001`` when the source failed in a
                retryable way; run it again (idempotent).
        """
        normalize_config({"thread_id": "-", "user_id": user_id}, new_run=False)
        if not isinstance(user_id, str):
            raise ConfigError(
                f"user_id must be a str, not {type(user_id).__name__}", context={"key": "user_id"}
            )
        ids = self._erase_ids(thread_ids)
        await self._ensure_setup()
        erase = self._store_op("aerase_user", "erase_owner")
        by_owner = self.enforce_user_isolation
        scope = user_id if by_owner else "*"
        with span(SPAN.ERASE, attributes=dict(self._metric_attrs)):
            removed: Removal = await erase(scope, by_owner=by_owner, thread_ids=ids)
            # With isolation on, the user's own entries are found by their scope (those of
            # the erased threads among them); with it off, named by thread.
            n, ok = await self._drop_state_cache(
                [scope] if by_owner else [],
                [] if by_owner else [(scope, t) for t in removed.thread_ids],
            )
        self._forget_all(removed.thread_ids, scope if by_owner else None)
        removed = removed.with_caches({"state_cache": n}, () if ok else ("state_cache",))
        attrs = self._metric_attrs
        counter(METRIC.USERS_ERASED).add(1, attrs)
        counter(METRIC.ERASED_THREADS).add(removed.threads, attrs)
        rows = counter(METRIC.ERASED_ROWS)
        for table, count in removed.rows.items():
            if count:
                rows.add(count, {**attrs, ATTR.DB_COLLECTION: table})
        return EraseResult(
            thread_ids=removed.thread_ids,
            rows=dict(removed.rows),
            caches=dict(removed.caches),
            pending=removed.pending,
        )

    def erase_user(self, user_id: str, *, thread_ids: list[str] | None = None) -> EraseResult:
        """Sync twin of :meth:`aerase_user` (call it outside an event loop)."""
        return run_sync(
            self.aerase_user,
            user_id,
            thread_ids=thread_ids,
            sync_name="erase_user",
            async_name="aerase_user",
        )

    def _erase_ids(self, thread_ids: Any) -> list[str]:
        """The validated ``thread_ids`` of an erasure (see :meth:`aerase_user`)."""
        if self.enforce_user_isolation:
            if thread_ids is not None:
                raise ConfigError(
                    "thread_ids= is only for a checkpointer with enforce_user_isolation=False: "
                    "with isolation on, every thread of the user is found by its owner",
                    context={"key": "thread_ids"},
                )
            return []
        if thread_ids is None or isinstance(thread_ids, str | bytes):
            raise ConfigError(
                "with enforce_user_isolation=False the store records no owner: pass the "
                "user's threads as thread_ids=[...]",
                context={"key": "thread_ids"},
            )
        out: list[str] = []
        for tid in thread_ids:
            normalize_config({"thread_id": tid}, new_run=False)
            out.append(str(tid))
        return sorted(set(out))

    async def _drop_state_cache(
        self, scopes: list[str], keys: list[tuple[str, str]]
    ) -> tuple[int, bool]:
        """Delete the state-cache entries of every thread of ``scopes`` (owner scopes) and of
        each ``(scope, thread)`` of ``keys``; ``(entries deleted, whether the tier answered)``."""
        kv = self.cache_values
        names = {orjson.dumps([s, t]).decode() for s, t in keys}
        try:
            for scope in scopes:
                head = orjson.dumps([scope]).decode()[:-1] + ","
                names.update(await kv.kv_keys(STATE_CACHE_NS, head))
            many = getattr(kv, "kv_delete_many", None)
            if many is not None:  # Redis: pipelined
                deleted = int(await many(STATE_CACHE_NS, sorted(names)))
            else:
                deleted = 0
                for name in sorted(names):
                    deleted += bool(await kv.kv_delete(STATE_CACHE_NS, name))
        except TransientStorageError as exc:
            log.warning(
                "state-cache entries of erased threads could not be removed (%s); they expire "
                "after state_cache_ttl_s and are never read by a run",
                exc.error_code,
            )
            return 0, False
        return deleted, True

    def _forget_all(self, thread_ids: tuple[str, ...], scope: str | None) -> None:
        """Forget the versions remembered of ``thread_ids`` (and of every thread of
        ``scope``)."""
        gone = set(thread_ids)
        for key in [k for k in self._seen if k.thread_id in gone or k.user_id == scope]:
            self._forget(key)

    # -- retention -------------------------------------------------------------------------------
    async def asweep_threads(self, *, now: float | None = None) -> SweepResult:
        """Delete the threads idle longer than their time to live: a thread's own TTL
        (:meth:`aset_thread_ttl`), else this checkpointer's ``thread_ttl_s`` (``None``: only
        threads with their own TTL expire). Idle means no checkpoint written for that long
        (``updated_at``; reads do not count). A thread that holds a live run lease or has an
        open (pending or running) submitted run is kept, whatever its age. A run without a
        lease that stays longer than the TTL in one node is not seen: its thread may expire,
        and its next checkpoint is then refused (``StaleStateError``); give such runs a
        ``multitask_strategy`` (they then hold the lease) or a TTL above ``node_timeout``.
        Every row and cached copy of an expired thread goes, as for :meth:`aerase_user`,
        in batches of :data:`~tenxgraph.storage.retention.SWEEP_BATCH` threads per
        transaction. The worker's recovery loop calls this periodically.

        Args:
            now: the time to judge idleness at, UNIX seconds (default: now). Leases are
                judged on the store's own clock.

        Returns:
            A :class:`~tenxgraph.storage.retention.SweepResult`: the expired thread ids and
            the counts per table and per cache tier (also recorded as the
            ``tenxgraph.retention.threads`` / ``tenxgraph.retention.rows`` counters).

        Raises:
            ValidationError: ``VALIDATION_000`` when ``now`` is not a finite number.
            StorageError: ``STORAGE_000`` for a checkpointer without a built-in store.
            TransientStorageError: ``STORAGE_TRANSIENT_001`` on a retryable failure (what
                the batches before it removed stays removed).
        """
        if now is None:
            now = time.time()
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            raise ValidationError(
                f"now must be a finite number of UNIX seconds, not {now!r}",
                context={"field": "now"},
            )
        await self._ensure_setup()
        sweep = self._store_op("asweep_threads", "sweep_idle")
        total = Removal()
        batches = 0
        with span(SPAN.SWEEP, attributes=dict(self._metric_attrs)):
            while True:
                batch: Removal = await sweep(float(now), self.thread_ttl_s, SWEEP_BATCH)
                batches += 1
                total = total.merged(batch)
                self._record_sweep(batch)
                if batch.threads < SWEEP_BATCH:
                    break
            n, ok = await self._drop_state_cache(
                [], list(zip(total.owners, total.thread_ids, strict=True))
            )
        for tid, owner in zip(total.thread_ids, total.owners, strict=True):
            self._forget(ThreadKey(tid, owner))
        total = total.with_caches({"state_cache": n}, () if ok else ("state_cache",))
        return SweepResult(
            thread_ids=total.thread_ids,
            rows=dict(total.rows),
            caches=dict(total.caches),
            pending=total.pending,
            batches=batches,
        )

    def sweep_threads(self, *, now: float | None = None) -> SweepResult:
        """Sync twin of :meth:`asweep_threads` (call it outside an event loop)."""
        return run_sync(
            self.asweep_threads, now=now, sync_name="sweep_threads", async_name="asweep_threads"
        )

    def _record_sweep(self, batch: Removal) -> None:
        """Add one batch to the retention counters (no thread or user id)."""
        attrs = self._metric_attrs
        if batch.threads:
            counter(METRIC.SWEPT_THREADS).add(batch.threads, attrs)
        rows = counter(METRIC.SWEPT_ROWS)
        for table, count in batch.rows.items():
            if count:
                rows.add(count, {**attrs, ATTR.DB_COLLECTION: table})

    async def aset_thread_ttl(self, config: dict[str, Any], ttl_s: float | None) -> None:
        """Give the config's thread its own time to live, overriding the checkpointer's
        ``thread_ttl_s`` for it (durable, seen by every instance's sweep).

        Args:
            config: the thread's config (``thread_id``, ``user_id``).
            ttl_s: seconds of idleness after which the thread expires (``> 0``;
                ``math.inf``: never), or ``None`` to follow the checkpointer's default again.

        Raises:
            ConfigError: ``CONFIG_001`` for a bad ``ttl_s`` (not a number, NaN, zero or
                negative) or config, before anything is written.
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread has no
                checkpoint yet.
            StorageError: ``STORAGE_FORBIDDEN_001`` for another user's thread.
        """
        ttl = check_thread_ttl(ttl_s, "ttl_s")
        key = self._key(config)
        await self._ensure_setup()
        await self._store_op("aset_thread_ttl", "set_thread_ttl")(key, ttl)

    def set_thread_ttl(self, config: dict[str, Any], ttl_s: float | None) -> None:
        """Sync twin of :meth:`aset_thread_ttl`."""
        run_sync(
            self.aset_thread_ttl,
            config,
            ttl_s,
            sync_name="set_thread_ttl",
            async_name="aset_thread_ttl",
        )

    async def aget_thread_ttl(self, config: dict[str, Any]) -> float | None:
        """The time to live that applies to the config's thread, in seconds: its own
        (:meth:`aset_thread_ttl`), else the checkpointer's ``thread_ttl_s``; ``None``: it
        never expires (``math.inf`` when set so explicitly).

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist
                (or is another user's, which reads the same).
        """
        from tenxgraph.core.exceptions import ResourceNotFoundError

        key = self._key(config)
        await self._ensure_setup()
        exists, own = await self._store_op("aget_thread_ttl", "get_thread_ttl")(key)
        if not exists:
            raise ResourceNotFoundError(
                f"thread {key.thread_id!r} does not exist", context={"thread_id": key.thread_id}
            )
        return float(own) if own is not None else self.thread_ttl_s

    def get_thread_ttl(self, config: dict[str, Any]) -> float | None:
        """Sync twin of :meth:`aget_thread_ttl`."""
        return run_sync(
            self.aget_thread_ttl, config, sync_name="get_thread_ttl", async_name="aget_thread_ttl"
        )
