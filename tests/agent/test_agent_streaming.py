"""Streaming: a streamed run asks the model for SSE and passes its token deltas on; the thread
stores only the complete message."""

from __future__ import annotations

from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import StreamEvent
from tenxgraph.models import ModelError
from tenxgraph.utils import END

from ._fake_llm_server import ScriptedLLMServer, error, text, tool_calls

pytestmark = pytest.mark.anyio


def react(llm: ScriptedLLMServer, tools: list[Any]) -> Any:
    g = StateGraph()
    g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url, tool_node="TOOL"))
    g.add_node("TOOL", ToolNode(tools))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    return g.compile()


def weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


async def test_astream_passes_token_deltas(llm: ScriptedLLMServer) -> None:
    llm.add(text("The sky is clear today.", pieces=["The sky", " is clear", " today."]))
    app = react(llm, [weather])
    cfg = {"thread_id": "s1"}
    chunks = [c async for c in app.astream({"messages": ["sky?"]}, dict(cfg))]
    assert llm.bodies[0]["stream"] is True
    assert llm.bodies[0]["stream_options"] == {"include_usage": True}
    deltas = [c.message for c in chunks if c.event == StreamEvent.MESSAGE and c.message.delta]
    assert [d.text() for d in deltas] == ["The sky", " is clear", " today."]
    assert all(
        c.metadata == {"node": "MAIN", "step": 0}
        for c in chunks
        if c.event == "message" and c.message.delta
    )
    finals = [c.message for c in chunks if c.event == StreamEvent.MESSAGE and not c.message.delta]
    assert [m.text() for m in finals if m.role == "assistant"] == ["The sky is clear today."]
    state = await app.aget_state(cfg)
    assert [(m.role, m.text(), m.delta) for m in state.context] == [
        ("user", "sky?", False),
        ("assistant", "The sky is clear today.", False),
    ]
    assert state.context[-1].usages is not None and state.context[-1].usages.total_tokens == 15


async def test_streamed_tool_calls_are_joined_and_run(llm: ScriptedLLMServer) -> None:
    llm.add(
        tool_calls(("weather", {"city": "Oslo"}), ("weather", {"city": "Rome"})),
        text("Both sunny."),
    )
    app = react(llm, [weather])
    chunks = [c async for c in app.astream({"messages": ["both?"]}, {"thread_id": "s2"})]
    finals = [c.message for c in chunks if c.event == "message" and not c.message.delta]
    calls = next(m for m in finals if m.role == "assistant").tool_calls()
    assert [(c.name, c.args) for c in calls] == [
        ("weather", {"city": "Oslo"}),
        ("weather", {"city": "Rome"}),
    ]
    tool_texts = [m.text() for m in finals if m.role == "tool"]
    assert tool_texts == ["sunny in Oslo", "sunny in Rome"]
    assert finals[-1].text() == "Both sunny."
    assert all(b.get("stream") is True for b in llm.bodies)


async def test_invoke_does_not_stream(llm: ScriptedLLMServer) -> None:
    llm.add(text("plain"))
    out = await react(llm, [weather]).ainvoke({"messages": ["x"]}, {"thread_id": "s3"})
    assert "stream" not in llm.bodies[0]
    assert out["messages"][-1].text() == "plain"


def test_sync_stream_passes_deltas(llm: ScriptedLLMServer) -> None:
    llm.add(text("one two three"))
    app = react(llm, [weather])
    chunks = list(app.stream({"messages": ["x"]}, {"thread_id": "s4"}))
    assert [c.message.text() for c in chunks if c.event == "message" and c.message.delta] == [
        "one",
        " two",
        " three",
    ]
    app.close()


async def test_streamed_call_retries_before_first_byte(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core.graph.agent_internal.constants import RetryConfig

    llm.add(error(429), text("after retry"))
    g = StateGraph()
    g.add_node(
        "MAIN",
        Agent(model="gpt-4o", base_url=llm.base_url, retry_config=RetryConfig(initial_delay=0.01)),
    )
    g.set_entry_point("MAIN")
    g.add_edge("MAIN", END)
    chunks = [c async for c in g.compile().astream({"messages": ["x"]}, {"thread_id": "s5"})]
    assert len(llm.requests) == 2
    assert (
        "".join(c.message.text() for c in chunks if c.event == "message" and c.message.delta)
        == "after retry"
    )


async def test_stream_cut_short_is_a_model_error(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core.state import Message
    from tenxgraph.models import OpenAICompatModel

    llm.add(text("x", body=b'data: {"choices": [{"delta": {"content": "par"}}]}\n\n'))
    model = OpenAICompatModel("m", base_url=llm.base_url, max_retries=0)
    with pytest.raises(ModelError, match="ended before its last event"):
        async for _ in model.astream([Message.text_message("hi")], None):
            pass


async def test_model_astream_reasoning_and_usage(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core.state import Message
    from tenxgraph.models import OpenAICompatModel

    llm.add(text("42", reasoning="six times seven"))
    model = OpenAICompatModel("o4-mini", base_url=llm.base_url, max_retries=0)
    out = [m async for m in model.astream([Message.text_message("6*7?")], None)]
    deltas, final = out[:-1], out[-1]
    assert [d.reasoning for d in deltas if d.reasoning] == ["six times seven"]
    assert [d.text() for d in deltas if d.text()] == ["42"]
    assert len({d.message_id for d in deltas}) == 1 and final.message_id != deltas[0].message_id
    assert (final.text(), final.reasoning, final.delta) == ("42", "six times seven", False)
    assert final.metadata["finish_reason"] == "stop" and final.usages.total_tokens == 15
