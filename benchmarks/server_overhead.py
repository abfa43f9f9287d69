"""What the server costs per request: ``POST /v1/graph/invoke`` against ``ainvoke`` in process.

The same one-node graph (``_server_graph.py``: one node that answers without a model) on the
same PostgreSQL database, with the server's default multitask strategy (``enqueue``), called
four ways:

* ``in process``: ``await graph.ainvoke(...)`` from N asyncio callers in this process;
* ``1 server``: ``tenxgraph serve`` (one process), called directly over HTTP/1.1;
* ``1 server + HAProxy``: the same behind HAProxy (what the balancer adds);
* ``3 servers + HAProxy``: three ``tenxgraph serve`` processes, round robin.

Each way runs with 1 caller (latency) and with ``--callers`` callers (throughput). A caller
sends turns one after another on its own threads (a new thread every 50 turns), each turn a
new user message; reported: requests/s, p50 and p99 latency (ms), and the overhead per request
against in process (the difference of the p50s). The HTTP client (httpx, keep-alive) runs in
this process and costs CPU of its own: on a 2-core machine the server processes, HAProxy,
PostgreSQL and the client share the cores, so the 3-server rows measure contention as much as
scaling.

    python benchmarks/server_overhead.py                  # 10 s per row
    python benchmarks/server_overhead.py --seconds 5 --callers 16

Needs PostgreSQL (``--dsn``, default ``$TENXBENCH_PG_DSN`` or the local test server, a
superuser role: a private database ``tenxbench_<random>`` is created and dropped) and HAProxy
(``scripts/services.sh`` installs it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "server_lb"))

import httpx  # noqa: E402
from _lb_cluster import Cluster  # noqa: E402
from _pg import DEFAULT_DSN, BenchDatabase  # noqa: E402

from tenxgraph.core.state import Message  # noqa: E402

Call = Callable[[str, str, str], Awaitable[None]]

#: Turns per thread before a caller starts a new one.
TURNS_PER_THREAD = 50


async def measure(call: Call, label: str, callers: int, seconds: float) -> dict[str, Any]:
    """Run ``callers`` callers for ``seconds`` (after 1 s of warm-up); latencies in ms."""
    lat: list[float] = []
    stop_at = 0.0
    warm_until = 0.0

    async def caller(c: int) -> None:
        k = 0
        while time.monotonic() < stop_at:
            tid = f"{label}-{callers}-{c}-{k // TURNS_PER_THREAD}"
            t0 = time.perf_counter()
            await call(tid, f"{tid}-m{k}", f"turn {k}")
            t1 = time.perf_counter()
            if time.monotonic() >= warm_until:
                lat.append((t1 - t0) * 1000)
            k += 1

    warm_until = time.monotonic() + 1.0
    stop_at = warm_until + seconds
    await asyncio.gather(*(caller(c) for c in range(callers)))
    lat.sort()
    return {
        "way": label,
        "callers": callers,
        "requests": len(lat),
        "rps": len(lat) / seconds,
        "p50_ms": statistics.median(lat),
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    }


def http_call(client: httpx.AsyncClient) -> Call:
    """One turn over HTTP (raises on any answer but 200)."""

    async def call(tid: str, mid: str, text: str) -> None:
        r = await client.post(
            "/v1/graph/invoke",
            json={
                "messages": [{"message_id": mid, "role": "user", "content": text}],
                "config": {"thread_id": tid},
            },
        )
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code}: {r.text[:300]}")

    return call


async def run_http(
    url: str, label: str, callers: list[int], seconds: float
) -> list[dict[str, Any]]:
    """The rows of one HTTP way."""
    rows = []
    limits = httpx.Limits(max_connections=max(callers), max_keepalive_connections=max(callers))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        for n in callers:
            rows.append(await measure(http_call(client), label, n, seconds))
    return rows


async def run_in_process(callers: list[int], seconds: float) -> list[dict[str, Any]]:
    """The rows of the in-process way."""
    import _server_graph

    graph = await _server_graph.make_graph()
    try:

        async def call(tid: str, mid: str, text: str) -> None:
            msg = Message.text_message(text, message_id=mid)
            await graph.ainvoke({"messages": [msg]}, {"thread_id": tid})

        return [await measure(call, "in process", n, seconds) for n in callers]
    finally:
        await graph.aclose()


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table of the rows, with the overhead against in process."""
    base = {r["callers"]: r["p50_ms"] for r in rows if r["way"] == "in process"}
    out = [
        "| way | callers | requests/s | p50 ms | p99 ms | p50 overhead vs in process |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        over = r["p50_ms"] - base.get(r["callers"], r["p50_ms"])
        out.append(
            f"| {r['way']} | {r['callers']} | {r['rps']:.0f} | {r['p50_ms']:.2f} | "
            f"{r['p99_ms']:.2f} | {'' if r['way'] == 'in process' else f'+{over:.2f} ms'} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--dsn", default=os.environ.get("TENXBENCH_PG_DSN", DEFAULT_DSN))
    ap.add_argument("--seconds", type=float, default=10.0, help="timed seconds per row")
    ap.add_argument("--callers", type=int, default=16, help="callers of the throughput rows")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: stop servers, drop db
    callers = [1, args.callers]
    load0 = os.getloadavg()[0]
    with BenchDatabase(args.dsn) as db, tempfile.TemporaryDirectory() as tmp:
        os.environ["BENCH_SERVER_DSN"] = db.dsn
        rows = asyncio.run(run_in_process(callers, args.seconds))
        env = {"BENCH_SERVER_DSN": db.dsn}
        for n in (1, 3):
            folder = Path(tmp) / f"n{n}"
            folder.mkdir()
            cluster = Cluster(
                folder,
                "_server_graph:make_graph",
                env=env,
                n=n,
                pythonpath=[HERE],
            )
            with cluster:
                if n == 1:
                    rows += asyncio.run(
                        run_http(cluster.server_url(0), "1 server", callers, args.seconds)
                    )
                    label = "1 server + HAProxy"
                else:
                    label = "3 servers + HAProxy"
                rows += asyncio.run(run_http(cluster.url, label, callers, args.seconds))
    load1 = os.getloadavg()[0]
    print(table(rows))
    print(
        f"\n{os.cpu_count()} cores; 1-minute load average {load0:.2f} at start, {load1:.2f} "
        f"at end; {args.seconds:.0f} s per row after 1 s of warm-up."
    )


if __name__ == "__main__":
    main()
