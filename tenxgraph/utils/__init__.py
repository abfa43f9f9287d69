"""Graph utilities: ``START``, ``END``, ``Command``, ``ResponseGranularity``, ``tool``,
``interrupt``."""

from __future__ import annotations

from typing import Any

from .command import Command
from .constants import END, START, ResponseGranularity
from .interrupts import interrupt, pending_interrupt, pending_interrupts

__all__ = ["END", "START", "Command", "ResponseGranularity", "interrupt", "pending_interrupt",
           "pending_interrupts", "tool"]


def __getattr__(name: str) -> Any:
    if name == "tool":
        from .tool import tool

        return tool
    raise AttributeError(name)
