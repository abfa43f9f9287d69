"""Graph utilities: ``START``, ``END``, ``Command``, ``ResponseGranularity``, ``tool``,
the invocation callbacks (``CallbackManager``, ``InvocationType``...; validators in
``tenxgraph.utils.validators``),
``interrupt``, ``ThreadInfo``, the secret-redaction helpers of ``tenxgraph.utils.logging``,
and the state reducers (re-exported from
``tenxgraph.core.state.reducers``, as 10xGraph's ``utils`` does)."""

from __future__ import annotations

from tenxgraph.core.state.reducers import (
    add_messages,
    append_items,
    replace_messages,
    replace_value,
)

from .callbacks import (
    AfterInvokeCallback,
    BaseValidator,
    BeforeInvokeCallback,
    CallbackContext,
    CallbackManager,
    InvocationType,
    OnErrorCallback,
)
from .command import Command
from .constants import END, START, ResponseGranularity
from .decorators import get_tool_metadata, has_tool_decorator, tool
from .interrupts import GraphInterrupt, Interrupt, interrupt, pending_interrupt, pending_interrupts
from .logging import SecretRedactionFilter, install_secret_redaction, mask_secrets
from .thread_info import ThreadInfo

__all__ = [
    "AfterInvokeCallback",
    "BaseValidator",
    "BeforeInvokeCallback",
    "CallbackContext",
    "CallbackManager",
    "Command",
    "END",
    "GraphInterrupt",
    "Interrupt",
    "InvocationType",
    "OnErrorCallback",
    "ResponseGranularity",
    "START",
    "SecretRedactionFilter",
    "ThreadInfo",
    "add_messages",
    "append_items",
    "get_tool_metadata",
    "has_tool_decorator",
    "install_secret_redaction",
    "interrupt",
    "mask_secrets",
    "pending_interrupt",
    "pending_interrupts",
    "replace_messages",
    "replace_value",
    "tool",
]
