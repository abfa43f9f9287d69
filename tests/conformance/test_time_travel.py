"""Time travel on every store (issue 32, docs/how-to/time-travel.md): reading, rewinding and
forking a thread at any kept version of a 21-step agent run with tools gives exactly that
version's state; continuing a fork never changes its source; two concurrent rewinds of one
head: one wins, the other gets ``StaleStateError``; a replayed tool call is answered by the
ledger (0 re-executions) unless the run sets ``replay_tools``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import (
    ResourceNotFoundError,
    StaleStateError,
    StorageError,
    ValidationError,
)
from tenxgraph.core.graph import StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.models.base import assistant_message
from tenxgraph.utils import END

pytestmark = pytest.mark.anyio

#: tool calls of one run: 11 agent steps + 10 tool steps = 21 versions (one per node)
CALLS = 10
LAST = 2 * CALLS + 1


class TTState(AgentState):
    steps: int = 0


def agent_graph(cp: Any, executed: list[int]) -> Any:
    """An agent that calls ``add`` ``CALLS`` times, then answers. Its message ids depend only
    on how many tool results it has seen, as a replayed deterministic model's would."""

    def add(x: int) -> int:
        executed.append(x)
        return x + 100

    def agent(state: TTState) -> dict[str, Any]:
        n = sum(1 for m in state.context if m.role == "tool")
        if n < CALLS:
            msg = assistant_message(
                None,
                [{"id": f"call-{n}", "name": "add", "arguments": {"x": n}}],
                message_id=f"a-{n}",
            )
        else:
            msg = assistant_message(f"sum done after {n}", message_id="a-final")
        return {"messages": [msg], "steps": state.steps + 1}

    def route(state: TTState) -> str:
        last = state.context[-1]
        return "tools" if last.tool_calls() else END

    g = StateGraph(TTState)
    g.add_node("agent", agent)
    g.add_node("tools", ToolNode([add]))
    g.set_entry_point("agent")
    g.add_conditional_edges("agent", route, {"tools": "tools", END: END})
    g.add_edge("tools", "agent")
    return g.compile(checkpointer=cp)


def dump(state: Any) -> dict[str, Any]:
    return state.model_dump(mode="json")


async def run_agent(backend: Backend, tid: str, **cp_kwargs: Any) -> tuple[Any, list[int], Any]:
    executed: list[int] = []
    cp = backend.new(state_history_limit=cp_kwargs.pop("state_history_limit", None), **cp_kwargs)
    app = agent_graph(cp, executed)
    await app.ainvoke(
        {"messages": [Message.text_message("add them", message_id="u-1")]},
        {"thread_id": tid, "recursion_limit": 40},
    )
    return app, executed, cp


async def test_read_rewind_and_fork_at_every_kept_version(backend: Backend) -> None:
    app, executed, cp = await run_agent(backend, "tt-all")
    cfg = {"thread_id": "tt-all"}
    history = await app.aget_state_history(dict(cfg))
    assert [s.version for s in history] == list(range(LAST, 0, -1))
    assert executed == list(range(CALLS))
    peer = agent_graph(backend.peer(cp), [])
    for snap in history:
        want = dump(snap.state)
        assert dump(await app.aget_state(dict(cfg), version=snap.version)) == want
        fork_cfg = await app.afork(dict(cfg), snap.version, f"tt-all-fork-{snap.version}")
        assert fork_cfg == {"thread_id": f"tt-all-fork-{snap.version}", "user_id": "anonymous"}
        assert dump(await peer.aget_state(dict(fork_cfg))) == want
        assert dump(await app.aget_state(dict(fork_cfg))) == want
        info = await cp.aget_thread(fork_cfg)
        assert info is not None and info.metadata["forked_from"] == {
            "thread_id": "tt-all",
            "version": snap.version,
        }
    head = LAST
    for snap in history:  # newest first: each rewind writes a new head equal to that version
        rewound = await app.arewind(dict(cfg), snap.version)
        head += 1
        assert dump(rewound) == dump(snap.state)
        assert dump(await app.aget_state(dict(cfg))) == dump(snap.state)
        assert dump(await peer.aget_state(dict(cfg))) == dump(snap.state)  # through its caches
        if snap.version % 7 == 0:  # a new instance: an empty LRU, Redis's write-through copy
            flush = getattr(cp.store, "aflush", None)
            if flush is not None:
                await flush()  # the write-through reached Redis
            fresh = agent_graph(backend.peer(cp), [])
            assert dump(await fresh.aget_state(dict(cfg))) == dump(snap.state)
        newest = (await app.aget_state_history(dict(cfg), limit=1))[0]
        assert newest.version == head
        assert newest.origin == {"op": "rewind", "version": snap.version}
    # History keeps everything: the original run's versions are untouched.
    again = {s.version: dump(s.state) for s in await app.aget_state_history(dict(cfg))}
    assert all(again[s.version] == dump(s.state) for s in history)
    assert executed == list(range(CALLS))  # reading and travelling ran no tool


