"""``stop`` / ``astop`` on every checkpointer, through the durable request (a second instance,
which has no in-process flag to share) and the in-process one.

The runner reads the durable request at most every ``STOP_POLL_S`` (1 s); these tests lower it
so they stay fast (the multi-process test keeps the real value).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _hitl_graphs import read_log, slow_chain
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core import _runner
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END

POLL_S = 0.02


@pytest.fixture(autouse=True)
def fast_stop_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runner, "STOP_POLL_S", POLL_S)


def user(text: str) -> Message:
    return Message.text_message(text)


def texts(state_or_msgs: Any) -> list[str]:
    msgs = state_or_msgs.context if isinstance(state_or_msgs, AgentState) else state_or_msgs
    return [m.text() for m in msgs]


async def status(app: CompiledGraph, cfg: dict[str, Any]) -> tuple[str, str | None]:
    st = await app.aget_state(dict(cfg))
    assert st is not None
    return str(st.execution_meta.status), st.execution_meta.current_node


class Gate:
    """What node ``slow`` awaits: by default a few polls' worth of time; when ``hold()`` is
    armed, until the test releases it."""

    def __init__(self) -> None:
        self.started: anyio.Event | None = None
        self.release: anyio.Event | None = None

    def hold(self) -> None:
        self.started, self.release = anyio.Event(), anyio.Event()

    async def __call__(self) -> None:
        if self.release is None:
            await anyio.sleep(5 * POLL_S)  # long enough for the run to poll after it
            return
        assert self.started is not None
        self.started.set()
        with anyio.fail_after(20):
            await self.release.wait()
        await anyio.sleep(2 * POLL_S)
        self.started = self.release = None


async def run_stopped_by(
    runner: CompiledGraph, stopper: CompiledGraph, gate: Gate, cfg: dict[str, Any], text: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run ``text`` on ``runner``; while node ``slow`` runs, ``stopper.astop``. Returns the run's
    result and what ``astop`` returned."""
    gate.hold()
    out: dict[str, Any] = {}

    async def run() -> None:
        out["res"] = await runner.ainvoke({"messages": [user(text)]}, dict(cfg))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        assert gate.started is not None
        with anyio.fail_after(20):
            await gate.started.wait()
        out["stop"] = await stopper.astop(dict(cfg))
        assert gate.release is not None
        gate.release.set()
    return out["res"], out["stop"]


@pytest.mark.anyio
@pytest.mark.parametrize("durable", [True, False], ids=["every-step", "end-only"])
async def test_stop_from_another_instance_stops_after_the_node_and_only_its_run(
    backend: Backend, tmp_path: Path, durable: bool
) -> None:
    log = tmp_path / "log"
    gate = Gate()
    cp = backend.new()
    app = slow_chain(cp, log, gate)
    other = slow_chain(backend.peer(cp), log, gate)  # another instance: durable request only
    cfg: dict[str, Any] = {"thread_id": "t-stop", "durable_checkpoint_every_step": durable}

    # A stop asked while nothing runs (the thread does not even exist) targets no run.
    assert await other.astop(dict(cfg)) == {"ok": True, "running": False}

    # 1. The thread's first run, stopped during its first node: no checkpoint exists yet when
    #    the request is made, and it is not lost.
    res, stop = await run_stopped_by(app, other, gate, cfg, "u0")
    assert stop == {"ok": True, "running": False}  # the store had not heard of the run yet
    assert texts(res["messages"]) == ["u0", "slow<-u0"]
    assert await status(other, cfg) == ("stopped", "two")
    assert read_log(log) == ["slow"]
    if durable:
        hist = await other.aget_state_history(dict(cfg))
        assert [(s.version, s.status) for s in hist] == [(2, "stopped"), (1, "running")]

    # 2. Resumable by any instance; the request does not stop the resumed run.
    res = await other.ainvoke(None, dict(cfg))
    assert texts(res["messages"]) == ["two<-u0", "three<-u0"]
    assert await status(app, cfg) == ("completed", "__end__")

    # 3. A stop asked while the thread is idle does not stop the next run, which polls the
    #    durable request after its long first node.
    assert (await other.astop(dict(cfg)))["running"] is False
    res = await app.ainvoke({"messages": [user("u1")]}, dict(cfg))
    assert texts(res["messages"]) == ["u1", "slow<-u1", "two<-u1", "three<-u1"]
    assert await status(other, cfg) == ("completed", "__end__")

    # 4. A later run of the existing thread is stopped the same way, and resumed.
    res, _ = await run_stopped_by(app, other, gate, cfg, "u2")
    assert texts(res["messages"]) == ["u2", "slow<-u2"]
    assert await status(app, cfg) == ("stopped", "two")
    await app.ainvoke(None, dict(cfg))
    st = await other.aget_state(dict(cfg))
    assert st is not None and st.execution_meta.status == "completed"
    assert texts(st)[-4:] == ["u2", "slow<-u2", "two<-u2", "three<-u2"]
    assert read_log(log) == ["slow", "two", "three"] * 3


