"""OpenTelemetry tracing and metrics for every tier, through ``opentelemetry-api`` only.

The application chooses the SDK and exporter; without one, the API's no-op tracer and meter make
every call here nearly free. Span and attribute names are constants (below) so that the docs
page ``docs/telemetry.md`` and the code cannot drift. Names follow the OpenTelemetry semantic
conventions for database clients (``db.system.name``, ``db.operation.name``, ``db.namespace``,
``server.address``, ``server.port``, ``error.type``; span kind CLIENT for Postgres and Redis,
INTERNAL for in-process tiers) plus a ``tenxgraph.*`` namespace.

Never recorded: message contents, tool arguments or results, raw ``user_id`` (only a salted
digest, :func:`user_digest`), passwords.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

__all__ = [
    "ATTR",
    "EVENT",
    "METRIC",
    "SPAN",
    "SpanKind",
    "counter",
    "histogram",
    "record_error",
    "span",
    "tracer",
    "user_digest",
]

INSTRUMENTATION_NAME = "tenxgraph"


class SPAN:
    """Span names."""

    RUN = "tenxgraph.run"  # one per invoke/ainvoke/stream
    NODE = "tenxgraph.node"  # one per node execution
    CHECKPOINT_READ = "tenxgraph.checkpoint.read"  # per tier
    CHECKPOINT_WRITE = "tenxgraph.checkpoint.write"  # per tier
    LEDGER = "tenxgraph.ledger"  # ledger read/write per tool call
    TOOL = "execute_tool"  # GenAI convention (development status)
    AGENT = "invoke_agent"  # GenAI convention (development status)
    SETUP = "tenxgraph.setup"


class ATTR:
    """Attribute names (OpenTelemetry conventions first, then ``tenxgraph.*``)."""

    DB_SYSTEM = "db.system.name"
    DB_OPERATION = "db.operation.name"
    DB_NAMESPACE = "db.namespace"
    SERVER_ADDRESS = "server.address"
    SERVER_PORT = "server.port"
    ERROR_TYPE = "error.type"
    THREAD_ID = "tenxgraph.thread.id"
    USER_DIGEST = "tenxgraph.user.digest"
    RUN_ID = "tenxgraph.run.id"
    NODE = "tenxgraph.node.name"
    STEP = "tenxgraph.step"
    VERSION = "tenxgraph.checkpoint.version"
    TIER = "tenxgraph.cache.tier"
    HIT = "tenxgraph.cache.hit"
    BYTES = "tenxgraph.checkpoint.bytes"
    MESSAGES_WRITTEN = "tenxgraph.checkpoint.messages_written"
    ERROR_CODE = "tenxgraph.error.code"
    GENAI_OPERATION = "gen_ai.operation.name"
    GENAI_REQUEST_MODEL = "gen_ai.request.model"
    TOOL_NAME = "gen_ai.tool.name"
    TOOL_CALL_ID = "gen_ai.tool.call.id"
    REPLAYED = "tenxgraph.node.replayed"


class EVENT:
    """Span event names."""

    CONFLICT = "tenxgraph.conflict"  # attrs: expected_version, current_version
    LEDGER_HIT = "tenxgraph.ledger.hit"  # attrs: tool name, tool_call_id
    LEDGER_READ_FAILED = "tenxgraph.ledger.read_failed"
    CACHE_FAILURE = "tenxgraph.cache.failure"  # attrs: tier, error.type
    CACHE_INVALIDATED = "tenxgraph.cache.invalidated"
    RESUME = "tenxgraph.run.resume"


class METRIC:
    """Metric instrument names."""

    CHECKPOINTS = "tenxgraph.checkpoints"  # counter, {checkpoint}
    WRITE_DURATION = "tenxgraph.checkpoint.write.duration"  # histogram, s
    CONFLICTS = "tenxgraph.conflicts"  # counter
    CACHE_HITS = "tenxgraph.cache.hits"  # counter, attr tier
    CACHE_MISSES = "tenxgraph.cache.misses"  # counter, attr tier
    LEDGER_HITS = "tenxgraph.ledger.hits"  # counter
    REPLAYED_NODES = "tenxgraph.nodes.replayed"  # counter


def tracer() -> trace.Tracer:
    """The tenxgraph tracer from the globally configured provider (no-op without an SDK)."""
    return trace.get_tracer(INSTRUMENTATION_NAME)


_instruments: dict[str, Any] = {}


def counter(name: str, unit: str = "1", description: str = "") -> metrics.Counter:
    """A cached counter instrument named ``name`` (see :class:`METRIC`)."""
    inst = _instruments.get(name)
    if inst is None:
        inst = metrics.get_meter(INSTRUMENTATION_NAME).create_counter(
            name, unit=unit, description=description
        )
        _instruments[name] = inst
    return inst


def histogram(name: str, unit: str = "s", description: str = "") -> metrics.Histogram:
    """A cached histogram instrument named ``name`` (see :class:`METRIC`)."""
    inst = _instruments.get(name)
    if inst is None:
        inst = metrics.get_meter(INSTRUMENTATION_NAME).create_histogram(
            name, unit=unit, description=description
        )
        _instruments[name] = inst
    return inst


@contextmanager
def span(
    name: str, kind: SpanKind = SpanKind.INTERNAL, attributes: dict[str, Any] | None = None
) -> Iterator[Span]:
    """Start a span as the current span; on an escaping exception set ERROR status,
    ``error.type`` and ``tenxgraph.error.code`` (when the error has one), then re-raise."""
    with tracer().start_as_current_span(
        name, kind=kind, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as sp:
        try:
            yield sp
        except BaseException as exc:
            record_error(sp, exc)
            raise


def record_error(sp: Span, exc: BaseException) -> None:
    """Mark ``sp`` as failed by ``exc`` (type and error code only: never the message text,
    which could quote user data)."""
    if not sp.is_recording():
        return
    code = getattr(exc, "error_code", None)
    sp.set_attribute(ATTR.ERROR_TYPE, code or type(exc).__qualname__)
    if code:
        sp.set_attribute(ATTR.ERROR_CODE, code)
    sp.set_status(Status(StatusCode.ERROR, code or type(exc).__name__))


_SALT = os.environ.get("TENXGRAPH_TELEMETRY_SALT", "tenxgraph")


def user_digest(user_id: str) -> str:
    """A short salted SHA-256 digest of ``user_id`` (16 hex chars) for telemetry; the salt comes
    from ``TENXGRAPH_TELEMETRY_SALT``."""
    return hashlib.sha256(f"{_SALT}:{user_id}".encode()).hexdigest()[:16]
