"""The checkpoint write's statement sent through libpq directly (psycopg's ``pq`` layer).

A durable step sends one statement (``CHECKPOINT_CAS``, or ``CHECKPOINT_CREATE`` for a new
thread, or one of their variants without the lease or pruning CTEs,
``tenxgraph.storage._sql.CHECKPOINT_WRITES``) and gets one ``int8`` back. Through a psycopg
cursor that costs about 25 us of client CPU per step on a 2-core VM (the query is looked up,
the parameters go through the adaptation layer one by one, the wait runs through psycopg's
generator protocol, the result through its row loaders); straight through the connection's
``pgconn`` it costs about 14 us. This module is that straight path, and nothing else:

* :class:`PqStatement` holds a statement numbered for the server (``$1 ... $n``), the
  PostgreSQL type of each parameter and a statement name derived from the SQL text;
* :func:`execute` runs it on a connection checked out of the pool, honouring the connection's
  ``prepare_threshold`` as psycopg does: ``PQsendQueryParams`` (the text every time) until the
  threshold, then ``PQsendQueryPrepared`` (the statement prepared once per connection, in a
  round trip of its own); never prepared when the threshold is ``None`` (a transaction
  pooler). Then it waits on the socket with the event loop's ``add_reader`` and reads every
  result, so the connection is idle again after.

Every value is sent in PostgreSQL's binary format and typed, so the server plans the statement
once and never has to guess a type. Failures keep psycopg's classes, so the Postgres tier
translates them exactly as before: a result with an error becomes the
``psycopg.errors`` subclass of its SQLSTATE (``psycopg.errors.error_from_result``); a
connection that breaks raises libpq's ``psycopg.OperationalError``. A task cancelled while it
waits sends the server a cancel request and waits for the statement to stop, as psycopg does
for its own queries: the statement cannot commit after the caller saw the cancellation (unless
it had finished already), and the connection stays in the pool; when that cancel fails, the
connection is closed.

Only connections in autocommit mode, idle, outside a psycopg pipeline and in ``UTF8`` client
encoding are served; the caller checks that (:func:`usable`) and uses psycopg's cursor
otherwise.
"""

from __future__ import annotations

import asyncio
import hashlib
import struct
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from tenxgraph.storage._pg_types import dump_bytea_array, dump_int8_array

__all__ = ["PqStatement", "execute", "int8_rows", "usable"]

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_IDLE = pq.TransactionStatus.IDLE
_ACTIVE = pq.TransactionStatus.ACTIVE
#: Seconds a cancelled statement may take to stop (the cancel request, then its answer) before
#: the connection is closed instead (psycopg waits as long for its own queries).
_CANCEL_TIMEOUT_S = 5.0
_CONN_OK = pq.ConnStatus.OK

#: Attribute of a psycopg connection holding, per statement name, how many times this module
#: sent the statement unprepared on it, or ``-1`` once it is prepared there (a new connection
#: object, after a reconnection, starts with nothing).
_PREPARED_ATTR = "_tenxgraph_pq_prepared"

_INT8 = struct.Struct(">q")
_FLOAT8 = struct.Struct(">d")


def _text(value: Any) -> bytes:
    """A ``text`` parameter: UTF-8, refusing NUL as psycopg's own text dumper does."""
    data = str(value).encode()
    if b"\x00" in data:
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return data


def _bytea(value: Any) -> bytes:
    return bytes(value)


def _int8(value: Any) -> bytes:
    try:
        return _INT8.pack(value)
    except struct.error as exc:
        raise psycopg.DataError(f"cannot send an int8 parameter: {exc}") from None


def _float8(value: Any) -> bytes:
    return _FLOAT8.pack(value)


def _bool(value: Any) -> bytes:
    return b"\x01" if value else b"\x00"


#: PostgreSQL type name -> (type oid, binary dumper).
KINDS: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "text": (25, _text),
    "bytea": (17, _bytea),
    "int8": (20, _int8),
    "float8": (701, _float8),
    "bool": (16, _bool),
    "int8[]": (1016, dump_int8_array),
    "bytea[]": (1001, dump_bytea_array),
}


