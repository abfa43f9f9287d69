"""The source of truth wins over a cached copy (issue 29): a Redis entry altered in a way that
still parses (a state value, a message's text or role, the messages' order, a message added
or removed), version and creation time kept, is never served and never written back.

A writer instance takes two turns on a thread (Postgres + Redis + LRU); the Redis entry is
then altered with a raw client; a second instance with an empty LRU (so it reads Redis first)
loads the thread and takes the next turn. Its state must be the source's, the altered content
must not reach Postgres, and the tier must count the rejection. On a single Redis and on the
Redis Cluster.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
import redis
from redis.cluster import RedisCluster

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils import END

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

Rows = list[dict[str, Any]]


def _split(meta: dict[bytes, bytes], body: bytes, lens: bytes) -> Rows:
    out, off = [], 0
    for n in map(int, lens.split(b",")) if lens else []:
        out.append(orjson.loads(body[off : off + n]))
        off += n + 1
    return out


def _alter_rows(fn: Callable[[Rows], Rows]) -> Callable[[Any, str], None]:
    """An alteration of the message rows that keeps the entry well-formed (lengths and
    ranges consistent with the rows), version and creation time untouched."""

    def apply(r: Any, base: str) -> None:
        meta = r.hgetall(base + "meta")
        rows = _split(meta, r.get(base + "msgs") or b"", r.get(base + "lens") or b"")
        new = fn(rows)
        blobs = [orjson.dumps(x) for x in new]
        ranges = orjson.loads(meta[b"ranges"])
        s, e = ranges[-1]
        ranges[-1] = [s, e + len(new) - len(rows)]
        r.hset(base + "meta", "ranges", orjson.dumps(ranges))
        r.set(base + "msgs", b",".join(blobs))
        r.set(base + "lens", ",".join(str(len(b)) for b in blobs))

    return apply


def _text(row: dict[str, Any], text: str) -> dict[str, Any]:
    row = dict(row)
    row["content"] = [{"type": "text", "text": text, "annotations": []}]
    return row


def _values(r: Any, base: str) -> None:
    values = orjson.loads(r.hget(base + "meta", "values"))
    values["context_summary"] = "EVIL summary"
    r.hset(base + "meta", "values", orjson.dumps(values))


TAMPER: dict[str, Callable[[Any, str], None]] = {
    "a state value": _values,
    "a message's text": _alter_rows(lambda rows: [_text(rows[0], "EVIL text"), *rows[1:]]),
    "a message's role": _alter_rows(lambda rows: [{**rows[0], "role": "system"}, *rows[1:]]),
    "the order": _alter_rows(lambda rows: [rows[1], rows[0], *rows[2:]]),
    "a message added": _alter_rows(
        lambda rows: [*rows, _text({**rows[0], "message_id": "evil-1"}, "EVIL added")]
    ),
    "a message removed": _alter_rows(lambda rows: rows[:-1]),
}


@pytest.fixture(params=["single", "cluster"])
def topology(request: pytest.FixtureRequest) -> Iterator[tuple[str, bool]]:
    if request.param == "single":
        yield request.getfixturevalue("redis_url"), False
    else:
        yield request.getfixturevalue("redis_cluster_url"), True


def _graph(cp: PgCheckpointer) -> Any:
    async def reply(state: AgentState) -> str:
        return f"reply {len(state.context)}"

    g = StateGraph()
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=cp)


def _seen(state: AgentState) -> list[tuple[str, str]]:
    return [(m.role, m.text()) for m in state.context]


@pytest.mark.parametrize("how", list(TAMPER))
async def test_an_altered_copy_is_never_served_nor_written_back(
    how: str,
    topology: tuple[str, bool],
    pg_dsn: str,
    pg_schema: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, cluster = topology
    prefix = f"tamper-{uuid.uuid4().hex[:10]}:"
    cfg = {"thread_id": f"t-{uuid.uuid4().hex[:8]}", "user_id": "alice"}

    def instance() -> PgCheckpointer:
        return PgCheckpointer(
            pg_dsn, schema=pg_schema, redis_url=url, redis_cluster=cluster, redis_prefix=prefix
        )

    writer, reader, truth_cp = instance(), instance(), PgCheckpointer(pg_dsn, schema=pg_schema)
    raw: Any = RedisCluster.from_url(url) if cluster else redis.Redis.from_url(url)
    try:
        app = _graph(writer)
        for text in ("first", "second"):
            await app.ainvoke({"messages": [Message.text_message(text)]}, dict(cfg))
        await writer.store.aflush()
        truth = await truth_cp.aget_state(dict(cfg))
        [meta_key] = [k.decode() for k in raw.scan_iter(match=f"{prefix}*:meta", count=1000)]
        base = meta_key[: -len("meta")]
        kept = (raw.hget(meta_key, "version"), raw.hget(meta_key, "created_at"))
        TAMPER[how](raw, base)
        assert (raw.hget(meta_key, "version"), raw.hget(meta_key, "created_at")) == kept

        with caplog.at_level(logging.WARNING, logger="tenxgraph.redis"):
            served = await reader.aget_state(dict(cfg))
        redis_tier = reader.store.caches[1]
        assert redis_tier.stats()["rejected"] == 1  # counted
        assert any("does not verify" in r.getMessage() for r in caplog.records)
        assert _seen(served) == _seen(truth) and served.context_summary is None  # not served

        # the next turn, through the instance that met the altered copy
        await _graph(reader).ainvoke({"messages": [Message.text_message("third")]}, dict(cfg))
        await reader.store.aflush()
        after = await truth_cp.aget_state(dict(cfg))
        assert _seen(after)[:4] == _seen(truth)  # nothing altered was written back
        assert after.context_summary is None
        assert not any("EVIL" in m.text() for m in after.context)
        assert [m.text() for m in after.context][4:] == ["third", "reply 5"]
        # Redis holds a good copy again: a third instance is served from it
        third = instance()
        try:
            again = await third.aget_state(dict(cfg))
            assert _seen(again) == _seen(after)
            assert third.store.caches[1].stats()["hits"] == 1
            assert third.store.caches[1].stats()["rejected"] == 0
        finally:
            await third.aclose()
    finally:
        raw.close()
        for cp in (writer, reader, truth_cp):
            await cp.aclose()


async def test_a_copy_written_with_another_key_is_rejected(
    pg_dsn: str, pg_schema: str, redis_url: str
) -> None:
    """The key is the application's: an instance given another key than the writer's (or a
    Redis written by anyone without the key) is served nothing from Redis."""
    prefix = f"keys-{uuid.uuid4().hex[:10]}:"
    cfg = {"thread_id": "k1", "user_id": "alice"}
    a = PgCheckpointer(
        pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=prefix, cache_mac_key=b"a" * 32
    )
    b = PgCheckpointer(
        pg_dsn, schema=pg_schema, redis_url=redis_url, redis_prefix=prefix, cache_mac_key=b"b" * 32
    )
    try:
        await _graph(a).ainvoke({"messages": [Message.text_message("hi")]}, dict(cfg))
        await a.store.aflush()
        state = await b.aget_state(dict(cfg))
        assert [m.text() for m in state.context] == ["hi", "reply 1"]
        assert b.store.caches[1].stats()["rejected"] == 1
    finally:
        await a.aclose()
        await b.aclose()


def test_a_bad_key_or_a_key_without_redis_is_refused(pg_dsn: str) -> None:
    with pytest.raises(ConfigError) as info:
        PgCheckpointer(pg_dsn, redis_url="redis://127.0.0.1:6379/0", cache_mac_key=b"short")
    assert info.value.context["key"] == "cache_mac_key"
    with pytest.raises(ConfigError) as info:
        PgCheckpointer(pg_dsn, cache_mac_key=b"k" * 32)
    assert info.value.context["key"] == "cache_mac_key"
