"""Write-throughs to Redis merge per thread in the background lane, against a real Redis.

Calls are counted on the client (a real redis-py client that records what it sends); the
source of truth is a real ``MemoryStore`` (the layered store's behaviour does not depend on it).
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from _counting_redis import CountingRedis

from tenxgraph.core.state import Message
from tenxgraph.records import CheckpointWrite, StoredCheckpoint, ThreadKey
from tenxgraph.storage import serde
from tenxgraph.storage.layered import LayeredStore, _PutOp
from tenxgraph.storage.lru import LRUCache
from tenxgraph.storage.memory import MemoryStore
from tenxgraph.storage.redis import RedisCache

pytestmark = [pytest.mark.anyio, pytest.mark.redis]

KEY = ThreadKey("coalesce", "alice")


def write(rec: StoredCheckpoint | None, text: str, status: str = "running") -> CheckpointWrite:
    ver = rec.version if rec else 0
    nxt = rec.next_seq if rec else 1
    start = rec.ranges[0][0] if rec and rec.ranges else nxt
    row = serde.encode_message(Message.text_message(text, message_id=f"m{nxt}"))
    return CheckpointWrite(
        thread_id=KEY.thread_id,
        user_id=KEY.user_id,
        expected_version=ver,
        values=orjson.dumps({"v": ver + 1}),
        new_messages=[(nxt, row)],
        ranges=((start, nxt + 1),),
        next_seq=nxt + 1,
        status=status,
        history_limit=None,
        created_at=time.time(),
        base_created_at=rec.created_at if rec else None,
    )


@pytest.fixture
async def stack(redis_url: str, redis_prefix: str) -> Any:
    client = CountingRedis.from_url(redis_url)
    redis_tier = RedisCache(client=client, prefix=redis_prefix)
    store = LayeredStore(MemoryStore(), [LRUCache(), redis_tier], linger_s=5.0)
    yield store, client, redis_tier
    await store.aclose()
    await client.aclose()


async def test_ten_steps_cost_one_redis_call(stack: Any) -> None:
    store, client, tier = stack
    rec = None
    for i in range(10):
        rec = await store.write(write(rec, f"step {i}", "running" if i < 9 else "completed"))
    await store.aflush()
    assert client.commands.count("EVALSHA") + client.commands.count("EVAL") == 1
    assert store.stats()["behind"]["merged"] == 9
    cold = await tier.get(KEY)
    assert cold is not None and cold.version == 10 and cold.messages is not None
    assert [m.text() for m in cold.decoded[0]] == [f"step {i}" for i in range(10)]
    assert cold.messages == (await store.source.read(KEY)).messages


async def test_merged_rows_extend_the_cached_copy(stack: Any) -> None:
    store, client, tier = stack
    rec = None
    for i in range(3):
        rec = await store.write(write(rec, f"a{i}", "completed"))  # urgent: one call each
    await store.aflush()
    calls = len(client.commands)
    for i in range(5):
        rec = await store.write(write(rec, f"b{i}"))
    await store.aflush()
    assert len([c for c in client.commands[calls:] if c.startswith("EVAL")]) == 1
    got = await tier.get(KEY)
    assert got is not None and got.version == 8
    assert got.messages == (await store.source.read(KEY)).messages


async def test_an_invalidation_is_not_undone_by_an_earlier_put(stack: Any) -> None:
    store, client, tier = stack
    rec = await store.write(write(None, "one"))  # lingers
    await store.invalidate(KEY)  # queued after it, and waited for
    rec = await store.write(write(rec, "two"))  # must not merge into the put before the DEL
    assert store.stats()["behind"]["merged"] == 0
    await store.aflush()
    # the put of version 2 found no version 1 (deleted): nothing stale is cached
    got = await tier.get(KEY)
    assert got is None or (
        got.version == 2 and got.messages == (await store.source.read(KEY)).messages
    )


async def test_no_merge_across_owners_or_gaps(stack: Any) -> None:
    store, _client, _tier = stack
    rec = await store.write(write(None, "one"))
    w = write(rec, "two")
    w.base_created_at = rec.created_at + 1  # another checkpoint numbered 1: no merge
    await store.source.write(w)
    # what write() queues for a write whose base is another checkpoint
    store._later_put(
        _PutOp(store, store.caches[1], w.to_record(), w.new_messages, w.base_created_at, 1)
    )
    assert store.stats()["behind"]["merged"] == 0
    await store.aflush()


async def test_cold_read_equals_the_source_messages_included(stack: Any) -> None:
    store, _client, tier = stack
    rec = None
    for i in range(300):
        rec = await store.write(write(rec, f"m{i}" * 10))
    await store.aflush()
    cold = await tier.get(KEY)
    src = await store.source.read(KEY)
    assert cold is not None and src is not None
    assert (cold.version, cold.values, cold.ranges, cold.messages, cold.next_seq) == (
        src.version,
        src.values,
        src.ranges,
        src.messages,
        src.next_seq,
    )
    objs, n = cold.decoded
    assert n == 300 and objs == [serde.decode_message(b) for b in src.messages]


async def test_rows_the_batch_decoder_cannot_decide_fall_back(stack: Any) -> None:
    """A tagged row (a datetime in metadata) or a row of another shape: no batch decode, the
    rows are handed over as they are (the checkpointer decodes them one by one)."""
    import datetime as dt

    store, _client, tier = stack
    tagged = Message.text_message("t", message_id="x")
    tagged.metadata["at"] = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    row = serde.encode_message(tagged)
    assert serde.decode_message_array(row, 1) is None
    assert serde.decode_message_array(b'{"role": 5}', 1) is None
    assert serde.decode_message_array(row.replace(b'"__tx__"', b'"x"') + b",{}", 1) is None
    plain = serde.encode_message(Message.text_message("p", message_id="y"))
    got = serde.decode_message_array(plain + b"," + plain, 2)
    assert got is not None and got == [serde.decode_message(plain)] * 2
