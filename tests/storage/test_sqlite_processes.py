"""Several OS processes writing one SQLite file: no lost update, no gap, no trace of a loser.

Four spawned processes set the schema up at the same moment, then each loops for about two
seconds: read the latest version, write version + 1 with one new message, and on
``StaleStateError`` / ``TransientStorageError`` record the attempt as failed and try again.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tenxgraph.core.exceptions import StaleStateError, TransientStorageError
from tenxgraph.core.state import Message
from tenxgraph.records import CheckpointWrite, ThreadKey, ranges_len
from tenxgraph.storage import serde
from tenxgraph.storage.sqlite import SqliteStore

pytestmark = pytest.mark.slow

PROCESSES = 4
DURATION_S = 2.0
KEY = ThreadKey("shared-thread", "owner")


async def _worker_loop(db_path: str, idx: int, barrier: Any) -> dict[str, Any]:
    store = SqliteStore(db_path, busy_timeout_s=10.0)
    barrier.wait()  # every process runs asetup at the same moment
    await store.asetup()
    committed: list[tuple[int, str]] = []
    failed: list[str] = []
    partial_reads = 0
    deadline = time.monotonic() + DURATION_S
    attempt = 0
    try:
        while time.monotonic() < deadline:
            attempt += 1
            mid = f"p{idx}-a{attempt}"
            try:
                rec = await store.read(KEY)
            except TransientStorageError:
                continue
            if rec is not None and (
                rec.messages is None
                or len(rec.messages) != rec.version
                or ranges_len(rec.ranges) != rec.version
            ):
                partial_reads += 1
            version = 0 if rec is None else rec.version
            seq = 1 if rec is None else rec.next_seq
            msg = Message.text_message(mid, role="user", message_id=mid)
            w = CheckpointWrite(
                thread_id=KEY.thread_id,
                user_id=KEY.user_id,
                expected_version=version,
                values=serde.dumps({"writer": idx, "attempt": attempt}),
                new_messages=[(seq, serde.encode_message(msg))],
                ranges=((1, seq + 1),),
                next_seq=seq + 1,
                status="running",
                history_limit=None,
                created_at=time.time(),
            )
            try:
                await store.write(w)
            except (StaleStateError, TransientStorageError):
                failed.append(mid)
            else:
                committed.append((version + 1, mid))
    finally:
        await store.aclose()
    return {"committed": committed, "failed": failed, "partial_reads": partial_reads}


def _worker(db_path: str, idx: int, barrier: Any, results: Any) -> None:
    try:
        out = anyio.run(_worker_loop, db_path, idx, barrier)
    except BaseException as exc:  # report, never hang the parent
        results.put((idx, {"error": repr(exc)}))
    else:
        results.put((idx, out))


def test_processes_writing_one_file_lose_nothing(tmp_path: Path) -> None:
    db_path = os.fspath(tmp_path / "shared.db")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(db_path, i, barrier, results)) for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    outs: dict[int, dict[str, Any]] = {}
    try:
        for _ in procs:
            idx, out = results.get(timeout=120)
            outs[idx] = out
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    assert all("error" not in o for o in outs.values()), outs
    assert [p.exitcode for p in procs] == [0] * PROCESSES

    committed = sorted(c for o in outs.values() for c in o["committed"])
    failed = {f for o in outs.values() for f in o["failed"]}
    assert sum(o["partial_reads"] for o in outs.values()) == 0
    n = len(committed)
    assert n > PROCESSES  # real concurrent progress
    # Every committed attempt got its own version: 1..n, no gap, no duplicate.
    assert [v for v, _ in committed] == list(range(1, n + 1))
    assert sum(1 for o in outs.values() if o["committed"]) >= 2  # several processes won

    async def verify() -> None:
        store = SqliteStore(db_path)
        try:
            latest = await store.read(KEY)
            assert latest is not None and latest.version == n
            assert latest.ranges == ((1, n + 1),)
            ids = [serde.decode_message(m).message_id for m in latest.messages or []]
            # Every committed message exactly once, in commit order; no failed attempt's message.
            assert ids == [mid for _, mid in committed]
            assert not failed & set(ids)
            for v in range(1, n + 1):
                rec = await store.read(KEY, v, with_messages=False)
                assert rec is not None and rec.version == v and rec.ranges == ((1, v + 1),)
            assert [h.version for h in await store.history(KEY, limit=3)] == [n, n - 1, n - 2]
        finally:
            await store.aclose()

    anyio.run(verify)