async def test_a_fork_continues_alone_and_replays_tools_from_the_ledger(backend: Backend) -> None:
    app, executed, _ = await run_agent(backend, "tt-src")
    src = {"thread_id": "tt-src"}
    before = [(s.version, dump(s.state)) for s in await app.aget_state_history(dict(src))]
    # Version 5: the agent asked for call-2, the tool has not answered yet.
    at = await app.aget_state(dict(src), version=5)
    assert at.context[-1].tool_calls() and at.execution_meta.current_node == "tools"
    await app.afork(dict(src), 5, "tt-fork")
    fork = {"thread_id": "tt-fork"}
    out = await app.ainvoke(None, dict(fork))  # finishes the forked run
    assert executed == list(range(CALLS))  # every call of the fork was a ledger answer
    assert out["messages"][-1].text() == "sum done after 10"
    await app.ainvoke({"messages": [Message.text_message("again", message_id="u-2")]}, dict(fork))
    history = await app.aget_state_history(dict(fork))
    assert history[-1].version == 1
    assert history[-1].origin == {"op": "fork", "thread_id": "tt-src", "version": 5}
    after = [(s.version, dump(s.state)) for s in await app.aget_state_history(dict(src))]
    assert after == before  # the source never changed


async def test_replay_tools_re_executes_under_a_new_key(backend: Backend) -> None:
    app, executed, cp = await run_agent(backend, "tt-replay")
    cfg = {"thread_id": "tt-replay"}
    ledger = await cp.aledger_count(dict(cfg))
    await app.arewind(dict(cfg), 5)  # call-2 pending
    await app.ainvoke(None, dict(cfg))
    assert executed == list(range(CALLS))  # 0 re-executions
    assert await cp.aledger_count(dict(cfg)) == ledger
    await app.arewind(dict(cfg), 5)
    out = await app.ainvoke(None, {**cfg, "replay_tools": True})
    assert executed == list(range(CALLS)) + list(range(2, CALLS))  # each replayed call ran again
    assert await cp.aledger_count(dict(cfg)) == ledger + CALLS - 2
    assert out["messages"][-1].text() == "sum done after 10"


async def test_two_concurrent_rewinds_one_wins(backend: Backend) -> None:
    app, _, cp = await run_agent(backend, "tt-race")
    other = agent_graph(backend.peer(cp), [])
    cfg = {"thread_id": "tt-race"}
    await app.aget_state(cfg)
    assert cfg["_checkpoint_version"] == LAST
    results: list[Any] = []

    async def rewind(g: Any, v: int) -> None:
        try:
            results.append(await g.arewind(dict(cfg), v))
        except StaleStateError as exc:
            results.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(rewind, app, 4)
        tg.start_soon(rewind, other, 9)
    errors = [r for r in results if isinstance(r, StaleStateError)]
    assert len(errors) == 1 and errors[0].context["expected_version"] == LAST
    winner = next(r for r in results if not isinstance(r, StaleStateError))
    assert [s.version for s in await app.aget_state_history(cfg)][:2] == [LAST + 1, LAST]
    assert dump(await other.aget_state({"thread_id": "tt-race"})) == dump(winner)


async def test_reads_pin_the_head_and_a_lost_rewind_can_retry(backend: Backend) -> None:
    app, _, cp = await run_agent(backend, "tt-pin")
    other = agent_graph(backend.peer(cp), [])
    # Versions beyond a 64-bit integer are refused the same way on every store, before I/O.
    for call in (
        lambda: app.aget_state({"thread_id": "tt-pin"}, version=2**63),
        lambda: app.arewind({"thread_id": "tt-pin"}, 2**63),
        lambda: app.afork({"thread_id": "tt-pin"}, 2**63, "tt-pin-big"),
    ):
        with pytest.raises(ValidationError) as big:
            await call()
        assert "too large" in str(big.value)
    with pytest.raises(ResourceNotFoundError):  # the largest one is a plain missing version
        await app.aget_state({"thread_id": "tt-pin"}, version=2**63 - 1)
    # Reading an old version or the history pins the head seen, as a plain get_state does
    # (a further page of history, with ``before``, sees no head and pins nothing).
    for read in (
        lambda c: app.aget_state(c, version=3),
        lambda c: app.aget_state_history(c, limit=2),
    ):
        cfg: dict[str, Any] = {"thread_id": "tt-pin"}
        await read(cfg)
        assert cfg["_checkpoint_version"] == LAST
    paged: dict[str, Any] = {"thread_id": "tt-pin"}
    await app.aget_state_history(paged, limit=2, before=5)
    assert "_checkpoint_version" not in paged
    assert await app.aget_state_history(missing := {"thread_id": "tt-pin-none"}) == []
    assert missing["_checkpoint_version"] == 0
    # ... so a rewind after a concurrent one is refused instead of landing on top of it.
    await other.arewind({"thread_id": "tt-pin"}, 9)
    with pytest.raises(StaleStateError) as lost:
        await app.arewind(cfg, 3)
    assert lost.value.context["expected_version"] == LAST
    assert "call rewind again" in str(lost.value)
    # The lost rewind dropped the pin: calling again compares against a fresh read and wins.
    assert "_checkpoint_version" not in cfg
    assert dump(await app.arewind(cfg, 3)) == dump(await app.aget_state(dict(cfg), version=3))
    assert cfg["_checkpoint_version"] == LAST + 2


