"""Concurrency: worker processes on separate threads or on one shared thread, and one process
with several concurrent callers.

Worker processes are started once (``spawn``) and reused for every configuration, so process
start-up and imports are never inside a measurement. For each configuration every worker opens
its own checkpointer (its own pool; nothing is shared but the servers), makes one untimed
warm-up run on a private thread, reports ready, and when all are ready they start together and
run the benchmark graph for ``duration_s`` seconds:

* ``separate``: each worker on its own thread;
* ``shared``: all workers on ONE thread, calling again after ``StaleStateError`` (the
  documented recovery).

Committed steps are counted on the server: a tenxgraph thread's version is its number of
checkpoints, one per step (a replayed node after a conflict is a committed step too). For
LangGraph, which has no compare-and-swap, completed runs times the steps per run.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from _contenders import FloorContender, LangGraphContender, TenxContender, new_thread_id
from _workload import STEPS_PER_RUN


def make_contender(spec: dict[str, Any]) -> Any:
    """Build a contender from a picklable spec."""
    kind = spec["kind"]
    if kind == "tenxgraph":
        return TenxContender(
            spec["name"],
            spec["store"],
            dsn=spec.get("dsn"),
            redis_url=spec.get("redis_url"),
            redis_prefix=spec.get("redis_prefix"),
            schema=spec.get("schema"),
            pool_max=spec.get("pool_max", 10),
        )
    if kind == "langgraph":
        return LangGraphContender(
            spec["name"], spec["store"], dsn=spec.get("dsn"), pool_max=spec.get("pool_max")
        )
    raise ValueError(kind)


def _worker(idx: int, cmd_q: Any, out_q: Any, go: Any) -> None:
    from tenxgraph.core.exceptions import StaleStateError

    while True:
        cmd = cmd_q.get()
        if cmd is None:
            return
        spec, thread_id, duration_s = cmd
        c = None
        try:
            c = make_contender(spec)
            c.open()
            c.run(c.prepare(0))  # warm-up on a private thread
            out_q.put(("ready", idx, None))
            go.wait()
            runs = conflicts = errors = 0
            error_types: dict[str, int] = {}
            t0 = time.perf_counter()
            last = t0
            while last - t0 < duration_s:
                try:
                    c.run(thread_id)
                    runs += 1
                except StaleStateError:
                    conflicts += 1
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    errors += 1
                    name = type(exc).__name__
                    error_types[name] = error_types.get(name, 0) + 1
                last = time.perf_counter()
            out_q.put(
                (
                    "done",
                    idx,
                    {
                        "runs": runs,
                        "conflicts": conflicts,
                        "errors": errors,
                        "error_types": error_types,
                        "elapsed_s": last - t0,
                    },
                )
            )
        except Exception:  # noqa: BLE001
            out_q.put(("failed", idx, traceback.format_exc()))
        finally:
            if c is not None:
                try:
                    c.close()
                except Exception:  # noqa: BLE001
                    pass


class WorkerPool:
    """``n`` persistent worker processes."""

    def __init__(self, n: int) -> None:
        ctx = mp.get_context("spawn")
        self.ctx = ctx
        self.out_q = ctx.Queue()
        self.go = ctx.Event()
        self.cmd_qs = [ctx.Queue() for _ in range(n)]
        self.procs = [
            ctx.Process(target=_worker, args=(i, self.cmd_qs[i], self.out_q, self.go), daemon=True)
            for i in range(n)
        ]
        for p in self.procs:
            p.start()

    def close(self) -> None:
        for q in self.cmd_qs:
            q.put(None)
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()

    def run(
        self, spec: dict[str, Any], thread_ids: list[str], duration_s: float
    ) -> list[dict[str, Any]]:
        """Run ``len(thread_ids)`` workers (worker ``i`` on ``thread_ids[i]``) together."""
        n = len(thread_ids)
        self.go.clear()
        for i in range(n):
            self.cmd_qs[i].put((spec, thread_ids[i], duration_s))
        for _ in range(n):
            kind, idx, data = self.out_q.get(timeout=300)
            if kind == "failed":
                raise RuntimeError(f"worker {idx} failed:\n{data}")
        self.go.set()
        results = []
        for _ in range(n):
            kind, idx, data = self.out_q.get(timeout=duration_s + 300)
            if kind == "failed":
                raise RuntimeError(f"worker {idx} failed:\n{data}")
            results.append(data)
        self.go.clear()
        return results


@dataclass
class ConcurrencyResult:
    contender: str
    mode: str  # "separate" / "shared" / "in-process"
    workers: int
    steps: int
    elapsed_s: float
    runs: int
    conflicts: int
    errors: int
    error_types: dict[str, int]

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def conflict_rate(self) -> float:
        """Failed compare-and-swap writes per write attempt."""
        attempts = self.steps + self.conflicts
        return self.conflicts / attempts if attempts else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["steps_per_s"] = self.steps_per_s
        d["conflict_rate"] = self.conflict_rate
        return d


def tx_versions(dsn: str, schema: str, thread_ids: list[str]) -> int:
    """Sum of the versions of tenxgraph threads (= committed checkpoints, one per step)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        q = sql.SQL("SELECT coalesce(sum(version), 0) FROM {} WHERE thread_id = ANY(%s)").format(
            sql.Identifier(schema, "tenxgraph_threads")
        )
        return int(conn.execute(q, (thread_ids,)).fetchone()[0])


