"""``tenxgraph.records``: the records the runtime and the stores exchange live in one neutral
module, imported by both, importing neither."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "tenxgraph"


def test_records_import_neither_the_runtime_nor_the_stores() -> None:
    code = (
        "import sys, tenxgraph.records as r; "
        "bad = sorted(m for m in sys.modules if m.startswith(('tenxgraph.core', "
        "'tenxgraph.storage'))); "
        "print(bad); "
        "assert {'ThreadKey', 'StoredCheckpoint', 'CheckpointWrite', 'LedgerEntry', "
        "'ThreadInfo', 'Loaded', 'DurableView', 'Range'} <= set(r.__all__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_the_runtime_takes_records_from_records_not_from_storage() -> None:
    pattern = re.compile(
        r"from tenxgraph\.storage\.base import|from tenxgraph\.storage\._diff import"
    )
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "core").rglob("*.py")
        if pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_storage_base_keeps_only_the_protocols() -> None:
    from tenxgraph.storage import base

    assert set(base.__all__) == {
        "CacheTier",
        "StoreTier",
        "report_skipped",
        "thread_info_from_row",
        "threads_from_rows",
    }
