"""Invocation callbacks and input validators (10xGraph's ``CallbackManager``).

Give a :class:`CallbackManager` to ``graph.compile(callback_manager=...)``. Around each model
call of an ``Agent`` (``InvocationType.AI``) and each tool call of a ``ToolNode``
(``InvocationType.TOOL``) the runtime calls, in this order:

1. the input validators (``register_input_validator``; for ``AI`` only, before anything is
   sent): each gets copies of the newest user messages (the ones after the last
   assistant or tool message), in registration order; one raising stops the call (the run
   fails with that error and, when the Agent is the graph's first node, nothing of the
   input is stored);
2. the before-invoke callbacks of the type, in registration order, each given what the
   previous one returned (``AI``: the list of messages about to be sent; ``TOOL``: ``{"name",
   "args", "tool_call_id"}``); raising blocks the call;
3. the call itself;
4. on an exception, the on-error callbacks in registration order: the first that returns
   something other than ``None`` supplies the result instead (``AI``: a ``Message``, used as
   the model's answer; ``TOOL``: any tool return value); when all return ``None`` the error
   goes on as it would without callbacks;
5. the after-invoke callbacks in registration order, each given the previous output (``AI``:
   the assistant ``Message``; ``TOOL``: the tool's return value); what the last returns is the
   result.

A tool's result, callbacks included, is what the ledger records: a replay returns it without
calling the tool or its callbacks again. A model answer the runtime checkpointed is not asked
for again, so its callbacks do not run twice either. Callbacks may be sync or async callables
or instances of the base classes below. ``SKILL`` callbacks run (instead of ``TOOL`` ones) around
the skill tools ``activate_skill`` and ``read_skill_resource``. ``MCP`` exists for compatibility;
tenxgraph makes no such calls, so callbacks registered for it never run.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tenxgraph.utils.lifecycle import GraphLifecycleContext, GraphLifecycleHook, sync_hook_problem

__all__ = [
    "AfterInvokeCallback",
    "BaseValidator",
    "BeforeInvokeCallback",
    "CallbackContext",
    "CallbackManager",
    "GraphLifecycleContext",
    "GraphLifecycleHook",
    "InvocationType",
    "OnErrorCallback",
]


class InvocationType(StrEnum):
    """What kind of call a callback is for."""

    AI = "ai"
    TOOL = "tool"
    MCP = "mcp"
    INPUT_VALIDATION = "input_validation"
    SKILL = "skill"


@dataclass(slots=True)
class CallbackContext:
    """What a callback is told about the call.

    Attributes:
        invocation_type: the kind of call.
        node_name: the graph node making it.
        function_name: the tool's name (``TOOL``) or the model's name (``AI``).
        metadata: ``{"thread_id", "run_id"}`` of the run, plus ``tool_call_id`` for a tool.
    """

    invocation_type: InvocationType
    node_name: str
    function_name: str | None = None
    metadata: dict[str, Any] | None = field(default=None)


class BeforeInvokeCallback(ABC):
    """Runs before a call; returns the (possibly changed) input, or raises to block it."""

    @abstractmethod
    async def __call__(self, context: CallbackContext, input_data: Any) -> Any:
        """Args: context: the call. input_data: see the module docstring.

        Returns:
            The input to use (same shape as ``input_data``).
        """


class AfterInvokeCallback(ABC):
    """Runs after a call; returns the (possibly changed) output."""

    @abstractmethod
    async def __call__(self, context: CallbackContext, input_data: Any, output_data: Any) -> Any:
        """Args: context: the call. input_data: its input. output_data: its output.

        Returns:
            The output to use (same shape as ``output_data``).
        """


class OnErrorCallback(ABC):
    """Runs when a call raised; returns a replacement result or ``None`` to let it fail."""

    @abstractmethod
    async def __call__(self, context: CallbackContext, input_data: Any, error: Exception) -> Any:
        """Args: context: the call. input_data: its input. error: what it raised.

        Returns:
            ``None`` (the error goes on) or the result to use instead.
        """


class BaseValidator(ABC):
    """An input validator: checks the newest user messages before a model call."""

    @abstractmethod
    async def validate(self, messages: list[Any]) -> bool:
        """Check ``messages`` (copies; a lenient validator may sanitise them in place).

        Args:
            messages: the newest user messages, oldest first.

        Returns:
            ``True`` when they may be sent.

        Raises:
            tenxgraph.utils.validators.ValidationError: to refuse them.
        """


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _check_type(kind: Any) -> InvocationType:
    try:
        return InvocationType(kind)
    except ValueError:
        raise ValueError(
            f"unknown invocation type {kind!r}; use one of {[t.value for t in InvocationType]}"
        ) from None


class CallbackManager:
    """The registry of callbacks and validators of a compiled graph (module docstring)."""

    def __init__(self) -> None:
        self._before: dict[InvocationType, list[Callable[..., Any]]] = {
            t: [] for t in InvocationType
        }
        self._after: dict[InvocationType, list[Callable[..., Any]]] = {
            t: [] for t in InvocationType
        }
        self._error: dict[InvocationType, list[Callable[..., Any]]] = {
            t: [] for t in InvocationType
        }
        self._validators: list[BaseValidator] = []
        self._lifecycle: list[GraphLifecycleHook] = []

    def __repr__(self) -> str:
        counts = {
            t.value: len(self._before[t]) + len(self._after[t]) + len(self._error[t])
            for t in InvocationType
            if self._before[t] or self._after[t] or self._error[t]
        }
        return f"CallbackManager(callbacks={counts}, validators={len(self._validators)})"

    def _register(self, table: dict[InvocationType, list[Any]], kind: Any, callback: Any) -> None:
        if not callable(callback):
            raise TypeError(f"a callback must be callable, got {type(callback).__name__}")
        table[_check_type(kind)].append(callback)

    def register_before_invoke(
        self, invocation_type: InvocationType, callback: Callable[..., Any]
    ) -> None:
        """Add a callback ``(context, input_data) -> input_data`` run before each call of
        ``invocation_type``.

        Raises:
            TypeError: ``callback`` is not callable.
            ValueError: unknown invocation type.
        """
        self._register(self._before, invocation_type, callback)

    def register_after_invoke(
        self, invocation_type: InvocationType, callback: Callable[..., Any]
    ) -> None:
        """Add a callback ``(context, input_data, output_data) -> output_data`` run after each
        call of ``invocation_type``.

        Raises:
            TypeError: ``callback`` is not callable.
            ValueError: unknown invocation type.
        """
        self._register(self._after, invocation_type, callback)

    def register_on_error(
        self, invocation_type: InvocationType, callback: Callable[..., Any]
    ) -> None:
        """Add a callback ``(context, input_data, error) -> result | None`` run when a call of
        ``invocation_type`` raises.

        Raises:
            TypeError: ``callback`` is not callable.
            ValueError: unknown invocation type.
        """
        self._register(self._error, invocation_type, callback)

    def register_input_validator(self, validator: BaseValidator) -> None:
        """Add a validator run before each model call.

        Raises:
            TypeError: ``validator`` has no async ``validate(messages)`` method.
        """
        if not callable(getattr(validator, "validate", None)):
            raise TypeError(
                f"an input validator needs a validate(messages) method, got {type(validator).__name__}"
            )
        self._validators.append(validator)

    def register_lifecycle_hook(self, hook: GraphLifecycleHook) -> None:
        """Add a graph lifecycle hook (``tenxgraph.utils.lifecycle``), called after the one
        given to ``compile(lifecycle_hook=...)``, in registration order. Register it before
        ``compile()``: a compiled graph keeps the hooks it was compiled with.

        Raises:
            TypeError: ``hook`` is not a ``GraphLifecycleHook``, or overrides a hook method
                with a plain ``def`` (they are ``async def``).
        """
        if not isinstance(hook, GraphLifecycleHook):
            raise TypeError(
                f"a lifecycle hook must be a GraphLifecycleHook, got {type(hook).__name__}"
            )
        problem = sync_hook_problem(hook)
        if problem is not None:
            raise TypeError(problem)
        self._lifecycle.append(hook)

    @property
    def lifecycle_hooks(self) -> list[GraphLifecycleHook]:
        """The registered lifecycle hooks, in registration order (a copy)."""
        return list(self._lifecycle)

    @property
    def validators(self) -> list[BaseValidator]:
        """The registered validators, in registration order (a copy)."""
        return list(self._validators)

    def has_callbacks(self, invocation_type: InvocationType) -> bool:
        """Whether any callback is registered for ``invocation_type``."""
        t = _check_type(invocation_type)
        return bool(self._before[t] or self._after[t] or self._error[t])

    async def execute_validators(self, messages: list[Any]) -> bool:
        """Run every validator on ``messages``, in registration order.

        Returns:
            ``True`` when all accept (a validator returning ``False`` makes it ``False``).

        Raises:
            Exception: what a validator raised (validators raise ``ValidationError``).
        """
        ok = True
        for validator in self._validators:
            ok = bool(await _call(validator.validate, messages)) and ok
        return ok

    async def execute_before_invoke(self, context: CallbackContext, input_data: Any) -> Any:
        """Run the before-invoke callbacks of ``context.invocation_type`` in order.

        Returns:
            The input after every callback (each gets the previous one's return).
        """
        for cb in self._before[_check_type(context.invocation_type)]:
            input_data = await _call(cb, context, input_data)
        return input_data

    async def execute_after_invoke(
        self, context: CallbackContext, input_data: Any, output_data: Any
    ) -> Any:
        """Run the after-invoke callbacks of ``context.invocation_type`` in order.

        Returns:
            The output after every callback.
        """
        for cb in self._after[_check_type(context.invocation_type)]:
            output_data = await _call(cb, context, input_data, output_data)
        return output_data

    async def execute_on_error(
        self, context: CallbackContext, input_data: Any, error: Exception
    ) -> Any:
        """Run the on-error callbacks of ``context.invocation_type`` until one recovers.

        Returns:
            The first non-``None`` result, or ``None`` when none recovers.
        """
        for cb in self._error[_check_type(context.invocation_type)]:
            result = await _call(cb, context, input_data, error)
            if result is not None:
                return result
        return None
