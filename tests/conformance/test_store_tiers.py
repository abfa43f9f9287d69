"""Tier-level conformance: every source of truth (and cache stack over one) keeps the storage
promises of docs/guarantees.md with exact values.

Writes are built the way the facade builds them: real :class:`Message` objects encoded with
:mod:`tenxgraph.storage.serde`, ranges of per-thread seqs, ``expected_version`` for the CAS.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
import pytest

from tenxgraph.core.exceptions import LedgerWriteError, StaleStateError, StorageError
from tenxgraph.core.state import Message
from tenxgraph.records import (
    CheckpointWrite,
    LedgerEntry,
    Range,
    ThreadKey,
    expand_ranges,
    ranges_len,
)
from tenxgraph.storage import serde
from tenxgraph.storage.base import StoreTier

pytestmark = pytest.mark.anyio

OWNER = "alice-0b5e"
OTHER = "mallory-77"
TID = "thread-1"
KEY = ThreadKey(TID, OWNER)
FORBIDDEN = "STORAGE_FORBIDDEN_001"


# -- helpers --------------------------------------------------------------------------------------
def blob(text: str) -> bytes:
    """A real encoded message whose id and text are ``text``."""
    msg = Message.text_message(text, role="user", message_id=text)
    msg.timestamp = 1_700_000_000.0
    return serde.encode_message(msg)


def values(step: int, **extra: object) -> bytes:
    """Encoded state values (every field but ``context``)."""
    return serde.dumps({"context_summary": None, "step": step, **extra})


def write(
    expected: int,
    new: list[tuple[int, bytes]],
    ranges: tuple[Range, ...],
    next_seq: int,
    *,
    thread_id: str = TID,
    user_id: str = OWNER,
    vals: bytes | None = None,
    history_limit: int | None = None,
    status: str = "running",
    created_at: float | None = None,
) -> CheckpointWrite:
    """A :class:`CheckpointWrite` with explicit rows and ranges."""
    return CheckpointWrite(
        thread_id=thread_id,
        user_id=user_id,
        expected_version=expected,
        values=values(expected + 1) if vals is None else vals,
        new_messages=new,
        ranges=ranges,
        next_seq=next_seq,
        status=status,
        history_limit=history_limit,
        created_at=1000.0 + expected if created_at is None else created_at,
    )


def _coalesce(seqs: list[int]) -> tuple[Range, ...]:
    out: list[Range] = []
    for s in seqs:
        if out and out[-1][1] == s:
            out[-1] = (out[-1][0], s + 1)
        else:
            out.append((s, s + 1))
    return tuple(out)


@dataclass
class Tracker:
    """Follows one thread as a single writer would, and remembers what each version holds."""

    store: StoreTier
    thread_id: str = TID
    user_id: str = OWNER
    history_limit: int | None = None
    version: int = 0
    ranges: tuple[Range, ...] = ()
    next_seq: int = 1
    rows: dict[int, bytes] = field(default_factory=dict)
    expected: dict[int, list[bytes]] = field(default_factory=dict)
    vals: dict[int, bytes] = field(default_factory=dict)

    @property
    def key(self) -> ThreadKey:
        return ThreadKey(self.thread_id, self.user_id)

    async def append(self, *texts: str, status: str = "running") -> CheckpointWrite:
        """Write the next version with ``texts`` appended (one new row per text)."""
        start = self.next_seq
        new = [(start + i, blob(t)) for i, t in enumerate(texts)]
        seqs = expand_ranges(self.ranges) + [s for s, _ in new]
        return await self._write(new, _coalesce(seqs), start + len(new), status)

    async def replace(self, keep: list[int], *texts: str) -> CheckpointWrite:
        """Write the next version whose list is the kept seqs ``keep`` (any order) followed
        by new messages ``texts`` (replace_messages style)."""
        start = self.next_seq
        new = [(start + i, blob(t)) for i, t in enumerate(texts)]
        return await self._write(new, _coalesce(keep + [s for s, _ in new]), start + len(new))

    async def _write(
        self,
        new: list[tuple[int, bytes]],
        ranges: tuple[Range, ...],
        next_seq: int,
        status: str = "running",
    ) -> CheckpointWrite:
        w = write(
            self.version,
            new,
            ranges,
            next_seq,
            thread_id=self.thread_id,
            user_id=self.user_id,
            history_limit=self.history_limit,
            status=status,
        )
        rec = await self.store.write(w)
        assert rec.version == self.version + 1
        self.version += 1
        self.ranges, self.next_seq = ranges, next_seq
        self.rows.update(new)
        self.expected[self.version] = [self.rows[s] for s in expand_ranges(ranges)]
        self.vals[self.version] = w.values
        return w

    async def check(self, version: int) -> None:
        """Version ``version`` reconstructs exactly."""
        rec = await self.store.read(self.key, version)
        assert rec is not None, f"version {version} missing"
        assert rec.version == version
        assert rec.messages == self.expected[version]
        assert rec.values == self.vals[version]
        assert ranges_len(rec.ranges) == len(self.expected[version])


async def versions(store: StoreTier, key: ThreadKey = KEY, **kw: int | None) -> list[int]:
    return [r.version for r in await store.history(key, **kw)]


# -- protocol and basics --------------------------------------------------------------------------
async def test_implements_the_protocol(store: StoreTier) -> None:
    assert isinstance(store, StoreTier)
    assert isinstance(store.name, str) and store.name


async def test_missing_thread_reads_as_none(store: StoreTier) -> None:
    assert await store.read(KEY) is None
    assert await store.read(KEY, 1) is None
    assert await store.read(KEY, with_messages=False) is None
    assert await store.current_version(KEY) is None
    assert await store.history(KEY) == []
    assert await store.get_stop(KEY) is False
    assert await store.ledger_get(KEY, "k") is None
    assert await store.ledger_count(KEY) == 0
    assert await store.delete_thread(KEY) is False


async def test_versions_are_1_to_n_without_gaps(store: StoreTier) -> None:
    t = Tracker(store)
    for i in range(1, 6):
        await t.append(f"m{i}")
        assert await store.current_version(KEY) == i
    for v in range(1, 6):
        await t.check(v)
        rec = await store.read(KEY, v, with_messages=False)
        assert rec is not None
        assert (rec.version, rec.ranges, rec.next_seq, rec.messages) == (
            v,
            ((1, v + 1),),
            v + 1,
            None,
        )
        assert (rec.thread_id, rec.status, rec.created_at) == (TID, "running", 1000.0 + v - 1)
    latest = await store.read(KEY)
    assert latest is not None and latest.version == 5
    assert latest.messages == [blob(f"m{i}") for i in range(1, 6)]
    assert await versions(store) == [5, 4, 3, 2, 1]


async def test_write_returns_the_new_record(store: StoreTier) -> None:
    w = write(0, [(1, blob("a")), (2, blob("b"))], ((1, 3),), 3, status="completed")
    rec = await store.write(w)
    assert (rec.thread_id, rec.version, rec.values) == (TID, 1, w.values)
    assert (rec.ranges, rec.next_seq, rec.status, rec.created_at) == (
        ((1, 3),),
        3,
        "completed",
        1000.0,
    )
    assert rec.messages in (None, [blob("a"), blob("b")])


# -- compare-and-swap -----------------------------------------------------------------------------
async def test_cas_loser_raises_stale_and_leaves_no_trace(store: StoreTier) -> None:
    t = Tracker(store)
    await t.append("m1")
    await t.append("m2")
    loser = write(1, [(3, blob("LOSER"))], ((1, 4),), 4, vals=values(99, who="loser"))
    with pytest.raises(StaleStateError) as info:
        await store.write(loser)
    err = info.value
    assert err.error_code == "STORAGE_CONFLICT_000"
    assert err.context == {"thread_id": TID, "expected_version": 1, "current_version": 2}
    assert str(err).startswith("[STORAGE_CONFLICT_000]")
    # Nothing of the loser is visible: version, checkpoint row, values, message rows.
    assert await store.current_version(KEY) == 2
    assert await store.read(KEY, 3) is None
    assert await versions(store) == [2, 1]
    await t.check(2)
    await t.check(1)
    # The loser's seq 3 was never stored: the winner can use it and reads its own row back.
    await t.append("WINNER")
    rec = await store.read(KEY)
    assert rec is not None and rec.version == 3
    assert rec.messages == [blob("m1"), blob("m2"), blob("WINNER")]


@pytest.mark.parametrize(
    ("expected", "current"),
    [(0, 2), (1, 2), (3, 2), (7, 2)],
    ids=["zero", "behind", "ahead", "far"],
)
async def test_stale_context_for_any_wrong_expected_version(
    store: StoreTier, expected: int, current: int
) -> None:
    t = Tracker(store)
    await t.append("m1")
    await t.append("m2")
    with pytest.raises(StaleStateError) as info:
        await store.write(write(expected, [(3, blob("x"))], ((1, 4),), 4))
    assert info.value.context == {
        "thread_id": TID,
        "expected_version": expected,
        "current_version": current,
    }
    await t.check(2)
    assert await versions(store) == [2, 1]


async def test_expected_version_on_a_missing_thread_is_stale_with_none(store: StoreTier) -> None:
    with pytest.raises(StaleStateError) as info:
        await store.write(write(4, [(1, blob("x"))], ((1, 2),), 2))
    assert info.value.context == {"thread_id": TID, "expected_version": 4, "current_version": None}
    assert await store.read(KEY) is None
    assert await store.current_version(KEY) is None
    assert await store.list_threads(OWNER) == []


async def _race(
    store: StoreTier, writes: list[CheckpointWrite]
) -> tuple[list[int], list[Exception]]:
    won: list[int] = []
    lost: list[Exception] = []

    async def one(i: int) -> None:
        try:
            await store.write(writes[i])
            won.append(i)
        except StaleStateError as exc:
            lost.append(exc)

    async with anyio.create_task_group() as tg:
        for i in range(len(writes)):
            tg.start_soon(one, i)
    return won, lost


async def test_create_race_has_exactly_one_winner(store: StoreTier) -> None:
    writes = [
        write(0, [(1, blob(f"first-{i}"))], ((1, 2),), 2, vals=values(1, writer=i))
        for i in range(8)
    ]
    won, lost = await _race(store, writes)
    assert len(won) == 1 and len(lost) == 7
    for exc in lost:
        assert exc.context == {"thread_id": TID, "expected_version": 0, "current_version": 1}
    rec = await store.read(KEY)
    assert rec is not None and rec.version == 1
    assert rec.values == writes[won[0]].values
    assert rec.messages == [blob(f"first-{won[0]}")]
    assert await versions(store) == [1]


async def test_update_race_has_exactly_one_winner(store: StoreTier) -> None:
    t = Tracker(store)
    await t.append("m1")
    writes = [
        write(1, [(2, blob(f"second-{i}"))], ((1, 3),), 3, vals=values(2, writer=i))
        for i in range(8)
    ]
    won, lost = await _race(store, writes)
    assert len(won) == 1 and len(lost) == 7
    assert {(e.context["expected_version"], e.context["current_version"]) for e in lost} == {(1, 2)}
    rec = await store.read(KEY)
    assert rec is not None and rec.version == 2
    assert rec.values == writes[won[0]].values
    assert rec.messages == [blob("m1"), blob(f"second-{won[0]}")]


# -- history and pruning --------------------------------------------------------------------------
@pytest.mark.parametrize("limit", [1, 3, 20])
async def test_history_limit_keeps_exactly_the_newest(store: StoreTier, limit: int) -> None:
    t = Tracker(store, history_limit=limit)
    n = 25
    for i in range(1, n + 1):
        await t.append(f"m{i}")
        assert await versions(store) == list(range(i, max(i - limit, 0), -1))
    for v in range(1, n - limit + 1):
        assert await store.read(KEY, v) is None
    for v in range(n - limit + 1, n + 1):
        await t.check(v)


@pytest.mark.parametrize("limit", [0, None])
async def test_history_limit_zero_or_none_keeps_all(store: StoreTier, limit: int | None) -> None:
    t = Tracker(store, history_limit=limit)
    for i in range(1, 31):
        await t.append(f"m{i}")
    assert await versions(store) == list(range(30, 0, -1))
    for v in (1, 2, 15, 30):
        await t.check(v)


async def test_versions_before_a_replace_still_reconstruct(store: StoreTier) -> None:
    t = Tracker(store, history_limit=3)
    await t.append("a", "b", "c")  # v1: seqs 1,2,3
    await t.replace([3, 1], "d", "e")  # v2: c, a, d, e -> ranges (3,4),(1,2),(4,6)
    assert t.ranges == ((3, 4), (1, 2), (4, 6))
    await t.append("f")  # v3
    for v in (1, 2, 3):
        await t.check(v)
    assert (await store.read(KEY, 2)).messages == [blob(x) for x in "cade"]  # type: ignore[union-attr]
    await t.replace([], "x", "y")  # v4: a jump to a new seq set (7, 8)
    assert t.ranges == ((7, 9),)
    await t.append("z")  # v5; v2 pruned, v3 (reaching seq 1) still kept
    await t.check(3)
    await t.check(4)
    await t.check(5)
    await t.append("w")  # v6; only v4..v6 kept: rows below seq 7 unreachable
    assert await versions(store) == [6, 5, 4]
    for v in (4, 5, 6):
        await t.check(v)
    assert (await store.read(KEY)).messages == [blob(x) for x in "xyzw"]  # type: ignore[union-attr]
    # Seqs are never reused, so new rows after pruning do not collide with pruned ones.
    await t.replace([10, 7], "v")
    await t.check(7)


async def test_random_appends_and_replaces_always_reconstruct(store: StoreTier) -> None:
    rng = random.Random(20240517)
    t = Tracker(store, history_limit=4)
    await t.append("seed-0", "seed-1")
    for step in range(40):
        if rng.random() < 0.7:
            await t.append(*[f"s{step}-{i}" for i in range(rng.randint(0, 3))])
        else:
            current = expand_ranges(t.ranges)
            keep = rng.sample(current, k=rng.randint(0, len(current)))
            await t.replace(keep, *[f"r{step}-{i}" for i in range(rng.randint(0, 2))])
        kept = await store.history(t.key)
        assert [r.version for r in kept] == list(range(t.version, max(t.version - 4, 0), -1))
        for rec in kept:
            assert rec.messages == t.expected[rec.version], f"step {step} v{rec.version}"


async def test_history_newest_first_with_limit_and_before(store: StoreTier) -> None:
    t = Tracker(store)
    for i in range(1, 7):
        await t.append(f"m{i}")
    assert await versions(store) == [6, 5, 4, 3, 2, 1]
    assert await versions(store, limit=2) == [6, 5]
    assert await versions(store, before=4) == [3, 2, 1]
    assert await versions(store, before=4, limit=2) == [3, 2]
    assert await versions(store, before=1) == []
    assert await versions(store, before=100, limit=1) == [6]
    assert await versions(store, limit=0) == []
    for rec in await store.history(KEY, before=5):
        assert rec.messages == t.expected[rec.version]
        assert rec.values == t.vals[rec.version]
        assert rec.ranges == ((1, rec.version + 1),)


async def test_two_hundred_versions_write_one_row_each(store: StoreTier) -> None:
    t = Tracker(store, history_limit=20)
    for i in range(1, 201):
        w = await t.append(f"m{i}")
        assert [seq for seq, _ in w.new_messages] == [i]
        rec = await store.read(KEY, with_messages=False)
        assert rec is not None
        # Each write consumed exactly one new seq and extended the one range by one.
        assert (rec.version, rec.ranges, rec.next_seq) == (i, ((1, i + 1),), i + 1)
    latest = await store.read(KEY)
    assert latest is not None and latest.messages == [blob(f"m{i}") for i in range(1, 201)]
    assert await versions(store) == list(range(200, 180, -1))
    await t.check(181)


# -- readers never see a half-written version -----------------------------------------------------
async def test_readers_never_see_a_partial_version(store: StoreTier) -> None:
    t = Tracker(store, history_limit=5)
    await t.append("m0")
    done = anyio.Event()
    seen: set[int] = set()

    def expect(v: int) -> list[bytes]:
        return [blob("m0")] + [blob(f"{x}{i}") for i in range(1, v) for x in "abc"]

    async def reader() -> None:
        while not done.is_set():
            rec = await store.read(KEY)
            assert rec is not None
            assert rec.messages == expect(rec.version)
            assert rec.ranges == ((1, 3 * rec.version - 1),)
            seen.add(rec.version)
            await anyio.lowlevel.checkpoint()

    async def writer() -> None:
        for i in range(1, 31):
            await t.append(f"a{i}", f"b{i}", f"c{i}")
            # A store's write may not yield at all (the memory store yields once per ms of
            # work): give the readers their turn between versions, however fast writes are.
            await anyio.lowlevel.checkpoint()
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(reader)
        tg.start_soon(writer)
    assert max(seen) >= 1


# -- user isolation -------------------------------------------------------------------------------
def _assert_forbidden(exc: BaseException) -> None:
    assert isinstance(exc, StorageError)
    assert exc.error_code == FORBIDDEN
    assert exc.context == {"thread_id": TID}
    assert OWNER not in str(exc) and OWNER not in repr(exc.context)


async def test_owner_isolation(store: StoreTier) -> None:
    t = Tracker(store)
    await t.append("secret-1", "secret-2")
    await store.ledger_put(KEY, LedgerEntry("ck", "call-1", "search", b'{"r":1}', 5.0))
    await store.set_thread_metadata(KEY, {"title": "mine"})
    other = ThreadKey(TID, OTHER)

    # Reads: exactly as if the thread did not exist.
    assert await store.read(other) is None
    assert await store.read(other, 1) is None
    assert await store.read(other, with_messages=False) is None
    assert await store.current_version(other) is None
    assert await store.history(other) == []
    assert await store.get_stop(other) is False
    assert await store.list_threads(OTHER) == []

    # Writes, deletes, ledger access and flags: forbidden, owner not revealed.
    attempts = [
        lambda: store.write(write(0, [(1, blob("x"))], ((1, 2),), 2, user_id=OTHER)),
        lambda: store.write(write(1, [(3, blob("x"))], ((1, 4),), 4, user_id=OTHER)),
        lambda: store.write(write(5, [(3, blob("x"))], ((1, 4),), 4, user_id=OTHER)),
        lambda: store.delete_thread(other),
        lambda: store.ledger_put(other, LedgerEntry("ck", "call-1", "search", b'{"r":2}', 6.0)),
        lambda: store.ledger_put(other, LedgerEntry("ck2", "call-2", "search", b'{"r":3}', 6.0)),
        lambda: store.ledger_get(other, "ck"),
        lambda: store.ledger_count(other),
        lambda: store.set_stop(other, True),
        lambda: store.set_thread_metadata(other, {"title": "theirs"}),
    ]
    for attempt in attempts:
        with pytest.raises(StorageError) as info:
            await attempt()
        _assert_forbidden(info.value)

    # The owner's data is unchanged.
    await t.check(1)
    assert await versions(store) == [1]
    assert await store.get_stop(KEY) is False
    assert await store.ledger_count(KEY) == 1
    entry = await store.ledger_get(KEY, "ck")
    assert entry is not None and entry.result == b'{"r":1}'
    [info_] = await store.list_threads(OWNER)
    assert (info_.thread_id, info_.version, info_.metadata) == (TID, 1, {"title": "mine"})


async def test_same_thread_id_for_another_user_after_delete(store: StoreTier) -> None:
    await Tracker(store).append("alice's")
    assert await store.delete_thread(KEY) is True
    t = Tracker(store, user_id=OTHER)
    await t.append("mallory's")
    await t.check(1)
    assert await store.read(KEY) is None


async def test_threads_are_isolated_from_each_other(store: StoreTier) -> None:
    a = Tracker(store, thread_id="ta")
    b = Tracker(store, thread_id="tb")
    await a.append("a1")
    await b.append("b1", "b2")
    await a.append("a2")
    await a.check(2)
    await b.check(1)
    await store.ledger_put(a.key, LedgerEntry("ck", "c", "tool", b"1", 1.0))
    assert await store.ledger_get(b.key, "ck") is None
    assert await store.ledger_count(b.key) == 0
    await store.set_stop(a.key, True)
    assert await store.get_stop(b.key) is False
    assert await store.delete_thread(a.key) is True
    await b.check(1)


# -- ledger ---------------------------------------------------------------------------------------
async def test_ledger_put_get_count(store: StoreTier) -> None:
    await Tracker(store).append("m1")
    entry = LedgerEntry("call-1:ab12", "call-1", "get_weather", serde.dumps({"t": "sunny"}), 12.5)
    won = await store.ledger_put(KEY, entry)
    assert won == entry
    got = await store.ledger_get(KEY, "call-1:ab12")
    assert got == entry
    assert await store.ledger_get(KEY, "call-1:other") is None
    assert await store.ledger_count(KEY) == 1
    # A second put for the same key keeps the first.
    again = LedgerEntry("call-1:ab12", "call-1", "get_weather", b'"rainy"', 13.0)
    assert await store.ledger_put(KEY, again) == entry
    assert await store.ledger_get(KEY, "call-1:ab12") == entry
    await store.ledger_put(KEY, LedgerEntry("call-2:cd34", "call-2", "search", b"[]", 14.0))
    assert await store.ledger_count(KEY) == 2


async def test_ledger_put_race_returns_the_winner(store: StoreTier) -> None:
    await Tracker(store).append("m1")
    entries = [
        LedgerEntry("ck", "call-1", "tool", serde.dumps({"attempt": i}), float(i)) for i in range(8)
    ]
    results: list[LedgerEntry] = []

    async def put(e: LedgerEntry) -> None:
        results.append(await store.ledger_put(KEY, e))

    async with anyio.create_task_group() as tg:
        for e in entries:
            tg.start_soon(put, e)
    winner = results[0]
    assert winner in entries
    assert results == [winner] * 8
    assert await store.ledger_get(KEY, "ck") == winner
    assert await store.ledger_count(KEY) == 1


async def test_ledger_put_on_a_missing_thread_fails(store: StoreTier) -> None:
    with pytest.raises(LedgerWriteError) as info:
        await store.ledger_put(KEY, LedgerEntry("ck", "call-1", "tool", b"1", 1.0))
    assert info.value.error_code == "STORAGE_LEDGER_001"
    assert info.value.context == {"thread_id": TID, "tool_call_id": "call-1", "tool": "tool"}
    assert await store.ledger_count(KEY) == 0


# -- deletion, listing, metadata, stop flags ------------------------------------------------------
async def test_delete_thread_removes_everything(store: StoreTier) -> None:
    t = Tracker(store, history_limit=3)
    for i in range(5):
        await t.append(f"m{i}")
    await store.ledger_put(KEY, LedgerEntry("ck", "c", "tool", b"1", 1.0))
    await store.set_stop(KEY, True)
    await store.set_thread_metadata(KEY, {"a": 1})
    assert await store.delete_thread(KEY) is True
    assert await store.read(KEY) is None
    for v in range(1, 6):
        assert await store.read(KEY, v) is None
    assert await store.history(KEY) == []
    assert await store.current_version(KEY) is None
    assert await store.ledger_get(KEY, "ck") is None
    assert await store.ledger_count(KEY) == 0
    assert await store.get_stop(KEY) is False
    assert await store.list_threads(OWNER) == []
    assert await store.delete_thread(KEY) is False
    # Re-created from scratch: version 1, no old rows, flags, ledger or metadata.
    t2 = Tracker(store)
    await t2.append("fresh")
    await t2.check(1)
    assert await store.ledger_count(KEY) == 0
    assert await store.get_stop(KEY) is False
    [info] = await store.list_threads(OWNER)
    assert (info.version, info.metadata) == (1, {})


async def test_list_threads_most_recent_first(store: StoreTier) -> None:
    times = {"t-a": [10.0, 40.0], "t-b": [20.0], "t-c": [5.0, 30.0, 35.0]}
    for tid, stamps in times.items():
        nxt = 1
        for v, ts in enumerate(stamps):
            status = "completed" if v == len(stamps) - 1 else "running"
            w = write(
                v,
                [(nxt, blob(f"{tid}-{v}"))],
                ((1, nxt + 1),),
                nxt + 1,
                thread_id=tid,
                created_at=ts,
                status=status,
            )
            await store.write(w)
            nxt += 1
    await store.write(
        write(
            0, [(1, blob("x"))], ((1, 2),), 2, thread_id="t-other", user_id=OTHER, created_at=50.0
        )
    )
    infos = await store.list_threads(OWNER)
    assert [
        (i.thread_id, i.user_id, i.version, i.status, i.created_at, i.updated_at, i.metadata)
        for i in infos
    ] == [
        ("t-a", OWNER, 2, "completed", 10.0, 40.0, {}),
        ("t-c", OWNER, 3, "completed", 5.0, 35.0, {}),
        ("t-b", OWNER, 1, "completed", 20.0, 20.0, {}),
    ]
    assert [i.thread_id for i in await store.list_threads(OWNER, limit=2)] == ["t-a", "t-c"]
    assert [i.thread_id for i in await store.list_threads(OWNER, limit=2, offset=1)] == [
        "t-c",
        "t-b",
    ]
    assert [i.thread_id for i in await store.list_threads(OWNER, offset=3)] == []
    assert [i.thread_id for i in await store.list_threads(OTHER)] == ["t-other"]
    assert [i.thread_id for i in await store.list_threads("*")] == ["t-other", "t-a", "t-c", "t-b"]


async def test_thread_metadata(store: StoreTier) -> None:
    await Tracker(store).append("m1")
    meta = {"title": "Trip to Köln", "tags": ["a", "b"], "n": 3, "nested": {"x": None}}
    await store.set_thread_metadata(KEY, meta)
    [info] = await store.list_threads(OWNER)
    assert info.metadata == meta
    await store.set_thread_metadata(KEY, {"title": "renamed"})
    [info] = await store.list_threads(OWNER)
    assert info.metadata == {"title": "renamed"}
    with pytest.raises(StorageError) as missing:
        await store.set_thread_metadata(ThreadKey("nope", OWNER), {"a": 1})
    assert missing.value.error_code == "STORAGE_NOT_FOUND_000"


async def test_stop_flags(store: StoreTier) -> None:
    await Tracker(store).append("m1")
    assert await store.get_stop(KEY) is False
    await store.set_stop(KEY, True)
    assert await store.get_stop(KEY) is True
    await store.set_stop(KEY, True)
    assert await store.get_stop(KEY) is True
    await store.set_stop(KEY, False)
    assert await store.get_stop(KEY) is False
    # Requests are timed: `since` (a run's start) filters out older ones; the newest is kept.
    await store.set_stop(KEY, True, at=100.0)
    await store.set_stop(KEY, True, at=50.0)
    assert await store.get_stop(KEY, since=100.0) is True
    assert await store.get_stop(KEY, since=100.5) is False
    assert await store.get_stop(KEY) is True
    # A request for a thread without a checkpoint yet is kept (its first run can be stopped),
    # for its requester only; the first writer of the thread still owns it.
    nope = ThreadKey("nope", OWNER)
    await store.set_stop(nope, True, at=200.0)
    assert await store.get_stop(nope, since=199.0) is True
    assert await store.get_stop(ThreadKey("nope", OTHER)) is False
    await Tracker(store, thread_id="nope").append("m1")
    assert await store.get_stop(nope, since=199.0) is True
    assert await store.get_stop(ThreadKey("nope", OTHER)) is False
    await store.set_stop(nope, False)
    assert await store.get_stop(nope) is False


# -- encoding -------------------------------------------------------------------------------------
async def test_blobs_round_trip_byte_exact(store: StoreTier) -> None:
    text = 'nul:\x00 | ümlaut ß | 日本語 | emoji 🎉 | quote " backslash \\ | \u2028'
    msg = Message.text_message(text, role="assistant", message_id="m-nul")
    data = serde.encode_message(msg)
    assert b"\\u0000" in data and "日本語".encode() in data
    vals = serde.dumps({"note": "nul \x00 ∑", "raw": b"\x00\xff\x01"})
    assert b"\\u0000" in vals
    await store.write(write(0, [(1, data)], ((1, 2),), 2, vals=vals))
    rec = await store.read(KEY)
    assert rec is not None
    assert rec.messages == [data] and rec.values == vals
    assert serde.decode_message(rec.messages[0]) == msg
    assert serde.loads(rec.values) == {"note": "nul \x00 ∑", "raw": b"\x00\xff\x01"}
    [hist] = await store.history(KEY)
    assert hist.messages == [data] and hist.values == vals
    entry = LedgerEntry("ck\x00é", "call-é", "tool", serde.dumps("résultat \x00"), 1.0)
    await store.ledger_put(KEY, entry)
    assert await store.ledger_get(KEY, "ck\x00é") == entry


async def test_unicode_thread_and_user_ids(store: StoreTier) -> None:
    key = ThreadKey("thread-ü-日本-" + "x" * 200, "user-é")
    t = Tracker(store, thread_id=key.thread_id, user_id=key.user_id)
    await t.append("hello")
    await t.check(1)
    assert [i.thread_id for i in await store.list_threads("user-é")] == [key.thread_id]
