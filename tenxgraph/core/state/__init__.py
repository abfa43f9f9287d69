"""State model: ``AgentState``, ``Message``, content blocks, reducers and stream chunks."""

from .agent_state import AgentState, reducers_of
from .base_context import BaseContextManager
from .context_manager import MessageContextManager
from .execution import ExecutionState, ExecutionStatus, StopRequestStatus
from .message import Message, TokenUsages
from .message_block import (
    AnnotationBlock,
    AnnotationRef,
    AudioBlock,
    ContentBlock,
    DataBlock,
    DocumentBlock,
    ErrorBlock,
    ImageBlock,
    MediaRef,
    ReasoningBlock,
    RemoteToolCallBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    VideoBlock,
)
from .reducers import MessageList, add_messages, append_items, replace_messages, replace_value
from .stream_chunks import StreamChunk, StreamEvent
from .summary_context import SummaryContextManager
from .tool_result import ToolResult

__all__ = [
    "AgentState",
    "AnnotationBlock",
    "AnnotationRef",
    "AudioBlock",
    "BaseContextManager",
    "ContentBlock",
    "DataBlock",
    "DocumentBlock",
    "ErrorBlock",
    "ExecutionState",
    "ExecutionStatus",
    "ImageBlock",
    "MediaRef",
    "Message",
    "MessageContextManager",
    "MessageList",
    "ReasoningBlock",
    "RemoteToolCallBlock",
    "StopRequestStatus",
    "StreamChunk",
    "StreamEvent",
    "SummaryContextManager",
    "TextBlock",
    "TokenUsages",
    "ToolCallBlock",
    "ToolResult",
    "ToolResultBlock",
    "VideoBlock",
    "add_messages",
    "append_items",
    "reducers_of",
    "replace_messages",
    "replace_value",
]
