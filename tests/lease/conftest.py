"""The run-lease tests reuse the graph-level backends of ``tests/conformance``
(``graph_backends``: the ``backend`` / ``sync_backend`` fixtures, ``Backend.spec()`` for a child
process on the same data)."""

from __future__ import annotations

import sys
from pathlib import Path

_CONFORMANCE = str(Path(__file__).resolve().parent.parent / "conformance")
if _CONFORMANCE not in sys.path:
    sys.path.insert(0, _CONFORMANCE)
