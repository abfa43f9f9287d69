"""``tenxgraph demo``: multi-turn runs, a crash, a resume, verified."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
from collections.abc import Sequence
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
from tenxgraph.cli.replay import (
    REPLAY_RECURSION_LIMIT,
    TurnStats,
    _install_metrics,
    _metric_snapshot,
    _read_raw,
    build_replay_graph,
    drive_turn,
    user_of,
    verify_threads,
)
from tenxgraph.cli.threads import _short


# ==================================================================================================
# demo
# ==================================================================================================
def _demo_crash_child(
    conn: Any, store: StoreSpec, raw_line: str, thread_id: str, hang_call: str, effects: str
) -> None:
    """Child process of the demo: replays a conversation; the tool call ``hang_call`` never
    returns (the parent kills the process while it hangs)."""
    import functools

    from tenxgraph.models.replay import parse_trajectory

    traj = parse_trajectory(json.loads(raw_line))

    def hang_on(func: Any) -> Any:
        @functools.wraps(func)
        async def wrapped(**kwargs: Any) -> Any:
            from tenxgraph.core._context import current_tool_call

            call = current_tool_call()
            if call is not None and call.tool_call_id == hang_call:
                conn.send(("hanging", call.tool_call_id))
                await asyncio.sleep(3600)
            return await func(**kwargs)

        return wrapped

    async def body() -> None:
        cp = store.checkpointer()
        app = build_replay_graph(traj, cp, effects, tool_wrapper=hang_on)
        for turn in traj.turns:
            await drive_turn(app, traj, turn, thread_id, TurnStats())

    asyncio.run(body())


async def _demo_turns(cp: Any, traj: Any, thread_id: str, effects: str, out: Any) -> None:
    app = build_replay_graph(traj, cp, effects)
    user = user_of(traj.id)
    out(
        f"\n  {traj.id}  ({traj.source}, owner {user}, {len(traj.turns)} user turns, {traj.tool_call_count} tool calls)"
    )
    for turn in traj.turns:
        stats = TurnStats()
        state = await drive_turn(app, traj, turn, thread_id, stats)
        cfg = {"thread_id": thread_id, "user_id": user}
        info = await cp.aget_thread(cfg)
        said = traj.messages[turn.inputs[-1]].text()
        answer = next(
            (m for m in reversed(state.context) if m.role == "assistant" and m.text()), None
        )
        calls = sum(
            len(m.tool_calls())
            for m in traj.messages[turn.start : turn.end]
            if m.role == "assistant"
        )
        out(
            f"    turn {turn.index + 1:>2}  v{info.version if info else '?':<3} {stats.steps:>2} steps "
            f"{calls:>2} tool calls  user: {_short(said, 50)!r}"
        )
        if turn.closing:
            out("              (the user ended the conversation; stored without an answer)")
        elif answer is not None and turn.end > turn.start:
            out(f"              agent: {_short(answer.text(), 70)!r}")


def _pick_crash_trajectory(trajectories: Sequence[Any]) -> tuple[Any, int, int]:
    """A conversation with a parallel-call message: (trajectory, turn index, its position)."""
    for traj in trajectories:
        for turn in traj.turns:
            for pos in range(turn.start, turn.end):
                m = traj.messages[pos]
                if m.role == "assistant" and len(m.tool_calls()) >= 3:
                    return traj, turn.index, pos
    raise CliError("no conversation with parallel tool calls in the data", EXIT_USAGE)


async def _demo_async(args: argparse.Namespace) -> int:
    import multiprocessing as mp

    from tenxgraph.models.replay import bundled_data_path, load_trajectories, read_effects

    out = print
    data = Path(args.data) if args.data else bundled_data_path()
    trajectories = load_trajectories(data)
    raw = _read_raw(data)
    workdir = tempfile.mkdtemp(prefix="tenxgraph-demo-")
    spec = _store_spec(args, default_db=os.path.join(workdir, "demo.sqlite"))
    effects = os.path.join(workdir, "tool-effects.jsonl")
    prefix = f"demo-{int(time.time())}-{os.getpid()}/"
    cp = await _open(spec)
    out("tenxgraph demo: recorded customer-service conversations (tau-bench, tau2-bench) replayed")
    out(f"store: {spec.describe()}")
    try:
        # 1. multi-turn runs
        short = sorted(trajectories, key=lambda t: (len(t.messages), t.id))
        picks = [
            next(t for t in short if t.source.startswith("tau-bench")),
            next(t for t in short if t.source.startswith("tau2")),
        ]
        picks = picks[: max(1, args.conversations)]
        out("\n1. Multi-turn runs: each user turn is one invoke(); every node writes a new version")
        for traj in picks:
            await _demo_turns(cp, traj, prefix + traj.id, effects, out)

        # 2. a crash
        crash, turn_idx, crash_pos = _pick_crash_trajectory(
            sorted(trajectories, key=lambda t: len(t.messages))
        )
        tid = prefix + crash.id
        user = user_of(crash.id)
        cfg = {"thread_id": tid, "user_id": user}
        parallel = crash.messages[crash_pos].tool_calls()
        hang, n_calls = parallel[-1], len(parallel)
        calls_before = sum(
            len(m.tool_calls()) for m in crash.messages[:crash_pos] if m.role == "assistant"
        )
        out(
            f"\n2. A crash: a worker process runs {crash.id}; in turn {turn_idx + 1} the agent calls "
            f"{n_calls} tools at once and the last one ({hang.name}) hangs; the worker is then killed with SIGKILL"
        )
        await cp.aclose()
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_demo_crash_child,
            args=(child, spec, raw[crash.id], tid, hang.id, effects),
            daemon=True,
        )
        proc.start()
        child.close()
        deadline = time.monotonic() + 120
        hung = False
        while time.monotonic() < deadline and proc.is_alive():
            if parent.poll(0.2):
                msg = parent.recv()
                if msg[0] == "hanging":
                    hung = True
                    break
        if not hung:
            proc.kill()
            raise CliError("the demo's worker process did not reach the crash point", EXIT_MISMATCH)
        cp = await _open(spec)
        for _ in range(200):  # let the sibling calls record their results in the ledger
            if await cp.aledger_count(cfg) >= calls_before + n_calls - 1:
                break
            await asyncio.sleep(0.05)
        assert proc.pid is not None  # started above
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        before = await cp.aget_state(cfg)
        meta = before.execution_meta
        version = cfg.get("_checkpoint_version")
        recorded = await cp.aledger_count(cfg)
        out(f"   worker pid {proc.pid} killed (exit code {proc.exitcode}).")
        in_ledger = recorded - calls_before
        out(
            f"   stored thread: version {version}, status {meta.status}, next node {meta.current_node}, "
            f"{len(before.context)} messages; {in_ledger} of the {n_calls} parallel calls were recorded in "
            "the ledger before the kill"
        )

        # 3. resume
        out(
            "\n3. Resume in this process: invoke(None, config) finishes the cut-off run, then the turns go on"
        )
        reader = _install_metrics()
        execs_before = len(read_effects(effects))
        app = build_replay_graph(crash, cp, effects)
        res = await app.ainvoke(None, {**cfg, "recursion_limit": REPLAY_RECURSION_LIMIT})
        met = _metric_snapshot(reader)
        execs = len(read_effects(effects)) - execs_before
        after = await cp.aget_state(cfg)
        hits = int(met["tenxgraph.ledger.hits"]) if "tenxgraph.ledger.hits" in met else in_ledger
        out(
            f"   replayed node {meta.current_node} (the only node run again): {hits} of its {n_calls} calls "
            f"answered from the ledger without running the tool, {n_calls - hits} executed (cut off by the kill)"
        )
        out(
            f"   the run then went on: {execs} tool execution(s) in all, {len(res['messages'])} new messages; "
            f"status {after.execution_meta.status}, version {cfg.get('_checkpoint_version')}"
        )
        for turn in crash.turns:
            await drive_turn(app, crash, turn, tid, TurnStats())
        out(f"   remaining turns done: {len(crash.turns)} turns in all")

        # 4. verification
        ver = await verify_threads(cp, picks + [crash], prefix, effects, {proc.pid})
        out("\n4. Verification against the recordings")
        out(
            f"   {ver.verified}/{ver.threads} threads hold exactly the recorded messages; ledger rows "
            f"{ver.ledger_rows} = recorded tool calls {ver.tool_calls}; tool executions {ver.executions} "
            f"(re-run after the kill: {ver.crash_reruns}); double executions: {len(ver.double_executions)}"
        )
        for line in ver.mismatches + ver.double_executions:
            out("   " + line)
        out(
            "\nInspect them: tenxgraph threads list --user "
            + user
            + (f" --db {spec.db}" if not spec.dsn else " --dsn ...")
        )
        out(
            "              tenxgraph threads history "
            + tid
            + f" --user {user}"
            + (f" --db {spec.db}" if not spec.dsn else " --dsn ...")
        )
        return EXIT_OK if ver.ok else EXIT_MISMATCH
    finally:
        with contextlib.suppress(Exception):
            await cp.aclose()
