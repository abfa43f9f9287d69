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
def test_workers_serve_one_sqlite_store(tmp_path: Path) -> None:
    config = make_folder(tmp_path)
    srv = Server(
        config, {"TXG_STORE": "sqlite", "TXG_DB": str(tmp_path / "w.sqlite")}, ["--workers", "2"]
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
    finally:
        srv.stop()
    assert srv.output().count("Application startup complete") == 2
