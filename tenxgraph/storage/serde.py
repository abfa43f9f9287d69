"""Encoding of state and messages to JSON bytes (orjson), lossless or refused.

Stored data decodes without executing anything: no pickle, and no class named in storage is ever
imported. Values JSON cannot carry exactly are written as small tagged objects
``{"__tx__": tag, "v": ...}`` (datetime, date, time, timedelta, UUID, bytes, bytearray, Decimal,
set, frozenset, tuple, non-finite floats, integers beyond 64 bits as decimal strings of at most
``MAX_INT_DIGITS`` digits, dicts with non-string keys, strings with lone surrogates).
Pydantic models and Enums are written as their data and rebuilt by validating against the *declared* state class. A write verifies that every state field decodes
back to an equal value of the same type; otherwise it raises :class:`SerializationError` naming
the JSONPath of the first value that would not survive (``$.profile.created``), before anything
is written.

Reads go through ``decode_checkpoint`` (state values and messages of one version) and
``decode_payload`` (thread metadata, ledger results): whatever is wrong with the stored
bytes (not JSON, too deep, a tag holding garbage, values failing the state class), the caller
gets ``SerializationError`` naming the thread, the version and the JSONPath, never a raw
``orjson.JSONDecodeError``, pydantic ``ValidationError``, ``OverflowError`` or
``RecursionError``.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import datetime as _dt
import decimal
import enum
import gc
import math
import threading
import uuid
import zoneinfo
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

import orjson
from pydantic import BaseModel
from pydantic_core import CoreSchema, SchemaValidator

from tenxgraph.core.exceptions import SerializationError, ValidationError
from tenxgraph.core.state.message import Message

__all__ = [
    "MAX_INT_DIGITS",
    "MessageMemo",
    "WRITE_TOKEN_KEY",
    "decode_checkpoint",
    "decode_message",
    "decode_message_array",
    "decode_payload",
    "decode_values",
    "dumps",
    "encode_message",
    "messages_decoded",
    "encode_values",
    "loads",
]

_TAG = "__tx__"

# Set by ``_enc`` when it meets a value whose exact type JSON plus the tags cannot carry alone
# (a Pydantic model or Enum of the application, a subclass of a builtin): only then does
# ``encode_values`` pay for a full decode-and-compare check. Thread-local: sync callers may
# encode from several threads.
_flags = threading.local()
_TAG_B = b'"__tx__"'
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

#: Largest number of decimal digits of an integer that is stored (as a tagged decimal string when
#: it does not fit 64 bits). Python's default limit for converting integers to and from text
#: (``sys.get_int_max_str_digits()``) is 4300, so a longer integer could not be read back by a
#: default interpreter: it is refused at write with ``SerializationError``.
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS

#: Key of the write token in the encoded values object of a checkpoint. Pydantic cannot declare
#: a field whose name starts with ``_``, so it never collides with a state field, and
#: ``decode_values`` drops it (it drops every undeclared key).
WRITE_TOKEN_KEY = "_tx_write"


def _fail(path: str, value: Any, why: str = "") -> SerializationError:
    tname = type(value).__name__
    return SerializationError(
        f"cannot store the value at {path} (type {tname}){': ' + why if why else ''}; declare "
        "it in the state class with a supported type (str, int, float, bool, None, list, dict, "
        "datetime, date, time, timedelta, UUID, bytes, Decimal, set, tuple, Enum, Pydantic model)",
        context={"path": path, "type": tname},
    )


def _enc(value: Any, path: str, strict_str: bool) -> Any:
    """Turn ``value`` into orjson-native data, tagging what JSON cannot hold exactly."""
    t = type(value)
    if value is None or t is bool:
        return value
    if t is str:
        if strict_str and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raw = value.encode("utf-16-le", "surrogatepass")
                return {_TAG: "u16", "v": base64.b64encode(raw).decode("ascii")}
        return value
    if t is int:
        if _I64_MIN <= value <= _I64_MAX:
            return value
        if not -_INT_LIMIT < value < _INT_LIMIT:
            raise _fail(
                path,
                value,
                f"an integer of more than {MAX_INT_DIGITS} digits cannot be read back by a "
                "default Python (sys.get_int_max_str_digits()) nor by most JSON readers; store "
                "it as a string or bytes",
            )
        return {_TAG: "int", "v": str(value)}
    if t is float:
        if math.isfinite(value):
            return value
        return {_TAG: "float", "v": repr(value)}
    if t is list:
        return [_enc(v, f"{path}[{i}]", strict_str) for i, v in enumerate(value)]
    if t is not dict and isinstance(value, dict):
        _flags.risky = True
    if t is dict or isinstance(value, dict):
        if all(type(k) is str for k in value):
            out = {k: _enc(v, f"{path}.{k}", strict_str) for k, v in value.items()}
            if _TAG in value:
                return {_TAG: "dict", "v": out}
            return out
        return {
            _TAG: "kdict",
            "v": [
                [_enc(k, f"{path}<key>", strict_str), _enc(v, f"{path}[{k!r}]", strict_str)]
                for k, v in value.items()
            ],
        }
    if isinstance(value, BaseModel):
        if type(value) not in _TRUSTED:
            _flags.risky = True
        return {
            name: _enc(getattr(value, name), f"{path}.{name}", strict_str)
            for name in type(value).model_fields
        }
    if isinstance(value, enum.Enum):
        if type(value) not in _TRUSTED:
            _flags.risky = True
        return _enc(value.value, path, strict_str)
    if isinstance(value, list):
        _flags.risky = True
        return [_enc(v, f"{path}[{i}]", strict_str) for i, v in enumerate(value)]
    if t is tuple:
        return {
            _TAG: "tuple",
            "v": [_enc(v, f"{path}[{i}]", strict_str) for i, v in enumerate(value)],
        }
    if t is set or t is frozenset:
        items = [_enc(v, f"{path}[{i}]", strict_str) for i, v in enumerate(value)]
        return {_TAG: "set" if t is set else "fset", "v": items}
    if t is _dt.datetime:
        tz = value.tzinfo
        if tz is None or type(tz) is _dt.timezone:
            return {_TAG: "dt", "v": value.isoformat()}
        if isinstance(tz, zoneinfo.ZoneInfo) and tz.key:
            # A named zone keeps its daylight-saving rules: store the instant and the zone key.
            return {_TAG: "dtz", "v": value.isoformat(), "z": tz.key}
        _flags.risky = True  # another tzinfo implementation: verified, refused if lossy
        return {_TAG: "dt", "v": value.isoformat()}
    if t is _dt.date:
        return {_TAG: "date", "v": value.isoformat()}
    if t is _dt.time:
        return {_TAG: "time", "v": value.isoformat()}
    if t is _dt.timedelta:
        return {_TAG: "td", "v": [value.days, value.seconds, value.microseconds]}
    if t is uuid.UUID:
        return {_TAG: "uuid", "v": str(value)}
    if t is bytes:
        return {_TAG: "bytes", "v": base64.b64encode(value).decode("ascii")}
    if t is bytearray:
        return {_TAG: "barr", "v": base64.b64encode(value).decode("ascii")}
    if t is decimal.Decimal:
        return {_TAG: "dec", "v": str(value)}
    if isinstance(value, (str, int, float)):  # subclasses other than Enum: type may be lost
        _flags.risky = True
        base = str if isinstance(value, str) else int if isinstance(value, int) else float
        return _enc(base(value), path, strict_str)
    raise _fail(path, value)


class _Slow(Exception):
    """Raised by :func:`_fast` where :func:`_enc` must run with paths (to name a failure)."""


#: Types whose values :func:`_fast` returns as they are: orjson writes them exactly as
#: :func:`_enc` would, and they never need the decode-and-compare check. Extended below with
#: the runtime's own ``str`` enums, once they are known (``_TRUSTED_ENUMS``).
_LEAF = frozenset({str, bool, type(None)})


def _fast(value: Any) -> Any:
    """:func:`_enc` without JSONPaths (``strict_str`` off), for the common case.

    Plain data, the runtime's own models (``Message``, its blocks, ``ExecutionState``...:
    exact field lists, no subclass) and enums are encoded here; anything else goes through
    :func:`_enc`, which tags it or flags it risky exactly as before. Where ``_enc`` would raise,
    this raises :class:`_Slow` instead and the caller encodes again with paths, so the error
    names the same JSONPath (failures are rare: no path string is built on the way).
    """
    t = type(value)
    if t in _LEAF:
        return value
    if t is int:
        if _I64_MIN <= value <= _I64_MAX:
            return value
    elif t is float:
        if value - value == 0.0:  # finite (inf - inf and nan - nan are nan)
            return value
    elif t is dict:
        if not value:  # no comprehension made for an empty dict (internal_data, metadata)
            return {}
        out = {}  # one loop checking keys and encoding values (no comprehension frame)
        for k, v in value.items():
            if type(k) is not str:
                raise _Slow
            out[k] = v if type(v) in _LEAF else _fast(v)
        if _TAG in value:
            return {_TAG: "dict", "v": out}
        return out
    elif t is list:
        if not value:  # no comprehension made for an empty list (annotations)
            return []
        if len(value) == 1:  # nor for one item (a message's usual content)
            v = value[0]
            return [v if type(v) in _LEAF else _fast(v)]
        return [v if type(v) in _LEAF else _fast(v) for v in value]
    else:
        model = _MODEL_ENCODERS.get(t)
        if model is not None:
            return model(value)
        if t in _TRUSTED_ENUMS:
            # ``_value_`` is the member's plain attribute; ``.value`` goes through enum's
            # Python-level descriptor (twice per checkpoint for ExecutionState's enums).
            v = value._value_
            return v if type(v) in _LEAF else _fast(v)
    try:
        return _enc(value, "$", False)
    except SerializationError:
        raise _Slow from None


def _dec(value: Any) -> Any:
    """Inverse of :func:`_enc` for tagged objects (models and enums are left to validation)."""
    t = type(value)
    if t is list:
        return [_dec(v) for v in value]
    if t is not dict:
        return value
    tag = value.get(_TAG)
    if tag == "dtz" and len(value) == 3 and "v" in value and "z" in value:
        return _dt.datetime.fromisoformat(value["v"]).astimezone(zoneinfo.ZoneInfo(value["z"]))
    if tag is None or len(value) != 2 or "v" not in value:
        return {k: _dec(v) for k, v in value.items()}
    v = value["v"]
    if tag == "dt":
        return _dt.datetime.fromisoformat(v)
    if tag == "uuid":
        return uuid.UUID(v)
    if tag == "bytes":
        return base64.b64decode(v)
    if tag == "barr":
        return bytearray(base64.b64decode(v))
    if tag == "dec":
        return decimal.Decimal(v)
    if tag == "set":
        return {_dec(x) for x in v}
    if tag == "fset":
        return frozenset(_dec(x) for x in v)
    if tag == "tuple":
        return tuple(_dec(x) for x in v)
    if tag == "date":
        return _dt.date.fromisoformat(v)
    if tag == "time":
        return _dt.time.fromisoformat(v)
    if tag == "td":
        return _dt.timedelta(days=v[0], seconds=v[1], microseconds=v[2])
    if tag == "int":
        return int(v)
    if tag == "float":
        return float(v)
    if tag == "u16":
        return base64.b64decode(v).decode("utf-16-le", "surrogatepass")
    if tag == "dict":
        return {k: _dec(x) for k, x in v.items()}
    if tag == "kdict":
        return {_dec(k): _dec(x) for k, x in v}
    return {k: _dec(x) for k, x in value.items()}


def _compact(data: bytes) -> bytes:
    """A copy of ``data`` allocated at its exact size (see :func:`dumps`)."""
    return bytes(memoryview(data))


def dumps(value: Any, path: str = "$") -> bytes:
    """Encode any supported value to JSON bytes (tagged where needed).

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` with ``context["path"]`` for a value
            of an unsupported type.
    """
    try:
        try:
            enc = _fast(value)
        except _Slow:
            enc = _enc(value, path, False)  # raises, naming the path
        # orjson hands back a bytes object with its whole output buffer still allocated
        # (4 KB at least, several times the JSON's size above it); kept in a cache, a
        # 300-byte message would hold 4 KB. A copy of exactly the JSON's size costs about
        # 0.2 us and lets the caches' byte counts be the memory they hold.
        return _compact(orjson.dumps(enc))
    except orjson.JSONEncodeError:
        # Lone surrogates: re-encode with per-string checks (rare, so not on the fast path).
        try:
            return _compact(orjson.dumps(_enc(value, path, True)))
        except orjson.JSONEncodeError as exc:  # pragma: no cover - defensive
            raise _fail(path, value, str(exc)) from None


def loads(data: bytes | str | memoryview) -> Any:
    """Decode JSON bytes written by :func:`dumps` (tags restored; models stay dicts)."""
    if isinstance(data, memoryview):
        data = bytes(data)
    obj = orjson.loads(data)
    tagged = _TAG_B in data if isinstance(data, bytes) else _TAG.join('""') in data
    if tagged:
        return _dec(obj)
    return obj


# -- messages -------------------------------------------------------------------------------------
def encode_message(msg: Message, path: str = "$.context[?]") -> bytes:
    """Encode one message.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` for a value (in ``metadata``, a tool
            result, ``raw``...) of an unsupported type, or one that would not decode back to
            the same type (an Enum or Pydantic model inside ``metadata`` comes back as plain
            data, so it is refused); ``context["path"]`` names it.
    """
    _flags.risky = False
    data = dumps(msg, path)
    if _flags.risky:
        back = decode_message(data)
        bad = _strict_equal(msg, back, path)
        if bad:
            raise _fail(bad, msg, "it would not decode back to the same type")
    return data


class _DecodeCount:
    """How many messages ``decode_message`` has decoded in this process (for tests/benchmarks)."""

    n = 0


def messages_decoded() -> int:
    """How many messages this process has decoded so far (``decode_message`` calls).

    Returns:
        A monotonic count; tests and benchmarks compare it before and after a call to check
        that reads decode each stored message row once.
    """
    return _DecodeCount.n


def decode_message(data: bytes | str | memoryview) -> Message:
    """Rebuild a Message from ``encode_message`` output (validated, never imported).

    Args:
        data: the encoded message (bytes, text or a buffer).

    Returns:
        The ``Message``.

    Raises:
        pydantic.ValidationError, orjson.JSONDecodeError: for data that is not an encoded
            message (callers turn these into ``SerializationError``).
    """
    _DecodeCount.n += 1
    return _decode_row(data)


def _row_validator() -> SchemaValidator | None:
    """The fast validator of stored message rows, or ``None`` to use ``Message``'s own.

    It is ``Message``'s own core schema (the same fields, block classes and constraints) without
    the ``content`` field's ``before`` function, which turns a ``str``, ``None`` or a single
    block into a list: stored rows always hold a list there (``encode_message`` writes the
    model's list), and that Python call, made from the Rust validator for every message, cost
    about a third of decoding one. pydantic-core reuses a model's prebuilt validator for any
    ``model`` schema of that class, so the validator checks the fields (``model-fields``) and
    :func:`_build` makes the instance as ``model_construct`` does. Callers fall back to the
    model's own validator when this one refuses a row (so a row with a ``str`` content, written
    by hand, still decodes) and the error reported is always the model's.

    ``None`` when ``Message`` does not have the expected shape (another pydantic version, a
    ``model_post_init``, private attributes, a custom ``__init__``).
    """
    try:
        if Message.__pydantic_post_init__ is not None or Message.__private_attributes__:
            return None
        schema: Any = copy.deepcopy(Message.__pydantic_core_schema__)
        model = schema["schema"] if schema["type"] == "definitions" else schema
        if model["type"] != "model" or model["cls"] is not Message or model["custom_init"]:
            return None
        fields = model["schema"]
        if fields["type"] != "model-fields" or model.get("config", {}).get(
            "extra_fields_behavior"
        ) not in ("ignore", None):
            return None
        content = fields["fields"]["content"]["schema"]
        inner = content["schema"] if content["type"] == "default" else content
        func = inner.get("function", {}).get("function")
        if inner["type"] != "function-before" or getattr(func, "__func__", None) is not (
            Message._str_to_block.__func__  # type: ignore[attr-defined]
        ):
            return None
        if inner is content:
            fields["fields"]["content"]["schema"] = inner["schema"]
        else:
            content["schema"] = inner["schema"]
        fields = {**fields, "extra_behavior": "ignore"}
        # the shape checks above are what make these casts true
        if schema["type"] == "definitions":
            return SchemaValidator(cast(CoreSchema, {**schema, "schema": fields}))
        return SchemaValidator(cast(CoreSchema, fields))
    except Exception:  # noqa: BLE001 - an unexpected schema shape: the model's validator
        return None


_ROW = _row_validator()


def _list_validator() -> SchemaValidator | None:
    """The validator of a JSON array of stored message rows: the items are validated by the
    very core schema :func:`_row_validator` builds (so one array decodes exactly as its rows
    would one by one), in one pydantic-core call instead of one per row. ``None`` when the
    fast row validator is not available."""
    if _ROW is None:
        return None
    try:
        schema: Any = copy.deepcopy(Message.__pydantic_core_schema__)
        model = schema["schema"] if schema["type"] == "definitions" else schema
        fields = model["schema"]
        content = fields["fields"]["content"]["schema"]
        inner = content["schema"] if content["type"] == "default" else content
        if inner is content:
            fields["fields"]["content"]["schema"] = inner["schema"]
        else:
            content["schema"] = inner["schema"]
        items = {"type": "list", "items_schema": {**fields, "extra_behavior": "ignore"}}
        if schema["type"] == "definitions":
            return SchemaValidator(cast(CoreSchema, {**schema, "schema": items}))
        return SchemaValidator(cast(CoreSchema, items))
    except Exception:  # noqa: BLE001 - an unexpected schema shape: decode row by row
        return None


_ROWS = _list_validator()
_new = object.__new__
_set = object.__setattr__


def _build(fields: tuple[dict[str, Any], Any, set[str]]) -> Message:
    """A ``Message`` from the ``model-fields`` validator's answer (what ``model_construct``
    and pydantic-core's model validator do for a model without extras or private state)."""
    msg: Message = _new(Message)
    _set(msg, "__dict__", fields[0])
    _set(msg, "__pydantic_fields_set__", fields[2])
    _set(msg, "__pydantic_extra__", None)
    _set(msg, "__pydantic_private__", None)
    return msg


