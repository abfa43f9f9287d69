"""``StateGraph`` / ``CompiledGraph``: compile-time validation, node calling conventions and return
kinds, the sync/async bridge, streaming, response granularity, state access, and the 10xGraph
guide graph (a scripted model node standing in for the ``Agent``). Default store: in-memory.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Annotated, Any, Literal

import anyio
import pytest
from pydantic import Field

from tenxgraph.core.exceptions import (
    ConfigError,
    GraphError,
    ResourceNotFoundError,
    ValidationError,
)
from tenxgraph.core.graph import CompiledGraph, StateGraph, StreamChunk, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.reducers import append_items
from tenxgraph.storage.checkpointer import InMemoryCheckpointer
from tenxgraph.utils import END, START, Command, ResponseGranularity


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The in-memory store runs under both event loops."""
    return request.param


def user(text: str, message_id: str | None = None) -> Message:
    return Message.text_message(text, message_id=message_id)


def texts(msgs: Any) -> list[str]:
    if isinstance(msgs, AgentState):
        msgs = msgs.context
    return [m.text() for m in msgs]


def reply(text: str) -> Any:
    async def node(state: AgentState) -> str:
        return text

    return node


class NoteState(AgentState):
    note: str = ""
    items: Annotated[list[str], append_items] = Field(default_factory=list)


# == compile-time validation ======================================================================
def test_no_entry_point_is_graph_002() -> None:
    g = StateGraph()
    g.add_node("a", reply("a"))
    with pytest.raises(GraphError) as ei:
        g.compile()
    assert ei.value.error_code == "GRAPH_002"
    assert str(ei.value).startswith("[GRAPH_002]")
    assert "set_entry_point" in str(ei.value)
    with pytest.raises(GraphError) as ei2:
        StateGraph().compile()
    assert ei2.value.error_code == "GRAPH_002"


def test_orphan_node_is_graph_003() -> None:
    # 10xGraph's rule: an orphan is a node in no edge at all. "b" and "c" are connected (to
    # each other) though unreachable from the entry point, so only "d" is an orphan.
    g = StateGraph()
    for n in ("a", "b", "c", "d"):
        g.add_node(n, reply(n))
    g.set_entry_point("a")
    g.add_edge("a", END)
    g.add_edge("b", "c")
    with pytest.raises(GraphError) as ei:
        g.compile()
    assert ei.value.error_code == "GRAPH_003"
    assert ei.value.context == {"nodes": ["d"]}


