"""The publisher's model and tool events (10xGraph's publishers reference: ``LLM_CALL``,
``TOOL_EXECUTION``, ``STREAMING``) against the local chat-completions server: emitted where
the call happens, in order, without message contents, and not again for a ledger replay."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.runtime.publisher import BasePublisher
from tenxgraph.runtime.publisher.events import ContentType, EventModel
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END

from ._fake_llm_server import ScriptedLLMServer, error, text, tool_calls

pytestmark = pytest.mark.anyio


class Recorder(BasePublisher):
    def __init__(self) -> None:
        super().__init__({})
        self.events: list[EventModel] = []

    async def publish(self, event: EventModel) -> None:
        self.events.append(event)

    async def close(self) -> None:
        self._is_closed = True

    def sync_close(self) -> None:
        self._is_closed = True

    def trail(self, *kinds: str) -> list[tuple[str, str, str | None]]:
        return [
            (e.event.value, e.event_type.value, e.node_name)
            for e in self.events
            if e.event.value in kinds
        ]


def lookup(city: str) -> str:
    """Look a city up."""
    return f"{city} is a secret-free answer"


def broken(city: str) -> str:
    """Always fails."""
    raise ValueError("no data")


def react(llm: ScriptedLLMServer, pub: Recorder, **agent: Any) -> Any:
    g = StateGraph()
    g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url, tool_node="TOOL", **agent))
    g.add_node("TOOL", ToolNode([lookup, broken]))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=InMemoryCheckpointer(), publisher=pub)


async def test_model_and_tool_calls_are_published(llm: ScriptedLLMServer) -> None:
    llm.add(
        tool_calls(("lookup", {"city": "Oslo"}), ("broken", {"city": "Rome"})),
        text("All done here."),
    )
    pub = Recorder()
    app = react(llm, pub)
    await app.ainvoke({"messages": ["cities?"]}, {"thread_id": "ev"})
    trail = pub.trail("llm_call", "tool_execution", "streaming")
    assert trail[:2] == [("llm_call", "start", "MAIN"), ("llm_call", "result", "MAIN")]
    assert trail[-2:] == [("llm_call", "start", "MAIN"), ("llm_call", "result", "MAIN")]
    # The two tools run concurrently: each call's start comes before its result.
    tool_phases = [
        (e.data["tool_call_id"], e.event_type.value)
        for e in pub.events
        if e.event.value == "tool_execution"
    ]
    assert len(tool_phases) == 4
    for call_id in {c for c, _ in tool_phases}:
        assert [p for c, p in tool_phases if c == call_id] == ["start", "result"]
    assert all(n == "TOOL" for _, _, n in trail[2:-2])
    llm_events = [e for e in pub.events if e.event.value == "llm_call"]
    assert llm_events[0].data == {"model": "gpt-4o", "stream": False}
    first = llm_events[1]
    assert first.content_type is ContentType.TOOL_CALL and first.data["tool_calls"] == 2
    assert llm_events[3].content_type is ContentType.MESSAGE
    assert llm_events[3].data["prompt_tokens"] is not None
    tools = [
        e
        for e in pub.events
        if e.event.value == "tool_execution" and e.event_type.value == "result"
    ]
    assert sorted((e.data["tool_name"], e.data["is_error"]) for e in tools) == [
        ("broken", True),
        ("lookup", False),
    ]
    # sizes and names only: no message contents in any event
    assert "Oslo" not in str([e.data for e in pub.events])
    assert "All done" not in str([e.data for e in pub.events])


async def test_streamed_answers_publish_each_delta(llm: ScriptedLLMServer) -> None:
    llm.add(text("One two three.", pieces=["One", " two", " three."]))
    pub = Recorder()
    app = react(llm, pub)
    _ = [c async for c in app.astream({"messages": ["count"]}, {"thread_id": "st"})]
    trail = pub.trail("llm_call", "streaming")
    assert trail == [
        ("llm_call", "start", "MAIN"),
        ("streaming", "progress", "MAIN"),
        ("streaming", "progress", "MAIN"),
        ("streaming", "progress", "MAIN"),
        ("llm_call", "result", "MAIN"),
    ]
    deltas = [e for e in pub.events if e.event.value == "streaming"]
    assert [(e.data["index"], e.data["chars"]) for e in deltas] == [(0, 3), (1, 4), (2, 7)]
    result = [e for e in pub.events if e.event.value == "llm_call"][-1]
    assert result.data["chunks"] == 3 and result.data["stream"] is True


async def test_a_failed_model_request_is_published_as_an_error(llm: ScriptedLLMServer) -> None:
    llm.add(error(400, "bad request"))
    pub = Recorder()
    app = react(llm, pub)
    with pytest.raises(Exception):  # noqa: B017, PT011 - the ModelError of the run
        await app.ainvoke({"messages": ["x"]}, {"thread_id": "err"})
    trail = pub.trail("llm_call")
    assert trail == [("llm_call", "start", "MAIN"), ("llm_call", "error", "MAIN")]
    err = [e for e in pub.events if e.event.value == "llm_call"][-1]
    assert err.content_type is ContentType.ERROR and err.data["error_type"] == "ModelError"
