"""``ScriptedModel``: a chat model that answers from a given list (tests, examples, benchmarks)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tenxgraph.core.state import Message

from .base import ModelError, assistant_message, normalize_assistant

__all__ = ["ScriptedModel", "to_assistant_message"]

#: One scripted answer: a message, a text, or ``{"content": ..., "tool_calls": [...]}``.
Answer = Message | str | dict[str, Any]


def to_assistant_message(answer: Answer) -> Message:
    """Turn one scripted answer into a fresh assistant :class:`Message`.

    Args:
        answer: a :class:`Message` (returned as a deep copy with its own ``message_id``, its
            tool calls completed in both shapes), a ``str`` (a text answer),
            or a dict ``{"content": str, "tool_calls": [{"id", "name", "arguments"}],
            "message_id": optional, "reasoning": optional}`` where ``arguments`` is a dict or a
            JSON string and a missing ``id`` is generated. ``"role"`` and ``"name"`` keys are
            accepted and ignored, so the messages of ``shared/data/trajectories`` can be used
            directly.

    Returns:
        An ``assistant`` message with ``ToolCallBlock`` s and OpenAI-shaped ``tools_calls``.

    Raises:
        TypeError: ``answer`` is none of the accepted types.
    """
    if isinstance(answer, Message):
        return normalize_assistant(answer.model_copy(deep=True))
    if isinstance(answer, str):
        return assistant_message(answer)
    if isinstance(answer, dict):
        return assistant_message(
            answer.get("content") or None,
            answer.get("tool_calls") or None,
            message_id=answer.get("message_id"),
            reasoning=answer.get("reasoning"),
            metadata=answer.get("metadata"),
        )
    raise TypeError(
        f"a scripted answer must be a Message, a str or a dict, got {type(answer).__name__}"
    )


class ScriptedModel:
    """A chat model returning scripted answers in order (implements ``ChatModel``).

    Args:
        responses: the answers, in the order they are given, each a :class:`Message`, a
            ``str`` or a dict (see :func:`to_assistant_message`). Text and dict answers get a
            fresh ``message_id`` on every call.
        name: a name for error messages and ``metadata["model"]``.

    Attributes:
        calls (list[dict]): one entry per :meth:`agenerate` call, in call order:
            ``{"messages": list[Message], "tools": list[dict] | None, "kwargs": dict}``
            (the lists are shallow copies of what the model received).
        index (int): how many answers have been given.

    Example::

        model = ScriptedModel([
            {"content": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
            "It is sunny in Paris.",
        ])
        agent = Agent(model=model, tool_node="TOOL")
    """

    def __init__(self, responses: Sequence[Answer] = (), *, name: str = "scripted") -> None:
        for i, answer in enumerate(responses):
            if not isinstance(answer, (Message, str, dict)):
                raise TypeError(
                    f"ScriptedModel answer {i} must be a Message, a str or a dict, got "
                    f"{type(answer).__name__}"
                )
        self._responses: list[Answer] = list(responses)
        self._fn: Callable[..., Any] | None = None
        self.name = name
        self.calls: list[dict[str, Any]] = []
        self.index = 0

    @classmethod
    def from_fn(cls, fn: Callable[..., Any], *, name: str = "scripted-fn") -> ScriptedModel:
        """A model whose every answer is computed by ``fn(messages, tools)``.

        Args:
            fn: sync or async; receives the ``messages`` list and the ``tools`` list (or
                ``None``) and returns a :class:`Message`, a ``str`` or a dict as accepted by
                :func:`to_assistant_message`. Useful for models that must react to the
                conversation (e.g. answer once a tool result is present) or that are
                deliberately non-deterministic (fresh random tool-call ids on every call).
            name: a name for error messages.

        Returns:
            A :class:`ScriptedModel` that never runs out of answers.
        """
        model = cls((), name=name)
        model._fn = fn
        return model

    @property
    def remaining(self) -> int:
        """How many scripted answers are left (``0`` for a :meth:`from_fn` model)."""
        return len(self._responses) - self.index

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]] | None, **kwargs: Any
    ) -> Message:
        """Return the next scripted answer (see ``ChatModel.agenerate``).

        Raises:
            ModelError: ``MODEL_001`` when every scripted answer has been given;
                ``context``: ``model``, ``given`` (the number of answers).
        """
        self.calls.append({"messages": list(messages), "tools": tools, "kwargs": dict(kwargs)})
        if self._fn is not None:
            answer = self._fn(messages, tools)
            if inspect.isawaitable(answer):
                answer = await answer
        else:
            if self.index >= len(self._responses):
                raise ModelError(
                    f"ScriptedModel {self.name!r} has no answer left: it was given "
                    f"{len(self._responses)} and is asked for answer {self.index + 1}; add "
                    "answers to the script (or check why the graph calls the model again)",
                    context={"model": self.name, "given": len(self._responses)},
                )
            answer = self._responses[self.index]
            self.index += 1
        msg = to_assistant_message(answer)
        if msg.role != "assistant":
            msg = msg.model_copy(update={"role": "assistant"})
        msg.metadata.setdefault("model", self.name)
        return msg
