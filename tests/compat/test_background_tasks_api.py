"""``BackgroundTaskManager`` as 10xGraph's background-tasks reference and how-to describe it:
tasks start, are tracked, time out, fail, are shed beyond ``max_pending_tasks``, drained or
cancelled; a node receives the graph's manager and ``app.aclose()`` shuts it down (memory,
SQLite, Postgres). Background tasks are asyncio tasks: the graph tests run under asyncio."""

from __future__ import annotations

import asyncio
import logging
import warnings

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
    sync_backend_fixture,
)

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END
from tenxgraph.utils.background_task_manager import BackgroundTaskManager, TaskMetadata
from tenxgraph.utils.metrics import snapshot


def count(name: str) -> int | float:
    return snapshot()["counters"].get(f"background_task_manager.{name}", 0)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_tasks_run_tracked_and_their_info_is_reported() -> None:
    mgr = BackgroundTaskManager()
    gate = asyncio.Event()
    done: list[str] = []

    async def job(tag: str) -> str:
        await gate.wait()
        done.append(tag)
        return tag

    before = (count("tasks_created"), count("tasks_completed"))
    task = mgr.create_task(job("a"), name="hook", timeout=5, context={"order": 7})
    assert isinstance(task, asyncio.Task)
    mgr.create_task(job("b"))
    assert mgr.get_task_count() == 2
    info = {i["name"]: i for i in mgr.get_task_info()}
    assert set(info) == {"hook", "background_task"}
    assert info["hook"]["timeout"] == 5 and info["hook"]["context"] == {"order": 7}
    assert info["hook"]["done"] is False and info["hook"]["age_seconds"] >= 0
    gate.set()
    assert sorted(await mgr.wait_for_all(timeout=5)) == ["a", "b"]
    assert sorted(done) == ["a", "b"] and mgr.get_task_count() == 0
    assert (count("tasks_created"), count("tasks_completed")) == (before[0] + 2, before[1] + 2)
    assert TaskMetadata("n", 1.0).timeout is None


@pytest.mark.anyio
async def test_timeouts_and_failures_are_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mgr = BackgroundTaskManager()
    timed_out, failed = count("tasks_timed_out"), count("tasks_failed")

    async def hang() -> None:
        await asyncio.sleep(30)

    async def boom() -> None:
        raise KeyError("nope")

    with caplog.at_level(logging.WARNING, logger="tenxgraph.utils.background_task_manager"):
        slow = mgr.create_task(hang(), name="slow", timeout=0.05)
        bad = mgr.create_task(boom(), name="bad", context={"user": "u1"})
        results = await mgr.wait_for_all(timeout=5, return_exceptions=True)
    assert slow is not None and bad is not None
    assert {type(r) for r in results} == {TimeoutError, KeyError}
    assert count("tasks_timed_out") == timed_out + 1 and count("tasks_failed") == failed + 1
    assert "'slow' timed out" in caplog.text and "'bad' failed" in caplog.text

    again = BackgroundTaskManager()
    again.create_task(boom())
    with pytest.raises(KeyError):
        await again.wait_for_all()


@pytest.mark.anyio
async def test_beyond_max_pending_tasks_the_newest_is_dropped() -> None:
    mgr = BackgroundTaskManager(max_pending_tasks=2)
    dropped = count("tasks_dropped")
    gate = asyncio.Event()
    ran: list[int] = []

    async def job(n: int) -> None:
        ran.append(n)
        await gate.wait()

    assert mgr.create_task(job(1)) is not None and mgr.create_task(job(2)) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a dropped coroutine is closed: no "never awaited"
        assert mgr.create_task(job(3)) is None
    assert count("tasks_dropped") == dropped + 1
    gate.set()
    await mgr.wait_for_all(timeout=5)
    assert sorted(ran) == [1, 2]
    assert mgr.create_task(job(4)) is not None  # room again
    await mgr.wait_for_all(timeout=5)
    unbounded = BackgroundTaskManager(max_pending_tasks=0)
    gate.clear()
    tasks = [unbounded.create_task(job(n)) for n in range(50)]
    assert all(t is not None for t in tasks)
    await unbounded.cancel_all()


