"""``BaseAgent``: the base class of agent nodes (10xGraph's extension point for bringing
another model client).

A subclass implements :meth:`BaseAgent.execute`; an instance is a graph node like a function
(``graph.add_node("MAIN", MyAgent())``): the graph calls ``execute(state, config)`` and
treats what it returns like a node's return value (a ``Message``, a list of them, a ``str``,
a dict of state updates or a ``Command``). tenxgraph's own ``Agent`` is a ``BaseAgent``.

Durability is the graph's: the node's result is checkpointed like any node's, and a node cut
off by a crash runs again on resume, so a subclass calling a model of its own asks it again
for an answer that was never checkpointed (use a ``ToolNode`` for side effects that must
happen once).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["BaseAgent"]


class BaseAgent(ABC):
    """An agent node: override :meth:`execute`."""

    @abstractmethod
    async def execute(self, state: Any, config: dict[str, Any]) -> Any:
        """Produce this node's result.

        Args:
            state: the graph state (an ``AgentState`` or subclass).
            config: the run's config (``thread_id``, ``run_id``, ``user_id``, ...).

        Returns:
            What a node returns: a ``Message`` (usually the assistant's answer), a list of
            messages, a ``str``, a dict of state updates or a ``Command``.
        """

    async def __call__(self, state: Any, config: dict[str, Any] | None = None) -> Any:
        """Run :meth:`execute` (how the graph calls the node).

        Args:
            state: the graph state.
            config: the run's config (``{}`` when ``None``).

        Returns:
            What :meth:`execute` returns.
        """
        return await self.execute(state, config if config is not None else {})
