"""Publish a run's events to the graph's publisher (``compile(publisher=...)``).

A publisher failure never reaches the run: observability must not change what a run does or
stores. The first failure of a publisher in a run is logged as a warning with its traceback;
the later ones of that run (a broken publisher fails on every streamed token) are logged at
debug level with their count.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Any

from tenxgraph.runtime.publisher.events import ContentType, Event, EventModel, EventType

__all__ = ["publish_event", "publish_in_run", "run_publisher"]

_log = logging.getLogger(__name__)

#: failures so far per ``(id(publisher), run_id)``, the most recent runs only
_failures: OrderedDict[tuple[int, str], int] = OrderedDict()
_FAILURES_KEPT = 4096


def _count_failure(publisher: Any, run_id: str) -> int:
    """Record one failure of ``publisher`` in run ``run_id``; returns how many so far."""
    key = (id(publisher), run_id)
    n = _failures.pop(key, 0) + 1
    _failures[key] = n
    while len(_failures) > _FAILURES_KEPT:
        _failures.popitem(last=False)
    return n


async def publish_event(
    publisher: Any,
    event: Event,
    event_type: EventType,
    thread_id: str,
    run_id: str,
    node: str | None = None,
    data: dict[str, Any] | None = None,
    content_type: ContentType | None = None,
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
        content_type: the payload's type (default ``ERROR`` for errors, else ``STATE``).
    """
    if publisher is None:
        return
    model = EventModel(
        event=event,
        event_type=event_type,
        content_type=content_type
        or (ContentType.ERROR if event_type is EventType.ERROR else ContentType.STATE),
        node_name=node,
        data=data or {},
        thread_id=thread_id,
        run_id=run_id,
    )
    try:
        await publisher.publish(model)
    except Exception as exc:  # noqa: BLE001 - a publisher must not break the run
        n = _count_failure(publisher, run_id)
        if n == 1:
            _log.warning(
                "publisher %s failed on %s/%s (run %s); later failures of this run are logged "
                "at debug level",
                type(publisher).__name__,
                event,
                event_type,
                run_id,
                exc_info=True,
            )
        else:
            _log.debug(
                "publisher %s failed again on %s/%s (run %s, failure %d): %s",
                type(publisher).__name__,
                event,
                event_type,
                run_id,
                n,
                type(exc).__name__,
            )


def run_publisher() -> Any:
    """The publisher of the graph running the current node (``None`` outside a run or
    without one): a cheap test before building an event's data."""
    from tenxgraph.core._context import current_run

    run = current_run()
    graph = getattr(run, "graph", None)
    return getattr(graph, "publisher", None)


async def publish_in_run(
    event: Event,
    event_type: EventType,
    content_type: ContentType | None = None,
    **data: Any,
) -> None:
    """Publish an event of the node running now (``LLM_CALL``, ``TOOL_EXECUTION``,
    ``STREAMING``) to its graph's publisher; nothing outside a run or without a publisher.

    Args:
        event: the source.
        event_type: the phase.
        content_type: the payload's type.
        **data: the payload (small values, no message contents).
    """
    from tenxgraph.core._context import current_run

    run = current_run()
    publisher = getattr(getattr(run, "graph", None), "publisher", None)
    if publisher is None or run is None:
        return
    await publish_event(
        publisher,
        event,
        event_type,
        str(run.config.get("thread_id")),
        str(run.config.get("run_id")),
        run.node or None,
        data,
        content_type,
    )
