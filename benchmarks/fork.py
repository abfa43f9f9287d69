"""Forking a long thread: ``fork`` against copying the state with ``update_state``'s write path
(and against LangGraph's ``copy_thread`` where the installed saver implements it).

    python benchmarks/fork.py [--messages 5000] [--repeat 7] [--dsn postgresql://...]

A thread of ``--messages`` messages (about 200 characters each, the workload of
``_workload.py``) is prepared once per contender in a private database (``BenchDatabase``).
Each operation then makes ``--repeat`` new threads from it; printed per operation: the median
milliseconds (wall clock, client and server together), the client CPU milliseconds, and the
WAL bytes it wrote (the bench database's own records when ``pg_waldump`` can read the server's
WAL, else the cluster-wide LSN difference, marked ``~``), averaged over the repeats.

Operations:

* ``tenxgraph fork``: ``app.afork(config, at_version=v, to_thread_id=...)``: one ``FORK``
  statement copies the message rows inside Postgres (``INSERT ... SELECT``); the client reads
  the version's metadata only and encodes no message.
* ``tenxgraph fork + update``: the same with ``update={"messages": [one message]}``: the
  version is read and decoded, the one new message encoded.
* ``tenxgraph get_state + put_state``: what copying costs without ``fork``: read the state
  (warm: the LRU holds the decoded thread) and write it as a new thread, which encodes and
  sends every message (``update_state``'s write path, on a thread that does not exist yet).
* ``langgraph copy_thread``: ``PostgresSaver.copy_thread`` when implemented (the
  ``BaseCheckpointSaver`` of langgraph-checkpoint raises ``NotImplementedError``; the report
  says so).
* ``langgraph get_state + update_state``: LangGraph's way to copy without ``copy_thread``: read
  the state and ``update_state`` it into a new thread.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pg import DEFAULT_DSN, BenchDatabase, WalMeter, server_info  # noqa: E402
from _workload import build_lg_graph, build_tx_graph, lg_history_input, tx_history_input  # noqa: E402


def _row(name: str, ms: list[float], cpu: list[float], wal: int | None, exact: bool) -> str:
    wal_text = "-" if wal is None else f"{'' if exact else '~'}{wal:,}"
    return f"| {name} | {statistics.median(ms):.1f} | {statistics.median(cpu):.1f} | {wal_text} |"


def _wal(meter: WalMeter, start: str, end: str, n: int) -> tuple[int, bool]:
    sample = meter.sample(start, end)
    if sample.db_bytes is not None:
        return sample.db_bytes // n, True
    return sample.lsn_bytes // n, False


async def _measure_async(
    meter: WalMeter, repeat: int, op: Callable[[int], Awaitable[Any]]
) -> tuple[list[float], list[float], int, bool]:
    ms: list[float] = []
    cpu: list[float] = []
    start = meter.lsn()
    for i in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        await op(i)
        ms.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    wal, exact = _wal(meter, start, meter.lsn(), repeat)
    return ms, cpu, wal, exact


def _measure_sync(
    meter: WalMeter, repeat: int, op: Callable[[int], Any]
) -> tuple[list[float], list[float], int, bool]:
    ms: list[float] = []
    cpu: list[float] = []
    start = meter.lsn()
    for i in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        op(i)
        ms.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    wal, exact = _wal(meter, start, meter.lsn(), repeat)
    return ms, cpu, wal, exact


async def _tenxgraph(db: BenchDatabase, meter: WalMeter, n: int, repeat: int) -> list[str]:
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import PgCheckpointer

    cp = PgCheckpointer(db.dsn)
    await cp.asetup()
    app = build_tx_graph(cp)
    src = {"thread_id": "src"}
    await app.ainvoke(tx_history_input(n), dict(src))
    state = await app.aget_state(dict(src))
    assert state is not None and len(state.context) == n, len(state.context)
    version = dict(src)
    await app.aget_state(version)
    at = int(version["_checkpoint_version"])
    rows = []

    async def fork(i: int) -> None:
        await app.afork(dict(src), at, f"fork-{i}")

    async def fork_update(i: int) -> None:
        note = Message.text_message("try another way")
        await app.afork(dict(src), at, f"fork-upd-{i}", update={"messages": [note]})

    async def copy(i: int) -> None:
        st = await app.aget_state(dict(src))
        await cp.aput_state({"thread_id": f"copy-{i}"}, st)

    await fork(repeat)  # warm the statements and the pool, untimed
    await copy(repeat)
    for name, op in (
        ("tenxgraph fork", fork),
        ("tenxgraph fork + update (one new message)", fork_update),
        ("tenxgraph get_state + put_state (update_state's write path)", copy),
    ):
        ms, cpu, wal, exact = await _measure_async(meter, repeat, op)
        rows.append(_row(name, ms, cpu, wal, exact))
    forked = await app.aget_state({"thread_id": "fork-0"})
    assert forked is not None and len(forked.context) == n
    await cp.aclose()
    return rows


def _langgraph(db: BenchDatabase, meter: WalMeter, n: int, repeat: int) -> tuple[list[str], str]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        return [], "LangGraph not installed (pip install -e '.[bench]')"
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(db.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        saver = PostgresSaver(conn)
        saver.setup()
        app = build_lg_graph(saver)
        src = {"configurable": {"thread_id": "lg-src"}, "recursion_limit": 1000}
        app.invoke(lg_history_input(n), src)
        values = app.get_state(src).values
        assert len(values["messages"]) == n, len(values["messages"])
        rows = []
        note = ""
        try:
            saver.copy_thread("lg-src", "lg-copy-probe")
        except NotImplementedError:
            note = (
                "langgraph copy_thread: not available: PostgresSaver of "
                f"langgraph-checkpoint-postgres {importlib.metadata.version('langgraph-checkpoint-postgres')} "
                "does not implement it (BaseCheckpointSaver.copy_thread raises NotImplementedError)"
            )
        else:
            ms, cpu, wal, exact = _measure_sync(
                meter, repeat, lambda i: saver.copy_thread("lg-src", f"lg-copy-{i}")
            )
            rows.append(_row("langgraph copy_thread", ms, cpu, wal, exact))

        def copy(i: int) -> None:
            vals = app.get_state(src).values
            cfg = {"configurable": {"thread_id": f"lg-upd-{i}"}}
            app.update_state(cfg, {"messages": vals["messages"]})

        copy(repeat)  # warm, untimed
        ms, cpu, wal, exact = _measure_sync(meter, repeat, copy)
        rows.append(_row("langgraph get_state + update_state", ms, cpu, wal, exact))
        return rows, note
    finally:
        conn.close()


def main() -> None:
    """Run the benchmark and print a markdown table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--messages", type=int, default=5000, help="messages in the thread")
    p.add_argument("--repeat", type=int, default=7, help="new threads per operation")
    p.add_argument("--dsn", default=DEFAULT_DSN, help="a superuser DSN of the server")
    args = p.parse_args()
    info = server_info(args.dsn)
    with BenchDatabase(args.dsn) as db:
        meter = WalMeter(db)
        try:
            rows = asyncio.run(_tenxgraph(db, meter, args.messages, args.repeat))
            lg_rows, note = _langgraph(db, meter, args.messages, args.repeat)
        finally:
            meter.close()
    print(
        f"Fork of a {args.messages:,}-message thread, median of {args.repeat}; PostgreSQL "
        f"{info['version']} (fsync {info['fsync']}, synchronous_commit "
        f"{info['synchronous_commit']})"
    )
    print()
    print("| operation | ms | client CPU ms | WAL bytes |")
    print("| --- | ---: | ---: | ---: |")
    for row in rows + lg_rows:
        print(row)
    if meter.why_not:
        print(f"\n~ cluster-wide WAL (includes other clients' writes): {meter.why_not}")
    if note:
        print(f"\n{note}")


if __name__ == "__main__":
    main()
