"""Several OS processes against one Postgres schema: setup races, CAS races, pruning races.

Each spawned process builds its own :class:`~tenxgraph.storage.postgres.PostgresStore` (its own
pool). Writers loop for a few seconds on ONE thread: read the latest version, write version + 1
with one new message, and on ``StaleStateError`` record the attempt as failed and go again.
Afterwards the checkpoints must run 1..n without gaps, every committed message must be stored
exactly once and in commit order, and no failed attempt may have left anything behind.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from typing import Any

import psycopg
import pytest

from tenxgraph.core.exceptions import StaleStateError, TransientStorageError
from tenxgraph.records import CheckpointWrite, ThreadKey, ranges_len
from tenxgraph.storage._migrations import CURRENT_VERSION
from tenxgraph.storage.postgres import PostgresStore

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

KEY = ThreadKey("shared-thread", "owner")


@pytest.fixture(params=["direct", "pgbouncer"])
def writer_dsn(request: pytest.FixtureRequest, pg_dsn: str) -> str:
    """The DSN the worker processes use: the server itself, or PgBouncer in transaction mode in
    front of it (docs/deployment.md); checks read the server directly."""
    return request.getfixturevalue("pgbouncer_dsn") if request.param == "pgbouncer" else pg_dsn


def _payload(mid: str) -> bytes:
    return b'{"message_id":"%s","text":"\\u0000 hello"}' % mid.encode()


async def _writer_loop(
    dsn: str, schema: str, idx: int, barrier: Any, duration_s: float, history_limit: int | None
) -> dict[str, Any]:
    store = PostgresStore(dsn, schema=schema, pool_config={"min_size": 1, "max_size": 2})
    committed: list[tuple[int, str]] = []
    failed: list[str] = []
    uncertain: list[str] = []
    partial_reads = 0
    try:
        await store.asetup()
        barrier.wait()
        deadline = time.monotonic() + duration_s
        attempt = 0
        while time.monotonic() < deadline:
            attempt += 1
            mid = f"p{idx}-a{attempt}"
            full = attempt % 10 == 0  # now and then read the messages and check them
            rec = await store.read(KEY, with_messages=full)
            if rec is not None and full:
                if rec.messages is None or len(rec.messages) != ranges_len(rec.ranges):
                    partial_reads += 1
            version = 0 if rec is None else rec.version
            seq = 1 if rec is None else rec.next_seq
            w = CheckpointWrite(
                thread_id=KEY.thread_id,
                user_id=KEY.user_id,
                expected_version=version,
                values=b'{"writer":%d,"attempt":%d}' % (idx, attempt),
                new_messages=[(seq, _payload(mid))],
                ranges=((1, seq + 1),),
                next_seq=seq + 1,
                status="running",
                history_limit=history_limit,
                created_at=time.time(),
            )
            try:
                await store.write(w)
            except StaleStateError as exc:
                assert exc.context["expected_version"] == version
                failed.append(mid)
            except TransientStorageError:
                uncertain.append(mid)  # may or may not have committed: excluded from checks
            else:
                committed.append((version + 1, mid))
    finally:
        await store.aclose()
    return {
        "committed": committed,
        "failed": failed,
        "uncertain": uncertain,
        "partial_reads": partial_reads,
    }


def _writer(
    dsn: str,
    schema: str,
    idx: int,
    barrier: Any,
    results: Any,
    duration_s: float,
    history_limit: int | None,
) -> None:
    try:
        out = asyncio.run(_writer_loop(dsn, schema, idx, barrier, duration_s, history_limit))
    except BaseException as exc:  # report, never hang the parent
        results.put((idx, {"error": repr(exc)}))
    else:
        results.put((idx, out))


def _run_writers(
    dsn: str, schema: str, processes: int, duration_s: float, history_limit: int | None
) -> dict[int, dict[str, Any]]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_writer,
            args=(dsn, schema, i, barrier, results, duration_s, history_limit),
        )
        for i in range(processes)
    ]
    for p in procs:
        p.start()
    outs: dict[int, dict[str, Any]] = {}
    try:
        for _ in procs:
            idx, out = results.get(timeout=120)
            outs[idx] = out
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert all("error" not in o for o in outs.values()), outs
    assert [p.exitcode for p in procs] == [0] * processes
    assert sum(o["partial_reads"] for o in outs.values()) == 0
    return outs


def _rows(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description is not None else []


def _message_ids(dsn: str, schema: str) -> list[str]:
    rows = _rows(
        dsn,
        f'SELECT data FROM "{schema}".tenxgraph_messages WHERE thread_id = %s ORDER BY seq',
        KEY.thread_id,
    )
    return [bytes(d).split(b'"')[3].decode() for (d,) in rows]


def test_writers_in_several_processes_lose_nothing(
    pg_dsn: str, pg_schema: str, writer_dsn: str
) -> None:
    outs = _run_writers(writer_dsn, pg_schema, processes=4, duration_s=3.0, history_limit=None)
    committed = sorted(c for o in outs.values() for c in o["committed"])
    failed = {f for o in outs.values() for f in o["failed"]}
    uncertain = {u for o in outs.values() for u in o["uncertain"]}
    n = len(committed)
    assert n > 4 and failed  # real contention, real progress
    assert sum(1 for o in outs.values() if o["committed"]) >= 2  # several processes won
    if not uncertain:
        # every committed attempt got its own version: 1..n, no gap, no duplicate
        assert [v for v, _ in committed] == list(range(1, n + 1))
    # the table agrees: versions 1..n, each version v holding exactly v messages
    versions = _rows(
        pg_dsn,
        f'SELECT version, ranges FROM "{pg_schema}".tenxgraph_checkpoints '
        "WHERE thread_id = %s ORDER BY version",
        KEY.thread_id,
    )
    total = len(versions)
    assert [v for v, _ in versions] == list(range(1, total + 1))
    assert all(r == [1, v + 1] for v, r in versions)
    assert _rows(
        pg_dsn,
        f'SELECT version FROM "{pg_schema}".tenxgraph_threads WHERE thread_id = %s',
        KEY.thread_id,
    ) == [(total,)]
    # every committed message exactly once, in commit order; nothing of a failed attempt
    ids = _message_ids(pg_dsn, pg_schema)
    assert len(ids) == total == len(set(ids))
    assert [mid for _, mid in committed] == [m for m in ids if m not in uncertain]
    assert not failed & set(ids)


def test_pruning_under_concurrent_writers_keeps_exactly_the_limit(
    pg_dsn: str, pg_schema: str, writer_dsn: str
) -> None:
    limit = 5
    outs = _run_writers(writer_dsn, pg_schema, processes=3, duration_s=2.0, history_limit=limit)
    committed = sorted(c for o in outs.values() for c in o["committed"])
    failed = {f for o in outs.values() for f in o["failed"]}
    n = _rows(
        pg_dsn,
        f'SELECT version FROM "{pg_schema}".tenxgraph_threads WHERE thread_id = %s',
        KEY.thread_id,
    )[0][0]
    assert n > limit and len(committed) <= n
    kept = _rows(
        pg_dsn,
        f'SELECT version FROM "{pg_schema}".tenxgraph_checkpoints '
        "WHERE thread_id = %s ORDER BY version",
        KEY.thread_id,
    )
    assert [v for (v,) in kept] == list(range(n - limit + 1, n + 1))
    # append-only: every message is still reachable from the kept versions, none of a loser
    ids = _message_ids(pg_dsn, pg_schema)
    assert len(ids) == n == len(set(ids))
    assert not failed & set(ids)

    async def latest_is_complete() -> None:
        store = PostgresStore(pg_dsn, schema=pg_schema)
        try:
            history = await store.history(KEY)
            assert [h.version for h in history] == list(range(n, n - limit, -1))
            for h in history:
                assert h.messages is not None and len(h.messages) == h.version
        finally:
            await store.aclose()

    asyncio.run(latest_is_complete())


def _setup_worker(
    dsn: str, schema: str, use_sync: bool, barrier: Any, results: Any, partitions: int | None
) -> None:
    try:
        store = PostgresStore(dsn, schema=schema, partitions=partitions)
        barrier.wait()
        if use_sync:
            store.setup()
        else:

            async def go() -> None:
                try:
                    await store.asetup()
                finally:
                    await store.aclose()

            asyncio.run(go())
    except BaseException as exc:
        results.put(repr(exc))
    else:
        results.put("ok")


@pytest.mark.parametrize("topology", ["direct", "pgbouncer", "partitioned"])
def test_setup_from_several_processes_at_once(
    pg_dsn: str, pg_schema: str, topology: str, request: pytest.FixtureRequest
) -> None:
    """Racing setups apply each step once: also through PgBouncer in transaction mode (the
    lock is pg_advisory_xact_lock inside each step's transaction, which a transaction pooler
    keeps on one server connection) and when creating the partitioned layout."""
    dsn = request.getfixturevalue("pgbouncer_dsn") if topology == "pgbouncer" else pg_dsn
    partitions = 3 if topology == "partitioned" else None
    schema = pg_schema + "_race"  # does not exist yet: the racers also race to create it
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(4)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_setup_worker, args=(dsn, schema, i % 2 == 0, barrier, results, partitions)
        )
        for i in range(4)
    ]
    try:
        for p in procs:
            p.start()
        outcomes = [results.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=30)
        assert outcomes == ["ok"] * 4
        assert _rows(
            pg_dsn, f'SELECT version FROM "{schema}".tenxgraph_migrations ORDER BY version'
        ) == [(v,) for v in range(1, CURRENT_VERSION + 1)]
        tables = _rows(
            pg_dsn,
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s",
            schema,
        )
        # ten tables (runs and cache_keys the last two); in the partitioned layout also 3
        # partitions of each of the 8 thread-keyed
        assert tables == [(10 + 8 * (partitions or 0),)]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        _rows(pg_dsn, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
