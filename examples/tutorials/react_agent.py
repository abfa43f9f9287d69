"""A ReAct agent: the model calls a weather tool, reads its answer, then replies.

Run with an OpenAI-compatible endpoint (OPENAI_API_KEY, or OPENAI_BASE_URL for a local one).
"""

from __future__ import annotations

import os

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


def get_weather(location: str) -> str:
    """Current weather for a city."""
    return f"It is 21 degrees and sunny in {location}."


def route(state: AgentState) -> str:
    """Run the tools when the model asked for some, else stop."""
    return "TOOL" if state.context[-1].tool_calls() else END


def build() -> object:
    graph = StateGraph()
    graph.add_node(
        "MAIN",
        Agent(
            model=MODEL,
            system_prompt=[
                {"role": "system", "content": "You answer weather questions with the tool."}
            ],
            tool_node="TOOL",
            trim_context=True,
        ),
    )
    graph.add_node("TOOL", ToolNode([get_weather]))
    graph.set_entry_point("MAIN")
    graph.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    graph.add_edge("TOOL", "MAIN")
    return graph.compile(checkpointer=InMemoryCheckpointer())


def main() -> None:
    app = build()
    config = {"thread_id": "react-1"}
    result = app.invoke(
        {"messages": [Message.text_message("What is the weather in Lisbon?")]}, config
    )
    for msg in result["messages"]:
        calls = ", ".join(f"{c.name}({c.args})" for c in msg.tool_calls())
        print(f"{msg.role:9} {msg.text() or calls}")
    history = app.get_state(config)
    print(f"thread holds {len(history.context)} messages")
    app.close()


if __name__ == "__main__":
    main()
