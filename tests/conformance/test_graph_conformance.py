"""Graph-level conformance: every storage guarantee of DESIGN section 3, seen through the graph
API, on every checkpointer (memory, SQLite, Postgres, Postgres + Redis; the embedded ones under
asyncio and trio). Also the cases reported against other runtimes and the bad inputs of issue 2.

Unless a test says otherwise, a graph writes one version per node it executes (per-step durable
checkpoints), and the input messages of a run become durable with the first node's checkpoint.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from _graph_crash import build as build_crash_graph
from _graph_crash import read_log
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    DURABLE,
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
    sync_backend_fixture,
)
from pydantic import BaseModel, Field

import tenxgraph
from tenxgraph.core.exceptions import (
    ConfigError,
    GraphError,
    GraphRecursionError,
    NodeTimeoutError,
    ResourceNotFoundError,
    SerializationError,
    StaleStateError,
    StorageError,
    ValidationError,
)
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.reducers import replace_messages
from tenxgraph.storage.checkpointer.base import HISTORY_PAGE
from tenxgraph.utils import END

HERE = Path(__file__).resolve().parent
REPO = Path(tenxgraph.__file__).resolve().parent.parent


# -- helpers --------------------------------------------------------------------------------------
def user(text: str, message_id: str | None = None) -> Message:
    return Message.text_message(text, message_id=message_id)


def texts(state_or_msgs: Any) -> list[str]:
    msgs = state_or_msgs.context if isinstance(state_or_msgs, AgentState) else state_or_msgs
    return [m.text() for m in msgs]


def ids(state: AgentState) -> list[str | int]:
    return [m.message_id for m in state.context]


def last_user(state: AgentState) -> str:
    for m in reversed(state.context):
        if m.role == "user":
            return m.text()
    return ""


def chain(
    cp: Any, names: list[str], *, state: Any = None, calls: list[str] | None = None
) -> CompiledGraph:
    """A straight graph ``names[0] -> names[1] -> ... -> END``; each node answers
    ``"<name><-<last user text>"`` and logs its name in ``calls``."""

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            if calls is not None:
                calls.append(name)
            return Message.text_message(f"{name}<-{last_user(state)}", role="assistant")

        return node

    g = StateGraph(state)
    for n in names:
        g.add_node(n, make(n))
    g.set_entry_point(names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=cp)


THREE = ["one", "two", "three"]


def turn_texts(turn: str) -> list[str]:
    """The four messages one run of the three-node graph adds for user text ``turn``."""
    return [turn] + [f"{n}<-{turn}" for n in THREE]


async def versions(app: CompiledGraph, cfg: dict[str, Any], **kw: Any) -> list[int]:
    return [s.version for s in await app.aget_state_history(dict(cfg), **kw)]


async def snapshot(
    app: CompiledGraph, cfg: dict[str, Any]
) -> tuple[int, list[Any], list[str], str]:
    """(version, message ids, texts, status) of the thread's latest state."""
    c = dict(cfg)
    st = await app.aget_state(c)
    assert st is not None
    return c["_checkpoint_version"], ids(st), texts(st), str(st.execution_meta.status)


class Crash(BaseException):
    """Stands in for a process dying inside a node: not an ``Exception``, so the runtime does
    not checkpoint an error state (exactly as after a real kill)."""


class Barrier:
    """Wait until ``n`` tasks arrived (created inside the running event loop)."""

    def __init__(self, n: int) -> None:
        self.n, self.count, self.event = n, 0, anyio.Event()

    async def wait(self) -> None:
        self.count += 1
        if self.count >= self.n:
            self.event.set()
        with anyio.fail_after(10):
            await self.event.wait()


# == DESIGN 3: versioned history ==================================================================
@pytest.mark.anyio
async def test_versions_one_per_node_without_gaps(backend: Backend) -> None:
    cp = backend.new(state_history_limit=0)
    app = chain(cp, THREE)
    cfg: dict[str, Any] = {"thread_id": "t-versions"}
    for i in range(3):
        await app.ainvoke({"messages": [user(f"u{i}")]}, cfg)
        assert cfg["_checkpoint_version"] == 3 * (i + 1)
    hist = await app.aget_state_history({"thread_id": "t-versions"})
    assert [s.version for s in hist] == list(range(9, 0, -1))
    oldest_first = list(reversed(hist))
    assert [s.status for s in oldest_first] == ["running", "running", "completed"] * 3
    assert [s.next_node for s in oldest_first] == ["two", "three", None] * 3
    for s in oldest_first:
        run, step = divmod(s.version - 1, 3)
        expected = [t for i in range(run) for t in turn_texts(f"u{i}")] + turn_texts(f"u{run}")[
            : step + 2
        ]
        assert texts(s.state) == expected, s.version
    # Another instance over the same data sees the very same history.
    peer = backend.peer(cp)
    assert await versions(chain(peer, THREE), cfg) == list(range(9, 0, -1))


@pytest.mark.anyio
async def test_state_history_limit_keeps_exactly_n(backend: Backend) -> None:
    cp = backend.new(state_history_limit=4)
    app = chain(cp, THREE)
    cfg = {"thread_id": "t-limit"}
    for i in range(3):
        await app.ainvoke({"messages": [user(f"u{i}")]}, dict(cfg))
    hist = await app.aget_state_history(cfg)
    assert [s.version for s in hist] == [9, 8, 7, 6]
    # Each kept version reconstructs exactly (v6 = end of run 2, v7..v9 = run 3).
    assert texts(hist[3].state) == turn_texts("u0") + turn_texts("u1")
    assert texts(hist[2].state) == turn_texts("u0") + turn_texts("u1") + turn_texts("u2")[:2]
    assert texts(hist[0].state) == turn_texts("u0") + turn_texts("u1") + turn_texts("u2")
    assert await versions(app, cfg, limit=2) == [9, 8]
    assert await versions(app, cfg, before=8) == [7, 6]
    with pytest.raises(ResourceNotFoundError) as ei:
        await cp.aget_version(cfg, 5)
    assert ei.value.error_code == "STORAGE_NOT_FOUND_000"
    assert texts(await cp.aget_version(cfg, 6)) == turn_texts("u0") + turn_texts("u1")


