"""The compat tests reconstruct behaviour documented by 10xGraph and run it on every store
through the graph-level backends of ``tests/conformance`` (``graph_backends``)."""

from __future__ import annotations

import sys
from pathlib import Path

_CONFORMANCE = str(Path(__file__).resolve().parent.parent / "conformance")
if _CONFORMANCE not in sys.path:
    sys.path.insert(0, _CONFORMANCE)