def _two_nodes() -> StateGraph:
    g = StateGraph()
    g.add_node("a", reply("a"))
    g.add_node("b", reply("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    return g


@pytest.mark.parametrize(
    ("build", "unknown"),
    [
        (lambda g: g.add_edge("b", "nowhere"), "nowhere"),
        (lambda g: g.add_conditional_edges("b", lambda s: "x", {"x": "ghost", "y": END}), "ghost"),
        (lambda g: g.add_edge("phantom", "a"), "phantom"),
        (lambda g: g.set_entry_point("missing"), "missing"),
    ],
    ids=["edge-target", "path-map-target", "edge-source", "entry-point"],
)
def test_edge_to_unknown_node_is_graph_004(build: Any, unknown: str) -> None:
    g = _two_nodes()
    build(g)
    with pytest.raises(GraphError) as ei:
        g.compile()
    assert ei.value.error_code == "GRAPH_004"
    assert ei.value.context == {"node": unknown}


@pytest.mark.parametrize("which", ["interrupt_before", "interrupt_after"])
def test_interrupt_on_unknown_node_is_graph_004(which: str) -> None:
    g = _two_nodes()
    g.add_edge("b", END)
    with pytest.raises(GraphError) as ei:
        g.compile(**{which: ["a", "zzz"]})
    assert ei.value.error_code == "GRAPH_004"
    assert ei.value.context == {"node": "zzz"}


def test_duplicate_and_reserved_node_names_are_refused() -> None:
    g = StateGraph()
    g.add_node("a", reply("a"))
    with pytest.raises(GraphError) as ei:
        g.add_node("a", reply("again"))
    assert ei.value.error_code == "GRAPH_001"
    assert ei.value.context == {"node": "a"}

    def a(state: AgentState) -> None:
        return None

    with pytest.raises(GraphError):
        g.add_node(a)  # named after the function: "a" again
    for reserved in (START, END):
        with pytest.raises(GraphError) as ei2:
            g.add_node(reserved, reply("x"))
        assert ei2.value.error_code == "GRAPH_001"
    with pytest.raises(GraphError) as ei3:
        g.add_node("not-callable", 42)
    assert ei3.value.error_code == "GRAPH_001"
    assert list(g.nodes) == ["a"]


def test_compile_defaults_to_in_memory_checkpointer() -> None:
    g = _two_nodes()
    g.add_edge("b", END)
    app = g.compile()
    assert isinstance(app, CompiledGraph)
    assert isinstance(app.checkpointer, InMemoryCheckpointer)


# == node return kinds ============================================================================
FIXED = Message.text_message("fixed", role="assistant", message_id="fixed-1")


def _returning(value_factory: Any) -> CompiledGraph:
    async def node(state: NoteState) -> Any:
        return value_factory(state)

    async def after(state: NoteState) -> str:
        return "after"

    g = StateGraph(NoteState)
    g.add_node("node", node)
    g.add_node("after", after)
    g.add_node("elsewhere", reply("elsewhere"))
    g.set_entry_point("node")
    g.add_edge("node", "after")
    # "elsewhere" is reached by Command(goto=...); a static path keeps it from being an orphan
    # (GRAPH_003 only knows edges and path maps).
    g.add_conditional_edges("after", lambda state: END, {END: END, "elsewhere": "elsewhere"})
    g.add_edge("elsewhere", END)
    return g.compile(interrupt_before=None)


RETURN_KINDS: dict[str, tuple[Any, list[str], str, list[str]]] = {
    # name: (node return, context texts after the run, note, items)
    "none": (lambda s: None, ["hi", "after"], "", []),
    "str": (lambda s: "plain", ["hi", "plain", "after"], "", []),
    "message": (lambda s: FIXED, ["hi", "fixed", "after"], "", []),
    "list": (lambda s: ["first", FIXED], ["hi", "first", "fixed", "after"], "", []),
    "dict-messages-and-field": (
        lambda s: {"messages": [FIXED], "note": "n1", "items": ["x"]},
        ["hi", "fixed", "after"],
        "n1",
        ["x"],
    ),
    "dict-single-message": (lambda s: {"messages": FIXED}, ["hi", "fixed", "after"], "", []),
    "dict-field-only": (lambda s: {"note": "only"}, ["hi", "after"], "only", []),
    "state-object": (
        lambda s: s.model_copy(update={"note": "whole", "context": [*s.context, FIXED]}),
        ["hi", "fixed", "after"],
        "whole",
        [],
    ),
    "command-update-goto": (
        lambda s: Command(update={"note": "cmd", "messages": ["via command"]}, goto="elsewhere"),
        ["hi", "via command", "elsewhere"],
        "cmd",
        [],
    ),
    "command-goto-end": (lambda s: Command(update="bye", goto=END), ["hi", "bye"], "", []),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", list(RETURN_KINDS))
async def test_node_return_kinds(kind: str) -> None:
    ret, expected_texts, note, items = RETURN_KINDS[kind]
    app = _returning(ret)
    cfg = {"thread_id": f"t-{kind}"}
    res = await app.ainvoke({"messages": [user("hi", "u-1")]}, cfg, ResponseGranularity.FULL)
    st = res["state"]
    assert isinstance(st, NoteState)
    assert texts(st) == expected_texts
    assert (st.note, st.items) == (note, items)
    assert texts(res["messages"]) == expected_texts
    if "fixed" in expected_texts:
        assert [m.message_id for m in st.context if m.text() == "fixed"] == ["fixed-1"]
    assert [m.role for m in st.context][1:] == ["assistant"] * (len(expected_texts) - 1)
    stored = await app.aget_state({"thread_id": f"t-{kind}"})
    assert texts(stored) == expected_texts and stored.note == note


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "exc", "code"),
    [
        (42, GraphError, "GRAPH_005"),
        (object(), GraphError, "GRAPH_005"),
        (["ok", 3], GraphError, "GRAPH_005"),
        ({"no_such_field": 1}, ValidationError, "VALIDATION_000"),
        ({"note": ["not", "a", "str"]}, ValidationError, "VALIDATION_000"),
    ],
    ids=["int", "object", "list-with-int", "unknown-field", "wrong-type"],
)
async def test_unsupported_node_returns(value: Any, exc: type[Exception], code: str) -> None:
    app = _returning(lambda s: value)
    cfg = {"thread_id": "t-unsupported"}
    with pytest.raises(exc) as ei:
        await app.ainvoke({"messages": [user("hi")]}, cfg)
    assert ei.value.error_code == code
    assert await app.aget_state({"thread_id": "t-unsupported"}) is None


# == calling conventions ==========================================================================
def _sig_variants() -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def state_only(state: AgentState) -> str:
        seen["got"] = ("state", type(state).__name__)
        return "ok"

    def config_only(config: dict) -> str:
        seen["got"] = ("config", config["thread_id"])
        return "ok"

    def both(state: AgentState, config: dict) -> str:
        seen["got"] = ("both", type(state).__name__, config["thread_id"])
        return "ok"

    async def reversed_names(config: dict, state: AgentState) -> str:
        seen["got"] = ("reversed", type(state).__name__, config["thread_id"])
        return "ok"

    def positional(s, c):  # noqa: ANN001 - 10xGraph passes (state, config) positionally
        seen["got"] = ("positional", type(s).__name__, c["thread_id"])
        return "ok"

    def nothing() -> str:
        seen["got"] = ("nothing",)
        return "ok"

    class CallableNode:
        async def __call__(self, state: AgentState) -> str:
            seen["got"] = ("callable", type(state).__name__)
            return "ok"

    return {
        "fns": {
            "state_only": (state_only, ("state", "AgentState")),
            "config_only": (config_only, ("config", "t-sig")),
            "both": (both, ("both", "AgentState", "t-sig")),
            "reversed_names": (reversed_names, ("reversed", "AgentState", "t-sig")),
            "positional": (positional, ("positional", "AgentState", "t-sig")),
            "nothing": (nothing, ("nothing",)),
            "callable_object": (CallableNode(), ("callable", "AgentState")),
        },
        "seen": seen,
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    "variant",
    [
        "state_only",
        "config_only",
        "both",
        "reversed_names",
        "positional",
        "nothing",
        "callable_object",
    ],
)
async def test_state_and_config_passed_by_parameter_name(variant: str) -> None:
    v = _sig_variants()
    fn, expected = v["fns"][variant]
    g = StateGraph()
    g.add_node("n", fn)
    g.set_entry_point("n")
    g.add_edge("n", END)
    app = g.compile()
    res = await app.ainvoke({"messages": [user("hi")]}, {"thread_id": "t-sig"})
    assert v["seen"]["got"] == expected
    assert texts(res["messages"]) == ["hi", "ok"]


@pytest.mark.anyio
async def test_sync_nodes_run_in_worker_threads_async_nodes_on_the_loop() -> None:
    threads: dict[str, int] = {}

    def sync_node(state: AgentState) -> str:
        threads["sync"] = threading.get_ident()
        return "sync"

    async def async_node(state: AgentState) -> str:
        threads["async"] = threading.get_ident()
        return "async"

    g = StateGraph()
    g.add_node("s", sync_node)
    g.add_node("a", async_node)
    g.set_entry_point("s")
    g.add_edge("s", "a")
    g.add_edge("a", END)
    res = await g.compile().ainvoke({"messages": [user("hi")]}, {"thread_id": "t-threads"})
    assert texts(res["messages"]) == ["hi", "sync", "async"]
    assert threads["async"] == threading.get_ident()
    assert threads["sync"] != threading.get_ident()


@pytest.mark.anyio
async def test_sync_node_does_not_block_the_event_loop() -> None:
    def sleepy(state: AgentState) -> str:
        time.sleep(0.5)
        return "slept"

    def build() -> CompiledGraph:
        g = StateGraph()
        g.add_node("sleepy", sleepy)
        g.set_entry_point("sleepy")
        g.add_edge("sleepy", END)
        return g.compile()

    ticks: list[float] = []
    done = anyio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.monotonic())
            await anyio.sleep(0.02)

    results: list[list[str]] = []

    async def run(app: CompiledGraph, tid: str) -> None:
        res = await app.ainvoke({"messages": [user(tid)]}, {"thread_id": tid})
        results.append(texts(res["messages"]))

    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        async with anyio.create_task_group() as runs:
            runs.start_soon(run, build(), "t-a")
            runs.start_soon(run, build(), "t-b")
        done.set()
    elapsed = time.monotonic() - t0
    assert sorted(results) == [["t-a", "slept"], ["t-b", "slept"]]
    assert elapsed < 0.95, elapsed  # the two sleeps overlapped (serialized: >= 1.0 s)
    gaps = [b - a for a, b in zip(ticks, ticks[1:], strict=False)]
    assert len(ticks) >= 10 and max(gaps) < 0.3, (len(ticks), max(gaps))