@pytest.mark.anyio
async def test_a_stop_racing_the_end_of_a_run_does_not_stop_the_next_run(
    backend: Backend, tmp_path: Path
) -> None:
    """``astop`` in the same process while the run is in its last node: nothing is left to
    stop; neither the in-process nor the durable request may stop the thread's next run."""
    holder: dict[str, Any] = {"stop": True}

    async def one(state: AgentState) -> str:
        await anyio.sleep(5 * POLL_S)  # the run polls the durable request after this node
        return "one"

    async def last(state: AgentState, config: dict[str, Any]) -> str:
        if holder["stop"]:
            holder["stop"] = False
            assert (await holder["app"].astop(config))["running"] is True
        return "last"

    g = StateGraph()
    g.add_node("one", one)
    g.add_node("last", last)
    g.set_entry_point("one")
    g.add_edge("one", "last")
    g.add_edge("last", END)
    app = holder["app"] = g.compile(checkpointer=backend.new())
    cfg = {"thread_id": "t-stop-race"}
    res = await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    assert texts(res["messages"]) == ["u0", "one", "last"]
    res = await app.ainvoke({"messages": [user("u1")]}, dict(cfg))
    assert texts(res["messages"]) == ["u1", "one", "last"]
    assert await status(app, cfg) == ("completed", "__end__")


@pytest.mark.anyio
async def test_stop_request_isolation_and_timing_through_the_checkpointer(backend: Backend) -> None:
    cp = backend.new()
    alice = {"thread_id": "t-flags", "user_id": "alice"}
    assert await cp.aget_stop(dict(alice)) is False
    await cp.aset_stop(dict(alice), True, at=1000.0)  # before any checkpoint: recorded
    assert await cp.aget_stop(dict(alice)) is True
    assert await cp.aget_stop(dict(alice), since=1000.0) is True
    assert await cp.aget_stop(dict(alice), since=1000.001) is False
    await cp.aset_stop(dict(alice), False)
    assert await cp.aget_stop(dict(alice)) is False


@pytest.mark.anyio
async def test_request_stop_all_stops_every_run_of_the_process_once(
    backend: Backend, tmp_path: Path
) -> None:
    """What a draining server calls: each run in flight here stops after its current node,
    a repeated request is not counted again, and a thread with no run is not touched."""
    log = tmp_path / "log"
    gates = [Gate(), Gate()]
    cp = backend.new()
    apps = [slow_chain(cp, log, g) for g in gates]
    cfgs = [{"thread_id": f"t-all-{i}"} for i in range(2)]
    assert apps[0].request_stop_all() == 0  # nothing in flight
    out: dict[int, dict[str, Any]] = {}

    async def run(i: int) -> None:
        out[i] = await apps[i].ainvoke({"messages": [user(f"u{i}")]}, dict(cfgs[i]))

    for g in gates:
        g.hold()
    async with anyio.create_task_group() as tg:
        for i in range(2):
            tg.start_soon(run, i)
        with anyio.fail_after(20):
            for g in gates:
                assert g.started is not None
                await g.started.wait()
        assert [a.request_stop_all() for a in apps] == [1, 1]
        assert [a.request_stop_all() for a in apps] == [0, 0]
        for g in gates:
            assert g.release is not None
            g.release.set()
    for i in range(2):
        assert texts(out[i]["messages"]) == [f"u{i}", f"slow<-u{i}"]
        assert await status(apps[i], cfgs[i]) == ("stopped", "two")
    # the requests ended with their runs: a new run on the same graph is not stopped
    res = await apps[0].ainvoke({"messages": [user("again")]}, dict(cfgs[0]))
    assert texts(res["messages"])[-1] == "three<-again"
