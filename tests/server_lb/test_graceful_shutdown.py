"""SIGTERM drains a server process: the run in flight stops at its next node boundary, its
lease is released (the next run of the thread does not wait for it to lapse), the request that
was cut answers 503 + Retry-After, and the re-sent turn finishes the run once.

Real uvicorn processes on Postgres + Redis; the graph is ``_lb_graph`` (two nodes, each
sleeping ``LB_NODE_S``).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from _lb_cluster import HERE, ROOT, free_port, wait_http_ok

from tenxgraph.core.exceptions import ThreadBusyError
from tenxgraph.core.state import Message

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def lb_env(
    pg_dsn: str, pg_schema: str, redis_url: str, redis_prefix: str, monkeypatch: Any
) -> dict[str, str]:
    """The graph's settings (also set in this process, for the in-process checks)."""
    env = {
        "LB_PG_DSN": pg_dsn,
        "LB_PG_SCHEMA": pg_schema,
        "LB_REDIS_URL": redis_url,
        "LB_REDIS_PREFIX": redis_prefix,
        "LB_NODE_S": "2.5",
        # Long enough that waiting for a lapse could not go unnoticed (reject would refuse).
        "LB_LEASE_TTL_S": "60",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _start_server(
    env: dict[str, str], port: int, workers: int, folder: Path
) -> subprocess.Popen[bytes]:
    """``tenxgraph serve`` in a new process, on the test graph."""
    cfg = folder / "10xgraph.json"
    cfg.write_text(json.dumps({"agent": "_lb_graph:make_graph"}), encoding="utf-8")
    full = dict(os.environ)
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT)])
    with open(folder / "server.log", "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tenxgraph.cli",
                "serve",
                "--config",
                str(cfg),
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--graceful-timeout",
                "20",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=full,
            cwd=folder,
            start_new_session=True,
        )


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_stops_the_run_at_a_node_boundary_and_releases_its_lease(
    lb_env: dict[str, str], tmp_path: Path, workers: int
) -> None:
    """The SIGTERM goes to the server's main process only, as an orchestrator sends it; with
    ``--workers 2`` uvicorn's supervisor passes it on to its workers."""
    import _lb_graph

    port = free_port()
    log = tmp_path / "server.log"
    proc = _start_server(lb_env, port, workers, tmp_path)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/ping", 60, proc)
        body = {
            "messages": [{"message_id": "m1", "role": "user", "content": "hello"}],
            "config": {"thread_id": f"t-drain-{workers}"},
        }
        answer: dict[str, Any] = {}

        def call() -> None:
            r = httpx.post(f"http://127.0.0.1:{port}/v1/graph/invoke", json=body, timeout=60)
            answer["status"] = r.status_code
            answer["headers"] = dict(r.headers)
            answer["json"] = r.json()

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(1.0)  # inside the first node (2.5 s)
        os.kill(proc.pid, signal.SIGTERM)
        caller.join(30)
        assert not caller.is_alive()
        rc = proc.wait(30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    text = log.read_text(errors="replace")
    assert answer["status"] == 503, (answer, text[-3000:])
    assert answer["headers"]["retry-after"] == "1"
    assert answer["json"]["error"]["code"] == "SERVER_SHUTTING_DOWN_001"
    assert rc in (0, -signal.SIGTERM), text[-3000:]

    async def check() -> None:
        app = _lb_graph.build()
        try:
            cfg = {"thread_id": f"t-drain-{workers}"}
            state = await app.aget_state(dict(cfg))
            assert state is not None
            # The node in flight finished and was checkpointed; the run stopped there.
            assert str(state.execution_meta.status) == "stopped"
            assert [m.text() for m in state.context] == ["hello", "think:hello"]
            # The lease is free: a run with "reject" would be refused at once by a held lease
            # (its expiry is 60 s away).
            again = Message.text_message("hello", message_id="m1")
            result = await app.ainvoke(
                {"messages": [again]}, {**cfg, "multitask_strategy": "reject"}
            )
            assert result.get("already_processed") is True
            state = await app.aget_state(dict(cfg))
            assert state is not None
            assert str(state.execution_meta.status) == "completed"
            assert [m.text() for m in state.context] == [
                "hello",
                "think:hello",
                "answer:hello",
            ]
        finally:
            await app.aclose()

    try:
        asyncio.run(check())
    except ThreadBusyError as exc:  # pragma: no cover - the failure this test is about
        raise AssertionError(f"the drained run kept its lease: {exc}") from exc


def test_sigterm_cuts_a_stream_which_resumes_on_another_instance(
    lb_env: dict[str, str], tmp_path: Path
) -> None:
    """A stream under way when the drain begins is cut (no ``stopped`` line reaches the
    client); resumed with ``Last-Event-ID`` on a second instance, it gets the rest of the turn,
    each message once, and the run finishes there without waiting for a lease to lapse."""
    import _lb_graph

    port_a, port_b = free_port(), free_port()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    proc_a = _start_server(lb_env, port_a, 1, tmp_path / "a")
    proc_b = _start_server(lb_env, port_b, 1, tmp_path / "b")
    tid = "t-drain-stream"
    body = {
        "messages": [{"message_id": "s1", "role": "user", "content": "hi"}],
        "config": {"thread_id": tid},
    }
    lines: list[dict[str, Any]] = []
    try:
        wait_http_ok(f"http://127.0.0.1:{port_a}/ping", 60, proc_a)
        wait_http_ok(f"http://127.0.0.1:{port_b}/ping", 60, proc_b)

        def read_a() -> None:
            try:
                with httpx.stream(
                    "POST", f"http://127.0.0.1:{port_a}/v1/graph/stream", json=body, timeout=60
                ) as r:
                    for raw in r.iter_lines():
                        if raw.strip():
                            lines.append(json.loads(raw))
            except httpx.TransportError:
                lines.append({"broken": True})

        reader = threading.Thread(target=read_a)
        reader.start()
        time.sleep(1.0)  # inside the first node (2.5 s)
        os.kill(proc_a.pid, signal.SIGTERM)
        reader.join(30)
        assert not reader.is_alive()
        proc_a.wait(30)
        log_a = (tmp_path / "a" / "server.log").read_text(errors="replace")
        assert lines and lines[-1] == {"broken": True}, (lines, log_a[-3000:])
        got = lines[:-1]
        assert all((ln.get("data") or {}).get("status") != "stopped" for ln in got), got
        # At most the input's line was sent before the drain began (the server sends a line
        # when the next one is ready); nothing of the answer.
        assert [ln["message"]["message_id"] for ln in got if ln.get("message")] in ([], ["s1"])

        async def lease_free() -> bool:
            app = _lb_graph.build()
            try:
                grant = await app.checkpointer.alease_peek(
                    {"thread_id": tid, "user_id": "anonymous"}, "probe"
                )
                return grant.expires_in_s == 0.0
            finally:
                await app.aclose()

        # The drained run released its lease (its expiry, 60 s, would still be far off).
        assert asyncio.run(lease_free())

        # The cursor of the last line read, or the one before line 1 (docs: deploy page).
        cursor = got[-1]["metadata"]["event_id"] if got else "0:s1"
        with httpx.stream(
            "POST",
            f"http://127.0.0.1:{port_b}/v1/graph/stream",
            json=body,
            headers={"Last-Event-ID": cursor},
            timeout=60,
        ) as r:
            assert r.status_code == 200
            rest = [json.loads(raw) for raw in r.iter_lines() if raw.strip()]
    finally:
        for proc in (proc_a, proc_b):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
    seqs = [int(ln["metadata"]["event_id"].partition(":")[0]) for ln in got + rest]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    texts = [ln["message"]["content"][0]["text"] for ln in got + rest if ln.get("message")]
    assert texts in (["hi", "think:hi", "answer:hi"], ["think:hi", "answer:hi"]), texts
    assert rest[-1]["event"] == "state" and rest[-1]["data"]["status"] == "completed", rest[-1]