def _decode_row(data: bytes | str | memoryview) -> Message:
    """One stored row as a ``Message``; exceptions as :func:`decode_message`.

    A row without tagged values is validated from its JSON bytes by pydantic-core in one call
    (no intermediate Python objects); a tagged row is parsed, its tags restored, then validated.
    Whatever the fast validator refuses (a row written by hand with a ``str`` content, nesting
    deeper than its parser allows, a damaged row) goes through the model's own
    ``Message.model_validate(loads(data))``, whose exception is the one raised. The JSON parser
    of pydantic-core reads a few texts orjson refuses (``NaN`` / ``Infinity`` literals, an
    integer beyond 64 bits, which orjson reads as a float): ``encode_message`` writes none of
    them (they are tagged), so only a row written outside tenxgraph can hold one, and it then
    decodes to those values.
    """
    if _ROW is not None:
        if isinstance(data, memoryview):
            data = bytes(data)
        tagged = _TAG_B in data if isinstance(data, bytes) else _TAG.join('""') in data
        try:
            if tagged:
                return _build(_ROW.validate_python(_dec(orjson.loads(data))))
            return _build(_ROW.validate_json(data))
        except Exception:  # noqa: BLE001 - the model's own path decides, and names the error
            pass
    return Message.model_validate(loads(data))


