"""Runs as 10xGraph's docs describe them, on every store: the ``"state"`` input key, nodes
that append to ``state.context`` and return the state, generator nodes (async and sync) whose
messages stream as they are yielded and end up in the state, and ``{"state": ...}`` returned by
a node. Each check also reads the thread back from the store (what is durable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.lowlevel
import pytest
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    DURABLE,
    Backend,
    backend_fixture,
    only,
    pytest_generate_tests,
    sync_backend_fixture,
)

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message, StreamEvent
from tenxgraph.core.state.reducers import append_items
from tenxgraph.utils import END, ResponseGranularity

HERE = Path(__file__).resolve().parent


class JobState(AgentState):
    jd: str = ""
    cv: str = ""
    notes: Annotated[list, append_items] = []


def texts(msgs: Any) -> list[str]:
    return [m.text() for m in (msgs.context if isinstance(msgs, AgentState) else msgs)]


def one_node(fn: Any, cp: Any, state: Any = None) -> Any:
    g = StateGraph(state)
    g.add_node("MAIN", fn)
    g.set_entry_point("MAIN")
    g.add_edge("MAIN", END)
    return g.compile(checkpointer=cp)


@pytest.mark.anyio
async def test_state_input_key_updates_only_the_named_fields_through_their_reducers(
    backend: Backend,
) -> None:
    seen: list[tuple[str, str, list]] = []

    def main(state: JobState) -> str:
        seen.append((state.jd, state.cv, list(state.notes)))
        return "ok"

    app = one_node(main, backend.new(), JobState())
    cfg = {"thread_id": "partial"}
    await app.ainvoke(
        {
            "messages": [Message.text_message("first")],
            "state": {"jd": "JD1", "cv": "CV1", "notes": [{"id": 1}]},
        },
        dict(cfg),
    )
    res = await app.ainvoke(
        {
            "messages": [Message.text_message("only the jd")],
            "state": {"jd": "JD2", "notes": [{"id": 2}]},
        },
        dict(cfg),
        response_granularity=ResponseGranularity.FULL,
    )
    # The node saw the patch already applied; untouched fields kept; the list field appended.
    assert seen[-1] == ("JD2", "CV1", [{"id": 1}, {"id": 2}])
    state = res["state"]
    assert isinstance(state, JobState) and (state.jd, state.cv) == ("JD2", "CV1")
    stored = await app.aget_state(dict(cfg))
    assert (stored.jd, stored.cv, stored.notes) == ("JD2", "CV1", [{"id": 1}, {"id": 2}])
    assert texts(stored) == ["first", "ok", "only the jd", "ok"]


@pytest.mark.anyio
async def test_state_input_key_is_validated_before_anything_is_written(backend: Backend) -> None:
    app = one_node(lambda state: "ok", backend.new(), JobState())
    cfg = {"thread_id": "bad-state"}
    for bad in ({"nope": 1}, ["jd"]):
        with pytest.raises(ValidationError) as info:
            await app.ainvoke({"messages": ["x"], "state": bad}, dict(cfg))
        assert info.value.error_code == "VALIDATION_000"
    assert await app.aget_state(dict(cfg)) is None


@pytest.mark.anyio
async def test_node_appending_to_context_and_returning_state_reports_its_messages(
    backend: Backend,
) -> None:
    def main(state: JobState) -> JobState:
        state.context.append(
            Message.text_message(f"echo {state.context[-1].text()}", role="assistant")
        )
        state.jd = "seen"
        return state

    app = one_node(main, backend.new(), JobState())
    cfg = {"thread_id": "in-place"}
    res = await app.ainvoke({"messages": [Message.text_message("a")]}, dict(cfg))
    assert texts(res["messages"]) == ["a", "echo a"]
    chunks = [c async for c in app.astream({"messages": [Message.text_message("b")]}, dict(cfg))]
    streamed = [c.message.text() for c in chunks if c.event == StreamEvent.MESSAGE]
    assert streamed == ["b", "echo b"]
    produced = next(
        c for c in chunks if c.event == StreamEvent.MESSAGE and c.message.text() == "echo b"
    )
    assert produced.metadata == {"node": "MAIN", "step": 1}
    # Durable once each, in order, with the field the node set; a second store instance agrees.
    for cp_app in (app, one_node(main, backend.peer(app.checkpointer), JobState())):
        stored = await cp_app.aget_state(dict(cfg))
        assert texts(stored) == ["a", "echo a", "b", "echo b"] and stored.jd == "seen"


@pytest.mark.anyio
async def test_async_generator_node_streams_each_item_as_it_is_yielded(backend: Backend) -> None:
    async def main(state: AgentState, config: dict):
        yield Message(role="assistant", content="par", delta=True, message_id="m1")
        yield Message(role="assistant", content="partial", delta=True, message_id="m1")
        yield Message.text_message("partial answer", role="assistant", message_id="m1")
        await anyio.lowlevel.checkpoint()
        yield "second"

    app = one_node(main, backend.new())
    cfg = {"thread_id": "agen"}
    arrivals: list[tuple[str, bool]] = []
    async for c in app.astream({"messages": [Message.text_message("go")]}, dict(cfg)):
        if c.event == StreamEvent.MESSAGE:
            arrivals.append((c.message.text(), c.message.delta))
    assert arrivals == [
        ("go", False),
        ("par", True),
        ("partial", True),
        ("partial answer", False),
        ("second", False),
    ]
    stored = await app.aget_state(dict(cfg))
    # Deltas are never durable; each complete message once.
    assert texts(stored) == ["go", "partial answer", "second"]
    assert not any(m.delta for m in stored.context)
    # A later run re-yielding the same message id adds it to the state only once.
    res = await app.ainvoke({"messages": [Message.text_message("again")]}, dict(cfg))
    assert texts(res["messages"]) == ["again", "second"]


@pytest.mark.anyio
async def test_generator_messages_arrive_before_the_node_ends(backend: Backend) -> None:
    gate = anyio.Event()

    async def main(state: AgentState):
        yield Message.text_message("early", role="assistant")
        await gate.wait()  # the consumer must have the first message to let the node finish
        yield Message.text_message("late", role="assistant")

    app = one_node(main, backend.new())
    peer = one_node(main, backend.peer(app.checkpointer))
    cfg = {"thread_id": "early"}
    got: list[str] = []
    async for c in app.astream({"messages": [Message.text_message("go")]}, dict(cfg)):
        if c.event == StreamEvent.MESSAGE:
            got.append(c.message.text())
            if c.message.text() == "early":
                # Streamed, not yet durable: the node's output is written once, when it ends
                # (one checkpoint per step; a crash now replays this node only).
                assert await peer.aget_state(dict(cfg)) is None
                gate.set()
    assert got == ["go", "early", "late"]
    assert [m.text() for m in (await peer.aget_state(dict(cfg))).context] == got
    assert len(await peer.aget_state_history(dict(cfg))) == 1


def test_sync_generator_node_streams_through_sync_stream(sync_backend: Backend) -> None:
    def main(state: AgentState):
        for i in range(3):
            yield f"part {i}"

    app = one_node(main, sync_backend.new())
    cfg = {"thread_id": "sync-gen"}
    chunks = list(app.stream({"messages": [Message.text_message("go")]}, dict(cfg)))
    assert [c.message.text() for c in chunks if c.event == "message"] == [
        "go",
        "part 0",
        "part 1",
        "part 2",
    ]
    assert texts(app.get_state(dict(cfg))) == ["go", "part 0", "part 1", "part 2"]
    res = app.invoke({"messages": [Message.text_message("more")]}, dict(cfg))
    assert texts(res["messages"]) == ["more", "part 0", "part 1", "part 2"]


@pytest.mark.anyio
async def test_node_returning_a_state_dict_under_the_state_key(backend: Backend) -> None:
    async def enrich(state: JobState, config: dict) -> dict:
        return {"state": {**state.model_dump(), "jd": "from profile"}}

    app = one_node(enrich, backend.new(), JobState())
    cfg = {"thread_id": "state-key-node"}
    res = await app.ainvoke({"messages": [Message.text_message("hi")]}, dict(cfg))
    assert texts(res["messages"]) == ["hi"]  # the dump's messages are not new
    stored = await app.aget_state(dict(cfg))
    assert stored.jd == "from profile" and texts(stored) == ["hi"]
    assert stored.execution_meta.status == "completed"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("granularity", "keys"),
    [
        (ResponseGranularity.LOW, {"messages"}),
        (ResponseGranularity.PARTIAL, {"messages", "context", "summary"}),
        (ResponseGranularity.FULL, {"messages", "context", "summary", "state"}),
    ],
)
async def test_result_keys_follow_the_reference_granularity_table(
    backend: Backend, granularity: ResponseGranularity, keys: set[str]
) -> None:
    app = one_node(lambda state: "ok", backend.new())
    res = await app.ainvoke(
        {"messages": ["hi"]}, {"thread_id": "gran"}, response_granularity=granularity
    )
    assert set(res) == keys


@pytest.mark.slow
@only(*DURABLE)
def test_process_killed_inside_a_generator_node_replays_only_that_node(
    sync_backend: Backend, tmp_path: Path
) -> None:
    # A streamed item is not durable until its node ends: a kill mid-node loses it from the
    # store (the consumer saw it), and the resumed run replays that one node only.
    from _gen_crash import build

    log = tmp_path / "log"
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "_gen_crash.py"),
            json.dumps(sync_backend.spec()),
            "gen-kill",
            str(log),
        ],
        env=dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent / "conformance")])
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert proc.stdout.split() == ["go", "one", "two-a"]
    app = build(sync_backend.new(), str(log), crash=False)
    cfg = {"thread_id": "gen-kill"}
    hist = app.get_state_history(dict(cfg))
    assert [(s.status, s.next_node) for s in hist] == [("running", "two")]
    assert texts(hist[0].state) == ["go", "one"]
    res = app.invoke(None, dict(cfg))
    assert texts(res["messages"]) == ["two-a", "two-b"]
    assert log.read_text().split() == ["one", "two", "two"]
    assert texts(app.get_state(dict(cfg))) == ["go", "one", "two-a", "two-b"]


class WeatherState(AgentState):
    location: str | None = None


@pytest.mark.anyio
async def test_undeclared_state_field_is_refused_and_a_declared_one_round_trips(
    backend: Backend,
) -> None:
    """build-a-graph's ``{"state": {"location": ...}}`` on a plain ``AgentState`` graph: the
    state reference never lets ``AgentState`` take undeclared fields, so it is refused before
    anything is written (docs/compat-runs.md); declared on a subclass, it is stored."""
    plain = one_node(lambda state: "ok", backend.new())
    cfg = {"thread_id": "weather-plain"}
    for update in ({"state": {"location": "Paris"}}, {"location": "Paris"}):
        with pytest.raises(ValidationError) as info:
            await plain.ainvoke({"messages": ["weather?"], **update}, dict(cfg))
        assert info.value.error_code == "VALIDATION_000"
        assert "location" in str(info.value)
    assert await plain.aget_state(dict(cfg)) is None

    cp = backend.new()
    declared = one_node(lambda state: {"location": state.location.upper()}, cp, WeatherState())
    cfg = {"thread_id": "weather-declared"}
    await declared.ainvoke({"messages": ["weather?"], "state": {"location": "Paris"}}, dict(cfg))
    stored = await declared.aget_state(dict(cfg))
    assert stored.location == "PARIS"
    history = await declared.aget_state_history(dict(cfg))
    assert history[0].state.location == "PARIS"
