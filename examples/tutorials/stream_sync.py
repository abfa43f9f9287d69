"""Synchronous streaming with ``app.stream()`` and a custom state passed at invoke time."""

from __future__ import annotations

import os

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


class TravelState(AgentState):
    traveller: str = "guest"


def get_weather(location: str) -> str:
    """Current weather for a city."""
    return f"Clear skies over {location}."


def build() -> object:
    graph = StateGraph(TravelState())
    graph.add_node(
        "MAIN",
        Agent(
            model=MODEL,
            system_prompt=[
                {"role": "system", "content": "You are helping {traveller} plan a trip."}
            ],
            tool_node="TOOL",
            trim_context=True,
        ),
    )
    graph.add_node("TOOL", ToolNode([get_weather]))
    graph.set_entry_point("MAIN")
    graph.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    graph.add_edge("TOOL", "MAIN")
    return graph.compile()


def main() -> None:
    app = build()
    config = {"thread_id": "sync-stream"}
    inp = {
        "messages": [Message.text_message("Is it a good day to visit Kyoto?")],
        "state": {"traveller": "Mika"},
    }
    text = []
    for chunk in app.stream(inp, config):
        if chunk.event == "message" and chunk.message.delta:
            text.append(chunk.message.text())
        elif chunk.event == "updates":
            print("node finished:", chunk.data.get("node"))
    print("answer:", "".join(text))
    print("traveller stored:", app.get_state(config).traveller)
    app.close()


if __name__ == "__main__":
    main()