@pytest.mark.anyio
async def test_default_history_limit_is_20(backend: Backend) -> None:
    app = chain(backend.new(), THREE)
    cfg = {"thread_id": "t-default-limit"}
    for i in range(7):  # 21 versions
        await app.ainvoke({"messages": [user(f"u{i}")]}, dict(cfg))
    assert await versions(app, cfg) == list(range(21, 1, -1))


class TrimState(AgentState):
    """A state whose message list is replaced, not appended, by node updates."""

    context: Annotated[list[Message], replace_messages] = Field(default_factory=list)


@pytest.mark.anyio
async def test_old_version_reconstructs_after_replace_messages_node(backend: Backend) -> None:
    """A node returning ``{"context": ...}`` on a state annotated with ``replace_messages``
    keeps only the last two messages; every version written before stays exactly as it was."""
    cp = backend.new(state_history_limit=0)

    async def answer(state: TrimState) -> dict[str, Any]:
        reply = Message.text_message(f"answer<-{last_user(state)}", role="assistant")
        return {"context": [*state.context, reply]}

    async def trim(state: TrimState) -> dict[str, Any]:
        return {"context": list(state.context[-2:])}

    g = StateGraph(TrimState)
    g.add_node("answer", answer)
    g.add_node("trim", trim)
    g.set_entry_point("answer")
    g.add_edge("answer", "trim")
    g.add_edge("trim", END)
    app = g.compile(checkpointer=cp)
    cfg = {"thread_id": "t-trim"}

    recorded: dict[int, tuple[list[Any], list[str]]] = {}
    for i in range(3):
        await app.ainvoke({"messages": [user(f"u{i}", f"m-u{i}")]}, dict(cfg))
        for s in await app.aget_state_history(cfg):
            recorded.setdefault(s.version, (ids(s.state), texts(s.state)))
    # The input is appended (DESIGN 1), then the trim keeps the last two messages.
    assert recorded[2][1] == ["u0", "answer<-u0"]
    assert recorded[3][1] == ["u0", "answer<-u0", "u1", "answer<-u1"]
    assert recorded[4][1] == ["u1", "answer<-u1"]
    assert recorded[6][1] == ["u2", "answer<-u2"]
    assert recorded[4][0][0] == "m-u1"
    assert sorted(recorded) == [1, 2, 3, 4, 5, 6]

    reader = chain(backend.peer(cp), ["x"], state=TrimState)
    for app_ in (app, reader):
        hist = await app_.aget_state_history(cfg)
        assert {s.version: (ids(s.state), texts(s.state)) for s in hist} == recorded


@pytest.mark.anyio
async def test_old_version_reconstructs_after_update_state_replace(backend: Backend) -> None:
    """``update_state`` with a state object replaces the message list (summarizing); versions
    written before reconstruct exactly, ids and texts, through a second instance too."""
    cp = backend.new(state_history_limit=0)
    app = chain(cp, THREE)
    cfg = {"thread_id": "t-replace"}
    for i in range(2):
        await app.ainvoke({"messages": [user(f"u{i}")]}, dict(cfg))
    before = {s.version: (ids(s.state), texts(s.state)) for s in await app.aget_state_history(cfg)}
    assert sorted(before) == [1, 2, 3, 4, 5, 6]

    cur = await app.aget_state(dict(cfg))
    assert cur is not None
    summary = Message.text_message("summary of u0", role="system", message_id="sum-1")
    kept = [summary, *cur.context[-2:]]
    new = await app.aupdate_state(
        dict(cfg), cur.model_copy(update={"context": kept, "context_summary": "s"})
    )
    assert texts(new) == ["summary of u0", "two<-u1", "three<-u1"]

    for reader in (app, chain(backend.peer(cp), THREE)):
        hist = await reader.aget_state_history(cfg)
        assert [s.version for s in hist] == [7, 6, 5, 4, 3, 2, 1]
        assert texts(hist[0].state) == ["summary of u0", "two<-u1", "three<-u1"]
        assert ids(hist[0].state)[1:] == before[6][0][-2:]
        assert hist[0].state.context_summary == "s"
        assert {s.version: (ids(s.state), texts(s.state)) for s in hist[1:]} == before
    # A later run appends after the replaced list.
    await app.ainvoke({"messages": [user("u2")]}, dict(cfg))
    assert texts(await app.aget_state(dict(cfg))) == [
        "summary of u0",
        "two<-u1",
        "three<-u1",
        *turn_texts("u2"),
    ]


@pytest.mark.anyio
async def test_resent_message_is_never_duplicated(backend: Backend) -> None:
    app = chain(backend.new(), ["echo"])
    cfg = {"thread_id": "t-resend"}
    await app.ainvoke({"messages": [user("hello", "m-1")]}, dict(cfg))
    await app.ainvoke({"messages": [user("hello", "m-1"), user("again", "m-2")]}, dict(cfg))
    st = await chain(backend.peer(app.checkpointer), ["echo"]).aget_state(dict(cfg))
    assert st is not None
    assert texts(st) == ["hello", "echo<-hello", "again", "echo<-again"]
    assert [i for i in ids(st) if i in ("m-1", "m-2")] == ["m-1", "m-2"]
    assert len(set(ids(st))) == 4


# == DESIGN 3: diff-only writes ===================================================================
@pytest.mark.anyio
async def test_checkpoints_write_only_new_messages(backend: Backend) -> None:
    cp = backend.new()
    rows: list[int] = []
    source = cp.store.source
    orig = source.write

    async def spy(w: Any) -> Any:
        rows.append(len(w.new_messages))
        return await orig(w)

    source.write = spy
    app = chain(cp, THREE)
    cfg = {"thread_id": "t-diff"}
    for i in range(6):
        await app.ainvoke({"messages": [user(f"u{i}")]}, dict(cfg))
    # user + "one" with the first node, then one message per node, however long the thread.
    assert rows == [2, 1, 1] * 6
    st = await app.aget_state(dict(cfg))
    assert len(st.context) == 24
    # Replacing the list with two of its own messages writes no message row at all.
    rows.clear()
    await app.aupdate_state(dict(cfg), st.model_copy(update={"context": list(st.context[-2:])}))
    assert rows == [0]


