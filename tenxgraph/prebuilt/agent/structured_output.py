"""``StructuredOutputAgent``: answer with JSON matching a schema, repairing invalid answers.

Graph: ``GENERATE`` (an ``Agent`` asked for JSON matching the schema through the provider's
structured-output option, ``response_format`` ``json_schema``) -> ``TOOL`` while it calls tools
(-> ``GENERATE``); otherwise the answer is validated: valid -> ``END``; invalid and fewer than
``max_attempts`` repairs in this run -> ``REPAIR``; else ``END`` with the last answer (best
effort). ``REPAIR`` appends a user message with the validation error and the JSON Schema and
counts the attempt (``execution_meta.internal_data["soa_attempts"]``), then -> ``GENERATE``.
With ``repair_system_prompt`` it goes to ``REPAIR_AGENT`` instead: a second ``Agent`` (that
prompt, no tools) rewrites the answer, which is validated the same way.

Validation: the answer's text, else the JSON inside a code fence or the outermost ``{...}``,
validated with a ``pydantic.TypeAdapter`` of the schema (a Pydantic model or a
``TypedDict``); :meth:`StructuredOutputAgent.parse` gives the validated value of a message.
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Callable, Iterable
from typing import Any

import pydantic

from tenxgraph.core.exceptions import ConfigError, ValidationError
from tenxgraph.core.graph import Agent, StateGraph, ToolNode
from tenxgraph.core.graph.agent import _json_candidates as json_candidates
from tenxgraph.core.state import AgentState, Message
from tenxgraph.prebuilt.agent._common import (
    PrebuiltGraph,
    agent_options,
    calls_tools,
    counter,
    refuse,
)
from tenxgraph.utils import END

__all__ = ["StructuredOutputAgent", "validate_answer"]

_KEY = "soa_attempts"


def validate_answer(message: Message, adapter: pydantic.TypeAdapter[Any]) -> tuple[Any, str]:
    """Validate an answer's JSON against a schema (module docstring).

    Args:
        message: the model's answer.
        adapter: a ``pydantic.TypeAdapter`` of the schema.

    Returns:
        ``(value, "")`` for a valid answer (the validated Python value), else ``(None, why)``.
    """
    error = "the answer holds no JSON"
    for candidate in json_candidates(message.text().strip()):
        if not candidate:
            continue
        try:
            return adapter.validate_json(candidate), ""
        except pydantic.ValidationError as exc:
            error = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
    return None, error


def _usable(schema: Any) -> Any:
    """``schema``, or for a ``typing.TypedDict`` on Python < 3.12 (which pydantic refuses) the
    same ``typing_extensions.TypedDict``."""
    if (
        sys.version_info < (3, 12)
        and isinstance(schema, type)
        and issubclass(schema, dict)
        and hasattr(schema, "__total__")
        and type(schema).__module__ == "typing"
    ):
        import typing_extensions

        hints = typing.get_type_hints(schema)
        return typing_extensions.TypedDict(schema.__name__, hints, total=schema.__total__)  # type: ignore[operator]
    return schema


class StructuredOutputAgent(PrebuiltGraph):
    """A generate -> validate -> repair loop compiled into a graph (module docstring).

    Args:
        model: the model name.
        provider: ``"openai"``, ``"google"`` or ``"anthropic"`` (``None``: inferred).
        output_schema: a Pydantic model class or a ``TypedDict`` the answer must match.
        tools: tool functions the generator may call first (``None``: none).
        system_prompt: the generator's system messages.
        max_attempts: repairs per run at most (>= 0, default 2); then the last answer is
            returned as it is.
        repair_system_prompt: system messages of a dedicated repair ``Agent`` (``None``: the
            correction is a user message to the generator, with no extra model call).
        reasoning_config: as ``Agent(reasoning_config=...)`` (``None``: the agent's default).
        memory: 10xGraph's long-term memory; not provided, must stay ``None``.
        retry_config: as ``Agent(retry_config=...)``.
        fallback_models: as ``Agent(fallback_models=...)``.
        trim_context: as ``Agent(trim_context=...)``.
        **agent_kwargs: further ``Agent`` arguments (``base_url``, ``temperature``...).

    Raises:
        UnsupportedArgumentError: ``GRAPH_010`` for ``memory``.
        ConfigError: ``CONFIG_001`` for a schema pydantic cannot build a JSON Schema for, or
            ``max_attempts`` < 0.
    """

    def __init__(
        self,
        model: str,
        provider: str | None = None,
        output_schema: Any = None,
        tools: Iterable[Callable[..., Any]] | None = None,
        system_prompt: list[dict[str, Any]] | None = None,
        max_attempts: int = 2,
        repair_system_prompt: list[dict[str, Any]] | None = None,
        reasoning_config: Any = None,
        memory: Any = None,
        retry_config: Any = True,
        fallback_models: list[Any] | None = None,
        trim_context: bool = False,
        **agent_kwargs: Any,
    ) -> None:
        refuse("StructuredOutputAgent", memory=memory)
        if not isinstance(max_attempts, int) or max_attempts < 0:
            raise ConfigError(
                f"StructuredOutputAgent(max_attempts=...) must be an int >= 0, got {max_attempts!r}",
                context={"max_attempts": max_attempts},
            )
        try:
            self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(_usable(output_schema))
            self.json_schema = self.adapter.json_schema()
        except (
            pydantic.PydanticUserError,
            pydantic.PydanticSchemaGenerationError,
            TypeError,
        ) as exc:
            raise ConfigError(
                f"StructuredOutputAgent(output_schema=...) needs a Pydantic model or TypedDict, "
                f"got {output_schema!r} ({exc})",
                context={"output_schema": repr(output_schema)},
            ) from None
        self.output_schema = output_schema
        self.max_attempts = max_attempts
        name = getattr(output_schema, "__name__", "output")
        agent_kwargs.setdefault(
            "response_format",
            {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": self.json_schema, "strict": False},
            },
        )
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
        self.generator = Agent(system_prompt=system_prompt, tool_node=self.tool_node, **common)
        self.repairer = (
            Agent(system_prompt=repair_system_prompt, **common) if repair_system_prompt else None
        )

    def parse(self, message: Message) -> Any:
        """The validated value of an answer (a model instance, or a dict for a ``TypedDict``).

        Raises:
            ValidationError: ``VALIDATION_000`` when the answer does not match the schema.
        """
        value, error = validate_answer(message, self.adapter)
        if value is None:
            raise ValidationError(
                f"the answer does not match {getattr(self.output_schema, '__name__', 'the schema')}: {error}",
                context={"error": error},
            )
        return value

    def _route(self, state: AgentState) -> str:
        if self.tool_node is not None and calls_tools(state):
            return "TOOL"
        last = state.context[-1] if state.context else None
        if last is not None:
            value, _ = validate_answer(last, self.adapter)
            if value is not None:
                return END
        if counter(state, _KEY) >= self.max_attempts:
            return END  # best effort: the last answer stands
        return "REPAIR"

    def _repair(self, state: AgentState) -> Message:
        counter(state, _KEY, add=1)
        last = state.context[-1] if state.context else None
        _, error = validate_answer(last, self.adapter) if last else (None, "no answer")
        return Message.text_message(
            "Your last answer does not match the required JSON Schema.\n"
            f"Problem: {error}\n\nJSON Schema:\n{json.dumps(self.json_schema, indent=2)}\n\n"
            "Answer again with one JSON object matching the schema, and nothing else.",
            role="user",
        )

    def build(self) -> StateGraph[AgentState]:
        """The uncompiled graph (``GENERATE``, ``TOOL`` with tools, ``REPAIR``, and
        ``REPAIR_AGENT`` with ``repair_system_prompt``)."""
        graph: StateGraph[AgentState] = StateGraph()
        graph.add_node("GENERATE", self.generator)
        graph.add_node("REPAIR", self._repair)
        paths: dict[str, str] = {END: END, "REPAIR": "REPAIR"}
        if self.tool_node is not None:
            graph.add_node("TOOL", self.tool_node)
            graph.add_edge("TOOL", "GENERATE")
            paths["TOOL"] = "TOOL"
        graph.add_conditional_edges("GENERATE", self._route, paths)
        if self.repairer is not None:
            graph.add_node("REPAIR_AGENT", self.repairer)
            graph.add_edge("REPAIR", "REPAIR_AGENT")
            graph.add_conditional_edges(
                "REPAIR_AGENT", self._route, {k: v for k, v in paths.items() if k != "TOOL"}
            )
        else:
            graph.add_edge("REPAIR", "GENERATE")
        graph.set_entry_point("GENERATE")
        return graph