def decode_message_array(body: bytes, count: int) -> list[Message] | None:
    """Decode ``count`` stored message rows joined by commas (``row,row,...``, the layout of
    the Redis tier) in one pydantic-core call, or answer ``None`` to say "decode them row by
    row" (:func:`decode_message`).

    The rows are validated as the items of one JSON array by the same core schema as
    :func:`decode_message`'s fast path, so a row decodes to the same ``Message`` either way.
    ``None`` (nothing is raised) when that fast path would not decide alone: a row holds tagged
    values (``{"__tx__": ...}``, restored only row by row), the validator refuses something
    (a row written by hand with a ``str`` content, a damaged row: the row-by-row path then
    accepts it through the model's own validator or raises the error a reader reports), the
    array does not hold exactly ``count`` items, or the fast validator is unavailable. Measured
    on 10,000 rows of ~460 bytes: 34 ms of CPU against 37 ms row by row; most of the cost is
    pydantic-core's validation itself (~28 ms), which both paths pay.

    Args:
        body: the rows, each a JSON object, joined by ``,`` (no brackets).
        count: the number of rows ``body`` holds.

    Returns:
        The messages in row order (``len == count``), or ``None``.
    """
    if _ROWS is None or _TAG_B in body:
        return None
    if count == 0:
        return [] if not body else None
    try:
        with _collector_paused(count >= _GC_PAUSE_ROWS):
            items = _ROWS.validate_json(b"[" + body + b"]")
            if len(items) != count:
                return None
            out = list(map(_build, items))
    except Exception:  # noqa: BLE001 - the row-by-row path decides and names the error
        return None
    _DecodeCount.n += count
    return out


