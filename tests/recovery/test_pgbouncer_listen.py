"""Through PgBouncer in transaction mode the runs go through the pooler and the workers
``LISTEN`` on a direct connection (``listen_dsn``): a submit wakes the worker by ``NOTIFY``,
long before its next sweep (docs/how-to/background-runs.md, "PgBouncer")."""

from __future__ import annotations

import time

import anyio
import pytest

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def answer(state: AgentState) -> str:
    return f"answer to {state.context[-1].text()}"


async def test_notify_wakes_a_worker_behind_pgbouncer(
    pgbouncer_dsn: str, pg_dsn: str, pg_schema: str
) -> None:
    g = StateGraph()
    g.add_node("answer", answer)
    g.set_entry_point("answer")
    g.add_edge("answer", END)
    app = g.compile(checkpointer=PgCheckpointer(postgres_dsn=pgbouncer_dsn, schema=pg_schema))
    try:
        await app.checkpointer.asetup()
        # A sweep every 60 s: only a notification can start the run within the test.
        async with app.recovery(sweep_interval_s=60, listen_dsn=pg_dsn) as rec:
            deadline = time.monotonic() + 10
            while rec.stats["sweeps"] < 1 and time.monotonic() < deadline:  # noqa: ASYNC110
                await anyio.sleep(0.02)
            run = await app.asubmit(
                {"messages": [Message.text_message("hi")]}, {"thread_id": "bouncer"}
            )
            info = await app.ajoin({"thread_id": "bouncer"}, run.run_id, timeout=20)
            assert rec.stats["notifications"] >= 1
            assert rec.stats["sweeps"] >= 2  # the notification's, not the 60 s timer's
        assert info.status == "completed"
        assert [m.text() for m in info.result["messages"]] == ["hi", "answer to hi"]
    finally:
        await app.aclose()
