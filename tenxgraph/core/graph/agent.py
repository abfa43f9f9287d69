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

What the model is sent, in order: the system prompt (its ``{field}`` placeholders filled from
the state), ``state.context_summary`` (when set, as a system message ``"Summary of the earlier
conversation: ..."``), ``extra_messages``, then ``state.context`` (after the graph's context
manager when ``trim_context=True``), with the tool schemas of its ``ToolNode`` (filtered by
``tools_tags``). The request puts the results of each tool call directly after the call (a
stand-in "not run" result for a call without one; ``agent_internal.tool_pairing``) without
changing the thread. The node returns the model's assistant message, which the graph appends to
``state.context``. The runtime checkpoints that message before the ``ToolNode`` runs, so a
replay after a crash sees the same tool calls even from a non-deterministic model, and the
model is not asked again for an answer already checkpointed.

When the run streams (``astream`` / ``stream``) and the model can stream (a model given by
name), the request carries ``"stream": true`` and every text fragment reaches the caller as a
``message`` chunk whose ``message.delta`` is ``True``; only the complete message is stored.

Tools are offered on every call, also right after tool results, so the model can chain tool
calls (the loop ends when it answers without calling a tool, as the guide's graph expects).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import orjson
import pydantic

from tenxgraph.core._context import current_run
from tenxgraph.core.exceptions import GraphError, UnsupportedArgumentError, ValidationError
from tenxgraph.core.state import AgentState, Message, TextBlock
from tenxgraph.models.base import ChatModel, ModelError, StructuredOutputError, normalize_assistant
from tenxgraph.models.openai import sdk_available as openai_sdk_available
from tenxgraph.models.openai_compat import OpenAICompatModel, strip_provider
from tenxgraph.models.providers import PROVIDERS, infer_provider, make_provider_model
from tenxgraph.storage.media.config import ImageHandling, MultimodalConfig
from tenxgraph.telemetry import ATTR, SPAN, enabled, record_error, start_span, use_span

from .agent_internal.constants import RetryConfig
from .agent_internal.media import prepare_media
from .agent_internal.skills import SKILL_TOOL_NAMES, AgentSkillsMixin
from .agent_internal.tool_pairing import pair_tool_results
from .base_agent import BaseAgent
from .tool_node import ToolNode

if TYPE_CHECKING:
    from tenxgraph.core.skills import SkillConfig

__all__ = ["Agent", "fill_placeholders"]


class _StreamingModel(ChatModel, Protocol):
    """A chat model that can also stream (``OpenAICompatModel.astream``): delta fragments,
    then the whole answer."""

    def astream(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> AsyncIterator[Message]: ...


_DEFAULT = object()
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_REASONING_EFFORTS = ("minimal", "low", "medium", "high")
_REASONING_SUMMARIES = ("auto", "concise", "detailed")


def fill_placeholders(text: str, state: Any) -> str:
    """``text`` with each ``{field}`` replaced by ``str(state.field)``.

    Only ``{identifier}`` is a placeholder; ``{{`` and ``}}`` give literal braces; any other
    brace (a JSON example in a prompt) is left as it is.

    Args:
        text: the prompt text.
        state: the graph state (any object with attributes).

    Returns:
        The filled text.

    Raises:
        ValidationError: ``VALIDATION_000`` a placeholder names no field of the state;
            ``context["field"]`` is its name.
    """

    def sub(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        name = match.group(1)
        fields = getattr(type(state), "model_fields", None)
        if (fields is not None and name not in fields) or not hasattr(state, name):
            raise ValidationError(
                f"the system prompt names {{{name}}}, but the state "
                f"({type(state).__name__}) has no field {name!r}; add the field to the state "
                f"class or write {{{{{name}}}}} for literal braces",
                context={"field": name, "state": type(state).__name__},
            )
        value = getattr(state, name)
        return "" if value is None else str(value)

    return _PLACEHOLDER.sub(sub, text)


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


def _retry_config(value: Any) -> RetryConfig | None:
    if value is None or value is False:
        return None
    if value is True:
        return RetryConfig()
    if isinstance(value, RetryConfig):
        return value
    if isinstance(value, dict):
        try:
            return RetryConfig(**value)
        except TypeError as exc:
            raise UnsupportedArgumentError(
                f"Agent(retry_config={{...}}): {exc}; the keys are RetryConfig's fields",
                context={"argument": "retry_config", "where": "Agent", "did_you_mean": None},
            ) from None
    raise UnsupportedArgumentError(
        f"Agent(retry_config=...) takes True, False, None, a RetryConfig or a dict, got "
        f"{type(value).__name__}",
        context={"argument": "retry_config", "where": "Agent", "did_you_mean": None},
    )


def _multimodal_config(value: Any) -> MultimodalConfig | None:
    """``Agent(multimodal_config=...)`` checked: a ``MultimodalConfig`` or ``None``."""
    if value is None:
        return None
    if not isinstance(value, MultimodalConfig):
        raise GraphError(
            "Agent(multimodal_config=...) takes a tenxgraph.storage.media.MultimodalConfig, got "
            f"{type(value).__name__}",
            error_code="GRAPH_001",
            context={"parameter": "multimodal_config"},
        )
    if value.image_handling is ImageHandling.FILE_ID:
        raise _unsupported(
            "multimodal_config.image_handling",
            "provider file uploads are not implemented: use BASE64 or URL",
        )
    return value


def _unsupported(name: str, hint: str) -> UnsupportedArgumentError:
    return UnsupportedArgumentError(
        f"Agent({name}=...) is not supported by tenxgraph; {hint}",
        error_code="GRAPH_010",
        context={"argument": name, "where": "Agent", "did_you_mean": None},
    )


def _reasoning_params(model: Any, config: Any, provider: str = "openai") -> dict[str, Any]:
    """The request parameters ``reasoning_config`` asks for (see ``Agent``)."""
    if provider == "google" and isinstance(config, dict):
        budget, level = config.get("thinking_budget"), config.get("thinking_level")
        if budget is not None or level is not None:
            rest = {
                k: v for k, v in config.items() if k not in ("thinking_budget", "thinking_level")
            }
            extra = {"thinking_budget": budget} if budget is not None else {"thinking_level": level}
            return {**_reasoning_params(model, rest or None, provider), **extra}
    name = model if isinstance(model, str) else getattr(model, "model", "")
    is_reasoning = isinstance(name, str) and strip_provider(name).lower().startswith(
        _REASONING_PREFIXES
    )
    if config is _DEFAULT:
        return {"reasoning_effort": "medium"} if is_reasoning else {}
    if config is None or config is False:
        return {}
    if config is True:
        return {"reasoning_effort": "medium"}
    if isinstance(config, dict):
        allowed = {"effort", "summary"} if provider == "openai" else {"effort"}
        unknown = set(config) - allowed
        if unknown:
            raise _unsupported(
                "reasoning_config",
                f"provider {provider!r} takes only {sorted(allowed)} (got {sorted(unknown)}); "
                "'summary' is an OpenAI Responses-API option and 'thinking_budget' a Gemini one",
            )
        summary = config.get("summary")
        if summary is not None:
            if summary not in _REASONING_SUMMARIES:
                raise UnsupportedArgumentError(
                    f"reasoning_config['summary'] must be one of {_REASONING_SUMMARIES}, "
                    f"got {summary!r}",
                    context={
                        "argument": "reasoning_config",
                        "where": "Agent",
                        "did_you_mean": None,
                    },
                )
            rest = {k: v for k, v in config.items() if k != "summary"}
            return {**_reasoning_params(model, rest, provider), "reasoning_summary": summary}
        effort = config.get("effort")
        if effort is None:
            return {}
        if effort not in _REASONING_EFFORTS:
            raise UnsupportedArgumentError(
                f"reasoning_config['effort'] must be one of {_REASONING_EFFORTS}, got {effort!r}",
                context={"argument": "reasoning_config", "where": "Agent", "did_you_mean": None},
            )
        return {"reasoning_effort": effort}
    raise UnsupportedArgumentError(
        f"Agent(reasoning_config=...) takes True, False, None or a dict, got {type(config).__name__}",
        context={"argument": "reasoning_config", "where": "Agent", "did_you_mean": None},
    )


def _json_candidates(text: str) -> list[str]:
    """The text, then what a local repair can recover from it (fenced block, outer object)."""
    out = [text]
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        out.append(fenced.group(1).strip())
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        out.append(text[start : end + 1])
    return out


class _Circuit:
    __slots__ = ("failures", "opened_at")

    def __init__(self) -> None:
        self.failures = 0
        self.opened_at: float | None = None


class Agent(BaseAgent, AgentSkillsMixin):
    """A node calling a chat model (10xGraph-compatible ``Agent``).

    Args:
        model: a model name (``"gpt-4o"``, ``"gemini-2.5-flash"``, ``"claude-sonnet-4-5"``,
            ``"openai/gpt-4o"``; see ``provider``), or any object implementing the chat-model
            protocol (``tenxgraph.models.ChatModel``, e.g. ``tenxgraph.models.ScriptedModel``).
            An OpenAI name is served through the official ``openai`` SDK when it is installed
            (``tenxgraph.models.openai.OpenAIModel``), else by the httpx adapter
            ``OpenAICompatModel``: the same requests, answers and retry policy.
        system_prompt: messages sent first on every call, e.g.
            ``[{"role": "system", "content": "You help {user_name}."}]``; ``content`` may be a
            string or a list of ``{"type": "text", "text": ...}`` parts. ``{field}``
            placeholders are filled from the state on every call (``{{``/``}}`` for literal
            braces); a placeholder naming no state field raises ``ValidationError``.
        tool_node: the tools the model may call: a ``ToolNode``, or the name of the graph node
            holding it (looked up in the running graph on each call).
        tools: alternative to ``tool_node``: a list of tool functions (a ``ToolNode`` is built
            and exposed as ``tool_node``, to be added to the graph) or a ``ToolNode``.
        base_url: API root for a model given by name (default ``OPENAI_BASE_URL``, else
            ``https://api.openai.com/v1``).
        api_key: API key for a model given by name (default ``OPENAI_API_KEY``).
        provider: ``"openai"`` (any OpenAI-compatible endpoint), ``"google"`` (Gemini through
            ``google-genai``, extra ``google``) or ``"anthropic"`` (Claude through
            ``anthropic``, extra ``anthropic``); ``None`` infers it from the model name
            (:func:`tenxgraph.models.providers.infer_provider`). Other values: ``GRAPH_010``.
        tool_node_name: 10xGraph's older spelling of ``tool_node="NAME"``.
        extra_messages: messages sent after the system prompt on every call.
        tools_tags: offer only the tools carrying at least one of these tags (``@tool(tags=)``
            or a ``__tags__`` attribute).
        output_type: ``"text"`` (default) or ``"json"`` (asks for a JSON object answer).
        output_schema: a Pydantic model class the final answer must match: the request carries
            ``response_format={"type": "json_schema", "json_schema": {"name", "schema",
            "strict": False}}``; a text answer is parsed (a JSON object inside a code fence or
            surrounded by prose is recovered locally); when it still does not match, the model
            is asked again up to ``output_retries`` times with the validation errors; then
            ``StructuredOutputError`` (``MODEL_002``). The stored message holds the JSON text
            and ``metadata["structured_output"]`` (the validated value, JSON form); read it
            back with :meth:`parsed`. Answers that call tools are not parsed.
        output_retries: how many times the model is asked to correct its structured answer
            (default 2).
        use_vertex_ai: Google only: call Gemini through Vertex AI instead of the Gemini API
            (the fallbacks of provider ``google`` too); unset, ``GOOGLE_GENAI_USE_VERTEXAI``
            decides. Other providers: ``GRAPH_010``.
        api_style: ``"chat"`` (chat completions, default) or ``"responses"`` (OpenAI's
            Responses API through the official ``openai`` SDK, extra ``openai``).
        trim_context: show the model what the graph's context manager
            (``StateGraph(context_manager=...)``) keeps. In a graph without one the agent
            runs untrimmed (the model sees the whole conversation, as in 10xGraph) and
            ``compile()`` logs one warning naming the fix.
        reasoning_config: ``{"effort": "low" | "medium" | "high"}`` or ``True`` (medium) is
            sent as ``reasoning_effort``; ``False`` / ``None`` send nothing. OpenAI also takes
            ``"summary": "auto" | "concise" | "detailed"``, which switches the agent to the
            Responses API (only it returns reasoning summaries; they land in
            ``Message.reasoning``). Unset: ``medium``
            for reasoning models (names starting ``o1``, ``o3``, ``o4``, ``gpt-5``), nothing
            for others. Google and Anthropic map the effort to a thinking budget
            (``tenxgraph.models.google.THINKING_BUDGETS`` / ``.anthropic.THINKING_BUDGETS``);
            Google also takes ``thinking_budget`` (tokens) and ``thinking_level``. Other keys
            are refused (``GRAPH_010``).
        retry_config: ``True`` (default: ``RetryConfig()``), ``False`` / ``None`` (no retry),
            a ``RetryConfig`` or a dict of its fields. Retries apply to models given by name;
            the circuit breaker to every target.
        fallback_models: model names (or ``(name, provider)`` tuples, or chat-model objects)
            tried in order when the model raises a retryable ``ModelError`` (429, 5xx,
            connection errors, after the model's own retries; an error whose
            ``context["retryable"]`` is ``False``, such as HTTP 400 or 401, is raised at once); a bare name has the agent's
            provider. The answer's ``metadata["model"]`` names the model that answered.
        timeout_s: seconds per HTTP request for a model given by name (default: the
            process-wide default of ``tenxgraph.core.llm``, 600 s unless set).
        skills: a ``tenxgraph.core.skills.SkillConfig`` (``docs/how-to/skills.md``).
            ``mode="on-demand"``: a system message lists the skills found
            (``inject_catalog``) and the tool node gets ``activate_skill`` (and
            ``read_skill_resource`` when skills bundle files), which return a skill's text as
            a tool result; it needs ``tool_node`` once skills are found. ``mode="session"``:
            the skill named by the state field ``preload_from`` is sent as a system message.
            ``skills_dir=None`` disables skills.
        multimodal_config: a ``tenxgraph.storage.media.MultimodalConfig``: inline images are
            validated (type, ``max_image_size_mb``) and scaled down to
            ``max_image_dimension`` before each model call; ``image_handling=URL`` sends a
            stored image as its store's signed URL when it has one; ``document_handling``
            skips documents (``SKIP``), sends their raw bytes (``FORWARD_RAW``), or
            (``EXTRACT_TEXT``) their text, decoding text documents and refusing types outside
            ``supported_doc_types``. Applied to a copy of the prompt, never to the state.
        **model_params: sampling parameters (``temperature``, ``max_tokens``, ``top_p``,
            ``stop``, ``tool_choice``...): sent with each request for a model name, passed as
            keyword arguments to ``agenerate`` for a model object.

    Attributes:
        model: the chat model object.
        tool_node (ToolNode | None): the tool node given or built from ``tools``.
        tool_node_ref (str | None): the node name to look the tool node up by.

    Raises:
        UnsupportedArgumentError: ``GRAPH_010`` for options tenxgraph does not implement
            (``api_style="responses"`` for a model object or another provider, ``memory``,
            ``multimodal_config`` with ``image_handling=FILE_ID``, media ``output_type`` s, providers other than ``openai`` /
            ``google`` / ``anthropic``), ``GRAPH_009`` for a malformed ``retry_config`` /
            ``reasoning_config``.
        ModelError: ``MODEL_001`` the provider's SDK is not installed (``google``,
            ``anthropic``; ``openai`` for ``api_style="responses"``).
        GraphError: ``GRAPH_001`` both ``tool_node`` and ``tools`` given, ``output_schema``
            is not a Pydantic model class, ``skills`` is not a ``SkillConfig``, or on-demand
            skills found without a tool node (``SkillsToolNodeError``).
        TypeError: ``model`` is neither a string nor a chat model.
    """

    #: Called by the runner as ``await node(state=state, config=config)``; ``node_stream``
    #: is the generator form the runner uses inside a graph.
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
        output_schema: type[pydantic.BaseModel] | None = None,
        output_retries: int = 2,
        reasoning_config: Any = _DEFAULT,
        retry_config: Any = True,
        fallback_models: Sequence[Any] | None = None,
        timeout_s: float | None = None,
        trim_context: bool = False,
        api_style: str = "chat",
        skills: Any = None,
        memory: Any = None,
        multimodal_config: Any = None,
        use_vertex_ai: bool = False,
        **model_params: Any,
    ) -> None:
        if api_style not in ("chat", "responses"):
            raise _unsupported("api_style", "use 'chat' or 'responses'")
        if api_style == "responses" and not isinstance(model, str):
            raise _unsupported(
                "api_style", "'responses' applies to a model given by name (provider='openai')"
            )
        for name, value in (("memory", memory),):
            if value is not None:
                raise _unsupported(name, "leave it unset")
        self.multimodal_config = _multimodal_config(multimodal_config)
        if provider not in (None, *PROVIDERS):
            raise _unsupported("provider", f"use one of {PROVIDERS} (or leave it unset)")
        if provider is None and isinstance(model, str):
            provider = infer_provider(model)
        if use_vertex_ai and (provider != "google" or not isinstance(model, str)):
            raise _unsupported("use_vertex_ai", "it routes a Google model given by name")
        self.use_vertex_ai = bool(use_vertex_ai)
        if output_type not in ("text", "json"):
            raise _unsupported("output_type", "only text (and JSON) answers are generated")
        if output_schema is not None and not (
            isinstance(output_schema, type) and issubclass(output_schema, pydantic.BaseModel)
        ):
            raise GraphError(
                f"Agent(output_schema=...) takes a Pydantic model class, got {output_schema!r}",
                error_code="GRAPH_001",
                context={"parameter": "output_schema"},
            )
        if tool_node is not None and tools is not None:
            raise GraphError(
                "Agent takes tool_node= or tools=, not both", error_code="GRAPH_001", context={}
            )
        self.provider = provider
        self.trim_context = bool(trim_context)
        self.output_schema = output_schema
        self.output_retries = int(output_retries)
        self.retry_config = _retry_config(retry_config)
        params = dict(model_params)
        if output_type == "json" and output_schema is None:
            params.setdefault("response_format", {"type": "json_object"})
        params.update(_reasoning_params(model, reasoning_config, provider or "openai"))
        if params.get("reasoning_summary") is not None:
            api_style = "responses"  # only the Responses API returns reasoning summaries
        if api_style == "responses" and provider not in (None, "openai"):
            raise _unsupported("api_style", "'responses' is an OpenAI API (provider='openai')")
        self.api_style = api_style
        self._model_kwargs: dict[str, Any] = {}
        self.model: ChatModel = self._make_model(
            model, provider, base_url, api_key, params, timeout_s
        )
        if not isinstance(model, str):
            self._model_kwargs = params
        self.fallbacks: list[ChatModel] = []
        if isinstance(fallback_models, (str, bytes)):
            # a lone name would be iterated character by character
            raise UnsupportedArgumentError(
                f"Agent(fallback_models=...) takes a list of models, not one string: write "
                f"fallback_models=[{fallback_models!r}]",
                error_code="GRAPH_010",
                context={"argument": "fallback_models", "where": "Agent", "did_you_mean": None},
            )
        for fb in fallback_models or ():
            name, fb_provider = fb if isinstance(fb, tuple) else (fb, provider)
            if fb_provider not in (None, *PROVIDERS):
                raise _unsupported("fallback_models", f"a provider is one of {PROVIDERS}")
            same = fb_provider == provider  # base_url / api_key belong to the primary's provider
            self.fallbacks.append(
                self._make_model(
                    name,
                    fb_provider,
                    base_url if same else None,
                    api_key if same else None,
                    params if same else dict(model_params),
                    timeout_s,
                )
            )
        self._circuits: dict[tuple[str, str], _Circuit] = {}
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
        self.skills: SkillConfig | None = None
        if skills is not None:
            from tenxgraph.core.skills import SkillConfig

            if not isinstance(skills, SkillConfig):
                raise GraphError(
                    "Agent(skills=...) takes a tenxgraph.core.skills.SkillConfig, got "
                    f"{type(skills).__name__}",
                    error_code="GRAPH_001",
                    context={"parameter": "skills"},
                )
            self.skills = skills
            self._setup_skills(skills)

    # -- skills (agent_internal.skills.AgentSkillsMixin) ---------------------------------------
    def _skills_tool_node(self) -> ToolNode | None:
        return self.tool_node

    def _skills_tool_node_name(self) -> str | None:
        return self.tool_node_ref

    def get_tool_node(self) -> ToolNode | None:
        """The tool node whose tools are offered, with the skill tools (``activate_skill``,
        ``read_skill_resource``) attached (10xGraph's ``agent.get_tool_node()``).

        Returns:
            The ``ToolNode`` given (or, inside a graph run, the one named by ``tool_node``),
            or ``None`` when the agent has no tools.

        Raises:
            GraphError: ``GRAPH_004`` as :meth:`resolve_tool_node`.
        """
        node = self.resolve_tool_node()
        if node is not None:
            self._attach_skill_tools(node)
        return node

    def _skill_messages(self, state: Any) -> list[Message]:
        """The system messages skills add for ``state`` (``AgentSkillsMixin``)."""
        return [
            Message.text_message(p["content"], role="system")
            for p in self._build_skill_prompts(state, [])
        ]

    def _make_model(
        self,
        model: Any,
        provider: str | None,
        base_url: str | None,
        api_key: str | None,
        params: dict[str, Any],
        timeout_s: float | None,
    ) -> ChatModel:
        rc = self.retry_config
        if isinstance(model, str) and provider in ("google", "anthropic"):
            return make_provider_model(
                provider,
                model,
                base_url=base_url,
                api_key=api_key,
                timeout_s=timeout_s,
                max_retries=rc.max_retries if rc is not None else 0,
                params=params,
                use_vertex_ai=self.use_vertex_ai and provider == "google",
                backoff={
                    "retry_statuses": rc.retryable_status_codes,
                    "initial_delay_s": rc.initial_delay,
                    "backoff_factor": rc.backoff_factor,
                    "max_delay_s": rc.max_delay,
                }
                if rc is not None and provider == "google"
                else None,
            )
        if isinstance(model, str):
            # the official SDK when installed (the Responses API needs it), else the httpx
            # adapter: the same requests, answers and retry policy
            extra: dict[str, Any] = {}
            cls: type[OpenAICompatModel] = OpenAICompatModel
            if self.api_style == "responses" or openai_sdk_available():
                from tenxgraph.models.openai import OpenAIModel

                cls, extra = OpenAIModel, {"api_style": self.api_style}
            return cls(
                model,
                base_url=base_url,
                api_key=api_key,
                timeout_s=timeout_s,
                max_retries=rc.max_retries if rc is not None else 0,
                retry_statuses=rc.retryable_status_codes if rc is not None else None,
                initial_delay_s=rc.initial_delay if rc is not None else 0.0,
                backoff_factor=rc.backoff_factor if rc is not None else 2.0,
                max_delay_s=rc.max_delay if rc is not None else 0.0,
                **extra,
                **params,
            )
        if callable(getattr(model, "agenerate", None)):
            return cast(ChatModel, model)  # it has agenerate, the one method ChatModel asks for
        raise TypeError(
            "Agent(model=...) takes a model name such as 'gpt-4o' or an object with "
            f"'async def agenerate(messages, tools, **kwargs)', got {type(model).__name__}"
        )

    def __repr__(self) -> str:
        return f"Agent(model={self.model!r})"

    # -- what the model sees -------------------------------------------------------------------
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
        """The messages sent to the model for ``state`` (module docstring), oldest first.

        Raises:
            ValidationError: ``VALIDATION_000`` a system-prompt placeholder names no state
                field.
        """
        messages = [
            m.model_copy(update={"content": [TextBlock(text=fill_placeholders(m.text(), state))]})
            if m.role == "system" and "{" in m.text()
            else m
            for m in self.system_prompt
        ]
        if self.skills is not None:
            messages.extend(self._skill_messages(state))
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

    async def _visible_state(self, state: Any) -> tuple[Any, dict[str, Any]]:
        """The state the model is shown, and the durable updates trimming made
        (``{"context_summary": ...}`` when a context manager summarised)."""
        if not self.trim_context:
            return state, {}
        run = current_run()
        manager = getattr(getattr(run, "graph", None), "context_manager", None)
        if manager is None:
            # as in 10xGraph: nothing to trim with (compile() logged a warning naming the fix)
            return state, {}
        copy = state.model_copy() if isinstance(state, AgentState) else state
        if isinstance(state, AgentState):
            copy.context = list(state.context)
        shown = await manager.atrim_context(copy)
        updates: dict[str, Any] = {}
        if getattr(shown, "context_summary", None) != getattr(state, "context_summary", None):
            updates["context_summary"] = shown.context_summary
        return shown, updates

    # -- calling the model ---------------------------------------------------------------------
    def _target(self, model: Any) -> tuple[str, str]:
        provider = getattr(model, "provider", None) or self.provider or "openai"
        return (str(provider), str(getattr(model, "model", type(model).__name__)))

    def _circuit_allows(self, model: Any) -> bool:
        rc = self.retry_config
        if rc is None or not rc.circuit_breaker_enabled:
            return True
        c = self._circuits.get(self._target(model))
        if c is None or c.opened_at is None:
            return True
        return time.monotonic() - c.opened_at >= rc.circuit_breaker_reset_timeout

    def _record(self, model: Any, ok: bool) -> None:
        rc = self.retry_config
        if rc is None or not rc.circuit_breaker_enabled:
            return
        c = self._circuits.setdefault(self._target(model), _Circuit())
        if ok:
            c.failures, c.opened_at = 0, None
            return
        c.failures += 1
        if c.opened_at is not None or c.failures >= rc.circuit_breaker_threshold:
            c.opened_at = time.monotonic()

    def circuit_open(self, model: str) -> bool:
        """Whether the circuit of ``model`` (a name) is open now (circuit breaker enabled)."""
        for m in (self.model, *self.fallbacks):
            if self._target(m)[1] == strip_provider(model):
                return not self._circuit_allows(m)
        return False

    async def _generate(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        stream: bool,
        extra: dict[str, Any],
    ) -> AsyncGenerator[Message, None]:
        """Ask the model (then each fallback); yield its delta fragments, then the answer."""
        messages = await prepare_media(messages, self.multimodal_config)
        models = [self.model, *self.fallbacks]
        last: ModelError | None = None
        skipped: list[str] = []
        for model in models:
            if not self._circuit_allows(model):
                skipped.append(self._target(model)[1])
                continue
            kwargs = {**self._model_kwargs, **extra}
            streaming = stream and callable(getattr(model, "astream", None))
            events = _ModelEvents(self._target(model)[1], streaming)
            await events.start()
            try:
                if streaming:
                    final: Message | None = None
                    streamer = cast(_StreamingModel, model)  # astream checked just above
                    async for msg in streamer.astream(messages, tools or None, **kwargs):
                        if msg.delta:
                            await events.delta(msg)
                            yield msg
                        else:
                            final = msg
                    if final is None:
                        raise ModelError(
                            "the model's stream ended without an answer",
                            context={"model": self._target(model)[1]},
                        )
                    msg = final
                else:
                    msg = await model.agenerate(messages, tools or None, **kwargs)
            except ModelError as exc:
                self._record(model, ok=False)
                await events.error(exc)
                if exc.context.get("retryable") is False:
                    # a request the provider refused (400, 401...) or an answer it garbled:
                    # not an outage, so no fallback model is asked
                    raise
                last = exc
                continue
            self._record(model, ok=True)
            await events.result(msg)
            if not isinstance(msg, Message):
                raise ModelError(
                    f"the chat model {type(model).__name__} returned a "
                    f"{type(msg).__name__}, not a Message",
                    context={"model": type(model).__name__},
                )
            if msg.role != "assistant":
                msg = msg.model_copy(update={"role": "assistant"})
            yield normalize_assistant(msg)
            return
        if last is not None:
            raise last
        raise ModelError(
            f"every model's circuit is open ({', '.join(skipped)}); retry after "
            f"{self.retry_config.circuit_breaker_reset_timeout if self.retry_config else 0} s",
            context={"model": skipped[0] if skipped else "", "circuit_open": skipped},
        )

    def _schema_format(self) -> dict[str, Any]:
        assert self.output_schema is not None
        return {
            "type": "json_schema",
            "json_schema": {
                "name": self.output_schema.__name__,
                "schema": self.output_schema.model_json_schema(),
                "strict": False,
            },
        }

    def _parse(self, text: str) -> tuple[pydantic.BaseModel | None, str, str]:
        """``(value, json_text, error)``: the validated value (or ``None``) and why not."""
        assert self.output_schema is not None
        error = "the answer is empty"
        for candidate in _json_candidates(text.strip()):
            if not candidate:
                continue
            try:
                value = self.output_schema.model_validate_json(candidate)
            except pydantic.ValidationError as exc:
                error = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                    for e in exc.errors(include_url=False)
                )
                continue
            return value, candidate, ""
        return None, text, error

    async def respond(self, state: Any, stream: bool = False) -> AsyncIterator[Any]:
        """The agent's work for one node execution, as a stream.

        Args:
            state: the graph state.
            stream: ask the model to stream (when it can).

        Yields:
            Delta messages (``delta=True``) while the model streams; then the complete
            assistant message; then, when the context manager summarised, a dict
            ``{"context_summary": ...}`` (a state update).

        Raises:
            ModelError: ``MODEL_001`` the model (and every fallback) failed.
            StructuredOutputError: ``MODEL_002`` the answer never matched ``output_schema``.
            GraphError: ``GRAPH_004`` the named tool node does not exist.
            ValidationError: ``VALIDATION_000`` a system-prompt placeholder names no field.
        """
        shown, updates = await self._visible_state(state)
        # first: a hot reload of skills may change the skill tools
        messages = self.build_messages(shown)
        tool_node = self.get_tool_node()
        tools = tool_node.tool_schemas(self.tools_tags) if tool_node is not None else None
        if tool_node is not None and tools is not None and self.tools_tags:
            # the skill tools carry no tag: offered whatever tools_tags selects
            tools += [
                t for t in tool_node.tool_schemas() if t["function"]["name"] in SKILL_TOOL_NAMES
            ]
        extra = {"response_format": self._schema_format()} if self.output_schema else {}
        run = current_run()
        cbm = getattr(getattr(run, "graph", None), "callback_manager", None)
        cb_ctx = None
        if cbm is not None:
            messages = await self._validate(cbm, messages)
            from tenxgraph.utils.callbacks import InvocationType

            if cbm.has_callbacks(InvocationType.AI):
                cb_ctx = self._callback_context(run)
                # copies: a callback editing messages in place must not edit the thread
                copies = [m.model_copy(deep=True) for m in messages]
                messages = await cbm.execute_before_invoke(cb_ctx, copies)
            else:
                cbm = None
        # the request, not the thread: each call's results directly after it (OpenAI's rule)
        messages = pair_tool_results(messages)
        attrs = None
        if enabled():
            attrs = {ATTR.GENAI_OPERATION: SPAN.AGENT}
            if run is not None and run.node:
                attrs[ATTR.NODE] = run.node
            model_name = getattr(self.model, "model", None)
            if isinstance(model_name, str):
                attrs[ATTR.GENAI_REQUEST_MODEL] = model_name
        # Started, not made current across yields: the consumer may resume this generator
        # from another task or context (sync stream() does), where a context token entered
        # here could not be left. Each await runs with the span current instead.
        sp = start_span(SPAN.AGENT, attributes=attrs)
        final: Message | None = None
        try:
            try:
                gen = self._generate(messages, tools, stream, extra)
                try:
                    while True:
                        with use_span(sp):
                            try:
                                msg = await gen.__anext__()
                            except StopAsyncIteration:
                                break
                        if msg.delta:
                            yield msg
                        else:
                            final = msg
                finally:
                    await gen.aclose()
                assert final is not None
                if self.output_schema is not None and not final.tool_calls():
                    with use_span(sp):
                        final = await self._structured(final, messages, tools, extra)
            except Exception as exc:
                recovered = (
                    await cbm.execute_on_error(cb_ctx, messages, exc) if cbm is not None else None
                )
                if recovered is None:
                    raise
                if not isinstance(recovered, Message):
                    raise GraphError(
                        f"an on_error callback returned a {type(recovered).__name__}; an AI "
                        "on_error callback returns a Message or None",
                        error_code="GRAPH_005",
                        context={"node": run.node if run is not None else ""},
                    ) from exc
                final = normalize_assistant(recovered.model_copy(update={"role": "assistant"}))
            if cbm is not None:
                final = await cbm.execute_after_invoke(cb_ctx, messages, final)
                if not isinstance(final, Message):
                    raise GraphError(
                        f"an after_invoke callback returned a {type(final).__name__}; an AI "
                        "after_invoke callback returns the Message it was given (or another)",
                        error_code="GRAPH_005",
                        context={"node": run.node if run is not None else ""},
                    )
        except BaseException as exc:
            record_error(sp, exc)
            raise
        finally:
            sp.end()
        yield final
        if updates:
            yield updates

    def _callback_context(self, run: Any) -> Any:
        from tenxgraph.utils.callbacks import CallbackContext, InvocationType

        return CallbackContext(
            invocation_type=InvocationType.AI,
            node_name=run.node if run is not None else "",
            function_name=str(getattr(self.model, "model", type(self.model).__name__)),
            metadata={
                "thread_id": run.config.get("thread_id") if run is not None else None,
                "run_id": run.config.get("run_id") if run is not None else None,
            },
        )

    @staticmethod
    async def _validate(cbm: Any, messages: list[Message]) -> list[Message]:
        """Run the input validators on copies of the newest user messages (the ones after
        the last assistant or tool message) and send the model those copies (a lenient
        validator may have sanitised them); ``messages`` themselves are not changed."""
        if not cbm.validators:
            return messages
        start = len(messages)
        while start > 0 and messages[start - 1].role == "user":
            start -= 1
        run = current_run()
        checked = run.validated if run is not None else {}
        if checked and start < len(messages):
            if all(m.message_id in checked for m in messages[start:]):
                # The graph validated this run's input already: send its copies.
                return [*messages[:start], *(checked[m.message_id] for m in messages[start:])]
        newest = [m.model_copy(deep=True) for m in messages[start:]]
        if not await cbm.execute_validators(newest):
            from tenxgraph.utils.validators import ValidationError as InputRefused

            raise InputRefused("an input validator refused the newest messages", "rejected")
        return [*messages[:start], *newest]

    async def _structured(
        self,
        answer: Message,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        extra: dict[str, Any],
    ) -> Message:
        """Parse ``answer`` into ``output_schema``, asking the model to correct it if needed."""
        assert self.output_schema is not None
        attempts = 0
        convo = list(messages)
        while True:
            value, json_text, error = self._parse(answer.text())
            if value is not None:
                meta = {
                    **answer.metadata,
                    "structured_output": value.model_dump(mode="json"),
                    "output_schema": self.output_schema.__name__,
                }
                others = [b for b in answer.content if not isinstance(b, TextBlock)]
                return answer.model_copy(
                    update={"content": [TextBlock(text=json_text), *others], "metadata": meta}
                )
            if attempts >= self.output_retries:
                raise StructuredOutputError(
                    f"the model's answer does not match {self.output_schema.__name__} after "
                    f"{attempts + 1} attempt(s): {error}",
                    context={
                        "schema": self.output_schema.__name__,
                        "attempts": attempts + 1,
                        "errors": error[:500],
                    },
                )
            attempts += 1
            convo += [
                answer,
                Message.text_message(
                    f"Your answer does not match the JSON schema {self.output_schema.__name__}: "
                    f"{error}. Answer again with only a JSON object matching the schema "
                    f"{orjson.dumps(self.output_schema.model_json_schema()).decode()}",
                    role="user",
                ),
            ]
            final: Message | None = None
            async for msg in self._generate(convo, None, False, extra):
                final = msg
            assert final is not None
            answer = final.model_copy(update={"message_id": answer.message_id})

    def parsed(self, message: Message) -> pydantic.BaseModel:
        """The ``output_schema`` value stored with an answer of this agent.

        Args:
            message: an assistant message this agent produced (from the state or a result).

        Returns:
            An instance of ``output_schema``.

        Raises:
            GraphError: ``GRAPH_001`` the agent has no ``output_schema`` or the message
                carries no structured output.
        """
        data = message.metadata.get("structured_output")
        if self.output_schema is None or data is None:
            raise GraphError(
                "this message carries no structured output (the agent needs output_schema=)",
                error_code="GRAPH_001",
                context={"parameter": "output_schema"},
            )
        return self.output_schema.model_validate(data)

    # -- node entry points -------------------------------------------------------------------
    async def node_stream(
        self, state: Any, config: dict[str, Any] | None = None
    ) -> AsyncIterator[Any]:
        """The form the graph runs: :meth:`respond`, streaming when the run streams.

        Args:
            state: the graph state.
            config: the run's config (unused by the agent itself).

        Yields:
            What :meth:`respond` yields.
        """
        run = current_run()
        stream = bool(run is not None and getattr(run, "stream", False))
        async for item in self.respond(state, stream=stream):
            yield item

    async def __call__(self, state: Any, config: dict[str, Any] | None = None) -> Message:
        """Ask the model for the next assistant message (no streaming).

        Args:
            state: the graph state (its ``context`` and ``context_summary`` are read).
            config: the run's config (unused by the agent itself).

        Returns:
            The assistant message (role ``assistant``, fresh ``message_id``); its tool calls in
            both ``ToolCallBlock`` and OpenAI ``tools_calls`` shapes, each with an id.

        Raises:
            ModelError, StructuredOutputError, GraphError, ValidationError: see
                :meth:`respond`.
        """
        final: Message | None = None
        async for item in self.respond(state, stream=False):
            if isinstance(item, Message) and not item.delta:
                final = item
        assert final is not None
        return final

    async def execute(self, state: Any, config: dict[str, Any] | None = None) -> Message:
        """10xGraph's name for :meth:`__call__`."""
        return await self(state, config)


class _ModelEvents:
    """The publisher events of one model request (``LLM_CALL`` start / result / error and a
    ``STREAMING`` progress event per token delta); nothing is built when the running graph
    has no publisher. Message contents are never put in an event: sizes and counts only."""

    __slots__ = ("chunks", "model", "publisher", "stream")

    def __init__(self, model: str, stream: bool) -> None:
        from tenxgraph.core._publish import run_publisher

        self.publisher = run_publisher()
        self.model = model
        self.stream = stream
        self.chunks = 0

    async def _send(self, event: Any, event_type: Any, content_type: Any, **data: Any) -> None:
        from tenxgraph.core._publish import publish_in_run

        await publish_in_run(event, event_type, content_type, model=self.model, **data)

    async def start(self) -> None:
        if self.publisher is None:
            return
        from tenxgraph.runtime.publisher.events import ContentType, Event, EventType

        await self._send(Event.LLM_CALL, EventType.START, ContentType.STATE, stream=self.stream)

    async def delta(self, msg: Message) -> None:
        if self.publisher is None:
            return
        from tenxgraph.runtime.publisher.events import ContentType, Event, EventType

        self.chunks += 1
        await self._send(
            Event.STREAMING,
            EventType.PROGRESS,
            ContentType.TEXT,
            index=self.chunks - 1,
            chars=len(msg.text()),
        )

    async def result(self, msg: Any) -> None:
        if self.publisher is None:
            return
        from tenxgraph.runtime.publisher.events import ContentType, Event, EventType

        calls = msg.tool_calls() if isinstance(msg, Message) else []
        usage = getattr(msg, "usages", None)
        await self._send(
            Event.LLM_CALL,
            EventType.RESULT,
            ContentType.TOOL_CALL if calls else ContentType.MESSAGE,
            stream=self.stream,
            chunks=self.chunks,
            tool_calls=len(calls),
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
        )

    async def error(self, exc: BaseException) -> None:
        if self.publisher is None:
            return
        from tenxgraph.runtime.publisher.events import ContentType, Event, EventType

        await self._send(
            Event.LLM_CALL,
            EventType.ERROR,
            ContentType.ERROR,
            error_type=type(exc).__name__,
            error_code=getattr(exc, "error_code", None),
        )
