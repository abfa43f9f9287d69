"""``MessageContextManager``: keep the last N user turns (and every system message)."""

from __future__ import annotations

import logging
from typing import TypeVar

from .agent_state import AgentState
from .base_context import BaseContextManager
from .message import Message

__all__ = ["MessageContextManager"]

S = TypeVar("S", bound=AgentState)

logger = logging.getLogger(__name__)


def _drop_tool_traffic(messages: list[Message]) -> list[Message]:
    """Without assistant messages that call tools and without tool results."""
    return [
        m for m in messages if m.role != "tool" and not (m.role == "assistant" and m.tool_calls())
    ]


class MessageContextManager(BaseContextManager[S]):
    """Show the model the most recent ``max_messages`` user turns (10xGraph-compatible).

    A user turn is a ``role="user"`` message and everything after it up to the next user
    message (the assistant's answers, tool calls and tool results in between stay together,
    so a tool result is never shown without the call it answers). ``system`` messages in the
    context are always kept, in their place. Trimming starts from the oldest end.

    Args:
        max_messages: how many user messages (turns) to keep (>= 1, default 10).
        remove_tool_msgs: also hide assistant messages that call tools and the tool results
            (default ``False``).

    Raises:
        ValueError: ``max_messages`` is not an integer >= 1.
    """

    def __init__(self, max_messages: int = 10, remove_tool_msgs: bool = False) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError(f"max_messages must be an integer >= 1, got {max_messages!r}")
        self.max_messages = max_messages
        self.remove_tool_msgs = bool(remove_tool_msgs)

    def __repr__(self) -> str:
        return (
            f"MessageContextManager(max_messages={self.max_messages}, "
            f"remove_tool_msgs={self.remove_tool_msgs})"
        )

    def trim(self, messages: list[Message]) -> list[Message]:
        """The messages to keep, oldest first (a new list; see the class docstring).

        Args:
            messages: the conversation, oldest first.
        """
        msgs = _drop_tool_traffic(messages) if self.remove_tool_msgs else list(messages)
        user_positions = [i for i, m in enumerate(msgs) if m.role == "user"]
        if len(user_positions) <= self.max_messages:
            return msgs
        cut = user_positions[-self.max_messages]
        kept = [m for m in msgs[:cut] if m.role == "system"] + msgs[cut:]
        logger.debug(
            "trimmed the model's context from %d to %d messages (%d user messages kept)",
            len(messages),
            len(kept),
            self.max_messages,
        )
        return kept

    def trim_context(self, state: S) -> S:
        """``state`` with ``context`` trimmed (see the class docstring).

        Args:
            state: a copy of the graph state.

        Returns:
            ``state``, its ``context`` replaced by the trimmed list when anything was cut.
        """
        kept = self.trim(list(state.context))
        if len(kept) != len(state.context):
            state.context = kept
        return state

    async def atrim_context(self, state: S) -> S:
        """Async twin of :meth:`trim_context` (no I/O)."""
        return self.trim_context(state)
