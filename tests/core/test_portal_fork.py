"""The sync API keeps working in a process forked after it was used (gunicorn --preload,
Celery, multiprocessing's fork start method)."""

from __future__ import annotations

import os
import sys

import pytest

from tenxgraph.core.graph import StateGraph
from tenxgraph.storage.checkpointer import SqliteCheckpointer


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_sync_invoke_works_in_a_forked_child(tmp_path) -> None:
    g = StateGraph()
    g.add_node("n", lambda state: "ok")
    g.set_entry_point("n")
    db = str(tmp_path / "fork.sqlite")
    app = g.compile(checkpointer=SqliteCheckpointer(db))
    app.invoke({"messages": ["parent"]}, {"thread_id": "parent"})  # starts the portal
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            import signal

            signal.alarm(20)
            child = g.compile(checkpointer=SqliteCheckpointer(db))
            out = child.invoke({"messages": ["child"]}, {"thread_id": "child"})
            code = 0 if [m.text() for m in out["messages"]] == ["child", "ok"] else 3
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [m.text() for m in app.get_state({"thread_id": "child"}).context] == ["child", "ok"]
