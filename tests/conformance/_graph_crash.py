"""Child processes of the multi-process graph tests.

``python _graph_crash.py crash SPEC THREAD_ID TEXT LOG`` builds the checkpointer
that ``SPEC`` (JSON of ``graph_backends.Backend.spec()``) describes, and invokes a three-node
graph ``one -> two -> three`` on ``THREAD_ID`` with the user message ``TEXT``. Every node appends
its name to the file ``LOG`` (fsync'ed) before doing anything else; node ``two`` then kills its
own process with SIGKILL, so the durable store holds exactly what a real crash leaves behind.
The parent resumes the thread with the same graph built with ``crash=False``.

``python _graph_crash.py race SPEC THREAD_ID TAG ATTEMPTS READY_FILE GO_FILE`` writes
``READY_FILE``, waits for ``GO_FILE``, then invokes a one-node echo graph ``ATTEMPTS`` times on
``THREAD_ID`` (user texts ``"<TAG>-<i>"``), printing one JSON line per attempt:
``{"text": ..., "outcome": "ok" | "stale" | "<error_code or exception type>"}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END


def last_user_text(state: AgentState) -> str:
    """Text of the newest user message of ``state`` (``""`` when there is none)."""
    for m in reversed(state.context):
        if m.role == "user":
            return m.text()
    return ""


def build(checkpointer: Any, log_path: str, *, crash: bool) -> CompiledGraph:
    """``one -> two -> three``; each node logs its name and answers ``"<name><-<last user text>"``;
    with ``crash``, node ``two`` SIGKILLs the process right after logging."""

    def make(name: str) -> Any:
        def node(state: AgentState) -> Message:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(name + "\n")
                f.flush()
                os.fsync(f.fileno())
            if crash and name == "two":
                os.kill(os.getpid(), signal.SIGKILL)
            return Message.text_message(f"{name}<-{last_user_text(state)}", role="assistant")

        return node

    g = StateGraph()
    g.add_node("one", make("one"))
    g.add_node("two", make("two"))
    g.add_node("three", make("three"))
    g.set_entry_point("one")
    g.add_edge("one", "two")
    g.add_edge("two", "three")
    g.add_edge("three", END)
    return g.compile(checkpointer=checkpointer)


def read_log(log_path: str) -> list[str]:
    """The node names logged so far, in order."""
    if not os.path.exists(log_path):
        return []
    with open(log_path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


def echo_graph(checkpointer: Any) -> CompiledGraph:
    """One node answering ``"echo<-<last user text>"``: each run is exactly one checkpoint."""

    def echo(state: AgentState) -> str:
        return f"echo<-{last_user_text(state)}"

    g = StateGraph()
    g.add_node("echo", echo)
    g.set_entry_point("echo")
    g.add_edge("echo", END)
    return g.compile(checkpointer=checkpointer)


def _race(argv: list[str]) -> int:
    import time

    from graph_backends import build_from_spec

    from tenxgraph.core.exceptions import StaleStateError

    spec, thread_id, tag, attempts = json.loads(argv[0]), argv[1], argv[2], int(argv[3])
    ready, go = argv[4], argv[5]
    app = echo_graph(build_from_spec(spec))
    app.get_state({"thread_id": thread_id})  # connect before the start line
    open(ready, "w").close()
    deadline = time.monotonic() + 30
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
    for i in range(attempts):
        text = f"{tag}-{i}"
        try:
            app.invoke({"messages": [Message.text_message(text)]}, {"thread_id": thread_id})
            outcome = "ok"
        except StaleStateError:
            outcome = "stale"
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails
            outcome = getattr(exc, "error_code", type(exc).__name__)
        print(json.dumps({"text": text, "outcome": outcome}), flush=True)
    app.checkpointer.close()
    return 0


def _child(argv: list[str]) -> int:
    from graph_backends import build_from_spec

    spec, thread_id, text, log_path = json.loads(argv[0]), argv[1], argv[2], argv[3]
    cp = build_from_spec(spec)
    app = build(cp, log_path, crash=True)
    app.invoke({"messages": [Message.text_message(text)]}, {"thread_id": thread_id})
    return 3  # not reached: node "two" kills the process


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    mode = sys.argv[1]
    sys.exit(_child(sys.argv[2:]) if mode == "crash" else _race(sys.argv[2:]))