class MessageMemo:
    """Decoded messages of one thread, by seq, for the length of one read (a history call).

    Versions of a thread share most of their message rows; decoding each row once per call
    instead of once per version keeps a full history ``O(rows)`` instead of
    ``O(versions x rows)``. The snapshots then share those ``Message`` objects (messages are
    values: build a new one rather than mutate one in place).
    """

    __slots__ = ("_by_seq",)

    def __init__(self) -> None:
        self._by_seq: dict[int, tuple[bytes | str | memoryview, Message]] = {}

    def decode(self, seq: int, data: bytes | str | memoryview) -> Message:
        """The message of row ``seq`` whose stored bytes are ``data``, decoded at most once.

        Args:
            seq: the row's seq within the thread.
            data: the row's stored bytes (compared with the cached row's, so a seq whose data
                differs is decoded again).

        Returns:
            The ``Message``.

        Raises:
            Exception: as ``decode_message``.
        """
        hit = self._by_seq.get(seq)
        if hit is not None and (hit[0] is data or hit[0] == data):
            return hit[1]
        msg = decode_message(data)
        self._by_seq[seq] = (data, msg)
        return msg


# -- state values (every field except ``context``) -----------------------------------------------
def _strict_equal(a: Any, b: Any, path: str) -> str | None:
    """Return the path of the first difference in value or type between ``a`` and ``b``."""
    if type(a) is not type(b):
        return path
    if isinstance(a, BaseModel):
        for name in type(a).model_fields:
            bad = _strict_equal(getattr(a, name), getattr(b, name), f"{path}.{name}")
            if bad:
                return bad
        return None
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return path
        for k, v in a.items():
            bad = _strict_equal(v, b[k], f"{path}.{k}")
            if bad:
                return bad
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            bad = _strict_equal(x, y, f"{path}[{i}]")
            if bad:
                return bad
        return None
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return None
    if isinstance(a, _dt.datetime) and a.tzinfo != b.tzinfo:
        return path
    try:
        return None if a == b else path
    except Exception:  # noqa: BLE001 - an object that cannot compare cannot round-trip
        return path


