"""Where the CPU of a durable step goes, on the client and on the server, beside the floor.

    python benchmarks/cpu_split.py [--histories 0 5000] [--runs 40] [--dsn DSN]

For tenxgraph's Postgres store and the floor (``BEGIN; INSERT; COMMIT`` pipelined in one round
trip), at each history length, interleaved run by run:

* **client CPU per step**: ``time.process_time()`` of this process around each run;
* **server CPU per step**: the CPU time of the PostgreSQL backends serving the bench
  database, read from ``/proc/<pid>/schedstat`` before and after each run (the server runs on this
  machine; elsewhere the column says so). Each contender has its own connections, so its
  backends are told apart by ``pg_stat_activity.application_name``;
* **the client's CPU by phase**: a cProfile of the same runs charging CPU time
  (``time.process_time``), each function's own time summed into the phase it belongs to (the
  graph's nodes, the runner, state encoding, the checkpoint record, the driver, the event
  loop ...). The profiler inflates every Python call by about the same amount, so the phases
  are given as shares of the profiled total, and as milliseconds at the unprofiled client CPU.

CPU times, not wall times, are the point: on a shared machine they move much less with load.
``run_all.py`` runs this as its "cpu" section; ``docs/benchmarks.md`` publishes the split.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _contenders import Contender, FloorContender, TenxContender  # noqa: E402
from _pg import BenchDatabase  # noqa: E402
from _workload import STEPS_PER_RUN  # noqa: E402

#: Phases of a step, and the file (path fragment) or function whose own CPU time counts in it,
#: in order of precedence (the first match decides).
PHASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("graph nodes and router (the benchmark's own code)", ("/benchmarks/",)),
    ("state encoding (serde, orjson)", ("tenxgraph/storage/serde.py", "orjson")),
    (
        "checkpoint record and write (checkpointer, store tiers)",
        ("tenxgraph/storage/",),
    ),
    ("driver (psycopg, libpq)", ("psycopg", "_pq_exec")),
    (
        "runner: graph loop, reducers, state, events",
        ("tenxgraph/core/", "tenxgraph/graph", "tenxgraph/utils", "tenxgraph/"),
    ),
    ("pydantic (model construction and copies)", ("pydantic",)),
    ("asyncio event loop, selectors, sockets", ("asyncio", "selectors", "socket", "select.")),
)
OTHER = "other (builtins, stdlib)"


def phase_of(filename: str, func: str) -> str:
    """The phase of a profiled function (see :data:`PHASES`)."""
    where = f"{filename}:{func}"
    for phase, needles in PHASES:
        if any(n in where for n in needles):
            return phase
    return OTHER


def _backend_cpu_s(pids: list[int]) -> float | None:
    """CPU seconds the processes ``pids`` ran so far (``None`` when /proc cannot tell):
    ``/proc/<pid>/schedstat``'s first field, in nanoseconds (``/proc/<pid>/stat`` counts in
    clock ticks of 10 ms, too coarse for a fraction of a millisecond per step)."""
    total = 0
    try:
        for pid in pids:
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return total / 1e9 if pids else None


def _backends(dsn: str, app_name: str) -> list[int]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s",
            (app_name,),
        ).fetchall()
    return [int(r[0]) for r in rows]


def _named(dsn: str, app_name: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(dsn, application_name=app_name)


def measure(dsn: str, histories: list[int], runs: int) -> dict[str, Any]:
    """The figures described in the module docstring, as a dict (see :func:`render`)."""
    out: dict[str, Any] = {"histories": histories, "runs": runs, "rows": []}
    tx = TenxContender(
        "tenxgraph Postgres",
        "postgres",
        dsn=_named(dsn, "cpu_split_tx"),
        schema="cpu_split",
        pool_max=1,
    )
    floor = FloorContender("floor", _named(dsn, "cpu_split_floor"))
    pair: list[tuple[Contender, str]] = [(tx, "cpu_split_tx"), (floor, "cpu_split_floor")]
    for c, _ in pair:
        c.open()
    try:
        for h in histories:
            tids = {c.name: c.prepare(h) for c, _ in pair}
            for c, _ in pair:
                c.run(tids[c.name])  # warm-up, and every pool connection open
            pids = {c.name: _backends(dsn, app) for c, app in pair}
            client: dict[str, list[float]] = {c.name: [] for c, _ in pair}
            server: dict[str, float | None] = {c.name: 0.0 for c, _ in pair}
            for _ in range(runs):
                for c, _ in pair:
                    before = _backend_cpu_s(pids[c.name])
                    s = c.run(tids[c.name])
                    after = _backend_cpu_s(pids[c.name])
                    client[c.name].append(s.cpu_ms_per_step)
                    acc = server[c.name]
                    server[c.name] = (
                        None
                        if acc is None or before is None or after is None
                        else acc + (after - before)
                    )
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            for _ in range(runs):
                tx.run(tids[tx.name])
            prof.disable()
            phases = _phases(prof)
            steps = runs * STEPS_PER_RUN
            row: dict[str, Any] = {"history": h, "phases": phases}
            for c, _ in pair:
                srv = server[c.name]
                row[c.name] = {
                    "client_cpu_ms": statistics.median(client[c.name]),
                    "server_cpu_ms": None if srv is None else srv * 1e3 / steps,
                }
            out["rows"].append(row)
    finally:
        for c, _ in pair:
            c.close()
    return out


def _phases(prof: cProfile.Profile) -> dict[str, float]:
    """Share of the profiled CPU time per phase (sums to 1). The own time of a builtin or a
    generic standard-library function (``dict.get``, ``contextlib``...) is charged to the
    phase of its caller, in proportion to the time each caller spent in it."""
    totals: dict[str, float] = {}
    stats = pstats.Stats(prof)
    for (filename, _line, func), (_cc, _nc, tt, _ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        key = phase_of(filename, func)
        if key == OTHER and callers:
            for (cfile, _cline, cfunc), caller_stats in callers.items():
                ckey = phase_of(cfile, cfunc)
                totals[ckey] = totals.get(ckey, 0.0) + caller_stats[2]
            continue
        totals[key] = totals.get(key, 0.0) + tt
    whole = sum(totals.values()) or 1.0
    return {k: v / whole for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def render(res: dict[str, Any]) -> str:
    """Markdown tables of :func:`measure`'s figures."""
    lines = [
        "| history (messages) | client CPU ms/step: tenxgraph / floor | ratio | server CPU "
        "ms/step: tenxgraph / floor | ratio |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in res["rows"]:
        t, f = row["tenxgraph Postgres"], row["floor"]
        cr = t["client_cpu_ms"] / f["client_cpu_ms"] if f["client_cpu_ms"] else None
        if t["server_cpu_ms"] is None or f["server_cpu_ms"] is None:
            srv, sr = "not measurable (server not on this machine)", "-"
        else:
            srv = f"{t['server_cpu_ms']:.3f} / {f['server_cpu_ms']:.3f}"
            sr = f"{t['server_cpu_ms'] / f['server_cpu_ms']:.2f}x" if f["server_cpu_ms"] else "-"
        lines.append(
            f"| {row['history']:,} | {t['client_cpu_ms']:.3f} / {f['client_cpu_ms']:.3f} | "
            + (f"{cr:.2f}x" if cr else "-")
            + f" | {srv} | {sr} |"
        )
    lines += [
        "",
        "tenxgraph's client CPU per step by phase (cProfile, CPU clock; share of the profiled "
        "time, and that share of the unprofiled client CPU):",
        "",
    ]
    hs = [row["history"] for row in res["rows"]]
    names: list[str] = []
    for row in res["rows"]:
        names += [n for n in row["phases"] if n not in names]
    lines.append("| phase | " + " | ".join(f"{h:,} messages" for h in hs) + " |")
    lines.append("| --- |" + " --- |" * len(hs))
    for n in names:
        cells = []
        for row in res["rows"]:
            share = row["phases"].get(n, 0.0)
            ms = share * row["tenxgraph Postgres"]["client_cpu_ms"]
            cells.append(f"{share * 100:.0f}% ({ms:.3f} ms)")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    ap.add_argument("--histories", type=int, nargs="+", default=[0, 5000])
    ap.add_argument("--runs", type=int, default=40, help="runs of 10 steps per contender")
    args = ap.parse_args(argv)
    with BenchDatabase(args.dsn) as db:
        res = measure(db.dsn, args.histories, args.runs)
    print(render(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
