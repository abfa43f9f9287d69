"""The one-node graph of ``server_overhead.py``, served by ``tenxgraph serve`` and called in
process alike (config file: ``"agent": "_server_graph:make_graph"``).

Environment: ``BENCH_SERVER_DSN`` (the benchmark's private database) and
``BENCH_SERVER_STRATEGY`` (the checkpointer's ``multitask_strategy``, default ``enqueue``, the
server's default).
"""

from __future__ import annotations

import os
from typing import Any

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils import END


def echo(state: AgentState) -> Message:
    """The only node: answers with the last message's text (no model, no sleep)."""
    return Message.text_message(f"echo:{state.context[-1].text()}", role="assistant")


def build() -> Any:
    """The compiled graph (nothing connected yet)."""
    graph = StateGraph(AgentState)
    graph.add_node("echo", echo)
    graph.set_entry_point("echo")
    graph.add_edge("echo", END)
    cp: PgCheckpointer[Any] = PgCheckpointer(
        postgres_dsn=os.environ["BENCH_SERVER_DSN"],
        multitask_strategy=os.environ.get("BENCH_SERVER_STRATEGY", "enqueue") or None,
        pool_config={"min_size": 2, "max_size": 16},
    )
    return graph.compile(checkpointer=cp)


async def make_graph() -> Any:
    """The graph with its schema set up (idempotent)."""
    app = build()
    await app.checkpointer.asetup()
    return app
