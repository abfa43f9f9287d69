"""``SqliteCheckpointer``: the embedded durable store (one file, no server)."""

from __future__ import annotations

import os
from typing import Literal

from tenxgraph.core.config import check_lease_timing, check_strategy
from tenxgraph.storage.checkpointer.base import BaseCheckpointer, StateT
from tenxgraph.storage.layered import LayeredStore
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.sqlite import SqliteStore

__all__ = ["SqliteCheckpointer"]


class SqliteCheckpointer(BaseCheckpointer[StateT]):
    """Checkpoints in a SQLite file (stdlib ``sqlite3``, WAL mode, blocking calls off the event
    loop), safe for several processes on one machine; every guarantee of the docs' "Guarantees and
    decisions" page that applies to one machine, compare-and-swap included.

    Args:
        db_path: the database file (``":memory:"`` for a private in-memory database); default
            ``~/.tenxgraph/checkpointer.db`` (10xGraph's ``~/.agentflow/checkpointer.db``).
            Missing parent directories are created when the file is first opened.
        state_history_limit: versions kept per thread (default 20; ``0``/``None`` keeps all).
        enforce_user_isolation: default ``True``.
        lru_max_entries: decoded threads kept ready in the in-process LRU (count); an entry is
            used only after checking the file's current version (one indexed lookup).
        synchronous: SQLite ``PRAGMA synchronous`` (``"NORMAL"`` default, ``"FULL"`` to survive
            power loss, not only process crashes).
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
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        state_history_limit: int | None = 20,
        enforce_user_isolation: bool = True,
        *,
        lru_max_entries: int = 1024,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        multitask_strategy: str | None = None,
        lease_ttl_s: float = 5.0,
        lease_renew_s: float = 2.0,
        enqueue_timeout_s: float | None = 300.0,
        thread_ttl_s: float | None = None,
    ) -> None:
        check_strategy(multitask_strategy, "multitask_strategy")
        check_lease_timing(lease_ttl_s, lease_renew_s, enqueue_timeout_s)
        if db_path is None:
            db_path = os.path.join(os.path.expanduser("~"), ".tenxgraph", "checkpointer.db")
        self.db_path = db_path
        source = SqliteStore(db_path, synchronous=synchronous)
        store = LayeredStore(source, caches=[LRUCache(max_entries=lru_max_entries)])
        super().__init__(
            store,
            state_history_limit=state_history_limit,
            enforce_user_isolation=enforce_user_isolation,
            cache_values=source,  # the cache methods keep their entries in the same file
            multitask_strategy=multitask_strategy,
            lease_ttl_s=lease_ttl_s,
            lease_renew_s=lease_renew_s,
            enqueue_timeout_s=enqueue_timeout_s,
            thread_ttl_s=thread_ttl_s,
        )
