"""``InMemoryCheckpointer``: the default store, in this process only."""

from __future__ import annotations

from tenxgraph.core.config import check_lease_timing, check_strategy
from tenxgraph.storage.checkpointer.base import BaseCheckpointer, StateT
from tenxgraph.storage.kv import MemoryKV
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.memory import MemoryStore

__all__ = ["InMemoryCheckpointer"]


class InMemoryCheckpointer(BaseCheckpointer[StateT]):
    """Checkpoints kept in this process (lost on exit), with every guarantee of the docs' "Guarantees
    and decisions" page that applies to one process: versioned history, compare-and-swap, user isolation, diff-only
    writes, the tool ledger.

    Args:
        state_history_limit: versions kept per thread (default 20; ``0``/``None`` keeps all).
        enforce_user_isolation: default ``True`` (see :class:`BaseCheckpointer`).
        lru_max_entries: decoded threads kept ready in the in-process LRU (count).
        cache_max_entries: entries kept by the cache methods (``aput_cache_value``,
            ``aput_state_cache``), least recently used evicted first (count).
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

    Stored data is encoded exactly as the durable stores encode it, so a value that could not
    be stored in Postgres cannot be stored here either.
    """

    def __init__(
        self,
        state_history_limit: int | None = 20,
        enforce_user_isolation: bool = True,
        *,
        lru_max_entries: int = 1024,
        cache_max_entries: int = 10_000,
        multitask_strategy: str | None = None,
        lease_ttl_s: float = 5.0,
        lease_renew_s: float = 2.0,
        enqueue_timeout_s: float | None = 300.0,
        thread_ttl_s: float | None = None,
    ) -> None:
        check_strategy(multitask_strategy, "multitask_strategy")
        check_lease_timing(lease_ttl_s, lease_renew_s, enqueue_timeout_s)
        # The in-memory source is private to this checkpointer and every write goes through
        # the layered store, which updates (or drops) the LRU copy before returning: the copy
        # cannot go stale, so a hit needs no confirmation from the source.
        store = LayeredStore(
            MemoryStore(), caches=[LRUCache(max_entries=lru_max_entries)], validate=False
        )
        super().__init__(
            store,
            state_history_limit=state_history_limit,
            enforce_user_isolation=enforce_user_isolation,
            cache_values=MemoryKV(max_entries=cache_max_entries),
            multitask_strategy=multitask_strategy,
            lease_ttl_s=lease_ttl_s,
            lease_renew_s=lease_renew_s,
            enqueue_timeout_s=enqueue_timeout_s,
            thread_ttl_s=thread_ttl_s,
        )