def run_processes(
    pool: WorkerPool, spec: dict[str, Any], workers: int, mode: str, duration_s: float
) -> ConcurrencyResult:
    """One configuration of the process benchmark."""
    if mode == "shared":
        tids = [new_thread_id("shared")] * workers
    else:
        tids = [new_thread_id(f"sep{i}") for i in range(workers)]
    res = pool.run(spec, tids, duration_s)
    runs = sum(r["runs"] for r in res)
    conflicts = sum(r["conflicts"] for r in res)
    errors = sum(r["errors"] for r in res)
    etypes: dict[str, int] = {}
    for r in res:
        for k, v in r["error_types"].items():
            etypes[k] = etypes.get(k, 0) + v
    elapsed = max(r["elapsed_s"] for r in res)
    if spec["kind"] == "tenxgraph":
        steps = tx_versions(spec["dsn"], spec["schema"], sorted(set(tids)))
    else:
        steps = runs * STEPS_PER_RUN
    return ConcurrencyResult(
        spec["name"], mode, workers, steps, elapsed, runs, conflicts, errors, etypes
    )


# -- one process, several concurrent callers ------------------------------------------------------
#: Seconds every in-process caller runs before the timed window: with 64 callers on a 2-core VM
#: that is enough for every pooled connection to have prepared the statements of a run (about
#: six runs per connection); a cold pool measured about 20% fewer steps/s.
WARM_S = 2.0


def run_in_process_tx(c: TenxContender, callers: int, duration_s: float) -> ConcurrencyResult:
    """``callers`` asyncio tasks, each running the graph on its own thread, for ``duration_s``."""
    import asyncio

    async def main() -> tuple[int, float, int]:
        runs = 0
        errors = 0
        t0 = time.perf_counter()
        ends: list[float] = []

        async def caller(tid: str) -> None:
            nonlocal runs, errors
            while time.perf_counter() - t0 < duration_s:
                try:
                    await c.app.ainvoke(*_tx_args(c, tid))
                    runs += 1
                except Exception:  # noqa: BLE001
                    errors += 1
            ends.append(time.perf_counter())

        await asyncio.gather(*(caller(new_thread_id(f"ip{i}")) for i in range(callers)))
        return runs, max(ends) - t0, errors

    # warm the pool up to `callers` connections first
    c.arun_coro(_warm_tx(c, callers))
    runs, elapsed, errors = c.arun_coro(main())
    return ConcurrencyResult(
        c.name, "in-process", callers, runs * STEPS_PER_RUN, elapsed, runs, 0, errors, {}
    )


def _tx_args(c: TenxContender, tid: str) -> tuple[Any, Any]:
    from _workload import tx_input

    return tx_input(), c.config(tid)


