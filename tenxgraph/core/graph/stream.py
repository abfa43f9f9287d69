"""Stream chunks yielded by ``stream`` / ``astream`` (10xGraph's ``StreamChunk``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tenxgraph.core.state import AgentState, Message

__all__ = ["StreamChunk", "StreamEvent"]


class StreamEvent(StrEnum):
    """Kinds of chunk: ``message`` (a message entered the state), ``state`` (the run paused,
    stopped or finished; ``state`` holds it), ``updates`` (a node finished; ``data`` has
    ``node``, ``next`` and the updated ``keys``), ``error`` (the run failed; ``data`` has
    ``error_code`` and ``message``). ``result`` is internal to ``invoke`` and never streamed."""

    MESSAGE = "message"
    STATE = "state"
    UPDATES = "updates"
    ERROR = "error"
    RESULT = "result"


@dataclass(slots=True)
class StreamChunk:
    """One streamed event.

    Attributes:
        event: :class:`StreamEvent`.
        message: set for ``message`` events.
        state: set for ``state`` events.
        data: set for ``updates`` and ``error`` events.
        thread_id, run_id: the run.
        timestamp: UNIX seconds.
    """

    event: StreamEvent
    message: Message | None = None
    state: AgentState | None = None
    data: dict[str, Any] | None = None
    thread_id: str | None = None
    run_id: str | None = None
    timestamp: float = field(default_factory=time.time)
