"""Dependency injection as 10xGraph's dependency-injection pages describe it, with the real
``injectq`` package: ``StateGraph(container=...)``, ``Inject[T]`` defaults in nodes and tools
(hidden from the tool schema), the objects ``compile()`` binds, optional services, and what
happens when a service is missing (memory, SQLite, Postgres, Postgres + Redis)."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
)
from injectq import Inject, InjectQ
from injectq.core.context import ContainerContext

from tenxgraph.core.exceptions import GraphError, UnsupportedArgumentError
from tenxgraph.core.graph import CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message, ToolCallBlock
from tenxgraph.storage.checkpointer.base_checkpointer import BaseCheckpointer
from tenxgraph.utils import END
from tenxgraph.utils.callbacks import CallbackManager
from tenxgraph.utils.id_generator import BigIntIDGenerator


class Ledger:
    """An application service: records what the graph's code did with it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: list[str] = []


class NeverBound:
    pass


def tool_graph(container: InjectQ | None, cp: BaseCheckpointer) -> CompiledGraph[AgentState]:
    def lookup(
        city: str,
        tool_call_id: str,
        state: AgentState,
        ledger: Ledger = Inject[Ledger],
    ) -> str:
        """Find a city.

        Args:
            city: its name.
        """
        ledger.entries.append(f"lookup:{city}:{tool_call_id}:{len(state.context)}")
        return f"{city} found by {ledger.name}"

    async def model(
        state: AgentState,
        config: dict[str, Any],
        checkpointer: BaseCheckpointer = Inject[BaseCheckpointer],
        ledger: Ledger = Inject[Ledger],
    ) -> Message:
        stored = await checkpointer.aget_state(config)
        ledger.entries.append(f"model sees {0 if stored is None else len(stored.context)} stored")
        if state.context[-1].role == "tool":
            return Message.text_message("done", role="assistant")
        return Message(
            role="assistant",
            content=[ToolCallBlock(id="call-1", name="lookup", args={"city": "Oslo"})],
        )

    g = StateGraph(container=container) if container is not None else StateGraph()
    g.add_node("MAIN", model)
    g.add_node("TOOL", ToolNode([lookup]))
    g.set_entry_point("MAIN")
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_nodes_and_tools_receive_services(backend: Backend) -> None:
    container = InjectQ()
    ledger = Ledger("test-ledger")
    container.bind_instance(Ledger, ledger)
    cp = backend.new()
    app = tool_graph(container, cp)
    out = await app.ainvoke({"messages": ["where is Oslo?"]}, {"thread_id": "di-1"})
    assert [m.text() for m in out["messages"]][-2:] == ["Oslo found by test-ledger", "done"]
    # The injected checkpointer is the graph's: the second model call sees the first turn.
    assert ledger.entries == [
        "model sees 0 stored",
        "lookup:Oslo:call-1:2",
        "model sees 3 stored",
    ]
    # The model never sees the injected parameters.
    schema = app.node_objects["TOOL"].func.get_tool_schemas()[0]["function"]["parameters"]
    assert set(schema["properties"]) == {"city"} and schema["required"] == ["city"]


@only("memory", "postgres")
@pytest.mark.anyio
async def test_without_a_container_the_global_one_is_used(backend: Backend) -> None:
    ContainerContext.clear_current()  # a container activated by another test of this worker
    glob = InjectQ.get_instance()
    ledger = Ledger("global")
    glob.bind_instance(Ledger, ledger)
    app = tool_graph(None, backend.new())
    out = await app.ainvoke({"messages": ["go"]}, {"thread_id": "di-global"})
    assert out["messages"][-2].text() == "Oslo found by global"
    assert glob.get(CompiledGraph) is app  # compile() bound the graph in the global container


@only("memory")
@pytest.mark.anyio
async def test_compile_binds_the_graph_objects(backend: Backend) -> None:
    container = InjectQ()
    seen: dict[str, Any] = {}

    def node(
        state: AgentState,
        config: dict[str, Any],
        graph: CompiledGraph = Inject[CompiledGraph],
        builder: StateGraph = Inject[StateGraph],
        callbacks: CallbackManager = Inject[CallbackManager],
    ) -> str:
        inq = InjectQ.get_instance()  # the graph's container, made current
        seen.update(
            graph=graph,
            builder=builder,
            callbacks=callbacks,
            id_type=inq.get("generated_id_type"),
            fresh=(inq.get("generated_id"), inq.get("generated_id")),
            entry=inq.call_factory("get_node", "only"),
        )
        return "ok"

    g = StateGraph(container=container, id_generator=BigIntIDGenerator())
    g.add_node("only", node)
    g.set_entry_point("only")
    g.add_edge("only", END)
    app = g.compile(checkpointer=backend.new())
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "bind"})
    assert seen["graph"] is app and seen["builder"] is g
    # An injected callback manager is the graph's own: callbacks registered on it run.
    assert seen["callbacks"] is app.callback_manager
    assert seen["id_type"] == "bigint"
    a, b = seen["fresh"]
    assert isinstance(a, int) and b > a
    assert seen["entry"] is node
    assert container.get(BaseCheckpointer) is app.checkpointer


@only("memory")
@pytest.mark.anyio
async def test_optional_and_missing_services(backend: Backend) -> None:
    container = InjectQ()

    def optional(state: AgentState, maybe: NeverBound | None = Inject[NeverBound]) -> str:
        return f"maybe={maybe}"

    g = StateGraph(container=container)
    g.add_node("n", optional)
    g.set_entry_point("n")
    g.add_edge("n", END)
    out = await g.compile(checkpointer=backend.new()).ainvoke(
        {"messages": ["go"]}, {"thread_id": "o"}
    )
    assert out["messages"][-1].text() == "maybe=None"

    def required(state: AgentState, svc: NeverBound = Inject[NeverBound]) -> str:
        return "unreachable"

    g2 = StateGraph(container=InjectQ())
    g2.add_node("n", required)
    g2.set_entry_point("n")
    g2.add_edge("n", END)
    cp = backend.new()
    with pytest.raises(GraphError) as info:
        await g2.compile(checkpointer=cp).ainvoke({"messages": ["go"]}, {"thread_id": "m"})
    assert info.value.error_code == "GRAPH_001" and "NeverBound" in str(info.value)
    # A configuration error of tenxgraph's family: the thread is left as it was.
    assert await cp.aget_state({"thread_id": "m"}) is None


def test_container_argument_is_checked() -> None:
    with pytest.raises(GraphError) as info:
        StateGraph(container={"not": "a container"})
    assert info.value.error_code == "GRAPH_001"
    with pytest.raises(UnsupportedArgumentError):
        StateGraph(containers=InjectQ())  # a typo is still refused (GRAPH_009)
    c = InjectQ()
    StateGraph(container=c)
    try:
        assert InjectQ.get_instance() is c  # activated, as the how-to says
    finally:
        ContainerContext.clear_current()
