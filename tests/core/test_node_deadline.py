"""``node_timeout``: each node's own deadline, on asyncio (one timer per run, see
``tenxgraph.core._deadline``) and on trio (anyio's cancel scope), for plain, generator and
sync nodes; other cancellations stay cancellations."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio
import pytest

from tenxgraph.core.exceptions import NodeTimeoutError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


def _graph(*nodes: Any) -> Any:
    g = StateGraph()
    names = [f"n{i}" for i in range(len(nodes))]
    for name, fn in zip(names, nodes, strict=True):
        g.add_node(name, fn)
    g.set_entry_point(names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=InMemoryCheckpointer())


def _go() -> dict[str, Any]:
    return {"messages": [Message.text_message("go")]}


@pytest.mark.anyio
async def test_each_node_gets_its_own_deadline() -> None:
    """Nodes that each take most of the timeout all finish: the deadline restarts per node
    (on asyncio the one timer of the run fires at the first node's deadline and moves on)."""

    async def slowish(state: AgentState) -> str:
        await anyio.sleep(0.15)
        return "ok"

    app = _graph(slowish, slowish, slowish)
    out = await app.ainvoke(_go(), {"thread_id": "t", "node_timeout": 0.25})
    assert [m.text() for m in out["messages"]] == ["go", "ok", "ok", "ok"]


@pytest.mark.anyio
async def test_a_later_node_times_out_at_its_own_deadline() -> None:
    async def quick(state: AgentState) -> str:
        await anyio.sleep(0.1)  # the run's timer is set for this node's deadline
        return "quick"

    started: list[float] = []

    async def slow(state: AgentState) -> str:
        started.append(time.monotonic())
        await anyio.sleep(30)
        return "never"

    app = _graph(quick, slow)
    with anyio.fail_after(10):
        with pytest.raises(NodeTimeoutError) as ei:
            await app.ainvoke(_go(), {"thread_id": "t", "node_timeout": 0.2})
    took = time.monotonic() - started[0]
    assert 0.18 <= took < 2.0
    assert ei.value.context == {"node": "n1", "timeout_s": 0.2}
    st = await app.aget_state({"thread_id": "t"})
    assert (st.execution_meta.status, st.execution_meta.current_node) == ("error", "n1")
    # the run is over: nothing of it is cancelled later
    await anyio.sleep(0.3)


@pytest.mark.anyio
async def test_generator_node_is_bounded_as_a_whole() -> None:
    async def gen(state: AgentState) -> Any:
        for i in range(100):
            await anyio.sleep(0.05)
            yield f"part {i}"

    app = _graph(gen)
    with anyio.fail_after(10):
        with pytest.raises(NodeTimeoutError):
            await app.ainvoke(_go(), {"thread_id": "t", "node_timeout": 0.3})


@pytest.mark.anyio
async def test_sync_node_runs_under_the_deadline_too() -> None:
    def quick(state: AgentState) -> str:
        return "sync"

    app = _graph(quick)
    out = await app.ainvoke(_go(), {"thread_id": "t", "node_timeout": 5})
    assert [m.text() for m in out["messages"]] == ["go", "sync"]


@pytest.mark.anyio
async def test_an_outer_cancellation_is_not_a_timeout() -> None:
    """A caller's own cancel scope firing while a node runs cancels the run (no
    NodeTimeoutError, no error checkpoint from the timeout)."""

    async def slow(state: AgentState) -> str:
        await anyio.sleep(30)
        return "never"

    app = _graph(slow)
    with anyio.move_on_after(0.2) as scope:
        await app.ainvoke(_go(), {"thread_id": "t", "node_timeout": 5})
    assert scope.cancelled_caught


def test_native_task_cancel_is_not_a_timeout() -> None:
    """asyncio: ``Task.cancel()`` from outside while a node runs under a (far) deadline
    raises ``CancelledError`` out of ``ainvoke``, and the task is not left cancelling."""

    async def slow(state: AgentState) -> str:
        await asyncio.sleep(30)
        return "never"

    async def main() -> None:
        app = _graph(slow)
        task = asyncio.ensure_future(app.ainvoke(_go(), {"thread_id": "t", "node_timeout": 5}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancellation_landing_with_the_deadline_stays_a_cancellation() -> None:
    """asyncio: a ``Task.cancel()`` that lands together with an expired deadline wins
    (``asyncio.timeout`` semantics): ``CancelledError``, and the other canceller's request
    is still counted on the task."""
    from tenxgraph.core._deadline import NodeDeadline

    async def main() -> None:
        d = NodeDeadline(5.0)
        d.begin()
        d.at = time.monotonic() - 1.0  # already expired: the timer fires at once

        async def body() -> None:
            me = asyncio.current_task()
            assert me is not None
            me.cancel()  # another canceller, in the same loop iteration as the deadline
            await asyncio.sleep(1)

        async def run() -> int:
            try:
                await d.call(body, native=True)
            except TimeoutError:
                return -1
            except asyncio.CancelledError:
                me = asyncio.current_task()
                assert me is not None
                return me.cancelling()
            return -2

        assert await asyncio.ensure_future(run()) == 1
        d.close()

    asyncio.run(main())


def test_deadline_moves_on_with_each_node() -> None:
    """asyncio: the run's one timer, armed for an earlier node, re-schedules itself to the
    current node's deadline instead of cancelling it early."""
    from tenxgraph.core._deadline import NodeDeadline

    async def main() -> None:
        d = NodeDeadline(0.2)
        d.begin()
        await d.call(asyncio.sleep, 0.12, native=True)  # the timer is set for t0 + 0.2
        d.begin()  # the next node: deadline t1 + 0.2
        t1 = time.monotonic()
        with pytest.raises(TimeoutError):
            await d.call(asyncio.sleep, 5, native=True)
        assert time.monotonic() - t1 >= 0.19
        d.close()

    asyncio.run(main())
