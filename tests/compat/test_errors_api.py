"""The error catalogue as 10xGraph's error-codes page and graph reference describe it:
``to_dict()``, the documented codes and hierarchy, and what a sync call inside an event loop
raises. Run-time errors are provoked for real on every store."""

from __future__ import annotations

import asyncio

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
    sync_backend_fixture,
)

from tenxgraph.core.exceptions import (
    GraphError,
    GraphRecursionError,
    GraphStopRequested,
    MetricsError,
    NodeError,
    NodeTimeoutError,
    ResourceNotFoundError,
    StaleStateError,
    StorageError,
    SyncInEventLoopError,
    TenxGraphError,
    ToolTimeoutError,
    ValidationError,
)
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END


def looping_graph() -> StateGraph:
    g = StateGraph()
    g.add_node("spin", lambda state: None)
    g.set_entry_point("spin")
    g.add_edge("spin", "spin")
    return g


def test_errors_are_built_the_way_the_docs_build_them() -> None:
    err = GraphError(
        message="graph failed to start", error_code="GRAPH_000", context={"graph": "g"}
    )
    assert str(err) == "[GRAPH_000] graph failed to start"
    assert err.to_dict() == {
        "error_type": "GraphError",
        "error_code": "GRAPH_000",
        "message": "graph failed to start",
        "context": {"graph": "g"},
    }
    custom = NodeError(message="tool blew up", error_code="NODE_001", context={"node": "tools"})
    assert custom.to_dict()["error_code"] == "NODE_001"


def test_default_codes_follow_the_error_codes_page() -> None:
    assert GraphError().error_code == "GRAPH_000"
    assert NodeError().error_code == "NODE_000"
    assert GraphRecursionError().error_code == "RECURSION_000"
    assert ResourceNotFoundError().error_code == "STORAGE_NOT_FOUND_000"
    assert ValidationError().error_code == "VALIDATION_000"
    assert MetricsError().error_code == "METRICS_000"
    assert StorageError().error_code == "STORAGE_000"
    # The durability guide's code for a lost compare-and-swap, kept on purpose.
    assert StaleStateError().error_code == "STORAGE_CONFLICT_000"


def test_hierarchy_follows_the_error_codes_page() -> None:
    assert issubclass(NodeError, GraphError)
    assert issubclass(NodeTimeoutError, NodeError)
    assert issubclass(ToolTimeoutError, NodeTimeoutError)
    assert issubclass(GraphRecursionError, GraphError)
    assert issubclass(MetricsError, StorageError)
    assert issubclass(StaleStateError, StorageError)
    assert issubclass(GraphStopRequested, Exception)
    assert not issubclass(GraphStopRequested, TenxGraphError)
    signal = GraphStopRequested("tools")
    assert signal.node_name == "tools" and not hasattr(signal, "error_code")


@pytest.mark.anyio
async def test_recursion_error_from_a_real_run(backend: Backend) -> None:
    app = looping_graph().compile(checkpointer=backend.new())
    cfg = {"thread_id": "loop", "recursion_limit": 4}
    with pytest.raises(GraphRecursionError) as info:
        await app.ainvoke({"messages": [Message.text_message("go")]}, cfg)
    data = info.value.to_dict()
    assert data["error_type"] == "GraphRecursionError"
    assert data["error_code"] == "RECURSION_000"
    assert data["context"]["recursion_limit"] == 4
    assert str(info.value).startswith("[RECURSION_000]")


@pytest.mark.anyio
async def test_storage_errors_from_real_stores(backend: Backend) -> None:
    cp = backend.new()
    cfg = {"thread_id": "cas"}
    await cp.aput_state(cfg, AgentState())
    with pytest.raises(ResourceNotFoundError) as missing:
        await cp.aget_version(cfg, 99)
    assert missing.value.to_dict()["error_code"] == "STORAGE_NOT_FOUND_000"
    stale = {"thread_id": "cas", "_checkpoint_version": 0}
    with pytest.raises(StaleStateError) as lost:
        await cp.aput_state(stale, AgentState())
    data = lost.value.to_dict()
    assert data["error_code"] == "STORAGE_CONFLICT_000"
    assert {"thread_id", "expected_version", "current_version"} <= set(data["context"])


@pytest.mark.anyio
async def test_bad_input_is_validation_000(backend: Backend) -> None:
    app = looping_graph().compile(checkpointer=backend.new())
    with pytest.raises(ValidationError) as info:
        await app.ainvoke(["not", "a", "dict"], {"thread_id": "bad"})  # type: ignore[arg-type]
    assert info.value.error_code == "VALIDATION_000"
    assert await app.aget_state({"thread_id": "bad"}) is None


def test_sync_invoke_inside_a_running_loop_is_a_runtime_error() -> None:
    g = StateGraph()
    g.add_node("a", lambda state: "hi")
    g.set_entry_point("a")
    g.add_edge("a", END)
    app = g.compile()

    async def misuse() -> None:
        app.invoke({"messages": [Message.text_message("x")]}, {"thread_id": "t"})

    with pytest.raises(RuntimeError) as info:
        asyncio.run(misuse())
    err = info.value
    assert isinstance(err, SyncInEventLoopError) and isinstance(err, GraphError)
    assert err.error_code == "GRAPH_007" and "ainvoke" in str(err)
    assert err.to_dict()["context"] == {"method": "invoke", "use": "ainvoke"}