class PqStatement:
    """One statement in the server's placeholder syntax with a type for every parameter.

    Args:
        sql: UTF-8 SQL with ``$1 ... $n`` placeholders (see
            :func:`tenxgraph.storage._sql.positional`).
        names: ``names[i]`` is the parameter name of ``$i+1``.
        kinds: the PostgreSQL type of each name, one of :data:`KINDS` (``"text"``,
            ``"bytea"``, ``"int8"``, ``"float8"``, ``"bool"``, ``"int8[]"``, ``"bytea[]"``).

    Raises:
        ValueError: a name has no kind, or a kind is unknown.
    """

    __slots__ = ("dumpers", "formats", "name", "names", "oids", "sql")

    def __init__(self, sql: bytes, names: Sequence[str], kinds: dict[str, str]) -> None:
        missing = [n for n in names if n not in kinds]
        if missing:
            raise ValueError(f"no PostgreSQL type given for parameter(s) {missing}")
        unknown = sorted({kinds[n] for n in names} - KINDS.keys())
        if unknown:
            raise ValueError(f"unknown parameter type(s) {unknown}; known: {sorted(KINDS)}")
        self.sql = sql
        self.names = tuple(names)
        self.oids = [KINDS[kinds[n]][0] for n in names]
        self.dumpers = tuple(KINDS[kinds[n]][1] for n in names)
        self.formats = [1] * len(names)
        self.name = b"_tx_" + hashlib.blake2b(sql, digest_size=8).hexdigest().encode()

    def dump(self, params: dict[str, Any]) -> list[bytes | None]:
        """The binary value of every parameter, in ``$n`` order.

        Raises:
            KeyError: a parameter is missing from ``params``.
            psycopg.DataError: a value cannot be sent as its type (NUL in a text, an integer
                beyond int8).
        """
        return [dump(params[name]) for name, dump in zip(self.names, self.dumpers, strict=True)]


