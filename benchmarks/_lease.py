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
    ratio_wall: float = 0.0
    ratio_cpu: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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
            for rnd in range(rounds):
                order = list(cps) if rnd % 2 == 0 else list(reversed(cps))
                per: dict[str, tuple[float, float]] = {}
                for name in order:
                    fetches[name] = 0
                    t0, c0 = time.perf_counter(), time.process_time()
                    for _ in range(runs):
                        apps[name].invoke(
                            {"messages": [Message.text_message("hello")]},
                            {"thread_id": uuid.uuid4().hex},
                        )
                    wall = (time.perf_counter() - t0) / (runs * NODES)
                    cpu = (time.process_time() - c0) / (runs * NODES)
                    per[name] = (wall, cpu)
                    walls[name].append(wall)
                    cpus[name].append(cpu)
                    out.round_trips_per_run[name] = fetches[name] / runs
                ratios_wall.append(per["lease"][0] / per["no lease"][0])
                ratios_cpu.append(per["lease"][1] / per["no lease"][1])
        out.ms_per_step = {n: statistics.median(v) * 1e3 for n, v in walls.items()}
        out.cpu_ms_per_step = {n: statistics.median(v) * 1e3 for n, v in cpus.items()}
        out.ratio_wall = statistics.median(ratios_wall)
        out.ratio_cpu = statistics.median(ratios_cpu)
    finally:
        for cp in cps.values():
            cp.close()
        drop_schema(dsn, schema)
    return out


def render(shared: list[SharedRow], fresh: FreshCost | None) -> list[str]:
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
    if fresh is not None:
        lines.append("")
        lines.append(
            f"Fresh thread, one process, {fresh.runs_per_round} runs x {fresh.rounds} "
            "interleaved rounds (median):\n"
        )
        lines.append("| | ms/step | client CPU ms/step | Postgres round trips / run |")
        lines.append("| --- | --- | --- | --- |")
        for name in ("no lease", "lease"):
            lines.append(
                f"| {name} | {fresh.ms_per_step[name]:.3f} | {fresh.cpu_ms_per_step[name]:.3f} "
                f"| {fresh.round_trips_per_run[name]:.1f} |"
            )
        lines.append(
            f"\nLease / no lease: wall {fresh.ratio_wall:.3f}x, CPU {fresh.ratio_cpu:.3f}x "
            "(median of per-round ratios).\n"
        )
    return lines