# == sync API inside an event loop ================================================================
def _simple_app() -> CompiledGraph:
    g = StateGraph()
    g.add_node("a", reply("a"))
    g.set_entry_point("a")
    g.add_edge("a", END)
    return g.compile()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("call", "async_name"),
    [
        (lambda app, cfg: app.invoke({"messages": [user("x")]}, cfg), "ainvoke"),
        (lambda app, cfg: next(iter(app.stream({"messages": [user("x")]}, cfg))), "astream"),
        (lambda app, cfg: app.get_state(cfg), "aget_state"),
        (lambda app, cfg: app.get_state_history(cfg), "aget_state_history"),
        (lambda app, cfg: app.update_state(cfg, {"messages": [user("x")]}), "aupdate_state"),
        (lambda app, cfg: app.stop(cfg), "astop"),
        (lambda app, cfg: app.checkpointer.setup(), "asetup"),
    ],
    ids=["invoke", "stream", "get_state", "get_state_history", "update_state", "stop", "setup"],
)
async def test_sync_api_inside_event_loop_names_the_async_method(
    call: Any, async_name: str
) -> None:
    app = _simple_app()
    cfg = {"thread_id": "t-loop"}
    with pytest.raises(GraphError) as ei:
        call(app, cfg)
    assert ei.value.error_code == "GRAPH_007"
    assert f"await {async_name}(" in str(ei.value)
    assert ei.value.context["use"] == async_name
    assert await app.aget_state({"thread_id": "t-loop"}) is None


