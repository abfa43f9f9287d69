"""A custom state: extra typed fields, read by the system prompt and updated at invoke time."""

from __future__ import annotations

import os

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END, ResponseGranularity

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


class HiringState(AgentState):
    candidate: str = ""
    role_title: str = ""
    match_score: float = 0.0


def build() -> object:
    agent = Agent(
        model=MODEL,
        system_prompt=[
            {
                "role": "system",
                "content": "You screen {candidate} for the {role_title} role. Be brief.",
            }
        ],
        trim_context=True,
    )
    graph = StateGraph(HiringState())
    graph.add_node("MAIN", agent)
    graph.set_entry_point("MAIN")
    graph.add_edge("MAIN", END)
    return graph.compile()


def main() -> None:
    app = build()
    config = {"thread_id": "hiring-1"}
    first = app.invoke(
        {
            "messages": [Message.text_message("Summarise the fit in one sentence.")],
            "state": {"candidate": "Rosa", "role_title": "data engineer"},
        },
        config,
        response_granularity=ResponseGranularity.FULL,
    )
    print("answer:", first["messages"][-1].text())
    # A partial update: only match_score changes, the other fields stay as stored.
    second = app.invoke(
        {"messages": [Message.text_message("Thanks.")], "state": {"match_score": 0.82}},
        config,
        response_granularity=ResponseGranularity.FULL,
    )
    state = second["state"]
    print(f"candidate={state.candidate} role={state.role_title} score={state.match_score}")
    app.close()


if __name__ == "__main__":
    main()
