"""OpenTelemetry tracing and metrics for every tier, through ``opentelemetry-api`` only.

The application chooses the SDK and the exporter; without one, the API's no-op tracer and meter
make every call here nearly free (see "Cost without an SDK" below). Span, attribute, event and
metric names are constants (below) so that the reference page ``docs/telemetry.md`` and the code
cannot drift. Names follow the OpenTelemetry semantic conventions for database clients
(``db.system.name``, ``db.operation.name``, ``db.namespace``, ``server.address``,
``server.port``, ``error.type``; span kind CLIENT for Postgres, SQLite and Redis, INTERNAL for
the in-process tiers) plus a ``tenxgraph.*`` namespace; the agent and tool spans follow the
GenAI conventions (``invoke_agent``, ``execute_tool``, still marked development).

Never recorded: message contents, tool arguments or results, exception messages (only their
type or error code), raw ``user_id`` (only a salted digest, :func:`user_digest`), passwords
or anything else from a DSN or URL beyond host, port and database name.

Errors: a span gets status ERROR, ``error.type`` and ``tenxgraph.error.code`` only when an
exception escapes it (:func:`record_error`). As in OpenTelemetry's own ``use_span``, only
``Exception`` subclasses count: ``GeneratorExit`` (a stream closed early), cancellation and a
node pausing for a human are not errors.

Cost without an SDK: :func:`span`, :func:`start_span` and :func:`use_span` check
:func:`enabled` first and, when no tracer provider is installed, return a shared do-nothing
context manager without touching the OpenTelemetry context. Hot paths build attribute dicts
only when :func:`enabled` is true. Metric instruments are created once and cached; the API's
proxy instruments bind to the SDK's when the application installs a meter provider later.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode

__all__ = [
    "ATTR",
    "EVENT",
    "INSTRUMENTATION_NAME",
    "METRIC",
    "METRICS",
    "MetricSpec",
    "NO_SPAN",
    "SPAN",
    "SpanKind",
    "WRITE_DURATION_BUCKETS_S",
    "add_conflict_event",
    "counter",
    "enabled",
    "histogram",
    "record_error",
    "span",
    "start_span",
    "tracer",
    "use_span",
    "user_digest",
]

#: Instrumentation scope name of the tracer and the meter.
INSTRUMENTATION_NAME = "tenxgraph"


class SPAN:
    """Span names (see ``docs/telemetry.md`` for kind, parent and attributes of each)."""

    RUN = "tenxgraph.run"  # one per invoke / ainvoke / stream
    NODE = "tenxgraph.node"  # one per node execution
    CHECKPOINT_LOAD = "tenxgraph.checkpoint.load"  # facade: read + decode the latest version
    CHECKPOINT_COMMIT = "tenxgraph.checkpoint.commit"  # facade: one durable checkpoint
    CHECKPOINT_READ = "tenxgraph.checkpoint.read"  # one per tier read
    CHECKPOINT_WRITE = "tenxgraph.checkpoint.write"  # one per tier write
    CURRENT_VERSION = "tenxgraph.checkpoint.current_version"  # source tier: latest version only
    HISTORY = "tenxgraph.checkpoint.history"  # source tier: kept versions
    THREAD_DELETE = "tenxgraph.thread.delete"  # source tier
    CACHE_INVALIDATE = "tenxgraph.cache.invalidate"  # Redis: drop a thread's keys
    LEDGER_READ = "tenxgraph.ledger.read"  # source tier: recorded tool call
    LEDGER_WRITE = "tenxgraph.ledger.write"  # source tier: record a tool call
    TOOL = "execute_tool"  # GenAI convention (development status)
    AGENT = "invoke_agent"  # GenAI convention (development status)
    SETUP = "tenxgraph.setup"  # schema creation / migration
    RUN_SUBMIT = "tenxgraph.run.submit"  # asubmit: record a background run
    RUN_EXECUTE = "tenxgraph.run.execute"  # a worker's attempt at a background run
    RUN_RECOVER = "tenxgraph.run.recover"  # a worker takes over a cut-off background run
    ERASE = "tenxgraph.user.erase"  # aerase_user: facade, and the source tier's transaction
    SWEEP = "tenxgraph.threads.sweep"  # asweep_threads: facade, and each source batch


class ATTR:
    """Attribute names (OpenTelemetry conventions first, then ``tenxgraph.*``)."""

    DB_SYSTEM = "db.system.name"
    DB_OPERATION = "db.operation.name"
    DB_NAMESPACE = "db.namespace"
    DB_COLLECTION = "db.collection.name"  # a table (erasure and retention row counts)
    SERVER_ADDRESS = "server.address"
    SERVER_PORT = "server.port"
    ERROR_TYPE = "error.type"
    THREAD_ID = "tenxgraph.thread.id"
    USER_DIGEST = "tenxgraph.user.digest"
    RUN_ID = "tenxgraph.run.id"
    NODE = "tenxgraph.node.name"
    STEP = "tenxgraph.step"
    VERSION = "tenxgraph.checkpoint.version"
    EXPECTED_VERSION = "tenxgraph.checkpoint.expected_version"
    CURRENT_VERSION = "tenxgraph.checkpoint.current_version"
    TIER = "tenxgraph.cache.tier"
    HIT = "tenxgraph.cache.hit"
    BYTES = "tenxgraph.checkpoint.bytes"
    MESSAGES_WRITTEN = "tenxgraph.checkpoint.messages_written"
    INVALIDATION_REASON = "tenxgraph.cache.invalidation.reason"
    ERROR_CODE = "tenxgraph.error.code"
    GENAI_OPERATION = "gen_ai.operation.name"
    GENAI_REQUEST_MODEL = "gen_ai.request.model"
    TOOL_NAME = "gen_ai.tool.name"
    TOOL_CALL_ID = "gen_ai.tool.call.id"
    REPLAYED = "tenxgraph.node.replayed"
    ROWS_SKIPPED = "tenxgraph.rows.skipped"
    RUN_ATTEMPT = "tenxgraph.run.attempt"
    RUN_STATUS = "tenxgraph.run.status"


class EVENT:
    """Span event names."""

    CONFLICT = "tenxgraph.conflict"  # attrs: thread id, expected_version, current_version
    LEDGER_HIT = "tenxgraph.ledger.hit"  # attrs: tool name, tool_call_id
    LEDGER_READ_FAILED = "tenxgraph.ledger.read_failed"  # attrs: tool name, id, error.type
    TOOL_FAILED = "tenxgraph.tool.failed"  # attrs: tool name, id, error.type
    CACHE_FAILURE = "tenxgraph.cache.failure"  # attrs: tier, error.type
    CACHE_INVALIDATED = "tenxgraph.cache.invalidated"  # attrs: thread id, reason
    CACHE_REJECTED = "tenxgraph.cache.rejected"  # attrs: tier, thread id
    RESUME = "tenxgraph.run.resume"  # attrs: node name
    ROW_SKIPPED = "tenxgraph.row.skipped"  # attrs: db operation, rows skipped
    ALREADY_PROCESSED = "tenxgraph.run.already_processed"  # attrs: run id of this invocation
    COMMIT_RECOVERED = "tenxgraph.commit.recovered"  # attrs: thread id, version


class METRIC:
    """Metric instrument names (units and attributes in :data:`METRICS`)."""

    CHECKPOINTS = "tenxgraph.checkpoints"
    WRITE_DURATION = "tenxgraph.checkpoint.write.duration"
    CONFLICTS = "tenxgraph.conflicts"
    CACHE_HITS = "tenxgraph.cache.hits"
    CACHE_MISSES = "tenxgraph.cache.misses"
    CACHE_REJECTED = "tenxgraph.cache.rejected"
    LEDGER_HITS = "tenxgraph.ledger.hits"
    REPLAYED_NODES = "tenxgraph.nodes.replayed"
    LEDGER_READ_FALLBACKS = "tenxgraph.ledger.read_fallbacks"
    RUNS_SUBMITTED = "tenxgraph.runs.submitted"
    RUNS_RECOVERED = "tenxgraph.runs.recovered"
    RUNS_RETRIED = "tenxgraph.runs.retried"
    RUNS_POISONED = "tenxgraph.runs.poisoned"
    RUNS_FINISHED = "tenxgraph.runs.finished"
    RECOVERY_DELAY = "tenxgraph.runs.recovery.delay"
    USERS_ERASED = "tenxgraph.erasure.users"
    ERASED_THREADS = "tenxgraph.erasure.threads"
    ERASED_ROWS = "tenxgraph.erasure.rows"
    SWEPT_THREADS = "tenxgraph.retention.threads"
    SWEPT_ROWS = "tenxgraph.retention.rows"
    # BackgroundTaskManager (tenxgraph.utils.background_task_manager): 10xGraph's names.
    TASKS_CREATED = "background_task_manager.tasks_created"
    TASKS_COMPLETED = "background_task_manager.tasks_completed"
    TASKS_FAILED = "background_task_manager.tasks_failed"
    TASKS_DROPPED = "background_task_manager.tasks_dropped"
    TASKS_CANCELLED = "background_task_manager.tasks_cancelled"
    TASKS_TIMED_OUT = "background_task_manager.tasks_timed_out"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one instrument is created and what its data points carry.

    Attributes:
        kind: ``"counter"`` or ``"histogram"``.
        unit: UCUM unit (``"s"``, or an annotation such as ``"{checkpoint}"``).
        description: one line for the exporter.
        attributes: attribute names its data points carry (low cardinality only: never a
            thread id, run id or user).
    """

    kind: str
    unit: str
    description: str
    attributes: tuple[str, ...]


