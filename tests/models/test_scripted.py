"""ScriptedModel, the assistant-message helpers, and Agent as a bare node (no graph runtime)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tenxgraph.core._context import _RUN, RunContext
from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.graph.agent import Agent
from tenxgraph.core.graph.tool_node import ToolNode
from tenxgraph.core.state import AgentState, Message, TextBlock, ToolCallBlock
from tenxgraph.models import (
    ChatModel,
    ModelError,
    OpenAICompatModel,
    ScriptedModel,
    assistant_message,
    normalize_assistant,
)
from tenxgraph.records import ThreadKey
from tenxgraph.utils.decorators import tool

pytestmark = pytest.mark.anyio

TRAJECTORIES = (
    Path(__file__).resolve().parents[2] / "tenxgraph" / "data" / "tau2_toolorchestra.jsonl"
)


@pytest.fixture
def recorded_conversation() -> dict:
    """The first recorded conversation bundled with the package (tau2-bench, with parallel
    tool calls)."""
    if not TRAJECTORIES.exists():
        pytest.skip("bundled trajectories not present")
    with TRAJECTORIES.open(encoding="utf-8") as fh:
        return json.loads(fh.readline())


async def test_answers_in_order_then_exhausted() -> None:
    model = ScriptedModel(
        [
            {"content": "", "tool_calls": [{"id": "c1", "name": "f", "arguments": {"x": 1}}]},
            "plain text",
            Message.text_message("as message", role="assistant", message_id="fixed"),
        ]
    )
    assert isinstance(model, ChatModel)
    first = await model.agenerate(
        [Message.text_message("hi")], [{"type": "function"}], temperature=0
    )
    assert first.role == "assistant"
    assert first.tool_calls() == [ToolCallBlock(id="c1", name="f", args={"x": 1})]
    assert first.tools_calls == [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}
    ]
    assert first.content == [ToolCallBlock(id="c1", name="f", args={"x": 1})]  # no empty text
    second = await model.agenerate([], None)
    assert second.text() == "plain text" and second.tools_calls is None
    third = await model.agenerate([], None)
    assert third.message_id == "fixed"
    assert model.remaining == 0
    with pytest.raises(ModelError) as info:
        await model.agenerate([], None)
    assert info.value.error_code == "MODEL_001"
    assert "has no answer left: it was given 3" in str(info.value)
    assert [len(c["messages"]) for c in model.calls] == [1, 0, 0, 0]
    assert model.calls[0]["kwargs"] == {"temperature": 0}


async def test_fresh_ids_per_call() -> None:
    model = ScriptedModel(["a", "a"])
    a = await model.agenerate([], None)
    b = await model.agenerate([], None)
    assert a.message_id != b.message_id


async def test_from_fn_sync_and_async() -> None:
    def decide(messages: list[Message], tools: list[dict] | None) -> dict:
        if messages and messages[-1].role == "tool":
            return {"content": "done"}
        return {"content": "", "tool_calls": [{"name": "f", "arguments": "{}"}]}

    model = ScriptedModel.from_fn(decide)
    msg = await model.agenerate([Message.text_message("go")], None)
    (call,) = msg.tool_calls()
    assert call.id.startswith("call_") and call.args == {}
    msg2 = await model.agenerate([Message.tool_message("r", tool_call_id=call.id)], None)
    assert msg2.text() == "done"

    async def answer(messages: list[Message], tools: list[dict] | None) -> str:
        return "async"

    assert (await ScriptedModel.from_fn(answer).agenerate([], None)).text() == "async"


def test_bad_answers_refused() -> None:
    with pytest.raises(TypeError):
        ScriptedModel([42])  # type: ignore[list-item]


async def test_trajectory_messages_usable_as_answers(recorded_conversation: dict) -> None:
    answers = [m for m in recorded_conversation["messages"] if m["role"] == "assistant"]
    model = ScriptedModel(answers)
    for recorded in answers:
        msg = await model.agenerate([], None)
        assert msg.text() == recorded["content"]
        assert [(c.id, c.name, c.args) for c in msg.tool_calls()] == [
            (c["id"], c["name"], c["arguments"]) for c in recorded.get("tool_calls") or []
        ]


def test_normalize_assistant() -> None:
    only_blocks = Message(
        role="assistant", content=[TextBlock(text="t"), ToolCallBlock(id="", name="f", args={})]
    )
    fixed = normalize_assistant(only_blocks)
    (call,) = fixed.tool_calls()
    assert call.id.startswith("call_")
    assert fixed.tools_calls == [
        {"id": call.id, "type": "function", "function": {"name": "f", "arguments": "{}"}}
    ]
    assert fixed.text() == "t" and fixed.message_id == only_blocks.message_id
    ok = assistant_message("x", [{"id": "c", "name": "f", "arguments": {}}])
    assert normalize_assistant(ok) is ok
    only_raw = Message(
        role="assistant",
        tools_calls=[
            {"id": "r", "type": "function", "function": {"name": "g", "arguments": '{"a":1}'}}
        ],
    )
    fixed2 = normalize_assistant(only_raw)
    assert [b for b in fixed2.content if isinstance(b, ToolCallBlock)] == [
        ToolCallBlock(id="r", name="g", args={"a": 1})
    ]


# -- Agent as a bare node ----------------------------------------------------------------------------------
@tool(tags={"safe"})
def search(query: str) -> str:
    """Search the documents."""
    return query


@tool(tags={"dangerous"})
def delete(doc_id: str) -> str:
    """Delete a document."""
    return doc_id


async def test_agent_sends_prompt_context_and_tools() -> None:
    model = ScriptedModel(
        [{"content": "", "tool_calls": [{"name": "search", "arguments": {"query": "x"}}]}]
    )
    tn = ToolNode([search, delete])
    agent = Agent(
        model=model,
        system_prompt=[{"role": "system", "content": "Be helpful."}],
        tool_node=tn,
        temperature=0.1,
    )
    state = AgentState(context=[Message.text_message("find x")], context_summary="earlier: y")
    msg = await agent(state=state, config={"thread_id": "t"})
    assert msg.role == "assistant" and msg.tools_calls and msg.tool_calls()[0].name == "search"
    sent = model.calls[0]
    assert [(m.role, m.text()) for m in sent["messages"]] == [
        ("system", "Be helpful."),
        ("system", "Summary of the earlier conversation:\nearlier: y"),
        ("user", "find x"),
    ]
    assert sent["tools"] == tn.tool_schemas()
    assert sent["kwargs"] == {"temperature": 0.1}
    assert Agent._tenxgraph_node is True


async def test_agent_tools_tags_and_tools_list() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model=model, system_prompt=[], tools=[search, delete], tools_tags={"safe"})
    assert isinstance(agent.tool_node, ToolNode)
    await agent(state=AgentState(context=[Message.text_message("q")]), config={})
    assert [t["function"]["name"] for t in model.calls[0]["tools"]] == ["search"]


async def test_agent_without_tools_sends_none() -> None:
    model = ScriptedModel(["ok"])
    out = await Agent(model=model)(state=AgentState(context=[Message.text_message("q")]), config={})
    assert out.text() == "ok" and model.calls[0]["tools"] is None


async def test_agent_finds_tool_node_by_name() -> None:
    tn = ToolNode([search])
    model = ScriptedModel(["ok"])
    agent = Agent(model=model, tool_node="TOOL")

    class NodeWrapper:  # the runtime may store wrappers exposing .func
        func = tn

    for registered in (tn, NodeWrapper()):
        model._responses.append("ok")
        ctx = RunContext(
            checkpointer=None, config={}, key=ThreadKey("t", "u"), nodes={"TOOL": registered}
        )  # type: ignore[arg-type]
        token = _RUN.set(ctx)
        try:
            await agent(state=AgentState(context=[Message.text_message("q")]), config={})
        finally:
            _RUN.reset(token)
        assert [t["function"]["name"] for t in model.calls[-1]["tools"]] == ["search"]
    with pytest.raises(GraphError) as info:
        await agent(state=AgentState(), config={})
    assert info.value.error_code == "GRAPH_004" and info.value.context == {"node": "TOOL"}


def test_agent_model_name_builds_openai_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    agent = Agent(
        model="openai/gpt-4o",
        base_url="http://127.0.0.1:9/v1",
        api_key="k",
        retry_config=False,
        output_type="json",
        reasoning_config={"effort": "low"},
        max_tokens=10,
    )
    assert isinstance(agent.model, OpenAICompatModel)
    assert agent.model.model == "gpt-4o" and agent.model.base_url == "http://127.0.0.1:9/v1"
    assert agent.model.max_retries == 0
    assert agent.model.params == {
        "max_tokens": 10,
        "response_format": {"type": "json_object"},
        "reasoning_effort": "low",
    }


def test_agent_unsupported_options() -> None:
    with pytest.raises(GraphError) as info:
        Agent(model=ScriptedModel([]), api_style="responses")
    assert info.value.error_code == "GRAPH_010"
    with pytest.raises(TypeError):
        Agent(model=object())  # type: ignore[arg-type]


async def test_agent_fallback_models() -> None:
    broken = ScriptedModel([])  # raises ModelError at once
    backup = ScriptedModel(["from backup"])
    agent = Agent(model=broken, fallback_models=[backup])
    msg = await agent(state=AgentState(context=[Message.text_message("q")]), config={})
    assert msg.text() == "from backup"
