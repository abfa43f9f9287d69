"""Publish a run's events to the graph's publisher (``compile(publisher=...)``).

A publisher failure is logged (warning) and never reaches the run: observability must not
change what a run does or stores.
"""

from __future__ import annotations

import logging
from typing import Any

from tenxgraph.runtime.publisher.events import ContentType, Event, EventModel, EventType

__all__ = ["publish_event"]

_log = logging.getLogger(__name__)


async def publish_event(
    publisher: Any,
    event: Event,
    event_type: EventType,
    thread_id: str,
    run_id: str,
    node: str | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """Build one ``EventModel`` and await ``publisher.publish`` with it (no-op without a
    publisher).

    Args:
        publisher: a ``BasePublisher`` or ``None``.
        event: the source (graph or node).
        event_type: the phase.
        thread_id: the run's thread.
        run_id: the run.
        node: the node name, for node events.
        data: the payload (small dict, no message contents).
    """
    if publisher is None:
        return
    model = EventModel(
        event=event,
        event_type=event_type,
        content_type=ContentType.ERROR if event_type is EventType.ERROR else ContentType.STATE,
        node_name=node,
        data=data or {},
        thread_id=thread_id,
        run_id=run_id,
    )
    try:
        await publisher.publish(model)
    except Exception:  # noqa: BLE001 - a publisher must not break the run
        _log.warning(
            "publisher %s failed on %s/%s",
            type(publisher).__name__,
            event,
            event_type,
            exc_info=True,
        )
