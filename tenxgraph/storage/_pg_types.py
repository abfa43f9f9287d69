"""Binary parameter types of the Postgres tier's hot path: ``int8[]``, ``bytea[]``, ``int8``, ``text``.

psycopg adapts a Python ``list`` parameter with its generic list dumper, written in Python: per
call it scans the list to find the element type, picks (``upgrade``) a dumper for it, then dumps
element by element. The checkpoint write sends three such lists (``ranges``, ``seqs``,
``datas``), which made parameter dumping a good part of the client's CPU per step. Here the hot
path's arrays are wrapped in :class:`Int8Array` / :class:`ByteaArray` (plain ``list``
subclasses) whose dumpers write PostgreSQL's binary array format in one ``struct.pack`` (plus
a ``join`` for ``bytea``): one Python call per parameter, no element scan, no upgrade.

:class:`BigInt` is an ``int`` subclass like psycopg's ``Int8`` but without a Python-level
``__new__`` (psycopg's costs a Python call per value), dumped by psycopg's own binary ``int8``
dumper. :class:`Text` is a ``str`` sent as a binary ``text`` also by psycopg's raw cursors
(which would send a plain ``str`` untyped), for the statements the tier sends with the server's
own ``$n`` placeholders (see :func:`tenxgraph.storage._sql.positional`).

The dumpers are registered per connection (:func:`register`, called by the Postgres tier the
first time it uses a connection, an application's pooled ones included), never on psycopg's
global adapters. The types only ever come from tenxgraph, so no other value is adapted
differently.
Every value keeps its Postgres type whatever its content (an empty array is still ``int8[]``),
so the statements keep one parameter signature and are prepared once per connection.
"""

from __future__ import annotations

import struct
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format
from psycopg.types.numeric import Int8BinaryDumper
from psycopg.types.string import StrBinaryDumper

__all__ = [
    "BigInt",
    "ByteaArray",
    "Int8Array",
    "Text",
    "dump_bytea_array",
    "dump_int8_array",
    "register",
]

_INT8_OID = 20
_BYTEA_OID = 17
_INT8_ARRAY_OID = 1016
_BYTEA_ARRAY_OID = 1001

#: ndim, flags (no NULL), element oid, then the one dimension's length and lower bound.
_HEADER = struct.Struct(">iiIii")
_LENGTH = struct.Struct(">i")
_EMPTY_INT8 = struct.pack(">iiI", 0, 0, _INT8_OID)
_EMPTY_BYTEA = struct.pack(">iiI", 0, 0, _BYTEA_OID)
#: ``struct.Struct`` of an int8 array of n elements (every element: length 8, value), by n.
_INT8_BODIES: dict[int, struct.Struct] = {}
_MAX_CACHED_BODIES = 64


class Int8Array(list[int]):
    """A list of Python ints sent as a one-dimensional Postgres ``int8[]`` (binary, no NULL)."""

    __slots__ = ()


class ByteaArray(list[bytes]):
    """A list of ``bytes`` sent as a one-dimensional Postgres ``bytea[]`` (binary, no NULL)."""

    __slots__ = ()


class BigInt(int):
    """A Python int sent as a Postgres ``int8`` whatever its magnitude."""

    __slots__ = ()


class Text(str):
    """A Python str sent as a Postgres ``text`` (binary), also by a raw cursor."""

    __slots__ = ()


def _int8_body(n: int) -> struct.Struct:
    body = _INT8_BODIES.get(n)
    if body is None:
        body = struct.Struct(">iiIii" + "iq" * n)
        if len(_INT8_BODIES) < _MAX_CACHED_BODIES:
            _INT8_BODIES[n] = body
    return body


def dump_int8_array(obj: Any) -> bytes:
    """PostgreSQL's binary ``int8[]`` (one dimension, no NULL) of a sequence of ints.

    Args:
        obj: the ints (an :class:`Int8Array` or any sequence).

    Returns:
        The array's binary wire format.

    Raises:
        psycopg.DataError: an element is not an int or out of the int8 range.
    """
    n = len(obj)
    if not n:
        return _EMPTY_INT8
    fields = [8] * (2 * n)
    fields[1::2] = obj
    try:
        return _int8_body(n).pack(1, 0, _INT8_OID, n, 1, *fields)
    except struct.error as exc:
        raise psycopg.DataError(f"cannot send an int8[] element: {exc}") from None


def dump_bytea_array(obj: Any) -> bytes:
    """PostgreSQL's binary ``bytea[]`` (one dimension, no NULL) of a sequence of byte strings.

    Args:
        obj: ``bytes``, ``bytearray`` or ``memoryview`` items (a :class:`ByteaArray` or any
            sequence).

    Returns:
        The array's binary wire format.
    """
    n = len(obj)
    if not n:
        return _EMPTY_BYTEA
    pack = _LENGTH.pack
    parts = [_HEADER.pack(1, 0, _BYTEA_OID, n, 1)]
    for data in obj:
        parts.append(pack(len(data)))
        parts.append(data)
    return b"".join(parts)


class Int8ArrayBinaryDumper(Dumper):
    """Binary dumper of :class:`Int8Array` (:func:`dump_int8_array`)."""

    format = Format.BINARY
    oid = _INT8_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        """PostgreSQL's binary ``int8[]`` of ``obj`` (see :func:`dump_int8_array`)."""
        return dump_int8_array(obj)


class ByteaArrayBinaryDumper(Dumper):
    """Binary dumper of :class:`ByteaArray` (:func:`dump_bytea_array`)."""

    format = Format.BINARY
    oid = _BYTEA_ARRAY_OID

    def dump(self, obj: Any) -> bytes:
        """PostgreSQL's binary ``bytea[]`` of ``obj`` (see :func:`dump_bytea_array`)."""
        return dump_bytea_array(obj)


def register(conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]) -> None:
    """Teach ``conn`` to dump the types of this module (idempotent; cursors created from
    ``conn`` afterwards know them).

    Args:
        conn: a psycopg connection.
    """
    adapters = conn.adapters
    adapters.register_dumper(Int8Array, Int8ArrayBinaryDumper)
    adapters.register_dumper(ByteaArray, ByteaArrayBinaryDumper)
    adapters.register_dumper(BigInt, Int8BinaryDumper)
    adapters.register_dumper(Text, StrBinaryDumper)