def encode_values(state: BaseModel, *, verify: bool = True, token: str | None = None) -> bytes:
    """Encode every field of ``state`` except ``context`` into one JSON object.

    Args:
        state: an ``AgentState`` (or subclass) instance.
        token: the checkpoint write's token, stored under ``WRITE_TOKEN_KEY`` so the exact
            write can be recognised when its commit was not acknowledged (never decoded as a
            field).
        verify: when the state holds a value whose exact type the encoding alone cannot carry
            (an application Enum or Pydantic model, a subclass of a builtin), decode the result
            against ``type(state)`` and require every field to come back equal and of the same
            type (so nothing silently returns as a dict or a string). Plain JSON values and the
            tagged types round-trip by construction and skip the check.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000``; ``context["path"]`` names the value.
    """
    names = _VALUE_FIELDS.get(type(state))
    if names is None:
        names = _value_fields(type(state))
    fields = {name: getattr(state, name) for name in names}
    _flags.risky = False
    # What ``dumps(fields)`` does, without walking the outer dict again: its keys are field
    # names (``str``, never the tag key: pydantic refuses names starting with ``_``).
    try:
        enc = {k: v if type(v) in _LEAF else _fast(v) for k, v in fields.items()}
        if token is not None:
            enc[WRITE_TOKEN_KEY] = token if type(token) is str else _fast(token)
        data = _compact(orjson.dumps(enc))
    except (_Slow, orjson.JSONEncodeError):  # a failure to name, or lone surrogates
        data = dumps(fields if token is None else {**fields, WRITE_TOKEN_KEY: token})
    if verify and _flags.risky:
        try:
            back = decode_values(type(state), data)
        except Exception as exc:  # noqa: BLE001 - any decode failure means a lossy value
            bad = _first_lossy_field(state, fields)
            raise _fail(bad or "$", fields, f"does not decode back: {type(exc).__name__}") from None
        for name, value in fields.items():
            bad = _strict_equal(value, back.get(name), f"$.{name}")
            if bad:
                raise _fail(bad, _at(fields, bad), "it would not decode back to the same type")
    return data