async def _warm_tx(c: TenxContender, callers: int, warm_s: float = WARM_S) -> None:
    """Warm the contender up as a long-running service is: every caller runs the graph on a
    thread of its own for ``warm_s`` seconds (each server connection prepares its statements
    and loads its catalog caches, each thread passes the history limit, so its writes prune),
    then wait until the store's pool holds its ``min_size`` connections: the floor opens all
    of its connections before it is timed, so the pool does too (psycopg_pool otherwise grows
    one connection at a time while the callers wait)."""
    import asyncio

    t0 = time.perf_counter()

    async def caller(tid: str) -> None:
        while True:
            await c.app.ainvoke(*_tx_args(c, tid))
            if time.perf_counter() - t0 >= warm_s:
                return

    await asyncio.gather(*(caller(new_thread_id("w")) for _ in range(callers)))
    source = getattr(c.cp.store, "source", c.cp.store)
    entry = getattr(source, "_pools", {}).get(asyncio.get_running_loop())
    if entry is not None:
        await entry.pool.wait(timeout=60.0)


def run_in_process_threads(c: Any, callers: int, duration_s: float) -> ConcurrencyResult:
    """``callers`` OS threads, each running ``c.run`` on its own thread id (LangGraph) or
    committing (the floor, each thread with its own connection)."""
    counts = [0] * callers
    errors = [0] * callers
    ends = [0.0] * callers
    barrier = threading.Barrier(callers + 1)

    def floor_conn() -> Any:
        f = FloorContender(c.name, c.dsn)
        f.open()
        return f

    def body(i: int) -> None:
        own = floor_conn() if isinstance(c, FloorContender) else None
        tid = new_thread_id(f"ip{i}")
        barrier.wait()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < duration_s:
            try:
                if own is not None:
                    own.commit_once(tid)
                    counts[i] += 1
                else:
                    c.run(tid)
                    counts[i] += STEPS_PER_RUN
            except Exception:  # noqa: BLE001
                errors[i] += 1
        ends[i] = time.perf_counter() - t0
        if own is not None:
            own.close()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(callers)]
    for t in threads:
        t.start()
    barrier.wait()
    for t in threads:
        t.join()
    steps = sum(counts)
    runs = steps // STEPS_PER_RUN
    return ConcurrencyResult(
        c.name, "in-process", callers, steps, max(ends), runs, 0, sum(errors), {}
    )


def run_in_process_floor_async(
    dsn: str, payload: bytes, callers: int, duration_s: float, name: str
) -> ConcurrencyResult:
    """The floor as tenxgraph runs: ``callers`` asyncio tasks in one process, each with its own
    ``AsyncConnection``, committing ``BEGIN; INSERT; COMMIT`` pipelined in one round trip, for
    ``duration_s``. The same event loop, driver and connection count as the tenxgraph callers,
    so the ratio measures the store, not threads against asyncio."""
    import asyncio

    import psycopg
    from _contenders import FLOOR_INSERT

    async def main() -> tuple[int, float, int]:
        conns = [
            await psycopg.AsyncConnection.connect(dsn, autocommit=True) for _ in range(callers)
        ]
        counts = [0] * callers
        errors = [0] * callers
        try:
            t0 = time.perf_counter()

            async def caller(i: int) -> None:
                conn = conns[i]
                tid = new_thread_id(f"fa{i}")
                while time.perf_counter() - t0 < duration_s:
                    try:
                        async with conn.pipeline():
                            await conn.execute("BEGIN")
                            await conn.execute(FLOOR_INSERT, (tid, payload))
                            await conn.execute("COMMIT")
                        counts[i] += 1
                    except Exception:  # noqa: BLE001
                        errors[i] += 1

            await asyncio.gather(*(caller(i) for i in range(callers)))
            return sum(counts), time.perf_counter() - t0, sum(errors)
        finally:
            for c in conns:
                await c.close()

    steps, elapsed, errs = asyncio.run(main())
    return ConcurrencyResult(
        name, "in-process", callers, steps, elapsed, steps // STEPS_PER_RUN, 0, errs, {}
    )
