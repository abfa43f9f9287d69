"""``tenxgraph serve`` from a config file in a fresh folder: refusals on one line with exit
code 2, and ``--workers`` (uvicorn's worker processes, each loading the graph)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ._harness import Server, make_folder

ROOT = Path(__file__).resolve().parents[2]


def _serve(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("JWT_SECRET_KEY", None)
    env.pop("JWT_ALGORITHM", None)
    return subprocess.run(
        [sys.executable, "-m", "tenxgraph.cli", "serve", *args],
        cwd=str(folder),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_no_config_file_is_a_usage_error(tmp_path: Path) -> None:
    proc = _serve(tmp_path)
    assert proc.returncode == 2
    assert "10xgraph.json" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_jwt_without_its_settings_is_refused_before_serving(tmp_path: Path) -> None:
    config = make_folder(tmp_path, auth="jwt")
    proc = _serve(tmp_path, "--config", str(config), "--port", "1")
    assert proc.returncode == 2
    assert "JWT_SECRET_KEY" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bad_auth_shape_is_refused(tmp_path: Path) -> None:
    config = make_folder(tmp_path, auth={"method": "custom", "path": "nomodule:Auth"})
    proc = _serve(tmp_path, "--config", str(config), "--port", "1")
    assert proc.returncode == 2 and "nomodule" in proc.stderr


@pytest.mark.slow
def test_workers_and_body_limit(tmp_path: Path) -> None:
    config = make_folder(tmp_path)
    srv = Server(
        config,
        {"TXG_STORE": "sqlite", "TXG_DB": str(tmp_path / "w.sqlite")},
        ["--workers", "2", "--max-body-bytes", "4000"],
    )
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as c:
            for i in range(6):
                msg = {"role": "user", "content": f"turn {i}", "message_id": f"m{i}"}
                r = c.post(
                    "/v1/graph/invoke", json={"messages": [msg], "config": {"thread_id": "w"}}
                )
                assert r.status_code == 200, r.text
            msgs = c.get("/v1/threads/w/messages").json()["data"]["messages"]
            assert len(msgs) == 24
            big = {"role": "user", "content": "x" * 5000, "message_id": "big"}
            r = c.post("/v1/graph/invoke", json={"messages": [big], "config": {"thread_id": "w"}})
            assert r.status_code == 413 and r.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"
            # chunked upload without Content-Length is cut off at the limit too
            chunks = iter([b'{"messages": [{"role": "user", "content": "', b"y" * 5000, b'"}]}'])
            r = c.post(
                "/v1/graph/invoke", content=chunks, headers={"content-type": "application/json"}
            )
            assert r.status_code == 413
    finally:
        srv.stop()
    assert srv.output().count("Application startup complete") == 2


def test_config_keys_the_server_does_not_implement_are_refused(tmp_path: Path) -> None:
    config = make_folder(tmp_path)
    import json

    data = json.loads(config.read_text())
    data["rate_limit"] = {"enabled": True, "requests": 10, "window": 60}
    config.write_text(json.dumps(data))
    proc = _serve(tmp_path, "--config", str(config), "--port", "1")
    assert proc.returncode == 2 and "rate_limit" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("recovery", [True, False], ids=["recovery", "no-recovery"])
def test_the_server_runs_submitted_background_runs(tmp_path: Path, recovery: bool) -> None:
    """Every API instance also runs the graph's recovery loop (issue 28): a run submitted to
    the server's store by another process completes with no worker running, unless the server
    was started with --no-recovery."""
    import anyio

    from tenxgraph.core.graph import StateGraph
    from tenxgraph.core.state import Message
    from tenxgraph.storage.checkpointer import SqliteCheckpointer
    from tenxgraph.utils import END

    db = tmp_path / "bg.sqlite"
    config = make_folder(tmp_path)
    srv = Server(
        config,
        {"TXG_STORE": "sqlite", "TXG_DB": str(db)},
        [] if recovery else ["--no-recovery"],
    )

    def noop(state: object) -> None:
        return None

    g = StateGraph()
    g.add_node("first", noop)
    g.set_entry_point("first")
    g.add_edge("first", END)

    async def submit_and_wait() -> tuple[str, list[str]]:
        cp = SqliteCheckpointer(str(db))
        app = g.compile(checkpointer=cp)
        cfg = {"thread_id": "bg-1", "user_id": "anonymous"}
        try:
            run = await app.asubmit({"messages": [Message.text_message("hello")]}, dict(cfg))
            with anyio.move_on_after(20):
                while (await app.aget_run(dict(cfg), run.run_id)).status not in (
                    "completed",
                    "error",
                ):
                    await anyio.sleep(0.1)
                    if not recovery and (await app.aget_run(dict(cfg), run.run_id)).status:
                        await anyio.sleep(3)  # give a recovery loop time to act
                        break
            status = (await app.aget_run(dict(cfg), run.run_id)).status
            state = await cp.aget_state(dict(cfg))
            texts = [] if state is None else [m.text() for m in state.context]
            return status, texts
        finally:
            await cp.aclose()

    try:
        status, texts = anyio.run(submit_and_wait)
    finally:
        srv.stop()
    if recovery:
        assert status == "completed"
        assert texts == ["hello", "first: hello", "second: hello", "third: hello"]
    else:
        assert status == "pending" and texts == []


def test_a_graph_module_that_fails_to_import_is_reported_in_one_line(tmp_path: Path) -> None:
    """The module's own import error is named in one error line, with no traceback."""
    (tmp_path / "broken.py").write_text("import module_that_is_not_installed_anywhere\n")
    (tmp_path / "10xgraph.json").write_text('{"agent": "broken:app"}')
    proc = _serve(tmp_path, "--config", str(tmp_path / "10xgraph.json"), "--port", "0")
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert "CONFIG_001" in errors[0] and "module_that_is_not_installed_anywhere" in errors[0]
    assert errors[1:] == ["ERROR:    Application startup failed. Exiting."]