def test_sync_api_outside_event_loop() -> None:
    app = _simple_app()
    cfg = {"thread_id": "t-sync"}
    res = app.invoke({"messages": [user("x")]}, cfg)
    assert texts(res["messages"]) == ["x", "a"]
    assert cfg["_checkpoint_version"] == 1
    assert texts(app.get_state({"thread_id": "t-sync"})) == ["x", "a"]
    chunks = list(app.stream({"messages": [user("y")]}, {"thread_id": "t-sync"}))
    assert [c.event for c in chunks] == ["message", "message", "updates", "state"]
    assert [s.version for s in app.get_state_history({"thread_id": "t-sync"})] == [2, 1]


def test_invoke_without_config_generates_a_thread() -> None:
    app = _simple_app()
    res = app.invoke({"messages": [user("x")]})
    assert texts(res["messages"]) == ["x", "a"]


# == streaming ====================================================================================
def _ab_app() -> CompiledGraph:
    g = StateGraph(NoteState)
    g.add_node("a", reply("from a"))

    async def b(state: NoteState) -> dict[str, Any]:
        return {"messages": ["from b"], "note": "b was here"}

    g.add_node("b", b)
    g.set_entry_point("a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    return g.compile()


@pytest.mark.anyio
async def test_astream_chunks_events_and_fields() -> None:
    app = _ab_app()
    cfg: dict[str, Any] = {"thread_id": "t-stream"}
    t0 = time.time()
    chunks: list[StreamChunk] = [
        c async for c in app.astream({"messages": [user("hi", "u-1")]}, cfg)
    ]
    assert [c.event for c in chunks] == [
        "message",
        "message",
        "updates",
        "message",
        "updates",
        "state",
    ]
    assert [c.message.text() for c in chunks if c.event == "message"] == ["hi", "from a", "from b"]
    assert chunks[0].message.message_id == "u-1"
    assert [c.data for c in chunks if c.event == "updates"] == [
        {"node": "a", "next": "b", "keys": ["context"]},
        {"node": "b", "next": END, "keys": ["context", "note"]},
    ]
    run_id = cfg["run_id"]
    assert isinstance(run_id, str) and run_id
    for c in chunks:
        assert c.thread_id == "t-stream"
        assert c.run_id == run_id
        assert t0 - 1 <= c.timestamp <= time.time() + 1
    final = chunks[-1]
    assert final.data == {"status": "completed"}  # the execution status reached
    assert isinstance(final.state, NoteState)
    assert texts(final.state) == ["hi", "from a", "from b"] and final.state.note == "b was here"
    assert cfg["_checkpoint_version"] == 2


@pytest.mark.anyio
async def test_astream_without_config() -> None:
    chunks = [c async for c in _ab_app().astream({"messages": [user("hi")]})]
    assert [c.event for c in chunks] == [
        "message",
        "message",
        "updates",
        "message",
        "updates",
        "state",
    ]
    assert len({c.thread_id for c in chunks}) == 1 and chunks[0].thread_id
    assert texts(chunks[-1].state) == ["hi", "from a", "from b"]


@pytest.mark.anyio
async def test_astream_error_chunk_then_raises() -> None:
    app = _returning(lambda s: 42)
    chunks: list[StreamChunk] = []
    with pytest.raises(GraphError) as ei:
        async for c in app.astream({"messages": [user("hi")]}, {"thread_id": "t-stream-err"}):
            chunks.append(c)
    assert ei.value.error_code == "GRAPH_005"
    assert [c.event for c in chunks] == ["message", "error"]
    assert chunks[-1].data["error_code"] == "GRAPH_005"
    assert chunks[-1].data["message"] == ei.value.message
    assert chunks[-1].thread_id == "t-stream-err"


@pytest.mark.anyio
async def test_astream_error_chunk_for_a_failing_node() -> None:
    async def boom(state: AgentState) -> str:
        raise RuntimeError("node failed")

    g = StateGraph()
    g.add_node("boom", boom)
    g.set_entry_point("boom")
    g.add_edge("boom", END)
    app = g.compile()
    chunks: list[StreamChunk] = []
    with pytest.raises(RuntimeError, match="node failed"):
        async for c in app.astream({"messages": [user("hi")]}, {"thread_id": "t-boom"}):
            chunks.append(c)
    assert [c.event for c in chunks] == ["message", "error"]
    assert chunks[-1].data == {
        "error_code": "RuntimeError",
        "reason": "node failed",
        "message": "node failed",
    }
    # The failure is checkpointed with status error (the input kept).
    st = await app.aget_state({"thread_id": "t-boom"})
    assert (texts(st), st.execution_meta.status, st.execution_meta.error) == (
        ["hi"],
        "error",
        "RuntimeError",
    )


@pytest.mark.anyio
async def test_default_recursion_limit_is_25() -> None:
    from tenxgraph.core.exceptions import GraphRecursionError

    g = StateGraph()
    g.add_node("loop", reply("lap"))
    g.set_entry_point("loop")
    g.add_conditional_edges("loop", lambda state: "loop", {"loop": "loop", END: END})
    app = g.compile()
    cfg: dict[str, Any] = {"thread_id": "t-rl"}
    with pytest.raises(GraphRecursionError) as ei:
        await app.ainvoke({"messages": [user("go")]}, cfg)
    assert ei.value.context["recursion_limit"] == 25
    assert cfg["_checkpoint_version"] == 26
    assert len((await app.aget_state({"thread_id": "t-rl"})).context) == 26


# == response granularity =========================================================================
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("granularity", "keys"),
    [
        (ResponseGranularity.LOW, {"messages"}),
        (ResponseGranularity.PARTIAL, {"messages", "context", "summary"}),
        (ResponseGranularity.FULL, {"messages", "context", "summary", "state"}),
        ("full", {"messages", "context", "summary", "state"}),
    ],
    ids=["low", "partial", "full", "full-as-str"],
)
async def test_response_granularity_keys(granularity: Any, keys: set[str]) -> None:
    app = _ab_app()
    cfg = {"thread_id": "t-gran"}
    await app.ainvoke({"messages": [user("first")]}, dict(cfg))
    res = await app.ainvoke(
        {"messages": [user("second")]}, dict(cfg), response_granularity=granularity
    )
    assert set(res) == keys
    # "messages": this run's input and what it produced; "context": the whole conversation.
    assert texts(res["messages"]) == ["second", "from a", "from b"]
    if "context" in keys:
        assert texts(res["context"]) == ["first", "from a", "from b", "second", "from a", "from b"]
        assert res["summary"] is None
    if "state" in keys:
        assert isinstance(res["state"], NoteState) and res["state"].note == "b was here"
        assert texts(res["state"]) == texts(res["context"])


