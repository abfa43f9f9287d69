"""Pauses for a human, on every store: ``pending_interrupt()`` returns an ``Interrupt`` object
(``.value``, ``.node``, ``.tool_call_id`` ...), a pause is streamed as an ``updates`` chunk
carrying the interrupt, sync ``stream()`` survives a node that calls ``interrupt()``, a thread
paused by ``interrupt_before`` resumes when the next message is sent (10xGraph's stream guide),
and new input on a thread waiting for an ``interrupt()`` answer raises an error that is also a
``ValueError``."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
    sync_backend_fixture,
)

from tenxgraph.core.exceptions import InterruptPendingError
from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message, StreamEvent, ToolCallBlock
from tenxgraph.utils import END, GraphInterrupt, Interrupt, interrupt, pending_interrupt


def approval_app(cp: Any) -> Any:
    def draft(state: AgentState) -> str:
        return f"draft for {state.context[-1].text()}"

    def review(state: AgentState) -> str:
        verdict = interrupt({"draft": state.context[-1].text()}, message="Approve?")
        return f"review: {verdict}"

    g = StateGraph()
    g.add_node("draft", draft)
    g.add_node("review", review)
    g.set_entry_point("draft")
    g.add_edge("draft", "review")
    g.add_edge("review", END)
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_pending_interrupt_is_an_object_and_the_pause_is_streamed(backend: Backend) -> None:
    app = approval_app(backend.new())
    cfg = {"thread_id": "obj"}
    chunks = [c async for c in app.astream({"messages": [Message.text_message("x")]}, dict(cfg))]
    pause = [c for c in chunks if c.event == StreamEvent.UPDATES and c.data.get("interrupt_type")]
    assert len(pause) == 1
    assert pause[0].data["node"] == "review" and pause[0].data["status"] == "interrupted"
    assert pause[0].data["interrupts"][0]["value"] == {"draft": "draft for x"}
    assert chunks[-1].event == StreamEvent.STATE and chunks[-1].data == {"status": "interrupted"}

    # Another instance reads the same pending question from the store.
    other = approval_app(backend.peer(app.checkpointer))
    p = pending_interrupt(await other.aget_state(dict(cfg)))
    assert isinstance(p, Interrupt)
    assert (p.id, p.node, p.value, p.message, p.tool_call_id) == (
        "review:1:1",
        "review",
        {"draft": "draft for x"},
        "Approve?",
        None,
    )
    assert p.to_dict()["value"] == p.value and p["node"] == "review"
    res = await other.ainvoke({"resume": "yes"}, dict(cfg))
    assert [m.text() for m in res["messages"]] == ["review: yes"]
    assert pending_interrupt(await app.aget_state(dict(cfg))) is None


@pytest.mark.anyio
async def test_interrupt_inside_a_tool_names_the_tool_call(backend: Backend) -> None:
    def confirm(amount: int, tool_call_id: str) -> str:
        """Ask before paying."""
        ok = interrupt({"amount": amount})
        return f"paid {amount}: {ok}"

    def model(state: AgentState) -> Message:
        if state.context[-1].role == "tool":
            return Message.text_message("done", role="assistant")
        return Message(
            role="assistant",
            content=[ToolCallBlock(id="call-7", name="confirm", args={"amount": 5})],
        )

    g = StateGraph()
    g.add_node("model", model)
    g.add_node("tools", ToolNode([confirm]))
    g.set_entry_point("model")
    g.add_conditional_edges(
        "model",
        lambda s: "tools" if s.context[-1].tool_calls() else END,
        {"tools": "tools", END: END},
    )
    g.add_edge("tools", "model")
    app = g.compile(checkpointer=backend.new())
    cfg = {"thread_id": "tool-int"}
    res = await app.ainvoke({"messages": ["pay"]}, dict(cfg))
    p = pending_interrupt(res)
    assert p is not None and (p.node, p.tool_call_id, p.value) == ("tools", "call-7", {"amount": 5})
    res = await app.ainvoke({"resume": "ok"}, dict(cfg))
    assert [m.text() for m in res["messages"]] == ["paid 5: ok", "done"]


def test_sync_stream_with_an_interrupting_node(sync_backend: Backend) -> None:
    # Used to fail with "ContextVar token created in a different Context".
    app = approval_app(sync_backend.new())
    cfg = {"thread_id": "sync-int"}
    first = list(app.stream({"messages": [Message.text_message("y")]}, dict(cfg)))
    assert first[-1].data == {"status": "interrupted"}
    assert pending_interrupt(app.get_state(dict(cfg))).value == {"draft": "draft for y"}
    second = list(app.stream({"resume": "fine"}, dict(cfg)))
    assert [c.message.text() for c in second if c.event == "message"] == ["review: fine"]
    assert app.get_state(dict(cfg)).execution_meta.status == "completed"


@pytest.mark.anyio
async def test_interrupt_before_resumes_when_the_next_message_is_sent(backend: Backend) -> None:
    ran: list[str] = []

    def step(name: str) -> Any:
        def node(state: AgentState) -> str:
            ran.append(name)
            return f"{name} saw {state.context[-1].text()}"

        return node

    g = StateGraph()
    for name in ("plan", "review_step", "finish"):
        g.add_node(name, step(name))
    g.set_entry_point("plan")
    g.add_edge("plan", "review_step")
    g.add_edge("review_step", "finish")
    g.add_edge("finish", END)
    app = g.compile(checkpointer=backend.new(), interrupt_before=["review_step"])
    cfg = {"thread_id": "workflow-1"}
    out1 = [c async for c in app.astream({"messages": [Message.text_message("Start")]}, dict(cfg))]
    pause = [
        c.data for c in out1 if c.event == StreamEvent.UPDATES and c.data.get("interrupt_type")
    ]
    assert pause == [
        {
            "node": "review_step",
            "status": "interrupted_before",
            "interrupt_type": "before",
            "interrupts": [],
        }
    ]
    out2 = [
        c async for c in app.astream({"messages": [Message.text_message("Approved")]}, dict(cfg))
    ]
    msgs = [c.message.text() for c in out2 if c.event == StreamEvent.MESSAGE]
    assert msgs == ["Approved", "review_step saw Approved", "finish saw review_step saw Approved"]
    assert ran == ["plan", "review_step", "finish"]
    stored = await app.aget_state(dict(cfg))
    assert stored.execution_meta.status == "completed"
    assert [m.text() for m in stored.context][:3] == ["Start", "plan saw Start", "Approved"]


@pytest.mark.anyio
async def test_new_input_while_an_interrupt_waits_is_refused_as_a_value_error(
    backend: Backend,
) -> None:
    app = approval_app(backend.new())
    cfg = {"thread_id": "pending"}
    await app.ainvoke({"messages": ["z"]}, dict(cfg))
    before = len(await app.aget_state_history(dict(cfg)))
    with pytest.raises(ValueError) as info:
        await app.ainvoke({"messages": ["ignored?"]}, dict(cfg))
    assert isinstance(info.value, InterruptPendingError) and info.value.error_code == "GRAPH_008"
    assert len(await app.aget_state_history(dict(cfg))) == before


@pytest.mark.anyio
async def test_graph_interrupt_passes_through_except_exception(backend: Backend) -> None:
    caught: list[str] = []

    def careful(state: AgentState) -> str:
        try:
            return str(interrupt("question"))
        except Exception:  # noqa: BLE001 - the pause must not be swallowed here
            caught.append("swallowed")
            return "swallowed"

    g = StateGraph()
    g.add_node("careful", careful)
    g.set_entry_point("careful")
    g.add_edge("careful", END)
    app = g.compile(checkpointer=backend.new())
    res = await app.ainvoke({"messages": ["q"]}, {"thread_id": "gi"})
    assert res["interrupted"] is True and caught == []
    assert issubclass(GraphInterrupt, BaseException) and not issubclass(GraphInterrupt, Exception)
