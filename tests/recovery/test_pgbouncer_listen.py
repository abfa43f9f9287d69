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


async def test_lease_waiters_poll_behind_pgbouncer_and_are_woken_with_listen_dsn(
    pgbouncer_dsn: str, pg_dsn: str, pg_schema: str
) -> None:
    # Through the transaction-mode pooler, LISTEN would not stay on a server connection: the
    # store notices it (the backend pid differs) and its waiters poll. With listen_dsn (a
    # direct connection) they are woken by the release's NOTIFY.
    from tenxgraph.records import ThreadKey
    from tenxgraph.storage.postgres import PostgresStore

    key = ThreadKey("bounced-lease", "u")
    pooled = PostgresStore(pgbouncer_dsn, schema=pg_schema)
    direct = PostgresStore(pgbouncer_dsn, schema=pg_schema, listen_dsn=pg_dsn)
    try:
        await pooled.asetup()
        a = await pooled.lease_acquire(key, "a", ttl_s=30.0, lapse_s=30.0, queue=False)
        assert a.fence is not None
        polling = await pooled.lease_waiter(key, "p")
        assert polling is not None and not polling.live
        woken = await direct.lease_waiter(key, "w")
        assert woken is not None and woken.live
        refused = await direct.lease_acquire(key, "w", ttl_s=30.0, lapse_s=30.0, queue=True)
        assert refused.fence is None
        await pooled.lease_release(key, "a", a.fence)
        assert await woken.wait(30.0)  # the bound is never reached: the NOTIFY comes first
        polling.close()
        woken.close()
    finally:
        await pooled.aclose()
        await direct.aclose()
