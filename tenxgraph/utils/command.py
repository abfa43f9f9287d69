"""``Command``: a node's combined state update and routing decision (10xGraph / LangGraph)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Command"]

N = TypeVar("N")


@dataclass(slots=True)
class Command(Generic[N]):
    """Returned by a node to update state and choose the next node in one value.

    Annotate a node that routes with ``Command`` as ``-> Command[Literal["a", "b"]]`` so
    ``compile()`` knows where it may go (as in LangGraph); with a bare ``-> Command`` the graph
    skips its orphan-node check.

    Attributes:
        update: what the node would otherwise return (``None``, a ``str``, a ``Message``, a list
            of them, a ``dict`` of field updates or a state object).
        goto: the next node's name (or ``END``); ``None`` follows the node's edges.
        graph: reserved for sub-graph handoff (``None``: this graph).
        resume: not used by nodes; kept for API compatibility.
    """

    update: Any = None
    goto: str | None = None
    graph: str | None = None
    resume: Any = field(default=None, repr=False)
