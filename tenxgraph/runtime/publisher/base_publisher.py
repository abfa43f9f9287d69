"""``BasePublisher``: what a graph calls to publish its events."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from .events import EventModel

__all__ = ["BasePublisher"]


class BasePublisher(ABC):
    """Base of every publisher.

    A graph awaits ``publish`` for each event of a run (see ``events``); an exception from it
    is logged and never fails the run. Use it as an async context manager to close it.

    Args:
        config (dict | None): the publisher's settings, kept as ``self.config``.
    """

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config: dict[str, Any] = dict(config or {})
        self._is_closed = False

    @property
    def is_closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._is_closed

    @abstractmethod
    async def publish(self, event: EventModel) -> Any:
        """Publish one event.

        Args:
            event: the event.

        Returns:
            Whatever the transport answers (unused by the graph).

        Raises:
            RuntimeError: when the publisher is closed.
        """

    @abstractmethod
    async def close(self) -> None:
        """Release the publisher's resources; a second call does nothing."""

    @abstractmethod
    def sync_close(self) -> None:
        """``close`` for code without an event loop."""

    async def __aenter__(self) -> BasePublisher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
