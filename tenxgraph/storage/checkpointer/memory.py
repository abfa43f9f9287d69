"""``InMemoryCheckpointer``: the default store, in this process only."""

from __future__ import annotations

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
    ) -> None:
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
        )
