"""A cold read through Redis (layout 2, rows decoded in one call) gives exactly what a cold
read from Postgres gives: same version, same state, same ``Message`` objects, against real
Postgres and Redis servers."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
import redis

from tenxgraph.core.state import Message
from tenxgraph.storage import serde
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.redis import RedisCache

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.redis]


def _messages(n: int) -> list[Message]:
    out = []
    for i in range(n):
        if i % 7 == 3:
            out.append(Message.tool_message({"ok": i}, tool_call_id=f"c{i}"))
        else:
            out.append(Message.text_message(f"m{i} " * 20, role="user" if i % 2 else "assistant"))
    return out


async def _cold(cp: PgCheckpointer, cfg: dict[str, str]) -> object:
    await cp.store.caches[0].aclose()  # empty the LRU
    return await cp.aget_state(dict(cfg))


@pytest.mark.parametrize("tagged", [False, True], ids=["plain", "tagged"])
async def test_cold_from_redis_equals_cold_from_postgres(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str, tagged: bool
) -> None:
    cfg = {"thread_id": "cold", "user_id": "u"}
    msgs = _messages(120)
    if tagged:  # a value only the row-by-row path restores: the batch path steps aside
        msgs[5].metadata["at"] = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    writer = PgCheckpointer(
        pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
    )
    via_redis = PgCheckpointer(
        pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
    )
    pg_only = PgCheckpointer(pg_dsn, schema=pg_schema)
    try:
        for i in range(0, len(msgs), 40):
            await writer.aput_messages(dict(cfg), msgs[i : i + 40])
        await writer.store.aflush()
        tier = next(c for c in via_redis.store.caches if isinstance(c, RedisCache))
        hits = tier.stats()["hits"]
        before = serde.messages_decoded()
        a = await _cold(via_redis, cfg)
        assert tier.stats()["hits"] == hits + 1  # it came from Redis
        assert serde.messages_decoded() - before == len(msgs)  # each row decoded once
        b = await _cold(pg_only, cfg)
        assert a is not None and b is not None
        assert list(a.context) == list(b.context) == msgs
        assert [type(m) for m in a.context] == [Message] * len(msgs)
        assert a.model_dump() == b.model_dump()
    finally:
        for cp in (writer, via_redis, pg_only):
            await cp.aclose()


async def test_a_garbage_row_in_the_new_layout_is_a_miss(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str, caplog
) -> None:
    """Well-formed JSON that is not a message: the one-call decode refuses it, the rows go
    to the row-by-row decoding, which fails, and the reader drops the copy and reads the
    source (a warning, never an error)."""
    cfg = {"thread_id": "bad", "user_id": "u"}
    writer = PgCheckpointer(
        pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
    )
    reader = PgCheckpointer(
        pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
    )
    try:
        written = _messages(3)
        await writer.aput_messages(dict(cfg), written)
        await writer.store.aflush()
        tier = next(c for c in writer.store.caches if isinstance(c, RedisCache))
        _meta, msgs_key, lens_key = tier.keys("bad")
        rows = [b'{"role": 5}', b'{"role": "user", "content": 7}', b"{}"]
        with redis.Redis.from_url(redis_url) as raw:
            raw.set(msgs_key, b",".join(rows))
            raw.set(lens_key, b",".join(str(len(r)).encode() for r in rows))
        with caplog.at_level(logging.WARNING):
            st = await reader.aget_state(dict(cfg))
        assert st is not None and list(st.context) == written  # the source's copy
        # rows altered in Redis fail the entry's MAC before anything is decoded
        assert any("does not verify" in r.getMessage() for r in caplog.records)
        assert (
            next(c for c in reader.store.caches if isinstance(c, RedisCache)).stats()["rejected"]
            == 1
        )
    finally:
        await writer.aclose()
        await reader.aclose()
