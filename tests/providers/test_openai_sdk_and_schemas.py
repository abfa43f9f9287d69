"""OpenAI through its official SDK (chat completions and the Responses API), structured output
and reasoning on every provider, and fallbacks across providers, each against a local server
speaking that provider's wire protocol."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest

from tenxgraph.core.exceptions import UnsupportedArgumentError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import Message, StreamEvent
from tenxgraph.models import ModelError
from tenxgraph.models.openai import OpenAIModel
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

from ._crash_child import MODELS
from ._wire_servers import Answer, AnthropicServer, GeminiServer, OpenAIServer

pytestmark = pytest.mark.anyio
_SERVERS = {"google": GeminiServer, "anthropic": AnthropicServer, "openai": OpenAIServer}


class Invoice(pydantic.BaseModel):
    customer: str
    total: float


@pytest.fixture(params=["google", "anthropic", "openai"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    srv = _SERVERS[request.param]()
    yield request.param, srv
    srv.close()


@pytest.fixture
def openai_srv() -> Iterator[OpenAIServer]:
    srv = OpenAIServer()
    yield srv
    srv.close()


def _user(text: str) -> Message:
    return Message(role="user", content=text)


def _graph(agent: Agent, tmp_path: Path, tools: list[Any] | None = None) -> Any:
    g = StateGraph()
    g.add_node("MAIN", agent)
    if tools:
        g.add_node("TOOL", ToolNode(tools))
        g.add_conditional_edges(
            "MAIN",
            lambda s: "TOOL" if s.context[-1].tool_calls() else END,
            {"TOOL": "TOOL", END: END},
        )
        g.add_edge("TOOL", "MAIN")
    else:
        g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    return g.compile(checkpointer=SqliteCheckpointer(str(tmp_path / "s.db")))


async def test_structured_output_is_requested_and_parsed(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    provider, srv = server
    srv.answers.append(Answer(text='{"customer": "Ada", "total": 12.5}'))
    agent = Agent(
        model=MODELS[provider],
        provider=provider,
        base_url=srv.url,
        api_key="k",
        output_schema=Invoice,
        reasoning_config=None,
    )
    app = _graph(agent, tmp_path)
    await app.ainvoke({"messages": ["bill Ada"]}, {"thread_id": "so"})
    state = await app.aget_state({"thread_id": "so"})
    assert agent.parsed(state.context[-1]) == Invoice(customer="Ada", total=12.5)
    body = json.dumps(srv.requests[0])
    # the schema travelled in each provider's own field
    field = {"google": "responseJsonSchema", "anthropic": "output_config", "openai": "json_schema"}
    assert field[provider] in body or "response_json_schema" in body, body
    assert "customer" in body
    await app.aclose()


async def test_reasoning_effort_low_and_the_reasoning_text(server: tuple[str, Any]) -> None:
    provider, srv = server
    srv.answers.append(Answer(text="4", thought="two plus two"))
    agent = Agent(
        model=MODELS[provider],
        provider=provider,
        base_url=srv.url,
        api_key="k",
        reasoning_config={"effort": "low"},
    )
    msg = await agent.model.agenerate([_user("2+2?")], None)
    assert (msg.text(), msg.reasoning) == ("4", "two plus two")
    body = json.dumps(srv.requests[0])
    wanted = {"google": "512", "anthropic": '"budget_tokens": 2048', "openai": '"low"'}
    assert wanted[provider] in body


async def test_responses_api_reasoning_summary_tools_and_stream(
    openai_srv: OpenAIServer, tmp_path: Path
) -> None:
    def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: sunny"

    openai_srv.answers += [
        Answer(calls=[("lookup", {"city": "Oslo"})], thought="need the weather"),
        Answer(text="Oslo is sunny.", thought="summarised"),
    ]
    agent = Agent(
        model="o4-mini",
        base_url=openai_srv.url,
        api_key="k",
        reasoning_config={"effort": "low", "summary": "auto"},
        tool_node="TOOL",
    )
    assert isinstance(agent.model, OpenAIModel) and agent.model.api_style == "responses"
    app = _graph(agent, tmp_path, [lookup])
    chunks = [c async for c in app.astream({"messages": ["weather?"]}, {"thread_id": "r"})]
    deltas = [c.message for c in chunks if c.event == StreamEvent.MESSAGE and c.message.delta]
    assert "".join(m.text() for m in deltas) == "Oslo is sunny."
    assert [m.reasoning for m in deltas if m.reasoning] == ["need the weather", "summarised"]
    state = await app.aget_state({"thread_id": "r"})
    assert [m.role for m in state.context] == ["user", "assistant", "tool", "assistant"]
    assert state.context[-1].reasoning == "summarised"
    assert state.context[-1].metadata["api_style"] == "responses"
    assert all(p.endswith("/responses") for p in openai_srv.paths)
    first, second = openai_srv.requests
    assert first["reasoning"] == {"effort": "low", "summary": "auto"}
    assert first["tools"][0]["name"] == "lookup" and first["stream"] is True
    kinds = [item.get("type") for item in second["input"]]
    assert "function_call" in kinds and "function_call_output" in kinds
    await app.aclose()


async def test_responses_api_error_is_retryable_model_error(openai_srv: OpenAIServer) -> None:
    openai_srv.answers.append(Answer(status=429))
    model = OpenAIModel(
        "o4-mini", base_url=openai_srv.url, api_key="k", max_retries=0, api_style="responses"
    )
    with pytest.raises(ModelError) as info:
        await model.agenerate([_user("q")], None)
    assert info.value.context["status_code"] == 429
    assert info.value.context["retryable"] is True


async def test_sdk_retries_follow_the_retry_policy(openai_srv: OpenAIServer) -> None:
    openai_srv.answers += [Answer(status=503), Answer(text="second time")]
    model = OpenAIModel(
        "gpt-4o", base_url=openai_srv.url, max_retries=1, initial_delay_s=0.0, max_delay_s=0.0
    )
    msg = await model.agenerate([_user("q")], None)
    assert msg.text() == "second time" and len(openai_srv.requests) == 2
    assert "authorization" not in openai_srv.headers[0]
    # no key for a local server: no Authorization header, and the request still goes out
    openai_srv.answers.append(Answer(status=400))
    with pytest.raises(ModelError) as info:
        await model.agenerate([_user("q")], None)
    assert info.value.context["retryable"] is False and len(openai_srv.requests) == 3


async def test_unknown_chat_parameters_travel_in_the_body(openai_srv: OpenAIServer) -> None:
    model = OpenAIModel("gpt-4o", base_url=openai_srv.url, api_key="k", top_k=5)
    await model.agenerate([_user("q")], None, temperature=0.2)
    assert openai_srv.requests[0]["top_k"] == 5
    assert openai_srv.requests[0]["temperature"] == 0.2


def test_summary_needs_openai_and_known_values() -> None:
    with pytest.raises(UnsupportedArgumentError):
        Agent(model="claude-sonnet-4-5", api_key="k", reasoning_config={"summary": "auto"})
    with pytest.raises(UnsupportedArgumentError):
        Agent(model="o4-mini", api_key="k", reasoning_config={"summary": "verbose"})
    with pytest.raises(UnsupportedArgumentError):
        Agent(model="gemini-2.5-flash", api_key="k", api_style="responses")


async def test_cross_provider_fallback_records_the_model_and_replays(tmp_path: Path) -> None:
    claude, gpt = AnthropicServer(), OpenAIServer()
    try:
        claude.answers.append(Answer(status=529))
        gpt.answers.append(Answer(text="answered by the fallback"))
        agent = Agent(
            model="claude-sonnet-4-5",
            base_url=claude.url,
            api_key="k",
            retry_config=False,
            fallback_models=[OpenAIModel("gpt-4o-mini", base_url=gpt.url, api_key="k")],
        )
        app = _graph(agent, tmp_path)
        inp = {"messages": [Message(role="user", content="hi", message_id="u1")]}
        await app.ainvoke(inp, {"thread_id": "x"})
        state = await app.aget_state({"thread_id": "x"})
        last = state.context[-1]
        assert last.text() == "answered by the fallback"
        assert (last.metadata["model"], last.metadata["provider"]) == ("gpt-4o-mini", "openai")
        again = await app.ainvoke(inp, {"thread_id": "x"})
        assert again.get("already_processed") is True
        assert (len(claude.requests), len(gpt.requests)) == (1, 1)
        await app.aclose()
    finally:
        claude.close()
        gpt.close()


async def test_use_vertex_ai_speaks_the_vertex_paths() -> None:
    srv = GeminiServer()
    try:
        srv.answers.append(Answer(text="from vertex"))
        agent = Agent(model="gemini-2.5-flash", base_url=srv.url, api_key="k", use_vertex_ai=True)
        msg = await agent.model.agenerate([_user("q")], None)
        assert msg.text() == "from vertex"
        assert "/publishers/google/models/gemini-2.5-flash:generateContent" in srv.paths[0]
        with pytest.raises(UnsupportedArgumentError):
            Agent(model="gpt-4o", use_vertex_ai=True)
    finally:
        srv.close()


async def test_gemini_answer_the_sdk_cannot_read_is_a_model_error() -> None:
    srv = GeminiServer()
    try:
        srv.answers.append(Answer(calls=[("lookup", "not an object")]))  # type: ignore[list-item]
        agent = Agent(model="gemini-2.5-flash", base_url=srv.url, api_key="k")
        with pytest.raises(ModelError) as info:
            await agent.model.agenerate([_user("q")], None)
        assert info.value.context["retryable"] is False
        assert "could not read" in str(info.value)
    finally:
        srv.close()


async def test_a_refused_request_does_not_fall_back(server: tuple[str, Any]) -> None:
    provider, srv = server
    srv.answers += [Answer(status=400), Answer(text="must not be asked")]
    agent = Agent(
        model=MODELS[provider],
        provider=provider,
        base_url=srv.url,
        api_key="k",
        retry_config=False,
        fallback_models=["backup-model"],
    )
    with pytest.raises(ModelError) as info:
        [m async for m in agent._generate([_user("q")], None, False, {})]
    assert info.value.context["status_code"] == 400
    assert info.value.context["retryable"] is False and len(srv.requests) == 1


async def test_without_the_sdk_openai_uses_the_httpx_adapter(
    openai_srv: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from tenxgraph.models import OpenAICompatModel

    monkeypatch.setitem(sys.modules, "openai", None)  # as if the extra were not installed
    agent = Agent(model="gpt-4o", base_url=openai_srv.url, api_key="k")
    assert type(agent.model) is OpenAICompatModel
    openai_srv.answers.append(Answer(text="over httpx"))
    msg = await agent.model.agenerate([_user("q")], None)
    assert msg.text() == "over httpx"
    with pytest.raises(ModelError) as info:  # only the SDK speaks the Responses API
        Agent(model="o4-mini", base_url=openai_srv.url, reasoning_config={"summary": "auto"})
    assert info.value.context["missing_package"] == "openai"
