"""Tier-level tests of :class:`~tenxgraph.storage.postgres.PostgresStore` on a real server.

Each test runs in its own schema (``pg_schema``). Round trips are counted on the wire by a small
TCP proxy that parses the PostgreSQL frontend/backend protocol between the pool and the server;
commits are counted by the transaction id (``xmin``) stamped on every row a write touched.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import logging
import socket
import struct
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool

from tenxgraph.core.exceptions import (
    ConfigError,
    SchemaVersionError,
    StaleStateError,
    StorageError,
    TransientStorageError,
)
from tenxgraph.records import CheckpointWrite, LedgerEntry, ThreadKey
from tenxgraph.storage import _sql
from tenxgraph.storage._migrations import CURRENT_VERSION, MIGRATIONS
from tenxgraph.storage.base import StoreTier
from tenxgraph.storage.postgres import PostgresStore, normalize_dsn

pytestmark = pytest.mark.postgres

OWNER = "owner-1"
MSG = b'{"role":"assistant","content":[{"type":"text","text":"' + b"x" * 200 + b'"}]}'


# -- helpers --------------------------------------------------------------------------------------
def msg(i: int) -> bytes:
    """A distinct ~230-byte encoded message for seq ``i`` (with an escaped NUL, as orjson
    writes one)."""
    return b'{"id":%d,"t":"\\u0000' % i + b"y" * 200 + b'"}'


def append_write(
    thread_id: str,
    expected: int,
    first_new: int,
    count: int = 1,
    *,
    history_limit: int | None = 20,
    user_id: str = OWNER,
) -> CheckpointWrite:
    """Version ``expected + 1`` of an append-only thread: seqs ``1..first_new+count-1``, of
    which ``count`` are new."""
    end = first_new + count
    return CheckpointWrite(
        thread_id=thread_id,
        user_id=user_id,
        expected_version=expected,
        values=b'{"step":%d}' % (expected + 1),
        new_messages=[(s, msg(s)) for s in range(first_new, end)],
        ranges=((1, end),) if end > 1 else (),
        next_seq=end,
        status="running",
        history_limit=history_limit,
        created_at=time.time(),
    )


async def append_many(store: PostgresStore, thread_id: str, writes: int, **kw: Any) -> int:
    """``writes`` append writes of one message each on a new thread; returns the version."""
    for v in range(writes):
        await store.write(append_write(thread_id, v, v + 1, **kw))
    return writes


def coalesce(seqs: list[int]) -> tuple[tuple[int, int], ...]:
    """Seqs in list order as ``[start, end)`` ranges (consecutive seqs merged)."""
    out: list[tuple[int, int]] = []
    for q in seqs:
        if out and out[-1][1] == q:
            out[-1] = (out[-1][0], q + 1)
        else:
            out.append((q, q + 1))
    return tuple(out)


def sql_rows(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def closed_port() -> int:
    """A local TCP port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
