"""Graph utilities: ``START``, ``END``, ``Command``, ``ResponseGranularity``, ``tool``,
the invocation callbacks (``CallbackManager``, ``InvocationType``...; validators in
``tenxgraph.utils.validators``),
``interrupt``, ``ThreadInfo``, the secret-redaction helpers of ``tenxgraph.utils.logging``,
the id generators of ``tenxgraph.utils.id_generator``, ``BackgroundTaskManager``,
and the state reducers (re-exported from
``tenxgraph.core.state.reducers``, as 10xGraph's ``utils`` does)."""

from __future__ import annotations

from tenxgraph.core.state.reducers import (
    add_messages,
    append_items,
    replace_messages,
    replace_value,
)

from .background_task_manager import BackgroundTaskManager, TaskMetadata
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
from .converter import convert_messages
from .decorators import get_tool_metadata, has_tool_decorator, tool
from .id_generator import (
    AsyncIDGenerator,
    BaseIDGenerator,
    BigIntIDGenerator,
    DefaultIDGenerator,
    HexIDGenerator,
    IDType,
    IntIDGenerator,
    ShortIDGenerator,
    TimestampIDGenerator,
    UUIDGenerator,
)
from .interrupts import GraphInterrupt, Interrupt, interrupt, pending_interrupt, pending_interrupts
from .logging import SecretRedactionFilter, install_secret_redaction, mask_secrets
from .thread_info import ThreadInfo

__all__ = [
    "AfterInvokeCallback",
    "AsyncIDGenerator",
    "BackgroundTaskManager",
    "BaseIDGenerator",
    "BaseValidator",
    "BeforeInvokeCallback",
    "BigIntIDGenerator",
    "CallbackContext",
    "CallbackManager",
    "Command",
    "DefaultIDGenerator",
    "END",
    "GraphInterrupt",
    "HexIDGenerator",
    "IDType",
    "IntIDGenerator",
    "Interrupt",
    "InvocationType",
    "OnErrorCallback",
    "ResponseGranularity",
    "START",
    "SecretRedactionFilter",
    "ShortIDGenerator",
    "TaskMetadata",
    "ThreadInfo",
    "TimestampIDGenerator",
    "UUIDGenerator",
    "add_messages",
    "append_items",
    "convert_messages",
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
