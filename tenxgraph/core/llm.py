"""The process-wide default timeout of model requests (10xGraph's ``agentflow.core.llm``).

Every model request an ``Agent`` (or a ``SummaryContextManager``) makes through an
OpenAI-compatible endpoint is bounded by a timeout, so a stalled provider cannot hang a run.
The timeout is resolved when a request is made, first match wins:

1. an explicit ``timeout_s=`` given to the ``Agent`` / ``OpenAICompatModel``;
2. the value set with :func:`set_default_llm_timeout`;
3. the ``TENXGRAPH_LLM_TIMEOUT`` environment variable (seconds; 10xGraph's
   ``AGENTFLOW_LLM_TIMEOUT`` is read too when ours is unset);
4. :data:`DEFAULT_LLM_TIMEOUT_SECONDS` (600).
"""

from __future__ import annotations

import math
import os

__all__ = [
    "DEFAULT_LLM_TIMEOUT_SECONDS",
    "get_default_llm_timeout",
    "set_default_llm_timeout",
]

#: The built-in request timeout, in seconds.
DEFAULT_LLM_TIMEOUT_SECONDS = 600.0

_ENV_VARS = ("TENXGRAPH_LLM_TIMEOUT", "AGENTFLOW_LLM_TIMEOUT")
_override: float | None = None


def _check(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number of seconds > 0, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{where} must be a number of seconds > 0, got {value!r}")
    return seconds


def set_default_llm_timeout(seconds: float | None) -> None:
    """Set (or with ``None`` clear) the process-wide request timeout.

    Args:
        seconds: seconds per model request (> 0), or ``None`` to fall back to the
            environment variable / the built-in default.

    Raises:
        ValueError: ``seconds`` is not a positive finite number.
    """
    global _override
    _override = None if seconds is None else _check(seconds, "set_default_llm_timeout(seconds)")


def get_default_llm_timeout() -> float:
    """The request timeout in seconds that applies now (module docstring for the order).

    Raises:
        ValueError: the environment variable holds something that is not a positive number.
    """
    if _override is not None:
        return _override
    for name in _ENV_VARS:
        raw = os.environ.get(name)
        if raw:
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not a number of seconds") from None
            return _check(value, name)
    return DEFAULT_LLM_TIMEOUT_SECONDS
