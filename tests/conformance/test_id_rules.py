"""One validation of thread and user ids in every API, on every store (issue 29): an id the
source of truth could not index is refused with ``CONFIG_001`` before anything is written,
never reported as a transient error a retry loop would spin on; ``aget_stop`` validates like
every other API; ``adelete_message`` on another user's thread refuses like every write."""

from __future__ import annotations

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.config import MAX_THREAD_ID_LEN, MAX_USER_ID_LEN
from tenxgraph.core.exceptions import ConfigError, StorageError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


def _app(cp: object) -> object:
    def reply(state: AgentState) -> str:
        return "ok"

    g = StateGraph(AgentState)
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=cp)


async def test_an_over_long_user_id_is_refused_before_any_write(backend: Backend) -> None:
    cp = backend.new()
    app = _app(cp)
    # 3,000 characters of 3-byte UTF-8: far past PostgreSQL's btree row limit.
    long_user = "\u20ac" * 3000
    with pytest.raises(ConfigError) as ei:
        await app.ainvoke(  # type: ignore[attr-defined]
            {"messages": [Message.text_message("hi")]},
            {"thread_id": "t-long", "user_id": long_user},
        )
    assert ei.value.error_code == "CONFIG_001" and ei.value.context["key"] == "user_id"
    # The longest allowed ids, at 4 bytes per character, are stored and read back.
    tid, uid = "\U0001f600" * MAX_THREAD_ID_LEN, "\U0001f600" * MAX_USER_ID_LEN
    cfg = {"thread_id": tid, "user_id": uid}
    out = await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg)  # type: ignore[attr-defined]
    assert out["messages"][-1].text() == "ok"
    state = await cp.aget_state({"thread_id": tid, "user_id": uid})  # type: ignore[attr-defined]
    assert [m.text() for m in state.context] == ["hi", "ok"]
    assert await cp.aget_state({"thread_id": "t-long", "user_id": "x"}) is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        ({"thread_id": "a\x00b"}, "thread_id"),
        ({"thread_id": "x" * (MAX_THREAD_ID_LEN + 1)}, "thread_id"),
        ({"thread_id": "t", "user_id": "u" * (MAX_USER_ID_LEN + 1)}, "user_id"),
        ({"thread_id": "t", "user_id": "a\x00"}, "user_id"),
    ],
)
async def test_get_stop_validates_ids_like_every_api(
    backend: Backend, cfg: dict[str, str], key: str
) -> None:
    cp = backend.new()
    with pytest.raises(ConfigError) as ei:
        await cp.aget_stop(cfg)  # type: ignore[attr-defined]
    assert ei.value.context["key"] == key


async def test_delete_message_on_another_users_thread_refuses(backend: Backend) -> None:
    cp = backend.new()
    app = _app(cp)
    alice = {"thread_id": "t-owned", "user_id": "alice"}
    out = await app.ainvoke({"messages": [Message.text_message("hi")]}, dict(alice))  # type: ignore[attr-defined]
    mid = out["messages"][0].message_id
    bob = {"thread_id": "t-owned", "user_id": "bob"}
    for message_id in (mid, "no-such-message"):
        with pytest.raises(StorageError) as ei:
            await cp.adelete_message(dict(bob), message_id)  # type: ignore[attr-defined]
        assert ei.value.error_code == "STORAGE_FORBIDDEN_001"
    state = await cp.aget_state(dict(alice))  # type: ignore[attr-defined]
    assert [m.message_id for m in state.context][0] == mid
    # A missing thread is simply "not there" for anyone.
    assert await cp.adelete_message({"thread_id": "t-missing", "user_id": "bob"}, mid) is False  # type: ignore[attr-defined]