# == routing ======================================================================================
@pytest.mark.anyio
async def test_conditional_edges_with_config_and_path_map() -> None:
    seen: list[Any] = []

    def route(state: AgentState, config: dict) -> str:
        seen.append(config["thread_id"])
        return "left" if "left" in state.context[0].text() else "other"

    g = StateGraph()
    g.add_node("start", reply("start"))
    g.add_node("L", reply("went left"))
    g.add_node("R", reply("went right"))
    g.set_entry_point("start")
    g.add_conditional_edges("start", route, {"left": "L", "other": "R"})
    g.add_edge("L", END)
    g.add_edge("R", END)
    app = g.compile()
    r1 = await app.ainvoke({"messages": [user("go left")]}, {"thread_id": "t-l"})
    r2 = await app.ainvoke({"messages": [user("go up")]}, {"thread_id": "t-r"})
    assert texts(r1["messages"]) == ["go left", "start", "went left"]
    assert texts(r2["messages"]) == ["go up", "start", "went right"]
    assert seen == ["t-l", "t-r"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("router", "code"),
    [
        (lambda state: 1 / 0, "GRAPH_ROUTING_001"),
        (lambda state: "not-in-map", "GRAPH_006"),
    ],
    ids=["router-raises", "unknown-key"],
)
async def test_router_failures(router: Any, code: str) -> None:
    g = StateGraph()
    g.add_node("a", reply("a"))
    g.add_node("b", reply("b"))
    g.set_entry_point("a")
    g.add_conditional_edges("a", router, {"b": "b", END: END})
    g.add_edge("b", END)
    app = g.compile()
    with pytest.raises(GraphError) as ei:
        await app.ainvoke({"messages": [user("x")]}, {"thread_id": "t-route"})
    assert ei.value.error_code == code
    assert ei.value.context["node"] == "a"


