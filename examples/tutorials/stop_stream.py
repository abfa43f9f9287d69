"""Stop a streaming run from the caller, like a "stop generating" button.

A reader thread consumes ``app.stream(...)``; the main thread calls ``app.stop(config)`` with
the same thread id a moment later. The run ends with status ``stopped``.
"""

from __future__ import annotations

import os
import threading
import time

from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import Message
from tenxgraph.utils import END

MODEL = os.environ.get("MODEL", "gpt-4o-mini")


def build() -> object:
    graph = StateGraph()
    graph.add_node("MAIN", Agent(model=MODEL))
    graph.set_entry_point("MAIN")
    graph.add_edge("MAIN", END)
    return graph.compile()


def main() -> None:
    app = build()
    config = {"thread_id": "stop-demo"}
    seen: list[str] = []
    started = threading.Event()

    def reader() -> None:
        for chunk in app.stream(
            {"messages": [Message.text_message("Tell me a long story.")]}, config
        ):
            if chunk.event == "message" and chunk.message.delta:
                seen.append(chunk.message.text())
                started.set()

    thread = threading.Thread(target=reader)
    thread.start()
    started.wait(30)
    time.sleep(0.3)
    print("stop requested:", app.stop(config))
    thread.join(60)
    state = app.get_state(config)
    print(f"received {len(seen)} deltas before the stop; status: {state.execution_meta.status}")
    app.close()


if __name__ == "__main__":
    main()
