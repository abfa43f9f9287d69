"""Agent + ToolNode inside a real graph and checkpointer (memory, SQLite, Postgres), wired as
10xGraph's "Add a tool" guide wires them: the ledger answers replays, a reused ``tool_call_id``
for a different call runs, and a failed ledger write stops the run without advancing the thread.

Process kills (SIGKILL) are covered by the crash tests; here a "crash" is simulated in process:
the checkpoint after the tool node fails once, or a tool raises a ``BaseException``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.core.exceptions import LedgerWriteError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message, ToolResultBlock
from tenxgraph.models import ScriptedModel
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.telemetry import EVENT
from tenxgraph.utils.constants import END

pytestmark = pytest.mark.anyio

KINDS = [
    pytest.param(("memory", "asyncio"), id="memory-asyncio"),
    pytest.param(("memory", "trio"), id="memory-trio"),
    pytest.param(("sqlite", "asyncio"), id="sqlite-asyncio"),
    pytest.param(("sqlite", "trio"), id="sqlite-trio"),
    pytest.param(("postgres", "asyncio"), id="postgres", marks=pytest.mark.postgres),
]


class Stores:
    """Checkpointers over one storage location; :meth:`new` is "another process" for the
    durable kinds (the in-memory store can only be shared as the same object)."""

    def __init__(self, kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.kind = kind
        self.path = tmp_path / "graph.db"
        self.made: list[BaseCheckpointer] = []
        self._memory: BaseCheckpointer | None = None
        if kind == "postgres":
            self.dsn = request.getfixturevalue("pg_dsn")
            self.schema = request.getfixturevalue("pg_schema")

    def new(self) -> BaseCheckpointer:
        from tenxgraph.storage.checkpointer import (
            InMemoryCheckpointer,
            PgCheckpointer,
            SqliteCheckpointer,
        )

        if self.kind == "memory":
            if self._memory is None:
                self._memory = InMemoryCheckpointer()
                self.made.append(self._memory)
            return self._memory
        cp = (
            SqliteCheckpointer(self.path)
            if self.kind == "sqlite"
            else PgCheckpointer(self.dsn, schema=self.schema)
        )
        self.made.append(cp)
        return cp

    async def make_ledger_unwritable(self, cp: BaseCheckpointer) -> Callable[[], Any]:
        """Make inserts into the ledger table fail in the store itself; returns an undo."""
        await cp.asetup()
        if self.kind == "sqlite":
            import sqlite3

            with sqlite3.connect(self.path) as conn:
                conn.execute(
                    "CREATE TRIGGER deny_ledger BEFORE INSERT ON tool_executions "
                    "BEGIN SELECT RAISE(ABORT, 'tool_executions is read-only'); END"
                )

            def undo() -> None:
                with sqlite3.connect(self.path) as conn:
                    conn.execute("DROP TRIGGER deny_ledger")

            return undo
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(
                    f'CREATE FUNCTION "{self.schema}".deny() RETURNS trigger AS $$ BEGIN '
                    "RAISE EXCEPTION 'tool_executions is read-only'; END $$ LANGUAGE plpgsql"
                )
                conn.execute(
                    f'CREATE TRIGGER deny BEFORE INSERT ON "{self.schema}".tenxgraph_tool_executions '
                    f'FOR EACH ROW EXECUTE FUNCTION "{self.schema}".deny()'
                )

            def undo_pg() -> None:
                with psycopg.connect(self.dsn, autocommit=True) as conn:
                    conn.execute(f'DROP TRIGGER deny ON "{self.schema}".tenxgraph_tool_executions')

            return undo_pg
        # memory: the store has no table to lock; make its ledger write fail instead
        original = cp.store.ledger_put

        async def failing(key: Any, entry: Any) -> Any:
            raise RuntimeError("ledger is read-only")

        cp.store.ledger_put = failing  # type: ignore[method-assign]

        def undo_memory() -> None:
            cp.store.ledger_put = original  # type: ignore[method-assign]

        return undo_memory

    async def aclose(self) -> None:
        for cp in reversed(self.made):
            await cp.aclose()


@pytest.fixture(params=KINDS)
def kind_and_loop(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


@pytest.fixture
def anyio_backend(kind_and_loop: tuple[str, str]) -> str:
    return kind_and_loop[1]


@pytest.fixture
async def stores(
    kind_and_loop: tuple[str, str], tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Stores]:
    s = Stores(kind_and_loop[0], tmp_path, request)
    try:
        yield s
    finally:
        await s.aclose()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Capture tenxgraph's spans with the OpenTelemetry SDK (without touching the global
    provider)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import tenxgraph.telemetry as telemetry

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(telemetry, "tracer", lambda: provider.get_tracer("tenxgraph"))
    yield exporter
    provider.shutdown()


def ledger_hits(exporter: Any) -> list[tuple[str, str]]:
    out = []
    for sp in exporter.get_finished_spans():
        for ev in sp.events:
            if ev.name == EVENT.LEDGER_HIT:
                out.append(
                    (ev.attributes["gen_ai.tool.name"], ev.attributes["gen_ai.tool.call.id"])
                )
    return out


# -- the guide's graph ------------------------------------------------------------------------------
def route(state: AgentState) -> str:
    """Route to TOOL if the last message has tool calls, otherwise END (10xGraph's guide)."""
    if not state.context:
        return END
    last = state.context[-1]
    if hasattr(last, "tools_calls") and last.tools_calls and last.role == "assistant":
        return "TOOL"
    if last.role == "tool":
        return "MAIN"
    return END


def build(model: Any, tools: list[Callable[..., Any]], checkpointer: BaseCheckpointer) -> Any:
    tool_node = ToolNode(tools)
    agent = Agent(
        model=model,
        system_prompt=[{"role": "system", "content": "You are a helpful assistant. Use tools."}],
        tool_node="TOOL",
    )
    graph = StateGraph(AgentState)
    graph.add_node("MAIN", agent)
    graph.add_node("TOOL", tool_node)
    graph.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    graph.add_edge("TOOL", "MAIN")
    graph.set_entry_point("MAIN")
    return graph.compile(checkpointer=checkpointer)


def calling_model(*calls: tuple[str, dict[str, Any]], final: str = "done") -> ScriptedModel:
    """A non-deterministic model: the given calls with fresh random ids on every call until a
    tool result is the last message, then ``final``."""

    def answer(messages: list[Message], tools: list[dict] | None) -> dict[str, Any]:
        if messages[-1].role == "tool":
            return {"content": final}
        return {
            "content": "",
            "tool_calls": [
                {"id": f"call_{uuid.uuid4().hex[:8]}", "name": name, "arguments": args}
                for name, args in calls
            ],
        }

    return ScriptedModel.from_fn(answer)


def tool_results(messages: list[Message]) -> list[Any]:
    return [
        b.content
        for m in messages
        if m.role == "tool"
        for b in m.content
        if isinstance(b, ToolResultBlock)
    ]


async def test_guide_wiring_runs_tool_then_answers(stores: Stores) -> None:
    ran: list[str] = []

    def get_weather(location: str) -> str:
        """Get the current weather for a specific location."""
        ran.append(location)
        return f"The weather in {location} is sunny and 22°C."

    model = ScriptedModel(
        [
            {
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "name": "get_weather", "arguments": {"location": "London"}}
                ],
            },
            "The weather in London is sunny and 22°C.",
        ]
    )
    cp = stores.new()
    app = build(model, [get_weather], cp)
    config = {"thread_id": f"guide-{uuid.uuid4().hex[:8]}"}
    result = await app.ainvoke(
        {"messages": [Message.text_message("What is the weather in London?")]}, config
    )
    msgs = result["messages"]
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[-1].text() == "The weather in London is sunny and 22°C."
    assert tool_results(msgs) == ["The weather in London is sunny and 22°C."]
    assert ran == ["London"]
    assert await cp.aledger_count(config) == 1
    # the model saw the system prompt, the question, its call and the tool result; and the tools
    second = model.calls[1]
    assert [m.role for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert [t["function"]["name"] for t in second["tools"]] == ["get_weather"]
    assert second["tools"][0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    }


async def test_replay_after_crash_answers_from_ledger(stores: Stores, spans: Any) -> None:
    """Three parallel calls; the 'process' dies after two reached the ledger. On resume the two
    are ledger hits, the third runs once, and the tool messages keep the model's order."""
    ran: list[str] = []
    crash = {"on": True}

    class Crash(BaseException):
        """Stands in for the process dying mid-node."""

    async def step(n: int) -> str:
        if n == 3 and crash["on"]:
            raise Crash()
        ran.append(f"step{n}")
        return f"result {n}"

    model = calling_model(("step", {"n": 1}), ("step", {"n": 2}), ("step", {"n": 3}))
    cp = stores.new()
    config = {"thread_id": f"replay-{uuid.uuid4().hex[:8]}"}
    with pytest.raises(Crash):
        await build(model, [step], cp).ainvoke({"messages": [Message.text_message("go")]}, config)
    assert sorted(ran) == ["step1", "step2"]
    assert await cp.aledger_count(config) == 2
    stored = await cp.aget_state(config)
    assert stored is not None and stored.context[-1].role == "assistant"  # thread did not advance
    calls = stored.context[-1].tool_calls()

    crash["on"] = False
    peer = stores.new()  # a new process over the same data
    result = await build(model, [step], peer).ainvoke(None, {"thread_id": config["thread_id"]})
    assert sorted(ran) == ["step1", "step2", "step3"]  # nothing ran twice
    final = result["messages"]
    assert final[-1].text() == "done"
    tool_msgs = [m for m in (await peer.aget_state(config)).context if m.role == "tool"]
    assert [m.tool_call_id for m in tool_msgs] == [c.id for c in calls]  # model order
    assert tool_results(tool_msgs) == ["result 1", "result 2", "result 3"]
    assert sorted(ledger_hits(spans)) == sorted([("step", calls[0].id), ("step", calls[1].id)])
    assert await peer.aledger_count(config) == 3


async def test_replay_after_checkpoint_lost_is_all_hits(stores: Stores, spans: Any) -> None:
    """The tools ran and were recorded, then the checkpoint after the tool node failed (a kill
    between the ledger and the checkpoint): the replayed node answers every call from the ledger
    and the thread ends with the first run's tool messages."""
    ran: list[str] = []

    def charge(amount: int) -> str:
        ran.append(f"charge {amount}")
        return f"charged {amount}"

    cp = stores.new()
    original = cp.acommit
    failed = {"done": False}

    async def acommit(config: dict, state: AgentState, prev: Any, **lease: Any) -> Any:
        if not failed["done"] and state.context and state.context[-1].role == "tool":
            failed["done"] = True
            raise RuntimeError("killed before the checkpoint")
        return await original(config, state, prev, **lease)

    cp.acommit = acommit  # type: ignore[method-assign]
    model = calling_model(("charge", {"amount": 5}))
    config = {"thread_id": f"lost-{uuid.uuid4().hex[:8]}"}
    with pytest.raises(RuntimeError, match="killed before the checkpoint"):
        await build(model, [charge], cp).ainvoke(
            {"messages": [Message.text_message("pay")]}, config
        )
    assert ran == ["charge 5"]
    result = await build(model, [charge], stores.new()).ainvoke(
        None, {"thread_id": config["thread_id"]}
    )
    assert ran == ["charge 5"]
    assert result["messages"][-1].text() == "done"
    assert len(ledger_hits(spans)) == 1


async def test_reused_tool_call_id_for_a_different_call_runs(stores: Stores) -> None:
    ran: list[str] = []

    def lookup(query: str) -> str:
        ran.append(query)
        return f"found {query}"

    model = ScriptedModel(
        [
            {
                "content": "",
                "tool_calls": [{"id": "call_0", "name": "lookup", "arguments": {"query": "first"}}],
            },
            "first answer",
            {
                "content": "",
                "tool_calls": [
                    {"id": "call_0", "name": "lookup", "arguments": {"query": "second"}}
                ],
            },
            "second answer",
        ]
    )
    cp = stores.new()
    app = build(model, [lookup], cp)
    config = {"thread_id": f"reuse-{uuid.uuid4().hex[:8]}"}
    await app.ainvoke({"messages": [Message.text_message("one")]}, config)
    result = await app.ainvoke(
        {"messages": [Message.text_message("two")]}, {"thread_id": config["thread_id"]}
    )
    assert ran == ["first", "second"]
    assert tool_results(result["messages"]) == ["found second"]
    assert await cp.aledger_count(config) == 2


async def test_ledger_write_failure_stops_run_and_thread_does_not_advance(stores: Stores) -> None:
    ran: list[str] = []

    def send_email(to: str) -> str:
        ran.append(to)
        return "sent"

    cp = stores.new()
    undo = await stores.make_ledger_unwritable(cp)
    model = calling_model(("send_email", {"to": "a@example.com"}))
    config = {"thread_id": f"unwritable-{uuid.uuid4().hex[:8]}"}
    with pytest.raises(LedgerWriteError) as info:
        await build(model, [send_email], cp).ainvoke(
            {"messages": [Message.text_message("mail")]}, config
        )
    assert info.value.error_code == "STORAGE_LEDGER_001"
    assert info.value.context["tool"] == "send_email"
    assert ran == ["a@example.com"]
    reader = stores.new()
    stored = await reader.aget_state({"thread_id": config["thread_id"]})
    assert stored is not None
    assert stored.context[-1].role == "assistant" and stored.context[-1].tools_calls
    assert not any(m.role == "tool" for m in stored.context)
    assert stored.execution_meta.current_node == "TOOL"
    assert await reader.aledger_count({"thread_id": config["thread_id"]}) == 0
    # once the store is fixed the thread resumes; the unrecorded call runs again (nothing
    # tells it already ran: the reason the run had to stop rather than go on)
    undo()
    result = await build(model, [send_email], stores.new()).ainvoke(
        None, {"thread_id": config["thread_id"]}
    )
    assert result["messages"][-1].text() == "done"
    assert ran == ["a@example.com", "a@example.com"]


async def test_ledger_read_failure_warns_and_runs(
    stores: Stores, caplog: pytest.LogCaptureFixture, spans: Any
) -> None:
    ran: list[int] = []

    def ping() -> str:
        ran.append(1)
        return "pong"

    cp = stores.new()

    async def broken_get(config: dict, call_key: str) -> Any:
        raise RuntimeError("cache and database unreachable")

    cp.aledger_get = broken_get  # type: ignore[method-assign]
    # The read is retried for at most the tool's timeout (here 0.2 s) before the tool runs.
    config = {"thread_id": f"readfail-{uuid.uuid4().hex[:8]}", "tool_timeout": 0.2}
    with caplog.at_level(logging.WARNING, logger="tenxgraph.core.graph.tool_node"):
        result = await build(calling_model(("ping", {})), [ping], cp).ainvoke(
            {"messages": [Message.text_message("ping?")]}, config
        )
    assert ran == [1] and tool_results(result["messages"]) == ["pong"]
    assert "ledger read failed for tool 'ping'" in caplog.text
    events = [ev.name for sp in spans.get_finished_spans() for ev in sp.events]
    assert EVENT.LEDGER_READ_FAILED in events


async def test_tool_errors_answer_the_model(stores: Stores) -> None:
    def divide(a: int, b: int) -> float:
        return a / b

    model = calling_model(
        ("divide", {"a": 1, "b": 0}), ("nope", {}), ("divide", {"a": "x", "b": 1})
    )
    cp = stores.new()
    config = {"thread_id": f"errors-{uuid.uuid4().hex[:8]}"}
    result = await build(model, [divide], cp).ainvoke(
        {"messages": [Message.text_message("go")]}, config
    )
    errors = [b for m in result["messages"] if m.role == "tool" for b in m.content]
    assert [b.is_error for b in errors] == [True, True, True]
    assert errors[0].content == "Error: tool 'divide' raised ZeroDivisionError: division by zero"
    assert errors[1].content.startswith("Error: unknown tool 'nope'")
    assert errors[2].content.startswith("Error: invalid arguments for tool 'divide'")
    assert result["messages"][-1].text() == "done"
    assert await cp.aledger_count(config) == 3  # errors are recorded too


def test_identical_call_repeated_in_one_message_runs_once(tmp_path) -> None:
    from tenxgraph.core.graph import Agent, StateGraph, ToolNode
    from tenxgraph.core.state import Message
    from tenxgraph.models import ScriptedModel
    from tenxgraph.utils import END

    effects: list[int] = []

    def act(n: int) -> str:
        """Record a side effect."""
        effects.append(n)
        return f"done {n}"

    call = {"id": "dup", "name": "act", "arguments": {"n": 7}}
    model = ScriptedModel([{"content": "", "tool_calls": [call, dict(call)]}, "final"])
    g = StateGraph()
    g.add_node("MAIN", Agent(model=model, tool_node="TOOL"))
    g.add_node("TOOL", ToolNode([act]))

    def route(state):
        last = state.context[-1]
        return "TOOL" if last.role == "assistant" and last.tool_calls() else END

    g.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    out = g.compile().invoke({"messages": [Message.text_message("go")]}, {"thread_id": "dup"})
    assert effects == [7]
    assert [m.role for m in out["messages"]] == ["user", "assistant", "tool", "assistant"]
