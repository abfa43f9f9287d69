"""Graph utilities: ``START``, ``END``, ``Command``, ``ResponseGranularity``, ``tool``,
``interrupt``."""

from __future__ import annotations

from typing import Any

from .command import Command
from .constants import END, START, ResponseGranularity

__all__ = ["END", "START", "Command", "ResponseGranularity", "interrupt", "pending_interrupt", "tool"]


def __getattr__(name: str) -> Any:
    if name == "tool":
        from .tool import tool

        return tool
    if name in ("interrupt", "pending_interrupt"):
        from . import interrupt as _interrupt

        return getattr(_interrupt, name)
    raise AttributeError(name)
