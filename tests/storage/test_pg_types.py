"""The Postgres tier's own binary parameter types (``tenxgraph.storage._pg_types``), checked
against the real server: every value arrives with its Postgres type and its exact content,
empty arrays included, and a value that cannot be sent fails as a psycopg error (which the
tier translates) instead of being sent altered."""

from __future__ import annotations

import psycopg
import pytest

from tenxgraph.storage._pg_types import BigInt, ByteaArray, Int8Array, register

TYPES_QUERY = (
    "SELECT %(a)b, %(b)b, %(i)b, pg_typeof(%(a)b)::text, pg_typeof(%(b)b)::text, "
    "pg_typeof(%(i)b)::text"
)


@pytest.mark.parametrize(
    ("ints", "blobs", "scalar"),
    [
        ([], [], 0),
        ([0, -1, 2**63 - 1, -(2**63)], [b"", b"\x00abc", bytearray(b"xy"), memoryview(b"z")], -5),
        (list(range(300)), [b"q" * 100_000] * 3, 2**40),
    ],
)
def test_values_arrive_typed_and_exact(
    pg_dsn: str, ints: list[int], blobs: list[bytes], scalar: int
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        register(conn)
        row = conn.execute(
            TYPES_QUERY, {"a": Int8Array(ints), "b": ByteaArray(blobs), "i": BigInt(scalar)}
        ).fetchone()
    assert row is not None
    assert row[0] == ints
    assert [bytes(x) for x in row[1]] == [bytes(x) for x in blobs]
    assert row[2] == scalar
    # the types do not depend on the values (one parameter signature per statement)
    assert row[3:] == ("bigint[]", "bytea[]", "bigint")


def test_an_unsendable_element_is_a_psycopg_error(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        register(conn)
        with pytest.raises(psycopg.DataError, match="int8"):
            conn.execute("SELECT %(a)b", {"a": Int8Array([2**63])})
        with pytest.raises(psycopg.DataError, match="int8"):
            conn.execute("SELECT %(a)b", {"a": Int8Array([None])})


def test_registration_is_per_connection(pg_dsn: str) -> None:
    """The types are taught to the connections the tier uses, never to psycopg's global
    adapters: an application's other connections adapt every value as before."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        register(conn)
        register(conn)  # idempotent
        assert conn.execute("SELECT %(a)b", {"a": Int8Array([1])}).fetchone() == ([1],)
    assert psycopg.adapters.get_dumper(list, psycopg.adapt.PyFormat.BINARY) is (
        psycopg.adapters.get_dumper(Int8Array, psycopg.adapt.PyFormat.BINARY)
    )