# == DESIGN 3: optimistic concurrency =============================================================
def _gated_graph(cp: Any, gate: dict[str, Barrier | None]) -> CompiledGraph:
    async def reply(state: AgentState) -> Message:
        barrier = gate["barrier"]
        if barrier is not None:
            await barrier.wait()
        return Message.text_message(f"reply<-{last_user(state)}", role="assistant")

    g = StateGraph()
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_cas_same_read_exactly_one_loses_and_leaves_no_trace(backend: Backend) -> None:
    cp1 = backend.new()
    cp2 = backend.peer(cp1)
    gate: dict[str, Barrier | None] = {"barrier": None}
    g1, g2 = _gated_graph(cp1, gate), _gated_graph(cp2, gate)
    tid = "t-cas"
    await g1.ainvoke({"messages": [user("seed")]}, {"thread_id": tid})
    await g2.aget_state({"thread_id": tid})  # warm the second instance's cache at version 1
    gate["barrier"] = Barrier(2)  # both runs read version 1 before either writes

    outcome: dict[str, Any] = {}

    async def run(name: str, app: CompiledGraph) -> None:
        try:
            await app.ainvoke({"messages": [user(f"from-{name}", f"m-{name}")]}, {"thread_id": tid})
            outcome[name] = "ok"
        except StaleStateError as exc:
            outcome[name] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "a", g1)
        tg.start_soon(run, "b", g2)

    losers = [n for n, v in outcome.items() if v != "ok"]
    assert len(losers) == 1, outcome
    loser = losers[0]
    winner = "b" if loser == "a" else "a"
    err = outcome[loser]
    assert err.error_code == "STORAGE_CONFLICT_000"
    assert str(err).startswith("[STORAGE_CONFLICT_000]")
    assert err.context == {"thread_id": tid, "expected_version": 1, "current_version": 2}

    expected = ["seed", "reply<-seed", f"from-{winner}", f"reply<-from-{winner}"]
    readers = [g1, g2, chain(backend.peer(cp1), ["x"])]
    for app in readers:
        cfg = {"thread_id": tid}
        st = await app.aget_state(cfg)
        assert texts(st) == expected
        assert cfg["_checkpoint_version"] == 2
        hist = await app.aget_state_history({"thread_id": tid})
        assert [s.version for s in hist] == [2, 1]
        for s in hist:
            assert f"m-{loser}" not in ids(s.state)
            assert f"from-{loser}" not in texts(s.state)
            assert f"reply<-from-{loser}" not in texts(s.state)

    # Recovery: call again; the next read sees the winner's state.
    loser_app = g1 if loser == "a" else g2
    cfg = {"thread_id": tid}
    await loser_app.ainvoke({"messages": [user(f"from-{loser}", f"m-{loser}")]}, cfg)
    assert cfg["_checkpoint_version"] == 3
    assert texts(await g1.aget_state({"thread_id": tid})) == expected + [
        f"from-{loser}",
        f"reply<-from-{loser}",
    ]


@pytest.mark.anyio
async def test_instances_taking_turns_never_conflict(backend: Backend) -> None:
    """Caches never cause spurious conflicts: two instances alternate on one thread."""
    cp1 = backend.new()
    apps = [chain(cp1, ["echo"]), chain(backend.peer(cp1), ["echo"])]
    tid = "t-turns"
    for i in range(6):
        cfg = {"thread_id": tid}
        await apps[i % 2].ainvoke({"messages": [user(f"u{i}")]}, cfg)
        assert cfg["_checkpoint_version"] == i + 1
    for app in apps:
        st = await app.aget_state({"thread_id": tid})
        assert texts(st) == [t for i in range(6) for t in (f"u{i}", f"echo<-u{i}")]


@pytest.mark.anyio
async def test_update_state_is_compare_and_swap(backend: Backend) -> None:
    cp1 = backend.new()
    a, b = chain(cp1, ["echo"]), chain(backend.peer(cp1), ["echo"])
    cfg = {"thread_id": "t-upd-cas"}
    await a.ainvoke({"messages": [user("u0")]}, dict(cfg))
    stale_cfg = dict(cfg)
    await a.aget_state(stale_cfg)
    assert stale_cfg["_checkpoint_version"] == 1
    await b.ainvoke({"messages": [user("u1")]}, dict(cfg))
    # A direct state write based on version 1 loses against version 2.
    st = await a.aget_state(dict(cfg))
    with pytest.raises(StaleStateError) as ei:
        await cp1.aput_state(stale_cfg, st)
    assert ei.value.context == {
        "thread_id": "t-upd-cas",
        "expected_version": 1,
        "current_version": 2,
    }
    assert texts(await b.aget_state(dict(cfg))) == ["u0", "echo<-u0", "u1", "echo<-u1"]


# == DESIGN 3: thread and user isolation ==========================================================
ALICE = {"thread_id": "user-alice", "user_id": "uid-alice-91b2"}
BOB = {"thread_id": "user-bob", "user_id": "uid-bob-44c1"}