async def store(pg_dsn: str, pg_schema: str):
    st = PostgresStore(pg_dsn, schema=pg_schema)
    await st.asetup()
    try:
        yield st
    finally:
        await st.aclose()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class WireCounter:
    """A TCP proxy in front of Postgres that counts protocol messages per direction.

    Frontend message types: ``P`` Parse, ``B`` Bind, ``E`` Execute, ``S`` Sync, ``Q`` simple
    query. Backend: ``Z`` ReadyForQuery, sent once per completed round trip. Connect through it
    with ``sslmode=disable gssencmode=disable`` so the stream is readable.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.frontend: Counter[str] = Counter()
        self.backend: Counter[str] = Counter()
        self.bursts = 0  # client sends following a server reply: round trips initiated
        self._last_dir = "server"
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in self._tasks:
            t.cancel()

    def reset(self) -> None:
        self.frontend.clear()
        self.backend.clear()
        self.bursts = 0

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection(self.host, self.port)
        for coro in (self._pump(reader, up_w, True), self._pump(up_r, writer, False)):
            task = asyncio.ensure_future(coro)
            self._tasks.add(task)

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, frontend: bool
    ) -> None:
        buf = b""
        startup = frontend  # the first frontend message has no type byte
        counter = self.frontend if frontend else self.backend
        try:
            while data := await src.read(65536):
                if frontend and self._last_dir == "server":
                    self.bursts += 1
                self._last_dir = "client" if frontend else "server"
                buf += data
                while True:
                    if startup:
                        if len(buf) < 4:
                            break
                        (n,) = struct.unpack("!I", buf[:4])
                        if len(buf) < n:
                            break
                        buf, startup = buf[n:], False
                        continue
                    if len(buf) < 5:
                        break
                    (n,) = struct.unpack("!I", buf[1:5])
                    if len(buf) < n + 1:
                        break
                    counter[chr(buf[0])] += 1
                    buf = buf[n + 1 :]
                dst.write(data)
                await dst.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            dst.close()


# -- configuration ----------------------------------------------------------------------------------
def test_sqlalchemy_dsns_are_accepted() -> None:
    assert normalize_dsn("postgresql+asyncpg://u:p@h:5/db") == "postgresql://u:p@h:5/db"
    assert normalize_dsn("postgresql+psycopg://u@h/db") == "postgresql://u@h/db"
    assert normalize_dsn("postgres+psycopg2://u@h/db") == "postgres://u@h/db"
    assert normalize_dsn(" postgresql://u@h/db ") == "postgresql://u@h/db"
    assert normalize_dsn("host=h dbname=db") == "host=h dbname=db"


def test_constructor_validates_its_arguments(pg_dsn: str) -> None:
    with pytest.raises(ConfigError):
        PostgresStore()
    with pytest.raises(ConfigError):
        PostgresStore(pg_dsn, pool=AsyncConnectionPool(pg_dsn, open=False))
    with pytest.raises(ConfigError, match="max_sise"):
        PostgresStore(pg_dsn, pool_config={"max_sise": 3})
    st = PostgresStore("postgresql+asyncpg://u:hunter2@db.example:6543/app")
    assert "hunter2" not in repr(st) and "hunter2" not in str(st._attrs)
    assert st._attrs["server.address"] == "db.example" and st._attrs["server.port"] == 6543
    assert st._attrs["db.namespace"] == "app|public"


def test_statements_live_only_in_sql_module() -> None:
    """No SQL text in postgres.py outside docstrings: statements come from _sql / _migrations."""
    import tenxgraph.storage.postgres as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    keywords = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "CREATE ", "ALTER ", " FROM ")
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                assert not any(k in node.value for k in keywords), node.value
    # and every statement renders with quoted identifiers for an awkward schema and prefix
    q = _sql.render_all('we"ird schema', "p-")
    assert '"we""ird schema"."p-threads"' in q["CHECKPOINT_CAS"]


# -- setup ------------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_setup_twice_creates_version_3_schema(pg_dsn: str, pg_schema: str) -> None:
    st = PostgresStore(pg_dsn, schema=pg_schema, table_prefix="app_tx_")
    try:
        await st.asetup()
        await st.asetup()
    finally:
        await st.aclose()
    await asyncio.to_thread(st.setup)  # the sync twin: no event loop on that thread, no pool
    rows = sql_rows(
        pg_dsn, f'SELECT version, summary FROM "{pg_schema}".app_tx_migrations ORDER BY 1'
    )
    assert [r[0] for r in rows] == list(range(1, CURRENT_VERSION + 1))
    assert [r[1] for r in rows] == [m.summary for m in MIGRATIONS]
    tables = {
        r[0]
        for r in sql_rows(
            pg_dsn, "SELECT tablename FROM pg_tables WHERE schemaname = %s", pg_schema
        )
    }
    assert tables == {
        "app_tx_threads",
        "app_tx_checkpoints",
        "app_tx_messages",
        "app_tx_tool_executions",
        "app_tx_stop_requests",
        "app_tx_thread_leases",
        "app_tx_lease_waiters",
        "app_tx_runs",
        "app_tx_migrations",
        "app_tx_cache_keys",
    }
    types = dict(
        sql_rows(
            pg_dsn,
            "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s",
            pg_schema,
        )
    )
    # payloads are bytea (jsonb cannot hold \u0000), ranges an int8 array
    assert types["app_tx_checkpoints.values"] == "bytea"
    assert types["app_tx_messages.data"] == "bytea"
    assert types["app_tx_tool_executions.result"] == "bytea"
    assert types["app_tx_threads.metadata"] == "bytea"
    assert types["app_tx_checkpoints.ranges"] == "ARRAY"
    assert types["app_tx_stop_requests.requested_at"] == "double precision"


def test_setup_creates_a_missing_schema(pg_dsn: str, pg_schema: str) -> None:
    schema = pg_schema + "_new"
    try:
        PostgresStore(pg_dsn, schema=schema).setup()
        assert sql_rows(pg_dsn, f'SELECT max(version) FROM "{schema}".tenxgraph_migrations') == [
            (CURRENT_VERSION,)
        ]
    finally:
        sql_rows(pg_dsn, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_setup_inside_an_application_transaction(pg_dsn: str, pg_schema: str) -> None:
    # 1. On the application's own connection, inside its open transaction: steps become
    #    savepoints, visible to others only when the application commits.
    with psycopg.connect(pg_dsn) as app:  # not autocommit: a transaction opens implicitly
        app.execute(f'CREATE TABLE "{pg_schema}".app_orders (id int)')
        PostgresStore(pg_dsn, schema=pg_schema).setup(app)
        assert app.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        assert sql_rows(pg_dsn, "SELECT to_regclass(%s)", f"{pg_schema}.tenxgraph_threads") == [
            (None,)
        ]
        app.commit()
    assert sql_rows(pg_dsn, f'SELECT max(version) FROM "{pg_schema}".tenxgraph_migrations') == [
        (CURRENT_VERSION,)
    ]
    # 2. The application holds its own transaction open on our tables (reading them) and calls
    #    setup() again on a separate connection: nothing to migrate, so it takes no lock that
    #    would wait for the application's transaction.
    with psycopg.connect(pg_dsn) as app:
        app.execute(f'SELECT count(*) FROM "{pg_schema}".tenxgraph_threads')
        app.execute(f'LOCK TABLE "{pg_schema}".app_orders IN ACCESS EXCLUSIVE MODE')
        PostgresStore(pg_dsn, schema=pg_schema).setup()
        app.rollback()


@pytest.mark.anyio
async def test_async_setup_on_an_application_connection(pg_dsn: str, pg_schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(pg_dsn) as app:
        await app.execute("SELECT 1")  # open transaction
        st = PostgresStore(pg_dsn, schema=pg_schema)
        await st.asetup(app)
        await app.rollback()  # the application changes its mind: nothing was created
    assert sql_rows(pg_dsn, "SELECT to_regclass(%s)", f"{pg_schema}.tenxgraph_migrations") == [
        (None,)
    ]


@pytest.mark.anyio
async def test_newer_schema_is_refused(store: PostgresStore, pg_dsn: str, pg_schema: str) -> None:
    sql_rows(
        pg_dsn,
        f'INSERT INTO "{pg_schema}".tenxgraph_migrations (version, summary) '
        f"VALUES ({CURRENT_VERSION + 1}, 'future')",
    )
    with pytest.raises(SchemaVersionError) as info:
        await store.asetup()
    assert info.value.error_code == "STORAGE_SCHEMA_001"
    assert info.value.context == {"found": CURRENT_VERSION + 1, "supported": CURRENT_VERSION}
    with pytest.raises(SchemaVersionError):
        await asyncio.to_thread(PostgresStore(pg_dsn, schema=pg_schema).setup)


def test_sync_setup_refuses_inside_an_event_loop(pg_dsn: str, pg_schema: str) -> None:
    async def call() -> None:
        PostgresStore(pg_dsn, schema=pg_schema).setup()

    with pytest.raises(Exception, match="asetup"):
        asyncio.run(call())


# -- the write path ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_write_is_one_round_trip_and_one_commit(pg_dsn: str, pg_schema: str) -> None:
    proxy = WireCounter("127.0.0.1", 5432)
    port = await proxy.start()
    dsn = f"host=127.0.0.1 port={port} dbname=test user=postgres sslmode=disable gssencmode=disable"
    st = PostgresStore(dsn, schema=pg_schema, pool_config={"min_size": 1, "max_size": 1})
    try:
        await st.asetup()
        # warm up: psycopg prepares a statement server-side (one extra round trip, once per
        # connection) after its 5th use with the same parameter types
        await append_many(st, "t", 12, history_limit=3)
        for expected, first in ((12, 13), (13, 15)):  # each of these writes also prunes
            proxy.reset()
            await st.write(append_write("t", expected, first, count=2, history_limit=3))
            assert proxy.frontend["S"] + proxy.frontend["Q"] == 1, proxy.frontend  # 1 sync point
            assert proxy.frontend["E"] == 1, proxy.frontend  # 1 statement
            assert proxy.backend["Z"] == 1, proxy.backend  # 1 ReadyForQuery
            assert proxy.bursts == 1
        new_version = 14
        # one commit: every row the write touched carries the same transaction id
        xmins = sql_rows(
            pg_dsn,
            f"""
            SELECT xmin::text FROM "{pg_schema}".tenxgraph_threads WHERE thread_id = 't'
            UNION SELECT xmin::text FROM "{pg_schema}".tenxgraph_checkpoints
                   WHERE thread_id = 't' AND version = %s
            UNION SELECT xmin::text FROM "{pg_schema}".tenxgraph_messages
                   WHERE thread_id = 't' AND seq >= 15""",
            new_version,
        )
        assert len(xmins) == 1
        # pruning happened in that same statement
        assert sql_rows(
            pg_dsn,
            f'SELECT array_agg(version ORDER BY version) FROM "{pg_schema}".tenxgraph_checkpoints',
        ) == [([12, 13, 14],)]
        # a read is one round trip too; a lost write costs one more (error path only)
        proxy.reset()
        rec = await st.read(ThreadKey("t", OWNER))
        assert rec is not None and rec.version == 14 and len(rec.messages or []) == 16
        assert proxy.bursts == 1 and proxy.backend["Z"] == 1
        proxy.reset()
        with pytest.raises(StaleStateError):
            await st.write(append_write("t", 4, 17))
        assert proxy.bursts == 2
    finally:
        await st.aclose()
        await proxy.stop()


@pytest.mark.anyio
async def test_five_thousand_messages_one_more_write_adds_one_row(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    key = ThreadKey("long", OWNER)
    await store.write(append_write("long", 0, 1, count=4990))
    for v in range(1, 11):
        await store.write(append_write("long", v, 4990 + v))
    count = f'SELECT count(*) FROM "{pg_schema}".tenxgraph_messages WHERE thread_id = %s'
    assert sql_rows(pg_dsn, count, "long") == [(5000,)]
    await store.write(append_write("long", 11, 5001))
    assert sql_rows(pg_dsn, count, "long") == [(5001,)]
    # exactly one message row in the new version's transaction
    new_rows = sql_rows(
        pg_dsn,
        f"""SELECT count(*) FROM "{pg_schema}".tenxgraph_messages m
             WHERE m.thread_id = 'long' AND m.xmin = (SELECT xmin FROM "{pg_schema}".
                   tenxgraph_checkpoints WHERE thread_id = 'long' AND version = 12)""",
    )
    assert new_rows == [(1,)]
    # an old kept version reads back exactly
    old = await store.read(key, 3)
    assert old is not None and old.version == 3
    assert old.ranges == ((1, 4993),)
    assert old.messages == [msg(s) for s in range(1, 4993)]
    assert old.values == b'{"step":3}'
    latest = await store.read(key)
    assert latest is not None and latest.messages == [msg(s) for s in range(1, 5002)]
    meta = await store.read(key, with_messages=False)
    assert meta is not None and meta.messages is None and meta.next_seq == 5002


@pytest.mark.anyio
async def test_stored_bytes_grow_linearly_over_500_writes(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    stats = (
        f'SELECT (SELECT count(*) FROM "{pg_schema}".tenxgraph_messages),'
        f' (SELECT sum(octet_length(data)) FROM "{pg_schema}".tenxgraph_messages),'
        f' (SELECT count(*) FROM "{pg_schema}".tenxgraph_checkpoints),'
        f' (SELECT max(octet_length("values") + pg_column_size(ranges))'
        f'    FROM "{pg_schema}".tenxgraph_checkpoints),'
        f' (SELECT sum(octet_length("values") + pg_column_size(ranges))'
        f'    FROM "{pg_schema}".tenxgraph_checkpoints)'
    )
    samples = {}
    v = 0
    for n in (100, 200, 300, 400, 500):
        while v < n:
            await store.write(append_write("grow", v, v + 1, history_limit=20))
            v += 1
        samples[n] = sql_rows(pg_dsn, stats)[0]
    for n, (rows, msg_bytes, cps, cp_max, _cp_total) in samples.items():
        # each message stored exactly once
        assert rows == n and msg_bytes == sum(len(msg(s)) for s in range(1, n + 1))
        assert cps == 20  # pruned to the history limit
        assert cp_max == samples[100][3]  # a checkpoint row does not grow with the thread
    total = {n: s[1] + s[4] for n, s in samples.items()}
    assert 4.8 < total[500] / total[100] < 5.2  # linear, not quadratic (that would be ~25)


@pytest.mark.anyio
async def test_pruning_never_loses_messages_of_kept_versions(
    store: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    """Small history limits with replace_messages-style writes: the latest state is always
    complete, and rows no kept version can reach are deleted in the write's statement."""
    key = ThreadKey("trim", OWNER)
    limit = 2
    rows: dict[int, bytes] = {}
    order: list[int] = []  # the message list as seqs, in list order
    nxt = 1
    expected_lists: dict[int, list[bytes]] = {}
    for v in range(40):
        if v % 5 == 4:  # trim: keep the last 3 messages in reverse order, add one
            new = [(nxt, msg(nxt))]
            order = order[-3:][::-1] + [nxt]
        else:  # append two
            new = [(nxt, msg(nxt)), (nxt + 1, msg(nxt + 1))]
            order = order + [nxt, nxt + 1]
        rows.update(new)
        nxt = new[-1][0] + 1
        w = CheckpointWrite(
            "trim", OWNER, v, b"{}", new, coalesce(order), nxt, "running", limit, 1.0
        )
        await store.write(w)
        expected_lists[v + 1] = [rows[s] for s in order]
        latest = await store.read(key)
        assert latest is not None and latest.messages == expected_lists[v + 1]
        kept = await store.history(key)
        assert [h.version for h in kept] == [v + 1, v][: min(limit, v + 1)]
        for h in kept:
            assert h.messages == expected_lists[h.version]
    # rows below every kept version's smallest seq were swept
    min_kept = sql_rows(pg_dsn, f'SELECT min(min_seq) FROM "{pg_schema}".tenxgraph_checkpoints')[0][
        0
    ]
    assert sql_rows(
        pg_dsn,
        f'SELECT min(seq) FROM "{pg_schema}".tenxgraph_messages WHERE thread_id = %s',
        "trim",
    ) == [(min_kept,)]


