"""Run lease (issue 15): N processes taking turns on ONE thread per multitask strategy, and the
cost of the lease on a fresh thread.

Shared thread: ``n`` worker processes (spawned once, reused), each with its own
``PgCheckpointer``, run a ``NODES``-node chain on one thread for ``duration_s`` seconds, each
run with a new user message. Every node sleeps ``node_s`` seconds (a model call stand-in) and
appends one line to a side-effect file before it returns, so *executions* are counted
whatever happens to their result. Committed steps are the thread's versions (one per node
checkpoint). Per configuration:

* steps/s: committed steps / elapsed seconds;
* wasted executions per committed step: ``(executions - committed steps) / committed steps``:
  node executions whose result no checkpoint holds (an optimistic loser's node, a fenced-out
  holder's node);
* refusals: ``StaleStateError`` (optimistic: the run lost its compare-and-swap after its node
  ran) and ``ThreadBusyError`` (``reject``: before any node ran) per run attempt.

Strategies: ``None`` (today's optimistic behaviour: compare-and-swap only, call again after
``StaleStateError``), ``reject`` (call again after ``ThreadBusyError``), ``enqueue`` and
``interrupt``. ``rollback`` is not in these rows: it discards the stopped run's steps by design.

Fresh thread: one process, sequential runs of the chain on new threads, with and without
``multitask_strategy="enqueue"``, interleaved round after round; wall and client CPU per step,
and Postgres round trips per run counted at the store (one ``_fetch`` = one statement = one
round trip).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import statistics
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any

#: Nodes per run of the benchmark chain.
NODES = 2
#: The strategies of the shared-thread rows (``None``: optimistic).
STRATEGIES: tuple[str | None, ...] = (None, "reject", "enqueue", "interrupt")


def _graph(cp: Any, effects: str, node_s: float) -> Any:
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import AgentState, Message
    from tenxgraph.utils import END

    def make(name: str) -> Any:
        def node(state: AgentState) -> Message:
            if node_s:
                time.sleep(node_s)
            fd = os.open(effects, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, f"{name}\n".encode())
            finally:
                os.close(fd)
            return Message.text_message(f"{name} " + "x" * 190, role="assistant")

        return node

    g = StateGraph()
    names = [f"n{i}" for i in range(NODES)]
    for n in names:
        g.add_node(n, make(n))
    g.set_entry_point(names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=cp)


def _worker(idx: int, cmd_q: Any, out_q: Any, go: Any) -> None:
    from tenxgraph.core.exceptions import StaleStateError, ThreadBusyError
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import PgCheckpointer

    while True:
        cmd = cmd_q.get()
        if cmd is None:
            return
        dsn, schema, tid, strategy, duration_s, node_s, effects = cmd
        cp = None
        try:
            cp = PgCheckpointer(dsn, schema=schema, state_history_limit=0)
            app = _graph(cp, effects + ".warm", 0.0)
            app.invoke({"messages": [Message.text_message("warm")]}, {"thread_id": f"w-{idx}"})
            app = _graph(cp, effects, node_s)
            out_q.put(("ready", idx, None))
            go.wait()
            runs = stale = busy = 0
            t0 = time.perf_counter()
            last = t0
            while last - t0 < duration_s:
                msg = Message.text_message(f"{idx}-{runs}")
                try:
                    app.invoke(
                        {"messages": [msg]}, {"thread_id": tid, "multitask_strategy": strategy}
                    )
                    runs += 1
                except ThreadBusyError:
                    busy += 1
                except StaleStateError:
                    stale += 1
                last = time.perf_counter()
            out_q.put(
                ("done", idx, {"runs": runs, "stale": stale, "busy": busy, "elapsed_s": last - t0})
            )
        except Exception:  # noqa: BLE001 - reported to the parent
            out_q.put(("failed", idx, traceback.format_exc()))
        finally:
            if cp is not None:
                cp.close()


class LeasePool:
    """``n`` persistent worker processes (spawned once: start-up is never measured)."""

    def __init__(self, n: int) -> None:
        ctx = mp.get_context("spawn")
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

    def run(self, n: int, cmd: tuple[Any, ...]) -> list[dict[str, Any]]:
        self.go.clear()
        for i in range(n):
            self.cmd_qs[i].put(cmd)
        for _ in range(n):
            kind, idx, data = self.out_q.get(timeout=300)
            if kind == "failed":
                raise RuntimeError(f"worker {idx} failed:\n{data}")
        self.go.set()
        out = []
        for _ in range(n):
            kind, idx, data = self.out_q.get(timeout=600)
            if kind == "failed":
                raise RuntimeError(f"worker {idx} failed:\n{data}")
            out.append(data)
        self.go.clear()
        return out


@dataclass
class SharedRow:
    """One shared-thread configuration."""

    strategy: str | None
    processes: int
    steps: int
    executions: int
    elapsed_s: float
    runs: int
    stale: int
    busy: int

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def wasted_per_step(self) -> float:
        return (self.executions - self.steps) / self.steps if self.steps else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["steps_per_s"] = self.steps_per_s
        d["wasted_per_step"] = self.wasted_per_step
        return d


def _version(dsn: str, schema: str, tid: str) -> int:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT version FROM {} WHERE thread_id = %s").format(
                sql.Identifier(schema, "tenxgraph_threads")
            ),
            (tid,),
        ).fetchone()
    return int(row[0]) if row else 0


def _setup_schema(dsn: str, schema: str) -> None:
    from tenxgraph.storage.checkpointer import PgCheckpointer

    cp: Any = PgCheckpointer(dsn, schema=schema)
    try:
        cp.setup()
    finally:
        cp.close()


def drop_schema(dsn: str, schema: str) -> None:
    """Drop a schema this module created."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def shared_thread_rows(
    dsn: str,
    *,
    counts: tuple[int, ...] = (1, 2, 4, 8),
    strategies: tuple[str | None, ...] = STRATEGIES,
    duration_s: float = 2.5,
    node_s: float = 0.0,
    repeats: int = 1,
    log: Any = print,
) -> list[SharedRow]:
    """The shared-thread rows (see the module docstring); a private schema, dropped after."""
    schema = f"lease_bench_{secrets.token_hex(4)}"
    _setup_schema(dsn, schema)
    pool = LeasePool(max(counts))
    rows: list[SharedRow] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(repeats):
                for n in counts:
                    for strategy in strategies:
                        log(f"  [{rep + 1}/{repeats}] lease: {n} processes, strategy {strategy}")
                        tid = f"shared-{uuid.uuid4().hex[:8]}"
                        effects = os.path.join(tmp, f"{tid}.log")
                        res = pool.run(n, (dsn, schema, tid, strategy, duration_s, node_s, effects))
                        with open(effects, encoding="utf-8") as f:
                            executions = sum(1 for _ in f)
                        rows.append(
                            SharedRow(
                                strategy,
                                n,
                                _version(dsn, schema, tid),
                                executions,
                                max(r["elapsed_s"] for r in res),
                                sum(r["runs"] for r in res),
                                sum(r["stale"] for r in res),
                                sum(r["busy"] for r in res),
                            )
                        )
    finally:
        pool.close()
        drop_schema(dsn, schema)
    return rows