#: Per state class, the names of the fields :func:`encode_values` writes (all but ``context``),
#: in declaration order; filled on first use (``model_fields`` is a pydantic class property
#: looked up through a descriptor, and a state class does not change its fields).
_VALUE_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {}


def _value_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The names :func:`encode_values` writes for ``cls``, computed once per class."""
    names = tuple(name for name in cls.model_fields if name != "context")
    if len(_VALUE_FIELDS) < 1024:  # bounded: classes made on the fly are not all kept
        _VALUE_FIELDS[cls] = names
    return names


def _first_lossy_field(state: BaseModel, fields: dict[str, Any]) -> str | None:
    cls = type(state)
    for name, value in fields.items():
        try:
            cls.__pydantic_validator__.validate_assignment(
                cls.model_construct(), name, _dec(orjson.loads(dumps(value)))
            )
        except Exception:  # noqa: BLE001
            return f"$.{name}"
    return None


def _at(root: dict[str, Any], path: str) -> Any:
    """Best-effort lookup of the value at ``path`` (for the error's type name)."""
    import re

    cur: Any = root
    for key, idx in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path[1:]):
        try:
            if key:
                cur = cur[key] if isinstance(cur, dict) else getattr(cur, key)
            else:
                cur = list(cur)[int(idx)]
        except Exception:  # noqa: BLE001
            return cur
    return cur


def decode_values(state_cls: type[BaseModel], data: bytes | str | memoryview) -> dict[str, Any]:
    """Decode :func:`encode_values` output into validated field values of ``state_cls``.

    Returns:
        ``{field: value}`` for every stored field that ``state_cls`` declares (unknown stored
        fields are dropped, so a state class may lose fields between releases).
    """
    raw = loads(data)
    fields = state_cls.model_fields
    known = {k: v for k, v in raw.items() if k in fields and k != "context"}
    model = state_cls.model_validate(known)
    return {k: getattr(model, k) for k in known}


