"""Loading a thread: ``get_state`` and the read at the start of a run, against its length.

Two reports:

* :func:`thread_load`: tenxgraph's Postgres and Postgres+Redis+LRU stores at 10 to 10,000
  messages, **warm** (this instance has the thread: an LRU copy confirmed by the source in one
  round trip), **cold from Redis** (LRU empty: one Redis round trip, then the source confirms
  the copy) and **cold from Postgres** (no cache: the whole thread from Postgres). Each read
  decodes the state, as a caller gets it.
* :func:`turns_report`: the shape LangGraph's delta-storage work reported: a thread grown turn
  by turn (one turn = a user message and an assistant reply), and at 10, 50, 100, 250, 500 and
  2,000 turns: storage bytes of the thread, peak memory (``tracemalloc``) of writing one more
  turn, and the latency of reading the thread (``get_state``). Contenders: tenxgraph Postgres,
  LangGraph ``PostgresSaver`` with its default ``add_messages`` channel, and LangGraph with
  ``DeltaChannel`` (beta in langgraph 1.1+, snapshot every 100 updates) when the installed
  langgraph has it. LangGraph's default saver stores the whole message list at every
  checkpoint (quadratic bytes): it stops at ``default_max_turns``.

Medians of ``reps`` samples, in milliseconds, with (min-max).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from _workload import next_text

SIZES = (10, 100, 1_000, 5_000, 10_000)
TURNS = (10, 50, 100, 250, 500, 2_000)


def _stat(samples: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
    }


async def _timed(
    fn: Callable[[], Awaitable[Any]], reps: int, before: Any = None
) -> dict[str, float]:
    out = []
    for _ in range(reps):
        if before is not None:
            await before()
        t0 = time.perf_counter()
        await fn()
        out.append((time.perf_counter() - t0) * 1000)
    return _stat(out)


def _messages(n: int) -> list[Any]:
    from tenxgraph.core.state import Message

    return [
        Message(role="user" if i % 2 == 0 else "assistant", content=next_text()) for i in range(n)
    ]


async def _thread_load(
    dsn: str, redis_url: str | None, prefix: str, sizes: tuple[int, ...], reps: int
) -> dict[str, Any]:
    from tenxgraph.storage.checkpointer import PgCheckpointer

    schema = "load_tx"
    writer = PgCheckpointer(dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix)
    with_redis = PgCheckpointer(dsn, schema=schema, redis_url=redis_url, redis_prefix=prefix)
    pg_only = PgCheckpointer(dsn, schema=schema)
    out: dict[str, Any] = {"sizes": list(sizes), "rows": []}
    try:
        for cp in (writer, with_redis, pg_only):
            await cp.asetup()
        for n in sizes:
            cfg = {"thread_id": f"load-{n}", "user_id": "bench"}
            msgs = _messages(n)
            for i in range(0, n, 1000):  # as a long conversation would grow it, in chunks
                await writer.aput_messages(dict(cfg), msgs[i : i + 1000])
            await writer.store.aflush()  # Redis holds the thread

            async def get_state(
                cp: Any = with_redis, cfg: dict[str, Any] = cfg, n: int = n
            ) -> None:
                st = await cp.aget_state(dict(cfg))
                assert st is not None and len(st.context) == n

            async def run_start(
                cp: Any = with_redis, cfg: dict[str, Any] = cfg, n: int = n
            ) -> None:
                loaded = await cp.aload(dict(cfg))
                assert loaded is not None and len(loaded.state.context) == n

            async def drop_lru(cp: Any = with_redis) -> None:
                await cp.store.caches[0].aclose()

            async def drop_pg_lru() -> None:
                await pg_only.store.caches[0].aclose()

            await get_state()  # fill this instance's LRU
            row = {
                "messages": n,
                "warm_get_state": await _timed(get_state, reps),
                "warm_run_start": await _timed(run_start, reps),
                "cold_redis_get_state": await _timed(get_state, reps, drop_lru),
                "cold_redis_run_start": await _timed(run_start, reps, drop_lru),
                "cold_pg_get_state": await _timed(
                    lambda cfg=cfg: get_state(pg_only, cfg), reps, drop_pg_lru
                ),
                "cold_pg_run_start": await _timed(
                    lambda cfg=cfg: run_start(pg_only, cfg), reps, drop_pg_lru
                ),
            }
            if redis_url is None:
                for k in ("cold_redis_get_state", "cold_redis_run_start"):
                    row[k] = None
            out["rows"].append(row)
    finally:
        for cp in (writer, with_redis, pg_only):
            await cp.aclose()
    return out


def thread_load(
    dsn: str, redis_url: str | None, prefix: str, sizes: tuple[int, ...] = SIZES, reps: int = 7
) -> dict[str, Any]:
    """tenxgraph's thread-load latency table (see the module docstring)."""
    return asyncio.run(_thread_load(dsn, redis_url, prefix, sizes, reps))


# -- the delta-storage report shape ---------------------------------------------------------------
def _pg_bytes(dsn: str, sql: str, tid: str, n: int = 3) -> int:
    """The payload bytes of thread ``tid`` (``n``: how many ``%s`` the query has)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(sql, (tid,) * n).fetchone()
    return int(row[0] or 0) if row else 0


_TX_BYTES = """
SELECT coalesce((SELECT sum(octet_length(t::text)) FROM load_turns.tenxgraph_threads t
                  WHERE thread_id = %(t)s), 0)
     + coalesce((SELECT sum(octet_length("values") + 8 * cardinality(ranges) + 40)
                   FROM load_turns.tenxgraph_checkpoints WHERE thread_id = %(t)s), 0)
     + coalesce((SELECT sum(octet_length(data) + 8) FROM load_turns.tenxgraph_messages
                  WHERE thread_id = %(t)s), 0)
