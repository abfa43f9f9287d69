"""SIGTERM of ``tenxgraph worker`` while a sync tool runs in its thread: the worker lets the
tool finish and records it before anything else may run the run, so the next worker never runs
the tool again (a clean stop is never worse than SIGKILL)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from _fleet import Fleet
from test_worker_crash import _expected, _join, _submit, _thread_shape


def test_sigterm_during_a_sync_tool_does_not_run_it_twice(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'grace.sqlite'}"
    fleet = Fleet(tmp_path, spec, hang="slowtool", concurrency=1, grace_s=10.0)
    tid = "grace"
    try:
        fleet.start("first")
        run_id = asyncio.run(_submit(spec, tid))
        fleet.wait_event("hang")
        time.sleep(1.0)  # 1 s into the 2 s tool
        assert fleet.terminate("first") == 0
        fleet.start("second")
        info, state = asyncio.run(_join(spec, tid, run_id, 30))
    finally:
        fleet.stop_all()
    assert info.status == "completed"
    assert _thread_shape(state) == _expected(tid)
    assert fleet.effect_counts() == {f"{tid}:a": 1, f"{tid}:b": 1}
