"""Building a graph as 10xGraph's graph reference shows it: the documented import paths,
``StateGraph[State](State())``, the documented ``StateGraph(...)`` and ``compile(...)``
arguments (with their effect, or refused when tenxgraph lacks the feature), anything else
refused, and ``aclose()`` twice."""

from __future__ import annotations

from typing import Annotated

import anyio
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
    sync_backend_fixture,
)
from pydantic import Field

import tenxgraph.core as core
import tenxgraph.core.graph as graph_pkg
import tenxgraph.core.state.reducers as reducers
import tenxgraph.utils as utils
from tenxgraph.core.exceptions import GraphError, UnsupportedArgumentError
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END, START


class Basket(AgentState):
    owner: str = "nobody"
    items: Annotated[list[str], reducers.append_items] = Field(default_factory=list)


def basket_graph(state: Basket) -> StateGraph:
    g = StateGraph[Basket](state)
    g.add_node("add", lambda state: {"items": [f"item-{len(state.items)}"]})
    g.add_edge(START, "add")
    g.add_edge("add", END)
    return g


def test_documented_paths_name_the_same_objects() -> None:
    assert core.StateGraph is graph_pkg.StateGraph
    assert core.Agent is graph_pkg.Agent and core.ToolNode is graph_pkg.ToolNode
    for name in ("add_messages", "append_items", "replace_messages", "replace_value"):
        assert getattr(utils, name) is getattr(reducers, name)
    assert reducers.Message is Message


@pytest.mark.anyio
async def test_generic_state_graph_runs_with_its_state(backend: Backend) -> None:
    app = basket_graph(Basket(owner="ana")).compile(checkpointer=backend.new())
    assert isinstance(app, CompiledGraph)
    for _ in range(2):
        await app.ainvoke({"messages": [Message.text_message("add one")]}, {"thread_id": "b"})
    state = await app.aget_state({"thread_id": "b"})
    assert isinstance(state, Basket)
    assert (state.owner, state.items) == ("ana", ["item-0", "item-1"])


def test_unknown_arguments_are_refused_with_a_suggestion() -> None:
    with pytest.raises(UnsupportedArgumentError) as info:
        StateGraph(Basket, publsher=None)
    err = info.value
    assert isinstance(err, TypeError) and isinstance(err, GraphError)
    assert err.error_code == "GRAPH_009"
    assert err.context == {
        "argument": "publsher",
        "where": "StateGraph",
        "did_you_mean": "publisher",
    }
    g = basket_graph(Basket())
    with pytest.raises(UnsupportedArgumentError) as info2:
        g.compile(checkpoint=None)
    assert info2.value.context["did_you_mean"] == "checkpointer"
    for name in ("recursion_limit", "execution_timeout"):  # run settings, not compile arguments
        with pytest.raises(UnsupportedArgumentError) as info3:
            g.compile(**{name: 5})
        assert info3.value.error_code == "GRAPH_009" and "config=" in str(info3.value)


def test_context_manager_is_accepted_and_checked() -> None:
    from tenxgraph.core.exceptions import GraphError
    from tenxgraph.core.state import MessageContextManager

    manager = MessageContextManager(max_messages=3)
    assert StateGraph(Basket, context_manager=manager).context_manager is manager
    with pytest.raises(GraphError) as info:
        StateGraph(Basket, context_manager=object())
    assert info.value.error_code == "GRAPH_001" and "BaseContextManager" in str(info.value)


def test_container_and_lifecycle_hook_take_only_their_types() -> None:
    # Provided now (tests/compat/test_dependency_injection_api.py and
    # test_lifecycle_hooks_api.py): a value of the wrong type is refused, None means "not used".
    from tenxgraph.core.exceptions import GraphError

    StateGraph(Basket, container=None)
    with pytest.raises(GraphError) as info:
        StateGraph(Basket, container=object())
    assert info.value.error_code == "GRAPH_001"
    basket_graph(Basket()).compile(lifecycle_hook=None)
    with pytest.raises(GraphError) as info:
        basket_graph(Basket()).compile(lifecycle_hook=object())
    assert info.value.error_code == "GRAPH_001"


