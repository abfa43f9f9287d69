"""Dependency injection with InjectQ (10xGraph's ``StateGraph(container=...)`` and
``Inject[T]`` parameters).

A node or tool parameter whose default is ``injectq.Inject[T]`` receives the service bound to
``T`` in the graph's container (``StateGraph(container=...)``, else InjectQ's global
container ``InjectQ.get_instance()``), resolved when the node or tool is called. An unbound
service is ``None`` for a parameter annotated as optional (``T | None``) and an error
otherwise. At ``compile()`` the graph binds its own objects in that container, as 10xGraph
does (see :func:`bind_graph`). injectq is imported only by code that uses it: a graph whose
functions declare no ``Inject`` default and that has no container never imports it.
"""

from __future__ import annotations

import inspect
import sys
import types
import typing
from collections.abc import Callable
from typing import Any

from tenxgraph.core.exceptions import GraphError

__all__ = ["Injection", "bind_graph", "check_container", "injections_of", "resolve"]

#: ``(parameter name, service key, optional)`` of one ``Inject[T]`` parameter.
Injection = tuple[str, Any, bool]


def is_marker(default: Any) -> bool:
    """Whether ``default`` is an ``injectq.Inject[...]`` marker (checked without resolving it:
    the marker resolves itself on most attribute accesses)."""
    cls = type(default)
    return cls.__name__ == "Inject" and cls.__module__.startswith("injectq")


def _optional(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return "None" in annotation or annotation.startswith("Optional[")
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return type(None) in typing.get_args(annotation)
    return annotation is None


def injections_of(func: Callable[..., Any]) -> tuple[Injection, ...]:
    """The ``Inject[T]`` parameters of ``func`` (a function or callable object).

    Returns:
        ``(name, key, optional)`` per parameter, in signature order (empty when none).
    """
    target: Any = func
    if not inspect.isfunction(func) and not inspect.ismethod(func) and callable(func):
        target = type(func).__call__ if not isinstance(func, type) else func
    try:
        params = inspect.signature(target).parameters
    except (TypeError, ValueError):
        return ()
    found: list[Injection] = []
    for p in params.values():
        if p.default is p.empty or not is_marker(p.default):
            continue
        key = object.__getattribute__(p.default, "service_type")
        found.append((p.name, key, _optional(p.annotation)))
    return tuple(found)


def check_container(container: Any) -> Any:
    """``container`` when it is ``None`` or an ``injectq.InjectQ``.

    Raises:
        GraphError: ``GRAPH_001`` for anything else.
    """
    if container is None:
        return None
    if "injectq" in sys.modules:
        from injectq import InjectQ

        if isinstance(container, InjectQ):
            return container
    raise GraphError(
        f"StateGraph(container=...) takes an injectq.InjectQ container, got "
        f"{type(container).__name__}",
        error_code="GRAPH_001",
        context={"parameter": "container"},
    )


def container_of(builder: Any) -> Any:
    """The container a graph resolves from: its own, else InjectQ's current one."""
    own = getattr(builder, "container", None)
    if own is not None:
        return own
    from injectq import InjectQ

    return InjectQ.get_instance()


def resolve(builder: Any, wanted: tuple[Injection, ...], where: str) -> dict[str, Any]:
    """The keyword arguments for ``wanted``, resolved from ``builder``'s container.

    Args:
        builder: the ``StateGraph`` (``None`` outside a graph: the global container).
        wanted: from :func:`injections_of`.
        where: ``"node 'x'"`` / ``"tool 'y'"`` for error messages.

    Raises:
        GraphError: ``GRAPH_001`` when a non-optional service is not bound.
    """
    from injectq.utils.exceptions import DependencyNotFoundError

    container = container_of(builder)
    out: dict[str, Any] = {}
    for name, key, optional in wanted:
        try:
            out[name] = container.get(key)
        except DependencyNotFoundError:
            if optional:
                out[name] = None
                continue
            shown = getattr(key, "__name__", repr(key))
            raise GraphError(
                f"{where} asks for {name}=Inject[{shown}], but the container has no binding "
                f"for it; bind one (container.bind_instance({shown}, obj)) or annotate the "
                "parameter as optional",
                error_code="GRAPH_001",
                context={"parameter": name, "service": shown},
            ) from None
    return out


def _fresh_id(gen: Any) -> Any:
    """A new id from ``gen`` (a uuid4 string without one, or when it returns ``""``)."""
    import uuid

    if gen is not None:
        value = gen.generate()
        if inspect.isawaitable(value):
            close = getattr(value, "close", None)
            if close is not None:
                close()
            raise GraphError(
                "the graph's id generator is async; 'generated_id' cannot be resolved from "
                "the container synchronously (declare a node parameter named generated_id)",
                error_code="GRAPH_001",
                context={"binding": "generated_id"},
            )
        if value not in ("", None):
            return value
    return str(uuid.uuid4())


def bind_graph(app: Any) -> None:
    """Bind a compiled graph's objects in its container, as 10xGraph's ``compile()`` does.

    Bound (each under its base class, the checkpointer also under its own class):
    ``CompiledGraph``, ``StateGraph``, ``BaseCheckpointer``, ``CallbackManager``,
    ``BackgroundTaskManager``, and when the graph has one ``BaseContextManager``,
    ``BasePublisher``, ``BaseIDGenerator``; ``"generated_id_type"`` (the generator's id type,
    ``"string"`` without one) and the factories ``"generated_id"`` (a new id of the graph's
    generator per resolution), ``"get_node"`` (``name -> node function``, called with
    ``container.call_factory("get_node", name)``) and ``"get_entry_point_node"``. Nothing is done when the graph has no container and
    injectq was never imported (no code can ask for an injection then).
    """
    builder = app.builder
    if getattr(builder, "container", None) is None and "injectq" not in sys.modules:
        return
    from tenxgraph.runtime.publisher import BasePublisher
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer
    from tenxgraph.utils.background_task_manager import BackgroundTaskManager
    from tenxgraph.utils.callbacks import CallbackManager
    from tenxgraph.utils.id_generator import BaseIDGenerator

    from ..state.base_context import BaseContextManager
    from .compiled_graph import CompiledGraph
    from .state_graph import StateGraph

    container = container_of(builder)

    def bind(key: Any, value: Any) -> None:
        # A factory, not bind_instance: injectq caches a resolved instance binding for good,
        # so a graph compiled again (or another graph) could not replace it.
        container.bind_factory(key, lambda: value)

    bind(CompiledGraph, app)
    bind(StateGraph, builder)
    bind(BaseCheckpointer, app.checkpointer)
    if type(app.checkpointer) is not BaseCheckpointer:
        bind(type(app.checkpointer), app.checkpointer)
    if app.callback_manager is None:
        # The graph's own (empty) manager, so callbacks registered on the injected one run.
        app.callback_manager = CallbackManager()
    bind(CallbackManager, app.callback_manager)
    bind(BackgroundTaskManager, app.task_manager)
    if app.context_manager is not None:
        bind(BaseContextManager, app.context_manager)
    if app.publisher is not None:
        bind(BasePublisher, app.publisher)
    gen = app.id_generator
    if gen is not None:
        bind(BaseIDGenerator, gen)
    bind("generated_id_type", str(gen.id_type) if gen is not None else "string")
    container.bind_factory("generated_id", lambda: _fresh_id(gen))
    nodes = {name: node.func for name, node in app.node_objects.items()}
    entry = builder.entry_point
    container.bind_factory("get_node", lambda name: nodes[name])
    container.bind_factory("get_entry_point_node", lambda: nodes[entry])
