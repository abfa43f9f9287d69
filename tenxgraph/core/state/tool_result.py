"""``ToolResult``: a tool's answer to the model together with state updates."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolResult"]


@dataclass(slots=True)
class ToolResult:
    """What a tool returns to answer the model **and** update state fields (10xGraph).

    Example::

        def select_city(city: str) -> ToolResult:
            \"\"\"Select the city the conversation is about.\"\"\"
            return ToolResult(message=f"City set to {city}.", state={"selected_city": city})

    The ``ToolNode`` answers the call with ``message`` (as it would a plain return value) and
    applies ``state`` to the graph state through each field's reducer. Both are recorded in
    the idempotency ledger with the call, so a replay after a crash returns the recorded
    message and update without running the tool again. ``state`` values must be
    JSON-encodable; they are validated against the state class's field types when applied.
    Keys that are not fields of the graph's state class answer the call with an error
    message instead (nothing is applied), and ``context`` / ``execution_meta`` cannot be set
    this way.

    Attributes:
        message: the answer for the model: a ``str``, any JSON-compatible value or a
            ``Message`` (as a plain tool return value).
        state: field name -> new value (default: no update).
        is_error: the call failed: the answer is an error tool message (``is_error=True`` on
            its ``ToolResultBlock``, as for a tool that raised) and ``state`` must be empty.
    """

    message: Any = ""
    state: dict[str, Any] = field(default_factory=dict)
    is_error: bool = False
