"""Time travel's argument checks and sync twins (the store behaviour is in
tests/conformance/test_time_travel.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import (
    ConfigError,
    ResourceNotFoundError,
    StorageError,
    ValidationError,
)
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer
from tenxgraph.storage.checkpointer.base import StateSnapshot
from tenxgraph.utils import END


def echo_app(cp: Any) -> Any:
    g = StateGraph()
    g.add_node("MAIN", lambda state: "echo " + state.context[-1].text())
    g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=cp)


def test_sync_twins_read_rewind_and_fork() -> None:
    app = echo_app(InMemoryCheckpointer())
    cfg = {"thread_id": "sync-tt"}
    for text in ("a", "b", "c"):
        app.invoke({"messages": [Message.text_message(text)]}, cfg)
    v1 = app.get_state(cfg, version=1)
    assert [m.text() for m in v1.context] == ["a", "echo a"]
    assert [m.text() for m in app.rewind({"thread_id": "sync-tt"}, 1).context] == ["a", "echo a"]
    fork_cfg = app.fork({"thread_id": "sync-tt"}, 2, "sync-tt-2")
    assert fork_cfg == {"thread_id": "sync-tt-2", "user_id": "anonymous"}
    assert len(app.get_state(fork_cfg).context) == 4
    snaps: list[StateSnapshot] = app.get_state_history({"thread_id": "sync-tt"})
    assert [s.origin for s in snaps[:2]] == [{"op": "rewind", "version": 1}, None]
    with pytest.raises(ValidationError):  # a thread cannot be forked into itself
        app.fork({"thread_id": "sync-tt"}, 2, "sync-tt")
    app.close()


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True, None, 2**63, 2**64])
def test_versions_must_be_positive_ints(bad: Any) -> None:
    app = echo_app(InMemoryCheckpointer())
    cfg = {"thread_id": "v-tt"}
    app.invoke({"messages": [Message.text_message("a")]}, cfg)
    if bad is None:  # no version: the latest state
        assert app.get_state(cfg) is not None
        return
    for call in (
        lambda: app.get_state(cfg, version=bad),
        lambda: app.rewind(cfg, bad),
        lambda: app.fork(cfg, bad, "v-tt-2"),
    ):
        with pytest.raises(ValidationError):
            call()
    app.close()


def test_missing_thread_and_bad_replay_tools() -> None:
    app = echo_app(InMemoryCheckpointer())
    with pytest.raises(ResourceNotFoundError) as err:
        app.get_state({"thread_id": "nope"}, version=1)
    assert err.value.context["oldest_kept"] is None and "does not exist" in str(err.value)
    with pytest.raises(ConfigError) as cfg_err:
        app.invoke({"messages": [Message.text_message("a")]}, {"thread_id": "x", "replay_tools": 1})
    assert cfg_err.value.context == {"key": "replay_tools"}
    with pytest.raises(ConfigError):  # an invalid target thread id, before anything is read
        app.fork({"thread_id": "x"}, 1, "")
    app.close()


def test_a_checkpointer_of_your_own_names_what_to_implement() -> None:
    class Mine(BaseCheckpointer[AgentState]):
        async def aget_state(self, config: dict[str, Any]) -> AgentState | None:
            return None

        async def aput_state(self, config: dict[str, Any], state: AgentState) -> AgentState:
            return state

    app = echo_app(Mine())
    with pytest.raises(StorageError) as err:
        app.rewind({"thread_id": "t"}, 1)
    assert "implement" in str(err.value)