@pytest.mark.anyio
async def test_each_checkpoint_write_sends_only_the_ctes_it_needs(store: PostgresStore) -> None:
    """A write outside a run lease sends no lease CTE and one that prunes nothing no delete
    (the server initialises fewer plan nodes); each variant still does exactly what the full
    statement does: pruning keeps ``history_limit`` versions, a fenced write releases its
    lease, and a write whose lease was taken over is refused, pruning or not."""
    names = {store._writes[key][1].sql: st.name for key, st in _sql.CHECKPOINT_WRITES.items()}
    assert len(names) == 6  # six distinct statements
    sent: list[str] = []
    real = store._fetch

    async def spy(query: bytes, params: Any, **kw: Any) -> Any:
        if kw.get("pq") is not None:
            sent.append(names[kw["pq"].sql])
        return await real(query, params, **kw)

    store._fetch = spy  # type: ignore[method-assign]

    # outside a lease: plain until the thread holds more than its limit, then pruning
    for v in range(5):
        await store.write(append_write("plain", v, v + 1, history_limit=3))
    assert (
        sent
        == ["CHECKPOINT_CREATE_PLAIN"] + ["CHECKPOINT_CAS_PLAIN"] * 2 + ["CHECKPOINT_CAS_PRUNE"] * 2
    )
    plain = ThreadKey("plain", OWNER)
    assert [h.version for h in await store.history(plain)] == [5, 4, 3]
    latest = await store.read(plain)
    assert latest is not None and latest.messages == [msg(s) for s in range(1, 6)]

    # under a lease: the fence is checked in every write, the last one releases the lease
    sent.clear()
    key = ThreadKey("leased", OWNER)
    a = await store.lease_acquire(key, "run-a", ttl_s=30.0, lapse_s=30.0, queue=False)
    assert a.fence is not None
    for v in range(5):
        w = append_write("leased", v, v + 1, history_limit=3)
        await store.write(dataclasses.replace(w, fence=a.fence, release=v == 4))
    assert sent == ["CHECKPOINT_CREATE"] + ["CHECKPOINT_CAS_LEASE"] * 2 + ["CHECKPOINT_CAS"] * 2
    assert [h.version for h in await store.history(key)] == [5, 4, 3]
    b = await store.lease_acquire(key, "run-b", ttl_s=0.2, lapse_s=0.2, queue=False)
    assert b.fence is not None and b.fence > a.fence  # released by the write of version 5

    # a holder whose lease was taken over cannot commit, with or without pruning to do
    await asyncio.sleep(0.3)  # b's lease lapses; c takes the thread over
    c = await store.lease_acquire(key, "run-c", ttl_s=30.0, lapse_s=30.0, queue=False)
    assert c.fence is not None and c.fence > b.fence
    for limit in (None, 3):
        w = dataclasses.replace(append_write("leased", 5, 6, history_limit=limit), fence=b.fence)
        with pytest.raises(StaleStateError) as err:
            await store.write(w)
        assert err.value.context["fence"] == b.fence
    assert sent[-2:] == ["CHECKPOINT_CAS_LEASE", "CHECKPOINT_CAS"]
    assert [h.version for h in await store.history(key)] == [5, 4, 3]


