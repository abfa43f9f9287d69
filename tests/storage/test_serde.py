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
