"""Agent options checked against the scripted OpenAI-compatible server: what each option makes
the Agent send, and what it makes of the answer."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from tenxgraph.core.exceptions import UnsupportedArgumentError, ValidationError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.graph.agent_internal.constants import RetryConfig
from tenxgraph.core.llm import get_default_llm_timeout, set_default_llm_timeout
from tenxgraph.core.state import AgentState, Message
from tenxgraph.models import ModelError, StructuredOutputError
from tenxgraph.utils import END, tool

from ._fake_llm_server import ScriptedLLMServer, error, malformed, text, tool_calls

pytestmark = pytest.mark.anyio


class Profile(AgentState):
    user_name: str = "Guest"
    language: str = "English"


def one_node(agent: Agent, state: Any = None, **graph_kw: Any) -> Any:
    g = StateGraph(state, **graph_kw)
    g.add_node("MAIN", agent)
    g.set_entry_point("MAIN")
    g.add_edge("MAIN", END)
    return g.compile()


def sent(llm: ScriptedLLMServer, i: int = -1) -> list[dict[str, Any]]:
    return llm.bodies[i]["messages"]


async def test_system_prompt_placeholders_filled_from_state(llm: ScriptedLLMServer) -> None:
    llm.add(text("Hola Ana"))
    agent = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        system_prompt=[
            {
                "role": "system",
                "content": 'Help {user_name}; reply in {language}. JSON: {"a": 1} {{x}}',
            }
        ],
    )
    app = one_node(agent, Profile(user_name="Ana", language="Spanish"))
    await app.ainvoke({"messages": ["hi"]}, {"thread_id": "p1"})
    assert sent(llm)[0] == {
        "role": "system",
        "content": 'Help Ana; reply in Spanish. JSON: {"a": 1} {x}',
    }


async def test_system_prompt_missing_field_is_named(llm: ScriptedLLMServer) -> None:
    agent = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        system_prompt=[{"role": "system", "content": "Hello {nickname}"}],
    )
    app = one_node(agent, Profile())
    with pytest.raises(ValidationError) as info:
        await app.ainvoke({"messages": ["hi"]}, {"thread_id": "p2"})
    assert info.value.context["field"] == "nickname"
    assert "nickname" in str(info.value)
    assert llm.requests == []  # refused before any request


async def test_trim_context_message_manager(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core.state import MessageContextManager

    agent = Agent(
        model="gpt-4o",
        base_url=llm.base_url,
        system_prompt=[{"role": "system", "content": "sys"}],
        trim_context=True,
    )
    app = one_node(agent, context_manager=MessageContextManager(max_messages=2))
    cfg = {"thread_id": "trim"}
    for i in range(4):
        llm.add(text(f"a{i}"))
        await app.ainvoke({"messages": [f"u{i}"]}, dict(cfg))
    # the model saw its system prompt and the last two user turns only
    assert [m["content"] for m in sent(llm)] == ["sys", "u2", "a2", "u3"]
    # the thread keeps every message
    state = await app.aget_state(cfg)
    assert [m.text() for m in state.context] == ["u0", "a0", "u1", "a1", "u2", "a2", "u3", "a3"]


async def test_trim_context_without_manager_runs_untrimmed_and_warns_once(
    llm: ScriptedLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    # 10xGraph runs this graph and does not trim (its context-manager troubleshooting table)
    agent = Agent(model="gpt-4o", base_url=llm.base_url, trim_context=True)
    with caplog.at_level("WARNING", logger="tenxgraph.core.graph.state_graph"):
        app = one_node(agent)
        cfg = {"thread_id": "untrimmed"}
        for i in range(3):
            llm.add(text(f"a{i}"))
            await app.ainvoke({"messages": [f"u{i}"]}, dict(cfg))
    warnings = [r for r in caplog.records if "trim_context=True" in r.getMessage()]
    assert len(warnings) == 1  # once per compiled graph, not per model call
    assert "MAIN" in warnings[0].getMessage() and "context_manager=" in warnings[0].getMessage()
    # nothing trimmed: the last request carries the whole conversation
    assert [m["content"] for m in sent(llm)] == ["u0", "a0", "u1", "a1", "u2"]


async def test_summary_context_manager_summary_is_durable(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core.state import SummaryContextManager

    manager = SummaryContextManager(
        model="gpt-4o-mini", base_url=llm.base_url, token_budget=20, keep_recent=2
    )
    agent = Agent(model="gpt-4o", base_url=llm.base_url, trim_context=True)
    app = one_node(agent, context_manager=manager)
    cfg = {"thread_id": "sum"}
    long = "word " * 40
    llm.add(text("first answer"))
    await app.ainvoke({"messages": [long]}, dict(cfg))  # over budget, but nothing older to cut
    llm.add(text("SUMMARY: user wrote many words"), text("second answer"))
    await app.ainvoke({"messages": ["and now?"]}, dict(cfg))
    summary_req, answer_req = llm.bodies[-2], llm.bodies[-1]
    assert summary_req["model"] == "gpt-4o-mini"
    assert "word word" in summary_req["messages"][1]["content"]
    assert [m["role"] for m in answer_req["messages"]] == ["system", "assistant", "user"]
    assert "SUMMARY: user wrote many words" in answer_req["messages"][0]["content"]
    state = await app.aget_state(cfg)
    assert state.context_summary == "SUMMARY: user wrote many words"  # durable
    assert len(state.context) == 4  # history untouched


class Review(BaseModel):
    sentiment: str
    score: float


async def test_output_schema_request_and_parsed_value(llm: ScriptedLLMServer) -> None:
    llm.add(text('{"sentiment": "positive", "score": 0.9}'))
    agent = Agent(model="gpt-4o", base_url=llm.base_url, output_schema=Review)
    app = one_node(agent)
    cfg = {"thread_id": "so"}
    await app.ainvoke({"messages": ["great product"]}, dict(cfg))
    rf = llm.bodies[0]["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["name"] == "Review"
    assert rf["json_schema"]["schema"] == Review.model_json_schema()
    state = await app.aget_state(cfg)
    last = state.context[-1]
    assert last.metadata["structured_output"] == {"sentiment": "positive", "score": 0.9}
    assert agent.parsed(last) == Review(sentiment="positive", score=0.9)


async def test_output_schema_local_repair_and_reask(llm: ScriptedLLMServer) -> None:
    agent = Agent(model="gpt-4o", base_url=llm.base_url, output_schema=Review)
    app = one_node(agent)
    # fenced JSON with prose: recovered without asking again
    llm.add(text('Here:\n```json\n{"sentiment": "neutral", "score": 0.5}\n```'))
    out = await app.ainvoke({"messages": ["meh"]}, {"thread_id": "r1"})
    assert out["messages"][-1].text() == '{"sentiment": "neutral", "score": 0.5}'
    assert len(llm.requests) == 1
    # a wrong answer: the model is asked again with the validation error
    llm.add(text('{"sentiment": "bad"}'), text('{"sentiment": "negative", "score": 0.1}'))
    out = await app.ainvoke({"messages": ["awful"]}, {"thread_id": "r2"})
    assert out["messages"][-1].metadata["structured_output"]["score"] == 0.1
    correction = sent(llm)[-1]
    assert correction["role"] == "user" and "score" in correction["content"]
    assert sent(llm)[-2] == {"role": "assistant", "content": '{"sentiment": "bad"}'}


async def test_output_schema_gives_up_with_documented_error(llm: ScriptedLLMServer) -> None:
    agent = Agent(model="gpt-4o", base_url=llm.base_url, output_schema=Review, output_retries=1)
    app = one_node(agent)
    llm.add(text("no json at all"), text("still nothing"))
    cfg = {"thread_id": "bad"}
    with pytest.raises(StructuredOutputError) as info:
        await app.ainvoke({"messages": ["x"]}, dict(cfg))
    assert info.value.error_code == "MODEL_002"
    assert info.value.context["attempts"] == 2 and info.value.context["schema"] == "Review"
    state = await app.aget_state(cfg)
    assert state is None or all(m.role == "user" for m in state.context)  # no answer stored


async def test_malformed_body_is_a_model_error(llm: ScriptedLLMServer) -> None:
    llm.add(malformed())
    app = one_node(Agent(model="gpt-4o", base_url=llm.base_url))
    with pytest.raises(ModelError, match="not JSON"):
        await app.ainvoke({"messages": ["x"]}, {"thread_id": "m"})


async def test_retry_config_backoff_on_429_and_5xx(llm: ScriptedLLMServer) -> None:
    llm.add(error(429, "slow down"), error(503, "busy"), text("ok"))
    rc = RetryConfig(max_retries=3, initial_delay=0.1, backoff_factor=2.0, max_delay=1.0)
    app = one_node(Agent(model="gpt-4o", base_url=llm.base_url, retry_config=rc))
    out = await app.ainvoke({"messages": ["x"]}, {"thread_id": "rt"})
    assert out["messages"][-1].text() == "ok"
    assert len(llm.requests) == 3
    gaps = [b - a for a, b in zip(llm.times, llm.times[1:], strict=False)]
    assert gaps[0] >= 0.07 and gaps[1] >= 0.15  # 0.1 s, then 0.2 s (+-25 % jitter)


async def test_retry_disabled_and_status_not_listed(llm: ScriptedLLMServer) -> None:
    llm.add(error(429))
    app = one_node(Agent(model="gpt-4o", base_url=llm.base_url, retry_config=False))
    with pytest.raises(ModelError):
        await app.ainvoke({"messages": ["x"]}, {"thread_id": "nr"})
    assert len(llm.requests) == 1
    llm.add(error(504))  # not in retryable_status_codes
    rc = RetryConfig(max_retries=3, initial_delay=0.01)
    app = one_node(Agent(model="gpt-4o", base_url=llm.base_url, retry_config=rc))
    with pytest.raises(ModelError):
        await app.ainvoke({"messages": ["x"]}, {"thread_id": "nr2"})
    assert len(llm.requests) == 2


async def test_fallback_and_circuit_breaker(llm: ScriptedLLMServer) -> None:
    def responder(body: dict[str, Any]) -> Any:
        return error(500, "down") if body["model"] == "primary" else text("from backup")

    llm.responder = responder
    rc = RetryConfig(
        max_retries=0,
        circuit_breaker_enabled=True,
        circuit_breaker_threshold=2,
        circuit_breaker_reset_timeout=0.3,
    )
    agent = Agent(
        model="primary", base_url=llm.base_url, fallback_models=["backup"], retry_config=rc
    )
    app = one_node(agent)
    for i in range(2):
        out = await app.ainvoke({"messages": ["x"]}, {"thread_id": f"cb{i}"})
        assert out["messages"][-1].text() == "from backup"
    assert [b["model"] for b in llm.bodies] == ["primary", "backup", "primary", "backup"]
    assert agent.circuit_open("primary")
    await app.ainvoke({"messages": ["x"]}, {"thread_id": "cb2"})
    assert [b["model"] for b in llm.bodies[4:]] == ["backup"]  # primary skipped
    await anyio.sleep(0.35)
    await app.ainvoke({"messages": ["x"]}, {"thread_id": "cb3"})
    assert [b["model"] for b in llm.bodies[5:]] == ["primary", "backup"]  # one trial, failed
    assert agent.circuit_open("primary")


async def test_reasoning_config_sent(llm: ScriptedLLMServer) -> None:
    llm.add(text("a"), text("b"), text("c"))
    for model, cfg in (("o4-mini", {"effort": "high"}), ("gpt-4o", True)):
        app = one_node(Agent(model=model, base_url=llm.base_url, reasoning_config=cfg))
        await app.ainvoke({"messages": ["x"]}, {"thread_id": model})
    assert llm.bodies[0]["reasoning_effort"] == "high"
    assert llm.bodies[1]["reasoning_effort"] == "medium"
    app = one_node(Agent(model="gpt-4o", base_url=llm.base_url))  # default: not a reasoning model
    await app.ainvoke({"messages": ["x"]}, {"thread_id": "plain"})
    assert "reasoning_effort" not in llm.bodies[2]
    assert Agent(model="o3", reasoning_config=None).model.params == {}
    with pytest.raises(UnsupportedArgumentError) as info:
        Agent(model="o4-mini", reasoning_config={"thinking_budget": 10})
    assert info.value.error_code == "GRAPH_010"


async def test_default_llm_timeout(llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TENXGRAPH_LLM_TIMEOUT", raising=False)
    monkeypatch.delenv("AGENTFLOW_LLM_TIMEOUT", raising=False)
    assert get_default_llm_timeout() == 600.0
    monkeypatch.setenv("TENXGRAPH_LLM_TIMEOUT", "120")
    assert get_default_llm_timeout() == 120.0
    set_default_llm_timeout(0.3)
    assert get_default_llm_timeout() == 0.3
    with pytest.raises(ValueError):
        set_default_llm_timeout(-1)
    llm.add(text("late", delay_s=1.0))
    agent = Agent(model="gpt-4o", base_url=llm.base_url, retry_config=False)
    started = time.monotonic()
    with pytest.raises(ModelError, match="ReadTimeout|APITimeoutError"):
        await agent(state=AgentState(context=[Message.text_message("x")]))
    assert time.monotonic() - started < 0.9
    set_default_llm_timeout(None)
    assert get_default_llm_timeout() == 120.0


async def test_tools_tags_offer_only_tagged_tools(llm: ScriptedLLMServer) -> None:
    @tool(tags=["safe"])
    def safe_search(query: str) -> str:
        """Safe search."""
        return query

    @tool(tags=["admin"])
    def admin_action(cmd: str) -> str:
        """Admin-only action."""
        return cmd

    def legacy(x: str) -> str:
        """Tagged the old way."""
        return x

    legacy.__tags__ = {"safe"}  # type: ignore[attr-defined]
    node = ToolNode([safe_search, admin_action, legacy])
    llm.add(text("ok"))
    app = one_node(
        Agent(model="gpt-4o", base_url=llm.base_url, tool_node=node, tools_tags={"safe"})
    )
    await app.ainvoke({"messages": ["x"]}, {"thread_id": "tags"})
    assert [t["function"]["name"] for t in llm.bodies[0]["tools"]] == ["safe_search", "legacy"]


async def test_unsupported_provider_refused() -> None:
    with pytest.raises(UnsupportedArgumentError) as info:
        Agent(model="gemini-2.5-flash", provider="vertex")
    assert info.value.error_code == "GRAPH_010" and "google" in str(info.value)


async def test_tool_call_loop_through_server(llm: ScriptedLLMServer) -> None:
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Weather of a city."""
        ran.append(city)
        return f"sunny in {city}"

    llm.add(tool_calls(("get_weather", {"city": "Oslo"})), text("It is sunny in Oslo."))
    node = ToolNode([get_weather])
    g = StateGraph()
    g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url, tool_node="TOOL"))
    g.add_node("TOOL", node)
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    out = await g.compile().ainvoke({"messages": ["weather?"]}, {"thread_id": "loop"})
    assert ran == ["Oslo"]
    assert out["messages"][-1].text() == "It is sunny in Oslo."
    second = sent(llm)
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_0_get_weather",
        "content": "sunny in Oslo",
    }
    assert llm.bodies[0]["tools"][0]["function"]["name"] == "get_weather"