# -- concurrency, connections and errors ------------------------------------------------------------
class TrackingStore(PostgresStore):
    """Counts statements in flight at the same moment (each holds its own pooled connection):
    the reads through psycopg's cursors and the checkpoint writes sent through libpq alike."""

    active = 0
    peak = 0

    async def _fetch(self, *args: Any, **kwargs: Any) -> Any:
        TrackingStore.active += 1
        TrackingStore.peak = max(TrackingStore.peak, TrackingStore.active)
        try:
            return await super()._fetch(*args, **kwargs)
        finally:
            TrackingStore.active -= 1


@pytest.mark.anyio
async def test_two_hundred_threads_concurrently_use_many_connections(
    pg_dsn: str, pg_schema: str
) -> None:
    TrackingStore.active = TrackingStore.peak = 0
    st = TrackingStore(pg_dsn, schema=pg_schema, pool_config={"min_size": 4, "max_size": 20})
    try:
        await st.asetup()

        async def drive(i: int) -> None:
            await append_many(st, f"c-{i}", 3)

        await asyncio.gather(*(drive(i) for i in range(200)))
        # no lock serializes the queries: several connections were busy at the same time
        assert TrackingStore.peak >= 2
        stats = st.pool_stats()
        assert stats["pool_max"] == 20 and stats["pool_size"] >= 2
        threads = await st.list_threads(OWNER)
        assert len(threads) == 200 and {t.version for t in threads} == {3}
    finally:
        await st.aclose()