@pytest.mark.anyio
async def test_command_goto_unknown_node_is_graph_006() -> None:
    app = _returning(lambda s: Command(goto="nope"))
    with pytest.raises(GraphError) as ei:
        await app.ainvoke({"messages": [user("x")]}, {"thread_id": "t-goto"})
    assert ei.value.error_code == "GRAPH_006"
    assert ei.value.context == {"node": "node", "goto": "nope"}


# == state access =================================================================================
@pytest.mark.anyio
async def test_update_state_and_get_state_history() -> None:
    app = _ab_app()
    cfg = {"thread_id": "t-upd"}
    await app.ainvoke({"messages": [user("hi")]}, dict(cfg))
    new = await app.aupdate_state(
        dict(cfg), {"messages": [Message.text_message("edited", role="assistant")], "note": "n"}
    )
    assert texts(new) == ["hi", "from a", "from b", "edited"] and new.note == "n"
    new2 = await app.aupdate_state(dict(cfg), {"items": ["i1"]})
    assert new2.items == ["i1"] and texts(new2) == texts(new)
    hist = await app.aget_state_history(dict(cfg))
    assert [s.version for s in hist] == [4, 3, 2, 1]
    assert [s.thread_id for s in hist] == ["t-upd"] * 4
    assert [texts(s.state) for s in hist] == [
        ["hi", "from a", "from b", "edited"],
        ["hi", "from a", "from b", "edited"],
        ["hi", "from a", "from b"],
        ["hi", "from a"],
    ]
    assert [s.state.note for s in hist] == ["n", "n", "b was here", ""]
    assert [s.state.items for s in hist] == [["i1"], [], [], []]
    assert all(isinstance(s.state, NoteState) for s in hist)
    assert [s.version for s in await app.aget_state_history(dict(cfg), limit=2)] == [4, 3]
    assert [s.version for s in await app.aget_state_history(dict(cfg), before=3)] == [2, 1]
    assert hist[0].created_at >= hist[-1].created_at
    with pytest.raises(ResourceNotFoundError) as ei:
        await app.aupdate_state({"thread_id": "t-nobody"}, {"note": "x"})
    assert ei.value.error_code == "STORAGE_NOT_FOUND_000"
    with pytest.raises(ValidationError):
        await app.aupdate_state(dict(cfg), {"bogus": 1})
    assert [s.version for s in await app.aget_state_history(dict(cfg))] == [4, 3, 2, 1]


