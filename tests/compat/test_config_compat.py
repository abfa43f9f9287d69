"""Run configs as 10xGraph documents them, and LangGraph's ``{"configurable": {...}}`` shape,
which tenxgraph reads rather than silently starting a new thread; deadlines that ``None`` or
a non-positive number disable (graph reference)."""

from __future__ import annotations

import datetime
import time

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
    sync_backend_fixture,
)

from tenxgraph.core.config import normalize_config
from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END


def echo_graph() -> StateGraph:
    g = StateGraph()

    def echo(state: AgentState) -> str:
        return f"echo {state.context[-1].text()}"

    g.add_node("echo", echo)
    g.set_entry_point("echo")
    g.add_edge("echo", END)
    return g


def texts(state: AgentState | None) -> list[str]:
    return [] if state is None else [m.text() for m in state.context]


@pytest.mark.anyio
async def test_configurable_thread_id_continues_the_same_thread(backend: Backend) -> None:
    app = echo_graph().compile(checkpointer=backend.new())
    lang = {"configurable": {"thread_id": "lg-1", "user_id": "ana"}}
    await app.ainvoke({"messages": [Message.text_message("one")]}, lang)
    await app.ainvoke(
        {"messages": [Message.text_message("two")]},
        {"configurable": {"thread_id": "lg-1", "user_id": "ana"}},
    )
    state = await app.aget_state({"thread_id": "lg-1", "user_id": "ana"})
    assert texts(state) == ["one", "echo one", "two", "echo two"]
    assert await app.aget_state({"thread_id": "lg-1", "user_id": "bob"}) is None
    threads = await app.checkpointer.alist_threads({"configurable": {"user_id": "ana"}})
    assert [t.thread_id for t in threads] == ["lg-1"]


@pytest.mark.anyio
async def test_conflicting_or_unsupported_configurable_keys_are_refused(backend: Backend) -> None:
    app = echo_graph().compile(checkpointer=backend.new())
    msg = {"messages": [Message.text_message("x")]}
    for cfg, key in (
        ({"thread_id": "a", "configurable": {"thread_id": "b"}}, "thread_id"),
        ({"configurable": {"threadId": "a"}}, "threadId"),
        ({"configurable": {"thread_id": "a", "checkpoint_id": "1ef"}}, "checkpoint_id"),
        ({"configurable": "a"}, "configurable"),
    ):
        with pytest.raises(ConfigError) as info:
            await app.ainvoke(msg, cfg)
        assert info.value.error_code == "CONFIG_001" and info.value.context["key"] == key
    for tid in ("a", "b"):
        assert await app.aget_state({"thread_id": tid}) is None


def test_the_same_value_in_both_places_is_accepted() -> None:
    cfg = {"thread_id": 7, "configurable": {"thread_id": "7", "checkpoint_ns": "", "app_key": 1}}
    rc = normalize_config(cfg)
    assert rc.thread_id == "7"
    assert cfg["configurable"]["app_key"] == 1 and "app_key" not in cfg


def test_sync_run_with_configurable(sync_backend: Backend) -> None:
    app = echo_graph().compile(checkpointer=sync_backend.new())
    app.invoke({"messages": [Message.text_message("a")]}, {"configurable": {"thread_id": "s"}})
    app.invoke({"messages": [Message.text_message("b")]}, {"configurable": {"thread_id": "s"}})
    assert texts(app.get_state({"thread_id": "s"})) == ["a", "echo a", "b", "echo b"]


@pytest.mark.anyio
async def test_non_positive_or_none_deadlines_disable_them(backend: Backend) -> None:
    g = StateGraph()

    def slow(state: AgentState) -> str:
        time.sleep(0.05)
        return "done"

    g.add_node("slow", slow)
    g.set_entry_point("slow")
    g.add_edge("slow", END)
    app = g.compile(checkpointer=backend.new())
    for i, value in enumerate((0, -1, None)):
        cfg = {"thread_id": f"d{i}", "node_timeout": value, "tool_timeout": value}
        out = await app.ainvoke({"messages": [Message.text_message("go")]}, cfg)
        assert out["messages"][-1].text() == "done"
        assert cfg["node_timeout"] is None and cfg["tool_timeout"] is None
    with pytest.raises(ConfigError):
        await app.ainvoke({"messages": []}, {"thread_id": "d9", "node_timeout": "fast"})


@pytest.mark.anyio
async def test_each_run_gets_a_timestamp_unless_the_caller_gives_one(backend: Backend) -> None:
    seen: list[str] = []
    g = StateGraph()

    def stamp(state: AgentState, config: dict) -> None:
        seen.append(config["timestamp"])

    g.add_node("stamp", stamp)
    g.set_entry_point("stamp")
    g.add_edge("stamp", END)
    app = g.compile(checkpointer=backend.new())
    cfg: dict = {"thread_id": "ts"}
    await app.ainvoke({"messages": [Message.text_message("a")]}, cfg)
    await app.ainvoke({"messages": [Message.text_message("b")]}, cfg)
    assert len(seen) == 2 and seen[0] != seen[1]
    for value in seen:
        assert datetime.datetime.fromisoformat(value).tzinfo is not None
    fixed = {"thread_id": "ts", "timestamp": "2026-01-01T00:00:00+00:00"}
    await app.ainvoke({"messages": [Message.text_message("c")]}, fixed)
    assert seen[-1] == "2026-01-01T00:00:00+00:00"
    with pytest.raises(ConfigError):
        await app.ainvoke({"messages": []}, {"thread_id": "ts", "timestamp": 5})
