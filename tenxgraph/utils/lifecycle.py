"""Graph lifecycle hooks (10xGraph's ``GraphLifecycleHook`` / ``GraphLifecycleContext``).

A hook observes one graph run at its structural points; give it to
``graph.compile(lifecycle_hook=...)`` or ``CallbackManager.register_lifecycle_hook(...)``.
Within one run the runtime calls, in this order:

- ``on_resume`` when the run continues a paused thread (``interrupt()``, ``interrupt_before`` /
  ``interrupt_after`` or a stop), before anything else of the run;
- ``on_graph_start`` once, before the first node runs (after the input is merged);
- per node: ``on_state_update`` after the node's result is merged, then, when the node ended
  the run, ``on_graph_end``; a pause calls ``on_interrupt`` instead;
- ``on_checkpoint`` before every write of a checkpoint (after the hooks above);
- ``on_graph_error`` when an exception escapes the run after ``on_graph_start``; for a failing
  node it runs before the error state is checkpointed.

Every method may return a changed state (``None`` keeps the given one); the runtime keeps its
own bookkeeping fields of ``execution_meta`` (status, step, current node, run id, pause) and
takes everything else, ``execution_meta.internal_data`` included, from the returned state. An
exception raised by a hook fails the run like a node error (the step it was called for is not
written; the thread is checkpointed with status ``error``), except from ``on_graph_error``: the run's own error is raised whatever that
hook does (a hook exception there is logged).

The methods must be ``async def`` as in 10xGraph's reference: a hook overriding one with a
plain ``def`` is refused when it is registered, naming the method.

Hooks are not recorded in the tool ledger: after a crash, the steps run again call their hooks
again (at-least-once, like the publisher).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenxgraph.core.state import AgentState, Message

__all__ = ["GraphLifecycleContext", "GraphLifecycleHook", "non_async_methods", "sync_hook_problem"]

#: The hook methods, in the order the module docstring lists them.
HOOK_METHODS = (
    "on_resume",
    "on_graph_start",
    "on_state_update",
    "on_graph_end",
    "on_interrupt",
    "on_checkpoint",
    "on_graph_error",
)


def non_async_methods(hook: object) -> list[str]:
    """The hook methods ``hook``'s class overrides with something other than ``async def``.

    Args:
        hook: a ``GraphLifecycleHook``.

    Returns:
        Their names, in :data:`HOOK_METHODS` order (empty when every override is async).
    """
    out = []
    for name in HOOK_METHODS:
        impl = getattr(type(hook), name, None)
        if impl is not getattr(GraphLifecycleHook, name) and not inspect.iscoroutinefunction(impl):
            out.append(name)
    return out


def sync_hook_problem(hook: object) -> str | None:
    """Why ``hook`` cannot be registered because of plain ``def`` hook methods, or ``None``.

    Args:
        hook: a ``GraphLifecycleHook``.

    Returns:
        A message naming the class and each such method, or ``None`` when all are async.
    """
    names = non_async_methods(hook)
    if not names:
        return None
    which = ", ".join(f"{type(hook).__name__}.{n}" for n in names)
    return (
        f"lifecycle hook methods are coroutines: {which} must be written 'async def' "
        "(the runtime awaits them; run blocking work with anyio.to_thread.run_sync inside)"
    )


@dataclass(slots=True)
class GraphLifecycleContext:
    """What a lifecycle hook is told about the run.

    Attributes:
        config: the run's config dict (``thread_id``, ``run_id``, ``user_id``, ...).
        timestamp: the run's start time, ISO 8601 UTC (``config["timestamp"]``).
        metadata: extra context (``None`` unless the application set one).
    """

    config: dict[str, Any]
    timestamp: str
    metadata: dict[str, Any] | None = field(default=None)

    @property
    def thread_id(self) -> str | None:
        """The run's thread id (``config["thread_id"]``), or ``None``."""
        value = self.config.get("thread_id")
        return None if value is None else str(value)

    @property
    def run_id(self) -> str | None:
        """The run's id (``config["run_id"]``), or ``None``."""
        value = self.config.get("run_id")
        return None if value is None else str(value)


