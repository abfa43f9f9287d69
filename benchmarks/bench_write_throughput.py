"""Checkpoint write throughput on a fresh thread, per store, per-step vs end-of-run checkpoints,
tenxgraph vs LangGraph vs the floor.

pytest-benchmark times one *run* of the graph (``STEPS_PER_RUN`` steps); ``extra_info`` holds
the per-step medians (ms/step, steps/s, client CPU ms/step). Each round uses a new thread.
"""

from __future__ import annotations

import pytest
from conftest import contender_for, record

CASES = [
    "tx:memory",
    "tx:sqlite",
    "tx:postgres",
    "tx:postgres+redis",
    "tx:memory:eor",
    "tx:sqlite:eor",
    "tx:postgres:eor",
    "tx:postgres+redis:eor",
    "lg:memory",
    "lg:postgres",
    "lg:memory:exit",
    "lg:postgres:exit",
    "floor",
]
ROUNDS = 15


@pytest.mark.parametrize("case", CASES)
def bench_fresh_thread(benchmark, make_setup, opened, case: str) -> None:
    store = case.split(":")[1] if ":" in case else "floor"
    c = opened(contender_for(make_setup(store), case))
    benchmark.group = "fresh thread: one run of 10 steps"
    benchmark.extra_info["contender"] = c.name
    samples = []

    def target(tid: str) -> None:
        samples.append(c.run(tid))

    benchmark.pedantic(
        target, setup=lambda: ((c.prepare(0),), {}), rounds=ROUNDS, warmup_rounds=1, iterations=1
    )
    record(benchmark, samples[1:] if len(samples) > ROUNDS else samples)
