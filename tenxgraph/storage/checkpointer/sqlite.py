"""``SqliteCheckpointer``: the embedded durable store (one file, no server)."""

from __future__ import annotations

import os
from typing import Literal

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
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        state_history_limit: int | None = 20,
        enforce_user_isolation: bool = True,
        *,
        lru_max_entries: int = 1024,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
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
        )
