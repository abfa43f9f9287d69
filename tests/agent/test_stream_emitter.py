"""``StreamEmitter`` as 10xGraph's stream-emitter reference and emit-tool-progress how-to
describe it: a tool declaring ``emit`` sends progress chunks that reach ``astream`` while it is
still running, gets ``None`` under ``invoke``, never shows ``emit`` to the model, and a replayed
(ledger-answered) call emits nothing."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message, StreamEvent, ToolCallBlock
from tenxgraph.core.state.stream_emitter import StreamEmitter
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END, interrupt

from ._fake_llm_server import ScriptedLLMServer, text, tool_calls


def progress_chunks(chunks: list[Any]) -> list[dict[str, Any]]:
    return [
        c.data
        for c in chunks
        if c.event == StreamEvent.UPDATES and c.data and "tool_call_id" in c.data
    ]


def react(llm: ScriptedLLMServer, tools: list[Any], cp: Any = None) -> Any:
    g = StateGraph()
    g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url, tool_node="TOOL"))
    g.add_node("TOOL", ToolNode(tools))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_progress_reaches_the_stream_while_the_tool_runs(
    llm: ScriptedLLMServer, anyio_backend: str
) -> None:
    seen_by_consumer = threading.Event()
    got: list[Any] = []

    def fetch(city: str, emit: StreamEmitter | None = None) -> str:
        """Fetch the weather (sync: runs in a worker thread).

        Args:
            city: where.
        """
        got.append(emit)
        assert emit is not None
        emit.progress(f"Looking up {city}...", data={"step": 1})
        if anyio_backend == "asyncio":
            # Live delivery: the consumer has the chunk before the tool returns.
            assert seen_by_consumer.wait(10), "the progress chunk did not reach astream live"
        emit.error("primary source slow, using cache", data={"fallback": "cache"})
        emit.update({"status": "batch_progress", "processed": 1, "total": 1})
        return f"sunny in {city}"

    async def count(n: int, emit: StreamEmitter | None = None) -> str:
        """Count (async tool)."""
        assert emit is not None
        emit.message("counting", data={"n": n})
        return str(n)

    llm.add(tool_calls(("fetch", {"city": "Oslo"}), ("count", {"n": 3})), text("Done."))
    app = react(llm, [fetch, count])
    chunks: list[Any] = []
    async for c in app.astream({"messages": ["go"]}, {"thread_id": "emit"}):
        chunks.append(c)
        if c.event == StreamEvent.UPDATES and (c.data or {}).get("status") == "tool_progress":
            seen_by_consumer.set()
    data = progress_chunks(chunks)
    by_status = {d["status"]: d for d in data}
    assert set(by_status) == {"tool_progress", "tool_failed", "batch_progress", "tool_message"}
    p = by_status["tool_progress"]
    assert p["message"] == "Looking up Oslo..." and p["step"] == 1
    assert (p["tool_name"], p["node"], p["thread_id"]) == ("fetch", "TOOL", "emit")
    assert p["tool_call_id"] == got[0].tool_call_id and p["run_id"] == got[0].run_id
    assert by_status["tool_failed"]["fallback"] == "cache"
    assert (
        by_status["batch_progress"]["processed"] == 1
        and "message" not in by_status["batch_progress"]
    )
    assert by_status["tool_message"]["n"] == 3 and by_status["tool_message"]["tool_name"] == "count"
    # Progress precedes the tool's result message in the stream; nothing of it is stored.
    first_progress = next(i for i, c in enumerate(chunks) if c.data is not None and c.data in data)
    tool_msg = next(
        i
        for i, c in enumerate(chunks)
        if c.event == StreamEvent.MESSAGE and c.message is not None and c.message.role == "tool"
    )
    assert first_progress < tool_msg
    state = await app.aget_state({"thread_id": "emit"})
    assert [m.role for m in state.context] == ["user", "assistant", "tool", "tool", "assistant"]
    # The model never sees the emit parameter.
    tools = llm.bodies[0]["tools"]
    assert all("emit" not in t["function"]["parameters"]["properties"] for t in tools)


@pytest.mark.anyio
async def test_invoke_and_direct_calls_get_none(llm: ScriptedLLMServer) -> None:
    got: list[Any] = []

    def fetch(city: str, emit: StreamEmitter | None = None) -> str:
        """Fetch."""
        got.append(emit)
        if emit:
            emit.progress("never")
        return city

    llm.add(tool_calls(("fetch", {"city": "Rome"})), text("ok"))
    app = react(llm, [fetch])
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "inv"})
    msg = await ToolNode([fetch]).invoke("fetch", {"city": "Paris"})
    assert got == [None, None] and msg.text() == "Paris"


def test_sync_stream_gets_progress(llm: ScriptedLLMServer) -> None:
    def fetch(city: str, emit: StreamEmitter | None = None) -> str:
        """Fetch."""
        assert emit is not None
        emit.progress("working")
        return city

    llm.add(tool_calls(("fetch", {"city": "Rome"})), text("ok"))
    chunks = list(react(llm, [fetch]).stream({"messages": ["go"]}, {"thread_id": "sync"}))
    assert [d["status"] for d in progress_chunks(chunks)] == ["tool_progress"]


@pytest.mark.anyio
async def test_a_replayed_call_emits_nothing(tmp_path: Any) -> None:
    # Two tools in one step: ``charge`` runs (and emits), ``confirm`` pauses for a human. On
    # resume the step runs again: ``charge`` is answered from the ledger, so it neither runs
    # nor emits a second time.
    runs: list[str] = []

    def charge(amount: int, emit: StreamEmitter | None = None) -> str:
        """Charge."""
        runs.append("charge")
        if emit:
            emit.progress("charging")
        return f"charged {amount}"

    def confirm(note: str) -> str:
        """Ask a person."""
        return f"confirmed: {interrupt(note)}"

    def model(state: AgentState) -> Message:
        if state.context[-1].role == "tool":
            return Message.text_message("done", role="assistant")
        return Message(
            role="assistant",
            content=[
                ToolCallBlock(id="c-1", name="charge", args={"amount": 5}),
                ToolCallBlock(id="c-2", name="confirm", args={"note": "ok?"}),
            ],
        )

    g = StateGraph()
    g.add_node("MAIN", model)
    g.add_node("TOOL", ToolNode([charge, confirm]))
    g.set_entry_point("MAIN")
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    cp = SqliteCheckpointer(str(tmp_path / "r.db"))
    app = g.compile(checkpointer=cp)
    cfg = {"thread_id": "replay"}
    first = [c async for c in app.astream({"messages": ["pay"]}, dict(cfg))]
    assert [d["status"] for d in progress_chunks(first)] == ["tool_progress"]
    second = [c async for c in app.astream({"resume": "yes"}, dict(cfg))]
    assert progress_chunks(second) == []
    assert runs == ["charge"]
    state = await app.aget_state(cfg)
    assert [m.text() for m in state.context if m.role == "tool"] == [
        "charged 5",
        "confirmed: yes",
    ]
    await app.aclose()
