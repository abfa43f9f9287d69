"""``tenxgraph rotate-keys`` (a real subprocess) re-seals a Postgres store while turns run on
it: no turn fails, no compare-and-swap is lost, and afterwards every row is under the new key
(scanned by key id) and reads without the old one."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from typing import Any

import anyio
import pytest
from _echo_app import echo_app

from tenxgraph.storage.crypto import Keyring, key_id_of

pytestmark = [pytest.mark.anyio, pytest.mark.postgres, pytest.mark.slow]

K1, K2 = os.urandom(32), os.urandom(32)
THREADS = 8


async def test_rotate_keys_under_load(pg_dsn: str, pg_schema: str) -> None:
    pytest.importorskip("psycopg_pool")
    import psycopg

    from tenxgraph.storage.checkpointer import PgCheckpointer

    # every version is kept, so every row sealed under k1 is still there for the rotation
    old = PgCheckpointer(
        pg_dsn, schema=pg_schema, state_history_limit=None, cipher=Keyring({"k1": K1}, active="k1")
    )
    await old.asetup()
    app = echo_app(old)
    for t in range(THREADS):
        for i in range(6):
            await app.ainvoke({"messages": [f"t{t} q{i}"]}, {"thread_id": f"t{t}", "user_id": "u"})
    for t in range(THREADS):
        from tenxgraph.records import LedgerEntry

        await old.aledger_put(
            {"thread_id": f"t{t}", "user_id": "u"},
            LedgerEntry("k", "id", "tool", b'{"v": 1}', 1.0),
        )
    await old.aclose()

    # The application now runs with k2 active (k1 kept); rotate-keys runs beside it.
    new = PgCheckpointer(
        pg_dsn,
        schema=pg_schema,
        state_history_limit=None,
        cipher=Keyring({"k1": K1, "k2": K2}, active="k2"),
    )
    env = dict(
        os.environ,
        TENXGRAPH_KEYS=f"k1={base64.b64encode(K1).decode()},k2={base64.b64encode(K2).decode()}",
        TENXGRAPH_ACTIVE_KEY="k2",
        TENXGRAPH_KEYRING="tenxgraph.storage.crypto:keyring_from_env",
    )
    cmd = [
        sys.executable, "-m", "tenxgraph.cli", "rotate-keys", "--dsn", pg_dsn,
        "--schema", pg_schema, "--batch", "4", "--min-age", "0", "--json",
    ]  # fmt: skip
    failures: list[BaseException] = []
    turns = 0
    # polled (never waited on) by the turns below until it exits
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # noqa: ASYNC220
    try:
        app = echo_app(new)

        async def worker(t: int) -> None:
            nonlocal turns
            cfg = {"thread_id": f"t{t}", "user_id": "u"}
            i = 0
            while proc.poll() is None or i < 3:
                try:
                    await app.ainvoke({"messages": [f"load {i}"]}, dict(cfg))
                    turns += 1
                except BaseException as exc:  # noqa: BLE001 - every failure is counted
                    failures.append(exc)
                i += 1
                await anyio.sleep(0.01)

        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                for t in range(THREADS):
                    tg.start_soon(worker, t)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    assert failures == []
    assert turns >= 3 * THREADS
    report = json.loads(out)
    # every row written before the switch was re-sealed while the turns ran
    assert report["resealed"]["checkpoints"] == 6 * THREADS
    assert report["resealed"]["messages"] == 12 * THREADS
    assert report["resealed"]["tool_executions"] == THREADS
    print(f"turns during the rotation: {turns}; report: {report}")
    await new.aclose()

    kids: dict[Any, int] = {}
    with psycopg.connect(pg_dsn) as conn:
        for col, table in (
            ('"values"', "checkpoints"),
            ("data", "messages"),
            ("result", "tool_executions"),
        ):
            for (blob,) in conn.execute(f'SELECT {col} FROM "{pg_schema}".tenxgraph_{table}'):  # type: ignore[call-overload]
                kid = key_id_of(bytes(blob))
                kids[kid] = kids.get(kid, 0) + 1
    assert set(kids) == {"k2"}, kids

    only_new = PgCheckpointer(
        pg_dsn, schema=pg_schema, state_history_limit=None, cipher=Keyring({"k2": K2}, active="k2")
    )
    try:
        for t in range(THREADS):
            cfg = {"thread_id": f"t{t}", "user_id": "u"}
            state = await only_new.aget_state(dict(cfg))
            assert state.context[0].text() == f"t{t} q0"
            assert len(await only_new.aget_state_history(dict(cfg))) >= 6 + 3
            assert await only_new.aledger_get(dict(cfg), "k") is not None
    finally:
        await only_new.aclose()
