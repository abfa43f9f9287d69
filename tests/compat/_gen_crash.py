"""Child process of ``test_runs_api``: a generator node killed mid-stream.

``python _gen_crash.py SPEC THREAD_ID LOG`` builds the checkpointer ``SPEC`` (JSON of
``graph_backends.Backend.spec()``) describes and streams the graph of :func:`build` with
``crash=True`` on ``THREAD_ID``, printing the text of every message chunk (flushed) as it
arrives; the generator node SIGKILLs the process after its first item was streamed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END


def log_line(path: str, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def build(checkpointer: Any, log_path: str, *, crash: bool) -> CompiledGraph:
    """``one -> two -> END``: ``one`` answers ``"one"``; ``two`` is an async generator yielding
    ``"two-a"`` then ``"two-b"``; with ``crash`` it kills the process once ``"two-a"`` was
    handed to the consumer (it is resumed only after the consumer took the item)."""

    def one(state: AgentState) -> str:
        log_line(log_path, "one")
        return "one"

    async def two(state: AgentState):
        log_line(log_path, "two")
        yield Message.text_message("two-a", role="assistant", message_id="two-a")
        if crash:
            os.kill(os.getpid(), signal.SIGKILL)
        yield Message.text_message("two-b", role="assistant", message_id="two-b")

    g = StateGraph()
    g.add_node("one", one)
    g.add_node("two", two)
    g.set_entry_point("one")
    g.add_edge("one", "two")
    g.add_edge("two", END)
    return g.compile(checkpointer=checkpointer)


def main(spec_json: str, thread_id: str, log_path: str) -> None:
    from graph_backends import build_from_spec

    app = build(build_from_spec(json.loads(spec_json)), log_path, crash=True)
    for chunk in app.stream({"messages": [Message.text_message("go")]}, {"thread_id": thread_id}):
        if chunk.event == "message":
            print(chunk.message.text(), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
