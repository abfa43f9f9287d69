"""Pauses for a human (``interrupt_before``, ``interrupt_after``, ``interrupt()``) on every
checkpointer: durable, resumable by another instance, guarded against new input, editable with
``update_state``, and resumed by exactly one of two racing instances.

Side effects are counted in a log file (see ``_hitl_graphs``); ``Backend.peer()`` is a second
instance on the same data (its own in-process cache), as another server would be.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _hitl_graphs import chain, read_log
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import InterruptPendingError
from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import pending_interrupt, pending_interrupts

MODES = ["before", "after", "dynamic"]

#: (status, interrupt_node, current_node) of the paused thread, by mode.
PAUSED = {
    "before": ("interrupted_before", "two", "two"),
    "after": ("interrupted_after", "one", "two"),
    "dynamic": ("interrupted", "two", "two"),
}


def user(text: str) -> Message:
    return Message.text_message(text)


def texts(state_or_msgs: Any) -> list[str]:
    msgs = state_or_msgs.context if isinstance(state_or_msgs, AgentState) else state_or_msgs
    return [m.text() for m in msgs]


async def versions(app: CompiledGraph, cfg: dict[str, Any]) -> list[int]:
    return [s.version for s in await app.aget_state_history(dict(cfg))]


def resume_input(mode: str, answer: str = "yes") -> dict[str, Any] | None:
    """What a human sends to continue: an answer to ``interrupt()``, nothing for a static
    pause (there, the human's input is an ``update_state`` edit)."""
    return {"resume": answer} if mode == "dynamic" else None


class Barrier:
    """Wait until ``n`` tasks arrived (created inside the running event loop)."""

    def __init__(self, n: int) -> None:
        self.n, self.count, self.event = n, 0, anyio.Event()

    async def wait(self) -> None:
        self.count += 1
        if self.count >= self.n:
            self.event.set()
        with anyio.fail_after(20):
            await self.event.wait()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_pause_is_durable_and_another_instance_resumes_it(
    backend: Backend, tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "log"
    cp = backend.new()
    app = chain(cp, log, mode=mode)
    cfg = {"thread_id": f"t-pause-{mode}"}
    res = await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    status, node, current = PAUSED[mode]
    assert res["interrupted"] is True
    assert (res["interrupt"]["status"], res["interrupt"]["node"]) == (status, node)
    st = await app.aget_state(dict(cfg))
    assert st is not None
    meta = st.execution_meta
    assert (meta.status, meta.interrupt_node, meta.current_node) == (status, node, current)
    if mode == "dynamic":
        # one (step 0) ran; two (step 1) made its first interrupt() call
        p = pending_interrupt(st)
        assert p is not None and p["id"] == "two:1:1" and p["node"] == "two"
        assert p["value"] == {"draft": "u0"} and p["message"] == "Approve the draft?"
        assert pending_interrupts(st) == [p]
        assert [p.to_dict()] == res["interrupt"]["data"]["interrupts"]
        assert read_log(log) == ["one", "two:start"]
    else:
        assert pending_interrupt(st) is None
        assert read_log(log) == ["one"]

    other = chain(backend.peer(cp), log, mode=mode)
    c2 = dict(cfg)
    res2 = await other.ainvoke(resume_input(mode), c2)
    assert "interrupted" not in res2
    two = "two<-yes|u0" if mode == "dynamic" else "two<-u0"
    assert texts(res2["messages"]) == [two, "three<-u0"]
    final = await other.aget_state(dict(cfg))
    assert final is not None and final.execution_meta.status == "completed"
    assert texts(final) == ["u0", "one<-u0", two, "three<-u0"]
    # Nothing before the pause ran again; a dynamic interrupt re-runs its node from the start.
    expected = ["one", "two", "three"]
    if mode == "dynamic":
        expected = ["one", "two:start", "two:start", "two:yes", "three"]
    assert read_log(log) == expected
    assert (await versions(other, cfg))[0] == c2["_checkpoint_version"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["before", "after"])
async def test_new_input_on_a_static_pause_is_the_reply_and_resumes_the_run(
    backend: Backend, tmp_path: Path, mode: str
) -> None:
    # 10xGraph's stream guide resumes an interrupt_before pause by sending the next message on
    # the same thread: the message is appended, then the paused run goes on from its node.
    log = tmp_path / "log"
    app = chain(backend.new(), log, mode=mode)
    cfg = {"thread_id": f"t-reply-{mode}"}
    await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    kept = await versions(app, cfg)
    res = await app.ainvoke({"messages": [user("approved")]}, dict(cfg))
    assert "interrupted" not in res
    assert texts(res["messages"]) == ["approved", "two<-approved", "three<-approved"]
    final = await app.aget_state(dict(cfg))
    assert final is not None and final.execution_meta.status == "completed"
    assert texts(final) == ["u0", "one<-u0", "approved", "two<-approved", "three<-approved"]
    assert read_log(log) == ["one", "two", "three"]  # nothing before the pause ran again
    assert (await versions(app, cfg))[0] > kept[0]  # the reply and the rest are durable


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["dynamic"])
async def test_new_input_on_a_paused_thread_raises_writes_nothing_and_update_state_edits_it(
    backend: Backend, tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "log"
    app = chain(backend.new(), log, mode=mode)
    cfg = {"thread_id": f"t-pending-{mode}"}
    await app.ainvoke({"messages": [user("u0")]}, dict(cfg))
    paused = await app.aget_state(dict(cfg))
    assert paused is not None
    kept = await versions(app, cfg)

    for new_input in ({"messages": [user("sneaky")]}, {"context_summary": "sneaky"}):
        with pytest.raises(InterruptPendingError) as info:
            await app.ainvoke(new_input, dict(cfg))
        err = info.value
        assert err.error_code == "GRAPH_008" and str(err).startswith("[GRAPH_008]")
        assert err.context["thread_id"] == cfg["thread_id"]
        assert err.context["node"] == PAUSED[mode][1]
        ids = [p["id"] for p in pending_interrupts(paused)]
        assert err.context["interrupt_ids"] == ids
    # Nothing was written: same versions, same state.
    assert await versions(app, cfg) == kept
    again = await app.aget_state(dict(cfg))
    assert again is not None and texts(again) == texts(paused)
    assert again.execution_meta == paused.execution_meta and again.context_summary is None

    # update_state edits the paused state (a new version) and keeps the pause.
    edited = await app.aupdate_state(dict(cfg), {"messages": [user("edited")]})
    assert edited.execution_meta.status == PAUSED[mode][0]
    assert await versions(app, cfg) == [kept[0] + 1, *kept]
    with pytest.raises(InterruptPendingError):
        await app.ainvoke({"messages": [user("sneaky")]}, dict(cfg))

    res = await app.ainvoke(resume_input(mode, "ok"), dict(cfg))
    two = "two<-ok|edited" if mode == "dynamic" else "two<-edited"
    assert texts(res["messages"]) == [two, "three<-edited"]
    final = await app.aget_state(dict(cfg))
    assert final is not None and final.execution_meta.status == "completed"
    assert texts(final) == ["u0", "one<-u0", "edited", two, "three<-edited"]
    assert "sneaky" not in texts(final)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_two_instances_resuming_one_paused_thread_at_once_run_the_node_once(
    backend: Backend, tmp_path: Path, mode: str
) -> None:
    """Resumes take the thread's run lease whatever the multitask strategy (issue 15,
    docs/how-to/run-lease.md): the second resumer waits for the first, then finds the pause
    answered and runs nothing, so the paused node runs once."""
    log = tmp_path / "log"
    cp = backend.new()
    cfg = {"thread_id": f"t-race-{mode}"}
    await chain(cp, log, mode=mode).ainvoke({"messages": [user("u0")]}, dict(cfg))
    before = read_log(log)

    # Both instances read the paused version and start resuming at the same moment.
    apps = {name: chain(backend.peer(cp), log, mode=mode) for name in "AB"}
    results: dict[str, Any] = {}

    async def resume(name: str) -> None:
        results[name] = await apps[name].ainvoke(resume_input(mode, name), dict(cfg))

    async with anyio.create_task_group() as tg:
        for name in apps:
            tg.start_soon(resume, name)
    ran = read_log(log)[len(before) :]
    # Node two (and then three) ran once, for one of the two resumers.
    assert ran.count("three") == 1
    if mode == "dynamic":
        answered = [line for line in ran if line.startswith("two:") and line != "two:start"]
        assert len(answered) == 1 and ran.count("two:start") == 1
        winner = answered[0].split(":")[1]
    else:
        assert ran.count("two") == 1
        winner = "A"
    two = f"two<-{winner}|u0" if mode == "dynamic" else "two<-u0"
    for app in apps.values():  # both instances see the one run
        final = await app.aget_state(dict(cfg))
        assert final is not None and final.execution_meta.status == "completed"
        assert texts(final) == ["u0", "one<-u0", two, "three<-u0"]
    # Called again, a resumer finds nothing left to do.
    res = await apps["B"].ainvoke(None, dict(cfg))
    assert res["messages"] == [] and read_log(log)[len(before) :] == ran
