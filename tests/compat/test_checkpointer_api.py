"""Checkpointers as 10xGraph's checkpointer reference, concepts page and durability guide
describe them: generic in the state class, ``release()``, the cache methods on the cache tier,
the reference page's method names, ``ThreadInfo.thread_name``, and a checkpointer of your own."""

from __future__ import annotations

import datetime as dt
from typing import Any

import anyio
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
    sync_backend_fixture,
)
from pydantic import Field

from tenxgraph.core.exceptions import (
    ConfigError,
    SerializationError,
    StorageError,
    SyncInEventLoopError,
    ValidationError,
)
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import (
    BaseCheckpointer,
    InMemoryCheckpointer,
    PgCheckpointer,
    SqliteCheckpointer,
)
from tenxgraph.utils import END, ThreadInfo


class TripState(AgentState):
    city: str = ""
    stops: list[str] = Field(default_factory=list)


def typed(backend: Backend, state_cls: type[AgentState]) -> BaseCheckpointer:
    """The backend's checkpointer, built as the docs write it: ``Kind[State](...)``."""
    spec = backend.spec()
    if backend.kind == "memory":
        return InMemoryCheckpointer[state_cls]()
    if backend.kind == "sqlite":
        return SqliteCheckpointer[state_cls](spec["sqlite_path"])
    extra: dict[str, Any] = {}
    if backend.kind == "postgres+redis":
        extra = {"redis_url": spec["redis_url"], "redis_prefix": spec["redis_prefix"]}
    return PgCheckpointer[state_cls](spec["pg_dsn"], schema=spec["pg_schema"], **extra)


def user(text: str) -> Message:
    return Message.text_message(text)


# -- generics and the state class -----------------------------------------------------------------
@pytest.mark.anyio
async def test_subscripted_checkpointer_decodes_the_named_state_class(backend: Backend) -> None:
    cp = typed(backend, TripState)
    try:
        assert cp.state_class is TripState
        cfg = {"thread_id": "trip", "user_id": "ana"}
        await cp.aput_state(cfg, TripState(city="Lyon", stops=["a"], context=[user("hi")]))
        other = typed(backend, TripState) if backend.kind != "memory" else cp
        try:
            back = await other.aget_state({"thread_id": "trip", "user_id": "ana"})
        finally:
            if other is not cp:
                await other.aclose()
        assert isinstance(back, TripState)
        assert (back.city, back.stops, [m.text() for m in back.context]) == ("Lyon", ["a"], ["hi"])
    finally:
        await cp.aclose()


@pytest.mark.anyio
async def test_bind_state_type(backend: Backend) -> None:
    cp = backend.new()
    cp.bind_state_type(TripState)
    assert cp.state_class is TripState
    await cp.aput_state({"thread_id": "b"}, TripState(city="Oslo"))
    assert (await cp.aget_state({"thread_id": "b"})).city == "Oslo"
    with pytest.raises(TypeError):
        cp.bind_state_type(dict)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_graph_binds_its_state_class_to_a_plain_checkpointer(backend: Backend) -> None:
    g = StateGraph[TripState](TripState(city="Rome"))
    g.add_node("plan", lambda state: {"stops": ["forum"]})
    g.set_entry_point("plan")
    g.add_edge("plan", END)
    cp = backend.new()
    app = g.compile(checkpointer=cp)
    await app.ainvoke({"messages": [user("go")]}, {"thread_id": "g"})
    state = await cp.aget_state({"thread_id": "g"})
    assert isinstance(state, TripState) and (state.city, state.stops) == ("Rome", ["forum"])


