"""Chat models: the protocol, the OpenAI-compatible adapter and the scripted model.

Any object with ``async def agenerate(messages, tools, **kwargs) -> Message`` is a chat model
(:class:`ChatModel`); ``Agent(model="gpt-4o")`` builds an :class:`OpenAICompatModel`.
"""

from .base import (
    ChatModel,
    ModelError,
    StructuredOutputError,
    assistant_message,
    new_tool_call_id,
    normalize_assistant,
)
from .openai_compat import OpenAICompatModel
from .scripted import ScriptedModel

__all__ = [
    "ChatModel",
    "ModelError",
    "OpenAICompatModel",
    "ScriptedModel",
    "StructuredOutputError",
    "assistant_message",
    "new_tool_call_id",
    "normalize_assistant",
]
