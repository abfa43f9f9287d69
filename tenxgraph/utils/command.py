"""``Command``: a node's combined state update and routing decision (10xGraph / LangGraph)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

__all__ = ["Command"]

N = TypeVar("N")


@dataclass(slots=True)
class Command(Generic[N]):
    """Returned by a node to update state and choose the next node in one value.

    A bare ``-> Command`` annotation is enough: ``compile()`` only rejects nodes that appear in
    no edge at all, so a node reached only through ``Command(goto=...)`` needs an edge of its
    own (e.g. to ``END``). Annotating ``-> Command[Literal["a", "b"]]`` (as in LangGraph) also
    declares ``a`` and ``b`` as edges of the node.

    Attributes:
        update: what the node would otherwise return (``None``, a ``str``, a ``Message``, a list
            of them, a ``dict`` of field updates or a state object); applied after ``state``.
        goto: the next node's name (or ``END``); ``None`` follows the node's edges.
        graph: ``None`` for the current graph, or ``Command.PARENT`` for the parent graph.
            tenxgraph graphs do not nest, so the graph running the node is the outermost one
            and its own parent: ``Command.PARENT`` routes ``goto`` within it (a handoff to a
            node, or ``END``). Any other value is refused (``GraphError GRAPH_005``).
        state: a whole state object to apply first (its fields replace the current ones, its
            new messages are appended), as a node returning that state would.
        resume: not used by nodes; kept for LangGraph compatibility (answer an
            ``interrupt()`` with ``invoke({"resume": answer}, config)``).
    """

    #: Value of ``graph`` that targets the parent graph.
    PARENT: ClassVar[str] = "PARENT"

    update: Any = None
    goto: str | None = None
    graph: str | None = None
    state: Any = None
    resume: Any = field(default=None, repr=False)