@pytest.mark.anyio
async def test_cancel_all_and_shutdown_report_what_happened() -> None:
    mgr = BackgroundTaskManager(default_shutdown_timeout=5)
    cancelled = count("tasks_cancelled")

    async def forever() -> None:
        await asyncio.sleep(3600)

    t = mgr.create_task(forever())
    await mgr.cancel_all()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert t is not None and t.cancelled() and count("tasks_cancelled") == cancelled + 1

    for _ in range(3):
        mgr.create_task(forever())
    stats = await mgr.shutdown()
    assert stats["status"] == "completed"
    assert (stats["initial_tasks"], stats["completed_tasks"], stats["remaining_tasks"]) == (3, 3, 0)
    assert stats["duration_seconds"] < 5

    release = asyncio.Event()

    async def stubborn() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await release.wait()  # ignores the cancellation until released

    mgr.create_task(stubborn())
    await asyncio.sleep(0)
    stats = await mgr.shutdown(timeout=0.1)
    assert (stats["status"], stats["remaining_tasks"]) == ("timed_out", 1)
    release.set()
    await mgr.wait_for_all(timeout=5)


def test_bad_arguments_are_refused() -> None:
    mgr = BackgroundTaskManager()

    async def job() -> None:
        return None

    with pytest.raises(ValidationError, match="not send"):
        mgr.create_task(job)  # type: ignore[arg-type]
    coro = job()
    with pytest.raises(ValidationError, match="asyncio event loop"):
        mgr.create_task(coro)  # no loop here
    with pytest.raises(ValidationError):
        BackgroundTaskManager(max_pending_tasks=-1)
    with pytest.raises(ValidationError):
        BackgroundTaskManager(default_shutdown_timeout="30")  # type: ignore[arg-type]


def notifying_graph(sent: list[str], gate: asyncio.Event | None = None) -> StateGraph:
    async def notify(user: str) -> None:
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0.01)
        sent.append(user)

    async def main(
        state: AgentState, config: dict, task_manager: BackgroundTaskManager
    ) -> AgentState:
        state.context.append(Message.text_message("queued", role="assistant"))
        task_manager.create_task(notify(config["user_id"]), name="notify", timeout=10)
        return state

    g = StateGraph()
    g.add_node("MAIN", main)
    g.set_entry_point("MAIN")
    g.add_edge("MAIN", END)
    return g


@only("memory", "sqlite", "postgres")
@pytest.mark.anyio
async def test_a_node_gets_the_manager_and_the_run_does_not_wait(
    backend: Backend, anyio_backend: str
) -> None:
    sent: list[str] = []
    if anyio_backend == "trio":  # background tasks are asyncio tasks: a clear refusal
        app = notifying_graph(sent).compile(checkpointer=backend.new())
        with pytest.raises(Exception, match="asyncio event loop") as info:
            await app.ainvoke({"messages": ["report"]}, {"thread_id": "t", "user_id": "ana"})
        assert isinstance(info.value.__cause__ or info.value, ValidationError)
        return
    gate = asyncio.Event()
    app = notifying_graph(sent, gate).compile(checkpointer=backend.new(), shutdown_timeout=5)
    out = await app.ainvoke({"messages": ["report"]}, {"thread_id": "t", "user_id": "ana"})
    assert out["messages"][-1].text() == "queued" and sent == []  # returned before the task
    assert app.task_manager.get_task_count() == 1
    gate.set()
    await app.task_manager.wait_for_all(timeout=5)
    assert sent == ["ana"]
    state = await app.aget_state({"thread_id": "t", "user_id": "ana"})
    assert state is not None and state.context[-1].text() == "queued"
    # a task still running at aclose() is cancelled, and aclose says so
    gate.clear()
    await app.ainvoke({"messages": ["again"]}, {"thread_id": "t", "user_id": "ana"})
    closed = await app.aclose()
    assert closed["background_tasks"]["initial_tasks"] == 1
    assert closed["background_tasks"]["status"] == "completed"
    assert sent == ["ana"] and app.task_manager.get_task_count() == 0


@only("memory", "sqlite")
def test_sync_invoke_with_a_sync_node_starts_tasks_on_the_graph_loop(sync_backend: Backend) -> None:
    sent: list[str] = []

    async def notify(text: str) -> None:
        sent.append(text)

    def main(state, config, task_manager):  # noqa: ANN001, ANN202 - by name, no annotation
        assert task_manager.create_task(notify("from a worker thread")) is not None
        return "ok"

    g = StateGraph()
    g.add_node("MAIN", main)
    g.set_entry_point("MAIN")
    g.add_edge("MAIN", END)
    app = g.compile(checkpointer=sync_backend.new())
    assert app.invoke({"messages": ["x"]}, {"thread_id": "s"})["messages"][-1].text() == "ok"
    closed = app.close()
    assert closed["status"] == "closed" and sent == ["from a worker thread"]