#: Write latency buckets in seconds (advisory; an SDK view may override them). From 0.1 ms, for
#: in-memory writes, to 10 s, for a Postgres write stuck behind a lock.
# fmt: off
WRITE_DURATION_BUCKETS_S = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0,
)
# fmt: on

#: Every instrument tenxgraph records, by name.
METRICS: dict[str, MetricSpec] = {
    METRIC.CHECKPOINTS: MetricSpec(
        "counter", "{checkpoint}", "durable checkpoints written", (ATTR.TIER,)
    ),
    METRIC.WRITE_DURATION: MetricSpec(
        "histogram",
        "s",
        "duration of one checkpoint write through every tier, encoding excluded",
        (ATTR.TIER, ATTR.ERROR_TYPE),
    ),
    METRIC.CONFLICTS: MetricSpec(
        "counter", "{conflict}", "checkpoint writes that lost the compare-and-swap", (ATTR.TIER,)
    ),
    METRIC.CACHE_HITS: MetricSpec(
        "counter", "{read}", "cache tier reads that found the thread", (ATTR.TIER,)
    ),
    METRIC.CACHE_MISSES: MetricSpec(
        "counter", "{read}", "cache tier reads that did not find the thread", (ATTR.TIER,)
    ),
    METRIC.CACHE_REJECTED: MetricSpec(
        "counter",
        "{read}",
        "cached copies refused because their MAC did not verify (altered or corrupted)",
        (ATTR.TIER,),
    ),
    METRIC.LEDGER_HITS: MetricSpec(
        "counter", "{call}", "tool calls answered from the ledger instead of run", (ATTR.TOOL_NAME,)
    ),
    METRIC.REPLAYED_NODES: MetricSpec(
        "counter", "{node}", "node executions replayed after a crash or a stop", (ATTR.NODE,)
    ),
    METRIC.LEDGER_READ_FALLBACKS: MetricSpec(
        "counter",
        "{call}",
        "tool calls run again because the ledger could not be read (after retrying)",
        (ATTR.TOOL_NAME, ATTR.ERROR_TYPE),
    ),
    METRIC.RUNS_SUBMITTED: MetricSpec("counter", "{run}", "background runs submitted", ()),
    METRIC.RUNS_RECOVERED: MetricSpec(
        "counter", "{run}", "cut-off background runs taken over by a worker", ()
    ),
    METRIC.RUNS_RETRIED: MetricSpec(
        "counter", "{run}", "background runs put back to pending by an operator (runs retry)", ()
    ),
    METRIC.RUNS_POISONED: MetricSpec(
        "counter", "{run}", "background runs marked error after crashing max_crashes workers", ()
    ),
    METRIC.RUNS_FINISHED: MetricSpec(
        "counter", "{run}", "background runs a worker brought to a final status", (ATTR.RUN_STATUS,)
    ),
    METRIC.RECOVERY_DELAY: MetricSpec(
        "histogram",
        "s",
        "seconds from a cut-off attempt's claim to its take-over by a worker: an upper bound of "
        "the time from the crash (it includes how long the attempt ran)",
        (),
    ),
    METRIC.USERS_ERASED: MetricSpec(
        "counter", "{user}", "aerase_user calls that completed (never the user id)", (ATTR.TIER,)
    ),
    METRIC.ERASED_THREADS: MetricSpec(
        "counter", "{thread}", "threads removed by aerase_user", (ATTR.TIER,)
    ),
    METRIC.ERASED_ROWS: MetricSpec(
        "counter",
        "{row}",
        "source-of-truth rows removed by aerase_user, per table",
        (ATTR.TIER, ATTR.DB_COLLECTION),
    ),
    METRIC.SWEPT_THREADS: MetricSpec(
        "counter", "{thread}", "idle threads removed by the retention sweep", (ATTR.TIER,)
    ),
    METRIC.SWEPT_ROWS: MetricSpec(
        "counter",
        "{row}",
        "source-of-truth rows removed by the retention sweep, per table",
        (ATTR.TIER, ATTR.DB_COLLECTION),
    ),
    METRIC.TASKS_CREATED: MetricSpec("counter", "{task}", "background tasks started", ()),
    METRIC.TASKS_COMPLETED: MetricSpec(
        "counter", "{task}", "background tasks that returned normally", ()
    ),
    METRIC.TASKS_FAILED: MetricSpec("counter", "{task}", "background tasks that raised", ()),
    METRIC.TASKS_DROPPED: MetricSpec(
        "counter", "{task}", "background tasks refused because max_pending_tasks were in flight", ()
    ),
    METRIC.TASKS_CANCELLED: MetricSpec(
        "counter", "{task}", "background tasks cancelled (cancel_all, shutdown)", ()
    ),
    METRIC.TASKS_TIMED_OUT: MetricSpec(
        "counter", "{task}", "background tasks cancelled by their own timeout", ()
    ),
}


