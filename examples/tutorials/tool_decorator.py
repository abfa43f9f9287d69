"""``@tool``: names, descriptions and tags on tool functions; tag queries; ``tools_tags``."""

from __future__ import annotations

import os

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.graph.tool_node import ToolNode
from tenxgraph.core.state import Message
from tenxgraph.utils import END, get_tool_metadata, has_tool_decorator, tool

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


@tool(name="lookup_order", description="Find an order by its number.", tags=["orders", "read"])
def lookup_order(order_id: str) -> dict:
    return {"order_id": order_id, "status": "shipped"}


@tool(tags=["orders", "write"], capabilities=["rate_limited"])
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    return f"order {order_id} cancelled"


def add(a: int, b: int) -> int:
    """Add two numbers (no decorator: name and schema come from the function)."""
    return a + b


def build(tool_node: ToolNode) -> object:
    graph = StateGraph()
    # The model only sees the read-only tools.
    graph.add_node("MAIN", Agent(model=MODEL, tool_node="TOOL", tools_tags={"read"}))
    graph.add_node("TOOL", tool_node)
    graph.set_entry_point("MAIN")
    graph.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    graph.add_edge("TOOL", "MAIN")
    return graph.compile()


def main() -> None:
    tools = ToolNode([lookup_order, cancel_order, add])
    print("decorated:", has_tool_decorator(lookup_order), has_tool_decorator(add))
    print("tags of cancel_order:", sorted(get_tool_metadata(cancel_order)["tags"]))
    print("order tools:", [t["function"]["name"] for t in tools.get_local_tool(tags={"orders"})])
    print("read tools:", [t["function"]["name"] for t in tools.get_local_tool(tags={"read"})])
    app = build(tools)
    result = app.invoke(
        {"messages": [Message.text_message("Where is order A-17?")]}, {"thread_id": "t1"}
    )
    print("answer:", result["messages"][-1].text())
    app.close()


if __name__ == "__main__":
    main()