def usable(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether :func:`execute` may run on ``conn``: autocommit, connected, idle, not in a
    psycopg pipeline, and with ``client_encoding`` ``UTF8`` (text parameters are sent as UTF-8;
    the server would read them in any other client encoding as that encoding, e.g. a LATIN1
    session would store ``café`` as ``cafÃ©``, so such a connection keeps psycopg's cursor,
    which encodes in the connection's encoding)."""
    pgconn = conn.pgconn
    return (
        conn.autocommit
        and pgconn.status == _CONN_OK
        and pgconn.transaction_status == _IDLE
        and pgconn.pipeline_status == pq.PipelineStatus.OFF
        and pgconn.parameter_status(b"client_encoding") == b"UTF8"
    )


async def _wait(loop: asyncio.AbstractEventLoop, fd: int, *, write: bool = False) -> None:
    """Wait until ``fd`` is readable (or writable)."""
    fut = loop.create_future()
    add, remove = (
        (loop.add_writer, loop.remove_writer) if write else (loop.add_reader, loop.remove_reader)
    )
    add(fd, _wake, fut)
    try:
        await fut
    finally:
        remove(fd)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def _results(pgconn: pq.abc.PGconn, loop: asyncio.AbstractEventLoop) -> list[pq.abc.PGresult]:
    """Every result of the statement in flight, the connection idle afterwards."""
    while pgconn.flush():
        await _wait(loop, pgconn.socket, write=True)
    out: list[pq.abc.PGresult] = []
    while True:
        while pgconn.is_busy():
            await _wait(loop, pgconn.socket)
            pgconn.consume_input()
        res = pgconn.get_result()
        if res is None:
            return out
        out.append(res)


async def _settled(
    conn: psycopg.AsyncConnection[Any], loop: asyncio.AbstractEventLoop
) -> list[Any]:
    """:func:`_results`, and when the wait is interrupted (the task cancelled, ``Ctrl-C``) with
    the statement still running, a server-side cancel first, as psycopg does for its own
    queries: the statement stops unless it already finished, and the connection is idle again,
    so the pool keeps it. A cancel that fails or is interrupted in turn closes the connection
    (the pool then replaces it). The interruption is re-raised either way."""
    pgconn = conn.pgconn
    try:
        return await _results(pgconn, loop)
    except (asyncio.CancelledError, KeyboardInterrupt):
        if pgconn.transaction_status == _ACTIVE:
            try:
                await conn.cancel_safe(timeout=_CANCEL_TIMEOUT_S)
                await asyncio.wait_for(_results(pgconn, loop), _CANCEL_TIMEOUT_S)
            except BaseException:  # noqa: BLE001 - unknown state: never reuse the connection
                pgconn.finish()
        raise


def _check(results: list[pq.abc.PGresult], conn: psycopg.AsyncConnection[Any]) -> pq.abc.PGresult:
    """The statement's result; its error as psycopg's exception class when it failed."""
    for res in results:
        if res.status not in (_TUPLES_OK, _COMMAND_OK):
            raise error_from_result(res, encoding=conn.info.encoding)
    if not results:  # pragma: no cover - libpq always gives one result per statement
        raise psycopg.InterfaceError("the server sent no result for the statement")
    return results[-1]


async def execute(
    conn: psycopg.AsyncConnection[Any],
    stmt: PqStatement,
    params: dict[str, Any],
) -> Any:
    """Run ``stmt`` on ``conn`` (checked with :func:`usable`) and return its libpq result.

    The connection's ``prepare_threshold`` decides as it does for psycopg's own statements:
    ``None`` sends the statement with its text every time (what a transaction pooler needs);
    a number ``n`` sends it with its text for its first ``n`` executions on this connection,
    then prepares it server-side once and runs it by name from then on.

    Args:
        conn: a pooled connection this task holds, in autocommit mode.
        stmt: the statement.
        params: a value for every name of ``stmt``.

    Returns:
        The ``PGresult`` of the statement (``TUPLES_OK`` or ``COMMAND_OK``).

    Raises:
        psycopg.Error: the server refused the statement (the ``psycopg.errors`` class of its
            SQLSTATE), a value could not be sent (``DataError``), or the connection broke
            (``OperationalError``).
    """
    values = stmt.dump(params)
    pgconn = conn.pgconn
    loop = asyncio.get_running_loop()
    threshold = conn.prepare_threshold
    counts: dict[bytes, int] | None = getattr(conn, _PREPARED_ATTR, None)
    if counts is None:
        counts = {}
        setattr(conn, _PREPARED_ATTR, counts)
    seen = counts.get(stmt.name, 0)
    if threshold is None or (0 <= seen < threshold):
        if threshold is not None:
            counts[stmt.name] = seen + 1
        pgconn.send_query_params(
            stmt.sql, values, param_types=stmt.oids, param_formats=stmt.formats, result_format=1
        )
        return _check(await _settled(conn, loop), conn)
    for attempt in (0, 1):
        if seen >= 0:  # not prepared on this connection yet
            pgconn.send_prepare(stmt.name, stmt.sql, param_types=stmt.oids)
            _check(await _settled(conn, loop), conn)
            counts[stmt.name] = seen = -1
        pgconn.send_query_prepared(stmt.name, values, param_formats=stmt.formats, result_format=1)
        try:
            return _check(await _settled(conn, loop), conn)
        except psycopg.errors.InvalidSqlStatementName:
            # The server forgot the statement (``DEALLOCATE ALL``, which psycopg itself sends
            # after a ``ROLLBACK`` or DDL on a connection where it prepared statements): it did
            # not run, so prepare it again and send it once more.
            counts[stmt.name] = seen = 0
            if attempt:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def int8_rows(res: Any) -> list[tuple[Any, ...]]:
    """The rows of a binary result of one ``int8`` column, as 1-tuples of ``int`` (``[]`` for a
    statement that returned no rows set)."""
    if res.status != _TUPLES_OK:
        return []
    unpack = _INT8.unpack
    return [unpack(res.get_value(i, 0)) for i in range(res.ntuples)]
