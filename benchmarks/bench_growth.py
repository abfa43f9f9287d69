"""Growth with thread length: one run (``STEPS_PER_RUN`` steps) on a thread that already holds
10, 100, 1,000 or 5,000 messages, for every store, LangGraph and the floor.

``extra_info`` holds ms/step, CPU ms/step and bytes written per step: WAL bytes of the bench
database (pg_waldump, else the LSN difference) on Postgres, bytes of the rows written on SQLite.
Below 1,000 messages each round gets its own prepared thread; from 1,000 on, one thread takes
every round (it grows by under 10 %).
"""

from __future__ import annotations

import statistics

import pytest
from _pg import sqlite_bytes_written, sqlite_row_bytes
from _workload import STEPS_PER_RUN
from conftest import contender_for, record

HISTORIES = [10, 100, 1000, 5000]
ROUNDS = {10: 8, 100: 8, 1000: 6, 5000: 4}
CASES = [
    "tx:memory",
    "tx:sqlite",
    "tx:postgres",
    "tx:postgres+redis",
    "lg:memory",
    "lg:postgres",
    "floor",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("history", HISTORIES)
def bench_growth(benchmark, request, make_setup, opened, history: int, case: str) -> None:
    store = case.split(":")[1] if ":" in case else "floor"
    c = opened(contender_for(make_setup(store), case))
    benchmark.group = f"{history} messages of history: one run of {STEPS_PER_RUN} steps"
    benchmark.extra_info["contender"] = c.name
    wal = request.getfixturevalue("wal_meter") if c.uses_postgres else None
    shared = c.prepare(history) if history >= 1000 else None
    samples, wal_bytes, sqlite_bytes = [], [], []
    before: dict = {}

    def setup():
        # Byte counters are read outside the timed call: in setup and teardown.
        before["lsn"] = wal.lsn() if wal is not None else None
        snap = c.sqlite_path and len(sqlite_bytes) < 3
        before["rows"] = sqlite_row_bytes(c.sqlite_path) if snap else None
        return ((shared or c.prepare(history),), {})

    def target(tid: str) -> None:
        samples.append(c.run(tid))

    def teardown(tid: str) -> None:
        if wal is not None:
            s = wal.sample(before["lsn"], wal.lsn())
            wal_bytes.append(s.db_bytes if s.db_bytes is not None else s.lsn_bytes)
        if before["rows"] is not None:
            sqlite_bytes.append(
                sqlite_bytes_written(before["rows"], sqlite_row_bytes(c.sqlite_path))
            )

    benchmark.pedantic(
        target,
        setup=setup,
        teardown=teardown,
        rounds=ROUNDS[history],
        warmup_rounds=1,
        iterations=1,
    )
    record(benchmark, samples[1:])
    if wal_bytes[1:]:
        benchmark.extra_info["wal_bytes_per_step_median"] = (
            statistics.median(wal_bytes[1:]) / STEPS_PER_RUN
        )
    if sqlite_bytes[1:]:
        benchmark.extra_info["sqlite_row_bytes_per_step_median"] = (
            statistics.median(sqlite_bytes[1:]) / STEPS_PER_RUN
        )
