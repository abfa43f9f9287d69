"""What the background-runs page tells a user to import works in a fresh interpreter, and the
worker package sits above the core (nothing in core or storage imports it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LINES = [
    "from tenxgraph.core.runs import RunInfo\nassert 'status' in RunInfo.__dataclass_fields__",
    "from tenxgraph.core.exceptions import RunJoinTimeoutError\n"
    "assert issubclass(RunJoinTimeoutError, TimeoutError)\n"
    "assert RunJoinTimeoutError.default_code == 'RUN_JOIN_TIMEOUT_001'",
    "from tenxgraph.core.graph import StateGraph\n"
    "from tenxgraph.storage.checkpointer import InMemoryCheckpointer\n"
    "g = StateGraph()\ng.add_node('a', lambda state: None)\ng.set_entry_point('a')\n"
    "app = g.compile(checkpointer=InMemoryCheckpointer())\n"
    "assert callable(app.asubmit) and callable(app.recovery)",
    "from tenxgraph.worker import run_worker, worker_main",
    "from tenxgraph.cli import main\nimport contextlib, io\n"
    "out = io.StringIO()\n"
    "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
    "    main(['worker', '--help'])\n"
    "assert '--concurrency' in out.getvalue()",
]


@pytest.mark.parametrize("code", LINES)
def test_documented_names_work_in_a_fresh_interpreter(code: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_nothing_below_imports_the_worker() -> None:
    for folder in ("core", "storage", "models", "utils", "telemetry"):
        for path in (ROOT / "tenxgraph" / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "from tenxgraph.worker" not in text, path
            assert "import tenxgraph.worker" not in text, path
