"""``tenxgraph replay``: the replay graph, the turn driver, the worker fleet and the verification."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import heapq
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenxgraph.cli._common import (
    EXIT_MISMATCH,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    StoreSpec,
    _open,
    _store_spec,
)

#: Node executions allowed per run in the replay graphs (the longest recorded turn needs ~60).
REPLAY_RECURSION_LIMIT = 1000
#: Attempts per turn on StaleStateError / TransientStorageError before the turn is given up.
MAX_RETRIES = 50


# ==================================================================================================
# The replay graph and the turn driver (used by demo and replay)
# ==================================================================================================
def build_replay_graph(
    traj: Any,
    checkpointer: Any,
    effects_path: str | None,
    *,
    check_ledger: bool = True,
    tool_wrapper: Any = None,
) -> Any:
    """The graph of 10xGraph's guide, with the replay model and replay tools::

        MAIN (Agent) --tool calls?--> TOOL (ToolNode) --recording goes on?--> MAIN
             \\--no--> END                          \\--no (end of recording)--> END

    Args:
        traj: the :class:`~tenxgraph.models.replay.Trajectory`.
        checkpointer: the store.
        effects_path: side-effect file of the replay tools (``None``: none).
        check_ledger: make the replay tools record whether the ledger already held each call.
        tool_wrapper: optional ``f(tool_function) -> tool_function`` applied to each replay tool
            (the demo uses it to make one call hang).

    Returns:
        The compiled graph (``graph.replay_model`` is its model).
    """
    from tenxgraph.core.graph import Agent, StateGraph, ToolNode
    from tenxgraph.core.state import AgentState
    from tenxgraph.models.replay import ReplayModel, ReplayTools
    from tenxgraph.utils import END

    model = ReplayModel(traj)
    tools = ReplayTools(traj, effects_path, check_ledger=check_ledger)

    def after_agent(state: Any) -> str:
        last = state.context[-1] if state.context else None
        return (
            "TOOL" if last is not None and last.role == "assistant" and last.tool_calls() else END
        )

    def after_tools(state: Any) -> str:
        return "MAIN" if model.has_answer(state.context) else END

    graph: StateGraph[AgentState] = StateGraph()
    graph.add_node("MAIN", Agent(model=model, tool_node="TOOL"))
    functions = tools.functions
    if tool_wrapper is not None:
        functions = [tool_wrapper(f) for f in functions]
    graph.add_node("TOOL", ToolNode(functions))
    graph.add_conditional_edges("MAIN", after_agent, {"TOOL": "TOOL", END: END})
    graph.add_conditional_edges("TOOL", after_tools, {"MAIN": "MAIN", END: END})
    graph.set_entry_point("MAIN")
    app = graph.compile(checkpointer=checkpointer)
    app.replay_model = model  # type: ignore[attr-defined]
    app.replay_tools = tools  # type: ignore[attr-defined]
    return app


def user_of(traj_id: str) -> str:
    """The user that owns a replayed conversation (5 users, spread by a hash of the id)."""
    return f"user-{zlib.crc32(traj_id.encode()) % 5}"


@dataclass(slots=True)
class TurnStats:
    """What driving one turn took (counts)."""

    invokes: int = 0
    resumes: int = 0
    replayed_nodes: int = 0
    conflicts: int = 0
    transient: int = 0
    steps: int = 0


class TurnFailed(Exception):
    """A turn could not be completed (non-retryable error, divergence, too many retries)."""


async def drive_turn(app: Any, traj: Any, turn: Any, thread_id: str, stats: TurnStats) -> Any:
    """Bring a thread to the end of ``turn``, from wherever it stands (a load balancer's worker).

    Reads the thread, finds its position in the recording (pure), resumes an unfinished run
    with ``invoke(None, config)``, sends the turn's input messages not yet stored (all have
    deterministic ids, so a re-sent message is never duplicated), and retries on
    ``StaleStateError`` and ``TransientStorageError``. A closing turn (a user message the
    recording does not answer) is stored with ``update_state``, without running the agent.

    Returns:
        The thread's state at the end of the turn.

    Raises:
        TurnFailed: the thread diverged from the recording, a non-retryable error, or more than
            :data:`MAX_RETRIES` retries.
    """
    from tenxgraph.core.exceptions import StaleStateError, TenxGraphError, TransientStorageError
    from tenxgraph.core.state.execution import UNFINISHED, ExecutionStatus
    from tenxgraph.utils import ResponseGranularity

    user = user_of(traj.id)
    attempts = 0
    state = None
    while True:
        cfg = {"thread_id": thread_id, "user_id": user, "recursion_limit": REPLAY_RECURSION_LIMIT}
        try:
            if state is None:
                state = await app.aget_state(cfg)
                cfg.pop("_checkpoint_version", None)
            context = list(state.context) if state is not None else []
            pos = traj.position(context)
            status = state.execution_meta.status if state is not None else None
            if state is not None and status in UNFINISHED:  # a status implies a state
                stats.resumes += 1
                if status == ExecutionStatus.RUNNING:
                    stats.replayed_nodes += 1
                before = state.execution_meta.step
                stats.invokes += 1
                res = await app.ainvoke(None, cfg, response_granularity=ResponseGranularity.FULL)
                state = res["state"]
                stats.steps += max(0, state.execution_meta.step - before)
                continue
            if pos >= turn.end and pos > turn.inputs[-1]:
                return state
            if pos < turn.inputs[0]:
                # The previous turn was reported complete: this read returned an older version.
                raise TurnFailed(
                    f"{thread_id}: turn {turn.index}: stale read: the store returned a version at "
                    f"message {pos} (status {status}), but the previous turn had completed at "
                    f"message {turn.inputs[0]}"
                )
            inputs = [traj.messages[i] for i in turn.inputs if i >= pos]
            if turn.closing:
                stats.invokes += 1
                state = await app.aupdate_state(cfg, {"messages": inputs})
                continue
            before = state.execution_meta.step if state is not None else 0
            stats.invokes += 1
            res = await app.ainvoke(
                {"messages": inputs}, cfg, response_granularity=ResponseGranularity.FULL
            )
            state = res["state"]
            stats.steps += max(0, state.execution_meta.step - before)
        except (StaleStateError, TransientStorageError) as exc:
            if isinstance(exc, StaleStateError):
                stats.conflicts += 1
            else:
                stats.transient += 1
            attempts += 1
            if attempts > MAX_RETRIES:
                raise TurnFailed(
                    f"{thread_id}: turn {turn.index}: {attempts} retries, last {exc}"
                ) from exc
            state = None
            await asyncio.sleep(min(0.5, 0.005 * (2 ** min(attempts, 7))) * random.random())
        except TenxGraphError as exc:
            seen = (
                "nothing"
                if state is None
                else (
                    f"status {state.execution_meta.status}, next {state.execution_meta.current_node}, "
                    f"{len(state.context)} messages"
                )
            )
            raise TurnFailed(
                f"{thread_id}: turn {turn.index}: {exc} (the driver had read: {seen})"
            ) from exc


# ==================================================================================================
# Metrics (through the OpenTelemetry SDK when it is installed)
# ==================================================================================================
def _install_metrics() -> Any:
    try:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    except ImportError:
        return None
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    return reader


def _metric_snapshot(reader: Any) -> dict[str, float]:
    """Cumulative counter values by name, summed over every attribute set, and by
    ``name[tier]`` for data points carrying a ``tenxgraph.cache.tier``."""
    out: dict[str, float] = {}
    if reader is None:
        return out
    data = reader.get_metrics_data()
    for rm in getattr(data, "resource_metrics", None) or ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for dp in getattr(m.data, "data_points", ()):
                    value = getattr(dp, "value", None)
                    if value is None:
                        continue
                    out[m.name] = out.get(m.name, 0) + value
                    tier = (dp.attributes or {}).get("tenxgraph.cache.tier")
                    if tier:
                        key = f"{m.name}[{tier}]"
                        out[key] = out.get(key, 0) + value
    return out


def _cache_stats(cp: Any) -> dict[str, float]:
    """Cache counters of a checkpointer's layered store, flattened (``lru.hits`` ...)."""
    out: dict[str, float] = {}
    fn: Callable[[], dict[str, Any]] | None = getattr(cp.store, "stats", None)
    if not callable(fn):
        return out
    for k, v in fn().items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                if isinstance(vv, (int, float)):
                    out[f"{k}.{kk}"] = vv
        elif isinstance(v, (int, float)):
            out[k] = v
    return out


