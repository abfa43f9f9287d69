"""The run lease costs no Postgres round trip of its own (issue 15), counted on the real server.

Round trips are counted as in ``test_hot_path.py``: a TCP relay in front of the real server
(``RoundTripProxy`` of ``benchmarks/_pg.py``) counts one turnaround each time the server answers
after the client sent something. A leased run's first read takes the lease in the same statement
(``LEASE_READ``) and its last checkpoint write releases it, so a leased run costs what an
unleased one costs: one round trip to load, one per checkpoint; on a new thread, on an existing
one, and when it answers a pause.

The rare second read of a folded acquisition is checked at the store level: an acquisition that
waited for the previous holder's final write (whose row lock it met) reads with a snapshot that
predates that write, and must read again; so must a take-over of a lapsed lease (but not a
holder taking its own lease again, as a background run's first read does after its claim).

Wake-ups: a release sends ``NOTIFY`` naming the first waiter in line, received by the store's
listening connection; a waiter whose refused attempt committed while the release waited for the
lease row is woken through the row's ``wanted`` flag.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from psycopg.types.numeric import Int8

from tenxgraph.core.exceptions import StaleStateError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.records import CheckpointWrite, ThreadKey
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.postgres import PostgresStore
from tenxgraph.utils import END, interrupt

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _pg import RoundTripProxy  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

STEPS = 3


def three_steps(cp: PgCheckpointer, *, pause: bool = False) -> Any:
    """``a -> b -> c``; with ``pause``, ``b`` asks a human first (``interrupt()``)."""

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            text = name
            if pause and name == "b":
                text = f"b:{interrupt({'q': 'ok?'})}"
            return Message.text_message(text, role="assistant")

        return node

    g = StateGraph()
    for name in ("a", "b", "c"):
        g.add_node(name, make(name))
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=cp)


def cfg(thread: str, strategy: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"thread_id": thread, "user_id": "u"}
    if strategy is not None:
        out["multitask_strategy"] = strategy
    return out


@pytest.fixture
def pg_proxy() -> Any:
    proxy = RoundTripProxy("127.0.0.1", 5432)
    yield proxy
    proxy.close()


async def _counted(proxy: RoundTripProxy, app: Any, data: Any, config: dict[str, Any]) -> int:
    before = proxy.snapshot()["turnarounds"]
    await app.ainvoke(data, dict(config))
    return proxy.snapshot()["turnarounds"] - before


async def _version(app: Any, config: dict[str, Any]) -> int:
    history = await app.aget_state_history(dict(config), limit=1)
    return history[0].version if history else 0


async def test_a_leased_run_costs_the_round_trips_of_an_unleased_one(
    pg_dsn: str, pg_schema: str, pg_proxy: RoundTripProxy
) -> None:
    cp = PgCheckpointer(
        pg_proxy.dsn(pg_dsn), schema=pg_schema, pool_config={"min_size": 1, "max_size": 1}
    )
    try:
        await cp.asetup()
        app = three_steps(cp)
        # warm up: psycopg prepares a statement on its 5th execution (one more round trip then)
        for i in range(8):
            for strategy in (None, "enqueue"):
                config = cfg(f"warm-{strategy}-{i}", strategy)
                await app.ainvoke({"messages": [Message.text_message("hi")]}, dict(config))
                await app.ainvoke({"messages": [Message.text_message("again")]}, dict(config))
        costs: dict[tuple[str, str | None], list[int]] = {}
        for i in range(3):
            for strategy in (None, "enqueue", "reject", "interrupt", "rollback"):
                config = cfg(f"t-{strategy}-{i}", strategy)
                msg = {"messages": [Message.text_message(f"hello {i}")]}
                fresh = await _counted(pg_proxy, app, msg, config)
                costs.setdefault(("fresh", strategy), []).append(fresh)
                msg = {"messages": [Message.text_message(f"again {i}")]}
                existing = await _counted(pg_proxy, app, msg, config)
                costs.setdefault(("existing", strategy), []).append(existing)
                # the lease was released by the last write: nothing left to release or wait for
                assert await _version(app, config) == 2 * STEPS
        # one round trip to read (and take the lease), one per step, none to release
        assert costs == {
            (kind, s): [1 + STEPS] * 3
            for kind in ("fresh", "existing")
            for s in (None, "enqueue", "reject", "interrupt", "rollback")
        }
    finally:
        await cp.aclose()


async def test_an_answer_to_a_pause_takes_the_lease_in_its_first_read(
    pg_dsn: str, pg_schema: str, pg_proxy: RoundTripProxy
) -> None:
    cp = PgCheckpointer(
        pg_proxy.dsn(pg_dsn), schema=pg_schema, pool_config={"min_size": 1, "max_size": 1}
    )
    try:
        await cp.asetup()
        app = three_steps(cp, pause=True)
        results: dict[str | None, list[tuple[int, int]]] = {}
        for i in range(8):
            for strategy in (None, "enqueue"):
                config = cfg(f"p-{strategy}-{i}", strategy)
                await app.ainvoke({"messages": [Message.text_message("hi")]}, dict(config))
                before = await _version(app, config)
                cost = await _counted(pg_proxy, app, {"resume": "yes"}, config)
                after = await _version(app, config)
                state = await app.aget_state(dict(config))
                assert [m.text() for m in state.context[-2:]] == ["b:yes", "c"]
                results.setdefault(strategy, []).append((cost, after - before))
        for strategy, rows in results.items():
            # the last rows: statements prepared; one read (with the lease) + one per write
            for cost, writes in rows[-3:]:
                assert writes > 0
                assert cost == 1 + writes, (strategy, rows)
    finally:
        await cp.aclose()


# -- the store-level second read ----------------------------------------------------------------
KEY = ThreadKey("settled", "owner")
TTL = 5.0


def _write(expected: int, *, fence: int | None, release: bool = False) -> CheckpointWrite:
    return CheckpointWrite(
        thread_id=KEY.thread_id,
        user_id=KEY.user_id,
        expected_version=expected,
        values=b'{"context_summary":null}',
        new_messages=[],
        ranges=(),
        next_seq=1,
        status="completed" if release else "running",
        history_limit=None,
        created_at=1000.0 + expected,
        fence=fence,
        release=release,
    )


class _ReadSpy:
    def __init__(self, store: PostgresStore) -> None:
        self.calls = 0
        real = store.read_since

        async def spy(*a: Any, **k: Any) -> Any:
            self.calls += 1
            return await real(*a, **k)

        store.read_since = spy  # type: ignore[method-assign]


@pytest.fixture
async def store(pg_dsn: str, pg_schema: str) -> Any:
    s = PostgresStore(pg_dsn, schema=pg_schema)
    await s.asetup()
    yield s
    await s.aclose()


async def test_a_folded_acquisition_reads_once_when_the_lease_is_free(store: PostgresStore) -> None:
    spy = _ReadSpy(store)
    grant, rec = await store.lease_read(KEY, None, "a", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert grant.fence is not None and rec is None  # a new thread: granted, nothing to read
    await store.write(_write(0, fence=grant.fence))
    await store.write(_write(1, fence=grant.fence, release=True))
    grant2, rec2 = await store.lease_read(KEY, None, "b", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert grant2.fence is not None and grant2.fence > grant.fence
    assert rec2 is not None and rec2.version == 2
    # refused: nothing read
    grant3, rec3 = await store.lease_read(KEY, None, "c", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert grant3.fence is None and rec3 is None and grant3.expires_in_s is not None
    assert spy.calls == 0


async def test_an_acquisition_that_waited_for_the_final_write_reads_that_write(
    store: PostgresStore, pg_dsn: str
) -> None:
    a, _ = await store.lease_read(KEY, None, "a", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert a.fence is not None
    await store.write(_write(0, fence=a.fence))
    spy = _ReadSpy(store)
    # Holder a's final write (version 2, releasing the lease) sent in a transaction kept open,
    # so that b's acquisition meets its row lock after b's statement took its snapshot.
    params: dict[str, Any] = {
        "thread_id": KEY.thread_id,
        "owner": KEY.user_id,
        "values": b'{"context_summary":null}',
        "ranges": [],
        "min_seq": Int8(1),
        "next_seq": Int8(1),
        "status": "completed",
        "created_at": 1002.0,
        "seqs": [],
        "datas": [],
        "fence": Int8(a.fence),
        "release": True,
        "expected": Int8(1),
        "prune_to": Int8(-1),
        "expect_seen": Int8(-1),
    }
    holder = psycopg.connect(pg_dsn)
    try:
        row = holder.execute(store._q_cas, params).fetchone()
        assert row == (2,)
        done = threading.Event()

        def commit_later() -> None:
            time.sleep(0.5)  # b's statement is waiting on the lease row by then
            holder.commit()
            done.set()

        committer = threading.Thread(target=commit_later)
        committer.start()
        b, rec = await store.lease_read(KEY, None, "b", ttl_s=TTL, lapse_s=TTL, queue=True)
        await anyio.to_thread.run_sync(committer.join)
        assert done.is_set()
    finally:
        holder.close()
    assert b.fence is not None and b.fence > a.fence
    # the statement's own read saw version 1; the release said 2: read again, once
    assert spy.calls == 1
    assert rec is not None and rec.version == 2 and rec.status == "completed"


async def test_taking_a_lapsed_lease_over_reads_again(store: PostgresStore) -> None:
    a, _ = await store.lease_read(KEY, None, "a", ttl_s=0.2, lapse_s=0.2, queue=False)
    assert a.fence is not None
    await store.write(_write(0, fence=a.fence))
    await anyio.sleep(0.4)
    spy = _ReadSpy(store)
    b, rec = await store.lease_read(KEY, None, "b", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert b.fence is not None and b.fence > a.fence
    assert spy.calls == 1  # a did not release: its last write may postdate the snapshot
    assert rec is not None and rec.version == 1
    # a's stale fence can no longer write
    with pytest.raises(StaleStateError) as info:
        await store.write(_write(1, fence=a.fence))
    assert info.value.context["fence"] == a.fence


async def test_a_holder_taking_its_own_lease_again_reads_once(store: PostgresStore) -> None:
    # A background run's worker takes the lease for the attempt's holder id, then the run's
    # first read takes it again for the same holder: not a take-over, no second read.
    a, _ = await store.lease_read(KEY, None, "h", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert a.fence is not None
    await store.write(_write(0, fence=a.fence))
    claim = await store.lease_acquire(KEY, "h", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert claim.fence is not None and claim.fence > a.fence
    spy = _ReadSpy(store)
    again, rec = await store.lease_read(KEY, None, "h", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert again.fence is not None and again.fence > claim.fence
    assert spy.calls == 0
    assert rec is not None and rec.version == 1


# -- wake-ups: a release notifies the first waiter in line -------------------------------------


async def test_a_release_wakes_the_first_waiter_only(store: PostgresStore) -> None:
    a = await store.lease_acquire(KEY, "a", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert a.fence is not None
    first = await store.lease_waiter(KEY, "w1")
    second = await store.lease_waiter(KEY, "w2")
    assert first is not None and second is not None and first.live
    for holder in ("w1", "w2"):  # queued in this order
        refused = await store.lease_acquire(KEY, holder, ttl_s=TTL, lapse_s=TTL, queue=True)
        assert refused.fence is None
    await store.lease_release(KEY, "a", a.fence)
    assert await first.wait(30.0)  # woken by the NOTIFY (30 s: only a bound, never reached)
    assert first.woken_at is None and not await second.wait(0.0)
    w1 = await store.lease_acquire(KEY, "w1", ttl_s=TTL, lapse_s=TTL, queue=True)
    assert w1.fence is not None
    # w1's last checkpoint write releases the lease (the folded release): w2 is named next
    await store.write(_write(0, fence=w1.fence, release=True))
    assert await second.wait(30.0)
    first.close()
    second.close()


async def test_a_waiter_queued_while_the_release_waited_is_still_woken(
    store: PostgresStore, pg_dsn: str
) -> None:
    # The waiter's refused attempt holds the lease row when the release arrives: the release
    # waits for it, and its snapshot of lease_waiters predates the waiter's row. The row's
    # ``wanted`` flag, read after the wait, makes the release notify all the same.
    a = await store.lease_acquire(KEY, "a", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert a.fence is not None
    waiter = await store.lease_waiter(KEY, "w")
    assert waiter is not None and waiter.live
    rendered = store._q["LEASE_ACQUIRE"]
    conn = psycopg.connect(pg_dsn)
    try:
        row = conn.execute(
            rendered,
            {
                "thread_id": KEY.thread_id,
                "owner": KEY.user_id,
                "holder": "w",
                "ttl_s": TTL,
                "lapse_s": TTL,
                "queue": True,
            },
        ).fetchone()
        assert row is not None and row[0] is None  # refused, queued, transaction still open

        def commit_later() -> None:
            time.sleep(0.5)  # the release is waiting on the lease row by then
            conn.commit()

        committer = threading.Thread(target=commit_later)
        committer.start()
        await store.lease_release(KEY, "a", a.fence)
        await anyio.to_thread.run_sync(committer.join)
    finally:
        conn.close()
    assert await waiter.wait(30.0)
    waiter.close()
