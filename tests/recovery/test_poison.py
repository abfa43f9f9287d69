"""A run that kills its worker every time (a poison run) ends ``error`` after 3 crashes, is
listed by ``tenxgraph runs list --status error`` and comes back with ``tenxgraph runs retry``
(issue 28)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from _fleet import Fleet
from _graphapp import build, checkpointer_from
from test_worker_crash import _expected, _join, _submit, _thread_shape

from tenxgraph.cli import main


async def _status(spec: str, tid: str, run_id: str) -> str:
    app = build(checkpointer_from(spec))
    try:
        return (await app.aget_run({"thread_id": tid}, run_id)).status
    finally:
        await app.aclose()


def _store_args(spec: str) -> list[str]:
    kind, _, rest = spec.partition(":")
    if kind == "sqlite":
        return ["--db", rest]
    dsn, schema = rest.split("|")[:2]
    return ["--dsn", dsn, "--schema", schema]


@pytest.mark.parametrize("store_spec", ["sqlite", "pg"], indirect=True)
def test_poison_run_ends_error_is_listed_and_retried(
    store_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = Fleet(tmp_path, store_spec, hang="crash", concurrency=1)
    tid = "poison"
    try:
        run_id = asyncio.run(_submit(store_spec, tid))
        n = 0
        deadline = time.monotonic() + 60
        while asyncio.run(_status(store_spec, tid, run_id)) != "error":
            assert time.monotonic() < deadline, "the poison run never ended error"
            if not any(p.poll() is None for p in fleet.procs.values()):
                n += 1
                fleet.procs.clear()
                fleet.start(f"p{n}")
            time.sleep(0.05)
        crashes = sum(1 for e in fleet.event_lines() if e[:2] == ["hang", "crash"])
        fleet.stop_all()
        assert crashes == 3

        assert main(["runs", "list", "--status", "error", "--json", *_store_args(store_spec)]) == 0
        listed = json.loads(capsys.readouterr().out)
        assert [r["run_id"] for r in listed] == [run_id]
        assert listed[0]["attempts"] == 3 and listed[0]["crashes"] == 3
        assert "poison run" in listed[0]["last_error"]

        assert main(["runs", "retry", run_id, "--thread", tid, *_store_args(store_spec)]) == 0
        assert "pending again" in capsys.readouterr().out
        fleet.hang = ""
        fleet.start("healthy")
        info, state = asyncio.run(_join(store_spec, tid, run_id, 30))
    finally:
        fleet.stop_all()
    assert info.status == "completed" and info.attempts == 4
    assert _thread_shape(state) == _expected(tid)
    assert fleet.effect_counts() == {f"{tid}:a": 1, f"{tid}:b": 1}
    assert main(["runs", "list", "--status", "error", "--json", *_store_args(store_spec)]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_poison_run_does_not_take_its_neighbour_down(tmp_path: Path) -> None:
    """The poison run ends its worker (``os._exit``) while a healthy run is in flight on it,
    again and again: the healthy run completes, only the poison run ends ``error``."""
    spec = f"sqlite:{tmp_path / 'neighbour.sqlite'}"
    fleet = Fleet(tmp_path, spec, concurrency=2, node_s=1.0, poison="bad")
    try:
        bad = asyncio.run(_submit(spec, "bad"))
        good = asyncio.run(_submit(spec, "good"))
        n = 0
        deadline = time.monotonic() + 60
        while asyncio.run(_status(spec, "bad", bad)) != "error":
            assert time.monotonic() < deadline, "the poison run never ended error"
            assert asyncio.run(_status(spec, "good", good)) != "error", "the neighbour was poisoned"
            if not any(p.poll() is None for p in fleet.procs.values()):
                n += 1
                fleet.procs.clear()
                fleet.start(f"w{n}")
            time.sleep(0.05)
        if not any(p.poll() is None for p in fleet.procs.values()):
            fleet.procs.clear()
            fleet.start("last")
        info, _ = asyncio.run(_join(spec, "good", good, 30))
    finally:
        fleet.stop_all()
    assert info.status == "completed"
    assert fleet.effect_counts() == {"good:a": 1, "good:b": 1}
