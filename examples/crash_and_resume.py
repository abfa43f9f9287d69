"""Crash and resume: a worker process is killed with SIGKILL in the middle of a run; the thread
is resumed with ``invoke(None, config)`` and at most one node runs again.

Run: python examples/crash_and_resume.py   (no server needed; embedded SQLite; POSIX only)

The graph is a pipeline of four nodes. A child process runs it and is killed while node
``step3`` runs. The checkpoint written after ``step2`` says "next: step3", so the resumed run
starts there: ``step1`` and ``step2`` do not run again.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import tempfile
import time
from pathlib import Path

from tenxgraph.core.graph import StateGraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.storage.checkpointer import SqliteCheckpointer
from tenxgraph.utils import END

CONFIG = {"thread_id": "pipeline-1", "user_id": "ops"}


def make_step(name: str, slow: bool):
    def step(state: AgentState) -> str:
        # Each execution leaves a trace in a file, to count how often each node ran.
        with open(os.environ["TRACE_FILE"], "a") as fh:
            fh.write(f"{name} pid={os.getpid()}\n")
        if slow and os.environ.get("HANG") == "1":
            time.sleep(3600)  # the parent kills us here
        return f"{name} done"

    step.__name__ = name
    return step


def build(db: str):
    graph = StateGraph()
    names = ["step1", "step2", "step3", "step4"]
    for name in names:
        graph.add_node(name, make_step(name, slow=name == "step3"))
    for a, b in zip(names, names[1:], strict=False):
        graph.add_edge(a, b)
    graph.add_edge("step4", END)
    graph.set_entry_point("step1")
    return graph.compile(checkpointer=SqliteCheckpointer(db))


def child(db: str) -> None:
    os.environ["HANG"] = "1"
    build(db).invoke({"messages": [Message.text_message("run the pipeline")]}, dict(CONFIG))


def main() -> None:
    folder = tempfile.mkdtemp(prefix="tenxgraph-crash-")
    db = os.path.join(folder, "crash.sqlite")
    os.environ["TRACE_FILE"] = os.path.join(folder, "trace.txt")
    proc = mp.get_context("spawn").Process(target=child, args=(db,))
    proc.start()
    app = build(db)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until step3 is running
        if (
            os.path.exists(os.environ["TRACE_FILE"])
            and "step3" in Path(os.environ["TRACE_FILE"]).read_text()
        ):
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    print(f"worker {proc.pid} killed while step3 ran (exit code {proc.exitcode})")
    state = app.get_state(dict(CONFIG))
    meta = state.execution_meta
    print(
        f"stored: status {meta.status}, next node {meta.current_node}, {len(state.context)} messages"
    )

    out = app.invoke(None, dict(CONFIG))  # finish the cut-off run
    state = app.get_state(dict(CONFIG))
    print(
        f"resumed: status {state.execution_meta.status}; new messages {[m.text() for m in out['messages']]}"
    )
    runs = [line.split()[0] for line in Path(os.environ["TRACE_FILE"]).read_text().splitlines()]
    print("node executions:", runs)
    assert runs.count("step1") == 1 and runs.count("step2") == 1  # not replayed
    assert runs.count("step3") == 2  # the one node that was running when the process died
    assert state.execution_meta.status == "completed"
    app.checkpointer.close()


if __name__ == "__main__":
    main()