@pytest.mark.anyio
async def test_seed_scenario_threads_and_users_are_isolated(backend: Backend) -> None:
    cp = backend.new()
    app = chain(cp, ["echo"])
    for i in range(2):
        await app.ainvoke({"messages": [user(f"alice says {i}")]}, dict(ALICE))
        await app.ainvoke({"messages": [user(f"bob says {i}")]}, dict(BOB))
    alice_texts = ["alice says 0", "echo<-alice says 0", "alice says 1", "echo<-alice says 1"]
    bob_texts = ["bob says 0", "echo<-bob says 0", "bob says 1", "echo<-bob says 1"]
    assert texts(await app.aget_state(dict(ALICE))) == alice_texts
    assert texts(await app.aget_state(dict(BOB))) == bob_texts
    # Bob cannot see Alice's thread even by its id, nor Alice Bob's.
    assert await app.aget_state({"thread_id": "user-alice", "user_id": BOB["user_id"]}) is None
    assert await app.aget_state({"thread_id": "user-bob", "user_id": ALICE["user_id"]}) is None
    assert [t.thread_id for t in await cp.alist_threads({"user_id": ALICE["user_id"]})] == [
        "user-alice"
    ]

    # A second user on Alice's thread reads nothing and cannot write.
    intruder = {"thread_id": "user-alice", "user_id": "mallory"}
    for reader in (app, chain(backend.peer(cp), ["echo"])):
        assert await reader.aget_state(dict(intruder)) is None
        assert await reader.aget_state_history(dict(intruder)) == []
    with pytest.raises(StorageError) as ei:
        await app.ainvoke({"messages": [user("mallory writes")]}, dict(intruder))
    err = ei.value
    assert err.error_code == "STORAGE_FORBIDDEN_001"
    assert str(err).startswith("[STORAGE_FORBIDDEN_001]")
    assert ALICE["user_id"] not in str(err) and ALICE["user_id"] not in repr(err.context)
    with pytest.raises(StorageError) as ei2:
        await cp.aput_state(dict(intruder), AgentState(context=[user("forged")]))
    assert ei2.value.error_code == "STORAGE_FORBIDDEN_001"
    forbidden_writes = {
        "clean_thread": cp.aclean_thread(dict(intruder)),
        "update_state": app.aupdate_state(dict(intruder), {"messages": [user("forged")]}),
        "put_messages": cp.aput_messages(dict(intruder), [user("forged")]),
        "put_thread": cp.aput_thread(dict(intruder), {"owner": "mallory"}),
        "stop": app.astop(dict(intruder)),
    }
    for name, coro in forbidden_writes.items():
        with pytest.raises(StorageError) as ei3:
            await coro
        assert ei3.value.error_code == "STORAGE_FORBIDDEN_001", name
        assert ALICE["user_id"] not in str(ei3.value), name
    # Reads of any kind see nothing.
    assert await cp.alist_messages(dict(intruder)) == []
    assert await cp.aget_thread(dict(intruder)) is None
    assert await cp.alist_threads({"user_id": "mallory"}) == []
    with pytest.raises(ResourceNotFoundError):
        await cp.aget_version(dict(intruder), 1)

    assert await cp.aget_stop(dict(ALICE)) is False
    # Alice's thread is unchanged, in every instance.
    for reader in (app, chain(backend.peer(cp), ["echo"])):
        cfg = dict(ALICE)
        assert texts(await reader.aget_state(cfg)) == alice_texts
        assert cfg["_checkpoint_version"] == 2
        assert await versions(reader, ALICE) == [2, 1]


@pytest.mark.anyio
async def test_isolation_off_ignores_user_id(backend: Backend) -> None:
    cp = backend.new(enforce_user_isolation=False)
    app = chain(cp, ["echo"])
    await app.ainvoke({"messages": [user("a0")]}, dict(ALICE))
    other = {"thread_id": "user-alice", "user_id": "someone-else"}
    st = await app.aget_state(dict(other))
    assert texts(st) == ["a0", "echo<-a0"]
    cfg = dict(other)
    await app.ainvoke({"messages": [user("s0")]}, cfg)
    assert cfg["_checkpoint_version"] == 2
    assert texts(await app.aget_state(dict(ALICE))) == ["a0", "echo<-a0", "s0", "echo<-s0"]


# == DESIGN 2/3: _checkpoint_version, resume, durability switches =================================
@pytest.mark.anyio
async def test_checkpoint_version_is_written_into_config(backend: Backend) -> None:
    app = chain(backend.new(), THREE)
    cfg: dict[str, Any] = {"thread_id": "t-cv"}
    await app.ainvoke({"messages": [user("u0")]}, cfg)
    assert cfg["_checkpoint_version"] == 3
    read_cfg: dict[str, Any] = {"thread_id": "t-cv"}
    await app.aget_state(read_cfg)
    assert read_cfg["_checkpoint_version"] == 3
    missing: dict[str, Any] = {"thread_id": "t-cv-missing"}
    assert await app.aget_state(missing) is None
    assert missing["_checkpoint_version"] == 0


@pytest.mark.anyio
async def test_invoke_none_on_finished_thread_writes_nothing(backend: Backend) -> None:
    calls: list[str] = []
    app = chain(backend.new(), THREE, calls=calls)
    cfg = {"thread_id": "t-finished"}
    await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    before = await snapshot(app, cfg)
    assert before[0] == 3 and before[3] == "completed"
    for empty in (None, {}, {"messages": []}):
        c = dict(cfg)
        res = await app.ainvoke(empty, c)
        assert res["messages"] == []
        assert c["_checkpoint_version"] == 3
    assert await snapshot(app, cfg) == before
    assert await versions(app, cfg) == [3, 2, 1]
    assert calls == THREE
    # On a thread that does not exist, nothing is created either.
    c2 = {"thread_id": "t-never"}
    await app.ainvoke(None, c2)
    assert await app.aget_state({"thread_id": "t-never"}) is None


def _crashing_chain(cp: Any, calls: list[str], crash_in: dict[str, int]) -> CompiledGraph:
    """Three nodes; node ``two`` raises :class:`Crash` while ``crash_in["two"] > 0``."""

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            calls.append(name)
            if crash_in.get(name, 0) > 0:
                crash_in[name] -= 1
                raise Crash(name)
            return Message.text_message(f"{name}<-{last_user(state)}", role="assistant")

        return node

    g = StateGraph()
    for n in THREE:
        g.add_node(n, make(n))
    g.set_entry_point("one")
    g.add_edge("one", "two")
    g.add_edge("two", "three")
    g.add_edge("three", END)
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_resume_replays_only_the_node_that_was_running(backend: Backend) -> None:
    calls: list[str] = []
    crash = {"two": 1}
    cp = backend.new()
    app = _crashing_chain(cp, calls, crash)
    cfg = {"thread_id": "t-resume"}
    with pytest.raises(Crash):
        await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    # What a crash inside node two leaves: version 1, running, "two" next.
    hist = await app.aget_state_history(cfg)
    assert [(s.version, s.status, s.next_node) for s in hist] == [(1, "running", "two")]
    # Resume from another instance (as after a restart).
    app2 = _crashing_chain(backend.peer(cp), calls, crash)
    c = dict(cfg)
    res = await app2.ainvoke(None, c)
    assert texts(res["messages"]) == ["two<-u0", "three<-u0"]
    assert calls == ["one", "two", "two", "three"]
    assert c["_checkpoint_version"] == 3
    assert (await snapshot(app2, cfg))[2:] == (turn_texts("u0"), "completed")


