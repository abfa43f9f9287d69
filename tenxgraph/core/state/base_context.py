"""``BaseContextManager``: what an ``Agent`` with ``trim_context=True`` shows its model.

A context manager is given to ``StateGraph(context_manager=...)``. Before each model call, an
``Agent`` built with ``trim_context=True`` hands it a **copy** of the state and sends the model
the messages of the state it returns. The thread's stored history is not changed by trimming:
it keeps every message (unless the state's own reducer replaces them). A manager may also set
``context_summary`` on the state it returns; that change is written to the thread like any
node update (see ``SummaryContextManager``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from .agent_state import AgentState

__all__ = ["BaseContextManager"]

S = TypeVar("S", bound=AgentState)


class BaseContextManager(ABC, Generic[S]):
    """Base of the context managers (10xGraph-compatible; subclass it for your own strategy).

    Subclasses implement both :meth:`trim_context` and :meth:`atrim_context`; each receives a
    copy of the state whose ``context`` list is its own (mutating it in place, or assigning a
    new list, does not touch the stored thread) and returns the state to show the model.
    """

    @abstractmethod
    def trim_context(self, state: S) -> S:
        """Return ``state`` with ``context`` cut down to what the model should see.

        Args:
            state: a copy of the graph state (``context`` oldest first).

        Returns:
            The state to show the model (``state`` itself, changed, is fine).
        """

    @abstractmethod
    async def atrim_context(self, state: S) -> S:
        """Async twin of :meth:`trim_context` (the one the ``Agent`` calls).

        Args:
            state: a copy of the graph state.

        Returns:
            The state to show the model.
        """
