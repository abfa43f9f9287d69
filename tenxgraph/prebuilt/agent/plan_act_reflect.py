"""``PlanActReflectAgent``: plan (and call tools), act, then let a critic decide to stop or loop.

Graph: ``PLAN`` (an ``Agent`` with the tools) -> ``ACT`` (the ``ToolNode``) when the plan calls
tools, else straight to ``REFLECT``; ``ACT`` -> ``REFLECT``; ``REFLECT`` (an ``Agent`` without
tools, shown the conversation without tool traffic) -> ``END`` when its answer contains
``[DONE]`` (any case) or ``max_iterations`` reflections happened in this run, else
``INCREMENT_ITERATIONS`` -> ``PLAN``. The iteration count lives in the run's
``execution_meta.internal_data["par_iterations"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tenxgraph.core.exceptions import ConfigError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState, Message
from tenxgraph.prebuilt.agent._common import (
    PrebuiltGraph,
    agent_options,
    calls_tools,
    counter,
    refuse,
)
from tenxgraph.utils import END

__all__ = ["PlanActReflectAgent"]

PLAN_PROMPT = (
    "You plan and carry out the user's task. Split it into short concrete steps, call the "
    "available tools when a step needs outside information or an action, and keep answers brief."
)
REFLECT_PROMPT = (
    "You review the work so far against the user's task. If the task is fully done, give the "
    "final answer to the user and write [DONE] at the end. Otherwise say what is missing and "
    "what the next step should do, without [DONE]."
)
_KEY = "par_iterations"


class _Reflector(Agent):
    """An ``Agent`` shown the conversation without tool results or tool-call requests: long
    tool outputs stay out of the critic's context (the planner still sees them)."""

    def build_messages(self, state: Any) -> list[Message]:
        """The messages for the model: ``Agent.build_messages`` minus tool traffic."""
        out: list[Message] = []
        for m in super().build_messages(state):
            if m.role == "tool":
                continue
            if m.role == "assistant" and m.tool_calls():
                text = m.text()
                if not text:
                    continue
                m = Message.text_message(text, role="assistant")
            out.append(m)
        return out


class PlanActReflectAgent(PrebuiltGraph):
    """A plan -> act -> reflect loop compiled into a graph (module docstring).

    Args:
        model: the model of all three roles (planner, reflector; ``"gpt-4o-mini"``...).
        provider: ``"openai"``, ``"google"`` or ``"anthropic"`` (``None``: inferred).
        tools: tool functions the planner may call (``None``: plan and reflect only).
        max_iterations: reflections per run at most (>= 1, default 3).
        plan_system_prompt: the planner's system messages (default: a built-in prompt).
        reflect_system_prompt: the reflector's system messages (default: a built-in prompt
            asking for ``[DONE]`` when finished).
        reasoning_config: as ``Agent(reasoning_config=...)`` for both agents (``None``: the
            agent's default).
        memory: 10xGraph's long-term memory; not provided by tenxgraph, must stay ``None``.
        retry_config: as ``Agent(retry_config=...)``.
        fallback_models: as ``Agent(fallback_models=...)``.
        trim_context: as ``Agent(trim_context=...)``.
        client: an MCP client; not provided, must stay ``None``.
        **agent_kwargs: further ``Agent`` arguments for both agents (``base_url``,
            ``api_key``...); other names are sampling parameters sent with each request, as
            ``Agent(**model_params)`` does.

    Raises:
        UnsupportedArgumentError: ``GRAPH_010`` for ``memory`` or ``client``.
        ConfigError: ``CONFIG_001`` for ``max_iterations`` < 1.
    """

    def __init__(
        self,
        model: str,
        provider: str | None = None,
        tools: Iterable[Callable[..., Any]] | None = None,
        max_iterations: int = 3,
        plan_system_prompt: list[dict[str, Any]] | None = None,
        reflect_system_prompt: list[dict[str, Any]] | None = None,
        reasoning_config: Any = None,
        memory: Any = None,
        retry_config: Any = True,
        fallback_models: list[Any] | None = None,
        trim_context: bool = False,
        client: Any = None,
        **agent_kwargs: Any,
    ) -> None:
        refuse("PlanActReflectAgent", memory=memory, client=client)
        if not isinstance(max_iterations, int) or max_iterations < 1:
            raise ConfigError(
                f"PlanActReflectAgent(max_iterations=...) must be an int >= 1, got {max_iterations!r}",
                context={"max_iterations": max_iterations},
            )
        self.max_iterations = max_iterations
        common = agent_options(
            model,
            provider,
            reasoning_config,
            retry_config,
            fallback_models,
            trim_context,
            agent_kwargs,
        )
        self.tool_node = ToolNode(list(tools)) if tools else None
        self.planner = Agent(
            system_prompt=plan_system_prompt or [{"role": "system", "content": PLAN_PROMPT}],
            tool_node=self.tool_node,
            **common,
        )
        self.reflector = _Reflector(
            system_prompt=reflect_system_prompt or [{"role": "system", "content": REFLECT_PROMPT}],
            **common,
        )

    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (nodes ``PLAN``, ``ACT`` with tools, ``REFLECT``,
        ``INCREMENT_ITERATIONS``)."""
        graph: StateGraph[AgentState] = StateGraph()
        graph.add_node("PLAN", self.planner)
        graph.add_node("REFLECT", self.reflector)
        graph.add_node("INCREMENT_ITERATIONS", _increment)
        if self.tool_node is not None:
            graph.add_node("ACT", self.tool_node)
            graph.add_conditional_edges(
                "PLAN",
                lambda s: "ACT" if calls_tools(s) else "REFLECT",
                {"ACT": "ACT", "REFLECT": "REFLECT"},
            )
            graph.add_edge("ACT", "REFLECT")
        else:
            graph.add_edge("PLAN", "REFLECT")
        limit = self.max_iterations

        def after_reflect(state: AgentState) -> str:
            done = bool(state.context) and "[done]" in state.context[-1].text().lower()
            # this reflection counts: the counter holds the ones before it
            if done or counter(state, _KEY) + 1 >= limit:
                return END
            return "INCREMENT_ITERATIONS"

        graph.add_conditional_edges(
            "REFLECT",
            after_reflect,
            {END: END, "INCREMENT_ITERATIONS": "INCREMENT_ITERATIONS"},
        )
        graph.add_edge("INCREMENT_ITERATIONS", "PLAN")
        graph.set_entry_point("PLAN")
        return graph


def _increment(state: AgentState) -> None:
    counter(state, _KEY, add=1)