class GraphLifecycleHook:
    """Base class of graph lifecycle hooks: override the methods you need (the others do
    nothing). Each method is ``async``; see the module docstring for when each is called."""

    async def on_graph_start(
        self, context: GraphLifecycleContext, state: AgentState
    ) -> AgentState | None:
        """Called once per run before its first node.

        Args:
            context: the run.
            state: the state the first node will receive (input merged).

        Returns:
            A state to start from instead, or ``None``.
        """
        return None

    async def on_graph_end(
        self,
        context: GraphLifecycleContext,
        final_state: AgentState,
        messages: list[Message],
        total_steps: int,
    ) -> AgentState | None:
        """Called when the run completed, before its last checkpoint is written.

        Args:
            context: the run.
            final_state: the completed state (status ``completed``).
            messages: the messages this run produced (not its input), oldest first.
            total_steps: the thread's step counter after the run.

        Returns:
            The state to persist and return instead, or ``None``.
        """
        return None

    async def on_graph_error(
        self,
        context: GraphLifecycleContext,
        error: Exception,
        partial_state: AgentState,
        messages: list[Message],
        step: int,
        node_name: str,
    ) -> tuple[AgentState, str] | None:
        """Called when an exception escapes the run; it cannot suppress it.

        Args:
            context: the run.
            error: the exception the caller will get.
            partial_state: the state with status ``error`` that is about to be checkpointed
                (for errors that leave the thread unchanged, the last state reached).
            messages: the messages this run produced before the error.
            step: the step at which it failed.
            node_name: the node that failed (or was about to run).

        Returns:
            ``(state, message)`` to checkpoint that state with ``message`` as its
            ``execution_meta.error`` instead, or ``None``.
        """
        return None

    async def on_interrupt(
        self,
        context: GraphLifecycleContext,
        interrupted_node: str,
        interrupt_type: str,
        state: AgentState,
    ) -> AgentState | None:
        """Called when the run pauses, before the paused state is checkpointed.

        Args:
            context: the run.
            interrupted_node: the node the run paused at.
            interrupt_type: ``"before"`` / ``"after"`` (``interrupt_before`` /
                ``interrupt_after``), ``"interrupt"`` (a node called ``interrupt()``) or
                ``"stop"`` (a stop request).
            state: the paused state.

        Returns:
            The state to persist instead, or ``None``.
        """
        return None

    async def on_resume(
        self,
        context: GraphLifecycleContext,
        resumed_node: str,
        state: AgentState,
        resume_data: dict[str, Any],
    ) -> AgentState | None:
        """Called when a run continues a paused thread, before it runs anything.

        Args:
            context: the run.
            resumed_node: the node the thread is paused at.
            state: the paused state as loaded.
            resume_data: what the caller sent: ``"resume"`` (the answer to ``interrupt()``),
                ``"messages"`` and ``"state"`` when given. Changes made in place are used (a
                changed ``"resume"`` is the answer the node receives) and copied to
                ``config["resume_data"]``.

        Returns:
            The state to continue from instead, or ``None``.
        """
        return None

    async def on_checkpoint(
        self,
        context: GraphLifecycleContext,
        state: AgentState,
        messages: list[Message],
        is_context_trimmed: bool,
    ) -> tuple[AgentState, list[Message]] | AgentState | None:
        """Called before each checkpoint write.

        Args:
            context: the run.
            state: the state about to be written.
            messages: the messages of ``state.context`` new since the last checkpoint (all of
                it when the context was replaced).
            is_context_trimmed: always ``False`` in tenxgraph: a context manager trims only
                what the model sees, never the stored state.

        Returns:
            ``None`` (write unchanged), a state to write instead, or ``(state, messages)``: the
            state written with ``messages`` in place of the new ones (to drop or redact them).
        """
        return None

    async def on_state_update(
        self,
        context: GraphLifecycleContext,
        node_name: str,
        old_state: AgentState,
        new_state: AgentState,
        step: int,
    ) -> AgentState | None:
        """Called after each node's result is merged.

        Args:
            context: the run.
            node_name: the node that ran.
            old_state: a deep copy of the state before it ran.
            new_state: the state after it (what the next node receives).
            step: the step the node ran at.

        Returns:
            The state to go on with instead, or ``None``.
        """
        return None