@pytest.mark.anyio
async def test_new_input_first_finishes_the_unfinished_run(backend: Backend) -> None:
    calls: list[str] = []
    cp = backend.new()
    app = _crashing_chain(cp, calls, {"two": 1})
    cfg = {"thread_id": "t-finish-first"}
    with pytest.raises(Crash):
        await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    c = dict(cfg)
    await app.ainvoke({"messages": [user("u1")]}, c)
    assert calls == ["one", "two", "two", "three", "one", "two", "three"]
    assert c["_checkpoint_version"] == 6
    assert (await snapshot(app, cfg))[2:] == (turn_texts("u0") + turn_texts("u1"), "completed")
    assert await versions(app, cfg) == [6, 5, 4, 3, 2, 1]


def _child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))


def _run_crashing_child(b: Backend, thread_id: str, text: str, log: Path) -> None:
    env = _child_env()
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "_graph_crash.py"),
            "crash",
            json.dumps(b.spec()),
            thread_id,
            text,
            str(log),
        ],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == -9, proc.stderr.decode(errors="replace")[-2000:]


@pytest.mark.slow
@only(*DURABLE)
def test_process_killed_in_node_two_resumes_with_at_most_one_replay(
    sync_backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    _run_crashing_child(sync_backend, "t-kill", "u0", log)
    assert read_log(str(log)) == ["one", "two"]
    app = build_crash_graph(sync_backend.new(), str(log), crash=False)
    cfg = {"thread_id": "t-kill"}
    hist = app.get_state_history(dict(cfg))
    assert [(s.version, s.status, s.next_node) for s in hist] == [(1, "running", "two")]
    res = app.invoke(None, cfg)
    assert texts(res["messages"]) == ["two<-u0", "three<-u0"]
    assert read_log(str(log)) == ["one", "two", "two", "three"]
    assert cfg["_checkpoint_version"] == 3
    st = app.get_state({"thread_id": "t-kill"})
    assert texts(st) == turn_texts("u0")
    assert st.execution_meta.status == "completed"


@pytest.mark.slow
@only(*DURABLE)
def test_new_input_after_kill_completes_old_run_first(
    sync_backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "calls.log"
    _run_crashing_child(sync_backend, "t-kill-new", "u0", log)
    app = build_crash_graph(sync_backend.new(), str(log), crash=False)
    cfg = {"thread_id": "t-kill-new"}
    app.invoke({"messages": [user("u1")]}, cfg)
    assert read_log(str(log)) == ["one", "two", "two", "three", "one", "two", "three"]
    assert cfg["_checkpoint_version"] == 6
    st = app.get_state({"thread_id": "t-kill-new"})
    assert texts(st) == turn_texts("u0") + turn_texts("u1")
    assert [s.version for s in app.get_state_history({"thread_id": "t-kill-new"})] == [
        6,
        5,
        4,
        3,
        2,
        1,
    ]


@pytest.mark.slow
@only(*DURABLE)
def test_processes_racing_on_one_thread_commit_or_go_stale(
    sync_backend: Backend, tmp_path: Path
) -> None:
    """Three OS processes invoke one thread 10 times each from a common start line: every
    attempt commits or raises StaleStateError; history has no gap and loses no message."""
    procs, attempts = 3, 10
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{i}" for i in range(procs)]
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "_graph_crash.py"),
                "race",
                json.dumps(sync_backend.spec()),
                "t-race",
                f"p{i}",
                str(attempts),
                str(ready[i]),
                str(go),
            ],
            env=_child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(procs)
    ]
    try:
        deadline = time.monotonic() + 60
        while not all(r.exists() for r in ready):
            assert time.monotonic() < deadline and all(c.poll() is None for c in children), [
                c.stderr.read().decode(errors="replace")[-2000:]
                for c in children
                if c.poll() is not None
            ]
            time.sleep(0.01)
        go.touch()
        outs = [c.communicate(timeout=120) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    assert [c.returncode for c in children] == [0] * procs, [
        e.decode(errors="replace")[-2000:] for _, e in outs
    ]
    results = [json.loads(line) for out, _ in outs for line in out.decode().splitlines()]
    assert len(results) == procs * attempts
    assert {r["outcome"] for r in results} <= {"ok", "stale"}, results
    committed = {r["text"] for r in results if r["outcome"] == "ok"}
    stale = {r["text"] for r in results if r["outcome"] == "stale"}

    app = build_crash_graph(
        sync_backend.new(state_history_limit=0), str(tmp_path / "unused.log"), crash=False
    )
    cfg = {"thread_id": "t-race"}
    final = app.get_state(cfg)
    n = cfg["_checkpoint_version"]
    assert n == len(committed)
    assert texts(final)[0::2] and sorted(texts(final)[0::2]) == sorted(committed)
    assert texts(final)[1::2] == [f"echo<-{t}" for t in texts(final)[0::2]]
    assert not stale & set(texts(final))
    hist = app.get_state_history(cfg)
    assert [s.version for s in hist] == list(range(n, max(n - 20, 0), -1))  # default limit 20
    for s in hist:
        assert texts(s.state) == texts(final)[: 2 * s.version]


@pytest.mark.anyio
async def test_non_durable_run_writes_one_version(backend: Backend) -> None:
    app = chain(backend.new(), THREE)
    cfg = {"thread_id": "t-nondurable", "durable_checkpoint_every_step": False}
    for i in range(2):
        c = dict(cfg)
        await app.ainvoke({"messages": [user(f"u{i}")]}, c)
        assert c["_checkpoint_version"] == i + 1
    hist = await app.aget_state_history({"thread_id": "t-nondurable"})
    assert [(s.version, s.status) for s in hist] == [(2, "completed"), (1, "completed")]
    assert texts(hist[0].state) == turn_texts("u0") + turn_texts("u1")


@pytest.mark.anyio
async def test_non_durable_run_still_checkpoints_tool_calls(backend: Backend) -> None:
    """Without per-step checkpoints, a model answer holding tool calls is made durable before
    its tools run (a replay must see the same calls), then the end of the run."""
    from tenxgraph.core.graph import ToolNode

    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    def model(state: AgentState) -> Message:
        if state.context[-1].role == "tool":
            return Message.text_message("answer", role="assistant")
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
        }
        return Message(role="assistant", content="", tools_calls=[call])

    g = StateGraph()
    g.add_node("MAIN", model)
    g.add_node("TOOL", ToolNode([lookup]))
    g.add_conditional_edges(
        "MAIN",
        lambda state: "TOOL" if state.context[-1].tools_calls else END,
        {"TOOL": "TOOL", END: END},
    )
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    app = g.compile(checkpointer=backend.new())
    cfg = {"thread_id": "t-nd-tools", "durable_checkpoint_every_step": False}
    await app.ainvoke({"messages": [user("q")]}, dict(cfg))
    hist = await app.aget_state_history(cfg)
    assert [(s.version, s.status, s.next_node) for s in hist] == [
        (2, "completed", None),
        (1, "running", "TOOL"),
    ]
    assert [m.role for m in hist[1].state.context] == ["user", "assistant"]
    assert texts(hist[0].state) == ["q", "", "found x", "answer"]


