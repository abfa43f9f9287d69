"""Graph sentinels and response granularity."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["END", "START", "ResponseGranularity"]

#: The virtual node every run starts from (``"__start__"``).
START = "__start__"
#: The virtual node that ends a run (``"__end__"``).
END = "__end__"


class ResponseGranularity(StrEnum):
    """How much ``invoke`` returns.

    ``LOW``: ``{"messages"}`` (the input messages and those produced by this run).
    ``PARTIAL``: adds ``"context"`` (the whole message list) and ``"summary"``.
    ``FULL``: adds ``"state"`` (the final state object).
    """

    LOW = "low"
    PARTIAL = "partial"
    FULL = "full"
