"""Graph building and execution: ``StateGraph``, ``CompiledGraph``, ``Agent``, ``ToolNode``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .compiled_graph import CompiledGraph
from .state_graph import StateGraph
from .stream import StreamChunk, StreamEvent

if TYPE_CHECKING:  # type checkers see the classes; at run time they load on first use
    from .agent import Agent
    from .tool_node import ToolNode

__all__ = ["Agent", "CompiledGraph", "StateGraph", "StreamChunk", "StreamEvent", "ToolNode"]


def __getattr__(name: str) -> Any:
    # Agent and ToolNode pull in the model adapters (httpx); import them on first use.
    if name == "Agent":
        from .agent import Agent

        return Agent
    if name == "ToolNode":
        from .tool_node import ToolNode

        return ToolNode
    raise AttributeError(name)
