"""Checkpointers: ``InMemoryCheckpointer`` (default), ``SqliteCheckpointer``, ``PgCheckpointer``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import ADMIN_SCOPE, BaseCheckpointer, Loaded, StateSnapshot

if TYPE_CHECKING:  # type checkers see the classes; at run time they load on first use
    from .memory import InMemoryCheckpointer
    from .postgres import PgCheckpointer
    from .sqlite import SqliteCheckpointer

__all__ = [
    "ADMIN_SCOPE",
    "BaseCheckpointer",
    "InMemoryCheckpointer",
    "Loaded",
    "PgCheckpointer",
    "SqliteCheckpointer",
    "StateSnapshot",
]


def __getattr__(name: str) -> Any:
    # Backends import their tiers (and drivers) only when asked for.
    if name == "InMemoryCheckpointer":
        from .memory import InMemoryCheckpointer

        return InMemoryCheckpointer
    if name == "SqliteCheckpointer":
        from .sqlite import SqliteCheckpointer

        return SqliteCheckpointer
    if name == "PgCheckpointer":
        from .postgres import PgCheckpointer

        return PgCheckpointer
    raise AttributeError(name)
