"""Concurrency: 1, 2, 4, 8 worker processes on separate threads and on one shared thread (with
retry on ``StaleStateError``), and one process with 8 concurrent callers (pool of 20).

Counted, not timed per call: ``extra_info`` holds aggregate steps/s (steps counted on the
server) and the conflict rate (failed compare-and-swap writes per write attempt). The time
pytest-benchmark shows is the whole configuration's.
"""

from __future__ import annotations

import pytest
from _concurrency import WorkerPool, run_in_process_threads, run_in_process_tx, run_processes

DURATION_S = 2.5
WORKERS = [1, 2, 4, 8]


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(max(WORKERS))
    yield p
    p.close()


def _spec(setup, case: str) -> dict:
    kind, store = case.split(":")
    if kind == "tx":
        c = setup.tx(store)
        return {
            "kind": "tenxgraph",
            "name": c.name,
            "store": store,
            "dsn": setup.db.dsn,
            "redis_url": setup.redis_url,
            "redis_prefix": setup.redis_prefix,
            "schema": c.schema + "_mp",
        }
    c = setup.lg(store)
    return {"kind": "langgraph", "name": c.name, "store": store, "dsn": setup.db.dsn}


@pytest.mark.parametrize(
    "case,mode",
    [
        ("tx:postgres", "separate"),
        ("tx:postgres", "shared"),
        ("tx:postgres+redis", "shared"),
        ("lg:postgres", "separate"),
    ],
)
@pytest.mark.parametrize("workers", WORKERS)
def bench_processes(benchmark, make_setup, pool, workers: int, case: str, mode: str) -> None:
    spec = _spec(make_setup(case.split(":")[1]), case)
    benchmark.group = f"{workers} processes"
    r = benchmark.pedantic(
        run_processes, args=(pool, spec, workers, mode, DURATION_S), rounds=1, iterations=1
    )
    benchmark.extra_info.update(
        {
            "contender": r.contender,
            "mode": mode,
            "steps_per_s": round(r.steps_per_s, 1),
            "conflict_rate": round(r.conflict_rate, 4),
            "errors": r.errors,
        }
    )


@pytest.mark.parametrize("case", ["tx:postgres", "lg:postgres", "floor"])
def bench_one_process_8_callers(benchmark, make_setup, opened, case: str) -> None:
    setup = make_setup("postgres")
    if case == "tx:postgres":
        c = opened(setup.tx("postgres", pool_max=20, tag=" pool20"))
        fn = run_in_process_tx
    elif case == "lg:postgres":
        c = opened(setup.lg("postgres", pool_max=20))
        fn = run_in_process_threads
    else:
        c = opened(setup.floor())
        fn = run_in_process_threads
    benchmark.group = "one process, 8 concurrent callers"
    r = benchmark.pedantic(fn, args=(c, 8, DURATION_S), rounds=1, iterations=1)
    benchmark.extra_info.update(
        {"contender": r.contender, "steps_per_s": round(r.steps_per_s, 1), "errors": r.errors}
    )
