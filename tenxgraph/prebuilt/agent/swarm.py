"""``SwarmAgent``: agents that hand the conversation to each other with handoff tools.

Each member is a node (its ``Agent``). Every member that may hand off gets one
``transfer_to_<TARGET>`` tool per allowed target (made by
:func:`tenxgraph.prebuilt.tools.create_handoff_tool`, described with the target's
``description``) added to a copy of its tool node; a member with tools of any kind gets a
``<NAME>_TOOL`` node. After a member's turn: tool calls -> ``<NAME>_TOOL``, else ``END``.
``<NAME>_TOOL`` runs the regular tools and goes back to ``NAME``; a handoff call is not run:
the tool node answers it (``"Handed off to TARGET."``, so every tool call of the
conversation has its answer, which the chat APIs require) and moves the run to ``TARGET``.
The caller's agents and tool nodes are not modified.

Where 10xGraph routes a handoff straight from the member to the target and leaves the call
unanswered, tenxgraph routes it through the member's tool node for that reason; the target
member is the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.prebuilt.agent._common import PrebuiltGraph, check_registry, tools_or, with_tools
from tenxgraph.prebuilt.tools.handoff import create_handoff_tool
from tenxgraph.utils import END

__all__ = ["SwarmAgent", "SwarmMemberConfig"]


@dataclass
class SwarmMemberConfig:
    """One member of a :class:`SwarmAgent`.

    Attributes:
        agent: the member's ``Agent`` (without handoff tools: they are added).
        can_handoff_to: the members it may hand off to; ``None``: every other member;
            ``[]``: none (its turn ends the run unless it calls tools).
        description: what the member does; the description of the handoff tools to it.
    """

    agent: Agent
    can_handoff_to: list[str] | None = None
    description: str = field(default="")


class SwarmAgent(PrebuiltGraph):
    """Members handing off to each other, compiled into a graph (module docstring).

    Args:
        members: member name -> :class:`SwarmMemberConfig` (names are node names).
        entry: the member receiving the first message.
        state: a state instance or ``AgentState`` subclass (as ``StateGraph``).
        context_manager: as ``StateGraph(context_manager=...)``.
        publisher: as ``StateGraph(publisher=...)``.
        id_generator: as ``StateGraph(id_generator=...)``.
        container: as ``StateGraph(container=...)``.

    Raises:
        ConfigError: ``CONFIG_001`` for no members, a member that is not a
            ``SwarmMemberConfig`` holding an ``Agent``, a non-identifier name, an ``entry``
            or ``can_handoff_to`` naming no member, or a member handing off to itself.
    """

    def __init__(
        self,
        members: dict[str, SwarmMemberConfig],
        entry: str,
        state: Any = None,
        context_manager: Any = None,
        publisher: Any = None,
        id_generator: Any = None,
        container: Any = None,
    ) -> None:
        check_registry("member", members, SwarmMemberConfig)
        for name, cfg in members.items():
            for target in cfg.can_handoff_to or ():
                if target not in members or target == name:
                    raise ConfigError(
                        f"member {name!r} cannot hand off to {target!r}: not another member",
                        context={"member": name, "target": target},
                    )
        if entry not in members:
            raise ConfigError(
                f"SwarmAgent(entry={entry!r}) names no member", context={"entry": entry}
            )
        self.members = dict(members)
        self.entry = entry
        self._graph_kwargs = {
            "state": state,
            "context_manager": context_manager,
            "publisher": publisher,
            "id_generator": id_generator,
            "container": container,
        }
        #: the node agent of each member: the member's agent plus its handoff tools
        self.agents: dict[str, Agent] = {}
        for name, cfg in self.members.items():
            targets = (
                [m for m in self.members if m != name]
                if cfg.can_handoff_to is None
                else list(cfg.can_handoff_to)
            )
            handoffs = [
                create_handoff_tool(
                    t,
                    f"Hand the conversation to {t}"
                    + (f": {self.members[t].description}" if self.members[t].description else "."),
                )
                for t in targets
            ]
            self.agents[name] = with_tools(cfg.agent, handoffs) if handoffs else cfg.agent

    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (each member, and ``<NAME>_TOOL`` for members with tools)."""
        graph: StateGraph[AgentState] = StateGraph(**self._graph_kwargs)
        for name, agent in self.agents.items():
            graph.add_node(name, agent)
            tools = agent.get_tool_node()
            if tools is None:
                graph.add_edge(name, END)
                continue
            tool_name = f"{name}_TOOL"
            graph.add_node(tool_name, tools)
            graph.add_edge(tool_name, name)
            graph.add_conditional_edges(
                name,
                tools_or(tool_name, END),
                {tool_name: tool_name, END: END},
            )
        graph.set_entry_point(self.entry)
        return graph
