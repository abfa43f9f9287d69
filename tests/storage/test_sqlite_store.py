"""SQLite-specific behaviour the protocol suite cannot see: schema versioning and migration,
row-level pruning, blob storage, lock translation, statement counts, connection lifecycle."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tenxgraph.core.exceptions import (
    LedgerWriteError,
    SchemaVersionError,
    StorageError,
    TransientStorageError,
)
from tenxgraph.records import CheckpointWrite, LedgerEntry, Range, ThreadKey
from tenxgraph.storage import _sqlite_sql as q
from tenxgraph.storage import serde
from tenxgraph.storage.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

KEY = ThreadKey("t", "u")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def db(tmp_path: Path) -> str:
    return os.fspath(tmp_path / "t.db")


@pytest.fixture
async def store(db: str) -> AsyncIterator[SqliteStore]:
    st = SqliteStore(db)
    await st.asetup()
    try:
        yield st
    finally:
        await st.aclose()


def raw(db: str) -> sqlite3.Connection:
    return sqlite3.connect(db, isolation_level=None)


def cw(
    expected: int,
    new: list[tuple[int, bytes]],
    ranges: tuple[Range, ...],
    next_seq: int,
    limit: int | None = None,
) -> CheckpointWrite:
    return CheckpointWrite(
        "t", "u", expected, serde.dumps({"v": expected + 1}), new, ranges, next_seq, "running",
        limit, 1.0 + expected,
    )  # fmt: skip


async def append_n(store: SqliteStore, n: int, limit: int | None = None, start: int = 0) -> None:
    for v in range(start, start + n):
        await store.write(cw(v, [(v + 1, b'"m%d"' % (v + 1))], ((1, v + 2),), v + 2, limit))


# -- schema ---------------------------------------------------------------------------------------
async def test_schema_has_versions_1_to_8_and_the_documented_tables(
    store: SqliteStore, db: str
) -> None:
    with raw(db) as c:
        assert [r[0] for r in c.execute("SELECT version FROM schema_version ORDER BY 1")] == [
            1,
            2,
            3,
            4,
            5,
            6,
            7,
            8,
        ]
        cols = {
            t: [r[1] for r in c.execute(f"PRAGMA table_info({t})")]
            for t in (
                "threads",
                "checkpoints",
                "messages",
                "tool_executions",
                "stop_requests",
                "cache_values",
                "thread_leases",
                "lease_waiters",
                "runs",
            )
        }
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert cols["threads"] == [
        "thread_id", "owner", "version", "status", "created_at", "updated_at", "metadata",
        "stop_requested", "ttl_s",
    ]  # fmt: skip
    assert cols["checkpoints"] == [
        "thread_id", "version", "values", "ranges", "next_seq", "min_seq", "status", "created_at",
    ]  # fmt: skip
    assert cols["messages"] == ["thread_id", "seq", "data"]
    assert cols["tool_executions"] == [
        "thread_id", "call_key", "tool_call_id", "tool_name", "result", "created_at",
    ]  # fmt: skip
    assert cols["stop_requests"] == ["thread_id", "owner", "requested_at"]
    assert cols["cache_values"] == ["namespace", "key", "value", "expires_at"]
    assert cols["thread_leases"] == ["thread_id", "owner", "holder", "fence", "expires_at"]
    assert cols["lease_waiters"] == ["thread_id", "waiter", "arrived_at", "seen_at"]
    assert cols["runs"] == [
        "thread_id", "run_id", "owner", "status", "input", "config", "attempts", "crashes",
        "holder", "worker", "last_error", "output", "created_at", "updated_at",
    ]  # fmt: skip
    assert q.LATEST_SCHEMA_VERSION == 8


async def test_setup_is_idempotent_across_stores(db: str) -> None:
    stores = [SqliteStore(db) for _ in range(3)]
    for st in stores:
        await st.asetup()
        await st.asetup()
    await append_n(stores[0], 2)
    assert await stores[2].current_version(KEY) == 2
    for st in stores:
        await st.aclose()
    with raw(db) as c:
        assert c.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 8


async def test_a_newer_schema_is_refused(db: str) -> None:
    st = SqliteStore(db)
    await st.asetup()
    await st.aclose()
    with raw(db) as c:
        c.execute(
            "INSERT INTO schema_version (version, applied_at) VALUES (?, 0)",
            (q.LATEST_SCHEMA_VERSION + 1,),
        )
    for call in ("asetup", "read"):  # explicit setup, and the lazy setup of a first operation
        fresh = SqliteStore(db)
        with pytest.raises(SchemaVersionError) as info:
            await (fresh.asetup() if call == "asetup" else fresh.read(KEY))
        assert info.value.error_code == "STORAGE_SCHEMA_001"
        assert info.value.context == {
            "found": q.LATEST_SCHEMA_VERSION + 1,
            "supported": q.LATEST_SCHEMA_VERSION,
        }
        await fresh.aclose()


async def test_migrates_a_version_2_database(db: str) -> None:
    with raw(db) as c:
        c.execute(q.CREATE_SCHEMA_VERSION)
        for version, steps in enumerate(q.MIGRATIONS[:2], start=1):
            for stmt in steps:
                c.execute(stmt)
            c.execute(q.INSERT_SCHEMA_VERSION, (version, 0.0))
        c.execute(
            "INSERT INTO threads (thread_id, owner, version, status, created_at, updated_at)"
            " VALUES ('t', 'u', 1, 'completed', 1.0, 1.0)"
        )
        c.execute(
            "INSERT INTO checkpoints VALUES ('t', 1, x'7b7d', '[[1,2]]', 2, 1, 'completed', 1.0)"
        )
        c.execute("INSERT INTO messages VALUES ('t', 1, x'226122')")
    st = SqliteStore(db)
    await st.asetup()
    rec = await st.read(KEY)
    assert rec is not None and rec.messages == [b'"a"'] and rec.values == b"{}"
    entry = LedgerEntry("ck", "c1", "tool", b"1", 2.0)
    assert await st.ledger_put(KEY, entry) == entry
    await st.aclose()
    with raw(db) as c:
        assert [r[0] for r in c.execute("SELECT version FROM schema_version ORDER BY 1")] == list(
            range(1, q.LATEST_SCHEMA_VERSION + 1)
        )


# -- storage layout -------------------------------------------------------------------------------
async def test_blobs_are_stored_as_blobs(store: SqliteStore, db: str) -> None:
    await store.write(cw(0, [(1, b'"nul \\u0000 \xc3\xa9"')], ((1, 2),), 2))
    await store.ledger_put(KEY, LedgerEntry("ck", "c", "tool", b'"r"', 1.0))
    with raw(db) as c:
        assert c.execute('SELECT typeof("values"), typeof(ranges) FROM checkpoints').fetchone() == (
            "blob",
            "text",
        )
        assert c.execute("SELECT typeof(data), data FROM messages").fetchone() == (
            "blob",
            b'"nul \\u0000 \xc3\xa9"',
        )
        assert c.execute("SELECT typeof(result) FROM tool_executions").fetchone() == ("blob",)


async def test_pruning_deletes_versions_and_unreachable_rows(store: SqliteStore, db: str) -> None:
    # v1: 1,2,3   v2: 3,1,4   v3: 5,6 (a jump)   v4: 5,6,7   with history_limit = 2
    await store.write(cw(0, [(1, b"1"), (2, b"2"), (3, b"3")], ((1, 4),), 4, 2))
    await store.write(cw(1, [(4, b"4")], ((3, 4), (1, 2), (4, 5)), 5, 2))
    with raw(db) as c:
        assert [r[0] for r in c.execute("SELECT seq FROM messages ORDER BY 1")] == [1, 2, 3, 4]
    await store.write(cw(2, [(5, b"5"), (6, b"6")], ((5, 7),), 7, 2))
    with raw(db) as c:  # v1 pruned; v2 still reaches seq 1
        assert [r[0] for r in c.execute("SELECT version FROM checkpoints")] == [2, 3]
        assert [r[0] for r in c.execute("SELECT seq FROM messages ORDER BY 1")] == [
            1,
            2,
            3,
            4,
            5,
            6,
        ]
    await store.write(cw(3, [(7, b"7")], ((5, 8),), 8, 2))
    with raw(db) as c:  # v2 pruned: nothing kept reaches below seq 5
        assert [r[0] for r in c.execute("SELECT version FROM checkpoints")] == [3, 4]
        assert [r[0] for r in c.execute("SELECT seq FROM messages ORDER BY 1")] == [5, 6, 7]
    rec = await store.read(KEY, 3)
    assert rec is not None and rec.messages == [b"5", b"6"]


async def test_duplicate_seq_fails_and_leaves_no_trace(store: SqliteStore) -> None:
    await append_n(store, 2)
    with pytest.raises(StorageError) as info:
        await store.write(cw(2, [(2, b"dup")], ((1, 3),), 3))
    assert info.value.error_code == "STORAGE_000"
    assert await store.current_version(KEY) == 2
    rec = await store.read(KEY)
    assert rec is not None and rec.messages == [b'"m1"', b'"m2"']


# -- statements per operation ---------------------------------------------------------------------
async def _statements(store: SqliteStore, op: Callable[[], Awaitable[object]]) -> list[str]:
    seen: list[str] = []

    def trace(conn: sqlite3.Connection) -> None:
        conn.set_trace_callback(seen.append)

    await store._run(trace)
    try:
        await op()
    finally:
        await store._run(lambda conn: conn.set_trace_callback(None))
    return seen


async def test_history_uses_two_queries_whatever_the_version_count(store: SqliteStore) -> None:
    await append_n(store, 1000)
    hist: list = []

    async def history() -> None:
        hist.extend(await store.history(KEY))

    stmts = await _statements(store, history)
    assert len(hist) == 1000 and hist[0].version == 1000 and len(hist[0].messages) == 1000
    assert hist[-1].messages == [b'"m1"']
    assert [s.split()[0] for s in stmts] == ["BEGIN", "SELECT", "SELECT", "COMMIT"]


async def test_a_write_is_one_transaction_of_constant_size(store: SqliteStore) -> None:
    await append_n(store, 20, limit=5)
    early = await _statements(store, lambda: append_n(store, 1, 5, start=20))
    await append_n(store, 500, limit=5, start=21)
    late = await _statements(store, lambda: append_n(store, 1, 5, start=521))
    assert early[0] == "BEGIN IMMEDIATE" and early[-1] == "COMMIT"
    assert len(early) == len(late) == 7  # BEGIN, CAS, checkpoint, 1 message, 2 prunes, COMMIT
    assert [s.split()[0] for s in late] == [s.split()[0] for s in early]


# -- locking, options, lifecycle ------------------------------------------------------------------
async def test_a_locked_database_is_a_transient_error(db: str) -> None:
    st = SqliteStore(db, busy_timeout_s=0.05)
    await st.asetup()
    await append_n(st, 1)
    holder = raw(db)
    holder.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        with pytest.raises(TransientStorageError) as info:
            await st.write(cw(1, [(2, b"x")], ((1, 3),), 3))
        assert time.monotonic() - t0 < 5
        assert info.value.error_code == "STORAGE_TRANSIENT_001"
        assert info.value.context["backend"] == "sqlite"
        with pytest.raises(LedgerWriteError) as ledger:
            await st.ledger_put(KEY, LedgerEntry("ck", "c", "tool", b"1", 1.0))
        assert ledger.value.context == {"thread_id": "t", "tool_call_id": "c", "tool": "tool"}
        assert isinstance(ledger.value.__cause__, TransientStorageError)
        assert await st.current_version(KEY) == 1  # WAL: reads go on while a writer holds the lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await st.write(cw(1, [(2, b"x")], ((1, 3),), 3))
    rec = await st.read(KEY)
    assert rec is not None and rec.version == 2 and rec.messages == [b'"m1"', b"x"]
    await st.aclose()


@pytest.mark.parametrize(("option", "pragma"), [("NORMAL", 1), ("FULL", 2), ("full", 2)])
async def test_synchronous_option(db: str, option: str, pragma: int) -> None:
    st = SqliteStore(db, synchronous=option)  # type: ignore[arg-type]
    await st.asetup()
    assert await st._run(lambda c: c.execute("PRAGMA synchronous").fetchone()[0]) == pragma
    await st.aclose()


def test_invalid_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteStore(synchronous="OFF")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="busy_timeout_s"):
        SqliteStore(busy_timeout_s=-1)


async def test_in_memory_database_and_close_reopen(db: str) -> None:
    mem = SqliteStore()
    await append_n(mem, 3)  # no explicit asetup: the first operation sets up
    assert await mem.current_version(KEY) == 3
    await mem.aclose()
    await mem.aclose()
    assert await mem.current_version(KEY) is None  # ":memory:" data ends with its connection

    st = SqliteStore(Path(db))
    await append_n(st, 2)
    await st.aclose()
    await st.aclose()
    assert await st.current_version(KEY) == 2  # reopened lazily; the file kept the data
    await st.aclose()
