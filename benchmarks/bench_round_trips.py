"""Round trips, statements and commits per step, for every Postgres contender, on a fresh
thread and at 1,000 messages of history.

Counted, not timed: the contender connects through a TCP relay that counts round trips (the
client waiting for the server) and protocol messages, with ``log_statement = all`` on its
sessions (or pg_stat_statements when the server has it loaded) for the server's own count, and
commits are the COMMIT records of the bench database's transactions in the WAL. The numbers are
in ``extra_info``; the time pytest-benchmark shows is that of the counting pass, through the
relay, and means nothing.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from _measure import count_wire
from _pg import RoundTripProxy, StatementCounter
from conftest import contender_for

CASES = [
    "tx:postgres",
    "tx:postgres:eor",
    "tx:postgres+redis",
    "tx:postgres+redis:eor",
    "lg:postgres",
    "lg:postgres:exit",
    "floor",
]


@pytest.fixture(scope="module")
def wire(bench_db):
    proxy = RoundTripProxy(bench_db.host, bench_db.port)
    counter = StatementCounter(bench_db)
    yield proxy, counter
    proxy.close()
    counter.close()


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("history", [0, 1000])
def bench_round_trips(
    benchmark, request, make_setup, wire, wal_meter, bench_db, history: int, case: str
) -> None:
    store = case.split(":")[1] if ":" in case else "floor"
    setup = make_setup(store)
    proxy, counter = wire
    rproxy = None
    if setup.redis_url:
        u = urlsplit(setup.redis_url)
        rproxy = RoundTripProxy(u.hostname or "127.0.0.1", u.port or 6379, protocol="raw")

    def make(dsn, rurl):
        c = contender_for(setup, case)
        c.dsn = dsn
        if rurl is not None and hasattr(c, "redis_url"):
            c.redis_url = rurl
        return c

    benchmark.group = "wire counts (time not meaningful)"
    try:
        w = benchmark.pedantic(
            count_wire,
            args=(make, bench_db.dsn, proxy, counter, wal_meter, history, 5),
            kwargs={"redis_proxy": rproxy, "redis_url": setup.redis_url},
            rounds=1,
            iterations=1,
        )
    finally:
        if rproxy is not None:
            rproxy.close()
    benchmark.extra_info.update(
        {
            "contender": w.contender,
            "statement_count_method": counter.method,
            "round_trips_per_step": w.turnarounds_per_step,
            "prepare_only_round_trips_per_step": w.prepare_trips_per_step,
            "redis_round_trips_per_step": w.redis_trips_per_step,
            "commits_per_step": w.write_commits_per_step,
            "statements_per_step_wire": w.statements_per_step,
            "server_statements": w.server_statements,
            "bytes_sent_per_step": w.client_bytes_per_step,
        }
    )