# -- tracing -----------------------------------------------------------------------------------
_TRACER = trace.get_tracer(INSTRUMENTATION_NAME)
_NOOP_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_live = False  # a real provider was seen once (it cannot be replaced afterwards)
# A provider named by this variable is loaded by the API on first use.
_ENV_PROVIDER = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
# ``trace.get_tracer_provider()`` looks the environment up on every call (microseconds on a busy
# machine, paid by every span); the API keeps the global provider in a module variable, read
# directly when it exists. Should a future API release rename it, the public (slower) check is
# used instead: never wrong, only slower.
_FAST_CHECK = hasattr(trace, "_TRACER_PROVIDER") and not _ENV_PROVIDER


def tracer() -> trace.Tracer:
    """The tenxgraph tracer.

    A proxy from the global provider, created once: it delegates to the SDK's tracer as soon as
    the application installs a provider (before or after importing tenxgraph), and is the
    API's no-op tracer until then. Tests may monkeypatch this function to return another
    tracer.
    """
    return _TRACER


def enabled() -> bool:
    """Whether spans may be recorded: a tracer provider other than the API's default is
    installed (or :func:`tracer` was replaced).

    Cheap (one call and a type check); use it to skip building attribute dicts or computing
    byte counts on hot paths. ``False`` guarantees every span would be a no-op; ``True`` does
    not guarantee a span is sampled (check ``span.is_recording()`` for that).
    """
    global _live
    # ``tracer`` as defined here always returns ``_TRACER``: it is called only when replaced
    # (tests monkeypatch it), which saves a call on every check of the hot path.
    if _live or (tracer is not _DEFINED_TRACER and tracer() is not _TRACER):
        return True
    if _FAST_CHECK and trace._TRACER_PROVIDER is None:  # noqa: SLF001 - see _FAST_CHECK
        return False
    if isinstance(trace.get_tracer_provider(), _NOOP_PROVIDERS):
        return False
    _live = True
    return True


