"""Postgres deployment topologies (docs/deployment.md): the hash-partitioned layout (every
per-thread statement prunes to one partition, checked with EXPLAIN; refusals; later steps follow
the layout found) and a connection pooler (PgBouncer in transaction mode: detection, the
explicit switch, and the retry when a prepared statement is lost)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.records import CheckpointWrite, ThreadKey
from tenxgraph.storage import _sql
from tenxgraph.storage._migrations import MIGRATIONS, render_step
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.storage.postgres import PostgresStore, _drive

pytestmark = [pytest.mark.postgres, pytest.mark.anyio]

PARTITIONS = 4
THREAD_TABLES = (
    "threads",
    "checkpoints",
    "messages",
    "tool_executions",
    "stop_requests",
    "thread_leases",
    "lease_waiters",
    "runs",
)

#: Statements that are not about one thread (listing, setup, catalog probes).
NOT_PER_THREAD = {
    "LIST_THREADS",
    "LIST_ALL_THREADS",
    "SCHEMA_EXISTS",
    "TABLE_EXISTS",
    "TABLE_LAYOUT",
    "BACKEND_PID",
    "CACHE_MAC_KEY",
    "CREATE_SCHEMA",
    "CREATE_MIGRATIONS_TABLE",
    "MIGRATION_LOCK",
    "MIGRATION_VERSION",
    "MIGRATION_RECORD",
    "RUN_LIST",
    "RUN_OPEN",
    # erasure and retention: by owner or by idleness, across partitions by design
    "ERASE_OWNER",
    "SWEEP_IDLE",
    # rotate-keys: pages over every thread by a (thread_id, position) cursor, across partitions
    # by design (EXPLAINed in test_rotation_statements_plan_over_partitions)
    *(name for name in _sql.ALL_STATEMENTS if name.startswith("ROTATE_")),
}
PER_THREAD = sorted(set(_sql.ALL_STATEMENTS) - NOT_PER_THREAD)

#: A value for every parameter name a statement uses.
SAMPLE: dict[str, Any] = {
    "thread_id": "explain-thread",
    "owner": "u1",
    "status": "done",
    "created_at": 1.0,
    "values": b"{}",
    "ranges": [1, 3],
    "min_seq": 1,
    "next_seq": 3,
    "seqs": [1, 2],
    "datas": [b"a", b"b"],
    "expected": 2,
    "prune_to": 1,
    "expect_seen": 2,
    "version": None,
    "before": None,
    "limit": 10,
    "starts": [1],
    "ends": [3],
    "metadata": b"{}",
    "requested_at": 1.0,
    "call_key": b"k",
    "tool_call_id": b"c",
    "tool_name": b"n",
    "result": b"r",
    "known_version": 1,
    "known_created_at": 1.0,
    "delta_ok": True,
    # FORK names two threads (source and fork): the same id here, so a plan that prunes each
    # side to its thread's partition touches exactly one partition.
    "src_thread_id": "explain-thread",
    "src_version": 1,
    "copy_starts": [1],
    "copy_ends": [3],
    "run_id": "r1",
    "input": b"null",
    "config": b"{}",
    "now": 1.0,
    "channel": "tenxgraph_runs_test",
    "attempts": 1,
    "crashes": 0,
    "worker": "w",
    "last_error": "",
    "output": None,
    "expect_status": "pending",
    "expect_attempts": 0,
    "notify": False,
    # the run lease (tenxgraph.storage._lease_sql): a fence is given so that the fenced branch
    # of the checkpoint writes is planned too
    "fence": 1,
    "release": True,
    "holder": "run-1",
    "ttl_s": 5.0,
    "lapse_s": 5.0,
    "queue": True,
    # rotate-keys (tenxgraph.storage._rotate)
    "after_thread": "",
    "after_pos": "",
    "every": False,
    "hlen": 4,
    "header": b"TXG1",
    "older_than": 2.0,
    "thread_ids": ["explain-thread"],
    "olds": [b"o"],
    "news": [b"n"],
}

#: rotate-keys' cursor and swap positions, by the statement's table (int8, bytea or text).
_ROTATE_POSITIONS: dict[str, tuple[Any, list[Any]]] = {
    "CHECKPOINTS": (-1, [1]),
    "MESSAGES": (-1, [1]),
    "LEDGER": (b"", [b"k"]),
    "RUN_INPUTS": ("", ["r1"]),
    "RUN_OUTPUTS": ("", ["r1"]),
}


def _sql_rows(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(query, params or None).fetchall()


@pytest.fixture
def partitioned(pg_dsn: str, pg_schema: str) -> Iterator[PostgresStore]:
    store = PostgresStore(pg_dsn, schema=pg_schema, partitions=PARTITIONS)
    store.setup()
    yield store


def _relations(plan: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(node type, relation name)`` of every plan node naming a relation."""
    if "Relation Name" in plan:
        yield plan["Node Type"], plan["Relation Name"]
    for child in plan.get("Plans", ()):
        yield from _relations(child)


