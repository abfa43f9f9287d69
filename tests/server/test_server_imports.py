"""The server package's documented imports work in a fresh interpreter, and imports run one
way: nothing below ``tenxgraph.server`` imports it (the CLI only when ``serve`` runs)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_documented_imports_in_a_fresh_interpreter() -> None:
    out = _run(
        "from tenxgraph.server import BaseAuth, Credentials, JwtAuth, create_app, "
        "DEFAULT_MAX_BODY_BYTES\n"
        "from tenxgraph.server.app import app_from_config, lifespan\n"
        "print('ok' if callable(create_app) and DEFAULT_MAX_BODY_BYTES == 10 * 1024 * 1024 else 'no')"
    )
    assert out == "ok"


def test_lower_layers_and_the_cli_do_not_import_the_server() -> None:
    out = _run(
        "import sys\n"
        "import tenxgraph, tenxgraph.core.graph, tenxgraph.storage.checkpointer, tenxgraph.cli\n"
        "print(sorted(m for m in sys.modules if m.startswith(('tenxgraph.server', 'starlette', 'uvicorn'))))"
    )
    assert out == "[]"


def test_no_module_below_the_server_imports_it() -> None:
    allowed = {ROOT / "tenxgraph" / "cli" / "serve.py"}
    offenders = []
    for path in (ROOT / "tenxgraph").rglob("*.py"):
        if "server" in path.relative_to(ROOT / "tenxgraph").parts or path in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "tenxgraph.server" or n.startswith("tenxgraph.server.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