""".replace("%(t)s", "%s")

_LG_BYTES = """
SELECT coalesce((SELECT sum(octet_length(checkpoint::text) + octet_length(metadata::text))
                   FROM {s}.checkpoints WHERE thread_id = %s), 0)
     + coalesce((SELECT sum(coalesce(octet_length(blob), 0)) FROM {s}.checkpoint_blobs
                  WHERE thread_id = %s), 0)
     + coalesce((SELECT sum(coalesce(octet_length(blob), 0)) FROM {s}.checkpoint_writes
                  WHERE thread_id = %s), 0)
"""


def _tx_turns(dsn: str, turns: tuple[int, ...], reps: int) -> dict[str, Any]:
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import PgCheckpointer
    from tenxgraph.utils import END

    async def main() -> dict[str, Any]:
        cp = PgCheckpointer(dsn, schema="load_turns", state_history_limit=20)
        reader = PgCheckpointer(dsn, schema="load_turns")
        await cp.asetup()
        await reader.asetup()

        async def reply(state: Any) -> Message:
            return Message(role="assistant", content=next_text())

        g = StateGraph()
        g.add_node("reply", reply)
        g.set_entry_point("reply")
        g.add_edge("reply", END)
        app = g.compile(checkpointer=cp)
        cfg = {"thread_id": "turns", "user_id": "bench"}
        rows = []
        done = 0
        try:
            for target in turns:
                while done < target - 1:
                    await app.ainvoke({"messages": [Message.text_message(next_text())]}, cfg)
                    done += 1
                tracemalloc.start()
                await app.ainvoke({"messages": [Message.text_message(next_text())]}, cfg)
                _, peak = tracemalloc.get_traced_memory()
                tracemalloc.stop()
                done += 1

                async def cold_read() -> None:
                    await reader.aget_state(dict(cfg))

                async def drop() -> None:
                    await reader.store.caches[0].aclose()

                rows.append(
                    {
                        "turns": target,
                        "bytes": _pg_bytes(dsn, _TX_BYTES, "turns"),
                        "peak_write_bytes": peak,
                        "read_ms": await _timed(cold_read, reps, drop),
                    }
                )
        finally:
            await cp.aclose()
            await reader.aclose()
        return {"name": "tenxgraph Postgres", "rows": rows}

    return asyncio.run(main())


def delta_channel_available() -> bool:
    """Whether the installed langgraph has ``DeltaChannel`` (langgraph 1.1+, beta)."""
    try:
        from langgraph.channels.delta import DeltaChannel  # noqa: F401
    except ImportError:
        return False
    return True


def _lg_turns(
    dsn: str, turns: tuple[int, ...], reps: int, *, delta: bool, max_turns: int
) -> dict[str, Any]:
    from functools import reduce
    from typing import Annotated, TypedDict

    import psycopg
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, StateGraph
    from langgraph.graph.message import add_messages
    from psycopg.rows import dict_row

    schema = "load_lg_delta" if delta else "load_lg_default"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    conn = psycopg.connect(
        dsn,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema}",
    )
    saver = PostgresSaver(conn)
    saver.setup()
    if delta:
        from langgraph.channels.delta import DeltaChannel

        def batched(state: Any, writes: Any) -> Any:
            return reduce(add_messages, writes, state or [])

        channel: Any = DeltaChannel(batched, snapshot_frequency=100)
        State = TypedDict("State", {"messages": Annotated[list[AnyMessage], channel]})  # noqa: UP013
    else:
        State = TypedDict("State", {"messages": Annotated[list[AnyMessage], add_messages]})  # noqa: UP013

    def reply(state):  # noqa: ANN001, ANN202
        return {"messages": [AIMessage(content=next_text())]}

    g = StateGraph(State)
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    app = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "turns"}}
    rows = []
    done = 0
    try:
        for target in turns:
            if target > max_turns:
                rows.append({"turns": target, "skipped": f"beyond {max_turns} turns"})
                continue
            while done < target - 1:
                app.invoke({"messages": [HumanMessage(content=next_text())]}, cfg)
                done += 1
            tracemalloc.start()
            app.invoke({"messages": [HumanMessage(content=next_text())]}, cfg)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            done += 1
            samples = []
            for _ in range(reps):
                t0 = time.perf_counter()
                st = app.get_state(cfg)
                samples.append((time.perf_counter() - t0) * 1000)
                assert len(st.values["messages"]) == 2 * target
            rows.append(
                {
                    "turns": target,
                    "bytes": _pg_bytes(dsn, _LG_BYTES.format(s=schema), "turns", n=3),
                    "peak_write_bytes": peak,
                    "read_ms": _stat(samples),
                }
            )
    finally:
        conn.close()
    name = "LangGraph DeltaChannel (snapshot every 100)" if delta else "LangGraph PostgresSaver"
    return {"name": name, "rows": rows}


def turns_report(
    dsn: str, turns: tuple[int, ...] = TURNS, reps: int = 5, default_max_turns: int = 500
) -> dict[str, Any]:
    """The delta-storage report shape (see the module docstring)."""
    out: dict[str, Any] = {"turns": list(turns), "contenders": []}
    out["contenders"].append(_tx_turns(dsn, turns, reps))
    out["contenders"].append(_lg_turns(dsn, turns, reps, delta=False, max_turns=default_max_turns))
    if delta_channel_available():
        out["contenders"].append(_lg_turns(dsn, turns, reps, delta=True, max_turns=max(turns)))
    else:
        out["delta_channel"] = "not in the installed langgraph"
    return out
