"""``SupervisorTeamAgent``: a supervisor model names the next worker until it says ``FINISH``.

Graph: ``SUPERVISOR`` (an ``Agent`` whose system prompt lists the workers and asks for one
word) -> the worker it names (a whole word of its answer, case-insensitive; the first worker
in registry order that matches) -> ``PRE_SUPERVISOR`` -> ``SUPERVISOR``. A worker with tools
gets ``<NAME>_TOOL`` (its ``ToolNode``): ``NAME`` -> ``NAME_TOOL`` while it calls tools, then
back to ``NAME``. ``PRE_SUPERVISOR`` counts finished delegations in the run's
``execution_meta.internal_data["sta_rounds"]``. The supervisor's turn ends the run (``END``)
when its answer contains ``FINISH``, names no worker (logged as a warning), or ``max_rounds``
delegations have finished.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import Agent, StateGraph
from tenxgraph.core.state import AgentState
from tenxgraph.prebuilt.agent._common import (
    PrebuiltGraph,
    check_registry,
    counter,
    refuse,
    tools_or,
)
from tenxgraph.utils import END

__all__ = ["SupervisorTeamAgent", "WorkerConfig"]

log = logging.getLogger(__name__)
_KEY = "sta_rounds"
_RESERVED = ("SUPERVISOR", "PRE_SUPERVISOR", "FINISH")


@dataclass
class WorkerConfig:
    """One worker of a :class:`SupervisorTeamAgent`.

    Attributes:
        agent: the worker's ``Agent`` (its own model, tools, prompt).
        description: what the worker does; listed in the supervisor's prompt.
    """

    agent: Agent
    description: str = ""


def supervisor_prompt(workers: dict[str, WorkerConfig]) -> str:
    """The supervisor's default system prompt for a worker registry."""
    lines = [f"- {name}: {cfg.description or '(no description)'}" for name, cfg in workers.items()]
    return (
        "You coordinate a team. Workers:\n"
        + "\n".join(lines)
        + "\n- FINISH: the task is complete.\n\n"
        "Reply with exactly one word: the name of the worker who should act next, or FINISH. "
        "No explanation, no other text."
    )


class SupervisorTeamAgent(PrebuiltGraph):
    """A supervisor routing to worker agents, compiled into a graph (module docstring).

    Args:
        supervisor_model: the supervisor's model name.
        workers: worker name -> :class:`WorkerConfig` (names are node names; upper case
            reads best in the prompt). At least one.
        supervisor_system_prompt: the supervisor's system messages (default: generated from
            the registry by :func:`supervisor_prompt`).
        max_rounds: finished delegations per run at most (>= 1, default 10).
        state: a state instance or ``AgentState`` subclass for the graph (as ``StateGraph``).
        context_manager: as ``StateGraph(context_manager=...)``.
        publisher: as ``StateGraph(publisher=...)``.
        container: as ``StateGraph(container=...)``.
        **supervisor_kwargs: ``Agent`` arguments for the supervisor only (``provider``,
            ``base_url``, ``temperature``...), as ``Agent`` takes them.

    Raises:
        ConfigError: ``CONFIG_001`` for an empty registry, a worker that is not a
            ``WorkerConfig`` holding an ``Agent``, a reserved or non-identifier name, or
            ``max_rounds`` < 1.
        UnsupportedArgumentError: ``GRAPH_010`` for ``memory`` in ``supervisor_kwargs``.
    """

    def __init__(
        self,
        supervisor_model: str,
        workers: dict[str, WorkerConfig],
        supervisor_system_prompt: list[dict[str, Any]] | None = None,
        max_rounds: int = 10,
        state: Any = None,
        context_manager: Any = None,
        publisher: Any = None,
        container: Any = None,
        **supervisor_kwargs: Any,
    ) -> None:
        refuse("SupervisorTeamAgent", memory=supervisor_kwargs.pop("memory", None))
        check_registry("worker", workers, WorkerConfig)
        for name in workers:
            if name.upper() in _RESERVED:
                raise ConfigError(
                    f"worker name {name!r} is reserved ({', '.join(_RESERVED)})",
                    context={"worker": name},
                )
        if not isinstance(max_rounds, int) or max_rounds < 1:
            raise ConfigError(
                f"SupervisorTeamAgent(max_rounds=...) must be an int >= 1, got {max_rounds!r}",
                context={"max_rounds": max_rounds},
            )
        self.workers = dict(workers)
        self.max_rounds = max_rounds
        self._graph_kwargs = {
            "state": state,
            "context_manager": context_manager,
            "publisher": publisher,
            "container": container,
        }
        prompt = supervisor_system_prompt or [
            {"role": "system", "content": supervisor_prompt(self.workers)}
        ]
        self.supervisor = Agent(model=supervisor_model, system_prompt=prompt, **supervisor_kwargs)

    def _route(self, state: AgentState) -> str:
        if counter(state, _KEY) >= self.max_rounds:
            return END
        raw = state.context[-1].text().strip().upper() if state.context else ""
        if re.search(r"\bFINISH\b", raw):
            return END
        for name in self.workers:
            if re.search(rf"\b{re.escape(name.upper())}\b", raw):
                return name
        log.warning("supervisor named no worker (%r); ending the run", raw[:80])
        return END

    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (``SUPERVISOR``, ``PRE_SUPERVISOR``, each worker and the
        ``<NAME>_TOOL`` node of each worker with tools)."""
        graph: StateGraph[AgentState] = StateGraph(**self._graph_kwargs)
        graph.add_node("SUPERVISOR", self.supervisor)
        graph.add_node("PRE_SUPERVISOR", _next_round)
        graph.add_edge("PRE_SUPERVISOR", "SUPERVISOR")
        for name, cfg in self.workers.items():
            graph.add_node(name, cfg.agent)
            tools = cfg.agent.get_tool_node()
            if tools is None:
                graph.add_edge(name, "PRE_SUPERVISOR")
                continue
            tool_name = f"{name}_TOOL"
            graph.add_node(tool_name, tools)
            graph.add_edge(tool_name, name)
            graph.add_conditional_edges(
                name,
                tools_or(tool_name, "PRE_SUPERVISOR"),
                {tool_name: tool_name, "PRE_SUPERVISOR": "PRE_SUPERVISOR"},
            )
        graph.add_conditional_edges(
            "SUPERVISOR", self._route, {END: END, **{n: n for n in self.workers}}
        )
        graph.set_entry_point("SUPERVISOR")
        return graph


def _next_round(state: AgentState) -> None:
    counter(state, _KEY, add=1)
