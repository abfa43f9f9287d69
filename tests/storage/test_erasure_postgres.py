"""Erasure on Postgres against a checkpoint write that commits while the erasure waits for the
thread's row: the rows that write added are not in the erasure's first snapshot, and its second
pass over the same thread ids removes them (docs/how-to/erasure-retention.md)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import sql

from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_write_committed_during_the_erasure_leaves_no_row(
    pg_dsn: str, pg_schema: str
) -> None:
    cp = PgCheckpointer(pg_dsn, schema=pg_schema)
    await cp.asetup()
    cfg = {"thread_id": "raced", "user_id": "rita"}
    await cp.aput_state(cfg, AgentState(context=[Message.text_message("first of rita")]))
    t = {name: sql.Identifier(pg_schema, f"tenxgraph_{name}") for name in ("threads", "messages")}
    async with await psycopg.AsyncConnection.connect(pg_dsn) as writer:
        # A writer in the middle of its compare-and-swap: the thread's row locked, a new
        # message row inserted, not committed yet.
        await writer.execute(
            sql.SQL("UPDATE {} SET version = version + 1 WHERE thread_id = 'raced'").format(
                t["threads"]
            )
        )
        await writer.execute(
            sql.SQL("INSERT INTO {} (thread_id, seq, data) VALUES ('raced', 99, %s)").format(
                t["messages"]
            ),
            (b'{"text": "late row of rita"}',),
        )
        erase = asyncio.ensure_future(cp.aerase_user("rita"))
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as watch:
            async with asyncio.timeout(30):  # until the erasure waits for the row lock
                while True:
                    cur = await watch.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                        "AND query LIKE %s",
                        (f"%{pg_schema}%",),
                    )
                    row = await cur.fetchone()
                    if row is not None and row[0] > 0:
                        break
                    await asyncio.sleep(0.01)
        assert not erase.done()
        await writer.commit()
        result = await erase
    assert result.thread_ids == ("raced",)
    assert result.rows["messages"] == 2  # the first one and the late one
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE thread_id = 'raced'").format(t["messages"])
        )
        row = await cur.fetchone()
        assert row is not None and row[0] == 0
    await cp.aclose()
