"""``ThreadInfo``, where 10xGraph keeps it (``tenxgraph.utils.thread_info``).

The record itself lives in ``tenxgraph.records``, the neutral module the runtime and
the stores share.
"""

from __future__ import annotations

from tenxgraph.records import ThreadInfo

__all__ = ["ThreadInfo"]
