"""Run every benchmark and print one markdown report (tenxgraph vs LangGraph vs the floor).

    python benchmarks/run_all.py                     # default: a few minutes
    python benchmarks/run_all.py --out docs/benchmarks.md --json results.json
    python benchmarks/run_all.py --quick             # smoke test: fewer samples, shorter runs

Servers: ``--dsn`` (default ``$TENXBENCH_PG_DSN`` or ``postgresql://postgres@127.0.0.1:5432/test``;
a superuser role, for the WAL and statement counters) and ``--redis-url`` (default
``$TENXBENCH_REDIS_URL`` or ``redis://127.0.0.1:6379/0``). The run creates a private database
``tenxbench_<random>`` and Redis keys under ``tenxbench:<random>:``, and removes both at the end.

Method (see ``benchmarks/README.md``): every contender runs the same graph
(``_workload.py``); one sample is one run of ``STEPS_PER_RUN`` steps timed with
``perf_counter`` (wall) and ``process_time`` (client CPU); contenders are sampled in turn,
round after round, at each history length; figures are medians with (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _concurrency import (  # noqa: E402
    WorkerPool,
    run_in_process_floor_async,
    run_in_process_threads,
    run_in_process_tx,
    run_processes,
)
from _contenders import FLOOR_PAYLOAD_BYTES, Contender  # noqa: E402
from _lease import fresh_thread_cost, shared_thread_rows, wake_latency  # noqa: E402
from _lease import render as render_lease  # noqa: E402
from _load import SIZES as LOAD_SIZES  # noqa: E402
from _load import TURNS, thread_load, turns_report  # noqa: E402
from _measure import (  # noqa: E402
    PointResult,
    Stat,
    WireCount,
    count_wire,
    measure_points,
    paired_growth,
    paired_ratio,
)
from _pg import BenchDatabase, RoundTripProxy, StatementCounter, WalMeter, server_info  # noqa: E402
from _sections import run_section  # noqa: E402
from _setup import Setup  # noqa: E402
from _workload import MESSAGE_CHARS, STEPS_PER_RUN  # noqa: E402

DEFAULT_DSN = os.environ.get("TENXBENCH_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
DEFAULT_REDIS = os.environ.get("TENXBENCH_REDIS_URL", "redis://127.0.0.1:6379/0")

#: Samples (runs) per contender at each history length: (default, --quick).
SAMPLES = {0: (12, 4), 10: (8, 3), 100: (8, 3), 1000: (6, 3), 5000: (4, 2)}
HISTORIES = (10, 100, 1000, 5000)
#: one process, this many concurrent callers (each on its own thread), as many connections.
IN_PROCESS_CALLERS = (8, 64)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- machine ---------------------------------------------------------------------------------------
def machine_info(dsn: str) -> dict[str, Any]:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        rev = subprocess.run(
            ["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(HERE.parent), "status", "--porcelain", "--", "tenxgraph"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if rev and dirty:
            rev += " + uncommitted changes"
    except OSError:
        rev = "?"
    from importlib.metadata import version

    def ver(pkg: str) -> str:
        try:
            return version(pkg)
        except Exception:  # noqa: BLE001
            return "-"

    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "postgres": server_info(dsn),
        "tenxgraph_rev": rev or "?",
        "packages": {
            p: ver(p)
            for p in (
                "langgraph",
                "langgraph-checkpoint-postgres",
                "psycopg",
                "redis",
                "pydantic",
                "orjson",
            )
        },
        "loadavg_start": _loadavg(),
    }


def _loadavg() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "?"


# -- markdown helpers ------------------------------------------------------------------------------
def fmt_stat(st: Stat | None, digits: int = 2, scale: float = 1.0) -> str:
    return st.fmt(digits, scale) if st is not None else "-"


def fmt_num(x: float | None, digits: int = 2) -> str:
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def fmt_bytes(st: Stat | None) -> str:
    if st is None:
        return "-"
    return f"{st.median:,.0f} ({st.min:,.0f}-{st.max:,.0f})"


def table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


# -- the run -----------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> dict[str, Any]:
    q = 1 if args.quick else 0
    results: dict[str, Any] = {
        "params": {
            "steps_per_run": STEPS_PER_RUN,
            "message_chars": MESSAGE_CHARS,
            "floor_payload_bytes": FLOOR_PAYLOAD_BYTES,
            "quick": args.quick,
        }
    }
    results["machine"] = machine_info(args.dsn)
    redis_url = args.redis_url if _redis_ok(args.redis_url) else None
    if redis_url is None:
        log(f"Redis at {args.redis_url} not answering: the Postgres+Redis+LRU store is skipped")
    redis_prefix = f"tenxbench:{secrets.token_hex(4)}:"
    workdir = tempfile.mkdtemp(prefix="tenxbench-")
    t_start = time.perf_counter()
    with BenchDatabase(args.dsn) as db:
        log(f"bench database {db.name} (dropped at the end)")
        wal = WalMeter(db)
        results["wal_method"] = (
            "pg_waldump: records of the bench database"
            if wal.waldump
            else f"LSN difference only ({wal.why_not})"
        )
        S = Setup(db, redis_url, redis_prefix, workdir)
        pg_stores = ["postgres"] + (["postgres+redis"] if redis_url else [])
        try:
            # 1. Fresh thread: every store, per-step and end-of-run checkpoints.
            fresh = [
                S.tx("memory"),
                S.tx("sqlite"),
                *[S.tx(s) for s in pg_stores],
                S.tx("memory", False),
                S.tx("sqlite", False),
                *[S.tx(s, False) for s in pg_stores],
                S.tx("memory", sync_nodes=True),
                S.tx("postgres", sync_nodes=True),
                S.lg("memory"),
                S.lg("postgres"),
                S.lg("memory", "exit"),
                S.lg("postgres", "exit"),
                S.floor(),
            ]

            def section(name: str, fn: Callable[[], Any]) -> Any:
                out, load = run_section(
                    name, fn, reruns=args.rerun_busy, wait_s=args.wait_idle_s, log=log
                )
                results.setdefault("sections", {})[name] = load
                return out

            results["fresh"] = section("fresh", lambda: _points(fresh, [0], q, wal))
            # 2. Growth with thread length (per-step checkpoints).
            growth = [
                S.tx("memory"),
                S.tx("sqlite"),
                *[S.tx(s) for s in pg_stores],
                S.lg("memory"),
                S.lg("postgres"),
                S.floor(),
            ]
            results["growth"] = section("growth", lambda: _points(growth, list(HISTORIES), q, wal))
            # 3. Round trips, statements, commits on the wire and on the server.
            if not args.skip_wire:
                results["wire"] = section("wire", lambda: _wire(S, db, wal, pg_stores, q))
            # 4. Concurrency.
            if not args.skip_concurrency:
                results["concurrency"] = section(
                    "concurrency", lambda: _concurrency(S, db, pg_stores, q)
                )
            # 5. Run lease: one thread, N processes, per multitask strategy.
            if not args.skip_lease:
                results["lease"] = section("lease", lambda: _lease_section(db, q))
            # 6. Replay of the bundled trajectories.
            if not args.skip_replay:
                results["replay"] = section("replay", lambda: _replays(S, db, q, args.replay_limit))
            # 7. Loading a thread: warm / cold from Redis / cold from Postgres.
            if not args.skip_load:
                sizes = LOAD_SIZES[:3] if q else LOAD_SIZES
                results["load"] = section(
                    "load",
                    lambda: thread_load(
                        db.dsn, redis_url, redis_prefix + "load:", sizes, 3 if q else 7
                    ),
                )
            # 8. LangGraph's delta-storage report shape, turn by turn.
            if not args.skip_turns:
                turns = (10, 50, 100) if q else TURNS
                results["turns"] = section(
                    "turns",
                    lambda: turns_report(
                        db.dsn, turns, 3 if q else 5, default_max_turns=args.lg_default_max_turns
                    ),
                )
        finally:
            wal.close()
            _cleanup_redis(redis_url, redis_prefix)
    results["machine"]["loadavg_end"] = _loadavg()
    results["elapsed_s"] = time.perf_counter() - t_start
    return results


def _redis_ok(url: str | None) -> bool:
    if not url:
        return False
    try:
        import redis

        r = redis.Redis.from_url(url, socket_connect_timeout=1)
        ok = bool(r.ping())
        r.close()
        return ok
    except Exception:  # noqa: BLE001
        return False


def _cleanup_redis(url: str | None, prefix: str) -> None:
    if not url:
        return
    import redis

    r = redis.Redis.from_url(url)
    try:
        keys = list(r.scan_iter(match=prefix + "*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i : i + 500])
    finally:
        r.close()


def _points(
    contenders: list[Contender], histories: list[int], q: int, wal: WalMeter
) -> dict[str, Any]:
    """Measure ``contenders`` at every history length, all interleaved (see measure_points)."""
    out: dict[str, Any] = {"contenders": [c.name for c in contenders], "points": {}}
    for c in contenders:
        c.open()
    try:
        log(f"measuring {len(contenders)} contenders at {histories} messages of history ...")
        t0 = time.perf_counter()
        out["points"] = measure_points(
            contenders, {h: SAMPLES[h][q] for h in histories}, wal=wal, log=log
        )
        log(f"  done in {time.perf_counter() - t0:.1f} s")
    finally:
        for c in contenders:
            c.close()
    return out


def _wire(
    S: Setup, db: BenchDatabase, wal: WalMeter, pg_stores: list[str], q: int
) -> dict[str, Any]:
    log("counting round trips and statements ...")
    proxy = RoundTripProxy(db.host, db.port)
    rproxy = None
    if S.redis_url:
        from urllib.parse import urlsplit

        u = urlsplit(S.redis_url)
        rproxy = RoundTripProxy(u.hostname or "127.0.0.1", u.port or 6379, protocol="raw")
    counter = StatementCounter(db)
    makers: list[Callable[[str, str | None], Contender]] = []
    for s in pg_stores:
        makers.append(lambda dsn, rurl, s=s: S.tx(s, dsn=dsn, redis_url=rurl))
        makers.append(lambda dsn, rurl, s=s: S.tx(s, False, dsn=dsn, redis_url=rurl))
    makers.append(lambda dsn, rurl: S.lg("postgres", dsn=dsn))
    makers.append(lambda dsn, rurl: S.lg("postgres", "exit", dsn=dsn))
    makers.append(lambda dsn, rurl: S.floor(dsn))
    rows: list[WireCount] = []
    try:
        for history in (0, 1000):
            for make in makers:
                rows.append(
                    count_wire(
                        make,
                        db.dsn,
                        proxy,
                        counter,
                        wal,
                        history,
                        runs=3 if q else 5,
                        redis_proxy=rproxy,
                        redis_url=S.redis_url,
                    )
                )
    finally:
        proxy.close()
        if rproxy is not None:
            rproxy.close()
        counter.close()
    return {"method": counter.method or "none (wire counts only)", "why": counter.why, "rows": rows}


def _concurrency(S: Setup, db: BenchDatabase, pg_stores: list[str], q: int) -> dict[str, Any]:
    duration = 1.5 if q else 2.5
    counts = (1, 2, 4, 8)
    rows = []
    log("concurrency: starting 8 worker processes ...")
    pool = WorkerPool(max(counts))
    try:
        specs = []
        for s in pg_stores:
            c = S.tx(s)
            specs.append(
                {
                    "kind": "tenxgraph",
                    "name": c.name,
                    "store": s,
                    "dsn": db.dsn,
                    "redis_url": S.redis_url,
                    "redis_prefix": S.redis_prefix,
                    "schema": c.schema + "_mp",
                }
            )
        lg = S.lg("postgres")
        lg_spec = {"kind": "langgraph", "name": lg.name, "store": "postgres", "dsn": db.dsn}
        configs: list[tuple[dict[str, Any], int, str]] = []
        for n in counts:
            for spec in specs:
                # Postgres+Redis only where its cache matters: instances taking turns on one thread.
                for mode in ("separate", "shared") if spec["store"] == "postgres" else ("shared",):
                    configs.append((spec, n, mode))
            configs.append((lg_spec, n, "separate"))
        repeats = 1 if q else 2
        for rep in range(repeats):  # every configuration once, then again: drift hits all alike
            for spec, n, mode in configs:
                log(f"  [{rep + 1}/{repeats}] {spec['name']}: {n} processes, {mode} thread(s)")
                rows.append(run_processes(pool, spec, n, mode, duration))
    finally:
        pool.close()
    # One process, 8 and 64 concurrent callers on separate threads, one pool with as many
    # connections as callers, against the floor with as many connections: asyncio callers
    # (as tenxgraph's) and, for reference, OS threads with sync connections.
    # One contender open at a time: with 64 callers, two pools of 64 would pass a default
    # max_connections of 100.
    inproc = []
    for n in IN_PROCESS_CALLERS:
        log(f"concurrency: one process, {n} concurrent callers, {n} connections ...")
        # Each pool opens its n connections before it is timed, as the floor does.
        callers = [S.tx(s, pool_max=n, pool_min=n, tag=f" pool{n}") for s in pg_stores]
        if n <= 8:
            callers.append(S.lg("postgres", pool_max=n, pool_min=n))
        floor = S.floor()
        for _ in range(1 if q else 2):
            for c in callers:
                fn = run_in_process_tx if c.family == "tenxgraph" else run_in_process_threads
                c.open()
                try:
                    inproc.append(fn(c, n, duration))
                finally:
                    c.close()
            floor.open()  # creates the floor's table; the callers use their own connections
            try:
                inproc.append(
                    run_in_process_floor_async(
                        floor.dsn, floor.payload, n, duration, f"{floor.name} (asyncio)"
                    )
                )
                inproc.append(run_in_process_threads(floor, n, duration))
            finally:
                floor.close()
    return {"duration_s": duration, "processes": rows, "in_process": inproc}


def _lease_section(db: BenchDatabase, q: int) -> dict[str, Any]:
    """Shared-thread rows per multitask strategy (1, 2, 4, 8 processes; nodes of 0 and 20 ms)
    and the fresh-thread cost of the lease (``benchmarks/_lease.py``)."""
    duration = 1.5 if q else 2.5
    log("lease: fresh-thread cost with and without the lease ...")
    fresh = fresh_thread_cost(db.dsn, runs=20 if q else 40, rounds=3 if q else 7)
    log("lease: wake-up latency of a queued run after the release ...")
    wake = wake_latency(db.dsn, samples=50 if q else 200)
    out: dict[str, Any] = {"duration_s": duration, "fresh": fresh, "wake": wake, "shared": {}}
    for node_s in (0.0, 0.02):
        log(f"lease: shared thread, nodes of {node_s * 1e3:.0f} ms ...")
        out["shared"][node_s] = shared_thread_rows(
            db.dsn, duration_s=duration, node_s=node_s, repeats=1 if q else 2, log=log
        )
    return out


def _replays(S: Setup, db: BenchDatabase, q: int, limit: int | None) -> list[Any]:
    import asyncio

    from _replay import load, replay

    from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer

    trajs = load(limit=(10 if q else limit))
    out = []
    log(f"replay: {len(trajs)} recorded conversations ...")

    async def one(store: str, concurrency: int) -> Any:
        if store == "SQLite":
            cp: Any = SqliteCheckpointer(os.path.join(S.workdir, f"replay-{concurrency}.sqlite"))
        else:
            cp = PgCheckpointer(
                db.dsn, schema=f"replay_{concurrency}", pool_config={"max_size": 20}
            )
        await cp.asetup()
        try:
            return await replay(store, cp, trajs, concurrency)
        finally:
            await cp.aclose()

    for store in ("SQLite", "Postgres"):
        for conc in (1, 8):
            log(f"  {store}, {conc} conversation(s) at a time")
            out.append(asyncio.run(one(store, conc)))
    return out


# -- report ------------------------------------------------------------------------------------------
def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    pg = m["postgres"]
    lines: list[str] = []
    add = lines.append
    add("## Machine\n")
    add(f"- {m['cores']} cores ({m['cpu']}), {m['os']}, Python {m['python']}")
    add(
        f"- PostgreSQL {pg['version']} (fsync={pg['fsync']}, synchronous_commit={pg['synchronous_commit']}, "
        f"full_page_writes={pg['full_page_writes']}), same machine"
    )
    pk = m["packages"]
    add(
        f"- tenxgraph {m['tenxgraph_rev']}; LangGraph {pk['langgraph']}, langgraph-checkpoint-postgres "
        f"{pk['langgraph-checkpoint-postgres']}, psycopg {pk['psycopg']}, pydantic {pk['pydantic']}"
    )
    add(
        f"- load average (1/5/15 min) at start {m['loadavg_start']}, at end {m.get('loadavg_end', '?')}; "
        f"run took {res.get('elapsed_s', 0):.0f} s"
    )
    p = res["params"]
    add(
        f"- workload: {p['steps_per_run']} steps per run, one ~{p['message_chars']}-character message per step; "
        f"floor payload {p['floor_payload_bytes']} bytes; WAL bytes by {res.get('wal_method', '?')}"
    )
    add("")
    add(
        "Figures are medians with (min-max) over the samples; one sample is one run of "
        f"{p['steps_per_run']} steps. ms/step is wall time; CPU is the client process's CPU time (user + "
        "system, all threads). Ratios are computed per round (the samples of one round are taken back to back) "
        "and given as the median of the per-round ratios with their (min-max).\n"
    )

    fresh = res.get("fresh")
    if fresh:
        pts: dict[str, PointResult] = fresh["points"][0]
        floor = _find(pts, "floor")
        add("## Fresh thread: every store, per-step and end-of-run checkpoints\n")
        rows = []
        for name, r in pts.items():
            saver = (
                "PostgresSaver"
                if ("Postgres" in name or "SQLite" in name or "floor" in name)
                else "InMemorySaver"
            )
            ref = pts.get(
                f"LangGraph {saver}" + (" (durability=exit)" if "end of run" in name else "")
            )
            vs = (
                paired_ratio(ref, r)
                if ref is not None and ref is not r and not name.startswith("LangGraph")
                else None
            )
            vf = (
                paired_ratio(r, floor)
                if floor is not None and r.contender != floor.contender and "Postgres" in name
                else None
            )
            rows.append(
                [
                    name,
                    fmt_stat(r.ms),
                    fmt_num(r.steps_per_s, 0),
                    fmt_stat(r.cpu_ms, 3),
                    fmt_stat(vs, 1) + ("x" if vs else ""),
                    fmt_stat(vf, 2) + ("x" if vf else ""),
                ]
            )
        add(
            table(
                [
                    "contender",
                    "ms/step",
                    "steps/s",
                    "client CPU ms/step",
                    "speed-up vs LangGraph (same store kind)",
                    "x floor",
                ],
                rows,
            )
        )
        add(
            "\nspeed-up = LangGraph ms/step / this ms/step, against LangGraph with the same kind of store "
            "(PostgresSaver for Postgres, SQLite and the floor; InMemorySaver for memory) and the same "
            'checkpointing (durability="sync" for per-step rows, "exit" for end-of-run rows); '
            "x floor = this ms/step / floor ms/step.\n"
        )

    growth = res.get("growth")
    if growth:
        points: dict[int, dict[str, PointResult]] = growth["points"]
        hs = sorted(points)
        names = growth["contenders"]
        add("## Growth with thread length (per-step checkpoints)\n")
        add("ms/step:\n")
        rows = []
        for n in names:
            r = [n] + [fmt_stat(points[h][n].ms) for h in hs]
            g = paired_growth(points[hs[0]][n], points[hs[-1]][n])
            r.append(fmt_stat(g) + "x" if g else "-")
            rows.append(r)
        add(table(["contender"] + [f"{h:,} msgs" for h in hs] + [f"{hs[-1]:,} / {hs[0]:,}"], rows))
        add("\nclient CPU ms/step:\n")
        rows = []
        for n in names:
            r = [n] + [fmt_stat(points[h][n].cpu_ms, 3) for h in hs]
            g = paired_growth(points[hs[0]][n], points[hs[-1]][n], "cpu_ms_per_step")
            r.append(fmt_stat(g) + "x" if g else "-")
            rows.append(r)
        add(table(["contender"] + [f"{h:,} msgs" for h in hs] + [f"{hs[-1]:,} / {hs[0]:,}"], rows))
        add(
            f"\nAll history lengths are sampled in the same rounds, so the last column's (min-max) is that of "
            f"the per-round ratio {hs[-1]:,} / {hs[0]:,}.\n"
        )
        add("\nRatios, side by side (median of the per-round ratios, with their min-max):\n")
        rows = []
        for n in names:
            if not n.startswith("tenxgraph"):
                continue
            ref_name = "LangGraph InMemorySaver" if "memory" in n else "LangGraph PostgresSaver"
            r = [n]
            for h in hs:
                ref = points[h].get(ref_name)
                me = points[h][n]
                sp = paired_ratio(ref, me) if ref else None
                cell = (fmt_stat(sp, 1) + "x faster") if sp else "-"
                if "Postgres" in n:
                    fl = _find(points[h], "floor")
                    xf = paired_ratio(me, fl) if fl else None
                    cell += f"; {fmt_stat(xf, 2)}x floor" if xf else ""
                r.append(cell)
            rows.append(r)
        add(table(["tenxgraph store (reference)"] + [f"{h:,} msgs" for h in hs], rows))
        add(
            "\nmemory rows compare with LangGraph InMemorySaver, the others with LangGraph PostgresSaver.\n"
        )
        add("## Bytes written per step\n")
        fresh_pts = (res.get("fresh") or {}).get("points", {}).get(0, {})
        rows = []
        for n in names:
            cells = []
            any_val = False
            for h in [0, *hs]:
                r = fresh_pts.get(n) if h == 0 else points[h][n]
                if r is None:
                    cells.append("-")
                    continue
                if r.wal_db_bytes:
                    cells.append(fmt_bytes(r.wal_db_per_step()))
                    any_val = True
                elif r.sqlite_bytes:
                    cells.append(fmt_bytes(r.sqlite_per_step()))
                    any_val = True
                else:
                    cells.append("-")
            if any_val:
                kind = "SQLite row bytes" if "SQLite" in n else "WAL bytes (this database)"
                rows.append([n, kind] + cells)
        add(table(["contender", "measure", "fresh thread"] + [f"{h:,} msgs" for h in hs], rows))
        rows = []
        for n in names:
            cells = [fmt_bytes(points[h][n].wal_lsn_per_step()) for h in hs]
            if any(c != "-" for c in cells):
                rows.append([n] + cells)
        if rows:
            add(
                "\nFor reference, the raw `pg_current_wal_lsn()` difference per step (cluster-wide: includes "
                "whatever other clients of the server wrote meanwhile):\n"
            )
            add(table(["contender"] + [f"{h:,} msgs" for h in hs], rows))
        add("")

    wire = res.get("wire")
    if wire:
        add("## Round trips, statements and commits per step\n")
        add(
            f"Server-side statement counts by {wire['method']}; round trips counted on the wire by a TCP relay "
            "(one round trip = the client waits for the server's answer); commits = COMMIT records in the WAL "
            "of transactions that wrote to the bench database. Per step, over 5 runs of "
            f"{STEPS_PER_RUN} steps; a run also reads the thread once.\n"
        )
        rows = []
        for w in wire["rows"]:
            stm = w.server_statements
            st_txt = (
                ", ".join(f"{k} {v / (w.runs * STEPS_PER_RUN):.2f}" for k, v in sorted(stm.items()))
                if stm
                else "-"
            )
            rows.append(
                [
                    w.contender,
                    f"{w.history:,}",
                    f"{w.turnarounds_per_step:.2f}",
                    f"{w.prepare_trips_per_step:.2f}",
                    fmt_num(w.redis_trips_per_step) if w.redis_trips_per_step is not None else "-",
                    fmt_num(w.write_commits_per_step),
                    f"{w.statements_per_step:.2f}",
                    st_txt,
                    f"{w.client_bytes_per_step:,.0f}",
                ]
            )
        add(
            table(
                [
                    "contender",
                    "history",
                    "Postgres round trips/step",
                    "of which prepare-only",
                    "Redis round trips/step",
                    "commits/step",
                    "statements/step (wire)",
                    "statements/step on the server, by kind",
                    "bytes sent/step",
                ],
                rows,
            )
        )
        add("")

    conc = res.get("concurrency")
    if conc:
        add(f"## Concurrency ({conc['duration_s']:g} s per configuration)\n")
        add(
            "Worker processes, each with its own checkpointer and pool, on separate threads or all on one shared "
            "thread (calling again after `StaleStateError`). Steps are counted on the server (thread versions); "
            "conflict rate = failed compare-and-swap writes / write attempts.\n"
        )
        groups: dict[tuple[str, str, int], list[Any]] = {}
        for r in conc["processes"]:
            groups.setdefault((r.contender, r.mode, r.workers), []).append(r)
        rows = []
        for (name, mode, workers), rs in sorted(
            groups.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])
        ):
            sps = Stat.of([r.steps_per_s for r in rs])
            cr = Stat.of([r.conflict_rate * 100 for r in rs])
            errs: dict[str, int] = {}
            for r in rs:
                for k, v in r.error_types.items():
                    errs[k] = errs.get(k, 0) + v
            rows.append(
                [
                    name,
                    mode,
                    str(workers),
                    fmt_stat(sps, 0),
                    (fmt_stat(cr, 1) + " %") if mode == "shared" and cr else "-",
                    str(sum(r.errors for r in rs)) + (f" {errs}" if errs else ""),
                ]
            )
        n_rep = max(len(rs) for rs in groups.values()) if groups else 0
        add(f"Each configuration ran {n_rep} time(s), interleaved; median (min-max).\n")
        add(
            table(
                [
                    "contender",
                    "thread(s)",
                    "processes",
                    "steps/s (aggregate)",
                    "conflict rate",
                    "other errors",
                ],
                rows,
            )
        )
        add(
            "\nLangGraph has no compare-and-swap: concurrent writers to one thread are not detected, so the shared-"
            "thread configuration is not run for it.\n"
        )
        add(
            "One process, N concurrent callers on separate threads, one pool of N connections "
            "(opened before the timed window, and warmed by 2 s of the same callers, as a "
            "long-running service is); the floor with N connections, as asyncio tasks (like "
            "tenxgraph's callers) and as OS threads:\n"
        )
        ip: dict[tuple[int, str], list[Any]] = {}
        for r in conc["in_process"]:
            ip.setdefault((r.workers, r.contender), []).append(r)
        rows = []
        for (n, name), rs in ip.items():
            floor_rs = ip.get((n, "floor: BEGIN+INSERT+COMMIT, 1 round trip (asyncio)"), [])
            fl = Stat.of([r.steps_per_s for r in floor_rs])
            st = Stat.of([r.steps_per_s for r in rs])
            share = f"{st.median / fl.median:.0%}" if st and fl and fl.median else "-"
            rows.append([str(n), name, fmt_stat(st, 0), share, str(sum(r.errors for r in rs))])
        add(
            table(
                [
                    "callers",
                    "contender",
                    "steps/s (floor: commits/s), median (min-max)",
                    "of the asyncio floor",
                    "errors",
                ],
                rows,
            )
        )
        add("")

    lease = res.get("lease")
    if lease:
        for node_s, rows in lease["shared"].items():
            # a name of its own: rebinding ``lines`` here dropped every section before this one
            # from the report (``add`` appends to the report's list, the return joins ``lines``)
            first = node_s == 0.0
            lease_lines = render_lease(
                rows, lease["fresh"] if first else None, lease.get("wake") if first else None
            )
            lease_lines[0] = lease_lines[0].rstrip() + f" (nodes of {node_s * 1e3:.0f} ms)\n"
            for line in lease_lines:
                add(line)
        add("")

    rep = res.get("replay")
    if rep:
        add("## Replay of the bundled real trajectories\n")
        r0 = rep[0]
        add(
            f"{r0.conversations} recorded conversations ({r0.turns} user turns, {r0.messages} messages, "
            f"{r0.tool_calls} tool calls, {r0.steps} node executions) from `tenxgraph/data/*.jsonl`, replayed end "
            "to end (Agent + ToolNode with the idempotency ledger, replay model and tools), per-step checkpoints; "
            "each thread is compared with its recording afterwards.\n"
        )
        rows = [
            [
                r.store,
                str(r.concurrency),
                f"{r.turns_per_s:,.1f}",
                f"{r.steps_per_s:,.0f}",
                f"{r.wall_s:.1f}",
                f"{r.cpu_s * 1e3 / r.steps:.2f}",
                str(r.mismatches),
            ]
            for r in rep
        ]
        add(
            table(
                [
                    "store",
                    "conversations in flight",
                    "turns/s",
                    "steps/s",
                    "wall s",
                    "client CPU ms/step",
                    "threads differing from the recording",
                ],
                rows,
            )
        )
        add("")

    add(render_goals(res))
    return "\n".join(lines)


def _find(pts: dict[str, PointResult], prefix: str) -> PointResult | None:
    for name, r in pts.items():
        if name.startswith(prefix) and "durability" not in name:
            return r
    return None


def render_goals(res: dict[str, Any]) -> str:
    """The performance goals of DESIGN.md section 7 (and issue 14), each with its measured
    value; then the earlier per-issue targets that are still measured."""
    rows: list[list[str]] = []
    growth = res.get("growth", {}).get("points", {})
    fresh = res.get("fresh", {}).get("points", {}).get(0, {})
    points: dict[int, dict[str, PointResult]] = {0: fresh, **growth} if fresh else dict(growth)
    pg, pgr = "tenxgraph Postgres", "tenxgraph Postgres+Redis+LRU"

    def verdict(ok: bool | None) -> str:
        return "-" if ok is None else ("met" if ok else "**missed**")

    def at(h: int) -> str:
        return "fresh" if h == 0 else f"{h:,}"

    def ratio_row(
        goal: str,
        num: Callable[[dict[str, PointResult]], PointResult | None],
        den: Callable[[dict[str, PointResult]], PointResult | None],
        limit: float,
    ) -> None:
        """One row: ``num / den`` of ms/step at every history length, met when all <= limit."""
        cells, oks = [], []
        for h, pts in sorted(points.items()):
            a, b = num(pts), den(pts)
            r = paired_ratio(a, b) if a and b else None
            if r:
                cells.append(f"{at(h)} {r.median:.2f}x")
                oks.append(r.median <= limit)
        if cells:
            rows.append([goal, "; ".join(cells), verdict(all(oks))])

    # 1. Postgres ms/step within 1.5x the floor; 2. Postgres+Redis+LRU within 1.1x Postgres.
    ratio_row(
        "Postgres ms/step within 1.5x the floor, 0 to 5,000 messages",
        lambda pts: pts.get(pg),
        lambda pts: _find(pts, "floor"),
        1.5,
    )
    ratio_row(
        "Postgres+Redis+LRU ms/step within 1.1x Postgres alone",
        lambda pts: pts.get(pgr),
        lambda pts: pts.get(pg),
        1.1,
    )
    # 3. Client CPU per step (Postgres) at most 0.2 ms, flat in history.
    cpu = {h: pts[pg].cpu_ms for h, pts in sorted(points.items()) if pts.get(pg) and pts[pg].cpu_ms}
    if cpu:
        first, last = min(cpu), max(cpu)
        floor_cpu = [
            f.cpu_ms.median for pts in points.values() if (f := _find(pts, "floor")) and f.cpu_ms
        ]
        flat = cpu[last].median / cpu[first].median  # type: ignore[union-attr]
        rows.append(
            [
                "client CPU per step (Postgres) at most 0.2 ms, flat in history",
                "; ".join(f"{at(h)} {s.median:.3f}" for h, s in cpu.items() if s)
                + f" ms ({flat:.2f}x from {at(first)} to {at(last)}); the floor itself "
                + (f"{statistics.median(floor_cpu):.3f} ms" if floor_cpu else "-"),
                verdict(all(s.median <= 0.2 for s in cpu.values() if s) and flat <= 1.2),
            ]
        )
    # 4. WAL bytes per step flat, at most 3 KB.
    if growth:
        hs = sorted(growth)
        for n in (pg, pgr):
            if n in growth[hs[0]] and n in growth[hs[-1]]:
                a, b = growth[hs[0]][n].wal_db_per_step(), growth[hs[-1]][n].wal_db_per_step()
                if a and b:
                    rows.append(
                        [
                            f"{n}: WAL bytes per step flat, at most 3 KB ({hs[0]:,} -> {hs[-1]:,} msgs)",
                            f"{a.median:,.0f} -> {b.median:,.0f}",
                            verdict(b.median <= 3072 and b.median <= 1.2 * a.median),
                        ]
                    )
    # 5. Loading a thread: warm flat, cold from Redis 3x faster than cold from Postgres.
    load = res.get("load")
    if load and load.get("rows"):
        lrows = sorted(load["rows"], key=lambda r: r["messages"])
        base = lrows[0]
        for kind in ("get_state", "run_start"):
            b0 = (base.get(f"warm_{kind}") or {}).get("median")
            ratios = [
                (r["messages"], r[f"warm_{kind}"]["median"] / b0)
                for r in lrows
                if b0 and r.get(f"warm_{kind}")
            ]
            if ratios:
                rows.append(
                    [
                        f"loading a thread warm ({kind.replace('_', ' ')}): at most 1.2x the "
                        f"{base['messages']:,}-message cost",
                        "; ".join(f"{n:,} {x:.2f}x" for n, x in ratios),
                        verdict(all(x <= 1.2 for _, x in ratios)),
                    ]
                )
            faster = [
                (r["messages"], r[f"cold_pg_{kind}"]["median"] / r[f"cold_redis_{kind}"]["median"])
                for r in lrows
                if r.get(f"cold_pg_{kind}") and r.get(f"cold_redis_{kind}")
            ]
            if faster:
                rows.append(
                    [
                        f"loading a thread cold ({kind.replace('_', ' ')}): from Redis at least 3x "
                        "faster than from Postgres",
                        "; ".join(f"{n:,} {x:.2f}x" for n, x in faster),
                        verdict(all(x >= 3 for _, x in faster)),
                    ]
                )
    # 6. One process, 8 and 64 callers: 85% of the floor's commits/s.
    conc = res.get("concurrency")
    if conc:
        for n in IN_PROCESS_CALLERS:
            fl = Stat.of(
                [
                    r.steps_per_s
                    for r in conc["in_process"]
                    if r.workers == n and r.contender.endswith("(asyncio)")
                ]
            )
            st = Stat.of(
                [
                    r.steps_per_s
                    for r in conc["in_process"]
                    if r.workers == n and r.contender.startswith("tenxgraph Postgres pool")
                ]
            )
            if st and fl and fl.median:
                rows.append(
                    [
                        f"one process, {n} callers, {n} connections: at least 85% of the floor's "
                        "commits/s (asyncio floor)",
                        f"{fmt_stat(st, 0)} steps/s = {st.median / fl.median:.0%} of "
                        f"{fl.median:,.0f}",
                        verdict(st.median >= 0.85 * fl.median),
                    ]
                )
    # 7. Memory store at least 6x InMemorySaver at a fresh thread.
    me, ref = fresh.get("tenxgraph memory"), fresh.get("LangGraph InMemorySaver")
    if me and ref:
        sp = paired_ratio(ref, me)
        if sp:
            rows.append(
                [
                    "memory store at least 6x LangGraph InMemorySaver, fresh thread",
                    fmt_stat(sp, 1) + "x",
                    verdict(sp.median >= 6),
                ]
            )
    # Earlier targets (issues 3 and 7), still measured.
    earlier: list[list[str]] = []
    for w in res.get("wire", {}).get("rows", []):
        if w.contender == pg:
            per_write = w.turnarounds_per_step - w.prepare_trips_per_step - 1 / STEPS_PER_RUN
            earlier.append(
                [
                    f"round trips / commits per durable step at {w.history:,} msgs (target 1 / 1)",
                    f"{w.turnarounds_per_step:.2f} round trips = {per_write:.2f} per checkpoint write "
                    f"+ 0.10 (1 read per run of {STEPS_PER_RUN}) + {w.prepare_trips_per_step:.2f} "
                    f"(statement prepares); {fmt_num(w.write_commits_per_step)} commits",
                    verdict(per_write <= 1.0 and (w.write_commits_per_step or 0) <= 1.0),
                ]
            )
    for h, need in {0: 3, 100: 6, 1000: 30, 5000: 100}.items():
        pts = points.get(h, {})
        a, b = pts.get(pg), pts.get("LangGraph PostgresSaver")
        sp = paired_ratio(b, a) if a and b else None
        if sp:
            earlier.append(
                [
                    f"speed-up vs LangGraph PostgresSaver at {'a fresh thread' if h == 0 else f'{h:,} msgs'} "
                    f"(target >= {need}x)",
                    fmt_stat(sp, 1) + "x",
                    verdict(sp.median >= need),
                ]
            )
    if growth:
        hs = sorted(growth)
        for n in growth[hs[0]]:
            if not n.startswith("tenxgraph") or n not in growth[hs[-1]]:
                continue
            a, b = growth[hs[0]][n].ms, growth[hs[-1]][n].ms
            g = paired_growth(growth[hs[0]][n], growth[hs[-1]][n])
            gc = paired_growth(growth[hs[0]][n], growth[hs[-1]][n], "cpu_ms_per_step")
            if a and b and g and gc:
                earlier.append(
                    [
                        f"{n}: per-step cost at {hs[-1]:,} / at {hs[0]:,} msgs (target <= 1.2x)",
                        f"wall {fmt_stat(g)}x ({a.median:.2f} -> {b.median:.2f} ms); "
                        f"client CPU {fmt_stat(gc)}x",
                        verdict(g.median <= 1.2 and gc.median <= 1.2),
                    ]
                )
    if not rows and not earlier:
        return ""
    out = "## Goals (the project's performance targets)\n\n"
    if rows:
        out += "DESIGN.md section 7, as issue 14 measures them.\n\n" + table(
            ["goal", "measured", "verdict"], rows
        )
    if earlier:
        out += "\n\nEarlier per-issue targets, still measured.\n\n" + table(
            ["goal", "measured", "verdict"], earlier
        )
    return out + "\n"


def render_hot_path(res: dict[str, Any]) -> str:
    """The sections' load, the thread-load tables and the turn-by-turn report (issue 14)."""
    out: list[str] = []
    secs = res.get("sections") or {}
    if secs:
        out.append("### Machine load per section\n")
        out.append(
            "Mean runnable tasks sampled every 0.5 s while the section ran (the benchmark "
            "itself keeps about 2 runnable); above the threshold the section is flagged busy "
            "and its wall-clock figures are not to be trusted (ratios and CPU time still are)."
        )
        rows = [
            [
                name,
                f"{r['load1_start']} -> {r['load1_end']}",
                f"{r['runnable_mean']}",
                f"{r['threshold']:.1f}",
                "**busy**" if r["busy"] else "idle",
                str(len(r["attempts"])),
            ]
            for name, r in secs.items()
        ]
        out.append(
            table(["section", "load 1 min", "runnable", "threshold", "verdict", "runs"], rows)
        )
    load = res.get("load")
    if load:

        def cell(v: Any) -> str:
            if not v:
                return "-"
            return f"{v['median']:.2f} ({v['min']:.2f}-{v['max']:.2f})"

        out.append("\n### Loading a thread (ms): tenxgraph Postgres, with and without Redis\n")
        out.append(
            "`get_state` and the read at the start of a run (`aload`), decoded state included. "
            "Warm: this instance's LRU holds the thread, confirmed by one `READ_SINCE` round "
            "trip. Cold from Redis: LRU emptied before each sample (one Redis round trip, then "
            "`READ_SINCE`). Cold from Postgres: no cache (one `READ_CHECKPOINT`)."
        )
        rows = []
        for r in load["rows"]:
            rows.append(
                [
                    f"{r['messages']:,}",
                    cell(r["warm_get_state"]),
                    cell(r["warm_run_start"]),
                    cell(r["cold_redis_get_state"]),
                    cell(r["cold_redis_run_start"]),
                    cell(r["cold_pg_get_state"]),
                    cell(r["cold_pg_run_start"]),
                ]
            )
        out.append(
            table(
                [
                    "messages",
                    "warm get_state",
                    "warm run start",
                    "cold Redis get_state",
                    "cold Redis run start",
                    "cold PG get_state",
                    "cold PG run start",
                ],
                rows,
            )
        )
    turns = res.get("turns")
    if turns:
        out.append("\n### Turn by turn (the shape of LangGraph's delta-storage report)\n")
        out.append(
            "One turn = a user message and an assistant reply. Storage: payload bytes of the "
            "thread in the database. Peak write memory: `tracemalloc` peak while writing one "
            "more turn. Read: `get_state` from the database (tenxgraph: LRU emptied first)."
        )
        if turns.get("delta_channel"):
            out.append(f"\nLangGraph `DeltaChannel`: {turns['delta_channel']}.")
        rows = []
        for c in turns["contenders"]:
            for r in c["rows"]:
                if "skipped" in r:
                    rows.append([c["name"], f"{r['turns']:,}", r["skipped"], "-", "-"])
                    continue
                rd = r["read_ms"]
                rows.append(
                    [
                        c["name"],
                        f"{r['turns']:,}",
                        f"{r['bytes']:,}",
                        f"{r['peak_write_bytes']:,}",
                        f"{rd['median']:.2f} ({rd['min']:.2f}-{rd['max']:.2f})",
                    ]
                )
        out.append(
            table(["contender", "turns", "storage bytes", "peak write memory (B)", "read ms"], rows)
        )
    return "\n".join(out)


