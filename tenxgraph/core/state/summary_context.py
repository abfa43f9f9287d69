"""``SummaryContextManager``: over a token budget, older messages are summarised by a model.

The summary is written to ``state.context_summary``; the ``Agent`` returns it as a state update,
so it is checkpointed with the thread like any other field, and the agent sends it to the model
(as a system message) ahead of the messages kept verbatim. The thread's ``context`` itself keeps
every message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from tenxgraph.core.exceptions import ConfigError

from .agent_state import AgentState
from .base_context import BaseContextManager
from .message import Message

__all__ = ["SummaryContextManager", "estimate_tokens"]

S = TypeVar("S", bound=AgentState)

logger = logging.getLogger(__name__)

_DEFAULT_PROMPT = (
    "You condense conversations. Write a short, factual summary of the conversation below "
    "(and of the earlier summary, when one is given) that keeps names, numbers, decisions, "
    "open questions and what the user wants. Answer with the summary only."
)


def estimate_tokens(messages: list[Message]) -> int:
    """A rough token count: 4 characters per token plus 4 per message (no tokenizer needed).

    Args:
        messages: the messages to count.

    Returns:
        The estimate (int >= 0).
    """
    total = 0
    for m in messages:
        total += 4 + len(m.text()) // 4
        for call in m.tool_calls():
            total += (len(call.name) + len(str(call.args))) // 4
    return total


def _transcript(messages: list[Message]) -> str:
    lines = []
    for m in messages:
        text = m.text()
        calls = m.tool_calls()
        if calls:
            text = (text + " " if text else "") + "; ".join(
                f"[calls {c.name}({c.args})]" for c in calls
            )
        lines.append(f"{m.role}: {text}")
    return "\n".join(lines)


class SummaryContextManager(BaseContextManager[S]):
    """Summarise what falls outside the window once the history passes ``token_budget``.

    While the estimated size of ``context`` (:func:`estimate_tokens`) is within
    ``token_budget``, the model sees every message. Past it, the messages before the last
    ``keep_recent`` ones are summarised by ``model`` (together with the previous summary), the
    summary is put in ``context_summary`` and the model sees the system messages, the summary
    and the ``keep_recent`` recent messages. The cut never separates a tool result from the
    assistant message that called it.

    Args:
        model: the model that writes the summary: a model name served by an
            OpenAI-compatible endpoint (``base_url`` / ``OPENAI_BASE_URL``; the model is built
            when a graph using this manager is compiled) or a chat-model object
            (``tenxgraph.models.ChatModel``).
        token_budget: estimated tokens above which older messages are summarised (> 0).
        keep_recent: how many recent messages are kept verbatim (>= 1).
        max_tokens: ``max_tokens`` sent with the summary request (``None``: not sent).
        summary_prompt: the system prompt of the summary request.
        api_style: ``"chat"`` only (the chat-completions API).
        base_url: API root for a model given by name.
        api_key: API key for a model given by name.

    Raises:
        ValueError: a bound is not a positive integer, or ``api_style`` is not ``"chat"``.
    """

    def __init__(
        self,
        model: Any,
        token_budget: int = 8000,
        keep_recent: int = 8,
        *,
        max_tokens: int | None = None,
        summary_prompt: str = _DEFAULT_PROMPT,
        api_style: str = "chat",
        base_url: str | None = None,
        api_key: str | None = None,
    ) -> None:
        for name, value in (("token_budget", token_budget), ("keep_recent", keep_recent)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if api_style != "chat":
            raise ValueError(
                "SummaryContextManager speaks the chat-completions API only (api_style='chat'); "
                "the Responses API is not supported by tenxgraph"
            )
        #: a model given by name, as ``(name, base_url, api_key)``, until :meth:`resolve_model`
        self.model_spec: tuple[str, str | None, str | None] | None = None
        if isinstance(model, str):
            # built by the graph that uses this manager (compile() calls resolve_model): the
            # model adapters live above this package and import it
            self.model_spec, model = (model, base_url, api_key), None
        elif not callable(getattr(model, "agenerate", None)):
            raise ValueError(
                f"SummaryContextManager(model=...) takes a model name or a chat model, got "
                f"{type(model).__name__}"
            )
        self.model = model
        self.token_budget = token_budget
        self.keep_recent = keep_recent
        self.max_tokens = max_tokens
        self.summary_prompt = summary_prompt

    def resolve_model(self, build: Callable[[str, str | None, str | None], Any]) -> None:
        """Build the summary model of a manager given a model name (once; later calls and a
        manager given a model object keep their model).

        ``StateGraph.compile()`` calls it with the OpenAI-compatible adapter, so a name works
        in any graph this manager is given to.

        Args:
            build: called as ``build(name, base_url, api_key)``; returns a chat model.
        """
        if self.model is None and self.model_spec is not None:
            self.model = build(*self.model_spec)

    def __repr__(self) -> str:
        shown = self.model if self.model is not None else self.model_spec and self.model_spec[0]
        return (
            f"SummaryContextManager(model={shown!r}, token_budget={self.token_budget}, "
            f"keep_recent={self.keep_recent})"
        )

    def _cut(self, messages: list[Message]) -> int:
        cut = max(len(messages) - self.keep_recent, 0)
        while 0 < cut < len(messages) and messages[cut].role == "tool":
            cut -= 1  # keep the assistant message whose call the tool result answers
        return cut

    def trim_context(self, state: S) -> S:
        """Not available: summarising needs a model call; use :meth:`atrim_context`.

        Raises:
            TypeError: always (the ``Agent`` calls :meth:`atrim_context`).
        """
        raise TypeError(
            "SummaryContextManager summarises with a model call: await atrim_context(state)"
        )

    async def atrim_context(self, state: S) -> S:
        """Summarise the older messages when over budget (class docstring).

        Args:
            state: a copy of the graph state.

        Returns:
            ``state`` unchanged when within budget, else with ``context_summary`` set and
            ``context`` cut to the system messages and the recent ones.

        Raises:
            ModelError: ``MODEL_001`` the summary model failed.
            ConfigError: ``CONFIG_001`` for a model given by name that no compiled graph has
                built yet (:meth:`resolve_model`).
        """
        messages = [m for m in state.context if not m.delta]
        if estimate_tokens(messages) <= self.token_budget:
            return state
        cut = self._cut(messages)
        older = [m for m in messages[:cut] if m.role != "system"]
        if not older:
            return state
        parts = []
        if state.context_summary:
            parts.append(f"Earlier summary:\n{state.context_summary}")
        parts.append(f"Conversation:\n{_transcript(older)}")
        request = [
            Message.text_message(self.summary_prompt, role="system"),
            Message.text_message("\n\n".join(parts), role="user"),
        ]
        if self.model is None:
            raise ConfigError(
                f"SummaryContextManager(model={self.model_spec and self.model_spec[0]!r}) builds "
                "its model when a graph using it is compiled (StateGraph(context_manager=...)); "
                "outside a graph, pass a chat model object as model=",
                context={"key": "model"},
            )
        kwargs = {"max_tokens": self.max_tokens} if self.max_tokens else {}
        answer = await self.model.agenerate(request, None, **kwargs)
        summary = answer.text().strip() if isinstance(answer, Message) else str(answer)
        logger.debug("summarised %d messages into %d characters", len(older), len(summary))
        state.context_summary = summary
        state.context = [m for m in messages[:cut] if m.role == "system"] + messages[cut:]
        return state
