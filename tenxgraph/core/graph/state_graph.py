"""``StateGraph``: the graph builder (10xGraph-compatible)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from tenxgraph.core.exceptions import GraphError, UnsupportedArgumentError, check_arguments
from tenxgraph.core.state import AgentState
from tenxgraph.core.state.base_context import BaseContextManager
from tenxgraph.utils.background_task_manager import BackgroundTaskManager
from tenxgraph.utils.command import Command
from tenxgraph.utils.constants import END, START
from tenxgraph.utils.id_generator import BaseIDGenerator

from .node import Node

if TYPE_CHECKING:
    from tenxgraph.runtime.publisher import BasePublisher
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer
    from tenxgraph.storage.media.storage.base import BaseMediaStore
    from tenxgraph.utils.lifecycle import GraphLifecycleHook

    from .compiled_graph import CompiledGraph

__all__ = ["ConditionalEdge", "StateGraph"]

_log = logging.getLogger(__name__)

StateT = TypeVar("StateT", bound=AgentState)

#: Documented 10xGraph constructor arguments whose features tenxgraph does not provide.
_STATEGRAPH_NOT_SUPPORTED: dict[str, str] = {}

#: Documented 10xGraph ``compile()`` arguments whose features tenxgraph does not provide.
_COMPILE_NOT_SUPPORTED = {
    "store": "long-term memory stores (BaseStore, Qdrant, Mem0) are not part of tenxgraph",
}

#: Run settings some 10xGraph pages pass to ``compile()``; the graph reference makes them
#: run-config keys.
_COMPILE_HINTS = {
    "recursion_limit": "it is a run setting: pass config={'recursion_limit': N} to invoke/ainvoke",
    "execution_timeout": "deadlines are run settings: pass config={'node_timeout': seconds} to "
    "invoke/ainvoke",
}


@dataclass(slots=True)
class ConditionalEdge:
    """A router attached to a node: ``condition(state[, config])`` returns a key; ``path_map``
    maps keys to node names (without one, the key is the node name)."""

    condition: Callable[..., Any]
    path_map: dict[Any, str] | None


class StateGraph(Generic[StateT]):
    """Builder of an agent graph; ``compile()`` returns a runnable :class:`CompiledGraph`.

    Generic in its state class as in 10xGraph: ``StateGraph[MyState](MyState())`` is the same
    as ``StateGraph(MyState())`` (the subscript is for type checkers).

    Args:
        state: the initial state: an instance (copied for each new thread) or a class
            (instantiated with defaults); default ``AgentState``.
        context_manager: what an ``Agent`` with ``trim_context=True`` shows its model: a
            ``BaseContextManager`` (``MessageContextManager``, ``SummaryContextManager`` or
            your own); ``None`` (default) for none.
        id_generator: a ``BaseIDGenerator`` that makes the ``thread_id`` of a run without one
            and the ``run_id`` of every invocation (``tenxgraph.utils.id_generator``); default
            ``None``: uuid4 strings.
        publisher: a ``BasePublisher`` that receives the events of every run
            (``tenxgraph.runtime.publisher``; ``OtelPublisher`` makes them spans).
        container: an ``injectq.InjectQ`` container: node and tool parameters declared
            ``name: T = Inject[T]`` receive what it binds to ``T``, and ``compile()`` binds the
            graph's objects in it (``tenxgraph.core.graph._inject``); it is made InjectQ's
            current container (``InjectQ.get_instance()`` returns it, also inside the graph's
            nodes). Default ``None``: InjectQ's global container.
        **kwargs: nothing else is accepted (``GRAPH_009``).

    Attributes:
        task_manager (BackgroundTaskManager): this graph's background tasks; injected into
            nodes that declare it and shut down by the compiled graph's ``aclose()``.

    Raises:
        GraphError: ``GRAPH_001`` when ``state`` is not an ``AgentState`` class or instance,
            ``context_manager`` is not a ``BaseContextManager``, ``id_generator`` is not a
            ``BaseIDGenerator``, ``publisher`` not a ``BasePublisher`` or ``container`` not
            an ``injectq.InjectQ``.
        UnsupportedArgumentError: ``GRAPH_009`` for an unknown keyword argument,
            ``GRAPH_010`` for a documented argument whose feature is not provided.

    Execution is one node at a time: after a node, a ``Command.goto`` decides the next node,
    else its conditional edge, else its static edge; a node with none of these ends the run.
    """

    def __init__(
        self,
        state: AgentState | type[AgentState] | None = None,
        context_manager: BaseContextManager[Any] | None = None,
        id_generator: BaseIDGenerator | None = None,
        publisher: BasePublisher | None = None,
        container: Any = None,
        **kwargs: Any,
    ) -> None:
        check_arguments(
            "StateGraph",
            kwargs,
            ("state", "context_manager", "id_generator", "publisher", "container"),
            _STATEGRAPH_NOT_SUPPORTED,
        )
        from ._inject import check_container

        #: the injectq container of ``Inject[T]`` parameters (``None``: InjectQ's global one)
        self.container = check_container(container)
        if self.container is not None:
            self.container.activate()
        if context_manager is not None and not isinstance(context_manager, BaseContextManager):
            raise GraphError(
                "StateGraph(context_manager=...) takes a BaseContextManager (e.g. "
                f"MessageContextManager(max_messages=10)), got {type(context_manager).__name__}",
                error_code="GRAPH_001",
                context={"parameter": "context_manager"},
            )
        self.context_manager = context_manager
        self.id_generator = _check_id_generator(id_generator)
        #: the publisher of compiled graphs' events (10xGraph's attribute name)
        self._publisher = _check_publisher(publisher)
        self.task_manager = BackgroundTaskManager()
        if state is None:
            state = AgentState
        if isinstance(state, type):
            if not issubclass(state, AgentState):
                raise GraphError(
                    "StateGraph(state=...) takes an AgentState subclass or instance",
                    error_code="GRAPH_001",
                )
            self.state_class: type[AgentState] = state
            self.initial_state: AgentState = state()
        elif isinstance(state, AgentState):
            self.state_class = type(state)
            self.initial_state = state
        else:
            raise GraphError(
                f"StateGraph(state=...) takes an AgentState subclass or instance, got {type(state).__name__}",
                error_code="GRAPH_001",
            )
        self.nodes: dict[str, Node] = {}
        self.edges: dict[str, str] = {}
        self.conditional_edges: dict[str, ConditionalEdge] = {}
        self.entry_point: str | None = None

    # -- building --------------------------------------------------------------------------------
    def add_node(self, name_or_func: str | Callable[..., Any], func: Any = None) -> Self:
        """Add a node: ``add_node(func)`` (named after the function), ``add_node("name", func)``
        or ``add_node("name", agent_or_tool_node)``. Returns the builder for chaining.

        Raises:
            GraphError: ``GRAPH_001`` for a duplicate or reserved name or a non-callable.
        """
        if func is None:
            if isinstance(name_or_func, str):
                raise GraphError(
                    f"add_node({name_or_func!r}) needs a function",
                    error_code="GRAPH_001",
                    context={"node": name_or_func},
                )
            func = name_or_func
            name = (
                getattr(func, "__name__", None)
                or getattr(func, "name", None)
                or type(func).__name__
            )
        else:
            name = name_or_func
        if not isinstance(name, str) or not name:
            raise GraphError("node names must be non-empty strings", error_code="GRAPH_001")
        if name in (START, END):
            raise GraphError(
                f"{name!r} is reserved", error_code="GRAPH_001", context={"node": name}
            )
        if name in self.nodes:
            raise GraphError(
                f"a node named {name!r} already exists; use override_node to replace it",
                error_code="GRAPH_001",
                context={"node": name},
            )
        self.nodes[name] = Node.build(name, func, owner=self)
        return self

    def override_node(self, name: str, func: Any) -> Self:
        """Replace an existing node's function (e.g. with a test double).

        Raises:
            GraphError: ``GRAPH_004`` when no such node exists.
        """
        if name not in self.nodes:
            raise GraphError(
                f"no node named {name!r}", error_code="GRAPH_004", context={"node": name}
            )
        self.nodes[name] = Node.build(name, func, owner=self)
        return self

    def add_edge(self, frm: str, to: str) -> Self:
        """A static edge ``frm -> to``; ``add_edge(START, node)`` sets the entry point.

        Raises:
            GraphError: ``GRAPH_001`` when ``frm`` already has a static edge.
        """
        if frm == START:
            self.entry_point = to
            return self
        if frm in self.edges and self.edges[frm] != to:
            raise GraphError(
                f"node {frm!r} already has an edge to {self.edges[frm]!r}; use "
                "add_conditional_edges to branch",
                error_code="GRAPH_001",
                context={"node": frm},
            )
        self.edges[frm] = to
        return self

    def add_conditional_edges(
        self,
        frm: str,
        condition: Callable[..., Any],
        path_map: dict[Any, str] | None = None,
    ) -> Self:
        """Route from ``frm`` by ``condition(state)`` or ``condition(state, config)``.

        Args:
            frm: the source node.
            condition: returns a routing key (sync or async).
            path_map: key -> node name (``END`` allowed); without it the key is the node name.
        """
        if isinstance(path_map, (list, tuple)):
            path_map = {p: p for p in path_map}
        self.conditional_edges[frm] = ConditionalEdge(
            condition, dict(path_map) if path_map else None
        )
        return self

    def set_entry_point(self, name: str) -> Self:
        """Set the first node of every run (same as ``add_edge(START, name)``)."""
        self.entry_point = name
        return self

    def set_finish_point(self, name: str) -> Self:
        """Make ``name`` end the run (same as ``add_edge(name, END)``)."""
        return self.add_edge(name, END)

    # -- validation ------------------------------------------------------------------------------
    def _targets(self, node: str) -> Iterable[str]:
        if node in self.edges:
            yield self.edges[node]
        ce = self.conditional_edges.get(node)
        if ce is not None and ce.path_map:
            yield from ce.path_map.values()
        goto = _command_targets(self.nodes[node].func) if node in self.nodes else ()
        if goto:
            yield from goto

    def validate(self, interrupt_before: list[str], interrupt_after: list[str]) -> None:
        """Check the graph's structure.

        Raises:
            GraphError: ``GRAPH_002`` no entry point; ``GRAPH_004`` an edge, path map or
                interrupt list names an unknown node; ``GRAPH_003`` an orphan node: one that
                appears in no edge at all (it is not the entry point, has no static or
                conditional edge of its own, and no static edge, ``path_map`` or
                ``Command[Literal[...]]`` annotation names it), the rule 10xGraph applies.
                A node that is only the target of a ``Command(goto=...)`` or of a router
                without ``path_map`` is not an orphan as long as it has an edge of its own.
        """
        if not self.nodes:
            raise GraphError("the graph has no nodes", error_code="GRAPH_002")
        if self.entry_point is None:
            raise GraphError(
                "no entry point: call set_entry_point(name) or add_edge(START, name)",
                error_code="GRAPH_002",
            )
        known = set(self.nodes) | {END}
        if self.entry_point not in self.nodes:
            raise GraphError(
                f"entry point {self.entry_point!r} is not a node",
                error_code="GRAPH_004",
                context={"node": self.entry_point},
            )
        for frm in list(self.edges) + list(self.conditional_edges):
            if frm not in self.nodes:
                raise GraphError(
                    f"edge from unknown node {frm!r}", error_code="GRAPH_004", context={"node": frm}
                )
            for to in self._targets(frm):
                if to not in known:
                    raise GraphError(
                        f"edge {frm!r} -> {to!r} names an unknown node",
                        error_code="GRAPH_004",
                        context={"node": to},
                    )
        for label, names in (
            ("interrupt_before", interrupt_before),
            ("interrupt_after", interrupt_after),
        ):
            for n in names:
                if n not in self.nodes:
                    raise GraphError(
                        f"{label} names unknown node {n!r}",
                        error_code="GRAPH_004",
                        context={"node": n},
                    )
        connected = {self.entry_point} | set(self.edges) | set(self.conditional_edges)
        for frm in self.nodes:
            connected.update(self._targets(frm))
        orphans = sorted(set(self.nodes) - connected)
        if orphans:
            raise GraphError(
                f"orphan node(s) {orphans}: they appear in no edge; connect each with "
                "add_edge / add_conditional_edges (an edge to END is enough)",
                error_code="GRAPH_003",
                context={"nodes": orphans},
            )

    def compile(
        self,
        checkpointer: BaseCheckpointer[Any] | None = None,
        interrupt_before: list[str] | None = None,
        interrupt_after: list[str] | None = None,
        shutdown_timeout: float = 30.0,
        callback_manager: Any = None,
        id_generator: BaseIDGenerator | None = None,
        publisher: BasePublisher | None = None,
        lifecycle_hook: GraphLifecycleHook | None = None,
        media_store: BaseMediaStore | None = None,
        **kwargs: Any,
    ) -> CompiledGraph[StateT]:
        """Validate and return a runnable graph.

        Args:
            checkpointer: where state lives; default a new ``InMemoryCheckpointer()``.
            interrupt_before: node names; the run pauses before each of them.
            interrupt_after: node names; the run pauses after each of them.
            shutdown_timeout: seconds ``aclose()`` waits for this graph's runs still in flight
                before it closes the checkpointer, and then for its background tasks
                (cancelled) to end (default 30.0; ``0`` does not wait).
            callback_manager: a ``tenxgraph.utils.CallbackManager`` whose callbacks and
                validators run around the model and tool calls of this graph's ``Agent`` and
                ``ToolNode`` nodes (``None``: none).
            id_generator: as ``StateGraph(id_generator=...)`` (some 10xGraph pages pass it
                here); given here, it becomes the builder's generator (graphs compiled from
                this builder afterwards use it too).
            publisher: this compiled graph's publisher (default: the builder's, from
                ``StateGraph(publisher=...)`` or ``setup_tracing``).
            lifecycle_hook: a ``tenxgraph.utils.callbacks.GraphLifecycleHook`` called at the
                run's structural points (``tenxgraph.utils.lifecycle``), before the hooks
                registered on ``callback_manager`` (``register_lifecycle_hook``; those
                registered by ``compile()`` time count).
            media_store: a ``tenxgraph.storage.media.BaseMediaStore``: inline media of each
                run's input messages larger than 50,000 bytes is moved there before the run
                starts (``ensure_media_offloaded``), so checkpoints keep a
                ``graph://media/{key}`` reference, and an ``Agent`` reads such references
                back for its model (``None``: media stays inline, references cannot be read).
            **kwargs: 10xGraph's documented argument ``store`` names a feature tenxgraph does
                not provide; ``None`` is accepted, anything else is refused (``GRAPH_010``).
                ``recursion_limit`` and ``execution_timeout`` (passed to ``compile`` on some
                pages) are refused with ``GRAPH_009`` naming the run-config key to use.

        Raises:
            GraphError: see :meth:`validate`; ``GRAPH_001`` when ``callback_manager``,
                ``lifecycle_hook`` or ``media_store`` has the wrong type.
            UnsupportedArgumentError: ``GRAPH_009`` for an unknown keyword argument or a
                negative / non-numeric ``shutdown_timeout``, ``GRAPH_010`` for a documented
                argument whose feature is not provided.
        """
        from tenxgraph.core._lifecycle import build_hooks

        from ._inject import bind_graph
        from .compiled_graph import CompiledGraph

        check_arguments(
            "compile",
            kwargs,
            (
                "checkpointer",
                "interrupt_before",
                "interrupt_after",
                "shutdown_timeout",
                "callback_manager",
                "id_generator",
                "publisher",
                "lifecycle_hook",
                "media_store",
            ),
            _COMPILE_NOT_SUPPORTED,
            _COMPILE_HINTS,
        )
        if (
            isinstance(shutdown_timeout, bool)
            or not isinstance(shutdown_timeout, (int, float))
            or shutdown_timeout < 0
        ):
            raise UnsupportedArgumentError(
                f"compile(shutdown_timeout=...) must be a number of seconds >= 0, got "
                f"{shutdown_timeout!r}",
                context={"argument": "shutdown_timeout", "where": "compile", "did_you_mean": None},
            )
        if callback_manager is not None:
            from tenxgraph.utils.callbacks import CallbackManager

            if not isinstance(callback_manager, CallbackManager):
                raise GraphError(
                    "compile(callback_manager=...) takes a tenxgraph.utils.CallbackManager, got "
                    f"{type(callback_manager).__name__}",
                    error_code="GRAPH_001",
                    context={"parameter": "callback_manager"},
                )
        ib, ia = list(interrupt_before or []), list(interrupt_after or [])
        self.validate(ib, ia)
        resolve_model = getattr(self.context_manager, "resolve_model", None)
        if callable(resolve_model):  # a SummaryContextManager given a model name
            resolve_model(_chat_model_by_name)
        if self.context_manager is None:
            trimming = [
                n
                for n, node in self.nodes.items()
                if getattr(node.func, "trim_context", False) is True
            ]
            if trimming:
                # 10xGraph runs such a graph and does not trim: warn once per compiled graph
                _log.warning(
                    "node(s) %s are Agents with trim_context=True, but the graph has no context "
                    "manager: they will see the whole conversation (nothing is trimmed); pass "
                    "StateGraph(context_manager=MessageContextManager(...)) to trim",
                    trimming,
                )
        if checkpointer is None:
            from tenxgraph.storage.checkpointer import InMemoryCheckpointer

            checkpointer = InMemoryCheckpointer()
        if id_generator is not None:
            self.id_generator = _check_id_generator(id_generator)
        app: CompiledGraph[StateT] = CompiledGraph(
            self, checkpointer, ib, ia, shutdown_timeout=float(shutdown_timeout)
        )
        app.callback_manager = callback_manager
        app.media_store = _check_media_store(media_store)
        app.lifecycle_hooks = build_hooks(lifecycle_hook, callback_manager)
        bind_graph(app)
        if publisher is not None:
            app.publisher = _check_publisher(publisher)
        return app


def _chat_model_by_name(name: str, base_url: str | None, api_key: str | None) -> Any:
    """The OpenAI-compatible chat model a context manager names (see ``resolve_model``)."""
    from tenxgraph.models.openai_compat import OpenAICompatModel

    return OpenAICompatModel(name, base_url=base_url, api_key=api_key)


def _check_publisher(publisher: Any) -> BasePublisher | None:
    from tenxgraph.runtime.publisher import BasePublisher

    if publisher is not None and not isinstance(publisher, BasePublisher):
        raise GraphError(
            f"publisher must be a tenxgraph.runtime.publisher.BasePublisher, got "
            f"{type(publisher).__name__}",
            error_code="GRAPH_001",
            context={"argument": "publisher"},
        )
    return publisher


def _check_media_store(store: Any) -> BaseMediaStore | None:
    if store is None:
        return None
    from tenxgraph.storage.media.storage.base import BaseMediaStore

    if not isinstance(store, BaseMediaStore):
        raise GraphError(
            f"media_store must be a tenxgraph.storage.media.BaseMediaStore, got "
            f"{type(store).__name__}",
            error_code="GRAPH_001",
            context={"argument": "media_store"},
        )
    return store


def _check_id_generator(generator: Any) -> BaseIDGenerator | None:
    if generator is not None and not isinstance(generator, BaseIDGenerator):
        raise GraphError(
            f"id_generator must be a tenxgraph.utils.id_generator.BaseIDGenerator, got "
            f"{type(generator).__name__}",
            error_code="GRAPH_001",
            context={"argument": "id_generator"},
        )
    return generator


def _command_targets(func: Any) -> tuple[str, ...] | None:
    """Targets a node may reach through ``Command(goto=...)``, read from its return
    annotation: ``()`` when it does not return ``Command``, the names of
    ``Command[Literal[...]]``, or ``None`` when it returns ``Command`` without naming them."""
    import typing

    target = func
    if not inspect.isfunction(func) and not inspect.ismethod(func):
        target = type(func).__call__ if callable(func) else func
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # noqa: BLE001 - unresolvable annotations: treat as unknown
        ann = getattr(target, "__annotations__", {}).get("return")
        if isinstance(ann, str) and "Command" in ann:
            return None
        return ()
    ret = hints.get("return")
    if ret is None:
        return ()
    found: list[str] = []
    unknown = False

    def walk(tp: Any) -> None:
        nonlocal unknown
        if tp is Command:
            unknown = True
            return
        if typing.get_origin(tp) is Command:
            for arg in typing.get_args(tp):
                if typing.get_origin(arg) is typing.Literal:
                    found.extend(str(a) for a in typing.get_args(arg))
                else:
                    unknown = True
            return
        for arg in typing.get_args(tp):
            walk(arg)

    walk(ret)
    if unknown:
        return None
    return tuple(found)
