"""Order the messages an ``Agent`` sends so every tool call is answered right after it.

OpenAI-compatible chat APIs refuse a conversation in which an assistant message with tool
calls is not followed directly by one tool message per call id (HTTP 400). A thread can hold
such an order legitimately: a run paused before its tool node (``interrupt_before``) and
resumed with a new user message stores ``user, assistant(tool_calls), user, tool, ...``.
:func:`pair_tool_results` rewrites only the request, never the thread:

* the tool messages answering an assistant message's calls are moved directly after it, in
  call order; the messages that stood between keep their relative order and follow them;
* a call with no result anywhere later in the conversation gets a stand-in tool message
  saying it was not run (:data:`NOT_RUN`), so it is never sent dangling;
* a tool message that answers no earlier call is left where it is (the provider judges it).
"""

from __future__ import annotations

from tenxgraph.core.state import Message
from tenxgraph.core.state.message_block import ToolResultBlock

__all__ = ["NOT_RUN", "pair_tool_results"]

#: The content of the stand-in result sent for a tool call that has no result.
NOT_RUN = "No result: this tool call was not run."


def _answered_ids(msg: Message) -> list[str]:
    ids = [b.tool_call_id for b in msg.content if isinstance(b, ToolResultBlock)]
    if not ids and msg.tool_call_id:
        ids = [msg.tool_call_id]
    return ids


def pair_tool_results(messages: list[Message]) -> list[Message]:
    """The request order for ``messages`` (module docstring); ``messages`` is not changed.

    Args:
        messages: what the model is to be sent, oldest first.

    Returns:
        A new list; the same objects when nothing needed moving, plus stand-in tool
        messages for calls without a result.
    """
    answered = [_answered_ids(m) if m.role == "tool" else [] for m in messages]
    placed = [False] * len(messages)
    out: list[Message] = []
    for i, msg in enumerate(messages):
        if placed[i]:
            continue
        placed[i] = True
        out.append(msg)
        calls = msg.tool_calls() if msg.role == "assistant" else []
        for call in calls:
            found = next((j for j in range(i + 1, len(messages)) if call.id in answered[j]), None)
            if found is None:
                out.append(
                    Message(
                        role="tool",
                        content=[ToolResultBlock(tool_call_id=call.id, content=NOT_RUN)],
                        tool_call_id=call.id,
                    )
                )
            elif not placed[found]:  # placed already: it answers an earlier call too
                placed[found] = True
                out.append(messages[found])
    return out
