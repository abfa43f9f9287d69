"""``RetryConfig``: how an ``Agent`` retries a failing model, and its circuit breaker."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RetryConfig"]


def _default_statuses() -> frozenset[int]:
    return frozenset({429, 500, 502, 503, 529})


@dataclass(frozen=True, slots=True)
class RetryConfig:
    """Retry, backoff and circuit-breaker settings of an ``Agent`` (10xGraph-compatible).

    A request that fails with one of ``retryable_status_codes``, a connection error or a
    timeout is retried up to ``max_retries`` times (so ``max_retries + 1`` attempts), waiting
    ``initial_delay`` seconds, then ``backoff_factor`` times longer after each retry, never
    more than ``max_delay`` (+-25 % jitter); a server's ``Retry-After`` of at most 60 s is
    honoured instead. When the attempts are spent the agent moves on to its next fallback
    model.

    With ``circuit_breaker_enabled``, each ``(provider, model)`` target of one ``Agent``
    counts its failed calls in a row; after ``circuit_breaker_threshold`` of them its circuit
    opens and the target is skipped (straight to the next fallback) for
    ``circuit_breaker_reset_timeout`` seconds; then one trial call is let through: a success
    closes the circuit, a failure opens it again. The state lives in the ``Agent`` object (a
    new process starts with closed circuits).

    Attributes:
        max_retries: retries after the first attempt (>= 0).
        initial_delay: seconds before the first retry (>= 0).
        max_delay: cap of the delay between retries, in seconds (>= 0).
        backoff_factor: multiplier applied after each retry (>= 1).
        retryable_status_codes: HTTP statuses treated as transient.
        circuit_breaker_enabled: turn the circuit breaker on.
        circuit_breaker_threshold: failed calls in a row that open a circuit (>= 1).
        circuit_breaker_reset_timeout: seconds a circuit stays open before a trial (>= 0).

    Raises:
        ValueError: a field is out of its range.
    """

    max_retries: int = 3
    initial_delay: float = 1.0
    max_delay: float = 30.0
    backoff_factor: float = 2.0
    retryable_status_codes: frozenset[int] = field(default_factory=_default_statuses)
    circuit_breaker_enabled: bool = False
    circuit_breaker_threshold: int = 5
    circuit_breaker_reset_timeout: float = 30.0

    def __post_init__(self) -> None:
        if (
            isinstance(self.max_retries, bool)
            or not isinstance(self.max_retries, int)
            or self.max_retries < 0
        ):
            raise ValueError(
                f"RetryConfig.max_retries must be an integer >= 0, got {self.max_retries!r}"
            )
        for name in ("initial_delay", "max_delay", "circuit_breaker_reset_timeout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(
                    f"RetryConfig.{name} must be a number of seconds >= 0, got {value!r}"
                )
        if not isinstance(self.backoff_factor, (int, float)) or self.backoff_factor < 1:
            raise ValueError(
                f"RetryConfig.backoff_factor must be >= 1, got {self.backoff_factor!r}"
            )
        if self.circuit_breaker_threshold < 1:
            raise ValueError("RetryConfig.circuit_breaker_threshold must be >= 1")
        object.__setattr__(self, "retryable_status_codes", frozenset(self.retryable_status_codes))
