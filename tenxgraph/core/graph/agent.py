"""``Agent``: a graph node that calls a chat model with the thread's messages and tools.

Wired as 10xGraph's guide wires it::

    tool_node = ToolNode([get_weather])
    agent = Agent(model="gpt-4o", system_prompt=[{"role": "system", "content": "..."}],
                  tool_node="TOOL")
    graph = StateGraph()
    graph.add_node("MAIN", agent)
    graph.add_node("TOOL", tool_node)
    graph.add_conditional_edges("MAIN", route, {"TOOL": "TOOL", END: END})
    graph.add_edge("TOOL", "MAIN")
    graph.set_entry_point("MAIN")

Each time it runs, the agent sends the model its system prompt, then
``state.context_summary`` (when set, as a system message ``"Summary of the earlier
conversation: ..."``), then ``extra_messages``, then ``state.context``, with the tool schemas of
its ``ToolNode``; and returns the model's assistant message, which the graph appends to
``state.context``. The runtime checkpoints that message before the ``ToolNode`` runs, so a
replay after a crash sees the same tool calls even from a non-deterministic model.

Unlike the flow sketched in 10xGraph's "Agent Class" page, tools are offered on every call,
also right after tool results, so the model can chain tool calls (the loop ends when it answers
without calling a tool, as the guide's graph expects).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tenxgraph.core._context import current_run
from tenxgraph.core.exceptions import GraphError
from tenxgraph.core.state import Message, TextBlock
from tenxgraph.models.base import ChatModel, ModelError, normalize_assistant
from tenxgraph.models.openai_compat import OpenAICompatModel
from tenxgraph.telemetry import ATTR, SPAN, enabled, span

from .tool_node import ToolNode

__all__ = ["Agent"]


def _prompt_message(item: dict[str, Any] | Message | str) -> Message:
    if isinstance(item, Message):
        return item
    if isinstance(item, str):
        return Message.text_message(item, role="system")
    if not isinstance(item, dict):
        raise TypeError(f"a system prompt entry must be a dict, got {type(item).__name__}")
    role = item.get("role", "system")
    content = item.get("content", "")
    if isinstance(content, list):
        text = "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    else:
        text = "" if content is None else str(content)
    return Message(role=role, content=[TextBlock(text=text)])


def _retries(retry_config: Any) -> int:
    if retry_config is False or retry_config is None:
        return 0
    if retry_config is True:
        return 3
    if isinstance(retry_config, dict):
        return int(retry_config.get("max_retries", 3))
    return int(getattr(retry_config, "max_retries", 3))


def _unsupported(name: str, hint: str) -> GraphError:
    return GraphError(
        f"Agent({name}=...) is not supported by tenxgraph; {hint}",
        error_code="GRAPH_001",
        context={"parameter": name},
    )


class Agent:
    """A node calling a chat model (10xGraph-compatible ``Agent``).

    Args:
        model: a model name served by an OpenAI-compatible chat-completions endpoint
            (``"gpt-4o"``, ``"openai/gpt-4o"``; the ``openai/`` prefix is stripped), or any object
            implementing the chat-model protocol (:class:`tenxgraph.models.ChatModel`, e.g.
            :class:`tenxgraph.models.ScriptedModel`).
        system_prompt: messages sent first on every call, e.g.
            ``[{"role": "system", "content": "You are helpful."}]``; ``content`` may be a
            string or a list of ``{"type": "text", "text": ...}`` parts.
        tool_node: the tools the model may call: a :class:`ToolNode`, or the name of the graph
            node holding it (looked up in the running graph on each call).
        tools: alternative to ``tool_node``: a list of tool functions (a ``ToolNode`` is built
            and exposed as :attr:`tool_node`, to be added to the graph) or a ``ToolNode``.
        base_url: API root for a model given by name (default ``OPENAI_BASE_URL``, else
            ``https://api.openai.com/v1``).
        api_key: API key for a model given by name (default ``OPENAI_API_KEY``).
        provider: 10xGraph's provider name; only OpenAI-compatible endpoints are spoken, so
            this is informational (point ``base_url`` at the provider's OpenAI-compatible
            API).
        tool_node_name: 10xGraph's older spelling of ``tool_node="NAME"``.
        extra_messages: messages sent after the system prompt on every call.
        tools_tags: offer only the tools carrying at least one of these ``@tool`` tags.
        output_type: ``"text"`` (default) or ``"json"`` (asks for ``response_format`` JSON
            object, for a model given by name).
        reasoning_config: ``{"effort": "low" | "medium" | "high"}`` is sent as
            ``reasoning_effort``; ``True`` / ``False`` / ``None`` send nothing.
        retry_config: ``True`` (default: 3 retries), ``False`` (none), or an object / dict with
            ``max_retries``; applies to a model given by name.
        fallback_models: model names (or ``(name, provider)`` tuples, or chat-model objects)
            tried in order when the model raises :class:`~tenxgraph.models.ModelError`.
        timeout_s: seconds per HTTP request for a model given by name.
        **model_params: sampling parameters (``temperature``, ``max_tokens``, ``top_p``,
            ``stop``, ``tool_choice``...): given to the adapter for a model name, passed as
            keyword arguments to ``agenerate`` for a model object.

    Attributes:
        model: the chat model object.
        tool_node (ToolNode | None): the tool node given or built from ``tools``.
        tool_node_ref (str | None): the node name to look the tool node up by.

    Raises:
        GraphError: ``GRAPH_001`` for options tenxgraph does not implement
            (``trim_context=True``, ``api_style="responses"``, ``skills``, ``memory``,
            ``multimodal_config``), or both ``tool_node`` and ``tools`` given.
        TypeError: ``model`` is neither a string nor a chat model.
    """

    #: Called by the runner as ``await node(state=state, config=config)``.
    _tenxgraph_node = True

    def __init__(
        self,
        model: str | ChatModel,
        system_prompt: Sequence[dict[str, Any] | Message | str] | None = None,
        tool_node: ToolNode | str | None = None,
        tools: Iterable[Callable[..., Any]] | ToolNode | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        provider: str | None = None,
        tool_node_name: str | None = None,
        extra_messages: Sequence[Message] | None = None,
        tools_tags: Iterable[str] | None = None,
        output_type: str = "text",
        reasoning_config: dict[str, Any] | bool | None = None,
        retry_config: Any = True,
        fallback_models: Sequence[Any] | None = None,
        timeout_s: float = 60.0,
        trim_context: bool = False,
        api_style: str = "chat",
        skills: Any = None,
        memory: Any = None,
        multimodal_config: Any = None,
        **model_params: Any,
    ) -> None:
        if trim_context:
            raise _unsupported(
                "trim_context", "trim in a node that returns replace_messages(...) instead"
            )
        if api_style != "chat":
            raise _unsupported("api_style", "only the chat-completions API is spoken")
        for name, value in (
            ("skills", skills),
            ("memory", memory),
            ("multimodal_config", multimodal_config),
        ):
            if value is not None:
                raise _unsupported(name, "leave it unset")
        if tool_node is not None and tools is not None:
            raise GraphError(
                "Agent takes tool_node= or tools=, not both", error_code="GRAPH_001", context={}
            )
        self.provider = provider
        params = dict(model_params)
        if output_type == "json":
            params.setdefault("response_format", {"type": "json_object"})
        if isinstance(reasoning_config, dict) and reasoning_config.get("effort"):
            params.setdefault("reasoning_effort", reasoning_config["effort"])
        self._model_kwargs: dict[str, Any] = {}
        self.model: ChatModel = self._make_model(
            model, base_url, api_key, params, retry_config, timeout_s
        )
        if not isinstance(model, str):
            self._model_kwargs = params
        self.fallbacks: list[ChatModel] = [
            self._make_model(
                fb[0] if isinstance(fb, tuple) else fb,
                base_url,
                api_key,
                params,
                retry_config,
                timeout_s,
            )
            for fb in (fallback_models or ())
        ]
        self.tool_node: ToolNode | None = None
        self.tool_node_ref: str | None = tool_node_name
        if isinstance(tool_node, ToolNode):
            self.tool_node = tool_node
        elif isinstance(tool_node, str):
            self.tool_node_ref = tool_node
        elif tool_node is not None:
            raise GraphError(
                f"Agent(tool_node=...) takes a ToolNode or a node name, got {type(tool_node).__name__}",
                error_code="GRAPH_001",
                context={},
            )
        if isinstance(tools, ToolNode):
            self.tool_node = tools
        elif tools is not None:
            self.tool_node = ToolNode(list(tools))
        self.tools_tags: set[str] | None = set(tools_tags) if tools_tags else None
        self.system_prompt: list[Message] = [_prompt_message(p) for p in (system_prompt or ())]
        self.extra_messages: list[Message] = list(extra_messages or ())

    @staticmethod
    def _make_model(
        model: Any,
        base_url: str | None,
        api_key: str | None,
        params: dict[str, Any],
        retry_config: Any,
        timeout_s: float,
    ) -> ChatModel:
        if isinstance(model, str):
            return OpenAICompatModel(
                model,
                base_url=base_url,
                api_key=api_key,
                timeout_s=timeout_s,
                max_retries=_retries(retry_config),
                **params,
            )
        if callable(getattr(model, "agenerate", None)):
            return model
        raise TypeError(
            "Agent(model=...) takes a model name such as 'gpt-4o' or an object with "
            f"'async def agenerate(messages, tools, **kwargs)', got {type(model).__name__}"
        )

    def __repr__(self) -> str:
        return f"Agent(model={self.model!r})"

    def resolve_tool_node(self) -> ToolNode | None:
        """The tool node whose tools are offered: the one given, or the graph node named by
        ``tool_node`` (in the running graph).

        Raises:
            GraphError: ``GRAPH_004`` when the named node does not exist in the running graph
                (or the agent runs outside a graph) or is not a ``ToolNode``;
                ``context["node"]`` is the name.
        """
        if self.tool_node is not None:
            return self.tool_node
        if self.tool_node_ref is None:
            return None
        run = current_run()
        obj = run.nodes.get(self.tool_node_ref) if run is not None else None
        for candidate in (obj, getattr(obj, "func", None)):
            if isinstance(candidate, ToolNode):
                return candidate
        where = "in this graph" if run is not None else "(the agent runs outside a graph run)"
        raise GraphError(
            f"Agent(tool_node={self.tool_node_ref!r}): no ToolNode named {self.tool_node_ref!r} "
            f"{where}; add it with graph.add_node({self.tool_node_ref!r}, ToolNode([...]))",
            error_code="GRAPH_004",
            context={"node": self.tool_node_ref},
        )

    def build_messages(self, state: Any) -> list[Message]:
        """The messages sent to the model for ``state`` (module docstring), oldest first."""
        messages = list(self.system_prompt)
        summary = getattr(state, "context_summary", None)
        if summary:
            messages.append(
                Message.text_message(
                    f"Summary of the earlier conversation:\n{summary}", role="system"
                )
            )
        messages.extend(self.extra_messages)
        messages.extend(m for m in (getattr(state, "context", None) or ()) if not m.delta)
        return messages

    async def __call__(self, state: Any, config: dict[str, Any] | None = None) -> Message:
        """Ask the model for the next assistant message.

        Args:
            state: the graph state (its ``context`` and ``context_summary`` are read).
            config: the run's config (unused by the agent itself).

        Returns:
            The assistant message (role ``assistant``, fresh ``message_id``); its tool calls in
            both ``ToolCallBlock`` and OpenAI ``tools_calls`` shapes, each with an id.

        Raises:
            ModelError: ``GRAPH_000`` the model (and every fallback) failed.
            GraphError: ``GRAPH_004`` the named tool node does not exist.
        """
        tool_node = self.resolve_tool_node()
        tools = tool_node.tool_schemas(self.tools_tags) if tool_node is not None else None
        messages = self.build_messages(state)
        run = current_run()
        attrs = None
        if enabled():
            attrs = {ATTR.GENAI_OPERATION: SPAN.AGENT}
            if run is not None and run.node:
                attrs[ATTR.NODE] = run.node
            model_name = getattr(self.model, "model", None)
            if isinstance(model_name, str):
                attrs[ATTR.GENAI_REQUEST_MODEL] = model_name
        with span(SPAN.AGENT, attributes=attrs):
            models = [self.model, *self.fallbacks]
            for i, model in enumerate(models):
                try:
                    msg = await model.agenerate(messages, tools or None, **self._model_kwargs)
                    break
                except ModelError:
                    if i == len(models) - 1:
                        raise
        if not isinstance(msg, Message):
            raise ModelError(
                f"the chat model {type(self.model).__name__} returned a "
                f"{type(msg).__name__}, not a Message",
                context={"model": type(self.model).__name__},
            )
        if msg.role != "assistant":
            msg = msg.model_copy(update={"role": "assistant"})
        return normalize_assistant(msg)

    async def execute(self, state: Any, config: dict[str, Any] | None = None) -> Message:
        """10xGraph's name for :meth:`__call__`."""
        return await self(state, config)
