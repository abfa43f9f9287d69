"""Graphs and child processes of the run-lease tests (issue 15, docs/how-to/run-lease.md).

Every node appends one line ``"<node> <exec id>"`` to a side-effect file (``fsync``'ed) before
it returns, and returns an assistant message whose ``message_id`` is that exec id: a test can
then tell each node execution that was committed (its message is in a kept version) from one
whose result was thrown away (logged, never stored).

Child modes (``python _lease_child.py MODE SPEC THREAD_ID EFFECTS [ARGS...]``; ``SPEC`` is the
JSON of ``graph_backends.Backend.spec()``, its ``kwargs`` passed to the checkpointer):

* ``turns WORKER TURNS NODES NODE_S STRATEGY``: ``TURNS`` runs of a ``NODES``-node chain (each
  node sleeps ``NODE_S`` seconds) on the thread, each with a new user message; a run refused
  with ``ThreadBusyError`` (``reject``) is retried after a short pause. Prints ``{"ok", "busy",
  "stale", "errors"}`` as one JSON line.
* ``hold BLOCK STRATEGY``: one run of ``first -> slow``; ``slow`` logs, then waits while the
  file ``BLOCK`` exists (the parent kills or stops the process meanwhile). Prints the outcome.
* ``resume STRATEGY``: ``invoke(None)`` on the thread with the ``hold`` graph (no blocking, as
  ``BLOCK`` is gone). Prints the outcome and the seconds it took.
* ``pay GATE STRATEGY``: one run of ``model -> tools``; a tool callback waits while ``GATE``
  exists just before ``pay`` runs; ``pay`` logs ``"pay <pid> <fence>"``. Prints the outcome.
* ``answer GO``: waits for the file ``GO``, then answers the thread's ``interrupt()`` with
  ``{"resume": "yes"}`` (the ``ask`` graph). Prints the outcome.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tenxgraph.core.exceptions import StaleStateError, TenxGraphError, ThreadBusyError
from tenxgraph.core.graph import CompiledGraph, StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import END, interrupt


def log_line(path: str | Path, line: str) -> None:
    """Append ``line`` to the side-effect file, durably (it must survive a SIGKILL)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_effects(path: str | Path) -> list[tuple[str, str]]:
    """``(node, exec id)`` of every logged execution, in order."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [tuple(line.split()) for line in f if line.strip()]  # type: ignore[misc]


def chain(checkpointer: Any, effects: str | Path, nodes: int, node_s: float) -> CompiledGraph:
    """``n0 -> n1 -> ... -> END``: each node sleeps ``node_s`` s, logs, answers."""

    def make(name: str) -> Any:
        def node(state: AgentState) -> Message:
            time.sleep(node_s)
            eid = f"{name}-{uuid.uuid4().hex}"
            log_line(effects, f"{name} {eid}")
            return Message.text_message(name, role="assistant", message_id=eid)

        return node

    g = StateGraph()
    names = [f"n{i}" for i in range(nodes)]
    for n in names:
        g.add_node(n, make(n))
    g.set_entry_point(names[0])
    for a, b in zip(names, names[1:], strict=False):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=checkpointer)


def holding(checkpointer: Any, effects: str | Path, block: str | Path) -> CompiledGraph:
    """``first -> slow -> END``: ``slow`` logs ``"slow-start"`` first, then waits while
    ``block`` exists, then logs its execution."""

    def first(state: AgentState) -> Message:
        eid = f"first-{uuid.uuid4().hex}"
        log_line(effects, f"first {eid}")
        return Message.text_message("first", role="assistant", message_id=eid)

    def slow(state: AgentState) -> Message:
        log_line(effects, f"slow-start {os.getpid()}")
        while os.path.exists(block):
            time.sleep(0.02)
        eid = f"slow-{uuid.uuid4().hex}"
        log_line(effects, f"slow {eid}")
        return Message.text_message("slow", role="assistant", message_id=eid)

    g = StateGraph()
    g.add_node("first", first)
    g.add_node("slow", slow)
    g.set_entry_point("first")
    g.add_edge("first", "slow")
    g.add_edge("slow", END)
    return g.compile(checkpointer=checkpointer)


def asking(checkpointer: Any, effects: str | Path) -> CompiledGraph:
    """``ask -> END``: ``ask`` logs ``"ask-body"`` each time its body runs, calls
    ``interrupt()``, and once answered sleeps 0.3 s (so racing resumers overlap) and logs."""

    def ask(state: AgentState) -> Message:
        log_line(effects, f"ask-body {os.getpid()}")
        answer = interrupt({"q": "go on?"})
        time.sleep(0.3)
        eid = f"ask-{uuid.uuid4().hex}"
        log_line(effects, f"ask {eid}")
        return Message.text_message(f"ask:{answer}", role="assistant", message_id=eid)

    g = StateGraph()
    g.add_node("ask", ask)
    g.set_entry_point("ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=checkpointer)


def paying(checkpointer: Any, effects: str | Path, gate: str | Path) -> CompiledGraph:
    """``model -> tools -> END``: ``model`` asks for one call of ``pay`` (id ``call-1``);
    a before-invoke tool callback logs ``"gate <pid>"``, then waits while ``gate`` exists
    (the moment between the ledger miss and the call, where a paused holder is caught);
    ``pay`` logs ``"pay <pid> <fence>"``: one line per side effect performed."""
    from tenxgraph.core._context import current_tool_call
    from tenxgraph.core.graph import ToolNode
    from tenxgraph.core.state import ToolCallBlock
    from tenxgraph.utils.callbacks import CallbackManager, InvocationType

    def model(state: AgentState) -> Message:
        if any(m.role == "tool" for m in state.context):
            return Message.text_message("done", role="assistant", message_id="m-done")
        return Message(
            role="assistant",
            message_id="m-call",
            content=[ToolCallBlock(id="call-1", name="pay", args={"amount": 5})],
        )

    def pay(amount: int) -> str:
        ctx = current_tool_call()
        log_line(effects, f"pay {os.getpid()} {None if ctx is None else ctx.fence}")
        return f"paid {amount}"

    def hold(context: Any, data: Any) -> Any:
        log_line(effects, f"gate {os.getpid()}")
        while os.path.exists(gate):
            time.sleep(0.02)
        return data

    cbm = CallbackManager()
    cbm.register_before_invoke(InvocationType.TOOL, hold)
    g = StateGraph()
    g.add_node("model", model)
    g.add_node("tools", ToolNode([pay]))
    g.set_entry_point("model")
    g.add_edge("model", "tools")
    g.add_edge("tools", END)
    return g.compile(checkpointer=checkpointer, callback_manager=cbm)


def _outcome(fn: Any) -> dict[str, Any]:
    t0 = time.monotonic()
    try:
        res = fn()
    except TenxGraphError as exc:
        return {
            "error": exc.error_code,
            "context": {k: v for k, v in exc.context.items() if isinstance(v, (int, float, str))},
            "seconds": time.monotonic() - t0,
        }
    status = res.get("interrupt", {}).get("status") if res.get("interrupted") else None
    return {"ok": True, "interrupted": status, "seconds": time.monotonic() - t0}


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "conformance"))
    from graph_backends import build_from_spec

    mode, spec, tid, effects = argv[0], json.loads(argv[1]), argv[2], argv[3]
    args = argv[4:]
    cp = build_from_spec(spec)
    cfg: dict[str, Any] = {"thread_id": tid}
    try:
        if mode == "turns":
            worker, turns, nodes, node_s = args[0], int(args[1]), int(args[2]), float(args[3])
            strategy = None if args[4] == "none" else args[4]
            app = chain(cp, effects, nodes, node_s)
            out: dict[str, Any] = {"ok": 0, "busy": 0, "stale": 0, "errors": []}
            done = 0
            while done < turns:
                msg = Message.text_message(f"{worker}-{done}", message_id=f"u-{worker}-{done}")
                try:
                    app.invoke({"messages": [msg]}, {**cfg, "multitask_strategy": strategy})
                except ThreadBusyError:
                    out["busy"] += 1
                    time.sleep(0.02)
                    continue
                except StaleStateError:
                    out["stale"] += 1
                    continue
                except TenxGraphError as exc:
                    out["errors"].append(f"{exc.error_code}: {exc}")
                out["ok"] += 1
                done += 1
            print(json.dumps(out), flush=True)
        elif mode == "hold":
            block, strategy = args[0], (None if args[1] == "none" else args[1])
            app = holding(cp, effects, block)
            msg = Message.text_message("hold", message_id="u-hold")
            print(
                json.dumps(
                    _outcome(
                        lambda: app.invoke(
                            {"messages": [msg]}, {**cfg, "multitask_strategy": strategy}
                        )
                    )
                ),
                flush=True,
            )
        elif mode == "pay":
            gate, strategy = args[0], (None if args[1] == "none" else args[1])
            app = paying(cp, effects, gate)
            msg = Message.text_message("pay 5", message_id="u-pay")
            print(
                json.dumps(
                    _outcome(
                        lambda: app.invoke(
                            {"messages": [msg]}, {**cfg, "multitask_strategy": strategy}
                        )
                    )
                ),
                flush=True,
            )
        elif mode == "resume":
            strategy = None if args[0] == "none" else args[0]
            app = holding(cp, effects, "/nonexistent-block")
            print(
                json.dumps(
                    _outcome(lambda: app.invoke(None, {**cfg, "multitask_strategy": strategy}))
                ),
                flush=True,
            )
        elif mode == "answer":
            go = args[0]
            app = asking(cp, effects)
            while not os.path.exists(go):
                time.sleep(0.002)
            print(json.dumps(_outcome(lambda: app.invoke({"resume": "yes"}, cfg))), flush=True)
        else:
            raise SystemExit(f"unknown mode {mode!r}")
    finally:
        cp.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
