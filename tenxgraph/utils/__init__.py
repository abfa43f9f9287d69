"""Graph utilities: ``START``, ``END``, ``Command``, ``ResponseGranularity``, ``tool``,
``interrupt``."""

from __future__ import annotations

from typing import Any

from .command import Command
from .constants import END, START, ResponseGranularity
from .interrupts import GraphInterrupt, Interrupt, interrupt, pending_interrupt, pending_interrupts

__all__ = ["END", "START", "Command", "GraphInterrupt", "Interrupt", "ResponseGranularity", "interrupt", "pending_interrupt",
           "pending_interrupts", "tool", "get_tool_metadata", "has_tool_decorator"]


def __getattr__(name: str) -> Any:
    if name in ("tool", "get_tool_metadata", "has_tool_decorator"):
        from . import tool as _tool_module

        return getattr(_tool_module, name)
    raise AttributeError(name)
