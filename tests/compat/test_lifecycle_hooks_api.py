"""Graph lifecycle hooks as 10xGraph's lifecycle-callbacks reference describes them: the call
points and their order, what a hook's returned state changes (and that it is what gets
stored), the pause / resume / stop / error variants, and that a hook cannot swallow a run's
error (memory, SQLite, Postgres, Postgres + Redis)."""

from __future__ import annotations

from typing import Any

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import GraphError, GraphRecursionError, ValidationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END, interrupt
from tenxgraph.utils.callbacks import CallbackManager, GraphLifecycleContext, GraphLifecycleHook


class Journal(GraphLifecycleHook):
    """Writes down every call it gets, as ``(method, detail)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.contexts: list[GraphLifecycleContext] = []

    async def on_graph_start(self, context, state):  # noqa: ANN001, ANN201
        self.contexts.append(context)
        self.calls.append(("start", len(state.context)))
        return None

    async def on_graph_end(self, context, final_state, messages, total_steps):  # noqa: ANN001, ANN201
        self.calls.append(("end", ([m.text() for m in messages], total_steps)))
        return None

    async def on_graph_error(self, context, error, partial_state, messages, step, node_name):  # noqa: ANN001, ANN201, PLR0913
        self.calls.append(("error", (type(error).__name__, node_name)))
        return None

    async def on_interrupt(self, context, interrupted_node, interrupt_type, state):  # noqa: ANN001, ANN201
        self.calls.append(("interrupt", (interrupted_node, interrupt_type)))
        return None

    async def on_resume(self, context, resumed_node, state, resume_data):  # noqa: ANN001, ANN201
        self.calls.append(("resume", (resumed_node, dict(resume_data))))
        return None

    async def on_checkpoint(self, context, state, messages, is_context_trimmed):  # noqa: ANN001, ANN201
        self.calls.append(("checkpoint", [m.text() for m in messages]))
        return None

    async def on_state_update(self, context, node_name, old_state, new_state, step):  # noqa: ANN001, ANN201
        self.calls.append(("update", (node_name, step)))
        return None


def two_nodes(*, fail_in_b: bool = False, ask_in_b: bool = False) -> StateGraph:
    def a(state):  # noqa: ANN001, ANN202
        return "from a"

    def b(state):  # noqa: ANN001, ANN202
        if fail_in_b:
            raise ValueError("b broke")
        if ask_in_b:
            return f"answer: {interrupt('approve?')}"
        return "from b"

    g = StateGraph()
    g.add_node("a", a)
    g.add_node("b", b)
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g


@pytest.mark.anyio
async def test_hooks_fire_in_the_documented_order(backend: Backend) -> None:
    hook = Journal()
    app = two_nodes().compile(checkpointer=backend.new(), lifecycle_hook=hook)
    cfg: dict[str, Any] = {"thread_id": "order"}
    await app.ainvoke({"messages": ["go"]}, cfg)
    # Durable mode: a checkpoint per node; the last one after on_graph_end.
    assert hook.calls == [
        ("start", 1),
        ("update", ("a", 0)),
        ("checkpoint", ["go", "from a"]),
        ("update", ("b", 1)),
        ("end", (["from a", "from b"], 2)),
        ("checkpoint", ["from b"]),
    ]
    ctx = hook.contexts[0]
    assert ctx.thread_id == "order" and ctx.run_id == cfg["run_id"]
    assert ctx.timestamp == cfg["timestamp"] and ctx.config is not None


class Enricher(GraphLifecycleHook):
    """Changes the state at each point, as the reference's examples do."""

    async def on_graph_start(self, context, state):  # noqa: ANN001, ANN201
        state.execution_meta.internal_data["trace_id"] = "t-1"
        return state

    async def on_state_update(self, context, node_name, old_state, new_state, step):  # noqa: ANN001, ANN201
        assert old_state is not new_state
        old_state.context.clear()  # a deep copy: the run must not see this
        new_state.execution_meta.internal_data.setdefault("seen", []).append(node_name)
        return new_state

    async def on_graph_end(self, context, final_state, messages, total_steps):  # noqa: ANN001, ANN201
        final_state.execution_meta.internal_data["trace_end"] = (
            final_state.execution_meta.internal_data["trace_id"]
        )
        return final_state

    async def on_checkpoint(self, context, state, messages, is_context_trimmed):  # noqa: ANN001, ANN201
        kept = [m for m in messages if "secret" not in m.text()]
        return state, kept


