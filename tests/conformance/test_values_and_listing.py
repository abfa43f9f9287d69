"""Values that must round-trip or be refused at write, and listing details, on every store:
``bytearray`` comes back as ``bytearray`` (also in a field typed ``bytearray``); an integer
too long to be read back is refused with ``SerializationError`` naming its path before anything
is written; ``list_threads({"user_id": None})`` lists the anonymous user's threads, as writes
store them; ``get_state_history`` without a limit pages through every kept version."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)
from pydantic import ConfigDict

from tenxgraph.core.exceptions import SerializationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage import serde
from tenxgraph.storage.checkpointer.base import HISTORY_PAGE
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


class Bytes(AgentState):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    raw: bytearray = bytearray()
    anything: Any = None


def _setter(cp: Any, state_cls: type[AgentState], update: dict[str, Any]) -> Any:
    async def set_values(state: AgentState) -> dict[str, Any]:
        return update

    g = StateGraph(state_cls)
    g.add_node("set", set_values)
    g.set_entry_point("set")
    g.add_edge("set", END)
    return g.compile(checkpointer=cp)


async def test_bytearray_round_trips_as_bytearray(backend: Backend) -> None:
    cp = backend.new()
    update = {"raw": bytearray(b"\x00ab"), "anything": {"k": [bytearray(b"x"), b"y"]}}
    app = _setter(cp, Bytes, update)
    cfg = {"thread_id": "t-bytearray"}
    await app.ainvoke({"messages": [Message.text_message("go")]}, dict(cfg))
    # A fresh instance over the same data decodes from storage, not from its LRU.
    st = await _setter(backend.peer(cp), Bytes, {}).aget_state(dict(cfg))
    assert type(st.raw) is bytearray and st.raw == bytearray(b"\x00ab")
    assert type(st.anything["k"][0]) is bytearray and type(st.anything["k"][1]) is bytes
    hist = await _setter(backend.peer(cp), Bytes, {}).aget_state_history(dict(cfg))
    assert type(hist[0].state.raw) is bytearray


@pytest.mark.parametrize("digits", [4301, 5000])
async def test_an_integer_too_long_to_read_back_is_refused_at_write(
    backend: Backend, digits: int
) -> None:
    cp = backend.new()
    huge = 7 * 10 ** (digits - 1)  # built arithmetically: int("7" * 5000) itself is refused
    app = _setter(cp, Bytes, {"anything": {"n": [1, huge]}})
    cfg = {"thread_id": f"t-int-{digits}"}
    with pytest.raises(SerializationError) as info:
        await app.ainvoke({"messages": [Message.text_message("go")]}, dict(cfg))
    assert info.value.error_code == "STORAGE_SERIALIZATION_000"
    assert info.value.context["path"] == "$.anything.n[1]"
    assert await app.aget_state(dict(cfg)) is None  # nothing written


async def test_big_integers_within_the_limit_round_trip(backend: Backend) -> None:
    cp = backend.new()
    values = [2**64, -(2**100), int("9" * serde.MAX_INT_DIGITS)]
    app = _setter(cp, Bytes, {"anything": values})
    cfg = {"thread_id": "t-bigint"}
    await app.ainvoke({"messages": [Message.text_message("go")]}, dict(cfg))
    st = await _setter(backend.peer(cp), Bytes, {}).aget_state(dict(cfg))
    assert st.anything == values


async def test_list_threads_with_user_none_lists_the_anonymous_users_threads(
    backend: Backend,
) -> None:
    cp = backend.new()
    app = _setter(cp, Bytes, {})
    await app.ainvoke(
        {"messages": [Message.text_message("a")]}, {"thread_id": "t-anon", "user_id": None}
    )
    await app.ainvoke(
        {"messages": [Message.text_message("b")]}, {"thread_id": "t-named", "user_id": "None"}
    )
    assert [t.thread_id for t in await cp.alist_threads({"user_id": None})] == ["t-anon"]
    assert [t.thread_id for t in await cp.alist_threads({})] == ["t-anon"]
    assert [t.thread_id for t in await cp.alist_threads({"user_id": "anonymous"})] == ["t-anon"]
    assert [t.thread_id for t in await cp.alist_threads({"user_id": "None"})] == ["t-named"]
    st = await cp.aget_state({"thread_id": "t-anon", "user_id": None}, Bytes)
    assert st is not None


async def test_history_without_limit_pages_through_every_kept_version(backend: Backend) -> None:
    cp = backend.new(state_history_limit=0)
    app = _setter(cp, Bytes, {})
    cfg = {"thread_id": "t-pages"}
    n = 2 * HISTORY_PAGE + 3
    for i in range(n):
        await app.ainvoke({"messages": [Message.text_message(f"m{i}")]}, dict(cfg))
    calls: list[tuple[Any, Any]] = []
    source = cp.store.source
    orig = source.history

    async def spy(key: Any, *, limit: Any = None, before: Any = None) -> Any:
        calls.append((limit, before))
        out = await orig(key, limit=limit, before=before)
        assert len(out) <= HISTORY_PAGE
        return out

    source.history = spy
    hist = await app.aget_state_history(dict(cfg))
    assert [s.version for s in hist] == list(range(n, 0, -1))
    assert len(calls) == 3 and all(limit == HISTORY_PAGE for limit, _ in calls)
    assert [s.version for s in await app.aget_state_history(dict(cfg), limit=5, before=10)] == [
        9,
        8,
        7,
        6,
        5,
    ]


async def test_full_history_decodes_each_message_row_once(backend: Backend) -> None:
    """Versions share their message rows; a history call decodes each row once, not once per
    version (which made a full history quadratic)."""
    cp = backend.new(state_history_limit=0)
    app = _setter(cp, Bytes, {})
    cfg = {"thread_id": "t-decode-once"}
    turns = HISTORY_PAGE + 7  # crosses a page boundary
    for i in range(turns):
        await app.ainvoke({"messages": [Message.text_message(f"m{i}")]}, dict(cfg))
    rows = len((await cp.aget_state(dict(cfg), Bytes)).context)
    before = serde.messages_decoded()
    hist = await cp.aget_state_history(dict(cfg), None, None, Bytes)
    decoded = serde.messages_decoded() - before
    assert len(hist) == turns
    assert decoded <= rows, (decoded, rows)  # per version it would be about rows * turns / 2
    # Each snapshot still holds its own list, exactly the messages of its version.
    newest, oldest = hist[0].state.context, hist[-1].state.context
    assert [m.text() for m in oldest] == [m.text() for m in newest[: len(oldest)]]
    assert len(oldest) < len(newest) and oldest is not newest
    # A second call decodes again (the memo lives for one call only).
    before = serde.messages_decoded()
    await cp.aget_state_history(dict(cfg), None, None, Bytes)
    assert 0 < serde.messages_decoded() - before <= rows
