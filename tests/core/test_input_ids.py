"""One run input may not carry two messages with the same ``message_id``."""

from __future__ import annotations

import pytest

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.graph.compiled_graph import CompiledGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END


def _graph() -> CompiledGraph[AgentState]:
    g = StateGraph()
    g.add_node("n", lambda state: f"{len(state.context)} messages")
    g.set_entry_point("n")
    g.add_edge("n", END)
    return g.compile()


def test_repeated_id_in_one_input_is_refused_and_nothing_is_written() -> None:
    app = _graph()
    cfg = {"thread_id": "t-repeat"}
    a = Message.text_message("first", message_id="m-1")
    b = Message.text_message("second", message_id="m-1")
    with pytest.raises(ValidationError) as err:
        app.invoke({"messages": [a, b]}, cfg)
    assert err.value.error_code == "VALIDATION_000"
    assert err.value.context == {"field": "messages[1]"}
    assert "m-1" in str(err.value)
    assert app.get_state(cfg) is None


def test_distinct_ids_and_a_resent_message_still_work() -> None:
    app = _graph()
    cfg = {"thread_id": "t-distinct"}
    a = Message.text_message("first", message_id="m-1")
    out = app.invoke({"messages": [a, Message.text_message("second", message_id="m-2")]}, cfg)
    assert [m.text() for m in out["messages"]] == ["first", "second", "2 messages"]
    state: AgentState | None = app.get_state(cfg)
    assert state is not None and len(state.context) == 3
