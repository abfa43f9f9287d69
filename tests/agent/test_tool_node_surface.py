"""ToolNode's documented surface: add_tool, get_local_tool, get_tool_schemas, invoke,
ToolResult state updates through the ledger, and handoff tools."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.tool_result import ToolResult
from tenxgraph.prebuilt.tools import create_handoff_tool, is_handoff_tool
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END, tool

from ._fake_llm_server import ScriptedLLMServer, text, tool_calls

pytestmark = pytest.mark.anyio


@tool(tags=["database", "read"])
def read_row(key: str) -> str:
    """Read a row."""
    return f"row {key}"


@tool(tags=["database", "write"])
def write_row(key: str, value: str) -> str:
    """Write a row."""
    return "ok"


def search_web(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


async def test_add_tool_and_tag_queries() -> None:
    node = ToolNode([read_row])
    node.add_tool(write_row)
    node.add_tool(search_web)
    with pytest.raises(GraphError) as info:
        node.add_tool(search_web)
    assert info.value.error_code == "GRAPH_001"
    assert [t["function"]["name"] for t in node.get_local_tool(tags={"database"})] == [
        "read_row",
        "write_row",
    ]
    assert [t["function"]["name"] for t in node.get_local_tool(tags={"read"})] == ["read_row"]
    schemas = node.get_tool_schemas()
    assert [s["function"]["name"] for s in schemas] == ["read_row", "write_row", "search_web"]
    assert schemas[2]["function"]["parameters"]["required"] == ["query"]


async def test_invoke_directly() -> None:
    def greet(name: str, tool_call_id: str, state: AgentState) -> str:
        """Greet."""
        return f"hi {name} ({tool_call_id}, {len(state.context)} msgs)"

    node = ToolNode([greet])
    msg = await node.invoke(
        name="greet",
        args={"name": "Ana"},
        tool_call_id="call_x",
        config={"thread_id": "t"},
        state=AgentState(),
    )
    assert msg.role == "tool" and msg.tool_call_id == "call_x"
    assert msg.text() == "hi Ana (call_x, 0 msgs)"
    bad = await node.invoke(name="greet", args={}, tool_call_id="c2")
    assert bad.content[0].is_error and "name" in bad.text()


class CityState(AgentState):
    selected_city: str = ""
    visits: int = 0


def react(llm: ScriptedLLMServer, node: ToolNode, state: Any = None, cp: Any = None) -> Any:
    g = StateGraph(state)
    g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url, tool_node="TOOL"))
    g.add_node("TOOL", node)
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=cp)


async def test_tool_result_updates_state_and_replays_from_ledger(llm: ScriptedLLMServer) -> None:
    ran: list[str] = []

    def select_city(city: str, state: CityState) -> ToolResult:
        """Select the city."""
        ran.append(city)
        return ToolResult(
            message=f"City set to {city}.",
            state={"selected_city": city, "visits": state.visits + 1},
        )

    node = ToolNode([select_city])
    llm.add(tool_calls(("select_city", {"city": "Lima"})), text("done"))
    cp = InMemoryCheckpointer()
    app = react(llm, node, CityState(), cp)
    cfg = {"thread_id": "tr"}
    out = await app.ainvoke({"messages": ["pick Lima"]}, dict(cfg))
    state = await app.aget_state(cfg)
    assert (state.selected_city, state.visits) == ("Lima", 1)
    assert [m.text() for m in out["messages"] if m.role == "tool"] == ["City set to Lima."]
    assert llm.bodies[1]["messages"][-1]["content"] == "City set to Lima."
    # A replay of the tool node (same assistant message) answers from the ledger: the
    # recorded update is applied again and the tool does not run.
    assistant = next(m for m in state.context if m.tool_calls())
    replay_state = CityState(context=[state.context[0], assistant])
    from tenxgraph.core._context import _RUN, RunContext

    token = _RUN.set(RunContext(cp, dict(cfg), cp.key_for(dict(cfg)), nodes=app.node_objects))
    try:
        cmd = await node(replay_state, dict(cfg))
    finally:
        _RUN.reset(token)
    assert ran == ["Lima"]
    assert cmd.update["selected_city"] == "Lima" and cmd.update["visits"] == 1
    assert cmd.update["messages"][0].message_id == state.context[2].message_id


async def test_tool_result_unknown_field_answers_with_error(llm: ScriptedLLMServer) -> None:
    def bad() -> ToolResult:
        """Bad update."""
        return ToolResult(message="x", state={"nope": 1})

    llm.add(tool_calls(("bad", {})), text("sorry"))
    out = await react(llm, ToolNode([bad]), CityState()).ainvoke(
        {"messages": ["x"]}, {"thread_id": "b"}
    )
    tool_msg = next(m for m in out["messages"] if m.role == "tool")
    assert tool_msg.content[0].is_error and "nope" in tool_msg.text()


def test_handoff_tool_shape() -> None:
    fn = create_handoff_tool("RESEARCHER", "Research in depth")
    assert fn.__name__ == "transfer_to_RESEARCHER" and fn.__doc__ == "Research in depth"
    assert fn.__handoff_tool__ is True and fn.__target_agent__ == "RESEARCHER"
    assert is_handoff_tool("transfer_to_researcher") == (True, "researcher")
    assert is_handoff_tool("get_weather") == (False, None)
    assert create_handoff_tool("w").__doc__ == "Transfer control to w agent"
    with pytest.raises(ValueError):
        create_handoff_tool("")
    # names every provider refuses as tool names are refused here, before any request
    for bad in ("research team", "a" * 53, "équipe"):
        with pytest.raises(ValueError, match="not a valid tool name"):
            create_handoff_tool(bad)
    assert create_handoff_tool("a" * 52).__name__ == "transfer_to_" + "a" * 52  # 64 characters
    schema = ToolNode([fn]).get_tool_schemas()[0]["function"]
    assert schema["name"] == "transfer_to_RESEARCHER" and schema["parameters"]["properties"] == {}


async def test_handoff_routes_to_the_target_agent(llm: ScriptedLLMServer) -> None:
    def responder(body: dict[str, Any]) -> Any:
        system = body["messages"][0]["content"]
        last = body["messages"][-1]
        if system == "coordinator":
            if last["role"] == "user":
                return tool_calls(("transfer_to_researcher", {}))
            return text("coordinator wraps up")
        return text("research findings")

    llm.responder = responder
    coord_tools = ToolNode([create_handoff_tool("researcher", "Research a topic")])
    g = StateGraph()
    g.add_node(
        "COORDINATOR",
        Agent(
            model="m",
            base_url=llm.base_url,
            tool_node="COORD_TOOLS",
            system_prompt=[{"role": "system", "content": "coordinator"}],
        ),
    )
    g.add_node("COORD_TOOLS", coord_tools)
    g.add_node(
        "RESEARCHER",
        Agent(
            model="m",
            base_url=llm.base_url,
            system_prompt=[{"role": "system", "content": "researcher"}],
        ),
    )
    g.set_entry_point("COORDINATOR")
    g.add_conditional_edges(
        "COORDINATOR",
        lambda s: "COORD_TOOLS" if s.context[-1].tool_calls() else END,
        {"COORD_TOOLS": "COORD_TOOLS", END: END},
    )
    g.add_edge("COORD_TOOLS", "COORDINATOR")
    g.add_edge("RESEARCHER", END)
    out = await g.compile().ainvoke({"messages": ["look into tides"]}, {"thread_id": "h"})
    roles = [(m.role, m.text()) for m in out["messages"]]
    assert roles[-2] == ("tool", "Handed off to RESEARCHER.")  # case-insensitive match
    assert roles[-1] == ("assistant", "research findings")
    assert [b["messages"][0]["content"] for b in llm.bodies] == ["coordinator", "researcher"]


async def test_handoff_replay_returns_the_recorded_route(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core._context import _RUN, RunContext

    llm.add(tool_calls(("transfer_to_B", {})), text("B here"))
    cp = InMemoryCheckpointer()
    g = StateGraph()
    g.add_node("A", Agent(model="m", base_url=llm.base_url, tool_node="A_TOOLS"))
    g.add_node("A_TOOLS", ToolNode([create_handoff_tool("B")]))
    g.add_node("B", Agent(model="m", base_url=llm.base_url))
    g.set_entry_point("A")
    g.add_conditional_edges(
        "A",
        lambda s: "A_TOOLS" if s.context[-1].tool_calls() else END,
        {"A_TOOLS": "A_TOOLS", END: END},
    )
    g.add_edge("A_TOOLS", "A")
    g.add_edge("B", END)
    app = g.compile(checkpointer=cp)
    cfg = {"thread_id": "hr"}
    await app.ainvoke({"messages": ["go"]}, dict(cfg))
    state = await app.aget_state(cfg)
    # Replaying the tool node of that step (as after a crash) answers from the ledger with
    # the same route, even if the graph no longer had a node B to match.
    token = _RUN.set(RunContext(cp, dict(cfg), cp.key_for(dict(cfg)), nodes={"A": None}, graph=app))
    try:
        cmd = await app.node_objects["A_TOOLS"].func(
            state.model_copy(update={"context": state.context[:2]}), dict(cfg)
        )
    finally:
        _RUN.reset(token)
    assert cmd.goto == "B" and cmd.update["messages"][0].text() == "Handed off to B."


async def test_error_tool_results_and_removing_tools() -> None:
    def refuse(reason: str) -> ToolResult:
        """Refuse with a reason."""
        return ToolResult(message=f"cannot: {reason}", is_error=True)

    def refuse_and_update() -> ToolResult:
        """An error that also tries to change the state."""
        return ToolResult(message="no", state={"x": 1}, is_error=True)

    node = ToolNode([refuse, refuse_and_update, read_row])
    msg = await node.invoke("refuse", {"reason": "busy"})
    assert msg.content[0].is_error and msg.text() == "Error: cannot: busy"
    msg = await node.invoke("refuse_and_update", {})
    assert msg.content[0].is_error and "updates nothing" in msg.text()
    assert list(node._funcs) == ["refuse", "refuse_and_update", "read_row"]
    assert node._funcs["read_row"] is read_row
    assert node.remove_tool("refuse") and not node.remove_tool("refuse")
    assert node.tool_names == ["refuse_and_update", "read_row"]


def test_a_single_fallback_model_name_is_refused_not_split_into_characters() -> None:
    from tenxgraph.core.exceptions import UnsupportedArgumentError
    from tenxgraph.core.graph import Agent

    with pytest.raises(UnsupportedArgumentError) as err:
        Agent(model="gpt-4o", base_url="http://127.0.0.1:9/v1", fallback_models="gpt-4o-mini")
    assert err.value.error_code == "GRAPH_010"
    assert err.value.context["argument"] == "fallback_models"
    assert "['gpt-4o-mini']" in str(err.value)
    agent = Agent(model="gpt-4o", base_url="http://127.0.0.1:9/v1", fallback_models=["gpt-4o-mini"])
    assert len(agent.fallbacks) == 1
