"""Bad arguments and edge cases of the background-run API found by a new user: each is refused
with a documented error before anything is written (issue 28 follow-up)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_background_api import _graph, _msg

from tenxgraph.cli import main
from tenxgraph.core.exceptions import ConfigError, StorageError, ValidationError
from tenxgraph.storage.checkpointer import InMemoryCheckpointer, SqliteCheckpointer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.parametrize("bad", [-1, "5", True, float("nan"), float("inf"), [1]])
async def test_join_timeout_is_validated(bad: Any) -> None:
    app = _graph(InMemoryCheckpointer())
    run = await app.asubmit(_msg("hi"), {"thread_id": "t"})
    with pytest.raises(ConfigError) as err:
        await app.ajoin({"thread_id": "t"}, run.run_id, timeout=bad)
    assert err.value.error_code == "CONFIG_001"


async def test_submit_refuses_what_a_run_refuses() -> None:
    app = _graph(InMemoryCheckpointer())
    with pytest.raises(ValidationError):
        await app.ainvoke({"mesages": [{"role": "user", "content": "x"}]}, {"thread_id": "t"})
    with pytest.raises(ValidationError):
        await app.asubmit({"mesages": [{"role": "user", "content": "x"}]}, {"thread_id": "t"})
    assert await app.checkpointer.store.run_list("") == []


async def test_recovery_misspelt_option_is_a_config_error() -> None:
    app = _graph(InMemoryCheckpointer())
    with pytest.raises(ConfigError) as err:
        app.recovery(concurency=4)
    assert err.value.error_code == "CONFIG_001" and "concurrency" in err.value.message
    with pytest.raises(ConfigError):
        app.recovery(grace_s=-1)


async def test_same_run_id_with_other_input_is_a_conflict() -> None:
    app = _graph(InMemoryCheckpointer())
    cfg = {"thread_id": "t", "run_id": "r1"}
    first = await app.asubmit(_msg("hi"), dict(cfg))
    again = await app.asubmit(_msg("hi"), dict(cfg))  # same request: idempotent
    assert again.run_id == first.run_id and again.created_at == first.created_at
    with pytest.raises(ValidationError) as err:
        await app.asubmit(_msg("something else"), dict(cfg))
    assert err.value.context["reason"] == "conflict"


async def test_stop_of_another_users_background_run_is_refused() -> None:
    app = _graph(InMemoryCheckpointer())
    run = await app.asubmit(_msg("hi"), {"thread_id": "t", "user_id": "alice"})
    with pytest.raises(StorageError) as err:
        await app.astop({"thread_id": "t", "user_id": "bob", "run_id": run.run_id})
    assert err.value.error_code == "STORAGE_FORBIDDEN_001"
    info = await app.aget_run({"thread_id": "t", "user_id": "alice"}, run.run_id)
    assert info.status == "pending"


async def _failed_run(db: Path) -> Any:
    app = _graph(SqliteCheckpointer(db), fail=True)
    run = await app.asubmit(_msg("hi"), {"thread_id": "t"})
    async with app.recovery(sweep_interval_s=0.05):
        info = await app.ajoin({"thread_id": "t"}, run.run_id, timeout=20)
    await app.aclose()
    return info


@pytest.mark.parametrize("anyio_backend", [None])
def test_retry_clears_last_error_and_unknown_run_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], anyio_backend: Any
) -> None:
    db = tmp_path / "r.sqlite"
    run = info = asyncio.run(_failed_run(db))
    assert info.status == "error" and info.last_error
    base = ["runs", "retry", run.run_id, "--db", str(db)]
    assert main([*base, "--thread", "t"]) == 0
    assert main(["runs", "list", "--json", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert '"last_error": ""' in out and '"status": "pending"' in out
    assert main(["runs", "retry", "nope", "--thread", "t", "--db", str(db)]) == 1
    assert main([*base, "--thread", "other"]) == 1
    assert main([*base, "--thread", "t", "--user", "bob"]) == 1


@pytest.mark.parametrize(
    "flags",
    [["--redis-url", "redis://x"], ["--lease-ttl-s", "3"], ["--schema", "s"]],
)
async def test_worker_store_options_that_do_not_apply_are_refused(
    flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenxgraph.worker import load_app

    monkeypatch.setenv("RECOVERY_STORE", f"sqlite:{tmp_path / 'own.sqlite'}")

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    from tenxgraph.worker import add_worker_parser

    add_worker_parser(sub)
    args = parser.parse_args(["worker", "--graph", "_graphapp:app", *flags])
    with pytest.raises(ConfigError):
        await load_app(args)


async def test_worker_db_keeps_the_graphs_lease_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenxgraph.worker import add_worker_parser, load_app

    monkeypatch.setenv("RECOVERY_STORE", f"sqlite:{tmp_path / 'own.sqlite'}")
    parser = argparse.ArgumentParser()
    add_worker_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["worker", "--graph", "_graphapp:app", "--db", str(tmp_path / "other.sqlite")]
    )
    app = await load_app(args)
    try:
        assert app.checkpointer.lease_ttl_s == 1.0  # _graphapp's, not the default 5
        assert str(app.checkpointer.db_path).endswith("other.sqlite")
    finally:
        await app.aclose()


async def _cut_off(app: Any, tid: str, case: str) -> str:
    """A run left ``running`` by a dead worker after 2 counted crashes. Its last attempt made
    progress (``progress``: a node checkpointed since its claim), or not, alone in its worker
    (``alone``) or beside other runs (``shared``)."""
    import dataclasses
    import time

    await app.ainvoke(_msg("earlier turn"), {"thread_id": tid})  # the thread's step is 2
    state = await app.aget_state({"thread_id": tid})
    step = state.execution_meta.step
    run = await app.asubmit(_msg("hi"), {"thread_id": tid})
    store = app.checkpointer.store
    (rec,) = [r for r in await store.run_list("", thread_id=tid) if r.run_id == run.run_id]
    note = {"progress": f"s{step - 1}.0a", "alone": f"s{step}.0a", "shared": f"s{step}.1"}[case]
    dead = dataclasses.replace(
        rec,
        status="running",
        attempts=3,
        crashes=2,
        holder=f"{rec.run_id}#3#{note}#dead0000",
        worker="dead-worker",
        updated_at=time.time() - 100,
    )
    assert await store.run_update(dead, expect_status="pending", expect_attempts=0)
    return run.run_id


@pytest.mark.parametrize("case", ["progress", "alone", "shared"])
async def test_poison_counts_only_attributable_attempts_without_progress(case: str) -> None:
    app = _graph(InMemoryCheckpointer())
    run_id = await _cut_off(app, "t", case)
    async with app.recovery(sweep_interval_s=0.02, max_crashes=3, concurrency=2):
        info = await app.ajoin({"thread_id": "t"}, run_id, timeout=20)
    if case == "alone":  # a third death in a row without progress, nothing else in flight
        assert info.status == "error" and "poison run" in info.last_error
    else:  # a victim of its worker's death: finished, never poisoned
        assert info.status == "completed"
    (row,) = [r for r in await app.checkpointer.store.run_list("") if r.run_id == run_id]
    if case == "shared":
        assert row.holder.split("#")[2].endswith("a")  # it was run alone
