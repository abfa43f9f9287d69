"""Background runs (issue 28): submitted runs per second through 1 and 4 worker processes on
Postgres, against calling ``ainvoke`` directly; and the cost of durability per background run.

Graph: ``plan -> answer`` (two async nodes, no sleep: the runtime's and the store's own cost),
on ``PgCheckpointer`` (no Redis), a fresh schema per configuration.

* direct: this process runs ``RUNS`` ``ainvoke`` calls on new threads, ``CONCURRENCY`` at once;
* submitted through W workers (W = 1, 4; ``tenxgraph worker`` processes, ``--concurrency``
  ``CONCURRENCY // W``, started and ready before timing): this process submits ``RUNS`` runs
  (``CONCURRENCY`` submits at once) and waits until every one is ``completed``; the time is
  from the first submit to the last completion (submit, LISTEN/NOTIFY wake-up, claim, run,
  record). Submits alone are also timed (runs/s recorded).

Run: ``python benchmarks/background_runs.py [--runs 2000] [--concurrency 16]``; prints one JSON
line per configuration and a summary. ``--soak`` runs the long soak instead (the CI test's
scenario, ``RECOVERY_SOAK_RUNS`` runs, default 5,000).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import PgCheckpointer
from tenxgraph.utils import END

DSN = os.environ.get("TENXGRAPH_BENCH_DSN", "postgresql://postgres@127.0.0.1:5432/test")
HERE = Path(__file__).resolve().parent


async def plan(state: AgentState) -> Message:
    return Message.text_message(f"plan for {state.context[-1].text()}", role="assistant")


async def answer(state: AgentState) -> str:
    return "done"


def build(schema: str) -> Any:
    """The benchmark graph on a Postgres schema."""
    g = StateGraph()
    g.add_node("plan", plan)
    g.add_node("answer", answer)
    g.set_entry_point("plan")
    g.add_edge("plan", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=PgCheckpointer(postgres_dsn=DSN, schema=schema))


def app() -> Any:
    """What the worker processes load (``--graph background_runs:app``)."""
    return build(os.environ["BENCH_SCHEMA"])


def _schema() -> str:
    name = "bench_bg_" + uuid.uuid4().hex[:8]
    with psycopg.connect(DSN, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{name}"')
    return name


def _drop(schema: str) -> None:
    with psycopg.connect(DSN, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def _bounded(n: int, concurrency: int, fn: Any) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await fn(i)

    await asyncio.gather(*(one(i) for i in range(n)))


async def direct(runs: int, concurrency: int) -> dict[str, Any]:
    schema = _schema()
    graph = build(schema)
    try:
        await graph.checkpointer.asetup()
        await graph.ainvoke({"messages": [Message.text_message("warm")]}, {"thread_id": "warm"})
        t0 = time.perf_counter()
        await _bounded(
            runs,
            concurrency,
            lambda i: graph.ainvoke(
                {"messages": [Message.text_message(f"q{i}")]}, {"thread_id": f"d{i}"}
            ),
        )
        wall = time.perf_counter() - t0
    finally:
        await graph.aclose()
        _drop(schema)
    return {
        "mode": "direct ainvoke",
        "runs": runs,
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 1),
    }


def start_workers(schema: str, workers: int, concurrency: int) -> list[subprocess.Popen[bytes]]:
    """``workers`` ``tenxgraph worker`` processes on the schema, started and ready."""
    tmp = Path(tempfile.mkdtemp(prefix="bench_bg_"))
    env = dict(
        os.environ,
        BENCH_SCHEMA=schema,
        PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]),
    )
    procs = []
    for w in range(workers):
        with open(tmp / f"w{w}.log", "wb") as err:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tenxgraph.worker",
                        "--graph",
                        "background_runs:app",
                        "--concurrency",
                        str(max(1, concurrency // workers)),
                        "--worker-id",
                        f"w{w}",
                    ],
                    env=env,
                    stderr=err,
                    stdout=subprocess.DEVNULL,
                )
            )
    for w in range(workers):
        while b"ready" not in (tmp / f"w{w}.log").read_bytes():
            time.sleep(0.05)
    return procs


async def _submit_and_wait(schema: str, runs: int, concurrency: int) -> tuple[float, float]:
    graph = build(schema)
    try:
        store: Any = graph.checkpointer.store
        t0 = time.perf_counter()
        await _bounded(
            runs,
            concurrency,
            lambda i: graph.asubmit(
                {"messages": [Message.text_message(f"q{i}")]}, {"thread_id": f"s{i}"}
            ),
        )
        submit_wall = time.perf_counter() - t0
        done = 0
        while done < runs:
            await asyncio.sleep(0.02)  # noqa: ASYNC110 - the store is what we wait on
            done = len(await store.run_list("", status="completed", limit=runs + 1))
        return submit_wall, time.perf_counter() - t0
    finally:
        await graph.aclose()


def submitted(runs: int, concurrency: int, workers: int) -> dict[str, Any]:
    """Submit ``runs`` runs through ``workers`` worker processes; see the module docstring."""
    schema = _schema()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        setup = build(schema)
        setup.checkpointer.setup()
        setup.close()
        procs = start_workers(schema, workers, concurrency)
        submit_wall, wall = asyncio.run(_submit_and_wait(schema, runs, concurrency))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)
        _drop(schema)
    return {
        "mode": f"submitted, {workers} worker(s)",
        "runs": runs,
        "wall_s": round(wall, 2),
        "runs_per_s": round(runs / wall, 1),
        "submits_per_s": round(runs / submit_wall, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--soak", action="store_true", help="run the long soak test instead")
    args = p.parse_args()
    if args.soak:
        env = dict(os.environ, RECOVERY_SOAK_RUNS=os.environ.get("RECOVERY_SOAK_RUNS", "5000"))
        raise SystemExit(
            subprocess.call(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-s",
                    "-n",
                    "0",
                    "-p",
                    "no:cacheprovider",
                    "--timeout",
                    "3600",
                    str(HERE.parent / "tests" / "recovery" / "test_soak.py"),
                ],
                env=env,
                cwd=HERE.parent,
            )
        )
    rows = [asyncio.run(direct(args.runs, args.concurrency))]
    for w in (1, 4):
        rows.append(submitted(args.runs, args.concurrency, w))
    for r in rows:
        print(json.dumps(r))
    base = rows[0]["runs_per_s"]
    for r in rows[1:]:
        extra_ms = 1000 * args.concurrency * (1 / r["runs_per_s"] - 1 / base)
        print(
            f"{r['mode']}: {r['runs_per_s']} runs/s = {r['runs_per_s'] / base:.2f}x direct "
            f"({base} runs/s); durability cost ~{extra_ms:.1f} ms of a slot per run at "
            f"concurrency {args.concurrency}"
        )


if __name__ == "__main__":
    main()
