"""A routing agent sends each request to a specialist node (CV writer or job-description
writer), read from its one-word answer."""

from __future__ import annotations

import os

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


def cv_writer(state: AgentState) -> Message:
    return Message.text_message("CV drafted.", role="assistant")


def jd_writer(state: AgentState) -> Message:
    return Message.text_message("Job description drafted.", role="assistant")


def pick_specialist(state: AgentState) -> str:
    word = state.context[-1].text().strip().upper()
    if word.startswith("CV"):
        return "CV"
    if word.startswith("JD"):
        return "JD"
    return END


def build() -> object:
    router = Agent(
        model=MODEL,
        system_prompt=[
            {
                "role": "system",
                "content": "Answer with one word: CV for resume work, JD for job descriptions, "
                "OTHER otherwise.",
            }
        ],
    )
    graph = StateGraph()
    graph.add_node("MAIN", router)
    graph.add_node("CV", cv_writer)
    graph.add_node("JD", jd_writer)
    graph.set_entry_point("MAIN")
    graph.add_conditional_edges("MAIN", pick_specialist, {"CV": "CV", "JD": "JD", END: END})
    graph.add_edge("CV", END)
    graph.add_edge("JD", END)
    return graph.compile()


def main() -> None:
    app = build()
    for i, request in enumerate(
        ["Please polish my CV.", "Write a JD for a welder.", "What time is it?"]
    ):
        result = app.invoke({"messages": [Message.text_message(request)]}, {"thread_id": f"ma-{i}"})
        print(f"{request!r} -> {result['messages'][-1].text()}")
    app.close()


if __name__ == "__main__":
    main()
