"""``convert_messages``: a prompt list of plain ``{"role", "content"}`` dicts, as 10xGraph's
``tenxgraph.utils.converter`` builds it for a model call.

The dicts are provider-neutral: text content is a string, a tool message carries
``tool_call_id``, an assistant message that calls tools keeps its ``tools_calls`` as stored.
tenxgraph's own model adapters (``tenxgraph.models``) build their wire format themselves; this
module serves code written against 10xGraph that assembles prompts by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state.message import Message
from tenxgraph.core.state.message_block import ToolResultBlock

__all__ = ["convert_messages"]

logger = logging.getLogger(__name__)


def _tool_call_id(message: Message) -> str:
    for block in message.content or ():
        if isinstance(block, ToolResultBlock):
            return block.tool_call_id
    return ""


def _convert_dict(message: Message) -> dict[str, Any]:
    """One message as a prompt dict (a message whose ``content`` is ``None`` counts as empty)."""
    text = message.text() if message.content is not None else ""
    out: dict[str, Any] = {"role": message.role, "content": text}
    if message.role == "tool":
        out["tool_call_id"] = _tool_call_id(message) if message.content is not None else ""
    elif message.role == "assistant" and message.tools_calls:
        out["tool_calls"] = list(message.tools_calls)
    return out


def convert_messages(
    system_prompts: list[dict[str, Any]],
    state: Any = None,
    extra_messages: Iterable[Message] | None = None,
) -> list[dict[str, Any]]:
    """Build a prompt: the system prompts, the state's summary and context, then extra messages.

    Args:
        system_prompts (list[dict]): leading ``{"role": "system", "content": ...}`` dicts, kept
            as given.
        state (AgentState | None): its ``context_summary`` (when not empty) becomes an
            assistant message, followed by each message of ``context``.
        extra_messages (Iterable[Message] | None): appended last.

    Returns:
        list[dict]: the prompt dicts, in that order.

    Raises:
        ValidationError: ``error_code="VALIDATION_000"`` when ``system_prompts`` is ``None``
            (a ``ValueError``).
    """
    if system_prompts is None:
        logger.error("System prompts are None")
        raise ValidationError(
            "System prompts cannot be None", context={"argument": "system_prompts"}
        )
    out: list[dict[str, Any]] = list(system_prompts)
    if state is not None:
        summary = getattr(state, "context_summary", None)
        if summary:
            out.append({"role": "assistant", "content": summary})
        out.extend(_convert_dict(m) for m in getattr(state, "context", None) or ())
    if extra_messages is not None:
        out.extend(_convert_dict(m) for m in extra_messages)
    logger.debug("Number of Converted messages: %s", len(out))
    return out
