"""The in-process LRU cache tier (``tenxgraph.storage.lru.LRUCache``) on its own."""

from __future__ import annotations

import orjson
import pytest
from opentelemetry import trace

from tenxgraph.records import StoredCheckpoint, ThreadKey, expand_ranges
from tenxgraph.storage.base import CacheTier
from tenxgraph.storage.lru import LRUCache

pytestmark = pytest.mark.anyio

KEY = ThreadKey("t1", "alice")


def blob(seq: int, size: int = 20) -> bytes:
    return orjson.dumps({"message_id": f"m{seq}", "text": "x" * size})


def record(
    version: int,
    ranges: tuple[tuple[int, int], ...],
    *,
    messages: bool = True,
    key: ThreadKey = KEY,
    decoded: object = None,
    created_at: float | None = None,
    values: bytes = b'{"v":1}',
) -> StoredCheckpoint:
    seqs = expand_ranges(ranges)
    return StoredCheckpoint(
        thread_id=key.thread_id,
        user_id=key.user_id,
        version=version,
        values=values,
        ranges=ranges,
        messages=[blob(s) for s in seqs] if messages else None,
        next_seq=(max(seqs) + 1) if seqs else 1,
        status="running",
        created_at=created_at if created_at is not None else 1000.0 + version,
        decoded=decoded,
    )


def rows(*seqs: int) -> list[tuple[int, bytes]]:
    return [(s, blob(s)) for s in seqs]


async def test_is_a_cache_tier() -> None:
    lru = LRUCache()
    assert isinstance(lru, CacheTier)
    assert lru.name == "lru" and lru.shared is False
    with pytest.raises(ValueError):
        LRUCache(max_entries=0)


async def test_miss_then_hit_and_stats() -> None:
    lru = LRUCache()
    assert await lru.get(KEY) is None
    await lru.put(record(1, ((1, 3),)))
    rec = await lru.get(KEY)
    assert rec is not None and rec.version == 1 and rec.messages == [blob(1), blob(2)]
    assert rec.ranges == ((1, 3),) and rec.next_seq == 3 and rec.values == b'{"v":1}'
    st = lru.stats()
    assert st["hits"] == 1 and st["misses"] == 1 and st["entries"] == 1
    assert st["bytes"] == len(b'{"v":1}') + len(blob(1)) + len(blob(2))


async def test_another_owner_never_hits() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 2),)))
    assert await lru.get(ThreadKey("t1", "mallory")) is None
    assert await lru.get(ThreadKey("t1", "*")) is None
    assert await lru.get(ThreadKey("t2", "alice")) is None
    assert await lru.get(KEY) is not None
    # a write by another owner (the thread was deleted and re-created) replaces the entry
    other = ThreadKey("t1", "bob")
    await lru.put(record(1, ((1, 2),), key=other))
    assert await lru.get(KEY) is None
    assert (await lru.get(other)).user_id == "bob"


async def test_incremental_append_extends_in_place() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 3),)))
    e1 = lru._entries["t1"]
    e1.shared = False  # pretend nobody holds the list: the put may extend it in place
    lst = e1.messages
    await lru.put(record(2, ((1, 5),), messages=False), rows(3, 4))
    rec = await lru.get(KEY)
    assert rec.version == 2 and rec.messages == [blob(s) for s in (1, 2, 3, 4)]
    assert rec.messages is lst  # O(k): no copy of the n old blobs
    assert lru.stats()["bytes"] == len(rec.values) + sum(map(len, rec.messages))


async def test_incremental_append_extends_only_the_same_checkpoint() -> None:
    """Rows of version 2 apply only on top of the version 1 created at the base's time (a
    deleted thread created anew reuses version numbers)."""
    lru = LRUCache()
    await lru.put(record(1, ((1, 3),), created_at=100.0))
    await lru.put(record(2, ((1, 4),), messages=False), rows(3), 200.0)
    rec = await lru.get(KEY)
    assert rec is None or rec.messages is None  # never the old blobs under version 2
    await lru.invalidate(KEY)
    await lru.put(record(1, ((1, 3),), created_at=200.0))
    await lru.put(record(2, ((1, 4),), messages=False), rows(3), 200.0)
    rec = await lru.get(KEY)
    assert rec is not None and rec.messages == [blob(s) for s in (1, 2, 3)]


