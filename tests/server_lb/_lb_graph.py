"""The graph the load-balancer tests serve, configured by environment variables.

Named by the servers' config file as ``"_lb_graph:make_graph"`` (an async function: each server
process, and each uvicorn worker, builds its own checkpointer after it started):

* ``LB_PG_DSN``, ``LB_PG_SCHEMA``: the Postgres database and the test's own schema.
* ``LB_REDIS_URL``, ``LB_REDIS_PREFIX``: the Redis server and the test's own key prefix
  (no Redis when ``LB_REDIS_URL`` is empty).
* ``LB_NODE_S``: seconds each of the two nodes sleeps (default 0.02), so that a SIGKILL or a
  SIGTERM lands inside runs.
* ``LB_LEASE_TTL_S``: the run lease's expiry (default 5 s).

A user message whose text starts with ``slow:`` makes each node sleep 0.5 s instead (a run
that is surely still going when a test acts on it).

Two nodes, ``think`` then ``answer``, each adding one assistant message that names the user
message it answers (``think:<text>``, ``answer:<text>``), so a test can check that each turn was
answered exactly once and in order.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils import END


def _last_user_text(state: AgentState) -> str:
    for m in reversed(state.context):
        if m.role == "user":
            return m.text()
    return ""


def _pause_s(state: AgentState) -> float:
    if _last_user_text(state).startswith("slow:"):
        return 0.5
    return float(os.environ.get("LB_NODE_S", "0.02"))


async def think(state: AgentState) -> Message:
    """First node: sleeps (``LB_NODE_S``), then a ``think:<text>`` message."""
    await asyncio.sleep(_pause_s(state))
    return Message.text_message(f"think:{_last_user_text(state)}", role="assistant")


async def answer(state: AgentState) -> Message:
    """Second node: sleeps (``LB_NODE_S``), then an ``answer:<text>`` message."""
    await asyncio.sleep(_pause_s(state))
    return Message.text_message(f"answer:{_last_user_text(state)}", role="assistant")


def checkpointer() -> PgCheckpointer[Any]:
    """The Postgres (+ Redis) checkpointer the environment describes, strategy ``enqueue``."""
    ttl = float(os.environ.get("LB_LEASE_TTL_S", "5"))
    redis_url = os.environ.get("LB_REDIS_URL") or None
    return PgCheckpointer(
        postgres_dsn=os.environ["LB_PG_DSN"],
        schema=os.environ["LB_PG_SCHEMA"],
        redis_url=redis_url,
        redis_prefix=os.environ.get("LB_REDIS_PREFIX", "tenxgraph:"),
        multitask_strategy="enqueue",
        lease_ttl_s=ttl,
        lease_renew_s=min(2.0, ttl / 2.5),
        enqueue_timeout_s=60.0,
        pool_config={"min_size": 1, "max_size": 8},
    )


def build() -> Any:
    """The compiled two-node graph on :func:`checkpointer` (schema not set up)."""
    graph = StateGraph(AgentState)
    graph.add_node("think", think)
    graph.add_node("answer", answer)
    graph.set_entry_point("think")
    graph.add_edge("think", "answer")
    graph.add_edge("answer", END)
    return graph.compile(checkpointer=checkpointer())


async def make_graph() -> Any:
    """The graph, with its schema set up (idempotent, safe from every process at once)."""
    app = build()
    await app.checkpointer.asetup()
    return app
