"""Calls the graph lifecycle hooks of a run (``tenxgraph.utils.lifecycle``).

The runner holds one :class:`LifecycleHooks` per compiled graph with hooks (``None`` without
any, so a graph without hooks pays one ``is None`` test per call point). Each method calls the
hooks in order (``compile(lifecycle_hook=...)`` first, then the callback manager's, in
registration order), each given what the previous one returned, and checks what they return.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.utils.lifecycle import (
    GraphLifecycleContext,
    GraphLifecycleHook,
    sync_hook_problem,
)

__all__ = ["LifecycleHooks", "build_hooks"]

log = logging.getLogger("tenxgraph.lifecycle")

#: ``execution_meta`` fields the runtime owns: a hook's returned state never changes them.
_RUNTIME_META = (
    "status",
    "step",
    "current_node",
    "run_id",
    "interrupt_node",
    "interrupt_reason",
    "interrupt_data",
    "error",
)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _marks_failure(
    name: str,
) -> Callable[[Callable[_P, Awaitable[_R]]], Callable[_P, Awaitable[_R]]]:
    """Record on the run (``run.failed_hook``) that hook method ``name`` raised, so the runner
    fails the run like a node error (status ``error`` checkpointed, ``on_graph_error``)."""

    def wrap(fn: Callable[_P, Awaitable[_R]]) -> Callable[_P, Awaitable[_R]]:
        @functools.wraps(fn)
        async def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return await fn(*args, **kwargs)
            except Exception:
                run: Any = args[1]  # (self, run, ...)
                run.failed_hook = name
                raise

        return call

    return wrap


def build_hooks(lifecycle_hook: Any, callback_manager: Any) -> LifecycleHooks | None:
    """The hooks of a compiled graph, or ``None`` when it has none.

    Args:
        lifecycle_hook: ``compile(lifecycle_hook=...)`` (``None`` or a ``GraphLifecycleHook``).
        callback_manager: ``compile(callback_manager=...)`` (``None`` or a ``CallbackManager``).

    Returns:
        The dispatcher, or ``None``.

    Raises:
        GraphError: ``GRAPH_001`` when ``lifecycle_hook`` is not a ``GraphLifecycleHook`` or
            overrides a hook method with a plain ``def``.
    """
    from tenxgraph.core.exceptions import GraphError

    hooks: list[GraphLifecycleHook] = []
    if lifecycle_hook is not None:
        if not isinstance(lifecycle_hook, GraphLifecycleHook):
            raise GraphError(
                "compile(lifecycle_hook=...) takes a tenxgraph.utils.callbacks."
                f"GraphLifecycleHook, got {type(lifecycle_hook).__name__}",
                error_code="GRAPH_001",
                context={"parameter": "lifecycle_hook"},
            )
        problem = sync_hook_problem(lifecycle_hook)
        if problem is not None:
            raise GraphError(
                f"compile(lifecycle_hook=...): {problem}",
                error_code="GRAPH_001",
                context={"parameter": "lifecycle_hook"},
            )
        hooks.append(lifecycle_hook)
    if callback_manager is not None:
        hooks.extend(callback_manager.lifecycle_hooks)
    return LifecycleHooks(hooks) if hooks else None


def _overrides(hook: GraphLifecycleHook, name: str) -> bool:
    return getattr(type(hook), name) is not getattr(GraphLifecycleHook, name)


def _keep_meta(returned: Any, given: AgentState, hook: str) -> AgentState:
    """``returned`` with the runtime's ``execution_meta`` fields of ``given``."""
    if returned is None:
        return given
    if not isinstance(returned, type(given)):
        raise ValidationError(
            f"the lifecycle hook {hook} returned a {type(returned).__name__}; return None or a "
            f"{type(given).__name__}",
            context={"hook": hook},
        )
    meta = given.execution_meta
    fields = {k: getattr(meta, k) for k in _RUNTIME_META}
    new_meta = returned.execution_meta.model_copy(update=fields)
    return returned.model_copy(update={"execution_meta": new_meta})


