"""MemoryStore-specific behaviour the protocol suite cannot see: which rows pruning keeps, the
sliding-window minimum behind it, atomicity of a rejected write, and use from OS threads."""

from __future__ import annotations

import random
import threading

import anyio
import pytest

from tenxgraph.core.exceptions import StaleStateError, StorageError
from tenxgraph.records import CheckpointWrite, Range, ThreadKey, expand_ranges
from tenxgraph.storage.memory import MemoryStore, min_seq_of

pytestmark = pytest.mark.anyio

KEY = ThreadKey("t", "u")


def cw(
    expected: int,
    new: list[tuple[int, bytes]],
    ranges: tuple[Range, ...],
    next_seq: int,
    limit: int | None = None,
) -> CheckpointWrite:
    return CheckpointWrite(
        "t", "u", expected, b"{}", new, ranges, next_seq, "running", limit, float(expected)
    )


def test_min_seq_of() -> None:
    assert min_seq_of(((5, 7), (1, 2)), 9) == 1
    assert min_seq_of(((3, 3), (4, 6)), 9) == 4  # empty ranges reference nothing
    assert min_seq_of((), 9) == 9


async def test_pruning_keeps_exactly_the_reachable_rows() -> None:
    store = MemoryStore()
    await store.write(cw(0, [(1, b"1"), (2, b"2"), (3, b"3")], ((1, 4),), 4, 2))
    await store.write(cw(1, [(4, b"4")], ((3, 4), (1, 2), (4, 5)), 5, 2))
    await store.write(cw(2, [(5, b"5"), (6, b"6")], ((5, 7),), 7, 2))
    thread = store._threads["t"]
    assert sorted(thread.versions) == [2, 3]
    assert sorted(thread.rows) == [1, 2, 3, 4, 5, 6]  # v2 still reaches seq 1
    await store.write(cw(3, [(7, b"7")], ((5, 8),), 8, 2))
    assert sorted(thread.versions) == [3, 4]
    assert sorted(thread.rows) == [5, 6, 7]


async def test_append_only_writes_touch_only_new_rows() -> None:
    store = MemoryStore()
    for v in range(300):
        await store.write(cw(v, [(v + 1, b"m")], ((1, v + 2),), v + 2, 20))
    thread = store._threads["t"]
    assert sorted(thread.versions) == list(range(281, 301))
    assert len(thread.rows) == 300  # every kept version reaches back to seq 1
    assert list(thread.window) == [(300, 1)]  # O(1) pruning state for an append-only thread


async def test_random_history_matches_a_naive_model() -> None:
    """Rows kept == rows at or above the minimum range start of the kept versions."""
    rng = random.Random(7)
    store = MemoryStore()
    lists: dict[int, list[int]] = {}
    seqs: list[int] = []
    next_seq = 1
    for v in range(1, 150):
        keep = rng.sample(seqs, k=rng.randint(0, len(seqs))) if rng.random() < 0.3 else seqs
        new = list(range(next_seq, next_seq + rng.randint(0, 3)))
        seqs = keep + new
        next_seq += len(new)
        ranges: list[Range] = []
        for s in seqs:
            if ranges and ranges[-1][1] == s:
                ranges[-1] = (ranges[-1][0], s + 1)
            else:
                ranges.append((s, s + 1))
        limit = rng.choice([1, 3, 5])
        await store.write(cw(v - 1, [(s, b"%d" % s) for s in new], tuple(ranges), next_seq, limit))
        lists[v] = seqs
        thread = store._threads["t"]
        kept = sorted(thread.versions)
        floor = min(min(lists[k], default=thread.versions[k].next_seq) for k in kept)
        assert all(s >= floor for s in thread.rows)
        for k in kept:
            rec = await store.read(KEY, k)
            assert rec is not None
            assert rec.messages == [b"%d" % s for s in lists[k]]
            assert expand_ranges(rec.ranges) == lists[k]


async def test_a_rejected_write_changes_nothing() -> None:
    store = MemoryStore()
    await store.write(cw(0, [(1, b"a"), (2, b"b")], ((1, 3),), 3))
    for bad in (
        cw(1, [(2, b"dup")], ((1, 3),), 3),  # reuses a stored seq
        cw(1, [(3, b"x"), (3, b"y")], ((1, 4),), 4),  # same seq twice
    ):
        with pytest.raises(StorageError) as info:
            await store.write(bad)
        assert info.value.error_code == "STORAGE_000"
    thread = store._threads["t"]
    assert (thread.latest, sorted(thread.rows), thread.rows[2]) == (1, [1, 2], b"b")


async def test_records_are_private_copies() -> None:
    store = MemoryStore()
    await store.write(cw(0, [(1, b"a")], ((1, 2),), 2))
    rec = await store.read(KEY)
    assert rec is not None and rec.messages is not None
    rec.messages.append(b"evil")
    again = await store.read(KEY)
    assert again is not None and again.messages == [b"a"]


def test_safe_from_several_os_threads_and_event_loops() -> None:
    store = MemoryStore()
    committed: list[int] = []
    lock = threading.Lock()

    async def loop() -> None:
        for _ in range(200):
            while True:
                cur = await store.current_version(KEY) or 0
                try:
                    await store.write(cw(cur, [(cur + 1, b"m")], ((1, cur + 2),), cur + 2))
                except StaleStateError:
                    continue
                with lock:
                    committed.append(cur + 1)
                break

    threads = [threading.Thread(target=anyio.run, args=(loop,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(committed) == list(range(1, 801))
    assert store._threads["t"].latest == 800
