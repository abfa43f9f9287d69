"""``tenxgraph worker --config 10xgraph.json``: SIGTERM mid-run puts the run back to ``pending``
(not counted as a crash), the worker exits 0, and the next worker finishes the run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from _fleet import HERE, Fleet
from _graphapp import build, checkpointer_from
from test_worker_crash import _expected, _join, _submit, _thread_shape


async def _row(spec: str, tid: str, run_id: str) -> tuple[str, int, int]:
    app = build(checkpointer_from(spec))
    try:
        store = app.checkpointer.store
        rows = [r for r in await store.run_list("", thread_id=tid) if r.run_id == run_id]
        return rows[0].status, rows[0].attempts, rows[0].crashes
    finally:
        await app.aclose()


def test_sigterm_requeues_the_run_and_config_file_works(tmp_path: Path) -> None:
    spec = f"sqlite:{tmp_path / 'term.sqlite'}"
    config = tmp_path / "10xgraph.json"
    config.write_text(json.dumps({"agent": "_graphapp:app"}))
    assert (HERE / "_graphapp.py").exists()
    fleet = Fleet(tmp_path, spec, hang="plan", concurrency=1, config=config)
    tid = "term"
    try:
        fleet.start("first")
        run_id = asyncio.run(_submit(spec, tid))
        fleet.wait_event("hang")
        assert fleet.terminate("first") == 0
        assert asyncio.run(_row(spec, tid, run_id)) == ("pending", 1, 0)
        fleet.start("second")  # the hang happens once per thread: this one finishes it
        info, state = asyncio.run(_join(spec, tid, run_id, 30))
    finally:
        fleet.stop_all()
    assert info.status == "completed" and info.attempts == 2
    assert _thread_shape(state) == _expected(tid)
    assert fleet.effect_counts() == {f"{tid}:a": 1, f"{tid}:b": 1}
    stopped = [p.read_text() for p in tmp_path.glob("first.*.log")]
    assert stopped and "stopped" in stopped[0] and "'requeued': 1" in stopped[0]