def _trusted_types() -> frozenset[type]:
    from tenxgraph.core.state import message_block
    from tenxgraph.core.state.execution import ExecutionState, ExecutionStatus, StopRequestStatus
    from tenxgraph.core.state.message import TokenUsages

    blocks = {getattr(message_block, n) for n in message_block.__all__ if n != "ContentBlock"}
    return frozenset(
        {ExecutionState, ExecutionStatus, StopRequestStatus, Message, TokenUsages, *blocks}
    )


#: Runtime-owned models and enums whose fields are declared exactly (never lossy).
_TRUSTED = _trusted_types()
#: Field names of each trusted model (the order ``_enc`` writes them in).
_TRUSTED_FIELDS: dict[type, tuple[str, ...]] = {
    t: tuple(t.model_fields) for t in _TRUSTED if issubclass(t, BaseModel)
}
#: The trusted enums (written as their value).
_TRUSTED_ENUMS = frozenset(t for t in _TRUSTED if issubclass(t, enum.Enum))
#: Trusted enums whose every value is a ``str`` join the leaves: orjson writes an enum member
#: as its value, which is what ``_enc`` writes for them (``"running"``), so no call is made.
_LEAF = _LEAF | {
    t
    for t in _TRUSTED_ENUMS
    if all(type(m._value_) is str for m in t)  # noqa: SLF001
}


def _model_encoder(cls: type[BaseModel], names: tuple[str, ...]) -> Callable[[Any], Any]:
    """The :func:`_fast` encoder of the trusted model ``cls`` whose fields are ``names``.

    A closure over the field names of a runtime-owned class (nothing is generated or executed):
    each field is read from the instance's ``__dict__``, a field holding a leaf is kept as it
    is, any other value is encoded by :func:`_fast`. A field missing from ``__dict__`` (an
    instance made by ``model_construct``) raises :class:`_Slow`, as before.
    """
    leaf = _LEAF
    fast = _fast

    def encode(value: Any) -> Any:
        d = value.__dict__
        try:
            return {n: v if type(v := d[n]) in leaf else fast(v) for n in names}
        except KeyError:
            raise _Slow from None

    encode.__qualname__ = f"encode_{cls.__name__}"
    return encode


#: The encoder of each trusted model (see :func:`_model_encoder`).
_MODEL_ENCODERS: dict[type, Callable[[Any], Any]] = {
    t: _model_encoder(t, names) for t, names in _TRUSTED_FIELDS.items()
}


# -- the one decoding boundary of stored rows ----------------------------------------------------
def _json_path(base: str, loc: tuple[Any, ...] | list[Any]) -> str:
    out = base
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _locate(obj: Any, path: str) -> str:
    """The path of the innermost value of raw JSON ``obj`` whose tag cannot be decoded."""
    items: Any = ()
    if type(obj) is dict:
        if _TAG in obj:
            try:
                _dec(obj)
                return path
            except Exception:  # noqa: BLE001 - this tag or one inside it is damaged
                pass
        items = ((f"{path}.{k}", v) for k, v in obj.items() if k != _TAG)
    elif type(obj) is list:
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    for where, v in items:
        try:
            _dec(v)
        except Exception:  # noqa: BLE001
            return _locate(v, where)
    return path


def _read_error(
    exc: BaseException,
    *,
    thread_id: str | None,
    version: int | None,
    path: str,
    what: str,
    data: Any = None,
) -> SerializationError:
    """The ``SerializationError`` for a stored ``what`` that failed to decode."""
    errors: Callable[[], Sequence[Any]] | None = getattr(exc, "errors", None)
    if callable(errors):  # pydantic ValidationError: point at the first failing value
        try:
            first = errors()[0]
            path = _json_path(path, first.get("loc", ()))
        except Exception:  # noqa: BLE001 - the path stays the row's root
            pass
    elif data is not None:  # valid JSON whose tagged value is damaged: find it
        try:
            path = _locate(
                orjson.loads(bytes(data) if isinstance(data, memoryview) else data), path
            )
        except Exception:  # noqa: BLE001 - not JSON at all: the row's root
            pass
    kind = type(exc).__name__
    where = f"thread {thread_id!r}" if thread_id is not None else "a thread"
    if version is not None:
        where += f" version {version}"
    return SerializationError(
        f"the stored {what} of {where} cannot be decoded at {path} ({kind}); the row is damaged "
        "or the state class changed incompatibly. Other threads and versions are unaffected; "
        "restore the row, delete the thread, or read an older version",
        context={"thread_id": thread_id, "version": version, "path": path, "type": kind},
    )


