"""``interrupt()`` inside tools, on every checkpointer: parallel tools interrupting in one step
get distinct ids and can be answered together or one by one, and a tool whose result the ledger
recorded before a sibling interrupted is not run again on resume.

Each tool logs its side effect *after* its ``interrupt()`` call returned (code before the call
re-runs on resume, by design), so the log counts real executions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _hitl_graphs import log_line, read_log, tool_loop
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    Backend,
    backend_fixture,
    pytest_generate_tests,
)

from tenxgraph.core.exceptions import InterruptPendingError
from tenxgraph.core.graph import CompiledGraph
from tenxgraph.core.state import Message
from tenxgraph.utils import interrupt, pending_interrupts

CALLS = [
    ("c1", "ask", {"question": "q1"}),
    ("c2", "ask_sync", {"question": "q2"}),
    ("c3", "ask", {"question": "q3"}),
]
#: model runs at step 0, the tool node at step 1: "<node>:<step>:<tool_call_id>:<n>"
IDS = {c: f"tools:1:{c}:1" for c in ("c1", "c2", "c3")}


def askers(log: Path) -> list[Any]:
    """Two tools asking a human (one async, one sync: a worker thread sees the run too)."""

    async def ask(question: str, tool_call_id: str) -> str:
        """Ask a human a question."""
        answer = interrupt({"question": question}, message=f"Answer {question}")
        log_line(log, f"{tool_call_id}={answer}")
        return f"{question}={answer}"

    def ask_sync(question: str, tool_call_id: str) -> str:
        """Ask a human a question (sync)."""
        answer = interrupt({"question": question}, message=f"Answer {question}")
        log_line(log, f"{tool_call_id}={answer}")
        return f"{question}={answer}"

    return [ask, ask_sync]


async def pending_ids(app: CompiledGraph, cfg: dict[str, Any]) -> list[str]:
    st = await app.aget_state(dict(cfg))
    assert st is not None and st.execution_meta.status == "interrupted"
    return [p["id"] for p in pending_interrupts(st)]


async def final_text(app: CompiledGraph, cfg: dict[str, Any]) -> str:
    st = await app.aget_state(dict(cfg))
    assert st is not None and st.execution_meta.status == "completed"
    return st.context[-1].text()


async def start(
    backend: Backend, tmp_path: Path, thread_id: str
) -> tuple[CompiledGraph, CompiledGraph, Path, dict[str, Any]]:
    log = tmp_path / "log"
    cp = backend.new()
    app = tool_loop(cp, CALLS, askers(log))
    other = tool_loop(backend.peer(cp), CALLS, askers(log))
    cfg = {"thread_id": thread_id}
    res = await app.ainvoke({"messages": [Message.text_message("go")]}, dict(cfg))
    assert res["interrupted"] is True and res["interrupt"]["node"] == "tools"
    return app, other, log, cfg


@pytest.mark.anyio
async def test_parallel_tool_interrupts_have_distinct_ids_and_are_answered_together(
    backend: Backend, tmp_path: Path
) -> None:
    app, other, log, cfg = await start(backend, tmp_path, "t-together")
    st = await app.aget_state(dict(cfg))
    assert st is not None
    pending = pending_interrupts(st)
    assert [p["id"] for p in pending] == [IDS["c1"], IDS["c2"], IDS["c3"]]
    assert [p["value"] for p in pending] == [{"question": q} for q in ("q1", "q2", "q3")]
    assert all(p["node"] == "tools" and p["reason"] == "human_input" for p in pending)
    assert read_log(log) == []

    answers = {IDS["c1"]: "a1", IDS["c2"]: "a2", IDS["c3"]: "a3"}
    res = await other.ainvoke({"resume": answers}, dict(cfg))
    assert "interrupted" not in res
    assert await final_text(other, cfg) == "done: q1=a1,q2=a2,q3=a3"
    assert sorted(read_log(log)) == ["c1=a1", "c2=a2", "c3=a3"]


@pytest.mark.anyio
async def test_parallel_tool_interrupts_are_answered_one_by_one(
    backend: Backend, tmp_path: Path
) -> None:
    app, other, log, cfg = await start(backend, tmp_path, "t-one-by-one")

    # Answer the middle one: it runs (and is recorded); the other two stay pending, same ids.
    res = await other.ainvoke({"resume": {IDS["c2"]: "a2"}}, dict(cfg))
    assert res["interrupted"] is True
    assert await pending_ids(other, cfg) == [IDS["c1"], IDS["c3"]]
    assert read_log(log) == ["c2=a2"]
    # Still paused for a human: new input is refused.
    with pytest.raises(InterruptPendingError) as info:
        await app.ainvoke({"messages": [Message.text_message("x")]}, dict(cfg))
    assert info.value.context["interrupt_ids"] == [IDS["c1"], IDS["c3"]]

    # A plain value answers the first pending interrupt.
    await app.ainvoke({"resume": "a1"}, dict(cfg))
    assert await pending_ids(app, cfg) == [IDS["c3"]]
    assert sorted(read_log(log)) == ["c1=a1", "c2=a2"]

    await other.ainvoke({"resume": {IDS["c3"]: "a3"}}, dict(cfg))
    assert await final_text(app, cfg) == "done: q1=a1,q2=a2,q3=a3"
    # Every tool ran exactly once: answered ones came back from the ledger on later resumes.
    assert sorted(read_log(log)) == ["c1=a1", "c2=a2", "c3=a3"]


@pytest.mark.anyio
async def test_a_tool_recorded_before_a_sibling_interrupted_is_not_run_again(
    backend: Backend, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    cp = backend.new()

    def tools(cp_: Any) -> list[Any]:
        async def charge(amount: int) -> str:
            """Charge the card."""
            log_line(log, f"charge:{amount}")
            return f"charged {amount}"

        async def confirm(config: dict[str, Any]) -> str:
            """Ask the human to confirm, once the charge is in the ledger."""
            with anyio.fail_after(10):
                while await cp_.aledger_count(config) < 1:  # noqa: ASYNC110 - polls the store
                    await anyio.sleep(0.005)
            answer = interrupt("confirm the charge?")
            log_line(log, f"confirm:{answer}")
            return f"confirmed {answer}"

        return [charge, confirm]

    calls = [("c-charge", "charge", {"amount": 42}), ("c-confirm", "confirm", {})]
    app = tool_loop(cp, calls, tools(cp))
    cfg = {"thread_id": "t-ledger"}
    res = await app.ainvoke({"messages": [Message.text_message("pay")]}, dict(cfg))
    assert res["interrupted"] is True
    assert await pending_ids(app, cfg) == ["tools:1:c-confirm:1"]
    assert read_log(log) == ["charge:42"]
    assert await cp.aledger_count(dict(cfg)) == 1

    peer = backend.peer(cp)
    other = tool_loop(peer, calls, tools(peer))
    await other.ainvoke({"resume": "yes"}, dict(cfg))
    assert await final_text(other, cfg) == "done: charged 42,confirmed yes"
    assert read_log(log) == ["charge:42", "confirm:yes"]
    assert await peer.aledger_count(dict(cfg)) == 2
