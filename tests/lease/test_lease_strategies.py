"""The multitask strategies within one process, on every store (issue 15, docs/how-to/run-lease.md):
refusal of bad settings before anything is written, ``ThreadBusyError``, enqueue's timeout and
arrival order, interrupt and rollback, many tasks and threads taking turns on one thread, and
the round trips the lease costs."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _lease_child import chain, read_effects
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import ConfigError, StaleStateError, ThreadBusyError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import (
    InMemoryCheckpointer,
    PgCheckpointer,
    SqliteCheckpointer,
)
from tenxgraph.storage.checkpointer.base import BaseCheckpointer
from tenxgraph.utils import END

TIMING = {"lease_ttl_s": 1.0, "lease_renew_s": 0.3}


def user(text: str) -> Message:
    return Message.text_message(text, message_id=f"u-{text}")


def slow_graph(cp: Any, effects: Path, node_s: float, nodes: int = 2) -> Any:
    """Async nodes (``anyio.sleep``), each logging ``"<node> <input text>"`` at its start."""

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            last = next(m.text() for m in reversed(state.context) if m.role == "user")
            with open(effects, "a", encoding="utf-8") as f:  # noqa: ASYNC230 - a test log
                f.write(f"{name} {last}\n")
            await anyio.sleep(node_s)
            return Message.text_message(f"{name}:{last}", role="assistant")

        return node

    g = StateGraph()
    names = [f"n{i}" for i in range(nodes)]
    for n in names:
        g.add_node(n, make(n))
    g.set_entry_point(names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=cp)


# -- settings refused before anything is written ------------------------------------------------
@pytest.mark.parametrize("bad", ["queue", "REJECT", "", 1, True])
def test_an_unknown_strategy_in_the_config_is_refused_before_anything_is_written(
    tmp_path: Path, bad: Any
) -> None:
    cp = InMemoryCheckpointer()
    app = chain(cp, tmp_path / "e.log", 1, 0.0)
    with pytest.raises(ConfigError) as info:
        app.invoke({"messages": [user("a")]}, {"thread_id": "t", "multitask_strategy": bad})
    assert info.value.error_code == "CONFIG_001"
    assert info.value.context["key"] == "multitask_strategy"
    assert "reject" in str(info.value) and "enqueue" in str(info.value)
    assert cp.get_state({"thread_id": "t"}) is None
    assert read_effects(tmp_path / "e.log") == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"multitask_strategy": "wait"},
        {"lease_ttl_s": 0},
        {"lease_ttl_s": "5"},
        {"lease_renew_s": 5.0, "lease_ttl_s": 5.0},
        {"enqueue_timeout_s": -1},
        {"lease_ttl_s": float("inf")},
    ],
)
def test_bad_lease_settings_are_refused_by_every_checkpointer(
    tmp_path: Path, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError):
        InMemoryCheckpointer(**kwargs)
    with pytest.raises(ConfigError):
        SqliteCheckpointer(str(tmp_path / "x.db"), **kwargs)
    with pytest.raises(ConfigError):
        # refused before any pool or client is made (nothing listens on port 1)
        PgCheckpointer("postgresql://nobody@127.0.0.1:1/none", **kwargs)
    assert not (tmp_path / "x.db").exists()


def test_a_strategy_needs_a_built_in_store(tmp_path: Path) -> None:
    class Mine(BaseCheckpointer[AgentState]):
        def __init__(self) -> None:
            super().__init__()
            self.saved: AgentState | None = None

        async def aget_state(self, config: dict[str, Any], state_cls: Any = None) -> Any:
            return self.saved

        async def aput_state(self, config: dict[str, Any], state: AgentState) -> AgentState:
            self.saved = state
            return state

    cp = Mine()
    app = chain(cp, tmp_path / "e.log", 1, 0.0)
    with pytest.raises(ConfigError, match="built-in store"):
        app.invoke({"messages": [user("a")]}, {"thread_id": "t", "multitask_strategy": "reject"})
    assert cp.saved is None
    # without a strategy it runs as before (no lease)
    app.invoke({"messages": [user("b")]}, {"thread_id": "t"})
    assert cp.saved is not None


# -- reject -------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_reject_refuses_a_second_run_before_any_of_its_nodes_runs(
    backend: Backend, tmp_path: Path
) -> None:
    effects = tmp_path / "e.log"
    cp = backend.new(multitask_strategy="reject", **TIMING)
    app = slow_graph(cp, effects, 0.4)
    cfg = {"thread_id": "t"}
    await app.ainvoke({"messages": [user("first")]}, dict(cfg))  # version 2 now
    errors: list[ThreadBusyError] = []

    async def second() -> None:
        with pytest.raises(ThreadBusyError) as info:
            await app.ainvoke({"messages": [user("second")]}, dict(cfg))
        errors.append(info.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(app.ainvoke, {"messages": [user("third")]}, dict(cfg))
        await anyio.sleep(0.15)  # "third" holds the lease, inside its first node
        tg.start_soon(second)
    err = errors[0]
    assert isinstance(err, StaleStateError)  # existing retry loops keep working
    assert err.error_code == "STORAGE_BUSY_001" and str(err).startswith("[STORAGE_BUSY_001]")
    assert err.context["thread_id"] == "t"
    assert err.context["expected_version"] == err.context["current_version"] == 2
    assert 0 < err.context["lease_expires_in_s"] <= TIMING["lease_ttl_s"]
    assert err.context["strategy"] == "reject"
    assert [line.split()[1] for line in effects.read_text().splitlines()].count("second") == 0
    state = await cp.aget_state(cfg)
    assert [m.text() for m in state.context if m.role == "user"] == ["first", "third"]
    # the lease was released by the last write: the next run goes at once
    await app.ainvoke({"messages": [user("fourth")]}, dict(cfg))


@pytest.mark.anyio
async def test_reject_never_refuses_a_resume(backend: Backend, tmp_path: Path) -> None:
    """A resume (``invoke(None)``) waits for the lease whatever the strategy, ``reject``
    included: while another run holds the thread it waits instead of raising
    ``ThreadBusyError``, then finds the thread finished and runs nothing."""
    effects = tmp_path / "e.log"
    cp = backend.new(multitask_strategy="reject", **TIMING)
    app = slow_graph(cp, effects, 0.4)
    cfg = {"thread_id": "t"}
    resumed: list[Any] = []

    async def resume() -> None:
        resumed.append(await app.ainvoke(None, dict(cfg)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(app.ainvoke, {"messages": [user("first")]}, dict(cfg))
        with anyio.fail_after(10):  # "first" holds the lease once its first node started
            while not effects.exists() or not effects.read_text():  # noqa: ASYNC110 - polls a file another task writes
                await anyio.sleep(0.01)
        tg.start_soon(resume)
    assert resumed == [{"messages": []}]  # waited, then nothing was left to resume
    assert effects.read_text().splitlines() == ["n0 first", "n1 first"]  # each node once
    state = await cp.aget_state(cfg)
    assert state.execution_meta.status == "completed"


# -- enqueue ------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_enqueue_serves_waiting_runs_in_arrival_order(
    backend: Backend, tmp_path: Path
) -> None:
    effects = tmp_path / "e.log"
    cp = backend.new(multitask_strategy="enqueue", **TIMING)
    app = slow_graph(cp, effects, 0.1)
    cfg = {"thread_id": "t"}
    await cp.asetup()  # connections ready: the arrival order is the order of the calls below
    await app.ainvoke({"messages": [user("warm")]}, {"thread_id": "warm"})
    effects.unlink()
    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(app.ainvoke, {"messages": [user(f"r{i}")]}, dict(cfg))
            await anyio.sleep(0.04)  # arrival order r0 < r1 < r2 < r3
    lines = [line.split() for line in effects.read_text().splitlines()]
    assert [text for node, text in lines if node == "n0"] == ["r0", "r1", "r2", "r3"]
    # runs never overlap: each run's two nodes are adjacent
    assert [text for _, text in lines] == ["r0", "r0", "r1", "r1", "r2", "r2", "r3", "r3"]
    history = await cp.aget_state_history(cfg)
    assert [s.version for s in history] == list(range(8, 0, -1))


@pytest.mark.anyio
async def test_enqueue_times_out_with_a_clear_error_and_leaves_the_queue(
    backend: Backend, tmp_path: Path
) -> None:
    effects = tmp_path / "e.log"
    cp = backend.new(multitask_strategy="enqueue", enqueue_timeout_s=0.3, **TIMING)
    app = slow_graph(cp, effects, 0.6, nodes=1)
    cfg = {"thread_id": "t"}
    await app.ainvoke({"messages": [user("warm")]}, {"thread_id": "warm"})
    caught: list[ThreadBusyError] = []

    async def late() -> None:
        await anyio.sleep(0.1)
        t0 = time.monotonic()
        with pytest.raises(ThreadBusyError) as info:
            await app.ainvoke({"messages": [user("late")]}, dict(cfg))
        assert 0.25 <= time.monotonic() - t0 < 0.6
        caught.append(info.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(app.ainvoke, {"messages": [user("long")]}, dict(cfg))
        tg.start_soon(late)
    err = caught[0]
    assert err.context["strategy"] == "enqueue" and err.context["waited_s"] >= 0.25
    assert "enqueue_timeout_s" in str(err)
    # the timed-out run left the queue: the next one is not held behind a ghost
    t0 = time.monotonic()
    await app.ainvoke({"messages": [user("next")]}, dict(cfg))
    assert time.monotonic() - t0 < 0.6 + 0.5


# -- interrupt and rollback ----------------------------------------------------------------------
@pytest.mark.anyio
@only("memory", "sqlite", "postgres")
@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_interrupt_stops_the_holder_at_a_node_boundary_rollback_drops_its_steps(
    backend: Backend, tmp_path: Path, strategy: str
) -> None:
    effects = tmp_path / "e.log"
    cp = backend.new(state_history_limit=0, **TIMING)
    # nodes longer than the holder's 1 s durable stop poll
    app = slow_graph(cp, effects, 0.7, nodes=4)
    cfg = {"thread_id": "t"}
    results: dict[str, Any] = {}

    async def run(name: str, strat: str | None) -> None:
        results[name] = await app.ainvoke(
            {"messages": [user(name)]}, {**cfg, "multitask_strategy": strat}
        )

    await run("before", None)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "old", "enqueue")
        await anyio.sleep(0.3)
        tg.start_soon(run, "new", strategy)
    ran = [line.split() for line in effects.read_text().splitlines()]
    old_nodes = [n for n, text in ran if text == "old"]
    assert 1 <= len(old_nodes) < 4  # stopped at a node boundary, before its end
    assert [n for n, text in ran if text == "new"] == ["n0", "n1", "n2", "n3"]
    state = await cp.aget_state(cfg)
    texts = [m.text() for m in state.context]
    history = await cp.aget_state_history(cfg)
    assert [s.version for s in history] == list(range(len(history), 0, -1))
    kept = {m.text() for s in history for m in s.state.context}
    if strategy == "interrupt":
        # the new run goes on from the state the stopped run left (its steps kept)
        assert texts[: 5 + 1 + len(old_nodes)] == [
            "before",
            *(f"n{i}:before" for i in range(4)),
            "old",
            *(f"{n}:old" for n in old_nodes),
        ]
    else:
        # the stopped run's checkpoints left the current state; history keeps them
        assert "old" not in texts and all(f"{n}:old" in kept for n in old_nodes)
        assert texts[:5] == ["before", *(f"n{i}:before" for i in range(4))]
    assert texts[-5:] == ["new", *(f"n{i}:new" for i in range(4))]


# -- many turns in one process -------------------------------------------------------------------
@pytest.mark.anyio
@only("memory", "sqlite")
@pytest.mark.parametrize("strategy", ["reject", "enqueue", "interrupt", "rollback"])
async def test_tasks_taking_turns_on_one_thread_throw_no_node_away(
    backend: Backend, tmp_path: Path, strategy: str
) -> None:
    effects = tmp_path / "e.log"
    cp = backend.new(state_history_limit=0, **TIMING)
    app = chain(cp, effects, 2, 0.01)
    counts = {"ok": 0, "busy": 0, "stale": 0}

    async def worker(w: int) -> None:
        t = 0
        while t < 4:
            try:
                await app.ainvoke(
                    {"messages": [user(f"w{w}-{t}")]},
                    {"thread_id": "t", "multitask_strategy": strategy},
                )
            except ThreadBusyError:
                counts["busy"] += 1
                await anyio.sleep(0.01)
                continue
            except StaleStateError:
                counts["stale"] += 1
                continue
            counts["ok"] += 1
            t += 1

    async with anyio.create_task_group() as tg:
        for w in range(4):
            tg.start_soon(worker, w)
    assert counts["stale"] == 0 and counts["ok"] == 16
    history = await cp.aget_state_history({"thread_id": "t"})
    assert [s.version for s in history] == list(range(len(history), 0, -1))
    kept = {m.message_id for s in history for m in s.state.context}
    executed = [eid for _, eid in read_effects(effects)]
    assert executed and all(eid in kept for eid in executed)


def test_threads_taking_turns_through_the_sync_api_throw_no_node_away(tmp_path: Path) -> None:
    effects = tmp_path / "e.log"
    cp = InMemoryCheckpointer(state_history_limit=0, multitask_strategy="enqueue", **TIMING)
    app = chain(cp, effects, 2, 0.01)
    failures: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            for t in range(4):
                app.invoke({"messages": [user(f"w{w}-{t}")]}, {"thread_id": "t"})
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert failures == []
    state = cp.get_state({"thread_id": "t"})
    assert len(state.context) == 16 * 3
    history = cp.get_state_history({"thread_id": "t"})
    assert [s.version for s in history] == list(range(32, 0, -1))
    kept = {m.message_id for s in history for m in s.state.context}
    assert all(eid in kept for _, eid in read_effects(effects))
    cp.close()


# -- cost ---------------------------------------------------------------------------------------
@pytest.mark.anyio
@only("memory", "sqlite", "postgres")
async def test_a_run_with_a_lease_takes_it_in_its_first_read_and_releases_it_in_its_last_write(
    backend: Backend, tmp_path: Path
) -> None:
    cp = backend.new(multitask_strategy="enqueue", **TIMING)
    source = cp.store.source  # type: ignore[union-attr]
    calls: list[str] = []
    for name in (
        "read",
        "read_since",
        "lease_acquire",
        "lease_read",
        "lease_renew",
        "lease_release",
    ):
        real = getattr(source, name)

        def spy(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
            calls.append(_name)
            return _real(*a, **k)

        setattr(source, name, spy)
    app = chain(cp, tmp_path / "e.log", 3, 0.0)
    await app.ainvoke({"messages": [user("a")]}, {"thread_id": "t"})
    await app.ainvoke({"messages": [user("b")]}, {"thread_id": "t"})
    # the acquisition rode on each run's first read, the release on its last checkpoint write;
    # no renewal in a short run
    assert calls == ["lease_read", "lease_read"]
