"""Idempotent turns on every store: an input whose messages (by ``message_id``) a finished run of
the thread already consumed gets that run's result, flagged ``already_processed``, without
running the graph again; an unfinished run is finished first (docs/idempotent-turns.md)."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.graph.stream import StreamEvent
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio


class Crash(BaseException):
    """A process dying inside a node (not an ``Exception``: no error checkpoint)."""


def user(text: str, message_id: str) -> Message:
    return Message.text_message(text, message_id=message_id)


def chain(
    cp: Any, calls: list[str], crash: dict[str, int] | None = None, pause_after: str | None = None
) -> Any:
    crash = crash if crash is not None else {}

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            calls.append(name)
            if crash.get(name, 0) > 0:
                crash[name] -= 1
                raise Crash(name)
            last = next(m.text() for m in reversed(state.context) if m.role == "user")
            return Message.text_message(f"{name}<-{last}", role="assistant")

        return node

    g = StateGraph()
    for n in ("one", "two"):
        g.add_node(n, make(n))
    g.set_entry_point("one")
    g.add_edge("one", "two")
    g.add_edge("two", END)
    return g.compile(checkpointer=cp, interrupt_after=[pause_after] if pause_after else None)


def texts(msgs: Any) -> list[str]:
    return [m.text() for m in msgs]


async def test_resent_message_of_a_finished_run_returns_its_result(backend: Backend) -> None:
    calls: list[str] = []
    app = chain(backend.new(), calls)
    cfg = {"thread_id": "t-idem"}
    first = await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    assert "already_processed" not in first
    c = dict(cfg)
    again = await app.ainvoke({"messages": [user("hi", "m-1")]}, c)
    assert again["already_processed"] is True
    assert texts(again["messages"]) == texts(first["messages"]) == ["hi", "one<-hi", "two<-hi"]
    assert [m.message_id for m in again["messages"]] == [m.message_id for m in first["messages"]]
    assert calls == ["one", "two"]
    assert c["_checkpoint_version"] == 2  # nothing written
    assert [s.version for s in await app.aget_state_history(dict(cfg))] == [2, 1]
    # A new message is a new turn.
    await app.ainvoke({"messages": [user("next", "m-2")]}, dict(cfg))
    assert calls == ["one", "two"] * 2
    # An older turn re-sent later still gets its own answer (up to the next user message).
    old = await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    assert old["already_processed"] is True
    assert texts(old["messages"]) == ["hi", "one<-hi", "two<-hi"]
    assert calls == ["one", "two"] * 2
    st = await app.aget_state(dict(cfg))
    assert texts(st.context) == ["hi", "one<-hi", "two<-hi", "next", "one<-next", "two<-next"]


async def test_partial_granularity_and_stream_say_already_processed(backend: Backend) -> None:
    calls: list[str] = []
    app = chain(backend.new(), calls)
    cfg = {"thread_id": "t-idem-stream"}
    await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    out = await app.ainvoke(
        {"messages": [user("hi", "m-1")]}, dict(cfg), response_granularity="partial"
    )
    assert out["already_processed"] is True
    assert texts(out["context"]) == ["hi", "one<-hi", "two<-hi"]
    chunks = [ch async for ch in app.astream({"messages": [user("hi", "m-1")]}, dict(cfg))]
    # The earlier answer's messages, a state chunk saying so, then the usual final state chunk.
    assert [ch.event for ch in chunks] == [StreamEvent.MESSAGE] * 2 + [StreamEvent.STATE] * 2
    assert texts(ch.message for ch in chunks[:2]) == ["one<-hi", "two<-hi"]
    assert chunks[2].data == {"status": "already_processed", "already_processed": True}
    assert chunks[3].data == {"status": "completed"}
    assert calls == ["one", "two"]


async def test_resent_message_of_a_cut_off_run_finishes_it_once(backend: Backend) -> None:
    calls: list[str] = []
    app = chain(backend.new(), calls, crash={"two": 1})
    cfg = {"thread_id": "t-idem-crash"}
    with pytest.raises(Crash):
        await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    out = await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    assert out["already_processed"] is True
    assert texts(out["messages"]) == ["hi", "one<-hi", "two<-hi"]
    # The cut-off node was replayed once; the graph did not run again for the same message.
    assert calls == ["one", "two", "two"]
    st = await app.aget_state(dict(cfg))
    assert texts(st.context) == ["hi", "one<-hi", "two<-hi"]
    assert str(st.execution_meta.status) == "completed"


async def test_resent_message_of_a_paused_run_returns_the_pause(backend: Backend) -> None:
    calls: list[str] = []
    app = chain(backend.new(), calls, pause_after="one")
    cfg = {"thread_id": "t-idem-pause"}
    first = await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    assert first["interrupted"] is True
    again = await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    assert again["already_processed"] is True and again["interrupted"] is True
    assert texts(again["messages"]) == ["hi", "one<-hi"]
    assert calls == ["one"]


async def test_new_and_old_messages_together_run_the_new_turn(backend: Backend) -> None:
    calls: list[str] = []
    app = chain(backend.new(), calls)
    cfg = {"thread_id": "t-idem-mixed"}
    await app.ainvoke({"messages": [user("hi", "m-1")]}, dict(cfg))
    out = await app.ainvoke({"messages": [user("hi", "m-1"), user("more", "m-2")]}, dict(cfg))
    assert "already_processed" not in out
    assert calls == ["one", "two"] * 2