async def test_pruned_versions_name_the_oldest_kept(backend: Backend) -> None:
    app, _, _ = await run_agent(backend, "tt-pruned", state_history_limit=5)
    cfg = {"thread_id": "tt-pruned"}
    for call in (
        lambda: app.aget_state(dict(cfg), version=3),
        lambda: app.arewind(dict(cfg), 3),
        lambda: app.afork(dict(cfg), 3, "tt-pruned-fork"),
    ):
        with pytest.raises(ResourceNotFoundError) as err:
            await call()
        assert err.value.context["oldest_kept"] == LAST - 4
        assert f"oldest kept version is {LAST - 4}" in str(err.value)
    with pytest.raises(ResourceNotFoundError) as err:
        await app.aget_state(dict(cfg), version=99)
    assert err.value.context["latest"] == LAST
    # The oldest kept version still travels, after pruning moved past it.
    want = dump(await app.aget_state(dict(cfg), version=LAST - 4))
    await app.afork(dict(cfg), LAST - 4, "tt-pruned-fork")
    await app.arewind(dict(cfg), LAST - 4)  # its new head prunes that version: rows stay
    assert dump(await app.aget_state({"thread_id": "tt-pruned-fork"})) == want
    assert dump(await app.aget_state(dict(cfg))) == want
    await app.ainvoke(None, dict(cfg))
    assert (await app.aget_state(dict(cfg))).context[-1].text() == "sum done after 10"


async def test_fork_with_update_and_refused_targets(backend: Backend) -> None:
    app, executed, cp = await run_agent(backend, "tt-edit")
    cfg = {"thread_id": "tt-edit"}
    v5 = await app.aget_state(dict(cfg), version=5)
    note = Message.text_message("try x=7 instead", message_id="u-edit")
    fork_cfg = await app.afork(dict(cfg), 5, "tt-edit-b", update={"messages": [note], "steps": 42})
    forked = await app.aget_state(fork_cfg)
    assert [m.message_id for m in forked.context] == [m.message_id for m in v5.context] + ["u-edit"]
    assert forked.steps == 42
    # A fresh reader (the peer's own caches) sees the same, and the fork continues from it.
    assert dump(await agent_graph(backend.peer(cp), []).aget_state(fork_cfg)) == dump(forked)
    # A new input first finishes the fork's unfinished run (its tool calls from the ledger).
    await app.ainvoke({"messages": [Message.text_message("go on", message_id="u-3")]}, fork_cfg)
    after = [m.text() for m in (await app.aget_state(fork_cfg)).context]
    assert after[-2:] == ["sum done after 10", "go on"] and "try x=7 instead" in after
    assert executed == list(range(CALLS))
    assert dump(await app.aget_state(dict(cfg), version=5)) == dump(v5)
    with pytest.raises(StaleStateError) as stale_err:  # the target exists
        await app.afork(dict(cfg), 5, "tt-edit-b")
    current = (await app.aget_state_history(fork_cfg, limit=1))[0].version
    assert stale_err.value.context["current_version"] == current
    assert f"already exists (version {current})" in str(stale_err.value)
    with pytest.raises(ValidationError) as self_err:  # not into its own source, before any I/O
        await app.afork(dict(cfg), 5, "tt-edit")
    assert "into itself" in str(self_err.value) and "None" not in str(self_err.value)
    # Another user sees nothing of the source, and no one writes into another user's thread.
    with pytest.raises(ResourceNotFoundError):
        await app.afork({**cfg, "user_id": "mallory"}, 5, "tt-edit-m")
    theirs = {"thread_id": "tt-mallory", "user_id": "mallory"}
    await app.ainvoke({"messages": [Message.text_message("mine")]}, dict(theirs))
    with pytest.raises(StorageError) as err:
        await app.afork(dict(cfg), 5, "tt-mallory")
    assert err.value.error_code == "STORAGE_FORBIDDEN_001"
    with pytest.raises(StorageError) as err:  # rewinding another user's thread is a write
        await app.arewind({**cfg, "user_id": "mallory"}, 5)
    assert err.value.error_code == "STORAGE_FORBIDDEN_001"
    with pytest.raises(ResourceNotFoundError):  # reading it finds nothing
        await app.aget_state({**cfg, "user_id": "mallory"}, version=5)


async def test_a_reader_without_the_state_class_loses_no_field(backend: Backend) -> None:
    """The CLI rewinds and forks with plain ``AgentState``: the stored values are kept as they
    are, fields it does not know included."""
    app, _, cp = await run_agent(backend, "tt-cls")
    cfg = {"thread_id": "tt-cls"}
    v7 = dump(await app.aget_state(dict(cfg), version=7))
    assert v7["steps"] == 4
    await cp.arewind(dict(cfg), 7, AgentState)
    await cp.afork(dict(cfg), 7, "tt-cls-fork", state_cls=AgentState)
    assert dump(await app.aget_state(dict(cfg))) == v7
    assert dump(await app.aget_state({"thread_id": "tt-cls-fork"})) == v7
