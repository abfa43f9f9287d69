"""``tenxgraph.utils.convert_messages``: prompt dicts from system prompts, state and extras."""

from __future__ import annotations

import pytest

from tenxgraph.core.exceptions import ValidationError
from tenxgraph.core.state import AgentState, Message
from tenxgraph.core.state.message_block import ToolResultBlock
from tenxgraph.utils import convert_messages

SYSTEM = [{"role": "system", "content": "be brief"}]


def test_order_is_system_summary_context_extras() -> None:
    state = AgentState(context=[Message.text_message("q1", "user")], context_summary="earlier")
    out = convert_messages(SYSTEM, state, [Message.text_message("q2", "user")])
    assert out == [
        SYSTEM[0],
        {"role": "assistant", "content": "earlier"},
        {"role": "user", "content": "q1"},
        {"role": "user", "content": "q2"},
    ]
    assert convert_messages(SYSTEM, AgentState(context_summary="")) == SYSTEM


def test_tool_results_and_tool_calls_keep_their_ids() -> None:
    call = {"id": "c9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    asked = Message(role="assistant", content=[], tools_calls=[call])
    answered = Message(role="tool", content=[ToolResultBlock(tool_call_id="c9", content="42")])
    bare = Message.text_message("loose", "tool")
    out = convert_messages([], AgentState(context=[asked, answered, bare]))
    assert out == [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "42", "tool_call_id": "c9"},
        {"role": "tool", "content": "loose", "tool_call_id": ""},
    ]


def test_missing_system_prompts_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as err:
        convert_messages(None)  # type: ignore[arg-type]
    assert isinstance(err.value, ValueError)
    assert err.value.context == {"argument": "system_prompts"}
