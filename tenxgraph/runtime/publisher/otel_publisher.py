"""``OtelPublisher``: a graph's published events as OpenTelemetry spans.

A ``GRAPH_EXECUTION`` start opens a span named ``tenxgraph.publisher.run`` and each
``NODE_EXECUTION`` start a child ``tenxgraph.publisher.node``; the matching end, error or
interrupted event closes it (status ERROR with ``error.type`` on errors). The spans go to the
given tracer, or the global provider's ``tenxgraph`` tracer. They are separate from tenxgraph's
built-in spans (``docs/telemetry.md``), which need no publisher; use this one to send a graph's
runs to a tracer of their own.
"""

from __future__ import annotations

import enum
import json
import logging
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from tenxgraph.core.exceptions import GraphError
from tenxgraph.telemetry import ATTR, INSTRUMENTATION_NAME

from .base_publisher import BasePublisher
from .events import Event, EventModel, EventType

__all__ = [
    "ATTR_DATA",
    "ATTR_EVENT_ID",
    "ObservabilityLevel",
    "OtelPublisher",
    "SPAN_NODE",
    "SPAN_RUN",
    "setup_tracing",
]

_log = logging.getLogger(__name__)

#: Span names of the publisher (``docs/telemetry.md``).
SPAN_RUN = "tenxgraph.publisher.run"
SPAN_NODE = "tenxgraph.publisher.node"
#: Attribute names of the publisher's spans (besides ``tenxgraph.thread.id``,
#: ``tenxgraph.run.id``, ``tenxgraph.node.name``, ``tenxgraph.step``, ``error.type``).
ATTR_EVENT_ID = "tenxgraph.publisher.event_id"
ATTR_DATA = "tenxgraph.publisher.data"

_CLOSING = (EventType.END, EventType.ERROR, EventType.INTERRUPTED)


class ObservabilityLevel(enum.StrEnum):
    """How much lands on the spans: ``SPANS`` structure and timing only; ``STANDARD`` (the
    default) adds thread id, run id and step; ``FULL`` adds each event's ``data`` as JSON."""

    SPANS = "spans"
    STANDARD = "standard"
    FULL = "full"


class OtelPublisher(BasePublisher):
    """Turns a graph's events into OpenTelemetry spans.

    Args:
        tracer (Tracer | None): where the spans go; default the global provider's tracer.
        level (ObservabilityLevel): span detail (default ``STANDARD``).
        config (dict | None): kept as ``self.config``.

    Raises:
        GraphError: ``GRAPH_001`` when ``level`` is not an ``ObservabilityLevel`` (or one of
            its values).
    """

    def __init__(
        self,
        tracer: trace.Tracer | None = None,
        level: ObservabilityLevel | str = ObservabilityLevel.STANDARD,
        config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(config)
        try:
            self.level = ObservabilityLevel(level)
        except ValueError:
            raise GraphError(
                f"level must be one of {[lv.value for lv in ObservabilityLevel]}, got {level!r}",
                error_code="GRAPH_001",
                context={"argument": "level"},
            ) from None
        self._tracer = tracer
        self._open: dict[tuple[str | None, str | None], Span] = {}

    @property
    def tracer(self) -> trace.Tracer:
        """The tracer in use."""
        return self._tracer or trace.get_tracer(INSTRUMENTATION_NAME)

    def _attributes(self, event: EventModel) -> dict[str, Any]:
        attrs: dict[str, Any] = {ATTR_EVENT_ID: event.event_id}
        if event.node_name is not None:
            attrs[ATTR.NODE] = event.node_name
        if self.level is ObservabilityLevel.SPANS:
            return attrs
        if event.thread_id is not None:
            attrs[ATTR.THREAD_ID] = event.thread_id
        if event.run_id is not None:
            attrs[ATTR.RUN_ID] = event.run_id
        step = event.data.get("step") if isinstance(event.data, dict) else None
        if isinstance(step, int):
            attrs[ATTR.STEP] = step
        if self.level is ObservabilityLevel.FULL and event.data is not None:
            attrs[ATTR_DATA] = json.dumps(event.data, default=str)
        return attrs

    async def publish(self, event: EventModel) -> Span | None:
        """Open or close the span of ``event``'s run or node.

        Args:
            event: a ``GRAPH_EXECUTION`` or ``NODE_EXECUTION`` event (others are ignored).

        Returns:
            The span opened or closed, or ``None`` when the event maps to none.

        Raises:
            RuntimeError: when the publisher is closed.
        """
        if self._is_closed:
            raise RuntimeError("Cannot publish to a closed publisher")
        if event.event not in (Event.GRAPH_EXECUTION, Event.NODE_EXECUTION):
            return None
        is_node = event.event is Event.NODE_EXECUTION
        key = (event.run_id, event.node_name if is_node else None)
        span: Span | None
        if event.event_type is EventType.START:
            parent = self._open.get((event.run_id, None)) if is_node else None
            ctx = trace.set_span_in_context(parent) if parent is not None else None
            span = self.tracer.start_span(
                SPAN_NODE if is_node else SPAN_RUN, context=ctx, attributes=self._attributes(event)
            )
            self._open[key] = span
            return span
        if event.event_type in _CLOSING:
            span = self._open.pop(key, None)
            if span is None:
                return None
            if event.event_type is EventType.ERROR:
                error = event.data.get("error_type") if isinstance(event.data, dict) else None
                span.set_attribute(ATTR.ERROR_TYPE, str(error or "error"))
                span.set_status(Status(StatusCode.ERROR))
            elif event.event_type is EventType.INTERRUPTED:
                span.add_event("tenxgraph.publisher.interrupted")
            if self.level is ObservabilityLevel.FULL and event.data is not None:
                span.set_attribute(ATTR_DATA, json.dumps(event.data, default=str))
            span.end()
            return span
        return None

    async def close(self) -> None:
        """End any span still open (a run cut short) and refuse further events."""
        self.sync_close()

    def sync_close(self) -> None:
        """``close`` without an event loop."""
        if self._is_closed:
            return
        self._is_closed = True
        for span in self._open.values():
            span.end()
        self._open.clear()


def setup_tracing(
    graph: Any,
    tracer: trace.Tracer | None = None,
    level: ObservabilityLevel | str = ObservabilityLevel.STANDARD,
) -> OtelPublisher:
    """Attach a new ``OtelPublisher`` to a ``StateGraph`` (before ``compile()``).

    Args:
        graph: the ``StateGraph``; graphs compiled from it afterwards publish to the new
            publisher (unless ``compile(publisher=...)`` names another).
        tracer: as for ``OtelPublisher``.
        level: as for ``OtelPublisher``.

    Returns:
        The publisher attached.

    Raises:
        GraphError: ``GRAPH_001`` when ``graph`` is not a ``StateGraph`` or ``level`` is bad.
    """
    # A graph builder is recognised by what this function uses of it (its publisher slot, set
    # before compile()), not by importing StateGraph: core.graph imports this package.
    if not (
        hasattr(graph, "_publisher")
        and callable(getattr(graph, "add_node", None))
        and callable(getattr(graph, "compile", None))
    ):
        raise GraphError(
            f"setup_tracing() takes a StateGraph, got {type(graph).__name__}",
            error_code="GRAPH_001",
            context={"argument": "graph"},
        )
    publisher = OtelPublisher(tracer=tracer, level=level)
    graph._publisher = publisher  # noqa: SLF001 - 10xGraph's documented attribute
    return publisher
