"""serde: lossless encoding or a SerializationError naming the path, before any write."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage import serde


class Color(enum.Enum):
    RED = "red"


class Tag(str):
    pass


class Profile(BaseModel):
    created: dt.datetime


class S(AgentState):
    color: Color = Color.RED
    profile: Profile | None = None
    anything: Any = None


def test_declared_enum_and_model_round_trip_and_any_holds_tagged_types_exactly() -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=dt.timezone(dt.timedelta(hours=5)))
    value = {
        "when": when,
        "id": uuid.UUID(int=7),
        "raw": b"\x00\xff",
        "price": decimal.Decimal("1.10"),
        "tags": {1, 2},
        "pair": (1, "x"),
        "big": 2**80,
        "inf": float("inf"),
        "day": dt.date(2026, 1, 2),
    }
    state = S(color=Color.RED, profile=Profile(created=when), anything=value)
    back = serde.decode_values(S, serde.encode_values(state))
    assert back["color"] is Color.RED
    assert (
        back["profile"] == Profile(created=when) and back["profile"].created.tzinfo == when.tzinfo
    )
    assert back["anything"] == value
    assert {k: type(v) for k, v in back["anything"].items()} == {
        k: type(v) for k, v in value.items()
    }


@pytest.mark.parametrize(
    ("anything", "path"),
    [
        (Color.RED, "$.anything"),  # an Enum in an Any field would come back as a str
        ({"a": [1, Tag("x")]}, "$.anything.a[1]"),  # a str subclass would come back as str
        ({"a": {"b": [1, 2, object()]}}, "$.anything.a.b[2]"),  # an unknown class
    ],
)
def test_values_that_would_not_round_trip_raise_with_their_path(anything: Any, path: str) -> None:
    with pytest.raises(SerializationError) as err:
        serde.encode_values(S(anything=anything))
    assert err.value.error_code == "STORAGE_SERIALIZATION_000"
    assert err.value.context["path"] == path


def test_messages_with_lone_surrogates_and_nul_round_trip_exactly() -> None:
    msg = Message.text_message("a\ud800b\x00c", role="assistant")
    assert serde.decode_message(serde.encode_message(msg)).text() == "a\ud800b\x00c"


def test_a_user_dict_using_the_tag_key_is_not_mistaken_for_a_tag() -> None:
    value = {"__tx__": "dt", "v": "2026-01-01T00:00:00"}
    assert serde.loads(serde.dumps(value)) == value


def test_named_time_zones_keep_their_zone() -> None:
    import zoneinfo

    paris = zoneinfo.ZoneInfo("Europe/Paris")
    when = dt.datetime(2024, 7, 1, 12, tzinfo=paris)
    back = serde.decode_values(S, serde.encode_values(S(anything={"when": when})))["anything"]
    assert back["when"] == when and back["when"].tzinfo is paris
    # Daylight-saving arithmetic still works after the round trip.
    assert (back["when"] + dt.timedelta(days=180)).utcoffset() == dt.timedelta(hours=1)


def test_message_metadata_that_would_lose_its_type_is_refused() -> None:
    msg = Message.text_message("hi")
    msg.metadata["color"] = Color.RED
    with pytest.raises(SerializationError) as err:
        serde.encode_message(msg, "$.context[0]")
    assert err.value.context["path"] == "$.context[0].metadata.color"
    ok = Message.text_message("hi")
    ok.metadata["when"] = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    assert serde.decode_message(serde.encode_message(ok)).metadata == ok.metadata


def _reference(value: Any) -> bytes:
    """What the path-building walker alone writes (the encoding's definition)."""
    import orjson

    return orjson.dumps(serde._enc(value, "$", False))


def _same_as_reference(value: Any) -> bool:
    """``dumps`` writes the reference bytes and flags the same values as needing a check."""
    serde._flags.risky = False
    fast = serde.dumps(value)
    risky = serde._flags.risky
    serde._flags.risky = False
    ref = _reference(value)
    return fast == ref and risky == serde._flags.risky


def test_the_fast_encoder_writes_exactly_what_the_reference_walker_writes() -> None:
    from tenxgraph.core.state.execution import ExecutionState, ExecutionStatus
    from tenxgraph.core.state.message import TokenUsages
    from tenxgraph.core.state.message_block import (
        AnnotationRef,
        ImageBlock,
        MediaRef,
        TextBlock,
        ToolCallBlock,
        ToolResultBlock,
    )

    class Sub(dict):  # type: ignore[type-arg]
        pass

    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    tricky = {
        "when": when,
        "id": uuid.UUID(int=7),
        "big": 2**80,
        "neg": -(2**63),
        "nan": float("nan"),
        "inf": float("-inf"),
        "pair": (1, [2, (3,)]),
        "set": {1},
        "bytes": b"\x00",
        "tag": {"__tx__": "dt", "v": "x"},
        "keys": {1: "a", (2, 3): "b"},
        "nested": [{"a": [None, True, 1.5, "s"]}],
        "sub": Sub(a=1),
        "tagstr": Tag("t"),
        "enum": Color.RED,
        "model": Profile(created=when),
    }
    msgs = [
        Message(role="assistant", content="plain", metadata={"left": 3}),
        Message(
            role="assistant",
            message_id=12,
            content=[
                TextBlock(text="t", annotations=[AnnotationRef(url="u", page=2)]),
                ToolCallBlock(id="c1", name="f", args=tricky),
                ImageBlock(media=MediaRef(url="http://x", width=3)),
            ],
            tools_calls=[{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
            metadata=tricky,
            usages=TokenUsages(prompt_tokens=3),
            raw={"deep": [[[{"x": when}]]]},
        ),
        Message.tool_message({"r": (1, 2)}, tool_call_id="c1"),
        Message(
            role="tool", content=[ToolResultBlock(tool_call_id="c", content=[uuid.UUID(int=1)])]
        ),
    ]
    for m in msgs:
        assert _same_as_reference(m)
    assert _same_as_reference(msgs[0]) and not serde._flags.risky
    meta = ExecutionState(step=4, status=ExecutionStatus.RUNNING, internal_data=tricky)
    for value in [meta, tricky, [tricky, msgs], None, 1, "x", 2**70, (1,)]:
        assert _same_as_reference(value)
    state = S(color=Color.RED, profile=Profile(created=when), anything=tricky, execution_meta=meta)
    fields = {n: getattr(state, n) for n in type(state).model_fields if n != "context"}
    assert serde.encode_values(state, verify=False) == _reference(fields)


@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        ("metadata", {"a": [1, object()]}, "$.context[4].metadata.a[1]"),
        ("metadata", {"k": {1: 10**5000}}, "$.context[4].metadata.k[1]"),
        ("raw", {"x": [{"y": Color.RED}]}, "$.context[4].raw.x[0].y"),
        ("args", {"n": 10**5000}, "$.context[4].content[0].args.n"),
    ],
)
def test_a_message_value_that_cannot_be_stored_is_refused_with_its_path(
    where: str, value: Any, path: str
) -> None:
    from tenxgraph.core.state.message_block import ToolCallBlock

    msg = Message(role="assistant", content=[ToolCallBlock(id="c", name="f")])
    if where == "args":
        msg.content[0].args.update(value)
    else:
        setattr(msg, where, value)
    with pytest.raises(SerializationError) as err:
        serde.encode_message(msg, "$.context[4]")
    assert err.value.context["path"] == path


def test_a_runtime_model_holding_a_wrong_type_is_checked_like_any_value() -> None:
    meta_msg = Message.text_message("hi")
    meta_msg.metadata = {"t": Tag("x")}  # a str subclass: would come back as str
    with pytest.raises(SerializationError) as err:
        serde.encode_message(meta_msg, "$.context[0]")
    assert err.value.context["path"] == "$.context[0].metadata.t"
    state = S()
    state.execution_meta.internal_data["when"] = object()
    with pytest.raises(SerializationError) as err:
        serde.encode_values(state)
    assert err.value.context["path"] == "$.execution_meta.internal_data.when"


@pytest.mark.parametrize(
    "bad",
    [
        b"not json at all",
        b'{"message_id":"x","role":"nobody","content":[]}',  # valid JSON, wrong role
        b'{"message_id":"x","role":"user","content":[{"type":"text"}]}',  # block lacks text
        b"[1,2,3]",  # another shape
        b'{"message_id":"x","role":"user","content":[]',  # truncated
    ],
)
def test_a_damaged_row_in_a_long_list_is_named_not_decoded(bad: bytes) -> None:
    """A long message list decodes in one pydantic-core call; one damaged row among 200 makes
    that call decline, and the row-by-row path raises SerializationError naming that row."""
    rows = [serde.encode_message(Message.text_message(f"m{i}")) for i in range(200)]
    values = serde.encode_values(AgentState())
    _, good = serde.decode_checkpoint(AgentState, values, rows, thread_id="t", version=3)
    assert [m.text() for m in good] == [f"m{i}" for i in range(200)]
    rows[137] = bad
    with pytest.raises(SerializationError) as err:
        serde.decode_checkpoint(AgentState, values, rows, thread_id="t", version=3)
    assert err.value.context["path"].startswith("$.context[137]")
    assert err.value.context["thread_id"] == "t" and err.value.context["version"] == 3


def test_a_long_list_decodes_as_its_rows_would_one_by_one() -> None:
    """The one-call path and the row-by-row path give equal messages, with the same fields
    set, for every row shape the runtime writes (tool calls, metadata, usages, tagged
    values, which fall back to the row-by-row path)."""
    from tenxgraph.core.state.message import TokenUsages

    msgs = []
    for i in range(100):
        msgs.append(Message.text_message(f"q{i}", role="user"))
        msgs.append(
            Message(
                role="assistant",
                content=[],
                tools_calls=[{"id": f"c{i}", "type": "function", "function": {"name": "f"}}],
                metadata={"i": i, "nested": {"a": [1, 2.5, None]}},
                usages=TokenUsages(prompt_tokens=i, completion_tokens=2),
            )
        )
    rows = [serde.encode_message(m) for m in msgs]
    values = serde.encode_values(AgentState())
    _, whole = serde.decode_checkpoint(AgentState, values, rows, thread_id="t", version=1)
    one_by_one = [serde.decode_message(r) for r in rows]
    assert whole == one_by_one == msgs
    assert [m.model_fields_set for m in whole] == [m.model_fields_set for m in one_by_one]
    tagged = rows + [
        serde.encode_message(Message(role="user", metadata={"d": dt.date(2026, 1, 2)}))
    ]
    _, mixed = serde.decode_checkpoint(AgentState, values, tagged, thread_id="t", version=1)
    assert mixed[-1].metadata == {"d": dt.date(2026, 1, 2)} and mixed[:-1] == msgs