#: From this many message rows on, a read decodes them with the cyclic garbage collector paused.
_GC_PAUSE_ROWS = 64
#: From this many message rows on, ``decode_checkpoint`` first tries to decode them as one JSON
#: array (:func:`decode_message_array`): one pydantic-core call instead of one Python-level
#: call per row (10,000 rows: about a fifth less CPU, measured).
_ARRAY_ROWS = 64


@contextlib.contextmanager
def _collector_paused(pause: bool) -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a bulk decode (when ``pause`` and it is on).

    Decoding a thread allocates several objects per message (the ``Message``, its block, their
    lists and dicts), none of them in a reference cycle, so the collector finds nothing to free;
    but each allocation burst triggers collections that traverse every object the process holds,
    including the in-process cache's threads. With a few long threads in memory that was most of
    the cost of a cold load (10,000 messages: ~230 ms of CPU with the collector, ~70 without,
    measured). Reference counting still frees everything acyclic at once; the collector runs
    again afterwards. When the collector is off (the application turned it off, or another
    thread's decode paused it) it is left alone.
    """
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def decode_checkpoint(
    state_cls: type[BaseModel],
    values: bytes | memoryview,
    messages: list[bytes] | None,
    *,
    thread_id: str | None,
    version: int | None,
    seqs: Iterable[int] | None = None,
    memo: MessageMemo | None = None,
) -> tuple[dict[str, Any], list[Message]]:
    """Decode one stored version: its state values and its messages.

    Args:
        state_cls: the declared state class to validate the values against.
        values: the version's encoded values (``encode_values`` output).
        messages: the encoded messages of the version, in list order (``None``: none).
        thread_id: the thread the row comes from (named in the error).
        version: the version the row comes from (named in the error).
        seqs: the seq of each of ``messages``, in the same order (with ``memo``).
        memo: decoded rows shared across the versions of one read; ``None`` decodes every
            message.

    Returns:
        ``({field: value}, [Message, ...])``.

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` when anything stored cannot be
            decoded; ``context``: ``thread_id``, ``version``, ``path`` (``$.field...`` for
            values, ``$.context[i]...`` for message ``i``), ``type`` (the decoding error).
    """
    try:
        decoded = decode_values(state_cls, values)
    except Exception as exc:  # noqa: BLE001 - any decoding failure of a damaged row
        raise _read_error(
            exc, thread_id=thread_id, version=version, path="$", what="state", data=values
        ) from None
    out: list[Message] = []
    if memo is not None and seqs is None:
        raise ValidationError(
            "decode_checkpoint: memo= needs seqs= (the seq of each message)",
            context={"field": "seqs"},
        )
    seq_of = iter(seqs) if memo is not None and seqs is not None else None
    rows = messages or ()
    if seq_of is None and len(rows) >= _ARRAY_ROWS:
        # A long list in one pydantic-core call (no Python frame per row); ``None`` when any
        # row needs the row-by-row path below, which then names the failing row.
        try:
            whole = decode_message_array(b",".join(rows), len(rows))
        except TypeError:  # a row that is not bytes-like: decoded (and refused) row by row
            whole = None
        if whole is not None:
            return decoded, whole
    with _collector_paused(len(rows) >= _GC_PAUSE_ROWS):
        for i, data in enumerate(rows):
            try:
                if memo is not None and seq_of is not None:
                    out.append(memo.decode(next(seq_of), data))
                else:
                    out.append(decode_message(data))
            except Exception as exc:  # noqa: BLE001
                raise _read_error(
                    exc,
                    thread_id=thread_id,
                    version=version,
                    path=f"$.context[{i}]",
                    what="message",
                    data=data,
                ) from None
    return decoded, out


def decode_payload(
    data: bytes | str | memoryview, *, thread_id: str | None, what: str, path: str = "$"
) -> Any:
    """Decode a stored JSON payload that is not a checkpoint (thread metadata, ledger result).

    Args:
        data: the stored bytes.
        thread_id: the thread the row belongs to (named in the error).
        what: what the payload is (``"metadata"``, ``"ledger result"``), for the message.
        path: JSONPath of the payload's root.

    Returns:
        The decoded value (tags restored).

    Raises:
        SerializationError: ``STORAGE_SERIALIZATION_000`` when it cannot be decoded
            (``context``: ``thread_id``, ``version`` ``None``, ``path``, ``type``).
    """
    try:
        return loads(data)
    except Exception as exc:  # noqa: BLE001 - any decoding failure of a damaged row
        raise _read_error(
            exc, thread_id=thread_id, version=None, path=path, what=what, data=data
        ) from None
