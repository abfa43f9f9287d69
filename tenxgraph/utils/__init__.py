"""Graph utilities: ``START``, ``END``, ``Command``, ``ResponseGranularity``, ``tool``,
``interrupt``."""

from __future__ import annotations

from .command import Command
from .constants import END, START, ResponseGranularity
from .decorators import get_tool_metadata, has_tool_decorator, tool
from .interrupts import interrupt, pending_interrupt, pending_interrupts

__all__ = ["END", "START", "Command", "ResponseGranularity", "get_tool_metadata",
           "has_tool_decorator", "interrupt", "pending_interrupt", "pending_interrupts", "tool"]
