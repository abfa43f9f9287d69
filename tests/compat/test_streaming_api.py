"""Streaming as 10xGraph's docs describe it, on every store: ``StreamChunk`` is a Pydantic
model with ``metadata`` and ``model_dump()``, ``event`` compares equal to ``StreamEvent``
members, ``response_granularity`` decides whether a ``state`` chunk follows every node, an
``error`` chunk carries ``reason``, and ``stop()`` ends a generator node between two of its
items (the stop-stream tutorial), keeping what it yielded."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
    sync_backend_fixture,
)
from pydantic import BaseModel

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent
from tenxgraph.utils import END, ResponseGranularity


def two_nodes(cp: Any) -> Any:
    g = StateGraph()
    g.add_node("A", lambda state: "from A")
    g.add_node("B", lambda state: "from B")
    g.set_entry_point("A")
    g.add_edge("A", "B")
    g.add_edge("B", END)
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_chunks_are_pydantic_models_with_the_documented_fields(backend: Backend) -> None:
    app = two_nodes(backend.new())
    cfg = {"thread_id": "fields"}
    chunks = [c async for c in app.astream({"messages": [Message.text_message("hi")]}, cfg)]
    assert all(isinstance(c, StreamChunk) and isinstance(c, BaseModel) for c in chunks)
    for c in chunks:
        dumped = c.model_dump()
        assert set(dumped) == {
            "event",
            "message",
            "state",
            "data",
            "thread_id",
            "run_id",
            "metadata",
            "timestamp",
        }
        assert isinstance(c.event, str) and dumped["event"] == c.event
        assert c.thread_id == "fields" and c.run_id == cfg["run_id"]
    events = [c.event for c in chunks]
    assert events == ["message", "message", "updates", "message", "updates", "state"]
    assert events[0] == StreamEvent.MESSAGE and events[-1] == StreamEvent.STATE
    by_node = [(c.message.text(), c.metadata) for c in chunks if c.event == StreamEvent.MESSAGE]
    assert by_node == [
        ("hi", None),
        ("from A", {"node": "A", "step": 0}),
        ("from B", {"node": "B", "step": 1}),
    ]
    assert [c.data["node"] for c in chunks if c.event == StreamEvent.UPDATES] == ["A", "B"]
    final = chunks[-1]
    assert final.data == {"status": "completed"} and [m.text() for m in final.state.context] == [
        "hi",
        "from A",
        "from B",
    ]
    # A state chunk dumps to plain data too (the NDJSON lines of 10xGraph's server).
    assert final.model_dump()["state"]["execution_meta"]["status"] == "completed"
    assert final.model_dump_json().startswith('{"event":"state"')


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("granularity", "state_chunks"),
    [(ResponseGranularity.LOW, 1), (ResponseGranularity.PARTIAL, 3), (ResponseGranularity.FULL, 3)],
)
async def test_granularity_adds_a_state_chunk_after_each_node(
    backend: Backend, granularity: ResponseGranularity, state_chunks: int
) -> None:
    app = two_nodes(backend.new())
    chunks = [
        c
        async for c in app.astream(
            {"messages": [Message.text_message("hi")]},
            {"thread_id": "gran"},
            response_granularity=granularity,
        )
    ]
    states = [c for c in chunks if c.event == StreamEvent.STATE]
    assert len(states) == state_chunks
    steps = [c.state.execution_meta.step for c in states]
    assert steps == sorted(steps) and steps[-1] == 2
    if state_chunks > 1:
        assert [c.metadata["node"] for c in states[:-1]] == ["A", "B"]


@pytest.mark.anyio
async def test_error_chunk_carries_reason_then_the_error_is_raised(backend: Backend) -> None:
    def boom(state: AgentState) -> str:
        raise RuntimeError("disk on fire")

    g = StateGraph()
    g.add_node("boom", boom)
    g.set_entry_point("boom")
    g.add_edge("boom", END)
    app = g.compile(checkpointer=backend.new())
    seen: list[StreamChunk] = []
    with pytest.raises(RuntimeError):
        async for c in app.astream({"messages": ["x"]}, {"thread_id": "err"}):
            seen.append(c)
    assert seen[-1].event == StreamEvent.ERROR
    assert (
        seen[-1].data["reason"] == "disk on fire" and seen[-1].data["error_code"] == "RuntimeError"
    )


def slow_generator_app(cp: Any, items: int, pause_s: float) -> Any:
    async def main_agent(state: AgentState, config: dict | None = None):
        for i in range(items):
            await anyio.sleep(pause_s)
            yield Message.text_message(f"Chunk {i + 1} from MAIN", role="assistant")

    g = StateGraph()
    g.add_node("MAIN", main_agent)
    g.add_conditional_edges("MAIN", lambda state: END, {END: END})
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_stop_ends_a_generator_node_between_items_and_keeps_what_it_yielded(
    backend: Backend,
) -> None:
    app = slow_generator_app(backend.new(), items=50, pause_s=0.05)
    cfg = {"thread_id": "stop-gen"}
    got: list[StreamChunk] = []
    async for c in app.astream({"messages": [Message.text_message("Start")]}, dict(cfg)):
        got.append(c)
        if c.event == StreamEvent.MESSAGE and c.message.text() == "Chunk 2 from MAIN":
            await app.astop(dict(cfg))
    texts = [c.message.text() for c in got if c.event == StreamEvent.MESSAGE]
    assert texts == ["Start", "Chunk 1 from MAIN", "Chunk 2 from MAIN"]
    assert any(c.event == StreamEvent.UPDATES and c.data.get("status") == "stopped" for c in got)
    stored = await app.aget_state(dict(cfg))
    assert stored.execution_meta.status == "stopped"
    assert [m.text() for m in stored.context] == texts
    # Resuming a thread whose stopped node was its last does nothing and writes nothing.
    history = len(await app.aget_state_history(dict(cfg)))
    res = await app.ainvoke(None, dict(cfg))
    assert res["messages"] == [] and len(await app.aget_state_history(dict(cfg))) == history


def test_sync_stream_stopped_from_another_thread(sync_backend: Backend) -> None:
    # The stop-stream tutorial's shape: a reader thread iterates app.stream(), the caller
    # stops it with app.stop(config).
    app = slow_generator_app(sync_backend.new(), items=50, pause_s=0.05)
    cfg = {"thread_id": "stop-sync", "recursion_limit": 10}
    got: list[str] = []
    first = threading.Event()

    def reader() -> None:
        for chunk in app.stream({"messages": [Message.text_message("Start")]}, config=dict(cfg)):
            if chunk.event == StreamEvent.MESSAGE:
                got.append(chunk.message.text())
                if len(got) == 2:
                    first.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert first.wait(10)
    status = app.stop(dict(cfg))
    assert status["ok"] is True and status["running"] is True
    t0 = time.monotonic()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 5
    assert 2 <= len(got) < 51
    stored = app.get_state(dict(cfg))
    assert stored.execution_meta.status == "stopped"
    assert [m.text() for m in stored.context] == got
