"""What the run-lease page tells a user to write works in a fresh interpreter (DESIGN: a
user's first line is a test)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LINES = [
    "from tenxgraph.core.exceptions import ThreadBusyError, StaleStateError\n"
    "assert issubclass(ThreadBusyError, StaleStateError)\n"
    "assert ThreadBusyError.default_code == 'STORAGE_BUSY_001'",
    "from tenxgraph.storage.checkpointer import InMemoryCheckpointer\n"
    "cp = InMemoryCheckpointer(multitask_strategy='enqueue', lease_ttl_s=5.0,"
    " lease_renew_s=2.0, enqueue_timeout_s=300.0)\n"
    "assert cp.multitask_strategy == 'enqueue'",
    "from tenxgraph.storage.checkpointer import PgCheckpointer\n"
    "cp = PgCheckpointer('postgresql://u@127.0.0.1:1/db', multitask_strategy='reject')\n"
    "assert cp.multitask_strategy == 'reject'",
]


@pytest.mark.parametrize("code", LINES)
def test_documented_lease_names_work_in_a_fresh_interpreter(code: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