@pytest.mark.anyio
async def test_terminated_backends_never_leave_a_half_written_version(
    pg_dsn: str, pg_schema: str
) -> None:
    app_name = "tx-term-" + uuid.uuid4().hex[:8]
    st = PostgresStore(
        pg_dsn,
        schema=pg_schema,
        pool_config={"min_size": 2, "max_size": 3, "kwargs": {"application_name": app_name}},
    )
    key = ThreadKey("term", OWNER)
    try:
        await st.asetup()
        version = await append_many(st, "term", 3, history_limit=None)
        outcomes = []
        for _ in range(3):
            await asyncio.gather(*(st.current_version(key) for _ in range(3)))  # use the pool
            killed = sql_rows(
                pg_dsn,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                app_name,
            )
            assert killed and all(k for (k,) in killed)
            for _ in range(100):  # until the server has let them go
                if not sql_rows(
                    pg_dsn, "SELECT 1 FROM pg_stat_activity WHERE application_name = %s", app_name
                ):
                    break
                await asyncio.sleep(0.02)
            try:
                await st.write(append_write("term", version, version + 1, history_limit=None))
            except TransientStorageError as exc:
                assert exc.context["backend"] == "postgresql"
                outcomes.append("transient")
            else:
                outcomes.append("ok")
            version = await st.current_version(key) or 0
            # and the store keeps working
            await st.write(append_write("term", version, version + 1, history_limit=None))
            version += 1
        assert set(outcomes) <= {"ok", "transient"}
        # every version complete: 1..n without gaps, version v holds exactly v messages
        history = await st.history(key)
        assert [h.version for h in history] == list(range(version, 0, -1))
        for h in history:
            assert h.ranges == ((1, h.version + 1),)
            assert h.messages == [msg(s) for s in range(1, h.version + 1)]
    finally:
        await st.aclose()


