"""What invoke returns around pauses and resumed runs."""

from __future__ import annotations

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END, interrupt, pending_interrupt


def test_invoke_none_on_a_dynamic_pause_neither_reruns_the_node_nor_writes() -> None:
    calls: list[str] = []

    def ask(state):
        calls.append("ask")
        return f"answer {interrupt({'q': 'ok?'})}"

    g = StateGraph()
    g.add_node("ask", ask)
    g.set_entry_point("ask")
    g.add_edge("ask", END)
    app = g.compile(checkpointer=InMemoryCheckpointer())
    cfg = {"thread_id": "dyn"}
    first = app.invoke({"messages": [Message.text_message("go")]}, cfg)
    assert pending_interrupt(first)["id"] == "ask:0:1"  # readable from the result dict too
    version = cfg["_checkpoint_version"]
    again = app.invoke(None, cfg)
    assert calls == ["ask"] and cfg["_checkpoint_version"] == version
    assert pending_interrupt(again)["id"] == "ask:0:1"
    done = app.invoke({"resume": "yes"}, cfg)
    assert [m.text() for m in done["messages"]] == ["answer yes"]
    assert calls == ["ask", "ask"]


class _Crash(BaseException):
    """Stands in for the process dying inside a node (no error checkpoint is written)."""


def test_messages_of_a_finished_earlier_run_come_before_the_new_input() -> None:
    crash = {"on": True}

    def a(state):
        return f"a after {state.context[-1].text()}"

    def b(state):
        if crash["on"]:
            raise _Crash()
        return "b says"

    g = StateGraph()
    g.add_node("a", a)
    g.add_node("b", b)
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    app = g.compile(checkpointer=InMemoryCheckpointer())
    cfg = {"thread_id": "order"}
    try:
        app.invoke({"messages": [Message.text_message("first")]}, cfg)
    except _Crash:
        pass
    crash["on"] = False
    out = app.invoke({"messages": [Message.text_message("second")]}, cfg)
    stored = [m.text() for m in app.get_state(cfg).context]
    assert stored == ["first", "a after first", "b says", "second", "a after second", "b says"]
    # The result lists this call's messages in the stored order: the cut-off run's completion,
    # then the new input and what it produced.
    assert [m.text() for m in out["messages"]] == stored[2:]


def test_a_run_without_a_lease_calls_acommit_with_config_state_prev_only() -> None:
    """Applications wrap ``checkpointer.acommit(config, state, prev)`` (examples/tracing.py
    does, to simulate a crash): a run without a lease passes nothing else."""
    from typing import Any

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState
    from tenxgraph.storage.checkpointer import InMemoryCheckpointer
    from tenxgraph.utils import END

    cp = InMemoryCheckpointer()
    original = cp.acommit
    calls: list[int] = []

    async def three_args(config: dict, state: AgentState, prev: Any) -> Any:
        calls.append(state.execution_meta.step)
        return await original(config, state, prev)

    cp.acommit = three_args  # type: ignore[method-assign]
    g = StateGraph()
    g.add_node("a", lambda state: "x")
    g.add_node("b", lambda state: "y")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    g.set_entry_point("a")
    out = g.compile(checkpointer=cp).invoke({"messages": ["hi"]}, {"thread_id": "t-3args"})
    assert out["messages"][-1].text() == "y" and calls == [1, 2]
