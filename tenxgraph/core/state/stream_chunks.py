"""Stream chunks yielded by ``stream`` / ``astream`` (10xGraph's ``StreamChunk``).

Importable as ``tenxgraph.core.state.stream_chunks`` and from ``tenxgraph.core.state`` (the
paths 10xGraph documents); ``tenxgraph.core.graph`` re-exports both names.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny

from .agent_state import AgentState
from .message import Message

__all__ = ["StreamChunk", "StreamEvent"]


class StreamEvent(StrEnum):
    """Kinds of chunk.

    ``message``: a message was produced (``chunk.message``; ``message.delta`` is ``True`` for a
    fragment that is never stored, ``False`` for a complete message). ``state``: the state at a
    node boundary, a pause, a stop or the end of the run (``chunk.state``). ``updates``: a node
    finished or the run paused (``chunk.data``). ``error``: the run failed (``chunk.data`` with
    ``error_code``, ``reason`` and ``message``).
    """

    MESSAGE = "message"
    STATE = "state"
    UPDATES = "updates"
    ERROR = "error"


class StreamChunk(BaseModel):
    """One streamed event (a Pydantic model: ``chunk.model_dump()`` gives a plain dict).

    ``event`` is stored as its plain string value (``use_enum_values``); comparing it with a
    ``StreamEvent`` member works because ``StreamEvent`` is a ``StrEnum``.

    Attributes:
        event: the kind of chunk (``StreamEvent`` value).
        message: the message of a ``message`` chunk, else ``None``.
        state: the state (an ``AgentState`` or subclass) of a ``state`` chunk, else ``None``.
        data: details of ``updates`` and ``error`` chunks (dict), else ``None``.
        thread_id: the run's thread.
        run_id: the run.
        metadata: where the chunk comes from: ``{"node": name, "step": n}`` for message and
            state chunks produced by a node (``None`` when not tied to a node).
        timestamp: UNIX seconds when the chunk was made.
    """

    model_config = ConfigDict(use_enum_values=True, arbitrary_types_allowed=True)

    event: StreamEvent = StreamEvent.MESSAGE
    message: Message | None = None
    state: SerializeAsAny[AgentState] | None = None
    data: dict[str, Any] | None = None
    thread_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    timestamp: float = Field(default_factory=time.time)

    @classmethod
    def fast(cls, event: StreamEvent, **fields: Any) -> StreamChunk:
        """Build a chunk from values the runtime already validated, without validating them
        again (a state chunk would otherwise re-validate the whole conversation).

        Args:
            event: the kind of chunk.
            **fields: any of the model's other fields.

        Returns:
            The chunk, ``event`` stored as its string value and ``timestamp`` set to now when
            not given.
        """
        values = dict(_DEFAULTS)  # in field order: dumps list the fields in this order
        values.update(fields)
        values["event"] = str(event)
        if "timestamp" not in fields:
            values["timestamp"] = time.time()
        # What ``model_construct`` does, without its per-field default handling (~20x
        # faster; a run makes a few chunks per step, also under ``invoke``).
        chunk = cls.__new__(cls)
        object.__setattr__(chunk, "__dict__", values)
        object.__setattr__(chunk, "__pydantic_fields_set__", {"event", "timestamp", *fields})
        object.__setattr__(chunk, "__pydantic_extra__", None)
        object.__setattr__(chunk, "__pydantic_private__", None)
        return chunk


_DEFAULTS: dict[str, Any] = dict.fromkeys(StreamChunk.model_fields)
