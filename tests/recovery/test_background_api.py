"""``asubmit`` / ``aget_run`` / ``ajoin`` / ``astop`` and the in-process recovery loop on the
embedded stores (issue 28, docs/how-to/background-runs.md)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import (
    ConfigError,
    ResourceNotFoundError,
    RunJoinTimeoutError,
    StorageError,
    ValidationError,
)
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _graph(cp: Any, *, delay_s: float = 0.0, fail: bool = False, **compile_kw: Any) -> Any:
    async def think(state: AgentState) -> Message:
        if delay_s:
            await asyncio.sleep(delay_s)
        if fail:
            raise ValueError("the model is down")
        return Message.text_message(f"thought about {state.context[-1].text()}", role="assistant")

    async def answer(state: AgentState) -> str:
        return f"answer to {state.context[-2].text()}"

    g = StateGraph()
    g.add_node("think", think)
    g.add_node("answer", answer)
    g.set_entry_point("think")
    g.add_edge("think", "answer")
    g.add_edge("answer", END)
    return g.compile(checkpointer=cp, **compile_kw)


def _msg(text: str) -> dict[str, Any]:
    return {"messages": [Message.text_message(text)]}


async def test_submit_is_durable_and_a_worker_runs_it(tmp_path: Path) -> None:
    db = tmp_path / "bg.sqlite"
    app = _graph(SqliteCheckpointer(db))
    run = await app.asubmit(_msg("hi"), {"thread_id": "t1"})
    assert run.status == "pending" and run.attempts == 0 and run.result is None
    await app.aclose()
    # another process (here: another checkpointer on the same file) sees it and runs it
    app2 = _graph(SqliteCheckpointer(db))
    assert (await app2.aget_run({"thread_id": "t1"}, run.run_id)).status == "pending"
    async with app2.recovery(concurrency=2, sweep_interval_s=0.05) as rec:
        done = await app2.ajoin({"thread_id": "t1"}, run.run_id, timeout=30)
    assert done.status == "completed" and done.attempts == 1 and done.done
    assert done.result is not None
    assert [m.text() for m in done.result["messages"]] == ["hi", "thought about hi", "answer to hi"]
    assert rec.stats["completed"] == 1 and rec.stats["recovered"] == 0
    state = await app2.aget_state({"thread_id": "t1"})
    assert [m.text() for m in state.context] == ["hi", "thought about hi", "answer to hi"]
    await app2.aclose()


async def test_runs_of_one_thread_go_in_submission_order() -> None:
    app = _graph(InMemoryCheckpointer(), delay_s=0.01)
    runs = [await app.asubmit(_msg(f"m{i}"), {"thread_id": "one"}) for i in range(4)]
    async with app.recovery(concurrency=4, sweep_interval_s=0.02):
        for r in runs:
            assert (await app.ajoin({"thread_id": "one"}, r.run_id, timeout=30)).status == (
                "completed"
            )
    state = await app.aget_state({"thread_id": "one"})
    assert [m.text() for m in state.context if m.role == "user"] == ["m0", "m1", "m2", "m3"]


async def test_submit_with_a_known_run_id_is_idempotent() -> None:
    app = _graph(InMemoryCheckpointer())
    first = await app.asubmit(_msg("once"), {"thread_id": "t", "run_id": "r-1"})
    again = await app.asubmit(_msg("once"), {"thread_id": "t", "run_id": "r-1"})
    assert again.run_id == first.run_id == "r-1" and again.created_at == first.created_at
    async with app.recovery(sweep_interval_s=0.02):
        done = await app.ajoin({"thread_id": "t"}, "r-1", timeout=30)
    assert [m.text() for m in done.result["messages"]][0] == "once"


async def test_interrupted_run_waits_and_error_run_records_its_failure() -> None:
    cp = InMemoryCheckpointer()
    paused = _graph(cp, interrupt_before=["answer"])
    p = await paused.asubmit(_msg("q"), {"thread_id": "hitl"})
    async with paused.recovery(sweep_interval_s=0.02) as rec:
        info = await paused.ajoin({"thread_id": "hitl"}, p.run_id, timeout=30)
        await asyncio.sleep(0.1)  # more sweeps: an interrupted run is not picked up again
    assert info.status == "interrupted" and info.result["interrupted"] is True
    assert rec.stats["started"] == 1
    # its resume is a new run (here a direct one)
    out = await paused.ainvoke(None, {"thread_id": "hitl"})
    assert out["messages"][-1].text() == "answer to q"

    failing = _graph(InMemoryCheckpointer(), fail=True)
    f = await failing.asubmit(_msg("x"), {"thread_id": "bad"})
    async with failing.recovery(sweep_interval_s=0.02):
        bad = await failing.ajoin({"thread_id": "bad"}, f.run_id, timeout=30)
    assert bad.status == "error" and bad.last_error.startswith("ValueError") and bad.result is None


async def test_stop_cancels_pending_and_running_runs() -> None:
    app = _graph(InMemoryCheckpointer(), delay_s=0.3)
    pending = await app.asubmit(_msg("never"), {"thread_id": "p"})
    out = await app.astop({"thread_id": "p", "run_id": pending.run_id})
    assert out == {"ok": True, "running": False, "run_status": "cancelled"}
    running = await app.asubmit(_msg("slow"), {"thread_id": "r"})
    async with app.recovery(sweep_interval_s=0.02):
        while (await app.aget_run({"thread_id": "r"}, running.run_id)).status == "pending":  # noqa: ASYNC110 - the store is the event
            await asyncio.sleep(0.01)
        assert (await app.astop({"thread_id": "r", "run_id": running.run_id}))["ok"]
        info = await app.ajoin({"thread_id": "r"}, running.run_id, timeout=30)
    assert info.status == "cancelled"
    assert (await app.aget_run({"thread_id": "p"}, pending.run_id)).status == "cancelled"
    assert await app.aget_state({"thread_id": "p"}) is None  # never ran


async def test_isolation_validation_and_timeouts() -> None:
    app = _graph(InMemoryCheckpointer())
    run = await app.asubmit(_msg("mine"), {"thread_id": "t", "user_id": "alice"})
    with pytest.raises(ResourceNotFoundError) as nf:
        await app.aget_run({"thread_id": "t", "user_id": "bob"}, run.run_id)
    assert nf.value.error_code == "STORAGE_NOT_FOUND_000"
    with pytest.raises(StorageError) as fb:
        await app.asubmit(_msg("theirs"), {"thread_id": "t", "user_id": "bob"})
    assert fb.value.error_code == "STORAGE_FORBIDDEN_001"
    with pytest.raises(ValidationError) as bad:
        await app.asubmit({"messages": [], "state": {"when": datetime.now}}, {"thread_id": "v"})
    assert bad.value.error_code == "VALIDATION_000"
    with pytest.raises(ConfigError):
        await app.asubmit(_msg("x"), {"thread-id": "typo"})
    with pytest.raises(ConfigError):
        await app.asubmit(_msg("x"), {"thread_id": ""})
    with pytest.raises(RunJoinTimeoutError) as late:
        await app.ajoin({"thread_id": "t", "user_id": "alice"}, run.run_id, timeout=0.05)
    assert late.value.context["status"] == "pending" and isinstance(late.value, TimeoutError)
    store: Any = app.checkpointer.store
    assert await store.run_list("", status="pending") != []
    for bad_opts in ({"concurrency": 0}, {"max_crashes": 0}, {"sweep_interval_s": 0}):
        with pytest.raises(ConfigError):
            app.recovery(**bad_opts)


def test_sync_twins(tmp_path: Path) -> None:
    app = _graph(SqliteCheckpointer(tmp_path / "sync.sqlite"))
    run = app.submit(_msg("sync"), {"thread_id": "s"})
    assert app.get_run({"thread_id": "s"}, run.run_id).status == "pending"

    async def work() -> None:
        async with app.recovery(sweep_interval_s=0.02):
            await app.ajoin({"thread_id": "s"}, run.run_id, timeout=30)

    asyncio.run(work())
    assert app.join({"thread_id": "s"}, run.run_id, timeout=1).status == "completed"
    app.close()
