"""``AgentState``: the default graph state, subclassable with reducer-annotated fields."""

from __future__ import annotations

import typing
from collections.abc import Callable
from functools import lru_cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from .execution import ExecutionState
from .message import Message
from .reducers import add_messages, replace_value

__all__ = ["AgentState", "reducers_of"]


class AgentState(BaseModel):
    """The state of one thread (10xGraph-compatible).

    Attributes:
        context: the conversation, oldest first, ``message_id`` unique; merged with
            :func:`~tenxgraph.core.state.reducers.add_messages`.
        context_summary: an optional rolling summary.
        execution_meta: :class:`~tenxgraph.core.state.execution.ExecutionState`, managed by the
            runtime.

    Subclass it to add fields; annotate a field with a reducer to control merging::

        class MyState(AgentState):
            findings: Annotated[list[Finding], append_items] = Field(default_factory=list)

    Every field must be JSON-encodable by :mod:`tenxgraph.storage.serde` (str, numbers, bool,
    None, lists, dicts with str keys, datetime, date, time, timedelta, UUID, bytes, Decimal,
    set, frozenset, tuple, Enum, Pydantic models), declared with its type so it decodes back to
    exactly that type.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=False)

    context: Annotated[list[Message], add_messages] = Field(default_factory=list)
    context_summary: str | None = None
    execution_meta: ExecutionState = Field(default_factory=ExecutionState)

    # -- 10xGraph status helpers -----------------------------------------------------------------
    def is_running(self) -> bool:
        """``True`` while the graph is executing this thread."""
        return self.execution_meta.is_running()

    def is_interrupted(self) -> bool:
        """``True`` when paused at an interrupt."""
        return self.execution_meta.is_interrupted()

    def is_stopped_requested(self) -> bool:
        """``True`` when ``stop()`` was requested for this thread."""
        return self.execution_meta.stop_current_execution == "stop_requested"


@lru_cache(maxsize=256)
def reducers_of(state_cls: type[BaseModel]) -> dict[str, Callable[[Any, Any], Any]]:
    """Map each field of ``state_cls`` to its reducer (``Annotated`` metadata that is callable),
    :func:`replace_value` when it declares none. Cached per class."""
    out: dict[str, Callable[[Any, Any], Any]] = {}
    hints = typing.get_type_hints(state_cls, include_extras=True)
    for name in state_cls.model_fields:
        reducer: Callable[[Any, Any], Any] = replace_value
        hint = hints.get(name)
        if hint is not None and typing.get_origin(hint) is Annotated:
            for meta in reversed(hint.__metadata__):
                if callable(meta) and not isinstance(meta, type):
                    reducer = meta
                    break
        info = state_cls.model_fields[name]
        for meta in reversed(info.metadata):
            if callable(meta) and not isinstance(meta, type):
                reducer = meta
                break
        out[name] = reducer
    return out