@pytest.mark.anyio
async def test_recursion_limit_raises_with_state_saved(backend: Backend) -> None:
    async def loop(state: AgentState) -> str:
        return f"lap {len(state.context)}"

    g = StateGraph()
    g.add_node("loop", loop)
    g.set_entry_point("loop")
    g.add_conditional_edges("loop", lambda state: "loop", {"loop": "loop", END: END})
    app = g.compile(checkpointer=backend.new())
    cfg = {"thread_id": "t-recursion", "recursion_limit": 3}
    with pytest.raises(GraphRecursionError) as ei:
        await app.ainvoke({"messages": [user("go")]}, cfg)
    err = ei.value
    assert err.error_code == "RECURSION_000"
    assert err.context == {"thread_id": "t-recursion", "recursion_limit": 3, "node": "loop"}
    assert cfg["_checkpoint_version"] == 4  # three nodes, then the error state
    version, _, txt, status = await snapshot(app, {"thread_id": "t-recursion"})
    assert (version, txt, status) == (4, ["go", "lap 1", "lap 2", "lap 3"], "error")


@pytest.mark.anyio
async def test_node_timeout_raises(backend: Backend) -> None:
    async def slow(state: AgentState) -> str:
        await anyio.sleep(30)
        return "never"

    g = StateGraph()
    g.add_node("slow", slow)
    g.set_entry_point("slow")
    g.add_edge("slow", END)
    app = g.compile(checkpointer=backend.new())
    cfg = {"thread_id": "t-timeout", "node_timeout": 0.2}
    with anyio.fail_after(10):
        with pytest.raises(NodeTimeoutError) as ei:
            await app.ainvoke({"messages": [user("go")]}, cfg)
    assert ei.value.error_code == "NODE_TIMEOUT_001"
    assert ei.value.context == {"node": "slow", "timeout_s": 0.2}
    st = await app.aget_state({"thread_id": "t-timeout"})
    assert texts(st) == ["go"]
    assert (st.execution_meta.status, st.execution_meta.current_node) == ("error", "slow")


# == DESIGN 3: tool idempotency ledger ============================================================
@pytest.mark.anyio
async def test_recorded_tool_call_is_answered_from_the_ledger_on_replay(backend: Backend) -> None:
    """Two calls in one assistant message; ``pay`` returns (and is recorded), then ``flaky``
    dies with the process. On resume ``pay`` is not run again, ``flaky`` is."""
    from tenxgraph.core.graph import ToolNode

    runs = {"pay": 0, "flaky": 0}
    cp = backend.new()

    async def pay(amount: int) -> str:
        """Pay an amount."""
        runs["pay"] += 1
        return f"paid {amount}"

    async def flaky(config: dict) -> str:
        """Fail the first time, after pay was recorded."""
        runs["flaky"] += 1
        if runs["flaky"] == 1:
            with anyio.fail_after(10):
                while await cp.aledger_count(config) < 1:  # noqa: ASYNC110 - polls the store
                    await anyio.sleep(0.01)
            raise Crash("flaky")
        return "flaky ok"

    def model(state: AgentState) -> Message:
        if state.context[-1].role == "tool":
            return Message.text_message(
                "done: " + ", ".join(m.text() for m in state.context if m.role == "tool"),
                role="assistant",
            )
        calls = [
            {
                "id": "c-pay",
                "type": "function",
                "function": {"name": "pay", "arguments": json.dumps({"amount": 5})},
            },
            {"id": "c-flaky", "type": "function", "function": {"name": "flaky", "arguments": "{}"}},
        ]
        return Message(role="assistant", content="paying", tools_calls=calls, message_id="a-1")

    def route(state: AgentState) -> str:
        last = state.context[-1]
        return "TOOL" if last.role == "assistant" and last.tools_calls else END

    g = StateGraph()
    g.add_node("MAIN", model)
    g.add_node("TOOL", ToolNode([pay, flaky]))
    g.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    g.add_edge("TOOL", "MAIN")
    g.set_entry_point("MAIN")
    app = g.compile(checkpointer=cp)
    cfg = {"thread_id": "t-ledger"}
    with pytest.raises(Crash):
        await app.ainvoke({"messages": [user("pay 5")]}, dict(cfg))
    assert runs == {"pay": 1, "flaky": 1}
    assert [(s.version, s.next_node) for s in await app.aget_state_history(cfg)] == [(1, "TOOL")]

    peer = backend.peer(cp)
    app2 = g.compile(checkpointer=peer)
    c = dict(cfg)
    res = await app2.ainvoke(None, c)
    assert runs == {"pay": 1, "flaky": 2}
    assert texts(res["messages"]) == ["paid 5", "flaky ok", "done: paid 5, flaky ok"]
    assert [m.tool_call_id for m in res["messages"][:2]] == ["c-pay", "c-flaky"]
    assert c["_checkpoint_version"] == 3
    assert await peer.aledger_count(dict(cfg)) == 2


# == Cases reported against other runtimes ========================================================
class CounterState(AgentState):
    counter: int = 0


@pytest.mark.anyio
async def test_node_writing_only_a_counter_keeps_earlier_messages(backend: Backend) -> None:
    async def talk(state: CounterState) -> str:
        return f"talk<-{last_user(state)}"

    async def count(state: CounterState) -> dict[str, Any]:
        return {"counter": state.counter + 1}

    g = StateGraph(CounterState)
    g.add_node("talk", talk)
    g.add_node("count", count)
    g.set_entry_point("talk")
    g.add_edge("talk", "count")
    g.add_edge("count", END)
    cp = backend.new()
    app = g.compile(checkpointer=cp)
    for i in range(2):
        await app.ainvoke({"messages": [user(f"u{i}")]}, {"thread_id": "t-counter"})
    reader = g.compile(checkpointer=backend.peer(cp))
    for a in (app, reader):
        st = await a.aget_state({"thread_id": "t-counter"})
        assert isinstance(st, CounterState)
        assert st.counter == 2
        assert texts(st) == ["u0", "talk<-u0", "u1", "talk<-u1"]
        hist = await a.aget_state_history({"thread_id": "t-counter"})
        assert [(s.version, s.state.counter, len(s.state.context)) for s in hist] == [
            (4, 2, 4),
            (3, 1, 4),
            (2, 1, 2),
            (1, 0, 2),
        ]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Profile(BaseModel):
    name: str
    created: dt.datetime


