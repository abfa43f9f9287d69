"""A graph node: a callable plus how to call it (which of ``state`` / ``config`` it declares)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio

from tenxgraph.core.exceptions import GraphError

__all__ = ["Node", "call_with_params"]


def _declared(func: Callable[..., Any]) -> tuple[bool, bool, bool]:
    """(wants_state, wants_config, is_async) for a function or callable object."""
    target = func
    if not inspect.isfunction(func) and not inspect.ismethod(func) and callable(func):
        target = func.__call__  # type: ignore[operator]
    try:
        params: Mapping[str, inspect.Parameter] = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return True, False, False
    injected = {name for _, name in _injections(func)}
    params = {k: v for k, v in params.items() if k not in injected}
    names = set(params)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params.values())
    wants_state = "state" in names or var_kw
    wants_config = "config" in names or var_kw
    if not wants_state and not wants_config:
        # 10xGraph passes (state, config) positionally to functions that name them otherwise.
        positional = [
            p
            for p in params.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        wants_state = len(positional) >= 1
        wants_config = len(positional) >= 2
    is_async = inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(func)
    return wants_state, wants_config, is_async


#: Parameters filled by the graph, by name (a parameter annotated ``BackgroundTaskManager`` is
#: filled whatever its name).
_INJECTED_NAMES = ("task_manager", "generated_id", "generated_id_type")


def _injections(func: Callable[..., Any]) -> tuple[tuple[str, str], ...]:
    """``(what, parameter name)`` for each parameter the graph fills: ``"task_manager"`` (the
    graph's ``BackgroundTaskManager``), ``"generated_id"`` (the run id),
    ``"generated_id_type"`` (the id generator's ``IDType`` value)."""
    target = func
    if not inspect.isfunction(func) and not inspect.ismethod(func) and callable(func):
        target = func.__call__  # type: ignore[operator]
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return ()
    from tenxgraph.utils.background_task_manager import BackgroundTaskManager

    found: list[tuple[str, str]] = []
    for p in params.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or p.name in ("state", "config"):
            continue
        ann = p.annotation
        if ann is BackgroundTaskManager or (
            isinstance(ann, str) and ann.rsplit(".", 1)[-1] == "BackgroundTaskManager"
        ):
            found.append(("task_manager", p.name))
        elif p.name in _INJECTED_NAMES:
            found.append((p.name, p.name))
    return tuple(found)


def _generator_kind(func: Callable[..., Any]) -> str | None:
    """``"async"`` for an async generator function, ``"sync"`` for a generator function,
    else ``None``."""
    target = func
    if not inspect.isfunction(func) and not inspect.ismethod(func) and callable(func):
        target = func.__call__  # type: ignore[operator]
    if inspect.isasyncgenfunction(target) or inspect.isasyncgenfunction(func):
        return "async"
    if inspect.isgeneratorfunction(target) or inspect.isgeneratorfunction(func):
        return "sync"
    return None


_DONE = object()


async def _iterate_sync_generator(gen: Any) -> Any:
    """Drive a sync generator from async code, each step in a worker thread (a step may
    block); the generator is closed in a worker thread when iteration stops early."""
    try:
        while True:
            item = await anyio.to_thread.run_sync(next, gen, _DONE)
            if item is _DONE:
                return
            yield item
    finally:
        await anyio.to_thread.run_sync(gen.close)


def _param_names(func: Callable[..., Any]) -> list[str]:
    try:
        return _param_names_cached(func)
    except TypeError:  # unhashable callable
        return _param_names_uncached(func)


@functools.lru_cache(maxsize=1024)
def _param_names_cached(func: Callable[..., Any]) -> list[str]:
    # Routers are called after every node: inspect each one once.
    return _param_names_uncached(func)


def _param_names_uncached(func: Callable[..., Any]) -> list[str]:
    target = func
    if not inspect.isfunction(func) and not inspect.ismethod(func) and callable(func):
        target = func.__call__  # type: ignore[operator]
    try:
        return list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return []


@dataclass(slots=True)
class Node:
    """A node of a :class:`~tenxgraph.core.graph.StateGraph`.

    Attributes:
        name: unique node name.
        func: a function (sync or async), an ``Agent``, a ``ToolNode`` or any callable.
        wants_state: the callable declares a ``state`` argument.
        wants_config: the callable declares a ``config`` argument.
        is_async: awaited on the event loop when ``True``; otherwise run in a worker thread.
        positional: ``state`` / ``config`` are passed positionally (the function names its
            parameters otherwise).
        generator: ``"async"`` for an ``async def`` that ``yield`` s, ``"sync"`` for a ``def``
            that ``yield`` s (each step runs in a worker thread), else ``None``. Such a node's
            items are streamed as they come (see ``open_generator``).
        inject: ``(what, parameter)`` pairs the graph fills by keyword: the graph's
            ``BackgroundTaskManager`` (a parameter annotated with it, or named
            ``task_manager``), ``generated_id`` (the run id) and ``generated_id_type`` (the
            id generator's ``IDType`` value, ``"string"`` without one).
        owner: the ``StateGraph`` the node belongs to (source of what is injected).
        di: the ``Inject[T]`` parameters, resolved from the graph's InjectQ container at each
            call (``tenxgraph.core.graph._inject``).
    """

    name: str
    func: Callable[..., Any]
    wants_state: bool
    wants_config: bool
    is_async: bool
    positional: bool
    generator: str | None = None
    inject: tuple[tuple[str, str], ...] = ()
    owner: Any = None
    di: tuple[Any, ...] = ()

    @classmethod
    def build(cls, name: str, func: Any, owner: Any = None) -> Node:
        """Inspect ``func`` once, at graph-building time.

        Args:
            name: the node name.
            func: the node's callable.
            owner: the ``StateGraph`` it is added to (``None`` outside one).

        Raises:
            GraphError: ``GRAPH_001`` when ``func`` is not callable.
        """
        if not callable(func):
            raise GraphError(
                f"node {name!r} must be a function, an Agent or a ToolNode, got {type(func).__name__}",
                error_code="GRAPH_001",
                context={"node": name},
            )
        if getattr(func, "_tenxgraph_node", False):
            # An Agent runs through its generator form (token deltas are streamed).
            gen = "async" if callable(getattr(func, "node_stream", None)) else None
            return cls(name, func, True, True, True, False, gen, owner=owner)
        ws, wc, ia = _declared(func)
        names = _param_names(func)
        positional = not ("state" in names or "config" in names)
        from ._inject import injections_of

        return cls(
            name,
            func,
            ws,
            wc,
            ia,
            positional,
            _generator_kind(func),
            _injections(func),
            owner,
            injections_of(func),
        )

    def _injected(self, config: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for what, param in self.inject:
            if what == "task_manager":
                values[param] = getattr(self.owner, "task_manager", None)
            elif what == "generated_id":
                values[param] = config.get("run_id")
            else:
                gen = getattr(self.owner, "id_generator", None)
                values[param] = str(gen.id_type) if gen is not None else "string"
        return values

    def _args(self, state: Any, config: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = self._base_args(state, config)
        if self.di:
            from ._inject import resolve

            # Resolved at each call (a factory binding gives a new value per call); raises
            # GraphError GRAPH_001 for a missing non-optional service.
            kwargs.update(resolve(self.owner, self.di, f"node {self.name!r}"))
        return args, kwargs

    def _base_args(
        self, state: Any, config: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.positional:
            extra = self._injected(config) if self.inject else {}
            if not self.wants_state:
                return (), extra
            return ((state, config) if self.wants_config else (state,)), extra
        kwargs: dict[str, Any] = self._injected(config) if self.inject else {}
        if self.wants_state:
            kwargs["state"] = state
        if self.wants_config:
            kwargs["config"] = config
        return (), kwargs

    def _in_container(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` run with the graph's container current (``InjectQ.get_instance()``)."""
        container = getattr(self.owner, "container", None)
        if container is None:
            return fn
        from injectq.core.context import ContainerContext

        def run_in(*a: Any, **kw: Any) -> Any:
            with ContainerContext.use(container):
                return fn(*a, **kw)

        return run_in

    def open_generator(self, state: Any, config: dict[str, Any]) -> Any:
        """Start a generator node and return an async iterator over what it yields.

        Only for nodes whose ``generator`` is set. Creating the generator runs none of its
        code; a sync generator's steps each run in a worker thread.
        """
        args, kwargs = self._args(state, config)
        if getattr(self.func, "_tenxgraph_node", False):
            # an Agent / ToolNode: it has the node_stream method the flag announces
            return cast(Any, self.func).node_stream(state=state, config=config)
        gen = self.func(*args, **kwargs)
        if self.generator == "async":
            return gen
        return _iterate_sync_generator(gen)

    async def __call__(self, state: Any, config: dict[str, Any]) -> Any:
        """Call the node with the arguments it declares; sync nodes run in a worker thread."""
        args, kwargs = self._args(state, config)
        if getattr(self.owner, "container", None) is not None:
            from injectq.core.context import ContainerContext

            if self.is_async:
                with ContainerContext.use(self.owner.container):
                    return await self.func(*args, **kwargs)
            call = self._in_container(self.func)
            return await anyio.to_thread.run_sync(functools.partial(call, *args, **kwargs))
        if self.is_async:
            return await self.func(*args, **kwargs)
        return await anyio.to_thread.run_sync(functools.partial(self.func, *args, **kwargs))


async def call_with_params(func: Callable[..., Any], state: Any, config: dict[str, Any]) -> Any:
    """Call a router or hook with ``state`` and, when it declares it, ``config``.

    Sync routers run inline (they must be quick: routing only inspects state).
    """
    names = _param_names(func)
    if "config" in names or (len(names) >= 2 and "state" not in names):
        result = func(state, config) if "state" not in names else func(state=state, config=config)
    else:
        result = func(state)
    if result is None or type(result) in _PLAIN:  # a router's usual answer: a name
        return result
    if inspect.isawaitable(result):
        result = await result
    return result


#: Result types that are never awaitable (checked before ``inspect.isawaitable``).
_PLAIN = frozenset({str, int, bool, float})
