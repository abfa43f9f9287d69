"""A one-node graph that answers ``echo <last message>``: every turn writes a version and two
message rows (the encryption tests)."""

from __future__ import annotations

from typing import Any

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.constants import END


def echo_app(cp: Any) -> Any:
    """The compiled echo graph on checkpointer ``cp``."""

    async def reply(state: AgentState) -> Message:
        return Message.text_message(f"echo {state.context[-1].text()}", role="assistant")

    g = StateGraph(AgentState)
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=cp)