@pytest.mark.anyio
async def test_returned_states_are_what_is_stored(backend: Backend) -> None:
    def a(state):  # noqa: ANN001, ANN202
        return [
            Message.text_message("a secret", role="assistant"),
            Message.text_message("from a", role="assistant"),
        ]

    g = StateGraph()
    g.add_node("a", a)
    g.add_node("b", lambda state: "from b")
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    cp = backend.new()
    app = g.compile(checkpointer=cp, lifecycle_hook=Enricher())
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "enrich"})
    stored = await backend.peer(cp).aget_state({"thread_id": "enrich"})
    assert stored is not None
    assert [m.text() for m in stored.context] == ["go", "from a", "from b"]
    internal = stored.execution_meta.internal_data
    assert internal["trace_id"] == "t-1" and internal["trace_end"] == "t-1"
    assert internal["seen"] == ["a", "b"]
    assert str(stored.execution_meta.status) == "completed"  # the runtime's fields win


@only("memory", "sqlite", "postgres")
@pytest.mark.anyio
async def test_interrupt_then_resume(backend: Backend) -> None:
    class Approver(Journal):
        async def on_resume(self, context, resumed_node, state, resume_data):  # noqa: ANN001, ANN201
            await super().on_resume(context, resumed_node, state, resume_data)
            resume_data["resume"] = resume_data["resume"].upper()  # the node gets this
            return None

    hook = Approver()
    app = two_nodes(ask_in_b=True).compile(checkpointer=backend.new(), lifecycle_hook=hook)
    cfg: dict[str, Any] = {"thread_id": "hitl"}
    await app.ainvoke({"messages": ["go"]}, cfg)
    assert ("interrupt", ("b", "interrupt")) in hook.calls
    assert hook.calls[-1][0] == "checkpoint"  # the pause is checkpointed after on_interrupt
    hook.calls.clear()
    cfg2: dict[str, Any] = {"thread_id": "hitl"}
    out = await app.ainvoke({"resume": "yes"}, cfg2)
    assert out["messages"][-1].text() == "answer: YES"
    assert hook.calls[0] == ("resume", ("b", {"resume": "yes"}))
    assert hook.calls[1] == ("start", 2)
    assert cfg2["resume_data"] == {"resume": "YES"}
    assert hook.calls[-2][0] == "end"


@only("memory", "postgres+redis")
@pytest.mark.anyio
async def test_static_pauses_report_their_type(backend: Backend) -> None:
    hook = Journal()
    app = two_nodes().compile(
        checkpointer=backend.new(), lifecycle_hook=hook, interrupt_before=["b"]
    )
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "ib"})
    assert ("interrupt", ("b", "before")) in hook.calls
    hook.calls.clear()
    await app.ainvoke({"messages": ["ok"]}, {"thread_id": "ib"})
    assert hook.calls[0][0] == "resume" and hook.calls[0][1][0] == "b"
    assert [m.text() for m in hook.calls[0][1][1]["messages"]] == ["ok"]

    hook2 = Journal()
    app2 = two_nodes().compile(
        checkpointer=backend.new(), lifecycle_hook=hook2, interrupt_after=["a"]
    )
    await app2.ainvoke({"messages": ["go"]}, {"thread_id": "ia"})
    assert ("interrupt", ("a", "after")) in hook2.calls


class Masker(Journal):
    async def on_graph_error(self, context, error, partial_state, messages, step, node_name):  # noqa: ANN001, ANN201, PLR0913
        await super().on_graph_error(context, error, partial_state, messages, step, node_name)
        partial_state.execution_meta.internal_data["masked"] = True
        return partial_state, "failed (details logged)"


@only("memory", "sqlite", "postgres")
@pytest.mark.anyio
async def test_error_hook_masks_but_cannot_suppress(backend: Backend) -> None:
    hook = Masker()
    cp = backend.new()
    app = two_nodes(fail_in_b=True).compile(checkpointer=cp, lifecycle_hook=hook)
    with pytest.raises(ValueError, match="b broke"):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "err"})
    assert [c for c in hook.calls if c[0] == "error"] == [("error", ("ValueError", "b"))]
    assert hook.calls[-1][0] == "checkpoint"  # the error state passes on_checkpoint too
    stored = await cp.aget_state({"thread_id": "err"})
    assert stored is not None and stored.execution_meta.error == "failed (details logged)"
    assert stored.execution_meta.internal_data["masked"] is True
    assert str(stored.execution_meta.status) == "error"


