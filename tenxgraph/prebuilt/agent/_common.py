"""Pieces shared by the prebuilt agents: refusing unsupported options, routing helpers."""

from __future__ import annotations

import abc
import copy
import re
from collections.abc import Callable
from typing import Any

from tenxgraph.core.exceptions import ConfigError, UnsupportedArgumentError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message

__all__ = [
    "PrebuiltGraph",
    "agent_options",
    "calls_tools",
    "check_registry",
    "counter",
    "last_user_index",
    "refuse",
    "tools_or",
    "with_tools",
]


def refuse(where: str, **options: Any) -> None:
    """Raise ``GRAPH_010`` for each option that is set although tenxgraph lacks the feature.

    Raises:
        UnsupportedArgumentError: ``GRAPH_010`` naming the first option that is not ``None``.
    """
    for name, value in options.items():
        if value is not None:
            raise UnsupportedArgumentError(
                f"{where}({name}=...) is not provided by tenxgraph; leave it unset",
                error_code="GRAPH_010",
                context={"argument": name, "where": where, "did_you_mean": None},
            )


def calls_tools(state: AgentState) -> bool:
    """Whether the newest message is an assistant message calling tools."""
    last = state.context[-1] if state.context else None
    return last is not None and last.role == "assistant" and bool(last.tool_calls())


def tools_or(tool_node: str, otherwise: str) -> Callable[[AgentState], str]:
    """A router: ``tool_node`` when the newest message calls tools, else ``otherwise``."""

    def route(state: AgentState) -> str:
        return tool_node if calls_tools(state) else otherwise

    return route


def counter(state: AgentState, key: str, add: int = 0) -> int:
    """Read (and with ``add`` bump) a per-run counter in ``execution_meta.internal_data``.

    The runner starts each run with empty ``internal_data`` and checkpoints it with the
    state, so a counter counts within one run and survives a resume.
    """
    data = state.execution_meta.internal_data
    value = int(data.get(key, 0)) + add
    if add:
        data[key] = value
    return value


def with_tools(agent: Agent, extra: list[Any]) -> Agent:
    """A shallow copy of ``agent`` whose tool node holds its tools plus ``extra``.

    The caller's agent and tool node are left as they were (they may be shared).

    Raises:
        ConfigError: ``CONFIG_001`` when the agent names its tool node (``tool_node="NAME"``)
            instead of holding it: its tools are only known inside a running graph.
    """
    if agent.tool_node is None and agent.tool_node_ref is not None:
        raise ConfigError(
            f"an agent with tool_node={agent.tool_node_ref!r} (a node name) cannot get more "
            "tools; pass the ToolNode itself",
            context={"tool_node": agent.tool_node_ref},
        )
    funcs = [spec.func for spec in agent.tool_node._tools.values()] if agent.tool_node else []
    clone = copy.copy(agent)
    clone.tool_node = ToolNode([*funcs, *extra])
    clone.tool_node_ref = None
    return clone


def last_user_index(messages: list[Message]) -> int | None:
    """Index of the newest ``user`` message, or ``None``."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return None


class PrebuiltGraph(abc.ABC):
    """Base of the prebuilt agents: ``build()`` makes the ``StateGraph``, ``compile()`` it."""

    @abc.abstractmethod
    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (each agent documents its nodes)."""

    def compile(self, **kwargs: Any) -> Any:
        """Compile the graph; ``kwargs`` go to ``StateGraph.compile`` (``checkpointer``,
        ``interrupt_before``...).

        Returns:
            The ``CompiledGraph``.
        """
        return self.build().compile(**kwargs)


def check_registry(kind: str, entries: dict[str, Any], config_type: type) -> None:
    """Refuse a registry of workers / members that the graph could not be built from.

    Args:
        kind: ``"worker"`` or ``"member"`` (for the messages).
        entries: name -> config object.
        config_type: the config class each entry must be (holding an ``Agent`` as ``agent``).

    Raises:
        ConfigError: ``CONFIG_001`` for an empty registry, an entry of another type or without
            an ``Agent``, or a name that is not an identifier (names become node names).
    """
    if not entries:
        raise ConfigError(f"at least one {kind} is needed", context={})
    for name, cfg in entries.items():
        if not isinstance(cfg, config_type) or not isinstance(getattr(cfg, "agent", None), Agent):
            got = type(
                getattr(cfg, "agent", None) if isinstance(cfg, config_type) else cfg
            ).__name__
            raise ConfigError(
                f"{kind} {name!r} must be a {config_type.__name__} holding an Agent, got {got}",
                context={kind: name},
            )
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(f"{kind} name {name!r} must be an identifier", context={kind: name})


def agent_options(
    model: str,
    provider: str | None,
    reasoning_config: Any,
    retry_config: Any,
    fallback_models: list[Any] | None,
    trim_context: bool,
    agent_kwargs: dict[str, Any],
) -> dict[str, Any]:
    """The ``Agent`` keyword arguments shared by the agents a prebuilt graph makes
    (``reasoning_config=None`` leaves the ``Agent`` default)."""
    options: dict[str, Any] = {
        "model": model,
        "provider": provider,
        "retry_config": retry_config,
        "fallback_models": fallback_models,
        "trim_context": trim_context,
        **agent_kwargs,
    }
    if reasoning_config is not None:
        options["reasoning_config"] = reasoning_config
    return options
