"""The checkpoint write's direct libpq path (``tenxgraph.storage._pq_exec``), against the real
server: values arrive typed and exact, the connection's ``prepare_threshold`` decides when the
statement is prepared (never when it is ``None``, as behind a transaction pooler), a server
that forgot the prepared statement is answered by preparing it again, server errors keep
psycopg's classes, and the connection is idle after every statement."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import psycopg
import pytest

from tenxgraph.storage import _sql
from tenxgraph.storage._pq_exec import PqStatement, execute, usable

pytestmark = [pytest.mark.anyio, pytest.mark.postgres]

ECHO = PqStatement(
    *_sql.positional(
        "SELECT %(t)b, %(b)b, %(i)b, %(f)b, %(ok)b, %(ints)b, %(blobs)b, "
        "pg_typeof(%(t)b)::text || ',' || pg_typeof(%(i)b)::text || ',' || "
        "pg_typeof(%(ints)b)::text || ',' || pg_typeof(%(blobs)b)::text"
    ),
    {
        "t": "text",
        "b": "bytea",
        "i": "int8",
        "f": "float8",
        "ok": "bool",
        "ints": "int8[]",
        "blobs": "bytea[]",
    },
)


def _params(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "t": "héllo",
        "b": b"\x00\xff",
        "i": -(2**63),
        "f": 1.5,
        "ok": True,
        "ints": [0, 2**63 - 1],
        "blobs": [b"", b"ab"],
    }
    base.update(over)
    return base


async def _prepared_here(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute(
        "SELECT count(*) FROM pg_prepared_statements WHERE name = %s",
        (ECHO.name.decode(),),
        prepare=False,
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _connect(dsn: str, threshold: int | None) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True, prepare_threshold=threshold)


async def test_values_arrive_typed_and_exact(pg_dsn: str) -> None:
    async with await _connect(pg_dsn, None) as conn:
        assert usable(conn)
        res = await execute(conn, ECHO, _params())
        assert res.ntuples == 1 and res.nfields == 8
        assert res.get_value(0, 0) == "héllo".encode()
        assert res.get_value(0, 1) == b"\x00\xff"
        assert int.from_bytes(res.get_value(0, 2), "big", signed=True) == -(2**63)
        assert struct.unpack(">d", res.get_value(0, 3)) == (1.5,)
        assert res.get_value(0, 4) == b"\x01"
        assert res.get_value(0, 7) == b"text,bigint,bigint[],bytea[]"
        assert usable(conn)  # idle again: every result was read


async def test_prepare_threshold_none_never_prepares(pg_dsn: str) -> None:
    async with await _connect(pg_dsn, None) as conn:
        for _ in range(8):
            await execute(conn, ECHO, _params())
        assert await _prepared_here(conn) == 0


async def test_prepared_after_the_threshold_and_again_after_deallocate_all(pg_dsn: str) -> None:
    async with await _connect(pg_dsn, 2) as conn:
        await execute(conn, ECHO, _params())
        await execute(conn, ECHO, _params())
        assert await _prepared_here(conn) == 0  # two executions: still sent with its text
        await execute(conn, ECHO, _params())
        assert await _prepared_here(conn) == 1
        await conn.execute("DEALLOCATE ALL", prepare=False)
        assert await _prepared_here(conn) == 0
        res = await execute(conn, ECHO, _params(t="again"))  # prepared anew, then run
        assert res.get_value(0, 0) == b"again"
        assert await _prepared_here(conn) == 1


async def test_server_errors_keep_psycopg_classes_and_leave_the_connection_idle(
    pg_dsn: str,
) -> None:
    bad = PqStatement(*_sql.positional("SELECT 1 / (%(i)b - %(i)b)"), {"i": "int8"})
    async with await _connect(pg_dsn, 0) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero) as info:
            await execute(conn, bad, {"i": 3})
        assert info.value.sqlstate == "22012"
        assert usable(conn)
        res = await execute(conn, ECHO, _params(t="after"))
        assert res.get_value(0, 0) == b"after"


async def test_values_that_cannot_be_sent_are_refused_before_sending(pg_dsn: str) -> None:
    async with await _connect(pg_dsn, None) as conn:
        with pytest.raises(psycopg.DataError, match="NUL"):
            await execute(conn, ECHO, _params(t="a\x00b"))
        with pytest.raises(psycopg.DataError, match="int8"):
            await execute(conn, ECHO, _params(i=2**63))
        with pytest.raises(psycopg.DataError, match="int8"):
            await execute(conn, ECHO, _params(ints=[2**63]))
        assert usable(conn)


async def test_a_cancelled_statement_is_cancelled_on_the_server_and_the_connection_kept(
    pg_dsn: str, pg_schema: str
) -> None:
    """A task cancelled mid-statement cancels the statement on the server (as psycopg does for
    its own queries): it never commits later, and the connection is idle and usable again."""
    table = f'"{pg_schema}".cancelled'
    slow = PqStatement(
        *_sql.positional(f"INSERT INTO {table} (v) SELECT %(i)b FROM pg_sleep(5)"), {"i": "int8"}
    )
    async with await _connect(pg_dsn, None) as conn:
        await conn.execute(f"CREATE TABLE {table} (v int8)")
        task = asyncio.ensure_future(execute(conn, slow, {"i": 1}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert usable(conn)
        res = await execute(conn, ECHO, _params(t="still here"))
        assert res.get_value(0, 0) == b"still here"
        await asyncio.sleep(0.2)
        cur = await conn.execute(f"SELECT count(*) FROM {table}")
        assert await cur.fetchone() == (0,)


async def test_a_connection_not_in_utf8_keeps_psycopgs_path(pg_dsn: str) -> None:
    """Text goes out as UTF-8, so a session in another client encoding is not served here."""
    conn = await psycopg.AsyncConnection.connect(
        pg_dsn, autocommit=True, options="-c client_encoding=LATIN1"
    )
    try:
        assert conn.info.encoding == "iso8859-1"
        assert not usable(conn)
    finally:
        await conn.close()


def test_every_parameter_needs_a_known_type() -> None:
    sql, names = _sql.positional("SELECT %(a)b, %(b)b")
    with pytest.raises(ValueError, match="no PostgreSQL type"):
        PqStatement(sql, names, {"a": "int8"})
    with pytest.raises(ValueError, match="unknown parameter type"):
        PqStatement(sql, names, {"a": "int8", "b": "money"})
