"""Request bodies of the API, as 10xGraph's server declares them (unknown keys refused).

Each model mirrors the body of one 10xGraph route; ``extra="forbid"`` turns a misspelt key
into a 422 instead of a silently ignored field.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tenxgraph.core.state import Message
from tenxgraph.utils.constants import ResponseGranularity

__all__ = [
    "ConfigBody",
    "GraphInputBody",
    "PutMessagesBody",
    "PutStateBody",
    "StopBody",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GraphInputBody(_Strict):
    """Body of ``POST /v1/graph/invoke`` and ``/v1/graph/stream``.

    Attributes:
        messages: the turn's input messages (at least one).
        initial_state: state fields to set on the thread with this input (each through its
            reducer), or ``None``.
        config: the run config (``thread_id``, ...); ``user_id`` comes from auth.
        recursion_limit: node executions allowed in the run, 1 to 100 (default 25).
        response_granularity: ``low``, ``partial`` or ``full``.
    """

    messages: list[Message]
    initial_state: dict[str, Any] | None = None
    config: dict[str, Any] | None = None
    recursion_limit: int = Field(default=25, ge=1, le=100)
    response_granularity: ResponseGranularity = ResponseGranularity.LOW

    @field_validator("messages")
    @classmethod
    def _not_empty(cls, v: list[Message]) -> list[Message]:
        if not v:
            raise ValueError("messages must contain at least one message")
        return v

    @field_validator("recursion_limit", mode="before")
    @classmethod
    def _not_bool(cls, v: Any) -> Any:
        # JSON true/false would otherwise be read as 1/0 (pydantic's lax int)
        if isinstance(v, bool):
            raise ValueError("recursion_limit must be an integer, not a boolean")
        return v


class StopBody(_Strict):
    """Body of ``POST /v1/graph/stop``: ``thread_id`` and an optional ``config``."""

    thread_id: str = Field(min_length=1)
    config: dict[str, Any] | None = None


class ConfigBody(_Strict):
    """Body of the thread routes that take only an optional ``config``."""

    config: dict[str, Any] | None = Field(default_factory=dict)


class PutStateBody(ConfigBody):
    """Body of ``PUT /v1/threads/{id}/state``: the fields to set (``state``)."""

    state: dict[str, Any]


class PutMessagesBody(ConfigBody):
    """Body of ``POST /v1/threads/{id}/messages``: messages to append, optional metadata."""

    messages: list[Message]
    metadata: dict[str, Any] | None = None
