"""Replay benchmark: the real agent trajectories bundled in ``tenxgraph/data/*.jsonl``
(tau-bench airline with gpt-4o, tau2-bench with ToolOrchestra), replayed end to end.

Each conversation runs on its own thread through the graph of 10xGraph's guide (an ``Agent``
whose model is the :class:`~tenxgraph.models.replay.ReplayModel` of the recording, a
``ToolNode`` whose tools return the recorded results through the idempotency ledger), one
user turn per ``ainvoke`` (a closing turn the recording does not answer is stored with
``aupdate_state``). ``concurrency`` conversations are in flight at once on one event loop, as
in a server process. Every thread is compared with its recording afterwards (untimed): a
replay that diverged would make the figure meaningless.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any


def load(limit: int | None = None) -> list[Any]:
    """The bundled trajectories (``limit``: the first N, in file order)."""
    from tenxgraph.models.replay import load_trajectories

    return load_trajectories(limit=limit)


def build_graph(traj: Any, checkpointer: Any) -> Any:
    from tenxgraph.core.graph import Agent, StateGraph, ToolNode
    from tenxgraph.models.replay import ReplayModel, ReplayTools
    from tenxgraph.utils import END

    model = ReplayModel(traj)
    tools = ReplayTools(traj, None)

    def after_agent(state: Any) -> str:
        last = state.context[-1] if state.context else None
        return (
            "TOOL" if last is not None and last.role == "assistant" and last.tool_calls() else END
        )

    def after_tools(state: Any) -> str:
        return "MAIN" if model.has_answer(state.context) else END

    g = StateGraph()
    g.add_node("MAIN", Agent(model=model, tool_node="TOOL"))
    g.add_node("TOOL", ToolNode(tools.functions))
    g.add_conditional_edges("MAIN", after_agent, {"TOOL": "TOOL", END: END})
    g.add_conditional_edges("TOOL", after_tools, {"MAIN": "MAIN", END: END})
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=checkpointer)


@dataclass
class ReplayResult:
    store: str
    conversations: int
    turns: int
    steps: int
    messages: int
    tool_calls: int
    wall_s: float
    cpu_s: float
    concurrency: int
    mismatches: int

    @property
    def turns_per_s(self) -> float:
        return self.turns / self.wall_s

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["turns_per_s"] = self.turns_per_s
        d["steps_per_s"] = self.steps_per_s
        return d


async def _replay_one(app: Any, traj: Any, prefix: str) -> int:
    cfg_base = {"thread_id": f"{prefix}{traj.id}", "user_id": "bench", "recursion_limit": 500}
    turns = 0
    for turn in traj.turns:
        inputs = [traj.messages[i] for i in turn.inputs]
        if turn.closing:
            await app.aupdate_state(dict(cfg_base), {"messages": inputs})
        else:
            await app.ainvoke({"messages": inputs}, dict(cfg_base))
        turns += 1
    return turns


async def replay(
    store: str, checkpointer: Any, trajectories: list[Any], concurrency: int = 1
) -> ReplayResult:
    """Replay ``trajectories`` on ``checkpointer`` (already set up), ``concurrency`` at a time."""
    from tenxgraph.models.replay import compare_messages

    prefix = f"replay-{time.time_ns()}-"
    apps = [(t, build_graph(t, checkpointer)) for t in trajectories]
    queue: asyncio.Queue[Any] = asyncio.Queue()
    for item in apps:
        queue.put_nowait(item)
    turns = 0

    async def worker() -> None:
        nonlocal turns
        while True:
            try:
                traj, app = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            done = await _replay_one(app, traj, prefix)
            turns += done  # not `turns += await ...`: that would read `turns` before awaiting

    c0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    mismatches = 0
    for traj, app in apps:
        state = await app.aget_state({"thread_id": f"{prefix}{traj.id}", "user_id": "bench"})
        if state is None or compare_messages(traj, state.context):
            mismatches += 1
    return ReplayResult(
        store=store,
        conversations=len(trajectories),
        turns=turns,
        steps=sum(t.step_count for t in trajectories),
        messages=sum(len(t.messages) for t in trajectories),
        tool_calls=sum(t.tool_call_count for t in trajectories),
        wall_s=wall,
        cpu_s=cpu,
        concurrency=concurrency,
        mismatches=mismatches,
    )
