"""Fixtures of the pytest-benchmark suites (``pytest benchmarks/``).

Servers: ``--bench-dsn`` (default ``$TENXBENCH_PG_DSN`` or the local test server, a superuser
role) and ``--bench-redis-url``. Postgres benchmarks are skipped when the server does not
answer, the Postgres+Redis ones when Redis does not. One private database
(``tenxbench_<random>``) and one Redis key prefix per session, both removed at the end.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _contenders import Contender  # noqa: E402
from _pg import BenchDatabase, WalMeter, server_info  # noqa: E402
from _setup import Setup  # noqa: E402
from _workload import STEPS_PER_RUN  # noqa: E402

DEFAULT_DSN = os.environ.get("TENXBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DEFAULT_REDIS = os.environ.get("TENXBENCH_REDIS_URL", "redis://127.0.0.1:6379/0")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bench-dsn", default=DEFAULT_DSN, help="Postgres server for the benchmarks")
    parser.addoption("--bench-redis-url", default=DEFAULT_REDIS, help="Redis for the benchmarks")


def pytest_benchmark_update_machine_info(
    config: pytest.Config, machine_info: dict[str, Any]
) -> None:
    from importlib.metadata import version

    try:
        machine_info["postgres"] = server_info(config.getoption("--bench-dsn"))
    except Exception as exc:  # noqa: BLE001
        machine_info["postgres"] = f"unavailable: {type(exc).__name__}"
    machine_info["langgraph"] = version("langgraph")
    machine_info["loadavg"] = list(os.getloadavg())
    machine_info["steps_per_run"] = STEPS_PER_RUN


@pytest.fixture(scope="session")
def bench_db(pytestconfig: pytest.Config) -> Iterator[BenchDatabase]:
    dsn = pytestconfig.getoption("--bench-dsn")
    db = BenchDatabase(dsn)
    try:
        db.__enter__()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"Postgres at {dsn} not usable: {type(exc).__name__}")
    try:
        yield db
    finally:
        db.drop()


@pytest.fixture(scope="session")
def redis_url(pytestconfig: pytest.Config) -> str | None:
    url = pytestconfig.getoption("--bench-redis-url")
    try:
        import redis

        r = redis.Redis.from_url(url, socket_connect_timeout=1)
        r.ping()
        r.close()
    except Exception:  # noqa: BLE001
        return None
    return url


@pytest.fixture(scope="session")
def redis_prefix(redis_url: str | None) -> Iterator[str]:
    prefix = f"tenxbench:{secrets.token_hex(4)}:"
    yield prefix
    if redis_url:
        import redis

        r = redis.Redis.from_url(redis_url)
        keys = list(r.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i : i + 500])
        r.close()


@pytest.fixture(scope="session")
def wal_meter(bench_db: BenchDatabase) -> Iterator[WalMeter]:
    meter = WalMeter(bench_db)
    yield meter
    meter.close()


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tenxbench"))


def needs(store: str) -> list[str]:
    """What a contender needs: "pg", "redis"."""
    out = []
    if "postgres" in store or store == "floor":
        out.append("pg")
    if "redis" in store:
        out.append("redis")
    return out


@pytest.fixture
def make_setup(request: pytest.FixtureRequest, workdir: str) -> Any:
    """``make_setup(store)``: a :class:`Setup` with the servers ``store`` needs (skips when
    they are not available)."""

    def make(store: str) -> Setup:
        db = None
        rurl = None
        prefix = "tenxbench:none:"
        req = needs(store)
        if "pg" in req:
            db = request.getfixturevalue("bench_db")
        if "redis" in req:
            rurl = request.getfixturevalue("redis_url")
            if rurl is None:
                pytest.skip("Redis not answering")
            prefix = request.getfixturevalue("redis_prefix")
        return Setup(db, rurl, prefix, workdir)

    return make


@pytest.fixture
def opened() -> Iterator[Any]:
    """``opened(contender)``: open it now, close it at teardown."""
    items: list[Contender] = []

    def open_(c: Contender) -> Contender:
        c.open()
        items.append(c)
        return c

    yield open_
    for c in items:
        c.close()


def contender_for(setup: Setup, case: str) -> Contender:
    """A contender from a case id: ``tx:<store>[:eor]``, ``lg:<store>[:exit]``, ``floor``."""
    parts = case.split(":")
    if parts[0] == "tx":
        return setup.tx(parts[1], durable=not (len(parts) > 2 and parts[2] == "eor"))
    if parts[0] == "lg":
        return setup.lg(parts[1], parts[2] if len(parts) > 2 else "sync")
    return setup.floor()


def record(benchmark: Any, samples: list[Any]) -> None:
    """Per-step medians into the benchmark's extra_info (pytest-benchmark times whole runs)."""
    import statistics

    if not samples:
        return
    ms = statistics.median(s.ms_per_step for s in samples)
    benchmark.extra_info["steps_per_run"] = STEPS_PER_RUN
    benchmark.extra_info["ms_per_step_median"] = round(ms, 4)
    benchmark.extra_info["steps_per_s_median"] = round(1e3 / ms, 1)
    benchmark.extra_info["cpu_ms_per_step_median"] = round(
        statistics.median(s.cpu_ms_per_step for s in samples), 4
    )
