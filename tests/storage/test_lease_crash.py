"""A grant of the run lease commits without a WAL flush of its own; a server crash that loses
it never hands its fence to a second holder (docs/guarantees.md, "Run lease durability").

On a private PostgreSQL instance (initdb into a temporary directory, its own port and socket
directory; never the shared test server), stopped with ``pg_ctl stop -m immediate`` (the
server's processes are killed: no shutdown checkpoint, unflushed WAL is lost) right after a
grant, then started again. The WAL writer is slowed down (``wal_writer_delay`` 10 s) so that
the grant's commit is still unflushed when the server dies.

Checked: the grant is gone after the restart; the next grant gets another fence; the first
holder's checkpoint write with its fence is refused and the second holder's goes through; and
a grant followed by a checkpoint write (whose commit is flushed) survives the crash.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from _private_pg import PrivateServer, private_server

from tenxgraph.core.exceptions import StaleStateError
from tenxgraph.records import CheckpointWrite, ThreadKey
from tenxgraph.storage.postgres import PostgresStore

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

TTL = 30.0


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivateServer]:
    # the WAL writer slowed down so that an unflushed commit stays unflushed until the crash
    with private_server(
        "fsync=on",
        "wal_writer_delay=10000",
        "wal_writer_flush_after=0",
        "checkpoint_timeout=3600",
        "autovacuum=off",
    ) as server:
        yield server


def _write(key: ThreadKey, expected: int, fence: int) -> CheckpointWrite:
    return CheckpointWrite(
        thread_id=key.thread_id,
        user_id=key.user_id,
        expected_version=expected,
        values=b'{"context_summary":null}',
        new_messages=[],
        ranges=(),
        next_seq=1,
        status="running",
        history_limit=None,
        created_at=1000.0 + expected,
        fence=fence,
        release=False,
    )


def _lease_row(dsn: str, key: ThreadKey) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            'SELECT holder, fence FROM "public"."tenxgraph_thread_leases" WHERE thread_id = %s',
            (key.thread_id,),
        ).fetchone()


async def test_a_grant_lost_in_a_crash_never_gives_its_fence_to_another_run(
    private_pg: PrivateServer,
) -> None:
    key = ThreadKey("crash-lost", "u")
    setup = PostgresStore(private_pg.dsn, lease_listen=False)
    await setup.asetup()
    await setup.write(_write(key, 0, -1))  # the thread exists (version 1), no lease yet
    a = await setup.lease_acquire(key, "A", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert a.fence is not None
    await setup.aclose()
    # Mid-run: A holds the lease and runs its node; the server dies before anything flushed
    # A's grant (committed with synchronous_commit off).
    private_pg.crash()
    private_pg.start()
    row = _lease_row(private_pg.dsn, key)
    assert row is None, "the grant's commit was flushed: the crash lost nothing"
    store = PostgresStore(private_pg.dsn, lease_listen=False)
    try:
        # B takes the lease at once (A's grant is gone, not merely lapsing) with another fence
        b = await store.lease_acquire(key, "B", ttl_s=TTL, lapse_s=TTL, queue=False)
        assert b.fence is not None and b.fence != a.fence
        # A's process reconnects and writes its node's checkpoint with its fence: refused
        with pytest.raises(StaleStateError) as info:
            await store.write(_write(key, 1, a.fence))
        assert info.value.context["fence"] == a.fence
        # B's write goes through
        rec = await store.write(_write(key, 1, b.fence))
        assert rec.version == 2
    finally:
        await store.aclose()


async def test_a_grant_followed_by_a_checkpoint_write_survives_a_crash(
    private_pg: PrivateServer,
) -> None:
    key = ThreadKey("crash-kept", "u")
    store = PostgresStore(private_pg.dsn, lease_listen=False)
    await store.asetup()
    a = await store.lease_acquire(key, "A", ttl_s=TTL, lapse_s=TTL, queue=False)
    assert a.fence is not None
    # the holder's checkpoint write commits with a flush, which covers the grant before it
    await store.write(_write(key, 0, a.fence))
    await store.aclose()
    private_pg.crash()
    private_pg.start()
    assert _lease_row(private_pg.dsn, key) == ("A", a.fence)
    store = PostgresStore(private_pg.dsn, lease_listen=False)
    try:
        refused = await store.lease_acquire(key, "B", ttl_s=TTL, lapse_s=TTL, queue=False)
        assert refused.fence is None  # A still holds it
        rec = await store.write(_write(key, 1, a.fence))
        assert rec.version == 2
    finally:
        await store.aclose()
