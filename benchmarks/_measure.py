"""How things are measured: interleaved samples, medians with min/max, and the counting passes.

One *sample* is one run (:data:`~_workload.STEPS_PER_RUN` steps) of one contender on a thread
that holds ``history`` messages before the run. At each history length every contender is
sampled in turn, round after round (the order rotates each round), so the load of a shared
machine falls on all of them alike; ratios are computed per round (samples of one round are
paired) and reported as the median, min and max of the per-round ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from _contenders import Contender, Sample
from _pg import RoundTripProxy, StatementCounter, WalMeter, sqlite_bytes_written, sqlite_row_bytes
from _workload import STEPS_PER_RUN


@dataclass
class Stat:
    """Median, min and max of a list of values (``n`` values)."""

    median: float
    min: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat | None:
        vals = [v for v in values if v is not None]
        if not vals:
            return None
        return cls(statistics.median(vals), min(vals), max(vals), len(vals))

    def fmt(self, digits: int = 2, scale: float = 1.0) -> str:
        return f"{self.median * scale:,.{digits}f} ({self.min * scale:,.{digits}f}-{self.max * scale:,.{digits}f})"

    def as_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.min, "max": self.max, "n": self.n}


@dataclass
class PointResult:
    """Everything measured for one contender at one history length."""

    contender: str
    history: int
    samples: list[Sample] = field(default_factory=list)
    wal_lsn_bytes: list[int] = field(default_factory=list)
    wal_db_bytes: list[int] = field(default_factory=list)
    sqlite_bytes: list[int] = field(default_factory=list)

    @property
    def ms(self) -> Stat | None:
        return Stat.of([s.ms_per_step for s in self.samples])

    @property
    def cpu_ms(self) -> Stat | None:
        return Stat.of([s.cpu_ms_per_step for s in self.samples])

    @property
    def steps_per_s(self) -> float | None:
        ms = self.ms
        return 1e3 / ms.median if ms else None

    def wal_db_per_step(self) -> Stat | None:
        return Stat.of([b / STEPS_PER_RUN for b in self.wal_db_bytes])

    def wal_lsn_per_step(self) -> Stat | None:
        return Stat.of([b / STEPS_PER_RUN for b in self.wal_lsn_bytes])

    def sqlite_per_step(self) -> Stat | None:
        return Stat.of([b / STEPS_PER_RUN for b in self.sqlite_bytes])

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"contender": self.contender, "history": self.history}
        for key, st in (
            ("ms_per_step", self.ms),
            ("cpu_ms_per_step", self.cpu_ms),
            ("wal_db_bytes_per_step", self.wal_db_per_step()),
            ("wal_lsn_bytes_per_step", self.wal_lsn_per_step()),
            ("sqlite_bytes_per_step", self.sqlite_per_step()),
        ):
            if st is not None:
                out[key] = st.as_dict()
        return out


def paired_ratio(num: PointResult, den: PointResult, *, cpu: bool = False) -> Stat | None:
    """``num / den`` of ms/step (``cpu``: of client CPU ms/step), per round (samples taken in
    the same round are paired): median, min and max of the per-round ratios."""
    if cpu:
        return Stat.of(
            [
                a.cpu_ms_per_step / b.cpu_ms_per_step
                for a, b in zip(num.samples, den.samples, strict=False)
                if b.cpu_ms_per_step > 0
            ]
        )
    return Stat.of(
        [a.ms_per_step / b.ms_per_step for a, b in zip(num.samples, den.samples, strict=False)]
    )


def measure_point(
    contenders: Sequence[Contender],
    history: int,
    samples: int,
    *,
    wal: WalMeter | None = None,
    wal_samples: int = 3,
    sqlite_samples: int = 2,
    log: Callable[[str], None] = print,
) -> dict[str, PointResult]:
    """Sample every contender ``samples`` times at one history length (see
    :func:`measure_points`)."""
    return measure_points(
        contenders,
        {history: samples},
        wal=wal,
        wal_samples=wal_samples,
        sqlite_samples=sqlite_samples,
        log=log,
    )[history]


def measure_points(
    contenders: Sequence[Contender],
    samples: dict[int, int],
    *,
    wal: WalMeter | None = None,
    wal_samples: int = 3,
    sqlite_samples: int = 2,
    log: Callable[[str], None] = print,
) -> dict[int, dict[str, PointResult]]:
    """Sample every contender at every history length of ``samples`` (history -> count),
    interleaved: round ``i`` samples each history length, each contender in turn (the order
    rotating), so the drift of a busy machine falls on every contender and every history
    length alike, and ratios between history lengths are as fair as ratios between contenders.

    Below 1,000 messages each sample gets its own thread prepared with ``history`` messages (a
    run adds ``STEPS_PER_RUN + 1`` messages, which would move a short thread's length too
    much); from 1,000 on one prepared thread takes all samples (it grows by under 10 %).
    ``history == 0`` means a fresh thread per sample.
    """
    threads: dict[tuple[int, str], list[str]] = {}
    t0 = time.perf_counter()
    for c in contenders:
        for history, n in samples.items():
            if history == 0:
                threads[history, c.name] = [c.prepare(0) for _ in range(n)]
            elif history < 1000:
                threads[history, c.name] = [c.prepare(history) for _ in range(n)]
            else:
                threads[history, c.name] = [c.prepare(history)] * n
        c.run(c.prepare(0))  # warm-up run, untimed
    log(
        f"  prepared {len(contenders)} contenders at {sorted(samples)} messages "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    results = {h: {c.name: PointResult(c.name, h) for c in contenders} for h in samples}
    order = list(contenders)
    k = 0
    for i in range(max(samples.values())):
        for history, n in samples.items():
            if i >= n:
                continue
            rot = order[k % len(order) :] + order[: k % len(order)]
            k += 1
            for c in rot:
                tid = threads[history, c.name][i]
                res = results[history][c.name]
                lsn0 = (
                    wal.lsn() if (wal is not None and c.uses_postgres and i < wal_samples) else None
                )
                rows0 = (
                    sqlite_row_bytes(c.sqlite_path)
                    if (c.sqlite_path and i < sqlite_samples)
                    else None
                )
                s = c.run(tid)
                res.samples.append(s)
                if lsn0 is not None and wal is not None:
                    ws = wal.sample(lsn0, wal.lsn())
                    res.wal_lsn_bytes.append(ws.lsn_bytes)
                    if ws.db_bytes is not None:
                        res.wal_db_bytes.append(ws.db_bytes)
                if rows0 is not None and c.sqlite_path:
                    res.sqlite_bytes.append(
                        sqlite_bytes_written(rows0, sqlite_row_bytes(c.sqlite_path))
                    )
    return results


def paired_growth(a: PointResult, b: PointResult, attr: str = "ms_per_step") -> Stat | None:
    """``b / a`` of ms/step (or ``cpu_ms_per_step``) per round, for two history lengths of
    one contender measured in the same rounds: median, min and max of the per-round ratios."""
    return Stat.of(
        [getattr(y, attr) / getattr(x, attr) for x, y in zip(a.samples, b.samples, strict=False)]
    )


@dataclass
class WireCount:
    """Round trips and statements of one contender, per step, over ``runs`` runs."""

    contender: str
    history: int
    runs: int
    turnarounds_per_step: float
    #: round trips that only prepared a statement (psycopg prepares a query server-side after
    #: ``prepare_threshold`` executions on a connection: Parse + Sync, one extra round trip)
    prepare_trips_per_step: float
    redis_trips_per_step: float | None
    statements_per_step: float
    client_bytes_per_step: float
    server_statements: dict[str, int] | None
    write_commits_per_step: float | None
    patterns: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def count_wire(
    make: Callable[[str, str | None], Contender],
    base_dsn: str,
    proxy: RoundTripProxy,
    counter: StatementCounter,
    wal: WalMeter | None,
    history: int,
    runs: int,
    *,
    redis_proxy: RoundTripProxy | None = None,
    redis_url: str | None = None,
    warmup_runs: int = 6,
) -> WireCount:
    """Open a contender through the proxy (and the statement log), prepare a thread with
    ``history`` messages, warm up (``warmup_runs`` runs: connections opened, statements
    prepared), then count ``runs`` runs."""
    dsn = counter.dsn(proxy.dsn(base_dsn))
    rurl = redis_proxy.url(redis_url) if (redis_proxy is not None and redis_url) else redis_url
    c = make(dsn, rurl)
    c.open()
    try:
        tid = c.prepare(history)
        for _ in range(warmup_runs):
            c.run(tid)
        proxy.trace = []
        counter.start()
        s0 = proxy.snapshot()
        r0 = redis_proxy.snapshot() if redis_proxy is not None else None
        lsn0 = wal.lsn() if wal is not None else None
        for _ in range(runs):
            c.run(tid)
        s1 = proxy.snapshot()
        r1 = redis_proxy.snapshot() if redis_proxy is not None else None
        lsn1 = wal.lsn() if wal is not None else None
        stmts = counter.stop()
        patterns: dict[str, int] = {}
        for p in proxy.trace or []:
            patterns[p] = patterns.get(p, 0) + 1
        proxy.trace = None
    finally:
        c.close()
    steps = runs * STEPS_PER_RUN
    commits = None
    if wal is not None and lsn0 is not None and lsn1 is not None:
        n = wal.commits(lsn0, lsn1)
        commits = n / steps if n is not None else None
    return WireCount(
        contender=c.name,
        history=history,
        runs=runs,
        turnarounds_per_step=(s1["turnarounds"] - s0["turnarounds"]) / steps,
        prepare_trips_per_step=sum(v for k, v in patterns.items() if "E" not in k and "Q" not in k)
        / steps,
        redis_trips_per_step=(
            (r1["turnarounds"] - r0["turnarounds"]) / steps
            if (r0 is not None and r1 is not None and getattr(c, "store", "") == "postgres+redis")
            else None
        ),
        statements_per_step=(s1["statements"] - s0["statements"]) / steps,
        client_bytes_per_step=(s1["client_bytes"] - s0["client_bytes"]) / steps,
        server_statements=stmts,
        write_commits_per_step=commits,
        patterns=patterns,
    )
