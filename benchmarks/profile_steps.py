"""Profile tenxgraph's per-step cost with cProfile: N steps of the benchmark graph on a thread
that already holds H messages.

    python benchmarks/profile_steps.py --store postgres --history 5000 --steps 500
    python benchmarks/profile_steps.py --store memory --history 5000 --steps 500 --sort cumulative

Prints the wall and CPU time per step without and with the profiler, then the top functions.
Postgres stores run in a private database (``tenxbench_<random>``) dropped at the end.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _contenders import TenxContender  # noqa: E402
from _pg import BenchDatabase  # noqa: E402
from _workload import STEPS_PER_RUN  # noqa: E402


def profile(
    store: str,
    history: int,
    steps: int,
    dsn: str,
    redis_url: str,
    sort: str,
    top: int,
    cpu_timer: bool = False,
) -> str:
    db = BenchDatabase(dsn) if store.startswith("postgres") else None
    if db is not None:
        db.__enter__()
    prefix = f"tenxbench:prof{time.time_ns()}:"
    try:
        c = TenxContender(
            f"tenxgraph {store}",
            store,
            dsn=db.dsn if db else None,
            redis_url=redis_url,
            redis_prefix=prefix,
        )
        c.open()
        try:
            tid = c.prepare(history)
            runs = max(1, steps // STEPS_PER_RUN)
            c.run(tid)
            plain = [c.run(tid) for _ in range(runs)]
            # With --cpu-timer the profiler charges CPU time (time.process_time), not wall time:
            # on a loaded machine wall time charges a function for the time it waited for a CPU.
            prof = cProfile.Profile(time.process_time) if cpu_timer else cProfile.Profile()
            prof.enable()
            profiled = [c.run(tid) for _ in range(runs)]
            prof.disable()
        finally:
            c.close()
    finally:
        if db is not None:
            db.__exit__(None, None, None)
        if store == "postgres+redis":
            _drop_redis_keys(redis_url, prefix)
    n = runs * STEPS_PER_RUN
    out = io.StringIO()
    out.write(
        f"{store}, {history} messages of history, {n} steps"
        f" (profiler clock: {'process CPU time' if cpu_timer else 'wall time'})\n"
        f"  without profiler: {sum(s.wall_s for s in plain) * 1e3 / n:.3f} ms/step wall, "
        f"{sum(s.cpu_s for s in plain) * 1e3 / n:.3f} ms/step CPU\n"
        f"  with profiler:    {sum(s.wall_s for s in profiled) * 1e3 / n:.3f} ms/step wall, "
        f"{sum(s.cpu_s for s in profiled) * 1e3 / n:.3f} ms/step CPU\n\n"
    )
    stats = pstats.Stats(prof, stream=out)
    out.write("self time by package / tenxgraph module:\n")
    for name, t in by_package(stats):
        out.write(f"  {t * 1e3 / n:7.3f} ms/step  {name}\n")
    out.write("\n")
    stats.strip_dirs().sort_stats(sort).print_stats(top)
    return out.getvalue()


def _drop_redis_keys(url: str, prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    try:
        keys = list(r.scan_iter(match=prefix + "*", count=1000))
        if keys:
            r.delete(*keys)
    finally:
        r.close()


def by_package(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Self time summed per third-party package, per tenxgraph module, per stdlib module."""
    totals: dict[str, float] = {}
    for (filename, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~":
            key = "builtins: " + func.split(" of ")[0].strip("<>{}")
        elif "/tenxgraph/" in filename:
            key = "tenxgraph/" + filename.split("/tenxgraph/", 1)[1]
        elif "site-packages/" in filename:
            key = filename.split("site-packages/", 1)[1].split("/", 1)[0]
        elif "/benchmarks/" in filename:
            key = "benchmark graph (nodes, router)"
        else:
            key = "stdlib: " + Path(filename).name
        totals[key] = totals.get(key, 0.0) + tt
    return sorted(totals.items(), key=lambda kv: -kv[1])[:25]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--store", default="postgres", choices=["memory", "sqlite", "postgres", "postgres+redis"]
    )
    ap.add_argument("--history", type=int, default=5000)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumulative, ...)")
    ap.add_argument("--top", type=int, default=35)
    ap.add_argument("--cpu-timer", action="store_true", help="charge CPU time instead of wall time")
    args = ap.parse_args(argv)
    print(
        profile(
            args.store,
            args.history,
            args.steps,
            args.dsn,
            args.redis_url,
            args.sort,
            args.top,
            args.cpu_timer,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