@pytest.mark.anyio
async def test_state_instance_is_copied_for_each_thread() -> None:
    initial = NoteState(note="preset", items=["seed"])

    async def add(state: NoteState) -> dict[str, Any]:
        return {"items": [f"from-{state.context[-1].text()}"]}

    g = StateGraph(initial)
    g.add_node("add", add)
    g.set_entry_point("add")
    g.add_edge("add", END)
    app = g.compile()
    r1 = await app.ainvoke(
        {"messages": [user("one")]}, {"thread_id": "t-i1"}, ResponseGranularity.FULL
    )
    r2 = await app.ainvoke(
        {"messages": [user("two")]}, {"thread_id": "t-i2"}, ResponseGranularity.FULL
    )
    assert r1["state"].items == ["seed", "from-one"] and r1["state"].note == "preset"
    assert r2["state"].items == ["seed", "from-two"]
    assert initial.items == ["seed"] and initial.context == []


@pytest.mark.anyio
async def test_stop_between_nodes_and_resume() -> None:
    holder: dict[str, CompiledGraph] = {}

    async def one(state: AgentState, config: dict) -> str:
        await holder["app"].astop(config)
        return "one"

    g = StateGraph()
    g.add_node("one", one)
    g.add_node("two", reply("two"))
    g.set_entry_point("one")
    g.add_edge("one", "two")
    g.add_edge("two", END)
    app = holder["app"] = g.compile()
    cfg = {"thread_id": "t-stop"}
    res = await app.ainvoke({"messages": [user("go")]}, dict(cfg))
    assert texts(res["messages"]) == ["go", "one"]
    st = await app.aget_state(dict(cfg))
    assert (st.execution_meta.status, st.execution_meta.current_node) == ("stopped", "two")
    res2 = await app.ainvoke(None, dict(cfg))
    assert texts(res2["messages"]) == ["two"]
    st2 = await app.aget_state(dict(cfg))
    assert texts(st2) == ["go", "one", "two"] and st2.execution_meta.status == "completed"


@pytest.mark.anyio
async def test_config_typos_refused() -> None:
    app = _simple_app()
    for bad in ({"thread-id": "t"}, {"threadId": "t"}, {"thread_id": "t", "userid": "u"}):
        with pytest.raises(ConfigError) as ei:
            await app.ainvoke({"messages": [user("x")]}, bad)
        assert ei.value.error_code == "CONFIG_001"
        assert ei.value.context["did_you_mean"] in ("thread_id", "user_id")
    for bad_value in (
        {"thread_id": "x" * 256},
        {"thread_id": "t", "recursion_limit": 0},
        {"thread_id": None, "user_id": ""},
    ):
        with pytest.raises(ConfigError):
            await app.ainvoke({"messages": [user("x")]}, bad_value)
    assert await app.checkpointer.alist_threads({}) == []


# == the 10xGraph guide graph =====================================================================
def get_weather(
    location: str, tool_call_id: str | None = None, state: AgentState | None = None
) -> Message:
    """Get the current weather for a specific location."""
    return Message.tool_message(
        content=f"The weather in {location} is sunny", tool_call_id=tool_call_id
    )


def main_agent(state: AgentState, config: dict) -> Message:
    """A scripted stand-in for ``Agent``: asks for the tool once, then answers from its result."""
    last = state.context[-1]
    if last.role == "tool":
        return Message.text_message(f"Here you go: {last.text()}", role="assistant")
    return Message(
        role="assistant",
        content="Let me check the weather.",
        tools_calls=[
            {
                "id": "call_weather_1",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": json.dumps({"location": "New York City"}),
                },
            }
        ],
    )


