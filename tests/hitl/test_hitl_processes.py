"""Human-in-the-loop across OS processes, on every persistent store (SQLite, Postgres,
Postgres + Redis): a paused thread survives SIGKILL and another process resumes it; a stop
requested by another process stops the run after its long node, resumably, and does not stop
the thread's next run.

Children run ``_hitl_graphs.py``; every node execution is counted in a log file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _hitl_graphs import SLOW_S, chain, read_log, slow_chain
from graph_backends import (  # noqa: F401 - fixtures and the parametrizing hook
    DURABLE,
    Backend,
    only,
    pytest_generate_tests,
    sync_backend_fixture,
)

import tenxgraph
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils import pending_interrupt

HERE = Path(__file__).resolve().parent
CHILD = HERE / "_hitl_graphs.py"
REPO = Path(tenxgraph.__file__).resolve().parent.parent


def user(text: str) -> Message:
    return Message.text_message(text)


def texts(state_or_msgs: Any) -> list[str]:
    msgs = state_or_msgs.context if isinstance(state_or_msgs, AgentState) else state_or_msgs
    return [m.text() for m in msgs]


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(HERE)]))
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], returncode: int) -> dict[str, Any]:
    """Wait for ``proc``; check its exit status; its last stdout line as JSON."""
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == returncode, err.decode(errors="replace")[-3000:]
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.slow
@only(*DURABLE)
def test_a_pause_survives_sigkill_and_another_process_resumes_it(
    sync_backend: Backend, tmp_path: Path
) -> None:
    """Three children pause (before ``two``, after ``one``, inside ``two`` by ``interrupt()``),
    each SIGKILLed while paused; this process, which never ran them, resumes them."""
    modes = ["before", "after", "dynamic"]
    spec = json.dumps(sync_backend.spec())
    logs = {m: tmp_path / f"{m}.log" for m in modes}
    children = {m: spawn("pause", spec, f"t-{m}", str(logs[m]), m) for m in modes}
    for mode, proc in children.items():
        out = finish(proc, -9)
        assert out["interrupted"] is True, mode

    for mode in modes:
        cfg = {"thread_id": f"t-{mode}"}
        app = chain(sync_backend.new(), logs[mode], mode=mode)
        st = app.get_state(dict(cfg))
        assert st is not None and st.execution_meta.current_node == "two"
        if mode == "dynamic":
            assert st.execution_meta.status == "interrupted"
            p = pending_interrupt(st)
            assert p is not None and p["id"] == "two:1:1" and p["value"] == {"draft": "u0"}
            assert read_log(logs[mode]) == ["one", "two:start"]
            res = app.invoke({"resume": "yes"}, dict(cfg))
            two = "two<-yes|u0"
            expected_log = ["one", "two:start", "two:start", "two:yes", "three"]
        else:
            assert st.execution_meta.status == f"interrupted_{mode}"
            assert read_log(logs[mode]) == ["one"]
            # The human's input to a static pause is an edit of the paused state.
            app.update_state(dict(cfg), {"messages": [user("approved")]})
            res = app.invoke(None, dict(cfg))
            two = "two<-approved"
            expected_log = ["one", "two", "three"]
        assert texts(res["messages"]) == [
            two,
            "three<-" + ("u0" if mode == "dynamic" else "approved"),
        ]
        final = app.get_state(dict(cfg))
        assert final is not None and final.execution_meta.status == "completed"
        # The answer reached node two, the run completed, and node one never ran again.
        assert read_log(logs[mode]) == expected_log, mode


@pytest.mark.slow
@only(*DURABLE)
def test_stop_from_another_process_while_a_long_node_runs(
    sync_backend: Backend, tmp_path: Path
) -> None:
    log, started, go = tmp_path / "calls.log", tmp_path / "started", tmp_path / "go"
    cfg = {"thread_id": "t-stop"}

    async def slow() -> None:
        await anyio.sleep(SLOW_S)  # longer than the 1 s durable-flag poll

    app = slow_chain(sync_backend.new(), log, slow)
    # Asked while nothing runs (the thread does not even exist): targets no run.
    assert app.stop(dict(cfg)) == {"ok": True, "running": False}

    child = spawn(
        "stop", json.dumps(sync_backend.spec()), "t-stop", str(log), str(started), str(go)
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert child.poll() is None and time.monotonic() < deadline, "child did not start"
            time.sleep(0.01)
        # The child is in its first node: nothing of the thread is durable yet.
        assert app.get_state(dict(cfg)) is None
        assert app.stop(dict(cfg))["ok"] is True
        go.touch()
        out = finish(child, 0)
    finally:
        if child.poll() is None:
            child.kill()
    assert out == {"status": "stopped"}

    # Stopped after the long node, with its output saved.
    st = app.get_state(dict(cfg))
    assert st is not None
    assert (st.execution_meta.status, st.execution_meta.current_node) == ("stopped", "two")
    assert texts(st) == ["u0", "slow<-u0"]
    assert [(s.version, s.status) for s in app.get_state_history(dict(cfg))] == [
        (2, "stopped"),
        (1, "running"),
    ]
    assert read_log(log) == ["slow"]

    # Resumable from this process.
    res = app.invoke(None, dict(cfg))
    assert texts(res["messages"]) == ["two<-u0", "three<-u0"]
    assert read_log(log) == ["slow", "two", "three"]

    # Neither that stop nor one asked while idle stops the next run (which polls after slow).
    assert app.stop(dict(cfg))["running"] is False
    res = app.invoke({"messages": [user("u1")]}, dict(cfg))
    assert texts(res["messages"]) == ["u1", "slow<-u1", "two<-u1", "three<-u1"]
    st = app.get_state(dict(cfg))
    assert st is not None and st.execution_meta.status == "completed"
    assert read_log(log) == ["slow", "two", "three"] * 2