# ==================================================================================================
# replay: workers
# ==================================================================================================
@dataclass(slots=True)
class WorkerSpec:
    """What a worker process needs (picklable)."""

    index: int
    store: StoreSpec
    raw: dict[str, str]  # trajectory id -> its JSON line
    restore_ids: bool
    effects_path: str
    thread_prefix: str
    concurrency: int


def _worker_entry(conn: Any, spec: WorkerSpec) -> None:
    """Body of a worker process: serve turns from the supervisor until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    reader = _install_metrics()
    try:
        asyncio.run(_worker(conn, spec, reader))
    except KeyboardInterrupt:
        pass


async def _worker(conn: Any, spec: WorkerSpec, reader: Any) -> None:
    from tenxgraph.models.replay import parse_trajectory

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def pump() -> None:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                msg = ("stop",)
            loop.call_soon_threadsafe(inbox.put_nowait, msg)
            if msg[0] == "stop":
                return

    threading.Thread(target=pump, name="tenxgraph-worker-inbox", daemon=True).start()
    cp = spec.store.checkpointer()
    graphs: dict[str, tuple[Any, Any]] = {}
    send_lock = threading.Lock()

    def send(msg: Any) -> None:
        with send_lock:
            conn.send(msg)

    def graph_for(traj_id: str) -> tuple[Any, Any]:
        if traj_id not in graphs:
            traj = parse_trajectory(
                json.loads(spec.raw[traj_id]), restore_original_ids=spec.restore_ids
            )
            graphs[traj_id] = (traj, build_replay_graph(traj, cp, spec.effects_path))
        return graphs[traj_id]

    async def one(item_id: int, traj_id: str, turn_index: int) -> None:
        traj, app = graph_for(traj_id)
        stats = TurnStats()
        error = None
        t0 = time.perf_counter()
        try:
            await drive_turn(app, traj, traj.turns[turn_index], spec.thread_prefix + traj_id, stats)
        except TurnFailed as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - reported to the supervisor, which decides
            error = f"{type(exc).__name__}: {exc}"
        send(
            (
                "done",
                item_id,
                error,
                time.perf_counter() - t0,
                {k: getattr(stats, k) for k in TurnStats.__slots__},
                _metric_snapshot(reader),
                _cache_stats(cp),
            )
        )

    tasks: set[asyncio.Task[Any]] = set()
    try:
        await cp.asetup()
        send(("ready", os.getpid()))
        while True:
            msg = await inbox.get()
            if msg[0] == "stop":
                break
            if msg[0] == "turn":
                task = asyncio.create_task(one(msg[1], msg[2], msg[3]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        with contextlib.suppress(Exception):
            await cp.aclose()


# ==================================================================================================
# replay: supervisor (the load balancer)
# ==================================================================================================
@dataclass(slots=True)
class _Worker:
    slot: int
    proc: Any
    conn: Any
    generation: int
    ready: bool = False
    in_flight: dict[int, tuple[str, int]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    cache: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class FleetResult:
    """Counters of a replay run."""

    turns: int = 0
    elapsed_s: float = 0.0
    kills: int = 0
    failures: list[str] = field(default_factory=list)
    killed_pids: set[int] = field(default_factory=set)
    stats: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    cache: dict[str, float] = field(default_factory=dict)
    distinct_worker_ratio: float = 0.0


class _Progress:
    """A one-line progress bar on stderr (a line every few seconds when not a terminal)."""

    def __init__(self, total: int, label: str, enabled: bool) -> None:
        self.total = max(total, 1)
        self.label = label
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()
        self.last = 0.0

    def update(self, done: int, extra: str = "", force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        rate = done / max(now - self.t0, 1e-9)
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        line = f"{self.label} [{bar}] {done}/{self.total} {rate:6.1f}/s {extra}"
        if self.tty:
            sys.stderr.write("\r" + line[:160])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def run_fleet(
    trajectories: Sequence[Any],
    raw: dict[str, str],
    *,
    store: StoreSpec,
    workers: int,
    concurrency: int,
    kill_rate: float,
    seed: int,
    restore_ids: bool,
    effects_path: str,
    thread_prefix: str,
    progress: bool,
) -> FleetResult:
    """Replay ``trajectories`` with ``workers`` processes fed by one queue of user turns.

    The supervisor is the load balancer: it hands each ready turn (the next user turn of a
    conversation whose previous turn is done) to a random worker with a free slot, so
    consecutive turns of one conversation usually land on different workers. With
    ``kill_rate`` R > 0, each dispatched turn schedules, with probability R, a SIGKILL of its
    worker at a random moment within about two average turn durations; a killed worker is
    restarted at once and its unfinished turns are handed out again (the next worker resumes
    the thread with ``invoke(None, config)``).

    Returns:
        The run's counters (verification is separate: :func:`verify_threads`).
    """
    import multiprocessing as mp
    from multiprocessing.connection import wait

    # forkserver: a restarted worker is forked from a server process that has already imported
    # tenxgraph (fast restarts after SIGKILL), never from this process with its threads.
    methods = mp.get_all_start_methods()
    ctx: Any = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
    if "forkserver" in methods:
        ctx.set_forkserver_preload(
            [
                "tenxgraph.core.graph.agent",
                "tenxgraph.core.graph.tool_node",
                "tenxgraph.models.replay",
                "tenxgraph.storage.checkpointer",
            ]
        )
    # Pickled by reference as tenxgraph.cli.replay._worker_entry, also under
    # ``python -m tenxgraph.cli``.
    from tenxgraph.cli import replay as this_module

    rng = random.Random(seed)
    result = FleetResult()
    by_id = {t.id: t for t in trajectories}
    total_turns = sum(len(t.turns) for t in trajectories)
    ready: list[tuple[str, int]] = [(t.id, 0) for t in trajectories]
    rng.shuffle(ready)
    last_worker: dict[str, int] = {}
    handoffs = [0, 0]  # [turns after the first, of them on a different worker]
    item_seq = 0
    avg_turn_s = 0.05
    kills: list[tuple[float, int, int]] = []  # (deadline, slot, generation)
    slots: list[_Worker] = []
    totals: dict[str, int] = {k: 0 for k in TurnStats.__slots__}
    retired_metrics: dict[str, float] = {}
    retired_cache: dict[str, float] = {}
    bar = _Progress(total_turns, "replay", progress)

    def start(slot: int, generation: int) -> _Worker:
        parent, child = ctx.Pipe()
        spec = WorkerSpec(slot, store, raw, restore_ids, effects_path, thread_prefix, concurrency)
        proc = ctx.Process(
            target=this_module._worker_entry,
            args=(child, spec),
            name=f"tenxgraph-replay-{slot}",
            daemon=True,
        )
        proc.start()
        child.close()
        return _Worker(slot, proc, parent, generation)

    def merge(dst: dict[str, float], src: dict[str, float]) -> None:
        for k, v in src.items():
            dst[k] = dst.get(k, 0) + v

    def retire(w: _Worker) -> None:
        merge(retired_metrics, w.metrics)
        merge(retired_cache, w.cache)
        for item in sorted(w.in_flight.values(), key=lambda it: it[1]):
            ready.insert(0, item)
        w.in_flight.clear()
        with contextlib.suppress(Exception):
            w.conn.close()

    t0 = time.perf_counter()
    slots = [start(i, 0) for i in range(workers)]
    try:
        while result.turns + len(result.failures) < total_turns or any(w.in_flight for w in slots):
            # Dispatch.
            free = [w for w in slots if w.ready and len(w.in_flight) < concurrency]
            while ready and free:
                traj_id, turn_idx = ready.pop(0)
                prev = last_worker.get(traj_id)
                w = rng.choice(free)
                if turn_idx > 0:
                    handoffs[0] += 1
                    handoffs[1] += int(prev is not None and prev != w.slot)
                last_worker[traj_id] = w.slot
                item_seq += 1
                try:
                    w.conn.send(("turn", item_seq, traj_id, turn_idx))
                except (OSError, EOFError):
                    ready.insert(0, (traj_id, turn_idx))
                    free.remove(w)
                    continue
                w.in_flight[item_seq] = (traj_id, turn_idx)
                if kill_rate > 0 and rng.random() < kill_rate:
                    heapq.heappush(
                        kills,
                        (time.monotonic() + rng.uniform(0, 2 * avg_turn_s), w.slot, w.generation),
                    )
                if len(w.in_flight) >= concurrency:
                    free.remove(w)
            # Kills that are due.
            now = time.monotonic()
            while kills and kills[0][0] <= now:
                _, slot, gen = heapq.heappop(kills)
                w = slots[slot]
                if w.generation == gen and w.proc.is_alive():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(w.proc.pid, signal.SIGKILL)
                        result.kills += 1
                        result.killed_pids.add(w.proc.pid)
            timeout = max(0.0, min(0.2, kills[0][0] - time.monotonic())) if kills else 0.2
            objs: list[Any] = [w.conn for w in slots] + [w.proc.sentinel for w in slots]
            for obj in wait(objs, timeout=timeout):
                hit = next((x for x in slots if x.conn is obj or x.proc.sentinel == obj), None)
                if hit is None:
                    continue
                w = hit
                conn: Any = w.conn
                if obj is w.conn:
                    try:
                        while conn.poll():
                            msg = conn.recv()
                            if msg[0] == "ready":
                                w.ready = True
                            elif msg[0] == "done":
                                _, item_id, error, dur, st, met, cache = msg
                                item = w.in_flight.pop(item_id, None)
                                w.metrics, w.cache = met, cache
                                for k, v in st.items():
                                    totals[k] = totals.get(k, 0) + v
                                if item is None:
                                    continue
                                avg_turn_s = 0.9 * avg_turn_s + 0.1 * dur
                                traj_id, turn_idx = item
                                if error:
                                    result.failures.append(error)
                                    # the conversation stops here; count its remaining turns as failed
                                    rest = len(by_id[traj_id].turns) - turn_idx - 1
                                    result.failures.extend(
                                        [
                                            f"{traj_id}: turn {i} not run"
                                            for i in range(turn_idx + 1, turn_idx + 1 + rest)
                                        ]
                                    )
                                    continue
                                result.turns += 1
                                if turn_idx + 1 < len(by_id[traj_id].turns):
                                    ready.append((traj_id, turn_idx + 1))
                    except (EOFError, OSError):
                        pass
                if not w.proc.is_alive():
                    w.proc.join()
                    retire(w)
                    slots[w.slot] = start(w.slot, w.generation + 1)
            bar.update(result.turns, f"kills {result.kills}")
    finally:
        for w in slots:
            with contextlib.suppress(Exception):
                w.conn.send(("stop",))
        for w in slots:
            w.proc.join(timeout=30)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            retire(w)
        bar.update(result.turns, f"kills {result.kills}", force=True)
        bar.close()
    result.elapsed_s = time.perf_counter() - t0
    result.stats = totals
    result.metrics = retired_metrics
    result.cache = retired_cache
    result.distinct_worker_ratio = handoffs[1] / handoffs[0] if handoffs[0] else 0.0
    return result


# ==================================================================================================
# Verification
# ==================================================================================================
@dataclass(slots=True)
class Verification:
    """Outcome of checking every thread against its recording."""

    threads: int = 0
    verified: int = 0
    mismatches: list[str] = field(default_factory=list)
    tool_calls: int = 0
    ledger_rows: int = 0
    executions: int = 0
    crash_reruns: int = 0
    double_executions: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """``True`` when every thread matched and no call ran twice."""
        return not self.mismatches and not self.double_executions and self.verified == self.threads


async def verify_threads(
    cp: Any,
    trajectories: Sequence[Any],
    thread_prefix: str,
    effects_path: str | None,
    killed_pids: set[int],
) -> Verification:
    """Check each thread: exact message sequence, ledger rows = recorded tool calls, and each
    recorded call executed exactly once by the side-effect file.

    A call executed more than once is accepted only when every execution but the last ran in
    a process that was SIGKILLed afterwards, before the ledger held the call (the window
    between a tool's side effect and its ledger write, which no ledger can close); any other
    repeat, or an execution while the ledger already held the call, is a double execution.
    """
    from tenxgraph.models.replay import compare_messages, read_effects

    v = Verification(threads=len(trajectories))
    effects: dict[tuple[str, int, str], list[Any]] = {}
    if effects_path:
        for e in read_effects(effects_path):
            effects.setdefault((e.thread_id, e.position, e.tool_call_id), []).append(e)
    for traj in trajectories:
        tid = thread_prefix + traj.id
        cfg = {"thread_id": tid, "user_id": user_of(traj.id)}
        state = await cp.aget_state(cfg)
        problems: list[str] = []
        if state is None:
            problems.append("thread missing")
        else:
            problems.extend(compare_messages(traj, list(state.context)))
            if str(state.execution_meta.status) != "completed":
                problems.append(f"status {state.execution_meta.status}")
        rows = await cp.aledger_count(cfg)
        v.ledger_rows += rows
        v.tool_calls += traj.tool_call_count
        if rows != traj.tool_call_count:
            problems.append(
                f"ledger holds {rows} calls, the recording makes {traj.tool_call_count}"
            )
        if effects_path:
            for pos, m in enumerate(traj.messages):
                if m.role != "assistant":
                    continue
                for c in m.tool_calls():
                    runs = effects.get((tid, pos, c.id), [])
                    v.executions += len(runs)
                    if not runs:
                        problems.append(f"call {c.id} at {pos} never executed")
                        continue
                    if any(r.ledger_had_it for r in runs):
                        v.double_executions.append(
                            f"{tid}: call {c.id} ran while the ledger held it"
                        )
                    if len(runs) > 1:
                        if all(r.pid in killed_pids for r in runs[:-1]):
                            v.crash_reruns += len(runs) - 1
                        else:
                            v.double_executions.append(
                                f"{tid}: call {c.id} ran {len(runs)} times (pids {[r.pid for r in runs]})"
                            )
        if problems:
            v.mismatches.append(f"{tid}: " + "; ".join(problems))
        else:
            v.verified += 1
    return v


# ==================================================================================================
# replay command
# ==================================================================================================
def _read_raw(path: Path) -> dict[str, str]:
    files = sorted(p for p in path.iterdir() if p.suffix == ".jsonl") if path.is_dir() else [path]
    raw: dict[str, str] = {}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    raw[str(json.loads(line)["id"])] = line
    return raw


def _pct(num: float, den: float) -> str:
    return f"{100.0 * num / den:5.1f}%" if den else "  n/a"


def _summary(
    fleet: FleetResult, ver: Verification, trajectories: Sequence[Any], args: argparse.Namespace
) -> str:
    st = fleet.stats
    met = fleet.metrics
    cache = fleet.cache
    el = max(fleet.elapsed_s, 1e-9)
    lines = [
        "",
        "== replay summary ==",
        f"store              {args._store_desc}",
        f"conversations      {len(trajectories)}  ({sum(len(t.messages) for t in trajectories)} recorded messages, "
        f"{ver.tool_calls} tool calls)",
        f"workers            {args.workers} processes x {args.concurrency} concurrent turns; "
        f"{fleet.distinct_worker_ratio * 100:.0f}% of follow-up turns on a different worker than the previous turn",
        f"elapsed            {fleet.elapsed_s:.1f} s",
        f"turns              {fleet.turns}  ({fleet.turns / el:.1f} turns/s)",
        f"steps              {st.get('steps', 0)} node executions checkpointed ({st.get('steps', 0) / el:.1f} steps/s)",
        f"kills              {fleet.kills} SIGKILLs (kill rate {args.kill_rate}); workers restarted",
        f"resumes            {st.get('resumes', 0)} invoke(None, config) on unfinished threads",
        f"replayed nodes     {st.get('replayed_nodes', 0)} (counted by the driver)"
        + (
            f"; metric tenxgraph.nodes.replayed = {int(met.get('tenxgraph.nodes.replayed', 0))}"
            if met
            else ""
        ),
        f"conflicts          {st.get('conflicts', 0)} StaleStateError retried"
        + (
            f"; metric tenxgraph.conflicts = {int(met.get('tenxgraph.conflicts', 0))}"
            if met
            else ""
        ),
        f"transient errors   {st.get('transient', 0)} TransientStorageError retried",
        "ledger hits        "
        + (
            f"{int(met.get('tenxgraph.ledger.hits', 0))} tool calls answered from the ledger"
            if met
            else "n/a (install opentelemetry-sdk for the metric)"
        ),
    ]
    for tier in ("lru", "redis"):
        h, m = cache.get(f"{tier}.hits"), cache.get(f"{tier}.misses")
        if h is not None or m is not None:
            h, m = h or 0, m or 0
            lines.append(
                f"cache {tier:<13}{_pct(h, h + m)} hit rate ({int(h)} hits, {int(m)} misses)"
            )
    if "reads" in cache:
        lines.append(
            f"latest-state reads {int(cache.get('reads', 0))}: {int(cache.get('cache_hits', 0))} from a cache, "
            f"{int(cache.get('source_reads', 0))} from the source, {int(cache.get('stale', 0))} stale entries rejected"
        )
    lines += [
        f"tool executions    {ver.executions} for {ver.tool_calls} recorded calls; ledger rows {ver.ledger_rows}; "
        f"re-run after a kill before the ledger write: {ver.crash_reruns}; double executions: {len(ver.double_executions)}",
        f"verified threads   {ver.verified}/{ver.threads}" + ("  OK" if ver.ok else "  MISMATCH"),
    ]
    failed = [f for f in fleet.failures if "not run" not in f]
    if failed:
        stale = sum("stale read" in f or "diverged" in f for f in failed)
        lines.append(
            f"failed turns       {len(failed)} ({stale} after a read returned an older version than one "
            "already seen complete, or a state the recording never had)"
        )
    return "\n".join(lines)


def _cmd_replay(args: argparse.Namespace) -> int:
    from tenxgraph.models.replay import bundled_data_path, load_trajectories

    data = Path(args.data) if args.data else bundled_data_path()
    if args.workers < 1 or args.concurrency < 1 or not (0.0 <= args.kill_rate < 1.0):
        raise CliError(
            "--workers and --concurrency must be >= 1 and --kill-rate in [0, 1)", EXIT_USAGE
        )
    try:
        trajectories = load_trajectories(data, restore_original_ids=args.restore_ids)
        raw = _read_raw(data)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {data}: {exc}", EXIT_USAGE) from None
    if args.limit is not None:
        rng = random.Random(args.seed)
        trajectories = sorted(
            rng.sample(trajectories, min(args.limit, len(trajectories))), key=lambda t: t.id
        )
    raw = {t.id: raw[t.id] for t in trajectories}
    workdir = tempfile.mkdtemp(prefix="tenxgraph-replay-")
    spec = _store_spec(args, default_db=os.path.join(workdir, "replay.sqlite"))
    args._store_desc = spec.describe()
    prefix = (
        args.thread_prefix
        if args.thread_prefix is not None
        else f"r{int(time.time())}-{os.getpid()}/"
    )
    effects = os.path.join(workdir, "tool-effects.jsonl")
    print(
        f"replaying {len(trajectories)} conversations ({sum(len(t.turns) for t in trajectories)} user turns) "
        f"from {data} on {spec.describe()}"
    )
    print(f"threads {prefix}<trajectory id>; tool side effects in {effects}")

    async def prepare() -> None:
        cp = await _open(spec)
        await cp.aclose()

    asyncio.run(prepare())
    fleet = run_fleet(
        trajectories,
        raw,
        store=spec,
        workers=args.workers,
        concurrency=args.concurrency,
        kill_rate=args.kill_rate,
        seed=args.seed,
        restore_ids=args.restore_ids,
        effects_path=effects,
        thread_prefix=prefix,
        progress=not args.quiet,
    )

    async def check() -> Verification:
        # Verify against the source of truth (LRU validated by the source, no shared cache).
        source_only = dataclasses.replace(spec, redis_url=None, redis_cluster=False)
        cp = await _open(source_only)
        try:
            return await verify_threads(cp, trajectories, prefix, effects, fleet.killed_pids)
        finally:
            await cp.aclose()

    ver = asyncio.run(check())
    print(_summary(fleet, ver, trajectories, args))
    for line in (fleet.failures + ver.mismatches + ver.double_executions)[:20]:
        print("  " + line)
    return EXIT_OK if ver.ok and not fleet.failures else EXIT_MISMATCH
