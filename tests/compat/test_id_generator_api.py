"""Id generators as 10xGraph's id-generator reference and how-to describe them: each built-in
gives ids of its documented shape, and a graph built with ``id_generator=`` takes the ids of
new threads and of every run from it (memory, SQLite, Postgres)."""

from __future__ import annotations

import re
import string
import uuid

import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import ConfigError, GraphError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import Message
from tenxgraph.utils import END
from tenxgraph.utils.id_generator import (
    AsyncIDGenerator,
    BaseIDGenerator,
    BigIntIDGenerator,
    DefaultIDGenerator,
    HexIDGenerator,
    IDType,
    IntIDGenerator,
    ShortIDGenerator,
    TimestampIDGenerator,
    UUIDGenerator,
)


def echo_graph(**kwargs: object) -> StateGraph:
    def reply(state, config, generated_id, generated_id_type):  # noqa: ANN001, ANN202
        return f"run {generated_id} ({generated_id_type}) on {config['thread_id']}"

    g = StateGraph(**kwargs)
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    return g


def test_each_builtin_has_its_documented_shape() -> None:
    assert DefaultIDGenerator().generate() == "" and DefaultIDGenerator().id_type is IDType.STRING
    u = UUIDGenerator().generate()
    assert uuid.UUID(u).version == 4 and len(u) == 36
    h = HexIDGenerator().generate()
    assert re.fullmatch(r"[0-9a-f]{32}", h)
    s = ShortIDGenerator().generate()
    assert len(s) == 8 and set(s) <= set(string.ascii_letters + string.digits)
    i = IntIDGenerator()
    assert i.id_type is IDType.INTEGER and all(0 <= i.generate() < 2**31 for _ in range(50))
    big = BigIntIDGenerator()
    ids = [big.generate() for _ in range(1000)]
    assert big.id_type is IDType.BIGINT and len(str(ids[0])) == 19
    assert ids == sorted(set(ids)), "strictly increasing even within one nanosecond"
    ts = TimestampIDGenerator()
    stamps = [ts.generate() for _ in range(1000)]
    assert ts.id_type is IDType.INTEGER and len(str(stamps[0])) == 16
    assert stamps == sorted(set(stamps))
    assert {IDType.STRING, IDType.INTEGER, IDType.BIGINT} == set(IDType)


def test_a_subclass_must_give_id_type_and_generate() -> None:
    class Incomplete(BaseIDGenerator):
        def generate(self) -> str:
            return "x"

    with pytest.raises(TypeError):
        Incomplete()  # type: ignore[abstract]


@pytest.mark.anyio
async def test_new_threads_and_runs_get_generated_ids(backend: Backend) -> None:
    app = echo_graph(id_generator=BigIntIDGenerator()).compile(checkpointer=backend.new())
    cfg: dict = {}
    out = await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg)
    thread, first_run = cfg["thread_id"], cfg["run_id"]
    assert thread.isdigit() and len(thread) == 19
    assert first_run.isdigit() and int(first_run) > int(thread)
    assert out["messages"][-1].text() == f"run {first_run} (bigint) on {thread}"
    # the same dict again: same thread, a new run id from the generator
    await app.ainvoke({"messages": [Message.text_message("again")]}, cfg)
    assert cfg["thread_id"] == thread and int(cfg["run_id"]) > int(first_run)
    # the thread is stored under the generated id, in every tier
    peer = backend.peer(app.checkpointer)
    state = await peer.aget_state({"thread_id": thread})
    assert state is not None and [m.text() for m in state.context][0] == "hi"
    assert len(state.context) == 4


@pytest.mark.anyio
async def test_given_ids_are_kept(backend: Backend) -> None:
    app = echo_graph(id_generator=ShortIDGenerator()).compile(checkpointer=backend.new())
    cfg = {"thread_id": "mine", "run_id": "r-1"}
    await app.ainvoke({"messages": [Message.text_message("hi")]}, cfg)
    assert (cfg["thread_id"], cfg["run_id"]) == ("mine", "r-1")
    lg = {"configurable": {"thread_id": "lg"}}
    await app.ainvoke({"messages": [Message.text_message("hi")]}, lg)
    assert lg["thread_id"] == "lg" and len(lg["run_id"]) == 8


@only("memory", "sqlite")
@pytest.mark.anyio
async def test_custom_sync_and_async_generators(backend: Backend) -> None:
    class Prefixed(BaseIDGenerator):
        @property
        def id_type(self) -> IDType:
            return IDType.STRING

        def generate(self) -> str:
            return f"sess_{uuid.uuid4().hex[:6]}"

    class Sequence(AsyncIDGenerator):
        def __init__(self) -> None:
            self.n = 100

        @property
        def id_type(self) -> IDType:
            return IDType.INTEGER

        async def generate(self) -> int:
            self.n += 1
            return self.n

    cfg: dict = {}
    await (
        echo_graph(id_generator=Prefixed())
        .compile(checkpointer=backend.new())
        .ainvoke({"messages": ["a"]}, cfg)
    )
    assert cfg["thread_id"].startswith("sess_") and cfg["run_id"].startswith("sess_")
    # compile(id_generator=...) as some 10xGraph pages pass it
    app = echo_graph().compile(checkpointer=backend.new(), id_generator=Sequence())
    cfg = {}
    out = await app.ainvoke({"messages": ["a"]}, cfg)
    assert (cfg["thread_id"], cfg["run_id"]) == ("101", "102")
    assert out["messages"][-1].text() == "run 102 (integer) on 101"


@only("memory")
@pytest.mark.anyio
async def test_default_generator_falls_back_to_uuid4(backend: Backend) -> None:
    cfg: dict = {}
    await (
        echo_graph(id_generator=DefaultIDGenerator())
        .compile(checkpointer=backend.new())
        .ainvoke({"messages": ["a"]}, cfg)
    )
    assert uuid.UUID(cfg["thread_id"]).version == 4 and uuid.UUID(cfg["run_id"]).version == 4


@only("memory", "sqlite")
@pytest.mark.anyio
async def test_bad_generators_are_refused_before_anything_is_written(backend: Backend) -> None:
    with pytest.raises(GraphError) as info:
        StateGraph(id_generator=lambda: "x")  # type: ignore[arg-type]
    assert info.value.error_code == "GRAPH_001"
    with pytest.raises(GraphError):
        echo_graph().compile(id_generator="uuid")  # type: ignore[arg-type]

    class Floaty(BaseIDGenerator):
        @property
        def id_type(self) -> IDType:
            return IDType.STRING

        def generate(self) -> float:  # type: ignore[override]
            return 1.5

    class Huge(BaseIDGenerator):
        @property
        def id_type(self) -> IDType:
            return IDType.STRING

        def generate(self) -> str:
            return "x" * 300

    cp = backend.new()
    with pytest.raises(GraphError) as info:
        await (
            echo_graph(id_generator=Floaty()).compile(checkpointer=cp).ainvoke({"messages": ["a"]})
        )
    assert info.value.error_code == "GRAPH_001"
    with pytest.raises(ConfigError):
        await echo_graph(id_generator=Huge()).compile(checkpointer=cp).ainvoke({"messages": ["a"]})
    assert await cp.alist_threads({"user_id": "anonymous"}) == []
