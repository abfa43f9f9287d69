"""Named counters and timers: an in-process registry that also records to OpenTelemetry.

Each ``counter(name)`` / ``timer(name)`` keeps a thread-safe running total in the process
(read with ``snapshot()``) and records every increment or observation on an OpenTelemetry
instrument of the same name: a counter, or a histogram in milliseconds for a timer, with the
call's ``attributes`` as its dimensions. The instruments come from the OpenTelemetry API's
global meter (scope ``tenxgraph``), which forwards to the application's ``MeterProvider`` once
one is installed, before or after this module is imported; ``setup_otel_metrics(meter)``
moves them onto another meter. Without an SDK the API's no-op meter drops them.

A failing exporter never reaches the caller: recording errors are logged at debug level.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import metrics as otel_metrics

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.telemetry import INSTRUMENTATION_NAME, METRICS

__all__ = [
    "Counter",
    "TimerMetric",
    "counter",
    "enable_metrics",
    "setup_otel_metrics",
    "snapshot",
    "timer",
]

_log = logging.getLogger(__name__)
_lock = threading.Lock()
_enabled = True
_meter: Any = None  # None: the API's global meter, looked up when an instrument is made
_counters: dict[str, Counter] = {}
_timers: dict[str, TimerMetric] = {}


def _current_meter() -> Any:
    return _meter if _meter is not None else otel_metrics.get_meter(INSTRUMENTATION_NAME)


def _check_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(
            f"a metric name must be a non-empty str, got {name!r}", context={"name": repr(name)}
        )
    return name


class Counter:
    """A monotonic count (``counter(name)`` returns the shared one for ``name``).

    Attributes:
        name: the metric name.
        value: the total of every ``inc`` in this process (all attributes together).
    """

    __slots__ = ("_instrument", "name", "value")

    def __init__(self, name: str) -> None:
        self.name = name
        self.value: float = 0
        self._instrument: Any = None

    def _bind(self, meter: Any) -> None:
        spec = METRICS.get(self.name)
        self._instrument = meter.create_counter(
            self.name, unit=spec.unit if spec else "1", description=spec.description if spec else ""
        )

    def inc(self, amount: int | float = 1, attributes: dict[str, Any] | None = None) -> None:
        """Add ``amount`` (default 1).

        Args:
            amount: a number >= 0.
            attributes: OpenTelemetry dimensions (keep them low-cardinality: no user or
                thread ids).

        Raises:
            ValidationError: ``VALIDATION_000`` for a negative or non-numeric amount.
        """
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ValidationError(
                f"counter {self.name!r}: inc() takes a number >= 0, got {amount!r}",
                context={"name": self.name},
            )
        self._add(amount, attributes)

    def _add(self, amount: int | float, attributes: dict[str, Any] | None) -> None:
        """:meth:`inc` without checking ``amount`` (the runtime's own calls, known valid)."""
        if not _enabled:
            return
        with _lock:
            self.value += amount
            instrument = self._instrument
        try:
            instrument.add(amount, attributes)
        except Exception:  # noqa: BLE001 - an exporter problem must not break the caller
            _log.debug("recording counter %s failed", self.name, exc_info=True)


class TimerMetric:
    """Durations in milliseconds (``timer(name)`` records into the shared one for ``name``).

    Attributes:
        name: the metric name.
        count: observations recorded.
        total_ms: their sum, in milliseconds.
        max_ms: the longest, in milliseconds (0.0 before the first).
    """

    __slots__ = ("_instrument", "count", "max_ms", "name", "total_ms")

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.total_ms = 0.0
        self.max_ms = 0.0
        self._instrument: Any = None

    def _bind(self, meter: Any) -> None:
        self._instrument = meter.create_histogram(self.name, unit="ms")

    @property
    def avg_ms(self) -> float:
        """Mean duration in milliseconds (0.0 before the first observation)."""
        return self.total_ms / self.count if self.count else 0.0

    def observe(self, duration_ms: float, attributes: dict[str, Any] | None = None) -> None:
        """Record one duration.

        Args:
            duration_ms: milliseconds, >= 0.
            attributes: OpenTelemetry dimensions.

        Raises:
            ValidationError: ``VALIDATION_000`` for a negative or non-numeric duration.
        """
        if (
            isinstance(duration_ms, bool)
            or not isinstance(duration_ms, (int, float))
            or duration_ms < 0
        ):
            raise ValidationError(
                f"timer {self.name!r}: observe() takes milliseconds >= 0, got {duration_ms!r}",
                context={"name": self.name},
            )
        self._observe(duration_ms, attributes)

    def _observe(self, duration_ms: int | float, attributes: dict[str, Any] | None) -> None:
        """:meth:`observe` without checking ``duration_ms`` (the runtime's own calls, which
        pass a non-negative float)."""
        if not _enabled:
            return
        with _lock:
            self.count += 1
            self.total_ms += duration_ms
            if duration_ms > self.max_ms:
                self.max_ms = float(duration_ms)
            instrument = self._instrument
        try:
            instrument.record(duration_ms, attributes)
        except Exception:  # noqa: BLE001 - an exporter problem must not break the caller
            _log.debug("recording timer %s failed", self.name, exc_info=True)


def _count_and_time(
    count: Counter,
    count_attrs: dict[str, Any],
    timer: TimerMetric,
    duration_ms: float,
    timer_attrs: dict[str, Any],
) -> None:
    """``count._add(1, count_attrs)`` and ``timer._observe(duration_ms, timer_attrs)`` under one
    lock acquisition (the runtime's per-node record: an execution and its duration)."""
    if not _enabled:
        return
    with _lock:
        count.value += 1
        timer.count += 1
        timer.total_ms += duration_ms
        if duration_ms > timer.max_ms:
            timer.max_ms = float(duration_ms)
        counting, timing = count._instrument, timer._instrument
    try:
        counting.add(1, count_attrs)
    except Exception:  # noqa: BLE001 - an exporter problem must not break the caller
        _log.debug("recording counter %s failed", count.name, exc_info=True)
    try:
        timing.record(duration_ms, timer_attrs)
    except Exception:  # noqa: BLE001
        _log.debug("recording timer %s failed", timer.name, exc_info=True)


def counter(name: str) -> Counter:
    """The counter named ``name``, created on first use.

    Args:
        name: a non-empty metric name, e.g. ``"orders.processed"``.

    Returns:
        The process-wide ``Counter`` for that name.

    Raises:
        ValidationError: ``VALIDATION_000`` for an empty or non-str name.
    """
    return _get_or_create(_counters, Counter, name)


def _timer_metric(name: str) -> TimerMetric:
    return _get_or_create(_timers, TimerMetric, name)


_M = TypeVar("_M", "Counter", "TimerMetric")


def _get_or_create(registry: dict[str, _M], cls: type[_M], name: str) -> _M:
    """The process-wide metric ``name`` of ``registry``, made (and bound to the current meter)
    on first use."""
    _check_name(name)
    with _lock:
        found = registry.get(name)
        if found is None:
            found = cls(name)
            found._bind(_current_meter())  # noqa: SLF001 - module-private protocol
            registry[name] = found
        return found


@contextmanager
def timer(name: str, attributes: dict[str, Any] | None = None) -> Iterator[TimerMetric]:
    """Time the ``with`` block and record its milliseconds on the timer ``name``.

    The observation carries ``attributes`` plus ``outcome``: ``"ok"``, or ``"error"`` when
    the block raised (the exception propagates unchanged).

    Args:
        name: a non-empty metric name.
        attributes: extra OpenTelemetry dimensions.

    Yields:
        The ``TimerMetric`` being recorded into.

    Raises:
        ValidationError: ``VALIDATION_000`` for an empty or non-str name.
    """
    metric = _timer_metric(name)
    start = time.perf_counter()
    outcome = "error"
    try:
        yield metric
        outcome = "ok"
    finally:
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        metric.observe(elapsed_ms, {**(attributes or {}), "outcome": outcome})


def snapshot() -> dict[str, Any]:
    """A consistent copy of every counter and timer of this process.

    Returns:
        ``{"counters": {name: value}, "timers": {name: {"count": int, "total_ms": float,
        "avg_ms": float, "max_ms": float}}}``.
    """
    with _lock:
        return {
            "counters": {name: c.value for name, c in _counters.items()},
            "timers": {
                name: {
                    "count": t.count,
                    "total_ms": t.total_ms,
                    "avg_ms": t.avg_ms,
                    "max_ms": t.max_ms,
                }
                for name, t in _timers.items()
            },
        }


def enable_metrics(value: bool) -> None:
    """Turn recording on or off for the whole process (on by default); while off, ``inc``
    and ``observe`` return at once and nothing is recorded.

    Args:
        value: ``True`` to record, ``False`` to stop.

    Raises:
        ValidationError: ``VALIDATION_000`` when ``value`` is not a bool.
    """
    global _enabled
    if not isinstance(value, bool):
        raise ValidationError(
            f"enable_metrics() takes True or False, got {value!r}", context={"value": repr(value)}
        )
    _enabled = value


def setup_otel_metrics(meter: Any = None) -> bool:
    """Record every counter and timer (existing and future) on ``meter``.

    Not needed for the global ``MeterProvider``: the instruments already forward to it once
    the application installs one. Use it to record on a specific meter instead; with
    ``meter=None`` the instruments go back to the global provider's ``tenxgraph`` meter.

    Args:
        meter: an OpenTelemetry ``Meter`` (e.g. ``provider.get_meter("app")``), or ``None``.

    Returns:
        ``True`` (the OpenTelemetry API is a dependency of tenxgraph, so the bridge is always
        available).

    Raises:
        ValidationError: ``VALIDATION_000`` when ``meter`` lacks ``create_counter`` /
            ``create_histogram``.
    """
    global _meter
    if meter is not None and not (
        hasattr(meter, "create_counter") and hasattr(meter, "create_histogram")
    ):
        raise ValidationError(
            f"setup_otel_metrics(meter=...) takes an OpenTelemetry Meter, got "
            f"{type(meter).__name__}",
            context={"meter": type(meter).__name__},
        )
    with _lock:
        _meter = meter
        current = _current_meter()
        for c in _counters.values():
            c._bind(current)  # noqa: SLF001 - module-private protocol
        for t in _timers.values():
            t._bind(current)  # noqa: SLF001 - module-private protocol
    return True
