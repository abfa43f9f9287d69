"""``BaseConverter``: the interface of an LLM response converter."""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from typing import Any

from tenxgraph.core.state import AgentState, Message
from tenxgraph.runtime.publisher.events import EventModel

__all__ = ["BaseConverter", "ConverterType"]


class ConverterType(enum.Enum):
    """The converter families 10xGraph names (``ModelResponseConverter``'s string argument)."""

    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    GOOGLE = "google"
    CUSTOM = "custom"
    OPENAI_RESPONSES = "openai_responses"


class BaseConverter(ABC):
    """Turns a provider's raw response into tenxgraph messages.

    Subclasses implement both methods; the class cannot be instantiated otherwise.

    Args:
        state (AgentState | None): the run's state, for converters that need context; kept as
            ``self.state``.
    """

    def __init__(self, state: AgentState | None = None) -> None:
        self.state = state

    @abstractmethod
    async def convert_response(self, response: Any) -> Message:
        """Convert one complete response.

        Args:
            response: the provider's response object.

        Returns:
            Message: the assistant message.
        """

    @abstractmethod
    def convert_streaming_response(
        self,
        config: dict[str, Any],
        node_name: str,
        response: Any,
        meta: dict[str, Any] | None = None,
    ) -> AsyncGenerator[Message | EventModel]:
        """Convert a streamed response, yielding messages (deltas, then the final one) and
        events as they come.

        Args:
            config: the run config.
            node_name: the node producing the response.
            response: the provider's stream.
            meta: extra metadata for the produced messages.

        Returns:
            An async generator of ``Message`` / ``EventModel``.
        """
