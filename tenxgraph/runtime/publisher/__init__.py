"""Event publishers: ``compile(publisher=...)`` sends each run's events to one.

tenxgraph provides the base class, the console publisher and the OpenTelemetry publisher;
10xGraph's bus and vendor publishers (Redis, Kafka, RabbitMQ, composite, Logfire, LangSmith) are not part of
tenxgraph (``docs/compat-10xgraph.md``).
"""

from __future__ import annotations

from .base_publisher import BasePublisher
from .console_publisher import ConsolePublisher
from .events import ContentType, Event, EventModel, EventType
from .otel_publisher import ObservabilityLevel, OtelPublisher, setup_tracing

__all__ = [
    "BasePublisher",
    "ConsolePublisher",
    "ContentType",
    "Event",
    "EventModel",
    "EventType",
    "ObservabilityLevel",
    "OtelPublisher",
    "setup_tracing",
]
