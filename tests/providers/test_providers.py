"""Gemini, Claude and OpenAI agents through the official SDKs against local wire-protocol servers:
text, tool calls, streaming deltas, usage, reasoning settings, errors, fallbacks, inference of
the provider from the model name, and a crash after a checkpointed answer (not asked again)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tenxgraph.core.exceptions import UnsupportedArgumentError
from tenxgraph.core.graph import Agent
from tenxgraph.core.state import StreamEvent
from tenxgraph.models import ModelError
from tenxgraph.models.anthropic import AnthropicModel
from tenxgraph.models.google import GoogleModel
from tenxgraph.models.providers import infer_provider
from tenxgraph.storage.checkpointer import SqliteCheckpointer

from ._crash_child import MODELS, build
from ._wire_servers import Answer, AnthropicServer, GeminiServer, OpenAIServer

pytestmark = pytest.mark.anyio
CHILD = Path(__file__).with_name("_crash_child.py")


_SERVERS = {"google": GeminiServer, "anthropic": AnthropicServer, "openai": OpenAIServer}


@pytest.fixture(params=["google", "anthropic", "openai"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    srv = _SERVERS[request.param]()
    yield request.param, srv
    srv.close()


def charge(amount: int) -> str:
    """Charge the card."""
    return f"charged {amount}"


async def test_tool_call_then_text_with_usage(server: tuple[str, Any], tmp_path: Path) -> None:
    provider, srv = server
    srv.answers += [Answer(calls=[("charge", {"amount": 5})]), Answer(text="Paid five.")]
    app = build(provider, srv.url, SqliteCheckpointer(str(tmp_path / "d.db")), str(tmp_path / "no"))
    await app.ainvoke({"messages": ["pay 5"]}, {"thread_id": "a"})
    state = await app.aget_state({"thread_id": "a"})
    assert [m.role for m in state.context] == ["user", "assistant", "tool", "assistant"]
    call = state.context[1].tool_calls()[0]
    assert (call.name, call.args) == ("charge", {"amount": 5})
    assert state.context[-1].text() == "Paid five."
    assert state.context[-1].metadata["model"] == MODELS[provider]
    usages = state.context[-1].usages
    assert usages is not None and (usages.prompt_tokens, usages.total_tokens) in (
        (11, 18),
        (12, 18),
        (10, 15),
    )
    # the second request carried the call and its result in the provider's own shape
    second = str(srv.requests[1])
    assert "charged 5" in second
    shape = {"google": "functionResponse", "anthropic": "tool_result", "openai": "tool_call_id"}
    assert shape[provider] in second or (provider == "google" and "function_response" in second)
    await app.aclose()


async def test_streaming_deltas(server: tuple[str, Any], tmp_path: Path) -> None:
    provider, srv = server
    srv.answers.append(Answer(text="The sky is clear."))
    app = build(provider, srv.url, SqliteCheckpointer(str(tmp_path / "d.db")), str(tmp_path / "no"))
    chunks = [c async for c in app.astream({"messages": ["sky?"]}, {"thread_id": "s"})]
    deltas = [
        c.message.text() for c in chunks if c.event == StreamEvent.MESSAGE and c.message.delta
    ]
    assert deltas == ["The ", "sky ", "is ", "clear."]
    state = await app.aget_state({"thread_id": "s"})
    assert [(m.role, m.text()) for m in state.context] == [
        ("user", "sky?"),
        ("assistant", "The sky is clear."),
    ]
    await app.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_maps_to_thinking(server: tuple[str, Any], stream: bool) -> None:
    provider, srv = server
    srv.answers.append(Answer(text="42", thought="adding"))
    agent = Agent(
        model=MODELS[provider],
        provider=provider,
        base_url=srv.url,
        api_key="k",
        reasoning_config={"effort": "high"},
    )
    model = agent.model
    if stream:
        msgs = [m async for m in model.astream([_user("q")], None)]  # type: ignore[attr-defined]
        msg = msgs[-1]
    else:
        msg = await model.agenerate([_user("q")], None)
    assert (msg.text(), msg.reasoning) == ("42", "adding")
    body = srv.requests[0]
    if provider == "google":
        gen = body.get("generationConfig") or body["generation_config"]
        thinking = gen.get("thinkingConfig") or gen["thinking_config"]
        assert thinking in (
            {"thinkingBudget": 24576, "includeThoughts": True},
            {"thinking_budget": 24576, "include_thoughts": True},
        )
    elif provider == "anthropic":
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 24576}
    else:
        assert body["reasoning_effort"] == "high"


async def test_error_is_model_error_then_fallback_answers(server: tuple[str, Any]) -> None:
    provider, srv = server
    srv.answers += [Answer(status=503), Answer(status=503), Answer(text="from the fallback")]
    only = Agent(
        model=MODELS[provider], provider=provider, base_url=srv.url, api_key="k", retry_config=False
    )
    with pytest.raises(ModelError) as info:
        await only.model.agenerate([_user("q")], None)
    assert info.value.error_code == "MODEL_001"
    assert info.value.context["status_code"] == 503 and info.value.context["retryable"] is True
    agent = Agent(
        model=MODELS[provider],
        provider=provider,
        base_url=srv.url,
        api_key="k",
        retry_config=False,
        fallback_models=["backup-model"],
    )
    out = [m async for m in agent._generate([_user("q")], None, False, {})]
    assert out[-1].text() == "from the fallback"
    assert out[-1].metadata["model"] in ("backup-model",)


def test_provider_inferred_from_model_name() -> None:
    assert infer_provider("gemini-2.5-flash") == "google"
    assert infer_provider("google/gemini-2.0-flash") == "google"
    assert infer_provider("claude-3-5-sonnet") == "anthropic"
    assert infer_provider("anthropic/claude-sonnet-4-5") == "anthropic"
    assert infer_provider("gpt-4o") == "openai"
    assert isinstance(Agent(model="gemini-2.5-flash", api_key="k").model, GoogleModel)
    assert isinstance(Agent(model="claude-sonnet-4-5", api_key="k").model, AnthropicModel)
    with pytest.raises(UnsupportedArgumentError):
        Agent(model="x", provider="bedrock")


async def test_crash_after_checkpointed_answer_is_not_asked_again(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    provider, srv = server
    db, marker = tmp_path / "c.db", tmp_path / "crash"
    marker.write_text("1")
    srv.answers.append(Answer(calls=[("charge", {"amount": 5})]))
    with anyio.fail_after(60):
        proc = await anyio.run_process(
            [sys.executable, str(CHILD), provider, srv.url, str(db), str(marker)], check=False
        )
    assert proc.returncode == 3, proc.stderr.decode()
    assert len(srv.requests) == 1
    marker.unlink()
    srv.answers.append(Answer(text="Paid."))
    app = build(provider, srv.url, SqliteCheckpointer(str(db)), str(marker))
    before = await app.aget_state({"thread_id": "t"})
    assert [m.role for m in before.context] == ["user", "assistant"]
    await app.ainvoke(None, {"thread_id": "t"})
    state = await app.aget_state({"thread_id": "t"})
    assert [(m.role, m.text()) for m in state.context][-1] == ("assistant", "Paid.")
    assert len(srv.requests) == 2  # the checkpointed tool-call answer was not asked for again
    await app.aclose()


def _user(text: str) -> Any:
    from tenxgraph.core.state import Message

    return Message(role="user", content=text)


async def test_react_agent_of_the_getting_started_page(server: tuple[str, Any]) -> None:
    from tenxgraph.prebuilt import ReactAgent

    provider, srv = server
    srv.answers += [Answer(calls=[("charge", {"amount": 2})]), Answer(text="Charged 2.")]
    app = ReactAgent(
        model=MODELS[provider], provider=provider, tools=[charge], base_url=srv.url, api_key="k"
    ).compile()
    out = await app.ainvoke({"messages": ["pay 2"]}, {"thread_id": "r"})
    assert [m.role for m in out["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert out["messages"][-1].text() == "Charged 2."
    await app.aclose()


async def test_fallback_answer_is_checkpointed_with_its_model(
    server: tuple[str, Any], tmp_path: Path
) -> None:
    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.utils import END

    provider, srv = server
    srv.answers += [Answer(status=500), Answer(text="backup here")]
    g = StateGraph()
    g.add_node(
        "MAIN",
        Agent(
            model=MODELS[provider],
            provider=provider,
            base_url=srv.url,
            api_key="k",
            retry_config=False,
            fallback_models=["backup-model"],
        ),
    )
    g.add_edge("MAIN", END)
    g.set_entry_point("MAIN")
    cp = SqliteCheckpointer(str(tmp_path / "f.db"))
    app = g.compile(checkpointer=cp)
    inp = {"messages": [Message(role="user", content="hi", message_id="u1")]}
    await app.ainvoke(inp, {"thread_id": "f"})
    state = await app.aget_state({"thread_id": "f"})
    assert state.context[-1].metadata["model"] == "backup-model"
    again = await app.ainvoke(inp, {"thread_id": "f"})  # the same input replayed
    assert again.get("already_processed") is True
    assert len(srv.requests) == 2  # neither model was asked again
    await app.aclose()
