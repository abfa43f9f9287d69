"""SIGKILL during a streamed model call and during a structured-output repair: the resumed
thread equals an uninterrupted run, the model is not asked again for an answer already
checkpointed, and no tool runs twice."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tenxgraph.storage.checkpointer import SqliteCheckpointer

from ._agent_crash_child import build
from ._fake_llm_server import Reply, ScriptedLLMServer, text, tool_calls

pytestmark = pytest.mark.anyio

CHILD = Path(__file__).with_name("_agent_crash_child.py")


class Script:
    """Deterministic answers by what was asked; the answer the crash targets can be slowed."""

    def __init__(self) -> None:
        self.slow = threading.Event()
        self.kinds: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        structured = "response_format" in body
        if last["role"] == "user" and last["content"] == "pay 5":
            kind, reply = "first", tool_calls(("charge", {"amount": 5}))
        elif last["role"] == "tool":
            kind = "after_tool"
            reply = (
                text("Receipt: paid=5 (not json)")
                if structured
                else text(
                    "Paid five euros, thank you for waiting.",
                    chunk_delay_s=0.15 if self.slow.is_set() else 0.0,
                )
            )
        else:  # the correction request of a structured-output repair
            kind = "repair"
            reply = text('{"paid": 5, "status": "ok"}', delay_s=5.0 if self.slow.is_set() else 0.0)
        self.kinds.append(kind)
        return reply


def run_child(
    llm: ScriptedLLMServer,
    db: Path,
    thread: str,
    mode: str,
    log: Path,
    script: Script,
    kill_on: str,
) -> int:
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), llm.base_url, str(db), thread, mode, str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while kill_on not in script.kinds:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the child never reached the model call to kill"
        time.sleep(0.02)
    time.sleep(0.2)  # mid-answer: a few SSE events sent, or the repair request pending
    proc.kill()
    proc.wait(10)
    return proc.returncode


def summary(state: Any) -> list[tuple[str, str]]:
    return [(m.role, m.text()) for m in state.context]


@pytest.mark.parametrize(("mode", "kill_on"), [("stream", "after_tool"), ("structured", "repair")])
async def test_sigkill_then_resume_equals_uninterrupted(
    tmp_path: Path, mode: str, kill_on: str
) -> None:
    script = Script()
    with ScriptedLLMServer(responder=script) as llm:
        db, log = tmp_path / "t.db", tmp_path / "charges.log"
        script.slow.set()
        code = run_child(llm, db, "crashed", mode, log, script, kill_on)
        assert code == -9
        script.slow.clear()
        cp = SqliteCheckpointer(str(db))
        app = build(llm.base_url, cp, str(log), structured=mode == "structured")
        cfg = {"thread_id": "crashed"}
        before = await app.aget_state(cfg)
        # the model's tool call was checkpointed before the tool ran, and so was the result
        assert [m.role for m in before.context] == ["user", "assistant", "tool"]
        assert not any(m.delta for m in before.context)
        await app.ainvoke(None, dict(cfg))  # resume the cut-off run
        resumed = await app.aget_state(cfg)
        await app.ainvoke({"messages": ["pay 5"]}, {"thread_id": "clean"})
        clean = await app.aget_state({"thread_id": "clean"})
        assert summary(resumed) == summary(clean)
        assert resumed.context[-1].metadata.get("structured_output") == clean.context[
            -1
        ].metadata.get("structured_output")
        # one charge per thread: the crashed thread's tool never ran twice
        assert log.read_text().splitlines() == ["charge 5", "charge 5"]
        # the checkpointed tool-call answer was not asked for again on resume
        assert script.kinds.count("first") == 2  # crashed thread once, clean thread once
        await app.aclose()


class EmitScript(Script):
    """The model calls ``charge`` and ``report`` together; then answers."""

    def __call__(self, body: dict[str, Any]) -> Reply:
        last = body["messages"][-1]
        if last["role"] == "user":
            self.kinds.append("first")
            return tool_calls(("charge", {"amount": 5}), ("report", {"what": "payment"}))
        self.kinds.append("after_tool")
        return text("Paid and reported.")


def kill_while_reporting(llm: ScriptedLLMServer, db: Path, log: Path) -> int:
    """Run the ``emit`` child until ``charge`` has finished and ``report`` hangs, SIGKILL it,
    and let later ``report`` calls finish. Returns the child's exit code."""
    slow = Path(str(log) + ".slow")
    slow.touch()
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), llm.base_url, str(db), "crashed", "emit", str(log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not (log.exists() and {"charge 5", "report start"} <= set(log.read_text().split("\n"))):
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "the child never reached the report tool"
        time.sleep(0.02)
    time.sleep(0.3)  # charge finished before report hangs: its ledger entry has landed
    proc.kill()
    proc.wait(10)
    slow.unlink()
    return proc.returncode


async def test_sigkill_during_a_tool_sending_progress(tmp_path: Path) -> None:
    # Two tools in one step: ``charge`` finishes (ledger-recorded), ``report`` is killed while
    # it streams progress. The resumed step answers ``charge`` from the ledger and runs
    # ``report`` again (it never finished), and the thread equals an uninterrupted run.
    script = EmitScript()
    with ScriptedLLMServer(responder=script) as llm:
        db, log = tmp_path / "t.db", tmp_path / "tools.log"
        assert kill_while_reporting(llm, db, log) == -9
        cp = SqliteCheckpointer(str(db))
        app = build(llm.base_url, cp, str(log), structured=False)
        cfg = {"thread_id": "crashed"}
        before = await app.aget_state(cfg)
        assert [m.role for m in before.context] == ["user", "assistant"]
        chunks = [c async for c in app.astream(None, dict(cfg))]
        progress = [c.data for c in chunks if c.data and c.data.get("status") == "tool_progress"]
        assert [p["tool_name"] for p in progress] == ["report"]  # charge did not run again
        resumed = await app.aget_state(cfg)
        await app.ainvoke({"messages": ["pay 5"]}, {"thread_id": "clean"})
        clean = await app.aget_state({"thread_id": "clean"})
        assert summary(resumed) == summary(clean)
        lines = log.read_text().splitlines()
        assert lines.count("charge 5") == 2  # once per thread: never twice on the crashed one
        assert lines.count("report start") == 3  # cut off once, re-run, and the clean run
        await app.aclose()
