"""The runtime: graph building and execution, state, errors.

``from tenxgraph.core import Agent, StateGraph, ToolNode, AgentState, Message`` works as in 10xGraph's
documentation; the names are resolved on first use (the graph package imports the storage
layer, which itself imports ``tenxgraph.core.config`` and ``tenxgraph.core.exceptions``, so an
eager import here would be circular).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the classes; at run time they load on first use
    from tenxgraph.core.graph import Agent, CompiledGraph, StateGraph, ToolNode
    from tenxgraph.core.state import AgentState, Message

__all__ = ["Agent", "AgentState", "CompiledGraph", "Message", "StateGraph", "ToolNode"]
_FROM_STATE = frozenset({"AgentState", "Message"})


def __getattr__(name: str) -> Any:
    if name in _FROM_STATE:
        from tenxgraph.core import state

        return getattr(state, name)
    if name in __all__:
        from tenxgraph.core import graph

        return getattr(graph, name)
    raise AttributeError(f"module 'tenxgraph.core' has no attribute {name!r}")