async def test_incremental_append_never_changes_a_record_handed_out() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 3),)))
    old = await lru.get(KEY)
    await lru.put(record(2, ((1, 4),), messages=False), rows(3))
    await lru.put(record(3, ((1, 5),), messages=False), rows(4))
    assert old.messages == [blob(1), blob(2)]  # copy-on-write after get()
    new = await lru.get(KEY)
    assert new.version == 3 and new.messages == [blob(s) for s in (1, 2, 3, 4)]


async def test_a_list_handed_out_and_dropped_is_extended_without_a_copy() -> None:
    """A run's first read drops its record once decoded: the next write-through extends the
    entry's list in place (a copy touches every blob of the thread), while a list still held
    is copied, as above."""
    import sys

    from tenxgraph.storage import lru as lru_module

    if lru_module._SOLE_REFS is None:
        pytest.skip(f"no reliable reference counts on {sys.implementation.name}")
    lru = LRUCache()
    await lru.put(record(1, ((1, 3),)))
    ident = id(lru._entries["t1"].messages)
    rec = await lru.get(KEY)
    assert rec is not None and id(rec.messages) == ident
    del rec  # the reader is done with it
    await lru.put(record(2, ((1, 4),), messages=False), rows(3))
    assert id(lru._entries["t1"].messages) == ident  # extended in place
    kept = await lru.get(KEY)
    await lru.put(record(3, ((1, 5),), messages=False), rows(4))
    assert id(lru._entries["t1"].messages) != ident  # still held: copied
    assert kept is not None and kept.messages == [blob(1), blob(2), blob(3)]
    got = await lru.get(KEY)
    assert got is not None and got.messages == [blob(s) for s in (1, 2, 3, 4)]


async def test_incremental_with_new_range_and_replaced_ranges() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 4),)))
    # append in a new range (seqs not contiguous)
    await lru.put(record(2, ((1, 4), (10, 12)), messages=False), rows(10, 11))
    assert (await lru.get(KEY)).messages == [blob(s) for s in (1, 2, 3, 10, 11)]
    # replace_messages: keep 3 and 10, drop the rest, add 12 in front (O(n) rebuild)
    await lru.put(record(3, ((12, 13), (3, 4), (10, 11)), messages=False), rows(12))
    rec = await lru.get(KEY)
    assert rec.version == 3 and rec.messages == [blob(12), blob(3), blob(10)]
    assert lru.stats()["bytes"] == len(rec.values) + sum(map(len, rec.messages))


async def test_incremental_on_wrong_version_drops_messages() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 3),)))
    await lru.put(record(3, ((1, 5),), messages=False), rows(4))  # holds 1, not 2
    assert await lru.get(KEY) is None
    # a row missing from both the cache and new_messages: dropped too
    await lru.put(record(4, ((1, 3),)))
    await lru.put(record(5, ((1, 4), (7, 8)), messages=False), rows(3))
    assert await lru.get(KEY) is None


async def test_first_version_from_rows_is_complete() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 4),), messages=False), rows(1, 2, 3))
    rec = await lru.get(KEY)
    assert rec is not None and rec.messages == [blob(1), blob(2), blob(3)]


async def test_decoded_only_entries() -> None:
    lru = LRUCache()
    objs = ["obj1", "obj2"]
    await lru.put(record(1, ((1, 3),), messages=False, decoded=(objs, 2)), rows())
    rec = await lru.get(KEY)
    assert rec is not None and rec.messages is None and rec.decoded == (objs, 2)
    assert lru.stats()["bytes"] == len(rec.values) + 2 * 512 * 9  # estimated blobs + objects
    # incomplete and nothing suitable, no decoded: invisible to get
    await lru.put(record(2, ((1, 4),), messages=False), rows(3))
    assert await lru.get(KEY) is None


async def test_attach_decoded() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 3),)))
    await lru.put(record(2, ((1, 4),), messages=False), rows(3))
    objs = ["a", "b", "c"]
    assert await lru.attach_decoded(KEY, 1, (objs, 3)) is False  # another version
    assert await lru.attach_decoded(ThreadKey("t1", "bob"), 2, (objs, 3)) is False
    assert await lru.attach_decoded(KEY, 2, (objs, 3)) is True
    rec = await lru.get(KEY)
    assert rec.decoded == (objs, 3) and rec.messages == [blob(1), blob(2), blob(3)]
    # the next write-through drops the now outdated decoded objects
    await lru.put(record(3, ((1, 5),), messages=False), rows(4))
    rec = await lru.get(KEY)
    assert rec.decoded is None and len(rec.messages) == 4