@pytest.mark.postgres
@pytest.mark.anyio
async def test_pg_checkpointer_as_the_postgres_integration_page_builds_it(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str
) -> None:
    cp = PgCheckpointer(
        db_url=pg_dsn.replace("postgresql://", "postgresql+asyncpg://", 1),
        redis_url=redis_url,
        schema=pg_schema,
        redis_prefix=redis_prefix,
        id_type="string",
    )
    try:
        await cp.aput_state(
            {"thread_id": "user-42"}, AgentState(context=[user("My name is Alex.")])
        )
        assert (await cp.aget_state({"thread_id": "user-42"})).context[
            0
        ].text() == "My name is Alex."
        assert cp.release_resources is False  # the durability guide's default
    finally:
        await cp.aclose()
    with pytest.raises(ConfigError):
        PgCheckpointer(postgres_dsn=pg_dsn, db_url=pg_dsn)
    with pytest.raises(ConfigError):
        PgCheckpointer(postgres_dsn=pg_dsn, id_type="uuid")


# -- release ------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_release_closes_and_a_later_call_reopens(backend: Backend) -> None:
    cp = backend.new()
    await cp.aput_state({"thread_id": "r"}, AgentState(context=[user("kept")]))
    await cp.arelease()
    await cp.arelease()  # idempotent
    await cp.aclose()
    state = await cp.aget_state({"thread_id": "r"})
    assert [m.text() for m in state.context] == ["kept"]
    if backend.durable:
        peer = backend.peer(cp)
        assert [m.text() for m in (await peer.aget_state({"thread_id": "r"})).context] == ["kept"]


def test_sync_release_and_setup_outside_a_loop(sync_backend: Backend) -> None:
    cp = sync_backend.new()
    cp.setup()
    cp.put_state({"thread_id": "s"}, AgentState(context=[user("x")]))
    cp.release()
    cp.release()
    assert [m.text() for m in cp.get_state({"thread_id": "s"}).context] == ["x"]


@pytest.mark.anyio
async def test_sync_setup_inside_a_loop_names_the_await_to_use() -> None:
    cp = InMemoryCheckpointer()
    with pytest.raises(SyncInEventLoopError) as info:
        cp.setup()
    assert isinstance(info.value, RuntimeError)
    assert info.value.error_code == "GRAPH_007" and "asetup" in str(info.value)


# -- generic cache values -----------------------------------------------------------------------
@pytest.mark.anyio
async def test_cache_values_round_trip_list_and_clear(backend: Backend) -> None:
    cp = backend.new()
    when = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    await cp.aput_cache_value("llm-cache", "prompt-a", {"response": "yes", "at": when})
    await cp.aput_cache_value("llm-cache", "prompt-b", [1, 2, 3])
    await cp.aput_cache_value("llm-cache", "other", "z")
    await cp.aput_cache_value("embeddings", "prompt-a", 0.5)
    assert await cp.aget_cache_value("llm-cache", "prompt-a") == {"response": "yes", "at": when}
    assert await cp.aget_cache_value("embeddings", "prompt-a") == 0.5
    assert await cp.aget_cache_value("llm-cache", "missing") is None
    assert await cp.alist_cache_keys("llm-cache", prefix="prompt-") == ["prompt-a", "prompt-b"]
    assert await cp.alist_cache_keys("llm-cache") == ["other", "prompt-a", "prompt-b"]
    await cp.aput_cache_value("llm-cache", "prompt-b", "replaced")
    assert await cp.aget_cache_value("llm-cache", "prompt-b") == "replaced"
    assert await cp.aclear_cache_value("llm-cache", "prompt-a") is True
    assert await cp.aclear_cache_value("llm-cache", "prompt-a") is False
    assert await cp.aget_cache_value("llm-cache", "prompt-a") is None
    assert await cp.alist_cache_keys("embeddings") == ["prompt-a"]


@pytest.mark.anyio
async def test_cache_keys_and_namespaces_are_taken_literally(backend: Backend) -> None:
    cp = backend.new()
    await cp.aput_cache_value("a:b", "c", 1)
    await cp.aput_cache_value("a", "b:c", 2)
    await cp.aput_cache_value("ns", "*[x]?", 3)
    await cp.aput_cache_value("ns", "plain", 4)
    assert await cp.aget_cache_value("a:b", "c") == 1
    assert await cp.aget_cache_value("a", "b:c") == 2
    assert await cp.alist_cache_keys("a") == ["b:c"]
    assert await cp.alist_cache_keys("ns", prefix="*[") == ["*[x]?"]
    assert await cp.alist_cache_keys("ns", prefix="p") == ["plain"]