class TypedState(AgentState):
    when: dt.datetime | None = None
    uid: uuid.UUID | None = None
    blob: bytes = b""
    amount: Decimal = Decimal("0")
    tags: set[str] = Field(default_factory=set)
    color: Color = Color.RED
    profile: Profile | None = None


TZ = dt.timezone(dt.timedelta(hours=5, minutes=30))
WHEN = dt.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=TZ)
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")
TYPED_VALUES: dict[str, Any] = {
    "when": WHEN,
    "uid": UID,
    "blob": b"\x00\xffbinary\x80",
    "amount": Decimal("1234.5600"),
    "tags": {"a", "b", "ü"},
    "color": Color.BLUE,
    "profile": Profile(name="ada", created=WHEN),
}


def _assert_typed(st: Any) -> None:
    assert isinstance(st, TypedState)
    assert (
        type(st.when) is dt.datetime
        and st.when == WHEN
        and st.when.utcoffset() == dt.timedelta(hours=5, minutes=30)
    )
    assert type(st.uid) is uuid.UUID and st.uid == UID
    assert type(st.blob) is bytes and st.blob == b"\x00\xffbinary\x80"
    assert type(st.amount) is Decimal and str(st.amount) == "1234.5600"
    assert type(st.tags) is set and st.tags == {"a", "b", "ü"}
    assert st.color is Color.BLUE
    assert type(st.profile) is Profile and st.profile.name == "ada"
    assert type(
        st.profile.created
    ) is dt.datetime and st.profile.created.utcoffset() == dt.timedelta(hours=5, minutes=30)


@pytest.mark.anyio
async def test_typed_state_values_round_trip_with_their_types(backend: Backend) -> None:
    async def fill(state: TypedState) -> dict[str, Any]:
        return dict(TYPED_VALUES)

    async def after(state: TypedState) -> str:
        return "after"

    g = StateGraph(TypedState)
    g.add_node("fill", fill)
    g.add_node("after", after)
    g.set_entry_point("fill")
    g.add_edge("fill", "after")
    g.add_edge("after", END)
    cp = backend.new()
    app = g.compile(checkpointer=cp)
    await app.ainvoke({"messages": [user("go")]}, {"thread_id": "t-types"})
    reader = g.compile(checkpointer=backend.peer(cp))
    for a in (app, reader):
        _assert_typed(await a.aget_state({"thread_id": "t-types"}))
        hist = await a.aget_state_history({"thread_id": "t-types"})
        assert [s.version for s in hist] == [2, 1]
        for s in hist:
            _assert_typed(s.state)


class Opaque:
    """An application class the state schema does not declare."""


class LooseState(AgentState):
    a: dict[str, Any] = Field(default_factory=dict)


def _loose_graph(cp: Any, *, first_only: bool = False) -> CompiledGraph:
    async def store(state: LooseState) -> Any:
        said = last_user(state)
        if said == "unencodable":
            return {"a": {"b": [1, 2, Opaque()]}}
        if said == "unsupported":
            return 42
        return {"a": {"b": [1, 2, 3]}, "messages": [f"stored<-{said}"]}

    async def second(state: LooseState) -> str:
        return "second"

    g = StateGraph(LooseState)
    g.add_node("store", store)
    g.add_node("second", second)
    g.set_entry_point("store")
    g.add_edge("store", "second")
    g.add_edge("second", END)
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_undeclared_class_fails_with_path_and_keeps_version(backend: Backend) -> None:
    cp = backend.new()
    app = _loose_graph(cp)
    cfg = {"thread_id": "t-opaque"}
    await app.ainvoke({"messages": [user("ok")]}, dict(cfg))
    before = await snapshot(app, cfg)
    assert before[0] == 2
    with pytest.raises(SerializationError) as ei:
        await app.ainvoke({"messages": [user("unencodable")]}, dict(cfg))
    err = ei.value
    assert err.error_code == "STORAGE_SERIALIZATION_000"
    assert err.context == {"path": "$.a.b[2]", "type": "Opaque"}
    assert "$.a.b[2]" in str(err)
    for a in (app, _loose_graph(backend.peer(cp))):
        assert await snapshot(a, cfg) == before
        st = await a.aget_state(dict(cfg))
        assert st.a == {"b": [1, 2, 3]}


@pytest.mark.anyio
async def test_lone_surrogate_and_nul_round_trip(backend: Backend) -> None:
    weird = "a\ud800b\x00c\udfffd"

    async def reply(state: AgentState) -> Message:
        m = Message.text_message(
            f"re:{last_user(state)}", role="assistant", message_id="r-\x00\ud800"
        )
        return m.model_copy(update={"metadata": {"k\x00": weird}})

    g = StateGraph()
    g.add_node("reply", reply)
    g.set_entry_point("reply")
    g.add_edge("reply", END)
    cp = backend.new()
    app = g.compile(checkpointer=cp)
    await app.ainvoke({"messages": [user(weird, "u-1")]}, {"thread_id": "t-weird"})
    for a in (app, chain(backend.peer(cp), ["x"])):
        st = await a.aget_state({"thread_id": "t-weird"})
        assert texts(st) == [weird, f"re:{weird}"]
        assert ids(st) == ["u-1", "r-\x00\ud800"]
        assert st.context[1].metadata == {"k\x00": weird}
        hist = await a.aget_state_history({"thread_id": "t-weird"})
        assert [texts(s.state) for s in hist] == [[weird, f"re:{weird}"]]


class TickState(AgentState):
    counter: int = 0