async def test_attach_decoded_completes_a_shell() -> None:
    lru = LRUCache()
    await lru.put(record(5, ((1, 4),), messages=False), rows(3))  # nothing to build on
    assert await lru.get(KEY) is None
    assert await lru.attach_decoded(KEY, 5, (["a", "b", "c"], 3))
    rec = await lru.get(KEY)
    assert rec.version == 5 and rec.messages is None and rec.decoded[1] == 3


async def test_older_put_is_ignored_same_version_completes() -> None:
    lru = LRUCache()
    await lru.put(record(3, ((1, 3),)))
    await lru.put(record(2, ((1, 2),)))
    assert (await lru.get(KEY)).version == 3
    lru2 = LRUCache()
    await lru2.put(record(3, ((1, 3),), messages=False, decoded=(["a", "b"], 2)), rows(2))
    await lru2.put(record(3, ((1, 3),)))  # same checkpoint from a read: adds the blobs
    rec = await lru2.get(KEY)
    assert rec.messages == [blob(1), blob(2)] and rec.decoded == (["a", "b"], 2)
    # same version number, another checkpoint (thread deleted and re-created): replaced
    await lru2.put(record(3, ((1, 2),), created_at=5.0))
    rec = await lru2.get(KEY)
    assert rec.created_at == 5.0 and rec.messages == [blob(1)] and rec.decoded is None


async def test_bounded_by_entries_least_recently_used_first() -> None:
    lru = LRUCache(max_entries=3)
    keys = [ThreadKey(f"t{i}", "alice") for i in range(4)]
    for k in keys[:3]:
        await lru.put(record(1, ((1, 2),), key=k))
    await lru.get(keys[0])  # t0 is now the most recently used
    await lru.put(record(1, ((1, 2),), key=keys[3]))
    assert await lru.get(keys[1]) is None  # evicted
    assert await lru.get(keys[0]) is not None
    assert len(lru) == 3 and lru.stats()["evictions"] == 1


async def test_bounded_by_bytes() -> None:
    one = record(1, ((1, 11),))
    size = len(one.values) + sum(map(len, one.messages))
    lru = LRUCache(max_entries=100, max_bytes=size * 3 + 10)
    keys = [ThreadKey(f"t{i}", "alice") for i in range(5)]
    for k in keys:
        await lru.put(record(1, ((1, 11),), key=k))
    st = lru.stats()
    assert st["entries"] == 3 and st["bytes"] == 3 * size and st["evictions"] == 2
    assert await lru.get(keys[0]) is None and await lru.get(keys[4]) is not None
    # growing an entry by write-through evicts others to stay within the bound
    big_rows = [(s, blob(s, 200)) for s in range(11, 14)]
    await lru.put(record(2, ((1, 14),), messages=False, key=keys[4]), big_rows)
    assert lru.stats()["bytes"] <= lru.max_bytes
    # an entry larger than the bound on its own is kept alone (a thread longer than the
    # budget must not be decoded again at every run): every other entry is evicted
    huge = record(
        1, ((1, 2),), key=ThreadKey("huge", "alice"), values=b"{" + b" " * size * 4 + b"}"
    )
    await lru.put(huge)
    assert await lru.get(ThreadKey("huge", "alice")) is not None
    assert len(lru) == 1 and lru.stats()["bytes"] == len(huge.values) + len(huge.messages[0])
    # the next entry evicts it: the bound holds again
    await lru.put(record(1, ((1, 11),), key=keys[0]))
    assert await lru.get(ThreadKey("huge", "alice")) is None
    assert lru.stats()["bytes"] <= lru.max_bytes


async def test_invalidate_and_aclose() -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 2),)))
    await lru.invalidate(ThreadKey("t1", "someone-else"))  # any owner scope
    assert await lru.get(KEY) is None and lru.stats()["bytes"] == 0
    await lru.put(record(1, ((1, 2),)))
    await lru.aclose()
    await lru.aclose()
    assert len(lru) == 0 and lru.stats()["bytes"] == 0


async def test_long_thread_appends_are_cheap() -> None:
    """Appending to a 20,000-message entry extends its blob list in place: no copy of the n
    old blobs per write-through (after at most one copy-on-write of a list handed out)."""
    lru = LRUCache(max_bytes=2**30)
    n = 20_000
    await lru.put(record(1, ((1, n + 1),)))
    handed_out = (await lru.get(KEY)).messages
    await lru.put(record(2, ((1, n + 2),), messages=False), rows(n + 1))  # copies once
    lst = lru._entries["t1"].messages
    assert lst is not handed_out and len(handed_out) == n
    for v in range(3, 203):
        seq = n + v - 1
        await lru.put(record(v, ((1, seq + 1),), messages=False), rows(seq))
        assert lru._entries["t1"].messages is lst
    rec = await lru.get(KEY)
    assert len(rec.messages) == n + 201 and rec.messages[-1] == blob(n + 201)
    assert lru.stats()["bytes"] == len(rec.values) + sum(map(len, rec.messages))


