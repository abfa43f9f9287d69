"""Handoff tools: let the model move the run to another agent node by calling a tool.

``create_handoff_tool("RESEARCHER")`` makes a tool named ``transfer_to_RESEARCHER``. When a
``ToolNode`` meets a call of such a tool it does not run any function: it answers the call
with a tool message (``"Handed off to RESEARCHER."``, so the conversation stays valid for the
chat-completions API, which wants every tool call answered) and routes the run to the node
named ``RESEARCHER`` (the exact name, else the one node whose name matches ignoring case), as
a ``Command(goto=...)`` would. The answer is recorded in the ledger like any tool result.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = ["HANDOFF_PREFIX", "create_handoff_tool", "is_handoff_tool"]

#: The name prefix of handoff tools.
HANDOFF_PREFIX = "transfer_to_"

#: A tool name every provider accepts (OpenAI's and Anthropic's documented pattern).
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def create_handoff_tool(agent_name: str, description: str | None = None) -> Callable[..., Any]:
    """A tool whose call hands the run to node ``agent_name`` (module docstring).

    Args:
        agent_name: the target node's name (non-empty).
        description: what the model is told (default ``"Transfer control to <agent_name>
            agent"``).

    Returns:
        A function named ``transfer_to_<agent_name>`` taking no argument, with
        ``__handoff_tool__ = True`` and ``__target_agent__ = agent_name``. Called directly it
        returns the text of the handoff answer.

    Raises:
        ValueError: ``agent_name`` is empty or not a string, or the tool name it gives is not
            one the providers accept (letters, digits, ``_`` and ``-``, at most 64
            characters).
    """
    if not isinstance(agent_name, str) or not agent_name.strip():
        raise ValueError(f"create_handoff_tool needs a non-empty agent name, got {agent_name!r}")
    tool_name = f"{HANDOFF_PREFIX}{agent_name}"
    if not _TOOL_NAME.fullmatch(tool_name):
        # OpenAI, Anthropic and Gemini accept tool names of letters, digits, _ and - only,
        # at most 64 characters: a name outside that is refused by the provider at run time
        raise ValueError(
            f"the handoff tool name {tool_name!r} is not a valid tool name (letters, digits, "
            "'_' and '-', at most 64 characters); name the agent's node accordingly"
        )
    text = description or f"Transfer control to {agent_name} agent"

    def handoff() -> str:
        return f"Handed off to {agent_name}."

    handoff.__name__ = handoff.__qualname__ = tool_name
    handoff.__doc__ = text
    handoff.__handoff_tool__ = True  # type: ignore[attr-defined]
    handoff.__target_agent__ = agent_name  # type: ignore[attr-defined]
    return handoff


def is_handoff_tool(name: str) -> tuple[bool, str | None]:
    """Whether a tool name follows the handoff convention, and its target.

    Args:
        name: a tool name.

    Returns:
        ``(True, target)`` for ``"transfer_to_<target>"`` (non-empty target), else
        ``(False, None)``.
    """
    if (
        isinstance(name, str)
        and name.startswith(HANDOFF_PREFIX)
        and len(name) > len(HANDOFF_PREFIX)
    ):
        return True, name[len(HANDOFF_PREFIX) :]
    return False, None