_DEFINED_TRACER = tracer


class _NoopSpanContext:
    """Shared do-nothing context manager yielding the API's invalid (non-recording) span."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


_NOOP = _NoopSpanContext()

#: The do-nothing context manager :func:`span` returns when :func:`enabled` is false. A hot path
#: that has just called :func:`enabled` itself (to skip building attributes) uses it instead of
#: calling :func:`span`, which would check again: ``with span(...) if on else NO_SPAN:``.
NO_SPAN: Any = _NOOP


class _CurrentSpan:
    """Context manager of :func:`span`: starts the span as the current one, records an
    escaping error on it (:func:`record_error`), ends it."""

    __slots__ = ("_cm", "_span")

    def __init__(self, cm: AbstractContextManager[Span]) -> None:
        self._cm = cm
        self._span: Span = INVALID_SPAN

    def __enter__(self) -> Span:
        self._span = self._cm.__enter__()
        return self._span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        if exc is not None:
            record_error(self._span, exc)
        return self._cm.__exit__(exc_type, exc, tb)


def span(
    name: str, kind: SpanKind = SpanKind.INTERNAL, attributes: dict[str, Any] | None = None
) -> Any:
    """A context manager that starts span ``name`` as the current span and ends it on exit.

    An exception escaping the ``with`` block sets status ERROR, ``error.type`` and
    ``tenxgraph.error.code`` (:func:`record_error`), then propagates; the exception's message
    and traceback are never recorded.

    Args:
        name: one of :class:`SPAN`.
        kind: ``SpanKind.CLIENT`` for Postgres, SQLite and Redis calls, else INTERNAL.
        attributes: initial attributes (names from :class:`ATTR`); pass ``None`` rather than
            building a dict when :func:`enabled` is false.

    Returns:
        A context manager whose ``__enter__`` gives the span (a non-recording one when no SDK
        is installed: every method is a no-op and ``is_recording()`` is ``False``).

    Example:
        >>> with span(SPAN.CHECKPOINT_READ, SpanKind.INTERNAL) as sp:
        ...     sp.set_attribute(ATTR.HIT, True)
    """
    t = tracer()
    if not _live and t is _TRACER and not enabled():
        return _NOOP
    return _CurrentSpan(
        t.start_as_current_span(
            name,
            kind=kind,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )
    )


def start_span(
    name: str, kind: SpanKind = SpanKind.INTERNAL, attributes: dict[str, Any] | None = None
) -> Span:
    """Start span ``name`` without making it current (the caller ends it).

    Used for the run span, which lives across the yields of the run's async generator and is
    made current only around each piece of work (:func:`use_span`), so it never leaks into the
    consumer's context.

    Returns:
        The span; the API's invalid span (a no-op) when :func:`enabled` is false.
    """
    t = tracer()
    if t is _TRACER and not enabled():
        return INVALID_SPAN
    return t.start_span(name, kind=kind, attributes=attributes)


def use_span(sp: Span) -> Any:
    """Make ``sp`` the current span inside a ``with`` block, without ending it.

    Unlike ``opentelemetry.trace.use_span`` with its defaults, an exception passing through
    neither records an ``exception`` event (its message could quote user data) nor sets the
    status: the owner of ``sp`` decides with :func:`record_error`. A no-op for the invalid
    span :func:`start_span` returns without an SDK (the current span stays as it is).
    """
    if sp is INVALID_SPAN:
        return _NOOP
    return trace.use_span(
        sp, end_on_exit=False, record_exception=False, set_status_on_exception=False
    )


def record_error(sp: Span, exc: BaseException) -> None:
    """Mark ``sp`` as failed by ``exc``: status ERROR, ``error.type`` and, for tenxgraph
    errors, ``tenxgraph.error.code``.

    Only the type and the error code are recorded, never the message (it could quote user
    data). ``error.type`` is the error code when the exception has one (``STORAGE_CONFLICT_000``),
    else the exception's qualified class name. Exceptions that do not derive from
    ``Exception`` (``GeneratorExit``, cancellation, a node pausing for a human) are not
    errors and leave the span untouched, as in OpenTelemetry's ``use_span``.
    """
    if not isinstance(exc, Exception) or not sp.is_recording():
        return
    code = getattr(exc, "error_code", None)
    if not isinstance(code, str):
        code = None
    sp.set_attribute(ATTR.ERROR_TYPE, code or type(exc).__qualname__)
    if code:
        sp.set_attribute(ATTR.ERROR_CODE, code)
    sp.set_status(Status(StatusCode.ERROR, code or type(exc).__name__))


def add_conflict_event(
    sp: Span, thread_id: str, expected_version: int, current_version: int | None
) -> None:
    """Add the :attr:`EVENT.CONFLICT` event to ``sp``, the span whose compare-and-swap lost.

    Args:
        sp: the tier's write span.
        thread_id: the thread written.
        expected_version: the version the write was based on (0: the thread must not exist).
        current_version: the version the tier holds; ``None`` (attribute left out) when the
            thread does not exist.
    """
    if not sp.is_recording():
        return
    attrs: dict[str, Any] = {
        ATTR.THREAD_ID: thread_id,
        ATTR.EXPECTED_VERSION: int(expected_version),
    }
    if current_version is not None:
        attrs[ATTR.CURRENT_VERSION] = int(current_version)
    sp.add_event(EVENT.CONFLICT, attrs)


# -- metrics -----------------------------------------------------------------------------------
_instruments: dict[str, Any] = {}


def _meter() -> metrics.Meter:
    return metrics.get_meter(INSTRUMENTATION_NAME)


def counter(name: str, unit: str | None = None, description: str | None = None) -> metrics.Counter:
    """The counter instrument ``name``, created once and cached.

    Args:
        name: one of :class:`METRIC`; its unit and description come from :data:`METRICS`
            (the arguments are used only for a name not listed there).
        unit: UCUM unit for an unlisted name (default ``"1"``).
        description: description for an unlisted name.
    """
    inst = _instruments.get(name)
    if inst is None:
        spec = METRICS.get(name)
        inst = _meter().create_counter(
            name,
            unit=spec.unit if spec else (unit or "1"),
            description=spec.description if spec else (description or ""),
        )
        _instruments[name] = inst
    return inst


def histogram(
    name: str, unit: str | None = None, description: str | None = None
) -> metrics.Histogram:
    """The histogram instrument ``name``, created once and cached.

    Durations are in seconds (unit ``"s"``) with the advisory buckets
    :data:`WRITE_DURATION_BUCKETS_S`. Arguments as for :func:`counter`.
    """
    inst = _instruments.get(name)
    if inst is None:
        spec = METRICS.get(name)
        inst = _meter().create_histogram(
            name,
            unit=spec.unit if spec else (unit or "s"),
            description=spec.description if spec else (description or ""),
            explicit_bucket_boundaries_advisory=WRITE_DURATION_BUCKETS_S,
        )
        _instruments[name] = inst
    return inst


# -- privacy -----------------------------------------------------------------------------------
_SALT = os.environ.get("TENXGRAPH_TELEMETRY_SALT", "tenxgraph")


def user_digest(user_id: str) -> str:
    """A short salted SHA-256 digest of ``user_id`` (16 hex characters) for telemetry.

    The raw ``user_id`` is never recorded. The salt comes from ``TENXGRAPH_TELEMETRY_SALT``
    (read at import); set it to a secret so that digests of guessable ids cannot be reversed
    by hashing candidates.
    """
    return hashlib.sha256(f"{_SALT}:{user_id}".encode()).hexdigest()[:16]