class LifecycleHooks:
    """The lifecycle hooks of one compiled graph (see the module docstring)."""

    def __init__(self, hooks: Sequence[GraphLifecycleHook]) -> None:
        self.hooks = list(hooks)
        self._by_method = {
            name: [h for h in self.hooks if _overrides(h, name)]
            for name in (
                "on_graph_start",
                "on_graph_end",
                "on_graph_error",
                "on_interrupt",
                "on_resume",
                "on_checkpoint",
                "on_state_update",
            )
        }

    @staticmethod
    def context(run: Any) -> GraphLifecycleContext:
        """The (cached) context object of ``run``."""
        ctx = getattr(run, "lifecycle_ctx", None)
        if ctx is None:
            raw = run.rc.raw
            ctx = GraphLifecycleContext(config=raw, timestamp=str(raw.get("timestamp") or ""))
            run.lifecycle_ctx = ctx
        return ctx

    @_marks_failure("on_graph_start")
    async def start(self, run: Any, state: AgentState) -> AgentState:
        """``on_graph_start``; returns the state to start from."""
        ctx = self.context(run)
        for hook in self._by_method["on_graph_start"]:
            state = _keep_meta(await hook.on_graph_start(ctx, state), state, "on_graph_start")
        return state

    @_marks_failure("on_resume")
    async def resume(
        self, run: Any, node: str, state: AgentState, resume_data: dict[str, Any]
    ) -> AgentState:
        """``on_resume``; ``resume_data`` may be changed in place by the hooks."""
        ctx = self.context(run)
        for hook in self._by_method["on_resume"]:
            state = _keep_meta(
                await hook.on_resume(ctx, node, state, resume_data), state, "on_resume"
            )
        run.rc.raw["resume_data"] = resume_data
        return state

    @_marks_failure("on_state_update")
    async def state_update(
        self, run: Any, node: str, old: AgentState, new: AgentState, step: int
    ) -> AgentState:
        """``on_state_update``; returns the state to go on with."""
        hooks = self._by_method["on_state_update"]
        if not hooks:
            return new
        ctx = self.context(run)
        old_copy = old.model_copy(deep=True)
        for hook in hooks:
            new = _keep_meta(
                await hook.on_state_update(ctx, node, old_copy, new, step), new, "on_state_update"
            )
        return new

    @_marks_failure("on_graph_end")
    async def end(
        self, run: Any, state: AgentState, messages: list[Message], total_steps: int
    ) -> AgentState:
        """``on_graph_end``; returns the state to persist."""
        ctx = self.context(run)
        for hook in self._by_method["on_graph_end"]:
            state = _keep_meta(
                await hook.on_graph_end(ctx, state, list(messages), total_steps),
                state,
                "on_graph_end",
            )
        return state

    @_marks_failure("on_interrupt")
    async def interrupt(self, run: Any, node: str, kind: str, state: AgentState) -> AgentState:
        """``on_interrupt``; returns the state to persist."""
        ctx = self.context(run)
        for hook in self._by_method["on_interrupt"]:
            state = _keep_meta(
                await hook.on_interrupt(ctx, node, kind, state), state, "on_interrupt"
            )
        return state

    @_marks_failure("on_checkpoint")
    async def checkpoint(self, run: Any, state: AgentState, prev: AgentState | None) -> AgentState:
        """``on_checkpoint``; returns the state to write.

        Args:
            run: the run.
            state: the state about to be written.
            prev: the state of the previous checkpoint (``None`` for a new thread).
        """
        hooks = self._by_method["on_checkpoint"]
        if not hooks:
            return state
        ctx = self.context(run)
        for hook in hooks:
            base = _new_since(state.context, None if prev is None else prev.context)
            new_msgs = list(state.context[base:])
            got = await hook.on_checkpoint(ctx, state, new_msgs, False)
            if isinstance(got, tuple):
                if len(got) != 2 or not isinstance(got[1], list):
                    raise ValidationError(
                        "the lifecycle hook on_checkpoint returned a tuple that is not "
                        "(state, list of messages)",
                        context={"hook": "on_checkpoint"},
                    )
                kept = _keep_meta(got[0], state, "on_checkpoint")
                for m in got[1]:
                    if not isinstance(m, Message):
                        raise ValidationError(
                            "the lifecycle hook on_checkpoint returned a message list holding a "
                            f"{type(m).__name__}",
                            context={"hook": "on_checkpoint"},
                        )
                from tenxgraph.core.state.reducers import replace_messages

                ctx_list = list(kept.context[:base]) + list(got[1])
                state = kept.model_copy(update={"context": replace_messages(None, ctx_list)})
            else:
                state = _keep_meta(got, state, "on_checkpoint")
        return state

    async def error(
        self,
        run: Any,
        exc: Exception,
        state: AgentState,
        messages: list[Message],
        step: int,
        node: str,
    ) -> tuple[AgentState, str | None]:
        """``on_graph_error``: never raises (a failing hook is logged).

        Returns:
            ``(state, message)``: the state to checkpoint and the error message to store
            (``None``: the runtime's own).
        """
        ctx = self.context(run)
        message: str | None = None
        for hook in self._by_method["on_graph_error"]:
            try:
                got = await hook.on_graph_error(ctx, exc, state, list(messages), step, node)
                if got is None:
                    continue
                if not (isinstance(got, tuple) and len(got) == 2 and isinstance(got[1], str)):
                    raise ValidationError(
                        "the lifecycle hook on_graph_error must return None or (state, str)",
                        context={"hook": "on_graph_error"},
                    )
                state = _keep_meta(got[0], state, "on_graph_error")
                message = got[1]
            except Exception as hook_exc:  # noqa: BLE001 - the run's own error is what is raised
                log.warning(
                    "lifecycle hook %s.on_graph_error raised %s; the run's error is raised",
                    type(hook).__name__,
                    type(hook_exc).__name__,
                )
        return state, message


def _new_since(context: list[Message], prev: list[Message] | None) -> int:
    """How many leading messages of ``context`` the previous checkpoint already held: its
    length when ``context`` extends it, else 0 (the context was replaced)."""
    if not prev:
        return 0
    n = len(prev)
    if len(context) >= n and context[n - 1].message_id == prev[-1].message_id:
        return n
    return 0