@pytest.mark.anyio
async def test_ledger_insert_race_gives_both_the_winner(pg_dsn: str, pg_schema: str) -> None:
    a = PostgresStore(pg_dsn, schema=pg_schema, pool_config={"min_size": 2, "max_size": 4})
    b = PostgresStore(pg_dsn, schema=pg_schema, pool_config={"min_size": 2, "max_size": 4})
    key = ThreadKey("ledger", OWNER)
    try:
        await a.asetup()
        await a.write(append_write("ledger", 0, 1))

        def entry(i: int, who: str) -> LedgerEntry:
            return LedgerEntry(f"call-{i}", f"tc-{i}", "search", b'"%s"' % who.encode(), 1.0)

        pairs = await asyncio.gather(
            *(
                asyncio.gather(a.ledger_put(key, entry(i, "a")), b.ledger_put(key, entry(i, "b")))
                for i in range(20)
            )
        )
        for i, (ra, rb) in enumerate(pairs):
            assert ra == rb  # both racers got the same (winning) row
            assert ra.result in (b'"a"', b'"b"')
            assert await a.ledger_get(key, f"call-{i}") == ra
        assert await b.ledger_count(key) == 20
        with pytest.raises(StorageError) as info:
            await a.ledger_put(ThreadKey("ledger", "mallory"), entry(99, "m"))
        assert info.value.error_code == "STORAGE_FORBIDDEN_001"
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_connection_errors_never_show_the_password(
    pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = closed_port()
    secret = "s3cr3t-Pa55"
    for dsn in (
        f"postgresql+asyncpg://postgres:{secret}@127.0.0.1:{port}/test",
        f"host=127.0.0.1 port={port} user=postgres password={secret} dbname=test",
    ):
        st = PostgresStore(dsn, schema=pg_schema, pool_config={"timeout": 1.0}, connect_timeout_s=1)
        try:
            with pytest.raises(TransientStorageError) as info:
                await st.read(ThreadKey("t", OWNER))
        finally:
            await st.aclose()
        err = info.value
        assert err.error_code == "STORAGE_TRANSIENT_001"
        assert err.context["backend"] == "postgresql"
        for text in (str(err), repr(err), str(err.context), repr(st), str(err.__cause__)):
            assert secret not in text
        assert "127.0.0.1" in str(err)
        with pytest.raises(TransientStorageError) as sync_info:
            await asyncio.to_thread(st.setup)
        assert secret not in str(sync_info.value)
    assert secret not in caplog.text


@pytest.mark.anyio
async def test_driver_errors_are_translated_by_sqlstate(store: PostgresStore) -> None:
    for exc, transient in (
        (psycopg.errors.SerializationFailure("x"), True),  # 40001
        (psycopg.errors.DeadlockDetected("x"), True),  # 40P01
        (psycopg.errors.TooManyConnections("x"), True),  # 53300
        (psycopg.errors.AdminShutdown("x"), True),  # 57P01
        (psycopg.errors.QueryCanceled("x"), True),  # 57014
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.UniqueViolation("x"), False),  # 23505
        # psycopg files 54000 (an index row too large ...) under OperationalError: the
        # SQLSTATE class decides, so a retry loop never spins on it
        (psycopg.errors.ProgramLimitExceeded("x"), False),  # 54000
        (psycopg.errors.StatementTooComplex("x"), False),  # 54001
        (psycopg.errors.UndefinedTable("x"), False),  # 42P01
    ):
        out = store._translate(exc)
        assert isinstance(out, TransientStorageError) is transient, exc
        assert isinstance(out, StorageError)
        assert out.context["backend"] == "postgresql"
        assert out.context["sqlstate"] == exc.sqlstate
    # a reused seq is rejected by the server: nothing of the write is visible
    await store.write(append_write("dup", 0, 1))
    bad = append_write("dup", 1, 1)  # seq 1 exists already
    with pytest.raises(StorageError) as info:
        await store.write(bad)
    assert not isinstance(info.value, TransientStorageError)
    assert info.value.context["sqlstate"] == "23505"
    assert await store.current_version(ThreadKey("dup", OWNER)) == 1


