"""Provider state sent back and provider failures, against the local wire servers.

Claude's signed ``thinking`` / ``redacted_thinking`` blocks and Gemini 3's thought signatures
must return with the assistant turn they came with (the servers refuse a turn without them,
as the real APIs do), also after a checkpoint round-trip; a stream that breaks or ends early
is a retryable ``ModelError``; Gemini retries as the other adapters do; errors carry the
provider's message; a missing Anthropic key is a ``ModelError``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import Message
from tenxgraph.models import ModelError
from tenxgraph.models.anthropic import THINKING_KEY
from tenxgraph.models.google import SIGNATURES_KEY
from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer
from tenxgraph.utils import END

from ._wire_servers import Answer, AnthropicServer, GeminiServer

pytestmark = pytest.mark.anyio

MODELS = {"google": "gemini-3-flash-preview", "anthropic": "claude-sonnet-4-5"}
_SERVERS = {"google": GeminiServer, "anthropic": AnthropicServer}


@pytest.fixture(params=["google", "anthropic"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    srv = _SERVERS[request.param]()
    yield request.param, srv
    srv.close()


def charge(amount: int) -> str:
    """Charge the card."""
    return f"charged {amount}"


def _app(provider: str, url: str, db: Path | Any, **agent: Any) -> Any:
    g = StateGraph()
    g.add_node(
        "MAIN",
        Agent(
            model=MODELS[provider],
            provider=provider,
            base_url=url,
            api_key="k",
            tool_node="TOOL",
            reasoning_config=True,
            **agent,
        ),
    )
    g.add_node("TOOL", ToolNode([charge]))
    g.add_conditional_edges(
        "MAIN", lambda s: "TOOL" if s.context[-1].tool_calls() else END, {"TOOL": "TOOL", END: END}
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    cp = SqliteCheckpointer(str(db)) if isinstance(db, Path) else db()
    return g.compile(checkpointer=cp)


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_loop_with_reasoning_sends_provider_state_back(
    server: tuple[str, Any], tmp_path: Path, stream: bool
) -> None:
    provider, srv = server
    srv.answers += [
        Answer(thought="need to charge", redacted="opaque", calls=[("charge", {"amount": 5})]),
        Answer(text="Paid five.", thought="done"),
        Answer(thought="again", calls=[("charge", {"amount": 2})]),
        Answer(text="Paid two."),
    ]
    app = _app(provider, srv.url, tmp_path / "d.db")
    cfg = {"thread_id": "t"}
    if stream:
        async for _ in app.astream({"messages": ["pay 5"]}, cfg):
            pass
    else:
        await app.ainvoke({"messages": ["pay 5"]}, cfg)
    state = await app.aget_state(cfg)
    assert state.context[-1].text() == "Paid five."
    first = state.context[1]
    if provider == "anthropic":
        assert first.metadata[THINKING_KEY] == [
            {"type": "thinking", "thinking": "need to charge", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
        ]
        turn = srv.requests[1]["messages"][1]
        assert [b["type"] for b in turn["content"]] == [
            "thinking",
            "redacted_thinking",
            "tool_use",
        ]
    else:
        sigs = first.metadata[SIGNATURES_KEY]["calls"]
        assert list(sigs) == [first.tool_calls()[0].id]
        turn = srv.requests[1]["contents"][1]
        assert turn["role"] == "model" and turn["parts"][-1]["thoughtSignature"] in srv.signatures
    await app.aclose()

    # a fresh process reads the thread back from the checkpoint and sends it all again
    again = _app(provider, srv.url, tmp_path / "d.db")
    await again.ainvoke({"messages": ["pay 2"]}, cfg)
    state = await again.aget_state(cfg)
    assert state.context[-1].text() == "Paid two."
    assert all("error" not in str(m.metadata.get("finish_reason", "")) for m in state.context)
    await again.aclose()


async def test_servers_refuse_a_turn_without_its_provider_state(
    server: tuple[str, Any],
) -> None:
    provider, srv = server
    agent = Agent(
        model=MODELS[provider],
        provider=provider,
        base_url=srv.url,
        api_key="k",
        reasoning_config=True,
        retry_config=False,
    )
    call = Message(
        role="assistant",
        content=[{"type": "tool_call", "id": "c1", "name": "charge", "args": {"amount": 1}}],
    )
    result = Message.tool_message("charged 1", tool_call_id="c1")
    with pytest.raises(ModelError) as info:
        await agent.model.agenerate([Message.text_message("pay"), call, result], None)
    assert info.value.context["status_code"] == 400
    assert info.value.context["retryable"] is False
    # the provider's own words are in the error
    assert ("thought_signature" if provider == "google" else "Expected `thinking`") in str(
        info.value
    )


@pytest.mark.parametrize(
    "answer", [Answer(text="a b c d e", drop_after=2), Answer(text="a b", no_stop=True)]
)
async def test_broken_stream_is_retryable_model_error(
    server: tuple[str, Any], answer: Answer
) -> None:
    provider, srv = server
    if answer.no_stop and provider == "google":
        pytest.skip("message_stop is Anthropic's event")
    srv.answers.append(answer)
    agent = Agent(model=MODELS[provider], provider=provider, base_url=srv.url, api_key="k")
    with pytest.raises(ModelError) as info:
        async for _ in agent.model.astream([Message.text_message("q")], None):  # type: ignore[attr-defined]
            pass
    assert info.value.error_code == "MODEL_001"
    assert info.value.context["retryable"] is True
    assert "broke after" in str(info.value)


async def test_gemini_retries_as_retry_config_says() -> None:
    srv = GeminiServer()
    try:
        srv.answers += [Answer(status=503), Answer(status=429), Answer(text="third time")]
        agent = Agent(
            model="gemini-2.5-flash",
            provider="google",
            base_url=srv.url,
            api_key="k",
            retry_config={"max_retries": 3, "initial_delay": 0.0, "max_delay": 0.0},
        )
        msg = await agent.model.agenerate([Message.text_message("q")], None)
        assert msg.text() == "third time" and len(srv.requests) == 3

        srv.answers += [Answer(status=503)] * 2
        once = Agent(
            model="gemini-2.5-flash",
            provider="google",
            base_url=srv.url,
            api_key="k",
            retry_config={"max_retries": 1, "initial_delay": 0.0, "max_delay": 0.0},
        )
        with pytest.raises(ModelError) as info:
            await once.model.agenerate([Message.text_message("q")], None)
        assert info.value.context["attempts"] == 2 and len(srv.requests) == 5
        assert "scripted failure" in str(info.value)
    finally:
        srv.close()


async def test_gemini_stream_is_retried_before_its_first_event() -> None:
    srv = GeminiServer()
    try:
        srv.answers += [Answer(status=503), Answer(text="hi there")]
        agent = Agent(
            model="gemini-2.5-flash",
            provider="google",
            base_url=srv.url,
            api_key="k",
            retry_config={"max_retries": 2, "initial_delay": 0.0, "max_delay": 0.0},
        )
        msgs = [m async for m in agent.model.astream([Message.text_message("q")], None)]  # type: ignore[attr-defined]
        assert msgs[-1].text() == "hi there" and len(srv.requests) == 2
    finally:
        srv.close()


async def test_anthropic_error_carries_provider_message() -> None:
    srv = AnthropicServer()
    try:
        srv.answers.append(Answer(status=400))
        agent = Agent(
            model="claude-sonnet-4-5",
            provider="anthropic",
            base_url=srv.url,
            api_key="k",
            retry_config=False,
        )
        with pytest.raises(ModelError) as info:
            await agent.model.agenerate([Message.text_message("q")], None)
        assert "scripted 400" in str(info.value)
    finally:
        srv.close()


async def test_missing_anthropic_key_is_model_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    agent = Agent(model="claude-sonnet-4-5", provider="anthropic", base_url="http://127.0.0.1:9")
    with pytest.raises(ModelError) as info:
        await agent.model.agenerate([Message.text_message("q")], None)
    assert info.value.error_code == "MODEL_001" and "ANTHROPIC_API_KEY" in str(info.value)
    assert info.value.context["retryable"] is False


async def test_provider_state_survives_a_postgres_checkpoint(
    server: tuple[str, Any], pg_dsn: str, pg_schema: str
) -> None:
    provider, srv = server
    srv.answers += [
        Answer(thought="plan", calls=[("charge", {"amount": 5})]),
        Answer(text="Paid five."),
    ]
    cfg = {"thread_id": "pg"}
    app = _app(provider, srv.url, lambda: PgCheckpointer(pg_dsn, schema=pg_schema))
    await app.ainvoke({"messages": ["pay 5"]}, cfg)
    kept = (await app.aget_state(cfg)).context[1].metadata
    await app.aclose()
    # a fresh checkpointer reads the thread from Postgres; the next request carries it all
    srv.answers += [Answer(thought="again", calls=[("charge", {"amount": 2})]), Answer(text="ok")]
    again = _app(provider, srv.url, lambda: PgCheckpointer(pg_dsn, schema=pg_schema))
    state = await again.aget_state(cfg)
    key = THINKING_KEY if provider == "anthropic" else SIGNATURES_KEY
    assert state.context[1].metadata[key] == kept[key]
    await again.ainvoke({"messages": ["pay 2"]}, cfg)
    assert (await again.aget_state(cfg)).context[-1].text() == "ok"
    await again.aclose()
