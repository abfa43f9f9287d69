"""Graphs of the human-in-the-loop tests, and the child processes that run them.

Every node and tool appends one line to a side-effect log file (``fsync``'ed) *before* it
returns, so a test counts executions across processes and crashes.

Child modes (``python _hitl_graphs.py MODE SPEC THREAD_ID LOG ...``; ``SPEC`` is the JSON of
``graph_backends.Backend.spec()``):

* ``pause MODE``: run :func:`chain` (``MODE`` = ``before`` / ``after`` / ``dynamic``) on
  ``THREAD_ID`` with the user message ``"u0"`` until it pauses, print the result as one JSON line,
  then SIGKILL the process while the thread is paused.
* ``stop STARTED GO``: run :func:`slow_chain` on ``THREAD_ID`` with ``"u0"``; node ``slow``
  writes the file ``STARTED`` and waits for the file ``GO`` (and at least ``SLOW_S`` seconds,
  so the run polls the durable stop flag after it); print ``{"status": ...}`` of the end state.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tenxgraph.core.graph import CompiledGraph, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.message_block import ToolCallBlock
from tenxgraph.utils import END, interrupt

#: Minimum duration of node ``slow`` in seconds: above the runner's 1 s durable-flag poll.
SLOW_S = 1.2


def log_line(path: str | Path, line: str) -> None:
    """Append ``line`` to the side-effect log, durably (it must survive a SIGKILL)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_log(path: str | Path) -> list[str]:
    """The lines logged so far, in order."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def last_user(state: AgentState) -> str:
    for m in reversed(state.context):
        if m.role == "user":
            return m.text()
    return ""


# -- one -> two -> three, paused around "two" ---------------------------------------------------
def chain(checkpointer: Any, log: str | Path, *, mode: str, barrier: Any = None) -> CompiledGraph:
    """``one -> two -> three``. Each node logs its name and answers ``"<name><-<last user
    text>"``. ``mode``: ``"before"`` compiles ``interrupt_before=["two"]``, ``"after"``
    ``interrupt_after=["one"]``; ``"dynamic"`` makes ``two`` log ``"two:start"``, call
    ``interrupt()``, then log ``"two:<answer>"`` and answer ``"two<-<answer>|<last user
    text>"``; ``"plain"`` pauses nowhere. With ``barrier``, ``two`` awaits ``barrier()`` just
    before it returns (after the interrupt, in dynamic mode)."""

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            if name == "two" and mode == "dynamic":
                log_line(log, "two:start")
                answer = interrupt({"draft": last_user(state)}, message="Approve the draft?")
                log_line(log, f"two:{answer}")
                text = f"two<-{answer}|{last_user(state)}"
            else:
                log_line(log, name)
                text = f"{name}<-{last_user(state)}"
            if name == "two" and barrier is not None:
                await barrier()
            return Message.text_message(text, role="assistant")

        return node

    g = StateGraph()
    for n in ("one", "two", "three"):
        g.add_node(n, make(n))
    g.set_entry_point("one")
    g.add_edge("one", "two")
    g.add_edge("two", "three")
    g.add_edge("three", END)
    return g.compile(
        checkpointer=checkpointer,
        interrupt_before=["two"] if mode == "before" else None,
        interrupt_after=["one"] if mode == "after" else None,
    )


# -- slow -> two -> three -----------------------------------------------------------------------
def slow_chain(checkpointer: Any, log: str | Path, slow: Any) -> CompiledGraph:
    """``slow -> two -> three``: ``slow`` logs ``"slow"`` then awaits ``slow()``; the others log
    their name. Each answers ``"<name><-<last user text>"``."""

    def make(name: str) -> Any:
        async def node(state: AgentState) -> Message:
            log_line(log, name)
            if name == "slow":
                await slow()
            return Message.text_message(f"{name}<-{last_user(state)}", role="assistant")

        return node

    g = StateGraph()
    for n in ("slow", "two", "three"):
        g.add_node(n, make(n))
    g.set_entry_point("slow")
    g.add_edge("slow", "two")
    g.add_edge("two", "three")
    g.add_edge("three", END)
    return g.compile(checkpointer=checkpointer)


# -- model <-> tools ----------------------------------------------------------------------------
def tool_loop(
    checkpointer: Any, calls: list[tuple[str, str, dict[str, Any]]], tools: list[Any]
) -> CompiledGraph:
    """``model -> tools -> model -> END``: the first ``model`` step makes the tool ``calls``
    (``(id, name, args)``) in one assistant message; once their results are in, ``model``
    answers ``"done: <tool results joined by ,>"`` without calls."""

    async def model(state: AgentState) -> Message:
        last = state.context[-1] if state.context else None
        if last is not None and last.role == "tool":
            results = [m.text() for m in state.context if m.role == "tool"]
            return Message.text_message("done: " + ",".join(results), role="assistant")
        blocks = [ToolCallBlock(id=i, name=n, args=a) for i, n, a in calls]
        return Message(role="assistant", content=blocks, message_id="assistant-calls")

    def route(state: AgentState) -> str:
        last = state.context[-1]
        return "tools" if last.role == "assistant" and last.tool_calls() else END

    g = StateGraph()
    g.add_node("model", model)
    g.add_node("tools", ToolNode(tools))
    g.set_entry_point("model")
    g.add_conditional_edges("model", route, {"tools": "tools", END: END})
    g.add_edge("tools", "model")
    return g.compile(checkpointer=checkpointer)


# -- child processes ----------------------------------------------------------------------------
def _pause(spec: dict[str, Any], thread_id: str, log: str, mode: str) -> int:
    from graph_backends import build_from_spec

    app = chain(build_from_spec(spec), log, mode=mode)
    res = app.invoke({"messages": [Message.text_message("u0")]}, {"thread_id": thread_id})
    print(
        json.dumps(
            {"interrupted": res.get("interrupted", False), "interrupt": res.get("interrupt")}
        ),
        flush=True,
    )
    os.kill(os.getpid(), signal.SIGKILL)  # while paused: nothing is closed or flushed
    return 3  # not reached


def _stop(spec: dict[str, Any], thread_id: str, log: str, started: str, go: str) -> int:
    import anyio
    from graph_backends import build_from_spec

    def wait_for_go() -> None:
        t0 = time.monotonic()
        Path(started).touch()
        while not os.path.exists(go) and time.monotonic() < t0 + 30:
            time.sleep(0.01)
        time.sleep(max(0.0, SLOW_S - (time.monotonic() - t0)))

    async def slow() -> None:
        await anyio.to_thread.run_sync(wait_for_go)

    cp = build_from_spec(spec)
    app = slow_chain(cp, log, slow)
    app.invoke({"messages": [Message.text_message("u0")]}, {"thread_id": thread_id})
    st = app.get_state({"thread_id": thread_id})
    print(json.dumps({"status": str(st.execution_meta.status) if st else None}), flush=True)
    cp.close()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "conformance"))
    _mode, _spec, _tid, _log = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
    if _mode == "pause":
        sys.exit(_pause(_spec, _tid, _log, sys.argv[5]))
    sys.exit(_stop(_spec, _tid, _log, sys.argv[5], sys.argv[6]))