@dataclass
class FreshCost:
    """Fresh-thread cost with and without the lease (medians over rounds)."""

    runs_per_round: int
    rounds: int
    ms_per_step: dict[str, float] = field(default_factory=dict)
    cpu_ms_per_step: dict[str, float] = field(default_factory=dict)
    round_trips_per_run: dict[str, float] = field(default_factory=dict)
    #: WAL flushes (``pg_stat_wal.wal_sync``, server-wide: idle server only) per run
    wal_syncs_per_run: dict[str, float] = field(default_factory=dict)
    ratio_wall: float = 0.0
    ratio_cpu: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _wal_syncs(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT wal_sync FROM pg_stat_wal").fetchone()
    return int(row[0]) if row else 0


def fresh_thread_cost(dsn: str, *, runs: int = 40, rounds: int = 7) -> FreshCost:
    """Per-step wall and CPU time, and round trips per run, of runs on fresh threads with and
    without the lease (interleaved rounds; median of per-round ratios)."""
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import PgCheckpointer

    schema = f"lease_fresh_{secrets.token_hex(4)}"
    cps: dict[str, Any] = {
        "no lease": PgCheckpointer(dsn, schema=schema),
        "lease": PgCheckpointer(dsn, schema=schema, multitask_strategy="enqueue"),
    }
    fetches = {name: 0 for name in cps}
    out = FreshCost(runs, rounds)
    try:
        apps = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, cp in cps.items():
                cp.setup()
                source = cp.store.source
                real = source._fetch

                async def counted(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
                    fetches[_name] += 1
                    return await _real(*a, **k)

                source._fetch = counted
                apps[name] = _graph(cp, os.path.join(tmp, "effects.log"), 0.0)
                for _ in range(5):  # warm-up: pool, prepared statements
                    apps[name].invoke(
                        {"messages": [Message.text_message("w")]},
                        {"thread_id": uuid.uuid4().hex},
                    )
            walls: dict[str, list[float]] = {n: [] for n in cps}
            cpus: dict[str, list[float]] = {n: [] for n in cps}
            ratios_wall: list[float] = []
            ratios_cpu: list[float] = []
            syncs: dict[str, list[float]] = {n: [] for n in cps}
            for rnd in range(rounds):
                order = list(cps) if rnd % 2 == 0 else list(reversed(cps))
                per: dict[str, tuple[float, float]] = {}
                for name in order:
                    fetches[name] = 0
                    w0 = _wal_syncs(dsn)
                    t0, c0 = time.perf_counter(), time.process_time()
                    for _ in range(runs):
                        apps[name].invoke(
                            {"messages": [Message.text_message("hello")]},
                            {"thread_id": uuid.uuid4().hex},
                        )
                    wall = (time.perf_counter() - t0) / (runs * NODES)
                    cpu = (time.process_time() - c0) / (runs * NODES)
                    syncs[name].append((_wal_syncs(dsn) - w0) / runs)
                    per[name] = (wall, cpu)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    out.round_trips_per_run[name] = fetches[name] / runs
                ratios_wall.append(per["lease"][0] / per["no lease"][0])
                ratios_cpu.append(per["lease"][1] / per["no lease"][1])
        out.ms_per_step = {n: statistics.median(v) * 1e3 for n, v in walls.items()}
        out.cpu_ms_per_step = {n: statistics.median(v) * 1e3 for n, v in cpus.items()}
        out.wal_syncs_per_run = {n: statistics.median(v) for n, v in syncs.items()}
        out.ratio_wall = statistics.median(ratios_wall)
        out.ratio_cpu = statistics.median(ratios_cpu)
    finally:
        for cp in cps.values():
            cp.close()
        drop_schema(dsn, schema)
    return out


@dataclass
class WakeLatency:
    """A waiting run's wake-up after a release, milliseconds, with and without ``LISTEN``."""

    samples: int
    #: ``"listen"`` / ``"poll"`` -> ``{"p50": ms, "p99": ms}``: from sending the release to the
    #: waiter's ``take`` returning (granted, the thread read under the lease)
    granted_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ``"listen"`` only: from sending the release to the notification's dispatch in the
    #: waiter's process
    notified_ms: dict[str, float] = field(default_factory=dict)
    #: release round trip alone (the part of the above that is the release itself)
    release_ms: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _pct(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    return {"p50": statistics.median(v), "p99": v[min(len(v) - 1, int(len(v) * 0.99))]}


def wake_latency(dsn: str, *, samples: int = 200) -> WakeLatency:
    """Wake-up latency of a queued run (``enqueue``) after the holder releases the lease.

    Two stores (two pools, the waiter's store with its own ``LISTEN`` connection) in one
    process: the holder takes the lease, the waiter queues (``RunLease.take``) and sleeps; the
    holder's release is sent and timed until the waiter holds the lease. Once with wake-ups
    (``lease_listen=True``), once polling (``lease_listen=False``: a waiter at the head of the
    queue peeks every ``POLL_HEAD_S``), interleaved sample by sample.
    """
    import asyncio

    from tenxgraph.core._lease import RunLease
    from tenxgraph.core.state import AgentState
    from tenxgraph.storage import _lease_wake
    from tenxgraph.storage.checkpointer import PgCheckpointer

    schema = f"lease_wake_{secrets.token_hex(4)}"
    out = WakeLatency(samples)
    dispatched: list[float] = []
    real_dispatch = _lease_wake.LeaseWakeups.dispatch

    def timed_dispatch(self: Any, payload: str) -> None:
        dispatched.append(time.perf_counter())
        real_dispatch(self, payload)

    async def main() -> None:
        holder_cp = PgCheckpointer(dsn, schema=schema, lease_listen=False)
        waiters = {
            "listen": PgCheckpointer(dsn, schema=schema),
            "poll": PgCheckpointer(dsn, schema=schema, lease_listen=False),
        }
        granted: dict[str, list[float]] = {k: [] for k in waiters}
        notified: list[float] = []
        released: list[float] = []
        try:
            await holder_cp.asetup()
            for i in range(samples + 5):
                for mode, cp in waiters.items():
                    cfg = {"thread_id": f"wake-{mode}-{i}", "user_id": "u"}
                    key = holder_cp.key_for(cfg)
                    held = await holder_cp.alease_acquire(cfg, f"h{i}", queue=False)
                    lease = RunLease(cp, dict(cfg), key, f"w{i}")
                    task = asyncio.ensure_future(lease.take("enqueue", AgentState))
                    await asyncio.sleep(0.03)  # queued and asleep
                    dispatched.clear()
                    t0 = time.perf_counter()
                    await holder_cp.alease_release(cfg, f"h{i}", held.fence)
                    t1 = time.perf_counter()
                    await task
                    t2 = time.perf_counter()
                    await lease.release()
                    if i < 5:
                        continue  # warm-up: pools, the listener, prepared statements
                    granted[mode].append((t2 - t0) * 1e3)
                    released.append((t1 - t0) * 1e3)
                    if mode == "listen" and dispatched:
                        notified.append((dispatched[0] - t0) * 1e3)
        finally:
            await holder_cp.aclose()
            for cp in waiters.values():
                await cp.aclose()
        out.granted_ms = {k: _pct(v) for k, v in granted.items()}
        out.notified_ms = _pct(notified) if notified else {}
        out.release_ms = _pct(released)

    _lease_wake.LeaseWakeups.dispatch = timed_dispatch  # type: ignore[method-assign]
    try:
        asyncio.run(main())
    finally:
        _lease_wake.LeaseWakeups.dispatch = real_dispatch  # type: ignore[method-assign]
        drop_schema(dsn, schema)
    return out


def enqueue_ratios(shared: list[SharedRow]) -> dict[int, float]:
    """``enqueue`` steps/s of N processes on one thread over one process's (medians of the
    repeats), N > 1: the issue-30 target is at least 0.8 at N = 2, 4, 8."""
    per: dict[int, list[float]] = {}
    for r in shared:
        if r.strategy == "enqueue":
            per.setdefault(r.processes, []).append(r.steps_per_s)
    one = statistics.median(per[1]) if per.get(1) else 0.0
    return {n: statistics.median(v) / one for n, v in sorted(per.items()) if n > 1 and one}


def render(
    shared: list[SharedRow], fresh: FreshCost | None, wake: WakeLatency | None = None
) -> list[str]:
    """Markdown lines of the run-lease section of the report."""
    lines = ["## Run lease: one thread, N processes, per multitask strategy\n"]
    lines.append(
        f"{NODES}-node runs, each node appending one line to a side-effect file before it "
        "returns; committed steps are the thread's versions, executions the file's lines. "
        "`None` is today's optimistic behaviour (compare-and-swap only, call again after "
        "`StaleStateError`); `reject` calls again after `ThreadBusyError`.\n"
    )
    lines.append(
        "| strategy | processes | steps/s | wasted executions / committed step | "
        "StaleStateError / attempt | ThreadBusyError / attempt |"
    )
    lines.append("| --- | --- | --- | --- | --- | --- |")
    groups: dict[tuple[int, str], list[SharedRow]] = {}
    for r in shared:
        groups.setdefault((r.processes, str(r.strategy)), []).append(r)
    for (n, strategy), rs in sorted(groups.items()):
        attempts = sum(r.runs + r.stale + r.busy for r in rs) or 1
        lines.append(
            f"| {strategy} | {n} | {statistics.median(r.steps_per_s for r in rs):,.0f} | "
            f"{statistics.median(r.wasted_per_step for r in rs):.3f} | "
            f"{sum(r.stale for r in rs) / attempts:.1%} | {sum(r.busy for r in rs) / attempts:.1%} |"
        )
    ratios = enqueue_ratios(shared)
    if ratios:
        lines.append("")
        lines.append(
            "`enqueue`, N processes over one process (target: at least 0.8): "
            + ", ".join(f"N={n}: {x:.2f}x" for n, x in ratios.items())
            + "\n"
        )
    if wake is not None:
        lines.append(
            f"Wake-up of a queued run after the release ({wake.samples} samples, one process, "
            "two stores): from sending the release to the waiter holding the lease (its "
            "thread read), ms:\n"
        )
        lines.append("| waiter | p50 | p99 |")
        lines.append("| --- | --- | --- |")
        for mode, label in (("listen", "woken by NOTIFY"), ("poll", "polling (no LISTEN)")):
            g = wake.granted_ms.get(mode)
            if g:
                lines.append(f"| {label} | {g['p50']:.2f} | {g['p99']:.2f} |")
        if wake.notified_ms:
            lines.append(
                f"\nOf which: the release's own round trip p50 {wake.release_ms['p50']:.2f} ms; "
                f"the notification dispatched in the waiter's process p50 "
                f"{wake.notified_ms['p50']:.2f} / p99 {wake.notified_ms['p99']:.2f} ms after "
                "the release was sent; the rest is the waiter's acquisition round trip.\n"
            )
    if fresh is not None:
        lines.append("")
        lines.append(
            f"Fresh thread, one process, {fresh.runs_per_round} runs x {fresh.rounds} "
            "interleaved rounds (median):\n"
        )
        lines.append(
            "| | ms/step | client CPU ms/step | Postgres round trips / run | "
            "WAL flushes / run (server-wide) |"
        )
        lines.append("| --- | --- | --- | --- | --- |")
        for name in ("no lease", "lease"):
            lines.append(
                f"| {name} | {fresh.ms_per_step[name]:.3f} | {fresh.cpu_ms_per_step[name]:.3f} "
                f"| {fresh.round_trips_per_run[name]:.1f} | "
                f"{fresh.wal_syncs_per_run.get(name, float('nan')):.2f} |"
            )
        lines.append(
            f"\nLease / no lease: wall {fresh.ratio_wall:.3f}x (target: at most 1.05x), CPU "
            f"{fresh.ratio_cpu:.3f}x (median of per-round ratios).\n"
        )
    return lines