@pytest.mark.anyio
async def test_cache_values_expire(backend: Backend) -> None:
    cp = backend.new()
    await cp.aput_cache_value("ttl", "short", "v", ttl_seconds=0.3)
    await cp.aput_cache_value("ttl", "long", "v", ttl_seconds=60)
    assert await cp.aget_cache_value("ttl", "short") == "v"
    await anyio.sleep(0.6)
    assert await cp.aget_cache_value("ttl", "short") is None
    assert await cp.alist_cache_keys("ttl") == ["long"]
    assert await cp.aclear_cache_value("ttl", "short") is False


@pytest.mark.anyio
async def test_cache_values_live_in_the_cache_tier(backend: Backend) -> None:
    """Shared through the file (SQLite) or Redis; in this process for Postgres without Redis
    (its LRU tier) and for memory."""
    cp = backend.new()
    await cp.aput_cache_value("shared", "k", "v")
    peer = backend.peer(cp)
    seen = await peer.aget_cache_value("shared", "k")
    if backend.kind in ("postgres", "postgres-pgbouncer", "postgres-partitioned"):
        assert seen is None
    else:
        assert seen == "v"


@pytest.mark.anyio
async def test_bad_cache_arguments_are_refused_before_anything_is_stored(backend: Backend) -> None:
    cp = backend.new()
    for args, kwargs in (
        (("", "k", 1), {}),
        (("ns", "", 1), {}),
        (("__tenxgraph_state__", "k", 1), {}),
        (("ns", "k", 1), {"ttl_seconds": 0}),
        (("ns", "k", 1), {"ttl_seconds": "10"}),
    ):
        with pytest.raises(ValidationError) as info:
            await cp.aput_cache_value(*args, **kwargs)
        assert info.value.error_code == "VALIDATION_000"
    with pytest.raises(SerializationError):
        await cp.aput_cache_value("ns", "k", {"fn": object()})
    assert await cp.alist_cache_keys("ns") == []


def test_sync_cache_twins(sync_backend: Backend) -> None:
    cp = sync_backend.new()
    cp.put_cache_value("n", "k", {"a": 1}, ttl_seconds=30)
    assert cp.get_cache_value("n", "k") == {"a": 1}
    assert cp.list_cache_keys("n") == ["k"]
    assert cp.clear_cache_value("n", "k") is True
    cp.put_state_cache({"thread_id": "t"}, AgentState(context=[user("s")]))
    assert cp.get_state_cache({"thread_id": "t"}).context[0].text() == "s"


# -- the state cache ----------------------------------------------------------------------------
@pytest.mark.anyio
async def test_state_cache_round_trip_scoped_by_user_and_not_a_checkpoint(backend: Backend) -> None:
    cp = typed(backend, TripState)
    try:
        mine = {"thread_id": "sc", "user_id": "ana"}
        state = TripState(city="Porto", context=[user("one"), user("two")])
        assert await cp.aput_state_cache(mine, state) is state
        back = await cp.aget_state_cache(mine)
        assert isinstance(back, TripState) and back.city == "Porto"
        assert [m.text() for m in back.context] == ["one", "two"]
        assert [m.message_id for m in back.context] == [m.message_id for m in state.context]
        assert await cp.aget_state_cache({"thread_id": "sc", "user_id": "bob"}) is None
        assert await cp.aget_state(mine) is None  # the durable state is untouched
        assert await cp.aget_state_cache({"thread_id": "other", "user_id": "ana"}) is None
    finally:
        await cp.aclose()


@pytest.mark.anyio
async def test_cleaning_a_thread_drops_its_state_cache(backend: Backend) -> None:
    cp = backend.new()
    cfg = {"thread_id": "gone", "user_id": "ana"}
    await cp.aput_state(cfg, AgentState(context=[user("x")]))
    await cp.aput_state_cache(cfg, AgentState(context=[user("cached")]))
    assert await cp.aclean_thread(cfg) is True
    assert await cp.aget_state_cache(cfg) is None


