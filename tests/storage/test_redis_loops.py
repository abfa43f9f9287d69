"""The Redis tier belongs to the event loop that uses it: one checkpointer used from two event
loops (two ``asyncio.run`` calls, the sync and async APIs in one process) keeps the Redis tier
working, with no "Event loop is closed" failure and no warning."""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.utils import END

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

pytest.importorskip("psycopg_pool")
from tenxgraph.storage.checkpointer import PgCheckpointer  # noqa: E402


def _app(cp: Any) -> Any:
    async def hello(state: Any) -> str:
        return "hello"

    g = StateGraph()
    g.add_node("hello", hello)
    g.set_entry_point("hello")
    g.add_edge("hello", END)
    return g.compile(checkpointer=cp)


def _redis(cp: PgCheckpointer) -> Any:
    [tier] = [c for c in cp.store.caches if c.name == "redis"]
    return tier


@pytest.mark.parametrize(
    "pool_config", [None, {"max_connections": 8}], ids=["url", "url+pool-config"]
)
def test_one_checkpointer_two_asyncio_runs_and_the_sync_api(
    pg_dsn: str,
    pg_schema: str,
    redis_url: str,
    redis_prefix: str,
    caplog: pytest.LogCaptureFixture,
    pool_config: dict[str, Any] | None,
) -> None:
    cp = PgCheckpointer(
        pg_dsn,
        schema=pg_schema,
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        redis_pool_config=pool_config,
    )
    app = _app(cp)
    tier = _redis(cp)
    with caplog.at_level(logging.WARNING):
        for i in range(3):  # three event loops, one after the other
            out = asyncio.run(
                app.ainvoke({"messages": [Message.text_message(f"a{i}")]}, {"thread_id": f"t{i}"})
            )
            assert out["messages"][-1].text() == "hello"
            gc.collect()
        # The sync API (its own portal loop) and asyncio.run again, alternating.
        for i in range(3):
            app.invoke({"messages": [Message.text_message(f"s{i}")]}, {"thread_id": f"t{i}"})
            asyncio.run(
                app.ainvoke({"messages": [Message.text_message(f"b{i}")]}, {"thread_id": f"t{i}"})
            )
        # Cold reads from Redis on a fresh loop: drop the in-process LRU, then read.
        before = tier.stats()

        async def read_all() -> list[Any]:
            lru = cp.store.caches[0]
            for i in range(3):
                await lru.invalidate(cp.key_for({"thread_id": f"t{i}"}))
            return [await cp.aget_state({"thread_id": f"t{i}"}) for i in range(3)]

        states = asyncio.run(read_all())
        assert all(len(st.context) == 6 for st in states)
        after = tier.stats()
        assert after["hits"] - before["hits"] == 3
        cp.close()
    assert tier.stats()["failures"] == 0
    # write-throughs run in the background; one cut short by a closing loop may be lost. The
    # next write-through of such a thread cannot be tagged on top of what Redis holds (no
    # hash chain of its base): it goes as the complete record, one call (per thread at least
    # the sync API's, on the portal loop that stays open)
    assert tier.stats()["writes"] >= 3, tier.stats()
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "loop" in m.lower() or "redis" in m.lower()], messages
