"""Stream a ReAct agent with ``astream``: token deltas as the model writes, then the messages
the thread stores (the deltas are never stored)."""

from __future__ import annotations

import asyncio
import os

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message, StreamEvent
from tenxgraph.utils import END, ResponseGranularity

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


def get_weather(location: str) -> str:
    """Current weather for a city."""
    return f"Light rain and 14 degrees in {location}."


def build() -> object:
    graph = StateGraph()
    graph.add_node("MAIN", Agent(model=MODEL, tool_node="TOOL", trim_context=True))
    graph.add_node("TOOL", ToolNode([get_weather]))
    graph.set_entry_point("MAIN")
    graph.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    graph.add_edge("TOOL", "MAIN")
    return graph.compile()


async def main() -> None:
    app = build()
    config = {"thread_id": "stream-1"}
    deltas = 0
    async for chunk in app.astream(
        {"messages": [Message.text_message("Weather in Dublin, please.")]},
        config,
        response_granularity=ResponseGranularity.LOW,
    ):
        if chunk.event == StreamEvent.MESSAGE and chunk.message.delta:
            deltas += 1
            print(chunk.message.text(), end="", flush=True)
        elif chunk.event == StreamEvent.MESSAGE and chunk.message.role == "tool":
            print(f"[tool] {chunk.message.text()}")
    print()
    state: AgentState = await app.aget_state(config)
    print(f"{deltas} deltas streamed; stored: {[m.role for m in state.context]}")
    await app.aclose()


if __name__ == "__main__":
    asyncio.run(main())
