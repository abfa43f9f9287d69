"""``Command`` as 10xGraph's reference documents it, on every store: ``Command(update, goto,
graph, state)`` and ``Command.PARENT``; routing with a bare ``-> Command`` annotation compiles
(10xGraph rejects only nodes in no edge at all, ``GRAPH_003``)."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END, Command


class TicketState(AgentState):
    category: str = ""
    priority: str = "normal"


def router_graph(router: Any, cp: Any) -> Any:
    g = StateGraph(TicketState)
    g.add_node("ROUTER", router)
    g.add_node("BILLING", lambda state: f"billing ({state.category}, {state.priority})")
    g.add_node("SUPPORT", lambda state: "support")
    g.set_entry_point("ROUTER")
    g.add_edge("BILLING", END)
    g.add_edge("SUPPORT", END)
    return g.compile(checkpointer=cp)


def test_constructor_and_parent_constant() -> None:
    c = Command()
    assert (c.update, c.goto, c.graph, c.state) == (None, None, None, None)
    assert Command.PARENT == "PARENT"
    c2 = Command({"a": 1}, "X", Command.PARENT)
    assert (c2.update, c2.goto, c2.graph) == ({"a": 1}, "X", "PARENT")


def test_unannotated_command_targets_are_not_orphans_but_edgeless_nodes_are() -> None:
    def router(state, config):  # no annotation at all
        return Command(goto="BILLING")

    router_graph(router, None)  # compiles: BILLING and SUPPORT have edges of their own

    g = StateGraph()
    g.add_node("ROUTER", router)
    g.add_node("BILLING", lambda state: "b")
    g.set_entry_point("ROUTER")
    with pytest.raises(GraphError) as info:
        g.compile()  # BILLING appears in no edge
    assert info.value.error_code == "GRAPH_003" and info.value.context == {"nodes": ["BILLING"]}


@pytest.mark.anyio
async def test_goto_and_update_in_one_step(backend: Backend) -> None:
    def router(state: TicketState, config: dict) -> Command:
        if "invoice" in state.context[-1].text():
            return Command(update={"category": "billing", "priority": "high"}, goto="BILLING")
        return Command(goto="SUPPORT")

    app = router_graph(router, backend.new())
    res = await app.ainvoke({"messages": [Message.text_message("my invoice")]}, {"thread_id": "t1"})
    assert [m.text() for m in res["messages"]] == ["my invoice", "billing (billing, high)"]
    res = await app.ainvoke({"messages": [Message.text_message("hello")]}, {"thread_id": "t2"})
    assert [m.text() for m in res["messages"]] == ["hello", "support"]
    stored = await app.aget_state({"thread_id": "t1"})
    assert (stored.category, stored.priority) == ("billing", "high")


@pytest.mark.anyio
async def test_update_may_be_a_message_or_the_modified_state(backend: Backend) -> None:
    def with_message(state, config) -> Command:
        return Command(
            update=Message.text_message("Routing to specialist...", role="assistant"),
            goto="SUPPORT",
        )

    app = router_graph(with_message, backend.new())
    res = await app.ainvoke({"messages": ["?"]}, {"thread_id": "m"})
    assert [m.text() for m in res["messages"]] == ["?", "Routing to specialist...", "support"]

    def with_state(state, config) -> Command:
        state.category = "billing"
        return Command(update=state, goto="BILLING")

    app2 = router_graph(with_state, backend.new())
    res = await app2.ainvoke({"messages": ["?"]}, {"thread_id": "s"})
    assert [m.text() for m in res["messages"]] == ["?", "billing (billing, normal)"]


@pytest.mark.anyio
async def test_state_is_applied_before_update(backend: Backend) -> None:
    def router(state: TicketState, config: dict) -> Command:
        whole = state.model_copy(update={"category": "from state", "priority": "low"})
        return Command(state=whole, update={"priority": "urgent"}, goto="BILLING")

    app = router_graph(router, backend.new())
    res = await app.ainvoke({"messages": ["?"]}, {"thread_id": "st"})
    assert [m.text() for m in res["messages"]] == ["?", "billing (from state, urgent)"]


@pytest.mark.anyio
async def test_parent_handoff_routes_within_a_top_level_graph(backend: Backend) -> None:
    # Graphs do not nest: the top-level graph is its own parent (the handoff pages' usage).
    app = router_graph(lambda state: Command(goto=END, graph=Command.PARENT), backend.new())
    res = await app.ainvoke({"messages": ["?"]}, {"thread_id": "p"})
    assert [m.text() for m in res["messages"]] == ["?"]
    app = router_graph(lambda state: Command(goto="BILLING", graph=Command.PARENT), backend.new())
    res = await app.ainvoke({"messages": ["?"]}, {"thread_id": "p2"})
    assert res["messages"][-1].text().startswith("billing")
    # any other graph name is refused, before anything is stored
    app = router_graph(lambda state: Command(goto=END, graph="OTHER"), backend.new())
    with pytest.raises(GraphError) as info:
        await app.ainvoke({"messages": ["?"]}, {"thread_id": "p3"})
    assert info.value.error_code == "GRAPH_005" and info.value.context["graph"] == "OTHER"
    assert await app.aget_state({"thread_id": "p3"}) is None
