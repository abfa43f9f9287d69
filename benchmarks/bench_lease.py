"""Run lease (issue 15): N processes on ONE thread per multitask strategy, beside today's
optimistic behaviour (``None``), and the fresh-thread cost of the lease
(``benchmarks/_lease.py`` has the method).

Counted, not timed per call: ``extra_info`` holds steps/s (steps counted on the server),
wasted node executions per committed step (counted with a side-effect file) and the refusal
rates; the time pytest-benchmark shows is the whole configuration's.
"""

from __future__ import annotations

import pytest
from _lease import STRATEGIES, fresh_thread_cost, shared_thread_rows, wake_latency

DURATION_S = 2.5
PROCESSES = [1, 2, 4, 8]


@pytest.mark.parametrize("node_ms", [0, 20])
@pytest.mark.parametrize("strategy", STRATEGIES, ids=str)
@pytest.mark.parametrize("processes", PROCESSES)
def bench_shared_thread(benchmark, bench_db, processes: int, strategy: str | None, node_ms: int):
    benchmark.group = f"lease: {processes} processes on one thread, nodes of {node_ms} ms"
    rows = benchmark.pedantic(
        shared_thread_rows,
        args=(bench_db.dsn,),
        kwargs={
            "counts": (processes,),
            "strategies": (strategy,),
            "duration_s": DURATION_S,
            "node_s": node_ms / 1e3,
            "log": lambda _msg: None,
        },
        rounds=1,
        iterations=1,
    )
    r = rows[0]
    attempts = r.runs + r.stale + r.busy
    benchmark.extra_info.update(
        {
            "strategy": str(strategy),
            "steps_per_s": round(r.steps_per_s, 1),
            "wasted_per_step": round(r.wasted_per_step, 4),
            "stale_rate": round(r.stale / attempts, 4) if attempts else 0.0,
            "busy_rate": round(r.busy / attempts, 4) if attempts else 0.0,
        }
    )


def bench_fresh_thread_lease_cost(benchmark, bench_db):
    benchmark.group = "lease: fresh-thread cost"
    r = benchmark.pedantic(fresh_thread_cost, args=(bench_db.dsn,), rounds=1, iterations=1)
    benchmark.extra_info.update(
        {
            "ms_per_step": {k: round(v, 4) for k, v in r.ms_per_step.items()},
            "cpu_ms_per_step": {k: round(v, 4) for k, v in r.cpu_ms_per_step.items()},
            "round_trips_per_run": r.round_trips_per_run,
            "wal_syncs_per_run": r.wal_syncs_per_run,
            "ratio_wall": round(r.ratio_wall, 4),
            "ratio_cpu": round(r.ratio_cpu, 4),
        }
    )


def bench_wake_latency(benchmark, bench_db):
    benchmark.group = "lease: wake-up after the release"
    r = benchmark.pedantic(wake_latency, args=(bench_db.dsn,), rounds=1, iterations=1)
    benchmark.extra_info.update(
        {
            "granted_ms": {
                k: {p: round(x, 3) for p, x in v.items()} for k, v in r.granted_ms.items()
            },
            "notified_ms": {p: round(x, 3) for p, x in r.notified_ms.items()},
            "release_ms": {p: round(x, 3) for p, x in r.release_ms.items()},
        }
    )