class Broken(GraphLifecycleHook):
    async def on_graph_error(self, context, error, partial_state, messages, step, node_name):  # noqa: ANN001, ANN201, PLR0913
        raise RuntimeError("alerting is down")


@only("memory")
@pytest.mark.anyio
async def test_a_failing_error_hook_keeps_the_runs_error(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    app = two_nodes(fail_in_b=True).compile(checkpointer=backend.new(), lifecycle_hook=Broken())
    with pytest.raises(ValueError, match="b broke"):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "err2"})
    assert "on_graph_error raised RuntimeError" in caplog.text


@only("memory", "sqlite")
@pytest.mark.anyio
async def test_recursion_and_framework_errors_reach_the_error_hook(backend: Backend) -> None:
    hook = Masker()
    g = StateGraph()
    g.add_node("loop", lambda state: "again")
    g.set_entry_point("loop")
    g.add_conditional_edges("loop", lambda state: "loop", {"loop": "loop", END: END})
    cp = backend.new()
    app = g.compile(checkpointer=cp, lifecycle_hook=hook)
    with pytest.raises(GraphRecursionError):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "rec", "recursion_limit": 3})
    assert [c for c in hook.calls if c[0] == "error"] == [
        ("error", ("GraphRecursionError", "loop"))
    ]
    stored = await cp.aget_state({"thread_id": "rec"})
    assert stored is not None and stored.execution_meta.error == "failed (details logged)"

    # A node returning something the runtime refuses (tenxgraph's own error, not checkpointed):
    # the hook is told, once.
    hook2 = Journal()
    g2 = StateGraph()
    g2.add_node("bad", lambda state: object())
    g2.set_entry_point("bad")
    g2.add_edge("bad", END)
    app2 = g2.compile(checkpointer=backend.new(), lifecycle_hook=hook2)
    with pytest.raises(Exception) as info:
        await app2.ainvoke({"messages": ["go"]}, {"thread_id": "bad"})
    errors = [c for c in hook2.calls if c[0] == "error"]
    assert errors == [("error", (type(info.value).__name__, "bad"))]


class Refuser(GraphLifecycleHook):
    async def on_graph_start(self, context, state):  # noqa: ANN001, ANN201
        raise PermissionError("budget exhausted")


@only("memory", "postgres")
@pytest.mark.anyio
async def test_a_raising_hook_fails_the_run_before_any_write(backend: Backend) -> None:
    cp = backend.new()
    app = two_nodes().compile(checkpointer=cp, lifecycle_hook=Refuser())
    with pytest.raises(PermissionError):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "refused"})
    assert await cp.aget_state({"thread_id": "refused"}) is None


@only("memory")
@pytest.mark.anyio
async def test_stop_is_an_interrupt_of_type_stop(backend: Backend) -> None:
    hook = Journal()
    app_box: list[Any] = []

    async def a(state, config):  # noqa: ANN001, ANN202
        await app_box[0].astop(config)
        return "from a"

    g = StateGraph()
    g.add_node("a", a)
    g.add_node("b", lambda state: "from b")
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    app = g.compile(checkpointer=backend.new(), lifecycle_hook=hook)
    app_box.append(app)
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "stop"})
    assert ("interrupt", ("b", "stop")) in hook.calls
    hook.calls.clear()
    await app.ainvoke(None, {"thread_id": "stop"})
    assert hook.calls[0] == ("resume", ("b", {}))


@only("memory")
@pytest.mark.anyio
async def test_callback_manager_registration_and_bad_values(backend: Backend) -> None:
    first, second = Journal(), Journal()
    cbm = CallbackManager()
    cbm.register_lifecycle_hook(second)
    app = two_nodes().compile(
        checkpointer=backend.new(), callback_manager=cbm, lifecycle_hook=first
    )
    await app.ainvoke({"messages": ["go"]}, {"thread_id": "cbm"})
    assert first.calls == second.calls and first.calls[0] == ("start", 1)

    with pytest.raises(TypeError):
        cbm.register_lifecycle_hook(object())  # type: ignore[arg-type]
    with pytest.raises(GraphError) as info:
        two_nodes().compile(lifecycle_hook=object())
    assert info.value.error_code == "GRAPH_001"

    class WrongReturn(GraphLifecycleHook):
        async def on_graph_start(self, context, state):  # noqa: ANN001, ANN201
            return {"not": "a state"}

    app3 = two_nodes().compile(checkpointer=backend.new(), lifecycle_hook=WrongReturn())
    with pytest.raises(ValidationError):
        await app3.ainvoke({"messages": ["go"]}, {"thread_id": "wrong"})