def test_message_context_manager_rules() -> None:
    from tenxgraph.core.state import MessageContextManager, ToolCallBlock

    call = Message(role="assistant", content=[ToolCallBlock(id="c1", name="f", args={})])
    msgs = [
        Message.text_message("sys", role="system"),
        Message.text_message("u1"),
        call,
        Message.tool_message("r1", tool_call_id="c1"),
        Message.text_message("a1", role="assistant"),
        Message.text_message("u2"),
        Message.text_message("a2", role="assistant"),
    ]
    keep_turn = MessageContextManager(max_messages=1).trim(msgs)
    assert [m.text() for m in keep_turn] == ["sys", "u2", "a2"]
    no_tools = MessageContextManager(max_messages=5, remove_tool_msgs=True).trim(msgs)
    assert [m.role for m in no_tools] == ["system", "user", "assistant", "user", "assistant"]
    with pytest.raises(ValueError):
        MessageContextManager(max_messages=0)


async def test_custom_context_manager_edits_a_copy(llm: ScriptedLLMServer) -> None:
    from tenxgraph.core.state import BaseContextManager

    class LastOnly(BaseContextManager):
        def trim_context(self, state: Any) -> Any:
            del state.context[:-1]  # in place, on the copy it was given
            return state

        async def atrim_context(self, state: Any) -> Any:
            return self.trim_context(state)

    app = one_node(
        Agent(model="gpt-4o", base_url=llm.base_url, trim_context=True), context_manager=LastOnly()
    )
    cfg = {"thread_id": "custom"}
    for turn in ("first", "second"):
        llm.add(text(f"re {turn}"))
        await app.ainvoke({"messages": [turn]}, dict(cfg))
    assert [m["content"] for m in sent(llm)] == ["second"]
    state = await app.aget_state(cfg)
    assert [m.text() for m in state.context] == ["first", "re first", "second", "re second"]


async def test_summary_model_given_by_name_is_built_by_the_graph() -> None:
    """A name becomes a model when a graph using the manager is compiled; used alone, the
    manager says how to give it a model instead of failing on None."""
    from tenxgraph.core.exceptions import ConfigError
    from tenxgraph.core.state import AgentState, Message, SummaryContextManager
    from tenxgraph.models.openai_compat import OpenAICompatModel

    alone = SummaryContextManager(model="gpt-4o-mini", token_budget=1, keep_recent=1)
    state = AgentState(context=[Message.text_message("x " * 40), Message.text_message("y")])
    with pytest.raises(ConfigError) as err:
        await alone.atrim_context(state)
    assert err.value.error_code == "CONFIG_001" and err.value.context == {"key": "model"}
    assert "gpt-4o-mini" in str(err.value)

    manager = SummaryContextManager(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    one_node(Agent(model="gpt-4o", base_url="http://127.0.0.1:9/v1"), context_manager=manager)
    assert isinstance(manager.model, OpenAICompatModel)
    built = manager.model
    one_node(Agent(model="gpt-4o", base_url="http://127.0.0.1:9/v1"), context_manager=manager)
    assert manager.model is built  # built once, whichever graph compiles next