def test_documented_compile_features_tenxgraph_lacks_are_refused() -> None:
    g = basket_graph(Basket())
    g.compile(store=None)
    with pytest.raises(UnsupportedArgumentError) as info:
        g.compile(store=object())
    assert info.value.error_code == "GRAPH_010"


def test_compile_takes_a_media_store_and_refuses_other_objects() -> None:
    from tenxgraph.storage.media import InMemoryMediaStore

    g = basket_graph(Basket())
    store = InMemoryMediaStore()
    assert g.compile(media_store=store).media_store is store
    assert g.compile(media_store=None).media_store is None
    with pytest.raises(GraphError) as info:
        g.compile(media_store=object())
    assert info.value.error_code == "GRAPH_001"


@pytest.mark.parametrize("bad", [-1, "30", True])
def test_shutdown_timeout_must_be_seconds(bad: object) -> None:
    with pytest.raises(UnsupportedArgumentError):
        basket_graph(Basket()).compile(shutdown_timeout=bad)  # type: ignore[arg-type]


def slow_graph(started: anyio.Event, release: anyio.Event) -> StateGraph:
    async def slow(state: AgentState) -> str:
        started.set()
        await release.wait()
        return "finished"

    g = StateGraph()
    g.add_node("slow", slow)
    g.set_entry_point("slow")
    g.add_edge("slow", END)
    return g


@pytest.mark.anyio
async def test_aclose_waits_up_to_shutdown_timeout_for_runs_in_flight(backend: Backend) -> None:
    started, release = anyio.Event(), anyio.Event()
    app = slow_graph(started, release).compile(checkpointer=backend.new(), shutdown_timeout=10)
    results: list[dict] = []

    async def run() -> None:
        results.append(
            await app.ainvoke({"messages": [Message.text_message("go")]}, {"thread_id": "s"})
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await started.wait()
        closing: list[dict] = []

        async def close() -> None:
            closing.append(await app.aclose())

        tg.start_soon(close)
        await anyio.sleep(0.1)
        assert closing == []  # still waiting for the run
        release.set()
    assert len(closing) == 1
    assert closing[0]["status"] == "closed" and closing[0]["runs_in_flight"] == 0
    assert results[0]["messages"][-1].text() == "finished"
    assert await app.aclose() == {"status": "already_closed"}


@only("memory")
@pytest.mark.anyio
async def test_aclose_stops_waiting_at_shutdown_timeout(backend: Backend) -> None:
    started, release = anyio.Event(), anyio.Event()
    app = slow_graph(started, release).compile(checkpointer=backend.new(), shutdown_timeout=0.2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(app.ainvoke, {"messages": [Message.text_message("go")]}, {"thread_id": "s"})
        await started.wait()
        with anyio.fail_after(5):
            closed = await app.aclose()
            assert (closed["status"], closed["runs_in_flight"]) == ("closed", 1)
        release.set()


@pytest.mark.anyio
async def test_async_with_then_explicit_aclose_is_safe(backend: Backend) -> None:
    app = basket_graph(Basket()).compile(checkpointer=backend.new())
    async with app:
        await app.ainvoke({"messages": [Message.text_message("x")]}, {"thread_id": "w"})
        assert (await app.aclose())["status"] == "closed"
    assert await app.aclose() == {"status": "already_closed"}
    # A run after closing reopens what it needs, and closing becomes meaningful again.
    await app.ainvoke({"messages": [Message.text_message("y")]}, {"thread_id": "w"})
    assert (await app.aclose())["status"] == "closed"


def test_sync_close_twin(sync_backend: Backend) -> None:
    app = basket_graph(Basket()).compile(checkpointer=sync_backend.new())
    app.invoke({"messages": [Message.text_message("x")]}, {"thread_id": "c"})
    assert app.close()["status"] == "closed"
    assert app.close() == {"status": "already_closed"}
