"""``interrupt`` and ``rollback`` never leave an assistant tool call without its result (issue
29): a live run stopped at each node boundary of a model -> tools -> model loop, by a second run
on the same thread, leaves a thread in which every call of every assistant message is answered
by a later tool message, and the second run's input comes after those answers.

Before the fix, a run stopped between its model node and its tool node left the calls dangling
and the next run appended its user message after them: OpenAI-style APIs refuse that
conversation (HTTP 400)."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
)

from tenxgraph.core._runner import STOP_POLL_S
from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message, ToolCallBlock
from tenxgraph.core.state.message_block import ToolResultBlock
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio

TIMING = {"lease_ttl_s": 2.0, "lease_renew_s": 0.5, "state_history_limit": 0}


class Gate:
    """Holds the first run inside node ``at`` until released."""

    def __init__(self, at: str) -> None:
        self.at = at
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.used = False

    async def visit(self, node: str) -> None:
        if node == self.at and not self.used:
            self.used = True
            self.entered.set()
            await self.release.wait()


def loop_graph(cp: Any, gate: Gate, effects: list[str]) -> Any:
    async def model(state: AgentState) -> Message:
        await gate.visit("model")
        if state.context[-1].role == "tool":
            return Message.text_message("done", role="assistant")
        calls = [
            ToolCallBlock(id=f"c-{uuid.uuid4().hex[:8]}", name="lookup", args={"q": i})
            for i in range(2)
        ]
        return Message(role="assistant", content=calls)

    def lookup(q: int, tool_call_id: str) -> str:
        effects.append(tool_call_id)
        return f"found {q}"

    tools = ToolNode([lookup])

    async def run_tools(state: AgentState, config: dict[str, Any]) -> Any:
        await gate.visit("tools")
        return await tools(state, config)

    def route(state: AgentState) -> str:
        return "tools" if state.context[-1].tool_calls() else END

    g = StateGraph()
    g.add_node("model", model)
    g.add_node("tools", run_tools)
    g.set_entry_point("model")
    g.add_conditional_edges("model", route, {"tools": "tools", END: END})
    g.add_edge("tools", "model")
    return g.compile(checkpointer=cp)


def unanswered(context: list[Message]) -> list[str]:
    answered = {
        b.tool_call_id
        for m in context
        if m.role == "tool"
        for b in m.content
        if isinstance(b, ToolResultBlock)
    }
    return [
        c.id
        for m in context
        if m.role == "assistant"
        for c in m.tool_calls()
        if c.id not in answered
    ]


@only("memory", "sqlite", "postgres")
@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
@pytest.mark.parametrize("at", ["model", "tools"])
async def test_a_stopped_run_leaves_no_call_without_a_result(
    backend: Backend, strategy: str, at: str
) -> None:
    cp = backend.new(**TIMING)
    gate = Gate(at)
    effects: list[str] = []
    app = loop_graph(cp, gate, effects)
    cfg = {"thread_id": "t", "multitask_strategy": strategy}
    # An earlier finished turn (not held), so that rollback has a state to go back to.
    gate.used = True
    await app.ainvoke({"messages": [Message.text_message("zero", message_id="u0")]}, dict(cfg))
    gate.used = False
    first: dict[str, Any] = {}

    async def run_first() -> None:
        try:
            first["out"] = await app.ainvoke(
                {"messages": [Message.text_message("one", message_id="u1")]}, dict(cfg)
            )
        except Exception as exc:  # noqa: BLE001 - recorded for the assertions
            first["error"] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_first)
        await gate.entered.wait()
        second: dict[str, Any] = {}

        async def run_second() -> None:
            second["out"] = await app.ainvoke(
                {"messages": [Message.text_message("two", message_id="u2")]}, dict(cfg)
            )

        tg.start_soon(run_second)
        # The second run asks the first to stop; the first sees the durable request at its
        # next node boundary once its poll is due (STOP_POLL_S after its start).
        await anyio.sleep(STOP_POLL_S + 0.2)
        gate.release.set()
    assert "error" not in first, first
    assert first["out"]["messages"][-1].text() != "done"  # it was stopped, not finished
    state = await cp.aget_state({"thread_id": "t"})
    ctx = state.context
    assert unanswered(ctx) == [], [(m.role, m.text()) for m in ctx]
    texts = [m.text() for m in ctx if m.role == "user"]
    assert texts[-1] == "two"
    # every tool call answered before the second run's input, then the second run's own loop
    i_two = next(i for i, m in enumerate(ctx) if m.message_id == "u2")
    assert unanswered(ctx[:i_two]) == []
    assert ctx[-1].text() == "done"
    # no call ran twice
    assert len(effects) == len(set(effects))