def _count_queries(backend_kind: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every SQL statement the source tier sends (SQLite trace callback, or psycopg
    cursor executions); memory has none."""
    seen: list[str] = []
    if backend_kind == "sqlite":
        real_connect = sqlite3.connect

        def connect(*a: Any, **kw: Any) -> sqlite3.Connection:
            conn = real_connect(*a, **kw)
            conn.set_trace_callback(seen.append)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)
    elif backend_kind.startswith("postgres"):
        import psycopg

        for cls in (psycopg.AsyncCursor, psycopg.AsyncServerCursor):
            for meth in ("execute", "executemany"):
                real = cls.__dict__[meth]

                def wrapped(self: Any, query: Any, *a: Any, __real: Any = real, **kw: Any) -> Any:
                    seen.append(str(query))
                    return __real(self, query, *a, **kw)

                monkeypatch.setattr(cls, meth, wrapped)
    return seen


@pytest.mark.anyio
async def test_history_of_1000_versions_constant_queries(
    backend: Backend, backend_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    statements = _count_queries(backend_kind, monkeypatch)

    async def tick(state: TickState) -> dict[str, Any]:
        return {"counter": state.counter + 1}

    g = StateGraph(TickState)
    g.add_node("tick", tick)
    g.set_entry_point("tick")
    g.add_conditional_edges(
        "tick", lambda state: END if state.counter >= 1000 else "tick", {"tick": "tick", END: END}
    )
    # 1,000 commits: on Postgres, skip the WAL flush wait of each (``synchronous_commit=off``
    # changes nothing a client can observe, only what survives a server crash).
    fast = {"pool_config": {"kwargs": {"options": "-c synchronous_commit=off"}}}
    cp = backend.new(state_history_limit=0, **(fast if backend_kind.startswith("postgres") else {}))
    app = g.compile(checkpointer=cp)
    cfg = {"thread_id": "t-1000"}
    await app.ainvoke({"messages": [user("go")]}, {**cfg, "recursion_limit": 1000})

    tier_calls: list[tuple[Any, Any]] = []
    source = cp.store.source
    orig = source.history

    async def spy(key: Any, *, limit: Any = None, before: Any = None) -> Any:
        tier_calls.append((limit, before))
        return await orig(key, limit=limit, before=before)

    source.history = spy

    async def listing(**kw: Any) -> tuple[list[Any], int]:
        n = len(statements)
        hist = await app.aget_state_history(dict(cfg), **kw)
        return hist, len(statements) - n

    full, q_full = await listing()
    assert [s.version for s in full] == list(range(1000, 0, -1))
    assert all(s.state.counter == s.version for s in full)
    assert all(texts(s.state) == ["go"] for s in (full[0], full[500], full[999]))
    top, q_top = await listing(limit=5)
    assert [s.version for s in top] == [1000, 999, 998, 997, 996]
    mid, q_mid = await listing(before=500, limit=3)
    assert [s.version for s in mid] == [499, 498, 497]
    low, _ = await listing(before=3)
    assert [s.version for s in low] == [2, 1]
    # Without a limit the facade pages (HISTORY_PAGE versions per tier call, so the raw rows
    # of every version are never held at once); with a limit of at most a page, one tier call.
    # Every tier call costs the same number of statements whatever the number of versions.
    page = HISTORY_PAGE
    full_calls = [(page, None)] + [(page, 1001 - page * i) for i in range(1, -(-1000 // page))]
    assert tier_calls == [*full_calls, (5, None), (3, 500), (page, 3)]
    assert q_top == q_mid
    assert q_full == q_top * len(full_calls)
    if backend_kind == "sqlite" or backend_kind.startswith("postgres"):
        assert 1 <= q_top <= 6, statements[-q_top:]


# == Bad input: rejected before anything is written ===============================================
BAD_INPUTS = {
    "empty-thread-id": (
        {"thread_id": ""},
        {"messages": [{"role": "user", "content": "x"}]},
        ConfigError,
        "CONFIG_001",
    ),
    "blank-thread-id": (
        {"thread_id": "   "},
        {"messages": [{"role": "user", "content": "x"}]},
        ConfigError,
        "CONFIG_001",
    ),
    "nul-in-thread-id": (
        {"thread_id": "t-bad\x00"},
        {"messages": [{"role": "user", "content": "x"}]},
        ConfigError,
        "CONFIG_001",
    ),
    "surrogate-in-user-id": (
        {"thread_id": "t-bad", "user_id": "\ud800"},
        {"messages": [{"role": "user", "content": "x"}]},
        ConfigError,
        "CONFIG_001",
    ),
    "thread-id-typo": (
        {"thread-id": "t-bad"},
        {"messages": [{"role": "user", "content": "x"}]},
        ConfigError,
        "CONFIG_001",
    ),
    "threadId-typo": (
        {"threadId": "t-bad"},
        {"messages": [{"role": "user", "content": "x"}]},
        ConfigError,
        "CONFIG_001",
    ),
    "unsupported-return": (
        {"thread_id": "t-bad"},
        {"messages": [{"role": "user", "content": "unsupported"}]},
        GraphError,
        "GRAPH_005",
    ),
    "unencodable-value": (
        {"thread_id": "t-bad"},
        {"messages": [{"role": "user", "content": "unencodable"}]},
        SerializationError,
        "STORAGE_SERIALIZATION_000",
    ),
    "unknown-role": (
        {"thread_id": "t-bad"},
        {"messages": [{"role": "robot", "content": "x"}]},
        ValidationError,
        "VALIDATION_000",
    ),
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(BAD_INPUTS))
async def test_bad_input_rejected_before_any_write(backend: Backend, case: str) -> None:
    config, input_data, exc_type, code = BAD_INPUTS[case]
    cp = backend.new()
    app = _loose_graph(cp)
    await app.ainvoke({"messages": [user("ok")]}, {"thread_id": "t-bad"})
    before = await snapshot(app, {"thread_id": "t-bad"})
    assert before[0] == 2

    with pytest.raises(exc_type) as ei:
        await app.ainvoke(input_data, dict(config))
    err = ei.value
    assert err.error_code == code
    assert str(err).startswith(f"[{code}]")
    if case.endswith("-typo"):
        assert err.context["did_you_mean"] == "thread_id"
    if case == "unencodable-value":
        assert err.context["path"] == "$.a.b[2]"

    for a in (app, _loose_graph(backend.peer(cp))):
        assert await snapshot(a, {"thread_id": "t-bad"}) == before
        assert [t.thread_id for t in await a.checkpointer.alist_threads({})] == ["t-bad"]