def should_use_tools(state: AgentState) -> str:
    """Determine if we should use tools or end the conversation (as in 10xGraph's guide)."""
    if not state.context or len(state.context) == 0:
        return "TOOL"
    last_message = state.context[-1]
    if (
        hasattr(last_message, "tools_calls")
        and last_message.tools_calls
        and len(last_message.tools_calls) > 0
        and last_message.role == "assistant"
    ):
        return "TOOL"
    if last_message.role == "tool":
        return "MAIN"
    return END


def test_guide_graph_with_tool_node_runs_as_written() -> None:
    checkpointer = InMemoryCheckpointer()
    tool_node = ToolNode([get_weather])
    graph = StateGraph()
    graph.add_node("MAIN", main_agent)
    graph.add_node("TOOL", tool_node)
    graph.add_conditional_edges("MAIN", should_use_tools, {"TOOL": "TOOL", END: END})
    graph.add_edge("TOOL", "MAIN")
    graph.set_entry_point("MAIN")
    app = graph.compile(checkpointer=checkpointer)

    inp = {
        "messages": [Message.text_message("Please call the get_weather function for New York City")]
    }
    config = {"thread_id": "12345", "recursion_limit": 10}
    res = app.invoke(inp, config=config)

    msgs = res["messages"]
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert msgs[2].tool_call_id == "call_weather_1"
    assert msgs[2].text() == "The weather in New York City is sunny"
    assert msgs[3].text() == "Here you go: The weather in New York City is sunny"
    assert config["_checkpoint_version"] == 3
    state = app.get_state({"thread_id": "12345"})
    assert [m.role for m in state.context] == ["user", "assistant", "tool", "assistant"]
    assert state.execution_meta.status == "completed"
    assert (
        checkpointer.list_messages({"thread_id": "12345"})[2].text()
        == "The weather in New York City is sunny"
    )
    assert tool_node.tool_names == ["get_weather"]
    params = tool_node.tool_schemas()[0]["function"]["parameters"]
    assert list(params["properties"]) == ["location"]


def test_node_reached_only_through_annotated_command_is_not_an_orphan() -> None:
    # Module-level names: this file uses postponed annotations, resolved from its globals.
    def router(state) -> Command[Literal["target"]]:
        return Command(update="routing", goto="target")

    def target(state):
        return "arrived"

    g = StateGraph()
    g.add_node("router", router)
    g.add_node("target", target)
    g.set_entry_point("router")
    app = g.compile()
    out = app.invoke({"messages": ["go"]}, {"thread_id": "cmd-only"})
    assert [m.text() for m in out["messages"]] == ["go", "routing", "arrived"]

    g2 = StateGraph()
    g2.add_node("router", router)
    g2.add_node("target", target)
    g2.add_node("stray", target)
    g2.set_entry_point("router")
    with pytest.raises(GraphError) as err:
        g2.compile()
    assert err.value.error_code == "GRAPH_003" and err.value.context["nodes"] == ["stray"]


def test_each_invocation_gets_its_own_run_id_unless_the_caller_sets_one() -> None:
    g = StateGraph()
    g.add_node("n", lambda state: "ok")
    g.set_entry_point("n")
    app = g.compile()
    cfg = {"thread_id": "runids"}
    app.invoke({"messages": ["a"]}, cfg)
    first = cfg["run_id"]
    app.invoke({"messages": ["b"]}, cfg)
    assert cfg["run_id"] != first
    mine = {"thread_id": "runids-2", "run_id": "caller-run"}
    app.invoke({"messages": ["a"]}, mine)
    app.invoke({"messages": ["b"]}, mine)
    assert mine["run_id"] == "caller-run"


@pytest.mark.parametrize(("key", "meant"), [("user", "user_id"), ("thread", "thread_id")])
def test_short_forms_of_known_config_keys_are_flagged(key: str, meant: str) -> None:
    from tenxgraph.core.config import normalize_config
    from tenxgraph.core.exceptions import ConfigError

    with pytest.raises(ConfigError) as err:
        normalize_config({"thread_id": "t", key: "x"})
    assert err.value.error_code == "CONFIG_001" and err.value.context["did_you_mean"] == meant
