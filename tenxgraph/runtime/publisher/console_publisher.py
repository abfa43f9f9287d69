"""``ConsolePublisher``: writes each event as one line, for local debugging."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

from tenxgraph.core.exceptions import ConfigError

from .base_publisher import BasePublisher
from .events import EventModel

__all__ = ["ConsolePublisher"]

_LOG = logging.getLogger("tenxgraph.publisher")


class ConsolePublisher(BasePublisher):
    """A publisher that prints every event, as 10xGraph's debugging publisher does.

    Events carry no message contents (see ``EventModel``), so the lines are safe to show.
    Not meant for production: nothing is buffered or retried.

    Args:
        config (dict | None): ``format`` is ``"json"`` (default: one JSON object per line) or
            ``"text"`` (``event.event_type node_name data``); ``use_logger`` (bool, default
            False) sends lines to the ``tenxgraph.publisher`` logger at INFO instead of
            stdout.
        stream (TextIO | None): where lines go when not logging (default: ``sys.stdout`` at
            publish time).

    Raises:
        ConfigError: ``error_code="PUBLISHER_CONFIG"`` for an unknown ``format``.
    """

    def __init__(self, config: dict[str, Any] | None = None, stream: TextIO | None = None) -> None:
        super().__init__(config)
        fmt = self.config.get("format", "json")
        if fmt not in ("json", "text"):
            raise ConfigError(
                f"ConsolePublisher format must be 'json' or 'text', got {fmt!r}",
                error_code="PUBLISHER_CONFIG",
                context={"format": str(fmt)},
            )
        self.format: str = fmt
        self.use_logger: bool = bool(self.config.get("use_logger", False))
        self._stream = stream

    def render(self, event: EventModel) -> str:
        """The line written for ``event``.

        Args:
            event: the event.

        Returns:
            str: a JSON object (``format="json"``) or a short text line.
        """
        if self.format == "json":
            return event.model_dump_json()
        node = f" {event.node_name}" if event.node_name else ""
        return f"{event.event}.{event.event_type}{node} {event.data}"

    async def publish(self, event: EventModel) -> None:
        """Write one event line.

        Args:
            event: the event.

        Raises:
            RuntimeError: when the publisher is closed.
        """
        if self.is_closed:
            raise RuntimeError("ConsolePublisher is closed")
        line = self.render(event)
        if self.use_logger:
            _LOG.info("%s", line)
            return
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write(line + "\n")
        stream.flush()

    async def close(self) -> None:
        """Mark the publisher closed (there is nothing to release)."""
        self._is_closed = True

    def sync_close(self) -> None:
        """``close`` for code without an event loop."""
        self._is_closed = True
