"""Graph sentinels and response granularity."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["END", "START", "ResponseGranularity"]

START = "__start__"
"""The virtual node every run starts from (``"__start__"``): ``add_edge(START, "first")``."""
END = "__end__"
"""The virtual node that ends a run (``"__end__"``): ``add_edge("last", END)``."""


class ResponseGranularity(StrEnum):
    """How much ``invoke`` returns.

    ``LOW``: ``{"messages"}`` (the input messages and those produced by this run).
    ``PARTIAL``: adds ``"context"`` (the whole message list) and ``"summary"``.
    ``FULL``: adds ``"state"`` (the final state object).
    """

    LOW = "low"
    PARTIAL = "partial"
    FULL = "full"