def _partition_of(pg_dsn: str, schema: str, thread_id: str) -> int:
    """The remainder of the partition that holds ``thread_id`` (Postgres's own routing)."""
    rows = _sql_rows(
        pg_dsn,
        f'SELECT tableoid::regclass::text FROM "{schema}".tenxgraph_threads WHERE thread_id = %s',
        thread_id,
    )
    return int(rows[0][0].rsplit("_p", 1)[1].strip('"'))


# -- partitioned layout ---------------------------------------------------------------------------
def test_partitioned_setup_creates_hash_partitions(
    partitioned: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    for table in THREAD_TABLES:
        rows = _sql_rows(
            pg_dsn,
            "SELECT p.partstrat, a.attname FROM pg_partitioned_table p "
            "JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0] "
            "WHERE p.partrelid = to_regclass(%s)",
            f'"{pg_schema}".tenxgraph_{table}',
        )
        assert rows == [("h", "thread_id")], table
        children = _sql_rows(
            pg_dsn,
            "SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(%s)",
            f'"{pg_schema}".tenxgraph_{table}',
        )
        assert children == [(PARTITIONS,)], table
    # the plain layout's storage setting moved to the threads partitions (HOT updates)
    opts = _sql_rows(
        pg_dsn,
        "SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)",
        f'"{pg_schema}".tenxgraph_threads_p0',
    )
    assert opts == [(["fillfactor=80"],)]
    # setup again is a no-op, with or without partitions=
    partitioned.setup()
    PostgresStore(pg_dsn, schema=pg_schema).setup()


def test_every_statement_is_classified() -> None:
    """A new statement must be put in PER_THREAD (and pass the EXPLAIN test) or be declared
    not per-thread here."""
    assert NOT_PER_THREAD <= set(_sql.ALL_STATEMENTS)
    for name in PER_THREAD:
        assert "%(thread_id)b" in _sql.ALL_STATEMENTS[name].template, name
    for name in NOT_PER_THREAD:
        assert "%(thread_id)b" not in _sql.ALL_STATEMENTS[name].template, name


@pytest.mark.parametrize("plan_mode", ["custom", "generic"])
@pytest.mark.parametrize("name", PER_THREAD)
async def test_each_per_thread_statement_touches_one_partition(
    partitioned: PostgresStore, pg_dsn: str, pg_schema: str, name: str, plan_mode: str
) -> None:
    """EXPLAIN every per-thread statement: each partitioned table is scanned in at most one
    partition, the same remainder for every table (co-location: same key, same hash), and
    the one Postgres routes the thread's rows to. An INSERT names the parent (its row is
    routed to one partition at run time) and never scans it. With a generic plan (what a
    prepared statement runs after five executions) the pruning happens at executor start."""
    key = ThreadKey(SAMPLE["thread_id"], SAMPLE["owner"])
    await partitioned.write(
        CheckpointWrite(
            thread_id=key.thread_id,
            user_id=key.user_id,
            expected_version=0,
            values=b"{}",
            ranges=((1, 2),),
            new_messages=[(1, b"m")],
            next_seq=2,
            status="done",
            history_limit=None,
            created_at=1.0,
        )
    )
    await partitioned.aclose()
    expected = _partition_of(pg_dsn, pg_schema, key.thread_id)
    query = _sql.render_all(pg_schema, "tenxgraph_")[name]
    params = {p: SAMPLE[p] for p in set(re.findall(r"%\((\w+)\)b", query))}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        if plan_mode == "generic":
            conn.execute("SET plan_cache_mode = force_generic_plan")
        cur = conn.execute(
            "EXPLAIN (FORMAT JSON) " + query, params, binary=True, prepare=plan_mode == "generic"
        )
        plan = cur.fetchone()[0][0]["Plan"]
    seen: dict[str, set[int]] = {}
    for node, rel in _relations(plan):
        m = re.fullmatch(r"tenxgraph_(\w+?)(?:_p(\d+))?", rel)
        assert m is not None, rel
        table, part = m.group(1), m.group(2)
        assert table in THREAD_TABLES, rel
        if part is None:  # the partitioned parent: only as the target of an INSERT
            assert node == "ModifyTable", (name, node, rel)
            continue
        seen.setdefault(table, set()).add(int(part))
    assert seen or name.startswith("CHECKPOINT_CREATE"), f"{name}: no partition scanned at all?"
    for table, parts in seen.items():
        assert parts == {expected}, (name, table, parts, expected)


@pytest.mark.parametrize("name", sorted(n for n in _sql.ALL_STATEMENTS if n.startswith("ROTATE_")))
def test_rotation_statements_plan_over_partitions(
    partitioned: PostgresStore, pg_dsn: str, pg_schema: str, name: str
) -> None:
    """rotate-keys' pages and swaps (every thread, by a cursor) plan over the partitioned
    layout and touch only the table they rotate (plus ``threads`` for the owner)."""
    query = _sql.render_all(pg_schema, "tenxgraph_")[name]
    after, positions = _ROTATE_POSITIONS[name.split("_", 2)[2]]
    sample = {**SAMPLE, "after_pos": after, "positions": positions}
    params = {p: sample[p] for p in set(re.findall(r"%\((\w+)\)b", query))}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        plan = conn.execute("EXPLAIN (FORMAT JSON) " + query, params, binary=True).fetchone()
    tables = set()
    for _node, rel in _relations(plan[0][0]["Plan"]):
        m = re.fullmatch(r"tenxgraph_(\w+?)(?:_p(\d+))?", rel)
        assert m is not None, rel
        tables.add(m.group(1))
    rotated = {"RUN": "runs", "LEDGER": "tool_executions"}.get(
        name.split("_")[2], name.split("_")[2].lower()
    )
    assert rotated in tables and tables <= {rotated, "threads"}, (name, tables)


def test_partitions_refused_over_an_unpartitioned_schema(pg_dsn: str, pg_schema: str) -> None:
    PostgresStore(pg_dsn, schema=pg_schema).setup()
    with pytest.raises(ConfigError) as err:
        PostgresStore(pg_dsn, schema=pg_schema, partitions=PARTITIONS).setup()
    assert err.value.error_code == "CONFIG_001"
    assert err.value.context == {"key": "partitions", "found": None, "requested": PARTITIONS}
    assert "unpartitioned" in str(err.value) and "fresh schema" in str(err.value)
    # nothing was changed: still plain
    assert _sql_rows(
        pg_dsn,
        "SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)",
        f'"{pg_schema}".tenxgraph_threads',
    ) == [("r",)]


async def test_partition_count_mismatch_refused(
    partitioned: PostgresStore, pg_dsn: str, pg_schema: str
) -> None:
    other = PostgresStore(pg_dsn, schema=pg_schema, partitions=PARTITIONS + 1)
    with pytest.raises(ConfigError) as err:
        await other.asetup()
    assert err.value.context["found"] == PARTITIONS
    assert f"partitions={PARTITIONS}" in str(err.value)
    await other.aclose()


def _layouts(pg_dsn: str, schema: str, prefix: str) -> set[int | None]:
    """The partition count of every thread-keyed table (``None``: a plain table)."""
    out: set[int | None] = set()
    for table in THREAD_TABLES:
        ((kind, n),) = _sql_rows(
            pg_dsn,
            "SELECT c.relkind, (SELECT count(*) FROM pg_inherits WHERE inhparent = c.oid) "
            "FROM pg_class c WHERE c.oid = to_regclass(%s)",
            f'"{schema}".{prefix}{table}',
        )
        out.add(int(n) if kind == "p" else None)
    return out


def test_partitioned_setup_rechecks_the_layout_under_the_lock(pg_dsn: str, pg_schema: str) -> None:
    """A plain setup() that lands between the lock-free look and the lock of a partitioned
    setup() makes the partitioned one refuse, instead of succeeding on plain tables."""
    wanted = PostgresStore(pg_dsn, schema=pg_schema, partitions=PARTITIONS)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert _drive(conn, wanted._probe_plan(), tx=False) is None  # nothing there yet
        PostgresStore(pg_dsn, schema=pg_schema).setup()  # the other process wins the race
        with pytest.raises(ConfigError) as err:
            _drive(conn, wanted._bootstrap_plan(), tx=True)
        assert err.value.error_code == "CONFIG_001"
        assert err.value.context == {"key": "partitions", "found": None, "requested": PARTITIONS}
        with pytest.raises(ConfigError):
            _drive(conn, wanted._step_plan(2), tx=True)
    assert _layouts(pg_dsn, pg_schema, "tenxgraph_") == {None}


def test_racing_partitioned_and_plain_setups(pg_dsn: str, pg_schema: str) -> None:
    """Several sessions set up one fresh schema at once, mixing partitions=4 and plain stores
    (a fresh table prefix per round). Each partitioned store either succeeds on tables
    partitioned into 4 or refuses with CONFIG_001; a plain store (partitions=None uses the
    layout found) succeeds; every table ends up with one layout."""
    import threading

    outcomes: list[tuple[int | None, str]] = []
    for rnd in range(6):
        prefix = f"race{rnd}_"
        kinds = [PARTITIONS, None, PARTITIONS, None] if rnd % 2 else [None, PARTITIONS] * 2
        barrier = threading.Barrier(len(kinds))
        results: list[tuple[int | None, str]] = []

        def run(
            parts: int | None, prefix: str = prefix, barrier: Any = barrier, results: Any = results
        ) -> None:
            store = PostgresStore(pg_dsn, schema=pg_schema, table_prefix=prefix, partitions=parts)
            barrier.wait()
            try:
                store.setup()
                res = "ok"
            except ConfigError as exc:
                res = exc.error_code
            results.append((parts, res))  # list.append is atomic

        threads = [threading.Thread(target=run, args=(k,)) for k in kinds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == len(kinds)
        layouts = _layouts(pg_dsn, pg_schema, prefix)
        assert len(layouts) == 1, layouts
        (layout,) = layouts
        for parts, res in results:
            if parts is None:
                assert res == "ok"
            elif res == "ok":
                assert layout == PARTITIONS, (rnd, results)
            else:
                assert res == "CONFIG_001" and layout is None, (rnd, results)
        outcomes.extend(results)
    assert all(r in ("ok", "CONFIG_001") for _, r in outcomes)


@pytest.mark.parametrize("bad", [0, -1, 1025, 2.0, "4", True])
def test_bad_partitions_refused(pg_dsn: str, bad: Any) -> None:
    with pytest.raises(ConfigError) as err:
        PostgresStore(pg_dsn, partitions=bad)
    assert err.value.context == {"key": "partitions"}
    with pytest.raises(ConfigError):
        PgCheckpointer(pg_dsn, partitions=bad)


def test_later_steps_follow_the_layout_found(pg_dsn: str, pg_schema: str) -> None:
    """A schema created partitioned by an older release (steps 1-2 only) is migrated by a
    store that does not say partitions=: the new tables are partitioned like the old ones."""
    old = PostgresStore(pg_dsn, schema=pg_schema, partitions=3)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _drive(conn, old._bootstrap_plan(), tx=True)
        _drive(conn, old._step_plan(1), tx=True)
        _drive(conn, old._step_plan(2), tx=True)
    assert _sql_rows(
        pg_dsn, "SELECT to_regclass(%s)", f'"{pg_schema}".tenxgraph_tool_executions'
    ) == [(None,)]
    PostgresStore(pg_dsn, schema=pg_schema).setup()
    for table in ("tool_executions", "stop_requests"):
        assert _sql_rows(
            pg_dsn,
            "SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass(%s)",
            f'"{pg_schema}".tenxgraph_{table}',
        ) == [(3,)]


def test_plain_layout_ddl_is_unchanged() -> None:
    """The plain layout renders each released step exactly as before the layout option."""
    step1 = render_step(MIGRATIONS[0], "s", "p_")
    assert step1[0].endswith(") WITH (fillfactor = 80)")
    assert all("PARTITION" not in ddl for m in MIGRATIONS for ddl in render_step(m, "s", "p_"))
    assert [len(render_step(m, "s", "p_")) for m in MIGRATIONS] == [
        len(m.statements) for m in MIGRATIONS
    ]


# -- poolers ---------------------------------------------------------------------------------------
async def test_pooler_is_detected_through_pgbouncer(pgbouncer_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(pgbouncer_dsn, schema=pg_schema)  # pooler="auto"
    try:
        await store.asetup()
        assert store.unprepared is True
        key = ThreadKey("t", "u")
        for _ in range(20):  # well past prepare_threshold: nothing is prepared
            assert await store.current_version(key) is None
    finally:
        await store.aclose()


async def test_no_pooler_detected_on_a_direct_connection(pg_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(pg_dsn, schema=pg_schema)
    try:
        await store.asetup()
        assert store.unprepared is False
    finally:
        await store.aclose()


async def test_explicit_pgbouncer_switch_never_prepares(pgbouncer_dsn: str, pg_schema: str) -> None:
    store = PostgresStore(
        pgbouncer_dsn, schema=pg_schema, pooler="pgbouncer", pool_config={"max_size": 2}
    )
    try:
        await store.asetup()
        assert store.unprepared is True
        key = ThreadKey("t", "u")
        for _ in range(12):
            await store.current_version(key)
        pool = await store._get_pool()
        async with pool.connection() as conn:
            assert conn.prepare_threshold is None
    finally:
        await store.aclose()


def test_bad_pooler_refused(pg_dsn: str) -> None:
    with pytest.raises(ConfigError) as err:
        PostgresStore(pg_dsn, pooler="pgpool")
    assert err.value.context == {"key": "pooler"}
    with pytest.raises(ConfigError) as err:
        PostgresStore(pg_dsn, pooler="pgbouncer", pool_config={"prepare_threshold": 5})
    assert err.value.context == {"key": "pool_config"}


async def test_lost_prepared_statement_is_retried_unprepared(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What a transaction pooler does to a prepared statement (the server connection behind
    the client changed) is reproduced on a direct connection by deallocating behind psycopg's
    back: the statement fails with SQLSTATE 26000 before running, is retried unprepared, and
    the store stops preparing, with one warning."""
    store = PostgresStore(
        pg_dsn,
        schema=pg_schema,
        pooler=None,
        pool_config={"min_size": 1, "max_size": 1, "prepare_threshold": 0},
    )
    try:
        await store.asetup()
        key = ThreadKey("t", "u")
        assert await store.current_version(key) is None  # prepared now (threshold 0)
        pool = await store._get_pool()
        async with pool.connection() as conn:
            # libpq directly: psycopg's own execute would notice and forget its statements
            assert conn.pgconn.exec_(b"DEALLOCATE ALL").status == psycopg.pq.ExecStatus.COMMAND_OK
        with caplog.at_level(logging.WARNING, logger="tenxgraph.postgres"):
            assert await store.current_version(key) is None
            assert await store.current_version(key) is None
        assert store.unprepared is True
        warnings = [r for r in caplog.records if "prepared statement" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        await store.aclose()


# -- Redis Cluster options ---------------------------------------------------------------------------
def test_redis_cluster_options_are_checked(pg_dsn: str) -> None:
    import redis.asyncio as aioredis

    from tenxgraph.storage.redis import RedisCache

    with pytest.raises(ConfigError) as err:
        PgCheckpointer(pg_dsn, redis_cluster=True)  # no redis_url
    assert err.value.context == {"key": "redis_cluster"}
    client = aioredis.Redis()
    with pytest.raises(ConfigError):
        PgCheckpointer(pg_dsn, redis_url="redis://127.0.0.1:7001", redis=client, redis_cluster=True)
    with pytest.raises(ConfigError) as err:
        RedisCache(client=client, cluster=True)
    assert err.value.context == {"key": "cluster"}


async def test_redis_cluster_flag_on_a_plain_redis_is_refused(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_cluster_url: str
) -> None:
    """redis_cluster=True pointed at a Redis that is not a cluster fails setup with CONFIG_001
    instead of "schema ready" and a warning on every cache call."""
    from tenxgraph.storage.redis import RedisCache

    with pytest.raises(ConfigError) as err:
        await RedisCache(redis_url, cluster=True).acheck()
    assert err.value.error_code == "CONFIG_001"
    assert err.value.context == {"key": "redis_cluster"}
    assert "is not a cluster" in str(err.value) and "drop redis_cluster=True" in str(err.value)
    await RedisCache(redis_cluster_url, cluster=True).acheck()  # a cluster node: fine
    await RedisCache(redis_url).acheck()  # no cluster asked: nothing to check
    await RedisCache("redis://127.0.0.1:1", cluster=True, timeout_s=0.5).acheck()  # unreachable

    cp = PgCheckpointer(pg_dsn, schema=pg_schema, redis_url=redis_url, redis_cluster=True)
    try:
        with pytest.raises(ConfigError) as err:
            await cp.asetup()
        assert err.value.context == {"key": "redis_cluster"}
        with pytest.raises(ConfigError) as err:  # the first call of an app that skipped setup
            await cp.aget_state({"thread_id": "t"})
        assert err.value.context == {"key": "redis_cluster"}
    finally:
        await cp.aclose()
    ok = PgCheckpointer(pg_dsn, schema=pg_schema, redis_url=redis_cluster_url, redis_cluster=True)
    try:
        await ok.asetup()
    finally:
        await ok.aclose()


def test_cli_setup_refuses_redis_cluster_on_a_plain_redis(
    pg_dsn: str, pg_schema: str, redis_url: str
) -> None:
    """``tenxgraph setup --redis-cluster`` at a plain Redis: exit 2 with the reason."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, "-m", "tenxgraph.cli", "setup", "--dsn", pg_dsn, "--schema", pg_schema,
         "--redis-url", redis_url, "--redis-cluster"],
        capture_output=True, text=True, timeout=120, cwd=root, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not a cluster" in proc.stderr and "schema ready" not in proc.stdout
