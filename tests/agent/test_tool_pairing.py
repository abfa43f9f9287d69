"""The request an Agent sends answers every tool call directly after it (OpenAI's rule),
checked against the scripted server in strict mode, which answers 400 as OpenAI does."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.graph.agent_internal.tool_pairing import NOT_RUN, pair_tool_results
from tenxgraph.core.state import Message
from tenxgraph.utils import END

from ._fake_llm_server import ScriptedLLMServer, text, tool_calls

pytestmark = pytest.mark.anyio


def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


def test_strict_server_refuses_a_dangling_call_like_openai() -> None:
    bad = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "ok"},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    with ScriptedLLMServer(strict=True) as server:
        server.add(text("never sent"))
        req = urllib.request.Request(
            server.base_url + "/chat/completions",
            data=json.dumps({"model": "m", "messages": bad}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(req, timeout=10)
        assert info.value.code == 400
        assert "c1" in json.loads(info.value.read())["error"]["message"]
        assert len(server.replies) == 1  # the scripted reply is kept for a valid request


async def test_resume_with_a_user_message_before_the_tool_node() -> None:
    with ScriptedLLMServer(strict=True) as llm:
        g = StateGraph()
        g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url, tool_node="TOOL"))
        g.add_node("TOOL", ToolNode([get_weather]))
        g.set_entry_point("MAIN")
        g.add_conditional_edges(
            "MAIN",
            lambda s: "TOOL" if s.context[-1].tool_calls() else END,
            {"TOOL": "TOOL", END: END},
        )
        g.add_edge("TOOL", "MAIN")
        app = g.compile(interrupt_before=["TOOL"])
        cfg = {"thread_id": "approve"}
        llm.add(tool_calls(("get_weather", {"city": "Oslo"})), text("It is sunny in Oslo."))
        await app.ainvoke({"messages": ["weather in Oslo?"]}, dict(cfg))
        out = await app.ainvoke(
            {"messages": [Message.text_message("Approved, continue.")]}, dict(cfg)
        )
        assert out["messages"][-1].text() == "It is sunny in Oslo."
        # the request: the call's result right after it, the user's approval after that
        assert roles(llm.bodies[-1]) == ["user", "assistant", "tool", "user"]
        assert llm.bodies[-1]["messages"][3]["content"] == "Approved, continue."
        # the thread is not rewritten
        state = await app.aget_state(cfg)
        assert [m.role for m in state.context] == ["user", "assistant", "user", "tool", "assistant"]


async def test_a_call_without_result_is_sent_with_a_not_run_stand_in() -> None:
    with ScriptedLLMServer(strict=True) as llm:
        g = StateGraph()
        g.add_node("MAIN", Agent(model="gpt-4o", base_url=llm.base_url))
        g.set_entry_point("MAIN")
        g.add_edge("MAIN", END)
        app = g.compile()
        cfg = {"thread_id": "dangling"}
        llm.add(tool_calls(("get_weather", {"city": "Oslo"})), text("never mind then"))
        await app.ainvoke({"messages": ["weather?"]}, dict(cfg))  # the call is never run
        out = await app.ainvoke({"messages": ["forget it"]}, dict(cfg))
        assert out["messages"][-1].text() == "never mind then"
        sent = llm.bodies[-1]["messages"]
        assert roles(llm.bodies[-1]) == ["user", "assistant", "tool", "user"]
        assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
        assert sent[2]["content"] == NOT_RUN
        state = await app.aget_state(cfg)
        assert [m.role for m in state.context] == ["user", "assistant", "user", "assistant"]


def test_pairing_keeps_order_of_moved_messages_and_multi_result_messages() -> None:
    from tenxgraph.core.state.message_block import ToolCallBlock, ToolResultBlock

    call = Message(
        role="assistant",
        content=[
            ToolCallBlock(id="a", name="f", args={}),
            ToolCallBlock(id="b", name="f", args={}),
        ],
    )
    u1, u2 = Message.text_message("one"), Message.text_message("two")
    both = Message(
        role="tool",
        content=[
            ToolResultBlock(tool_call_id="b", content="B"),
            ToolResultBlock(tool_call_id="a", content="A"),
        ],
    )
    msgs = [Message.text_message("q"), call, u1, u2, both]
    out = pair_tool_results(msgs)
    assert [m.text() for m in out[2:]] == ["B", "one", "two"] and out[2] is both
    assert msgs == [msgs[0], call, u1, u2, both]  # the input list is untouched
    plain = [Message.text_message("q"), Message.text_message("a", role="assistant")]
    assert pair_tool_results(plain) == plain
