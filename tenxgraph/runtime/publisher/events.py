"""The events a graph publishes (``compile(publisher=...)``): what happened, in which phase.

A run publishes, in order: ``GRAPH_EXECUTION``/``START``; for each node ``NODE_EXECUTION``/
``START`` then ``END`` (or ``ERROR``, or ``INTERRUPTED`` when it pauses for a human); and last
``GRAPH_EXECUTION``/``END`` (finished or stopped), ``INTERRUPTED`` (paused) or ``ERROR``.
"""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ContentType", "Event", "EventModel", "EventType"]


class Event(enum.StrEnum):
    """Where an event comes from. tenxgraph publishes ``GRAPH_EXECUTION`` and
    ``NODE_EXECUTION``; the other members exist for publishers and applications that share
    10xGraph's vocabulary."""

    GRAPH_EXECUTION = "graph_execution"
    NODE_EXECUTION = "node_execution"
    LLM_CALL = "llm_call"
    TOOL_EXECUTION = "tool_execution"
    STREAMING = "streaming"
    REALTIME = "realtime"


class EventType(enum.StrEnum):
    """The phase an event reports."""

    START = "start"
    PROGRESS = "progress"
    RESULT = "result"
    END = "end"
    UPDATE = "update"
    ERROR = "error"
    INTERRUPTED = "interrupted"


class ContentType(enum.StrEnum):
    """What ``EventModel.data`` holds."""

    TEXT = "text"
    MESSAGE = "message"
    REASONING = "reasoning"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    IMAGE = "image"
    AUDIO = "audio"
    TRANSCRIPT = "transcript"
    VIDEO = "video"
    DOCUMENT = "document"
    DATA = "data"
    STATE = "state"
    UPDATE = "update"
    ERROR = "error"


class EventModel(BaseModel):
    """One published event.

    Attributes:
        event_id (str): a uuid4 string, unique per event.
        event (Event): the source.
        event_type (EventType): the phase.
        content_type (ContentType): what ``data`` holds (default ``DATA``).
        node_name (str | None): the node, for node events.
        data (Any): the payload: for tenxgraph's events a small dict (``status``, ``step``,
            ``error_type`` / ``error_code`` on errors, ``next`` after a node); never message
            contents.
        content (Any): a content block when relevant (``None`` in tenxgraph's events).
        thread_id (str | None), run_id (str | None): the run's ids.
        timestamp (datetime): when the event was made (UTC).
        metadata (dict): extra context (``user_id`` is never put here).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    event_id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    event: Event
    event_type: EventType
    content_type: ContentType = ContentType.DATA
    node_name: str | None = None
    data: Any = None
    content: Any = None
    thread_id: str | None = None
    run_id: str | None = None
    timestamp: dt.datetime = Field(default_factory=lambda: dt.datetime.now(dt.UTC))
    metadata: dict[str, Any] = Field(default_factory=dict)
