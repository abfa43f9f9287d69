"""The 10xGraph-compatibility tests: each module rebuilds, in its own words, what one area of
10xGraph's documentation promises, against the real stores. They reuse the graph-level
backends of ``tests/conformance`` (``graph_backends``: ``backend`` / ``sync_backend`` over
memory, SQLite, Postgres and Postgres + Redis)."""

from __future__ import annotations

import sys
from pathlib import Path

_CONFORMANCE = str(Path(__file__).resolve().parent.parent / "conformance")
if _CONFORMANCE not in sys.path:
    sys.path.insert(0, _CONFORMANCE)