def test_base_hook_methods_do_nothing() -> None:
    import asyncio

    hook = GraphLifecycleHook()
    ctx = GraphLifecycleContext(config={"thread_id": 7}, timestamp="2026-01-01T00:00:00+00:00")
    assert ctx.thread_id == "7" and ctx.run_id is None and ctx.metadata is None
    state = AgentState()
    assert asyncio.run(hook.on_graph_start(ctx, state)) is None
    assert asyncio.run(hook.on_checkpoint(ctx, state, [], False)) is None


class FailingUpdate(Masker):
    """on_state_update raises after node ``b`` (the run must fail as if ``b`` had)."""

    async def on_state_update(self, context, node_name, old_state, new_state, step):  # noqa: ANN001, ANN201
        await super().on_state_update(context, node_name, old_state, new_state, step)
        if node_name == "b":
            raise KeyError("audit store down")


class FailingCheckpoint(Masker):
    """on_checkpoint raises on its first call (the one after node ``a``)."""

    async def on_checkpoint(self, context, state, messages, is_context_trimmed):  # noqa: ANN001, ANN201
        await super().on_checkpoint(context, state, messages, is_context_trimmed)
        if len([c for c in self.calls if c[0] == "checkpoint"]) == 1:
            raise OSError("archive unreachable")


@only("memory", "postgres")
@pytest.mark.anyio
async def test_a_raising_state_update_hook_fails_the_run_like_a_node(backend: Backend) -> None:
    hook = FailingUpdate()
    cp = backend.new()
    app = two_nodes().compile(checkpointer=cp, lifecycle_hook=hook)
    with pytest.raises(KeyError, match="audit store down"):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "hook-upd"})
    assert [c for c in hook.calls if c[0] == "error"] == [("error", ("KeyError", "b"))]
    stored = await cp.aget_state({"thread_id": "hook-upd"})
    assert stored is not None and str(stored.execution_meta.status) == "error"
    # on_graph_error's (state, message) is what was written, as for a node error
    assert stored.execution_meta.error == "failed (details logged)"
    assert stored.execution_meta.internal_data["masked"] is True
    # the state before b, as for b raising: a's answer is kept, b's is not
    assert [m.text() for m in stored.context] == ["go", "from a"]
    assert stored.execution_meta.current_node == "b"


@only("memory", "postgres")
@pytest.mark.anyio
async def test_a_raising_checkpoint_hook_fails_the_run_like_a_node(backend: Backend) -> None:
    hook = FailingCheckpoint()
    cp = backend.new()
    app = two_nodes().compile(checkpointer=cp, lifecycle_hook=hook)
    with pytest.raises(OSError, match="archive unreachable"):
        await app.ainvoke({"messages": ["go"]}, {"thread_id": "hook-cp"})
    assert [c for c in hook.calls if c[0] == "error"] == [("error", ("OSError", "b"))]
    stored = await cp.aget_state({"thread_id": "hook-cp"})
    assert stored is not None and str(stored.execution_meta.status) == "error"
    assert stored.execution_meta.error == "failed (details logged)"
    assert stored.execution_meta.internal_data["masked"] is True
    # the raising hook is not asked again for the error checkpoint it caused
    assert [c for c in hook.calls if c[0] == "checkpoint"] == [("checkpoint", ["go", "from a"])]


class SyncUpdate(GraphLifecycleHook):
    """on_state_update written as a plain def (10xGraph's hook methods are coroutines)."""

    def on_state_update(self, context, node_name, old_state, new_state, step):  # type: ignore[override]  # noqa: ANN001, ANN201
        return None


def test_a_plain_def_hook_method_is_refused_at_registration() -> None:
    with pytest.raises(GraphError) as info:
        two_nodes().compile(lifecycle_hook=SyncUpdate())
    assert info.value.error_code == "GRAPH_001"
    assert "SyncUpdate.on_state_update" in str(info.value) and "async def" in str(info.value)
    with pytest.raises(TypeError, match=r"SyncUpdate\.on_state_update must be written 'async def'"):
        CallbackManager().register_lifecycle_hook(SyncUpdate())
