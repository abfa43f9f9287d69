"""``ThreadInfo``, where 10xGraph keeps it (``tenxgraph.utils.thread_info``).

The record itself lives in ``tenxgraph.storage.base``, the neutral module the runtime and
the stores share.
"""

from __future__ import annotations

from tenxgraph.storage.base import ThreadInfo

__all__ = ["ThreadInfo"]