@pytest.mark.anyio
async def test_prefixes_keep_stores_apart_and_missing_tables_say_setup(
    pg_dsn: str, pg_schema: str
) -> None:
    a = PostgresStore(pg_dsn, schema=pg_schema, table_prefix="a_")
    b = PostgresStore(pg_dsn, schema=pg_schema, table_prefix="b_")
    try:
        with pytest.raises(StorageError, match="setup"):
            await a.read(ThreadKey("t", OWNER))
        await a.asetup()
        await b.asetup()
        await append_many(a, "t", 2)
        assert await b.read(ThreadKey("t", OWNER)) is None
        await append_many(b, "t", 1)
        assert await a.current_version(ThreadKey("t", OWNER)) == 2
        assert await b.current_version(ThreadKey("t", OWNER)) == 1
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.anyio
async def test_isolation_is_inside_the_queries(store: PostgresStore) -> None:
    await append_many(store, "mine", 2)
    other = ThreadKey("mine", "mallory")
    assert await store.read(other) is None
    assert await store.read(other, 1) is None
    assert await store.current_version(other) is None
    assert await store.history(other) == []
    assert await store.get_stop(other) is False
    assert await store.list_threads("mallory") == []
    for call in (
        store.write(append_write("mine", 2, 3, user_id="mallory")),
        store.write(append_write("mine", 0, 1, user_id="mallory")),
        store.delete_thread(other),
        store.set_stop(other, True),
        store.set_thread_metadata(other, {"a": 1}),
        store.ledger_get(other, "k"),
        store.ledger_count(other),
    ):
        with pytest.raises(StorageError) as info:
            await call
        assert info.value.error_code == "STORAGE_FORBIDDEN_001"
        assert "owner-1" not in str(info.value)