# -- reference names and ThreadInfo -------------------------------------------------------------
@pytest.mark.anyio
async def test_reference_page_method_names(backend: Backend) -> None:
    cp = backend.new()
    cfg = {"thread_id": "names", "user_id": "ana"}
    await cp.aput_messages(cfg, [user("alpha"), user("beta")])
    msgs = await cp.aget_messages(cfg, search="bet", offset=0, limit=10)
    assert [m.text() for m in msgs] == ["beta"]
    threads = await cp.aget_threads({"user_id": "ana"}, None, 0, 10)
    assert [t.thread_id for t in threads] == ["names"]
    assert await cp.adelete_thread(cfg) is True
    assert await cp.aget_threads({"user_id": "ana"}) == []


@pytest.mark.anyio
async def test_thread_info_has_a_thread_name(backend: Backend) -> None:
    cp = backend.new()
    cfg = {"thread_id": "named", "user_id": "ana"}
    await cp.aput_state(cfg, AgentState(context=[user("x")]))
    info = await cp.aget_thread(cfg)
    assert isinstance(info, ThreadInfo) and info.thread_name is None
    await cp.aput_thread(cfg, {"thread_name": "Weekend in Lyon"})
    info = await cp.aget_thread(cfg)
    assert info.thread_name == "Weekend in Lyon"
    assert info.model_dump()["thread_name"] == "Weekend in Lyon"
    assert [t.thread_name for t in await cp.alist_threads({"user_id": "ana"})] == [
        "Weekend in Lyon"
    ]


# -- a checkpointer of your own ------------------------------------------------------------------
class DictCheckpointer(BaseCheckpointer):
    """Written the way 10xGraph's reference page shows a custom checkpointer: no __init__ with
    a store, async methods taking ``config`` only."""

    async def asetup(self) -> Any:
        self.rows: dict[str, AgentState] = {}
        self.puts = 0
        return True

    async def aput_state(self, config: dict, state: AgentState) -> AgentState:
        self.rows[config["thread_id"]] = state.model_copy(deep=True)
        self.puts += 1
        return state

    async def aget_state(self, config: dict) -> AgentState | None:
        return self.rows.get(config["thread_id"])

    async def aclear_state(self, config: dict) -> Any:
        return self.rows.pop(config["thread_id"], None) is not None


@pytest.mark.anyio
async def test_your_own_checkpointer_runs_a_graph() -> None:
    cp = DictCheckpointer()
    g = StateGraph()
    g.add_node("echo", lambda state: f"echo {state.context[-1].text()}")
    g.set_entry_point("echo")
    g.add_edge("echo", END)
    app = g.compile(checkpointer=cp)
    await app.ainvoke({"messages": [user("one")]}, {"thread_id": "mine"})
    out = await app.ainvoke({"messages": [user("two")]}, {"thread_id": "mine"})
    assert [m.text() for m in out["messages"]] == ["two", "echo two"]
    assert [m.text() for m in cp.rows["mine"].context] == ["one", "echo one", "two", "echo two"]
    assert cp.puts >= 2
    history = await app.aget_state_history({"thread_id": "mine"})
    assert len(history) == 1 and history[0].state.context[-1].text() == "echo two"
    assert (await app.astop({"thread_id": "mine"}))["ok"] is True
    with pytest.raises(StorageError) as info:
        await cp.alist_threads({})
    assert "alist_threads" in str(info.value)


def test_your_own_checkpointer_must_implement_state_methods() -> None:
    class Half(BaseCheckpointer):
        async def aget_state(self, config: dict) -> AgentState | None:
            return None

    with pytest.raises(TypeError) as info:
        Half()
    assert "aput_state" in str(info.value)
    with pytest.raises(TypeError):
        BaseCheckpointer()
