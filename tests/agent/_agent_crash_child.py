"""Child process of the Agent crash tests (killed with SIGKILL by the parent).

``python _agent_crash_child.py BASE_URL DB_PATH THREAD_ID MODE LOG``

Builds the react graph of :func:`build` on a ``SqliteCheckpointer`` at ``DB_PATH`` and runs
``THREAD_ID`` with the user message ``"pay 5"``: ``MODE`` ``stream`` consumes ``astream`` (the
model is called with ``stream: true``), ``structured`` runs ``ainvoke`` with an agent that has
an ``output_schema``, ``emit`` consumes ``astream`` with a second tool, ``report``, that
sends ``StreamEmitter`` progress and hangs while the file ``LOG + ".slow"`` exists. The tool
``charge`` appends a line to ``LOG`` (fsync'ed) each time it really runs; ``report`` appends
``report start`` when it starts.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import anyio
from pydantic import BaseModel

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state.stream_emitter import StreamEmitter
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END


class Receipt(BaseModel):
    """The structured answer of the ``structured`` mode."""

    paid: int
    status: str


def _log(log_path: str, line: str) -> None:
    with open(log_path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def build(base_url: str, checkpointer: Any, log_path: str, structured: bool) -> Any:
    """MAIN (Agent) -> TOOL (charge, report) -> MAIN -> END."""

    def charge(amount: int) -> str:
        """Charge the card."""
        _log(log_path, f"charge {amount}")
        return f"charged {amount}"

    def report(what: str, emit: StreamEmitter | None = None) -> str:
        """Write a report, with progress."""
        _log(log_path, "report start")
        if emit is not None:
            emit.progress(f"writing {what}")
        while os.path.exists(log_path + ".slow"):
            time.sleep(0.05)  # the parent kills the process here
        return f"report on {what} done"

    agent = Agent(
        model="gpt-4o",
        base_url=base_url,
        tool_node="TOOL",
        output_schema=Receipt if structured else None,
        retry_config=False,
    )
    g = StateGraph()
    g.add_node("MAIN", agent)
    g.add_node("TOOL", ToolNode([charge, report]))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=checkpointer)


async def main(base_url: str, db_path: str, thread_id: str, mode: str, log_path: str) -> None:
    app = build(base_url, SqliteCheckpointer(db_path), log_path, structured=mode == "structured")
    cfg = {"thread_id": thread_id}
    if mode in ("stream", "emit"):
        async for _ in app.astream({"messages": ["pay 5"]}, cfg):
            pass
    else:
        await app.ainvoke({"messages": ["pay 5"]}, cfg)
    await app.aclose()


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:6])
