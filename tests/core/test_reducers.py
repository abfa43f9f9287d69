"""Reducers: de-duplication, delta dropping and the shared append lineage of MessageList."""

from __future__ import annotations

from tenxgraph.core.state import Message
from tenxgraph.core.state.reducers import (
    MessageList,
    add_messages,
    append_items,
    replace_messages,
    replace_value,
)


def _m(text: str, mid: str | None = None, **kw) -> Message:
    return (
        Message.text_message(text, message_id=mid)
        if not kw
        else Message(role="user", content=text, message_id=mid, **kw)
    )


def test_add_messages_appends_new_ids_and_skips_known_and_deltas() -> None:
    a, b = _m("a", "1"), _m("b", "2")
    first = add_messages([], [a])
    out = add_messages(first, [a, b, _m("b again", "2"), _m("partial", "3", delta=True)])
    assert [m.message_id for m in out] == ["1", "2"]
    assert add_messages(out, [a]) is out  # nothing new: the same object


def test_appending_to_the_tip_shares_the_lineage_and_keeps_earlier_lists_intact() -> None:
    base = add_messages([], [_m("a", "1")])
    longer = add_messages(base, [_m("b", "2")])
    assert longer.lineage is base.lineage
    assert [m.message_id for m in base] == ["1"] and not base.has_id("2")
    assert longer.has_id("2") and longer.has_id("1")


def test_extending_an_older_list_forks_so_branches_never_see_each_others_ids() -> None:
    base = add_messages([], [_m("a", "1")])
    left = add_messages(base, [_m("left", "L")])
    right = add_messages(base, [_m("right", "R")])  # base is no longer the tip: fork
    assert right.lineage is not left.lineage
    assert not right.has_id("L") and not left.has_id("R")
    # The branch that got "R" can still receive "L", and vice versa: no false duplicates.
    assert [m.message_id for m in add_messages(right, [_m("left", "L")])] == ["1", "R", "L"]
    assert [m.message_id for m in add_messages(left, [_m("right", "R")])] == ["1", "L", "R"]


def test_plain_list_input_gets_an_index_and_replace_starts_a_new_lineage() -> None:
    plain = [_m("a", "1"), _m("b", "2")]
    out = add_messages(plain, [_m("b", "2"), _m("c", "3")])
    assert isinstance(out, MessageList) and [m.message_id for m in out] == ["1", "2", "3"]
    replaced = replace_messages(out, [out[-1]])
    assert replaced.lineage is not out.lineage and [m.message_id for m in replaced] == ["3"]


def test_append_items_dedupes_by_id_and_replace_value_takes_the_new_value() -> None:
    assert append_items([{"id": 1}], [{"id": 1}, {"id": 2}, {"x": 0}]) == [
        {"id": 1},
        {"id": 2},
        {"x": 0},
    ]
    assert replace_value(1, 2) == 2


def test_one_message_updates_skip_known_ids_and_deltas_and_extend_the_lineage() -> None:
    base = add_messages([], [_m("a", "1")])
    assert add_messages(base, [_m("a again", "1")]) is base  # a known id: the same object
    assert add_messages(base, _m("partial", "9", delta=True)) is base  # a delta: never stored
    out = add_messages(base, _m("b", "2"))
    assert isinstance(out, MessageList) and out.lineage is base.lineage
    assert [m.message_id for m in out] == ["1", "2"] and out.has_id("2")
    assert [m.message_id for m in base] == ["1"] and not base.has_id("2")
    assert add_messages(out, [_m("b again", "2")]) is out
