"""Cache tiers under hostile data: a well-formed but wrong-shaped Redis entry is a miss, thread
ids that would break Redis Cluster hash tags still share one slot, and the LRU's byte bound
counts the decoded objects it keeps."""

from __future__ import annotations

import pytest

from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.redis import RedisCache


@pytest.mark.anyio
async def test_wrong_shape_json_in_redis_is_a_miss_not_an_error(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    import redis.asyncio as aioredis

    cfg = {"thread_id": "shape", "user_id": "u"}
    writer = PgCheckpointer(
        postgres_dsn=pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
    )
    await writer.asetup()
    await writer.aput_messages(cfg, [Message.text_message("kept", message_id="m1")])
    redis_tier = next(c for c in writer.store.caches if isinstance(c, RedisCache))
    await writer.store.aflush()
    _meta, msgs_key, lens_key = redis_tier.keys("shape")
    client = aioredis.Redis.from_url(redis_url)
    try:
        assert await client.get(msgs_key), "the write-through should have cached the message"
        bad = b'{"role": 5}'  # valid JSON, not a Message
        await client.set(msgs_key, bad)
        await client.set(lens_key, str(len(bad)).encode())
    finally:
        await client.aclose()
    await writer.aclose()

    reader = PgCheckpointer(
        postgres_dsn=pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=redis_prefix
    )
    try:
        state = await reader.aget_state(dict(cfg))
        assert state is not None and [m.text() for m in state.context] == ["kept"]
        # And a further write works from there (no spurious conflict, nothing lost).
        await reader.aput_messages(dict(cfg), [Message.text_message("next", message_id="m2")])
        again = await reader.aget_state(dict(cfg))
        assert [m.text() for m in again.context] == ["kept", "next"]
    finally:
        await reader.aclose()


@pytest.mark.parametrize("thread_id", ["}abc", "}", "a{b", "{x}", "plain"])
def test_every_key_of_a_thread_shares_one_non_empty_hash_tag(thread_id: str) -> None:
    cache = RedisCache(url="redis://127.0.0.1:6379/0", prefix="tx:")
    keys = list(cache.keys(thread_id))
    tags = set()
    for key in keys:
        start = key.index("{")
        end = key.index("}", start + 1)
        tags.add(key[start + 1 : end])
    assert len(tags) == 1 and "" not in tags


def test_lru_byte_bound_counts_decoded_objects() -> None:
    from tenxgraph.records import StoredCheckpoint
    from tenxgraph.storage import serde

    msgs = [Message.text_message("x" * 200, message_id=str(i)) for i in range(10)]
    blobs = [serde.encode_message(m) for m in msgs]
    blob_bytes = sum(map(len, blobs))

    def record(decoded: object) -> StoredCheckpoint:
        return StoredCheckpoint(
            "t", "u", 1, b"{}", ((1, 11),), blobs, 11, "completed", 0.0, decoded=decoded
        )

    plain, with_objects = LRUCache(), LRUCache()
    import anyio

    anyio.run(plain.put, record(None))
    anyio.run(with_objects.put, record((msgs, len(msgs))))
    assert plain.stats()["bytes"] == 2 + blob_bytes
    assert with_objects.stats()["bytes"] >= 2 + 9 * blob_bytes