def to_json(res: dict[str, Any]) -> Any:
    def conv(x: Any) -> Any:
        if hasattr(x, "as_dict"):
            return conv(x.as_dict())
        if isinstance(x, dict):
            return {str(k): conv(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v) for v in x]
        return x

    return conv(res)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dsn", default=DEFAULT_DSN, help="Postgres server (superuser role)")
    ap.add_argument("--redis-url", default=DEFAULT_REDIS)
    ap.add_argument(
        "--quick", action="store_true", help="fewer samples and shorter runs (smoke test)"
    )
    ap.add_argument(
        "--out", help="also write the report to this markdown file (e.g. docs/benchmarks.md)"
    )
    ap.add_argument("--json", help="also write every measurement to this JSON file")
    ap.add_argument(
        "--replay-limit",
        type=int,
        default=30,
        help="recorded conversations to replay (default 30 of 122; 0 = all)",
    )
    ap.add_argument("--skip-wire", action="store_true")
    ap.add_argument("--skip-concurrency", action="store_true")
    ap.add_argument("--skip-lease", action="store_true")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--skip-load", action="store_true", help="skip the thread-load section")
    ap.add_argument("--skip-turns", action="store_true", help="skip the turn-by-turn section")
    ap.add_argument(
        "--lg-default-max-turns",
        type=int,
        default=500,
        help="grow LangGraph's default saver thread up to this many turns (it stores the "
        "whole list at every checkpoint: quadratic bytes); default 500",
    )
    ap.add_argument(
        "--rerun-busy",
        type=int,
        default=0,
        help="rerun a section measured on a busy machine up to N times (default 0: flag only)",
    )
    ap.add_argument(
        "--wait-idle-s",
        type=float,
        default=60.0,
        help="before a rerun, wait up to this long for the load average to drop",
    )
    ap.add_argument(
        "--chart",
        help="also draw the chart (ms/step and read latency vs history, log scale) to this "
        "PNG, e.g. docs/assets/benchmarks/hot_path.png (needs matplotlib)",
    )
    args = ap.parse_args(argv)
    if args.replay_limit == 0:
        args.replay_limit = None
    res = run(args)
    report = render(res) + "\n\n" + render_hot_path(res)
    if args.chart:
        from _hot_chart import draw

        draw(res, Path(args.chart))
        log(f"wrote {args.chart}")
    print(report)
    if args.out:
        out = Path(args.out)
        old = out.read_text(encoding="utf-8") if out.exists() else None
        out.write_text(_page(report, old), encoding="utf-8")
        log(f"wrote {args.out}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(to_json(res), indent=1, default=str), encoding="utf-8"
        )
        log(f"wrote {args.json}")
    return 0


START, END = "<!-- run_all:start -->", "<!-- run_all:end -->"


def _page(report: str, old: str | None) -> str:
    """The results page: ``report`` between the markers of ``old`` (text around them is kept,
    so a page can carry a hand-written analysis), or a new page."""
    block = f"{START}\n{report}\n{END}"
    if old and START in old and END in old:
        head, rest = old.split(START, 1)
        return head + block + rest.split(END, 1)[1]
    return (
        "# Benchmarks\n\n"
        "The latest results of `python benchmarks/run_all.py` (see `benchmarks/README.md` for the method and "
        "how to reproduce them).\n\n" + block + "\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
