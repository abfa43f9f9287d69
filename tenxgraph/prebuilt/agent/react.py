"""10xGraph's ``ReactAgent`` (``agentflow.prebuilt.agent``): a model that calls tools until done.

``ReactAgent(model=..., provider=..., tools=[...]).compile()`` builds the two-node graph every
tutorial writes by hand: ``MAIN`` (an :class:`~tenxgraph.core.graph.Agent`) -> ``TOOL`` (a
:class:`~tenxgraph.core.graph.ToolNode`) while the last answer calls tools, else ``END``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.state import AgentState
from tenxgraph.prebuilt.agent._common import PrebuiltGraph, refuse
from tenxgraph.utils import END

__all__ = ["ReactAgent"]


class ReactAgent(PrebuiltGraph):
    """A ReAct loop (model, then tools, then model...) compiled into a graph.

    Args:
        model: the model name (``"gpt-4o"``, ``"gemini-2.5-flash"``...).
        provider: ``"openai"``, ``"google"`` or ``"anthropic"`` (``None``: inferred).
        tools: tool functions the model may call (``None``: a plain chat agent).
        system_prompt: system messages sent first on every call.
        output_type: ``"text"`` or ``"json"``.
        reasoning_config: as ``Agent(reasoning_config=...)`` (default: the agent's).
        memory: 10xGraph's long-term memory; not provided by tenxgraph, must stay ``None``.
        retry_config: as ``Agent(retry_config=...)``.
        fallback_models: as ``Agent(fallback_models=...)``.
        trim_context: as ``Agent(trim_context=...)``.
        main_node_name: the model node's name.
        tool_node_name: the tool node's name.
        client: an MCP client; not provided here, must stay ``None``.
        **agent_kwargs: further ``Agent`` arguments (``base_url``, ``api_key``, sampling...).

    Raises:
        UnsupportedArgumentError: ``GRAPH_010`` for ``memory`` or ``client``.
    """

    def __init__(
        self,
        model: str,
        provider: str | None = None,
        tools: Iterable[Callable[..., Any]] | None = None,
        system_prompt: list[dict[str, Any]] | None = None,
        output_type: str = "text",
        reasoning_config: Any = None,
        memory: Any = None,
        retry_config: Any = True,
        fallback_models: list[Any] | None = None,
        trim_context: bool = False,
        main_node_name: str = "MAIN",
        tool_node_name: str = "TOOL",
        client: Any = None,
        **agent_kwargs: Any,
    ) -> None:
        refuse("ReactAgent", memory=memory, client=client)
        self.main_node_name = main_node_name
        self.tool_node_name = tool_node_name
        self.tool_node = ToolNode(list(tools)) if tools else None
        if reasoning_config is not None:
            agent_kwargs["reasoning_config"] = reasoning_config
        self.agent = Agent(
            model=model,
            provider=provider,
            system_prompt=system_prompt,
            tool_node=self.tool_node,
            output_type=output_type,
            retry_config=retry_config,
            fallback_models=fallback_models,
            trim_context=trim_context,
            **agent_kwargs,
        )

    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (``MAIN`` -> ``TOOL`` -> ``MAIN`` ... -> ``END``)."""
        graph: StateGraph[AgentState] = StateGraph()
        main, tool = self.main_node_name, self.tool_node_name
        graph.add_node(main, self.agent)
        if self.tool_node is not None:
            graph.add_node(tool, self.tool_node)
            graph.add_conditional_edges(
                main,
                lambda s: tool if s.context and s.context[-1].tool_calls() else END,
                {tool: tool, END: END},
            )
            graph.add_edge(tool, main)
        else:
            graph.add_edge(main, END)
        graph.set_entry_point(main)
        return graph
