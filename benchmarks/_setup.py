"""Names and factories of the contenders of a session (shared by ``run_all.py`` and the
pytest-benchmark suites)."""

from __future__ import annotations

from _contenders import FloorContender, LangGraphContender, TenxContender
from _pg import BenchDatabase


class Setup:
    """Names and factories of every contender of a session."""

    def __init__(
        self, db: BenchDatabase | None, redis_url: str | None, redis_prefix: str, workdir: str
    ) -> None:
        self.db = db
        self.redis_url = redis_url
        self.redis_prefix = redis_prefix
        self.workdir = workdir

    def tx(
        self,
        store: str,
        durable: bool = True,
        *,
        dsn: str | None = None,
        sync_nodes: bool = False,
        pool_max: int = 10,
        pool_min: int = 1,
        tag: str = "",
        redis_url: str | None = None,
    ) -> TenxContender:
        label = {
            "memory": "memory",
            "sqlite": "SQLite",
            "postgres": "Postgres",
            "postgres+redis": "Postgres+Redis+LRU",
        }[store]
        name = (
            f"tenxgraph {label}"
            + ("" if durable else " (end of run)")
            + (" (def nodes)" if sync_nodes else "")
            + tag
        )
        schema = (
            "tx_"
            + store.replace("+", "_")
            + ("" if durable else "_eor")
            + ("_sync" if sync_nodes else "")
        )
        if tag:
            schema += "_" + "".join(ch for ch in tag if ch.isalnum())
        return TenxContender(
            name,
            store,
            durable=durable,
            dsn=dsn or self._dsn(),
            redis_url=redis_url or self.redis_url,
            redis_prefix=self.redis_prefix,
            schema=schema,
            sync_nodes=sync_nodes,
            pool_max=pool_max,
            pool_min=pool_min,
            workdir=self.workdir,
        )

    def lg(
        self,
        store: str,
        durability: str = "sync",
        *,
        dsn: str | None = None,
        pool_max: int | None = None,
        pool_min: int = 1,
    ) -> LangGraphContender:
        label = {"memory": "InMemorySaver", "postgres": "PostgresSaver"}[store]
        name = f"LangGraph {label}" + (
            "" if durability == "sync" else f" (durability={durability})"
        )
        return LangGraphContender(
            name,
            store,
            durability=durability,
            dsn=dsn or self._dsn(),
            pool_max=pool_max,
            pool_min=pool_min,
        )

    def floor(self, dsn: str | None = None) -> FloorContender:
        return FloorContender("floor: BEGIN+INSERT+COMMIT, 1 round trip", dsn or self._dsn())

    def _dsn(self) -> str | None:
        return self.db.dsn if self.db is not None else None