async def test_spans_when_tracing(span_exporter) -> None:
    lru = LRUCache()
    await lru.put(record(1, ((1, 2),)))
    await lru.get(KEY)
    await lru.get(ThreadKey("nope", "alice"))
    spans = [
        s
        for s in span_exporter.get_finished_spans()
        if s.attributes.get("tenxgraph.cache.tier") == "lru"
    ]
    names = [s.name for s in spans]
    assert names == [
        "tenxgraph.checkpoint.write",
        "tenxgraph.checkpoint.read",
        "tenxgraph.checkpoint.read",
    ]
    assert all(s.kind == trace.SpanKind.INTERNAL for s in spans)
    assert spans[1].attributes["tenxgraph.cache.hit"] is True
    assert spans[2].attributes["tenxgraph.cache.hit"] is False
    assert "alice" not in str([dict(s.attributes) for s in spans])


@pytest.fixture
def span_exporter():
    """Finished spans of this test (installs an SDK tracer provider once per process)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


async def test_a_checkpoint_brings_its_decoded_messages_with_the_write_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The write carries the decoded message list (``CheckpointWrite.decoded``, copied by
    ``to_record``), so the LRU holds it after each step without an ``attach_decoded`` call,
    and the next run's read decodes nothing."""
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.core.state.reducers import add_messages
    from tenxgraph.storage import serde
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer

    attached: list[int] = []
    real_attach = LRUCache.attach_decoded

    async def counting_attach(
        self: LRUCache, key: ThreadKey, version: int, decoded: object
    ) -> bool:
        attached.append(version)
        return await real_attach(self, key, version, decoded)

    monkeypatch.setattr(LRUCache, "attach_decoded", counting_attach)
    cp = InMemoryCheckpointer()
    config = {"thread_id": "t-decoded", "user_id": "u"}
    prev = None
    state = AgentState()
    for i in range(3):
        ctx = add_messages(state.context, [Message.text_message(f"m{i}")])
        state = state.model_copy(update={"context": ctx})
        prev = await cp.acommit(config, state, prev)
    assert attached == []
    lru = cp.store.caches[0]
    entry = lru._entries["t-decoded"]
    assert entry.version == 3 and entry.decoded == (state.context, 3)
    before = serde.messages_decoded()
    loaded = await cp.aload(config)
    assert loaded is not None and [m.text() for m in loaded.state.context] == ["m0", "m1", "m2"]
    assert serde.messages_decoded() == before


def test_to_record_carries_the_writes_decoded_messages_and_never_shows_them() -> None:
    from tenxgraph.records import CheckpointWrite

    w = CheckpointWrite("t", "u", 0, b"{}", [], (), 1, "running", None, 1.0, decoded=(["m"], 1))
    rec = w.to_record(None)
    assert rec.decoded == (["m"], 1)
    assert "decoded" not in repr(w)
    assert w == CheckpointWrite("t", "u", 0, b"{}", [], (), 1, "running", None, 1.0)


async def test_byte_count_matches_the_entries_through_in_place_appends_and_attachments() -> None:
    """The tier's byte count (kept incrementally) equals the sum of its entries' sizes after
    every kind of update: in-place appends of one and of several rows, a write-through that
    carries decoded objects, an attachment, a shell, another thread."""
    lru = LRUCache()

    def consistent() -> bool:
        return lru.stats()["bytes"] == sum(e.size() for e in lru._entries.values())

    await lru.put(record(1, ((1, 3),)))
    assert consistent()
    await lru.put(record(2, ((1, 4),), messages=False), rows(3))
    assert consistent()
    await lru.put(record(3, ((1, 6),), messages=False, decoded=(["d"] * 5, 5)), rows(4, 5))
    assert consistent() and lru._entries["t1"].decoded == (["d"] * 5, 5)
    assert await lru.attach_decoded(KEY, 3, (["e"] * 5, 5)) is True
    assert consistent()
    await lru.put(record(1, ((1, 2),), key=ThreadKey("t2", "bob"), messages=False), rows())
    assert consistent()
    await lru.put(record(4, ((1, 7),), messages=False), rows(6))
    assert consistent() and lru._entries["t1"].decoded is None