def test_each_event_loop_gets_its_own_pool(pg_dsn: str, pg_schema: str) -> None:
    st = PostgresStore(pg_dsn, schema=pg_schema)
    st.setup()
    asyncio.run(st.write(append_write("loops", 0, 1)))
    asyncio.run(st.write(append_write("loops", 1, 2)))  # a new loop: a new pool, no error
    assert asyncio.run(st.current_version(ThreadKey("loops", OWNER))) == 2
    asyncio.run(st.aclose())


@pytest.mark.anyio
async def test_application_pool_is_used_and_left_open(pg_dsn: str, pg_schema: str) -> None:
    # a pool of non-autocommit connections: each statement still commits
    pool = AsyncConnectionPool(pg_dsn, min_size=1, max_size=2, open=False)
    await pool.open()
    try:
        st = PostgresStore(pool=pool, schema=pg_schema)
        assert isinstance(st, StoreTier)
        await st.asetup()
        await append_many(st, "app", 3)
        await st.aclose()
        assert not pool.closed
        async with pool.connection() as conn:
            cur = await conn.execute(
                f'SELECT max(version) FROM "{pg_schema}".tenxgraph_checkpoints'
            )
            assert await cur.fetchone() == (3,)
        await asyncio.to_thread(st.setup)  # the sync twin uses the pool's conninfo
    finally:
        await pool.close()


@pytest.mark.anyio
async def test_non_ascii_ids_round_trip_whatever_the_client_encoding(
    pg_dsn: str, pg_schema: str
) -> None:
    """A session in another client encoding (here LATIN1) stores ``café`` as ``café``: the
    checkpoint writes, which bypass psycopg's cursor on UTF8 sessions, keep psycopg's encoding
    on the others, so the thread is found again and a later write is no spurious conflict."""
    latin1 = PostgresStore(
        pg_dsn, schema=pg_schema, pool_config={"kwargs": {"options": "-c client_encoding=LATIN1"}}
    )
    utf8 = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        await latin1.asetup()
        for v in range(3):
            await latin1.write(append_write("café", v, v + 1, user_id="zoë"))
        rec = await utf8.read(ThreadKey("café", "zoë"))
        assert rec is not None and rec.version == 3 and len(rec.messages or []) == 3
        assert sql_rows(
            pg_dsn, f'SELECT thread_id, owner FROM "{pg_schema}".tenxgraph_threads'
        ) == [("café", "zoë")]
    finally:
        await latin1.aclose()
        await utf8.aclose()


def test_rows_are_put_in_list_order_whatever_order_the_scan_found_them() -> None:
    """The read statements aggregate message rows without sorting them on the server; the
    client puts them in list order from their seqs, for a full read (every range) and for the
    rows after a cached copy (the list's last rows), and leaves rows with a missing seq as they
    are for the length check to report."""
    import random

    from tenxgraph.storage.postgres import _in_list_order

    ranges = ((7, 10), (1, 4), (20, 22))  # list order: 7 8 9 1 2 3 20 21
    listed = [7, 8, 9, 1, 2, 3, 20, 21]
    rnd = random.Random(5)
    for _ in range(20):
        scan = listed[:]
        rnd.shuffle(scan)
        data = [b"row%d" % q for q in scan]
        assert _in_list_order(ranges, scan, data) == [b"row%d" % q for q in listed]
        tail = listed[-4:]  # the rows after a cached copy of the first four
        scan_tail = tail[:]
        rnd.shuffle(scan_tail)
        got = _in_list_order(ranges, scan_tail, [b"row%d" % q for q in scan_tail])
        assert got == [b"row%d" % q for q in tail]
    in_order = [b"row%d" % q for q in listed]
    assert _in_list_order(ranges, listed, in_order) is in_order  # no copy in the usual case
    missing = [7, 8, 9, 1, 2, 3, 20, 99]
    rows = [b"row%d" % q for q in missing]
    assert _in_list_order(ranges, missing, rows) is rows


@pytest.mark.anyio
async def test_a_read_after_an_append_returns_the_new_rows_in_list_order(
    store: PostgresStore,
) -> None:
    """``read_since`` against a copy of an append-only thread answers only the rows after the
    copy's, in list order, and ``read`` answers every row in list order."""
    key = ThreadKey("since-order", OWNER)
    await append_many(store, "since-order", 3)
    copy = await store.read_since(key, None)
    assert copy is not None and copy.messages == [msg(s) for s in (1, 2, 3)]
    await store.write(append_write("since-order", 3, 4, count=5))
    newer = await store.read_since(key, copy)
    assert newer is not None and newer.messages == [msg(s) for s in range(1, 9)]
    full = await store.read(key)
    assert full is not None and full.messages == newer.messages
