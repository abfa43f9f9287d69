"""Handoff: a coordinator agent hands the conversation to a researcher by calling a tool."""

from __future__ import annotations

import os

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.prebuilt.tools import create_handoff_tool
from tenxgraph.utils import END

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


def search_notes(topic: str) -> str:
    """Search the team's notes on a topic."""
    return f"Notes on {topic}: tides follow the moon, roughly twice a day."


def has_calls(state: AgentState) -> bool:
    return bool(state.context[-1].tool_calls())


def build() -> object:
    graph = StateGraph()
    graph.add_node(
        "COORDINATOR",
        Agent(
            model=MODEL,
            system_prompt=[
                {"role": "system", "content": "Delegate research questions to the researcher."}
            ],
            tool_node="COORDINATOR_TOOLS",
        ),
    )
    graph.add_node(
        "COORDINATOR_TOOLS",
        ToolNode([create_handoff_tool("RESEARCHER", "Research a topic in depth")]),
    )
    graph.add_node(
        "RESEARCHER",
        Agent(
            model=MODEL,
            system_prompt=[
                {"role": "system", "content": "Research with the notes tool, then answer."}
            ],
            tool_node="RESEARCHER_TOOLS",
        ),
    )
    graph.add_node("RESEARCHER_TOOLS", ToolNode([search_notes]))
    graph.set_entry_point("COORDINATOR")
    graph.add_conditional_edges(
        "COORDINATOR",
        lambda s: "COORDINATOR_TOOLS" if has_calls(s) else END,
        {"COORDINATOR_TOOLS": "COORDINATOR_TOOLS", END: END},
    )
    # Without a handoff, the coordinator's tool results go back to it.
    graph.add_edge("COORDINATOR_TOOLS", "COORDINATOR")
    graph.add_conditional_edges(
        "RESEARCHER",
        lambda s: "RESEARCHER_TOOLS" if has_calls(s) else END,
        {"RESEARCHER_TOOLS": "RESEARCHER_TOOLS", END: END},
    )
    graph.add_edge("RESEARCHER_TOOLS", "RESEARCHER")
    return graph.compile()


def main() -> None:
    app = build()
    result = app.invoke(
        {"messages": [Message.text_message("Why are there tides?")]}, {"thread_id": "h1"}
    )
    for msg in result["messages"]:
        calls = ", ".join(c.name for c in msg.tool_calls())
        print(f"{msg.role:9} {msg.text() or calls}")
    app.close()


if __name__ == "__main__":
    main()
