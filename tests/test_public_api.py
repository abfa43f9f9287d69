"""The public surface imports as 10xGraph's documentation writes it (``agentflow`` read as
``tenxgraph``), each line in a fresh interpreter, and each package's ``__all__`` lists exactly the
names we mean to export (sorted, all present).

The import lines below were collected from the code examples of 10xGraph's in-scope pages
(get-started, beginner, concepts, how-to/python, how-to/production, tutorials, reference/python,
troubleshooting, integrations/agentflow-with-postgres; the durability guide is
how-to/python/set-up-checkpointing). They live here because a user's clone has no copy of those
pages. Lines of features tenxgraph does not provide are pinned too: they must fail to import, so
adding one of them fails this test until docs/compat-10xgraph.md is updated.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

#: Import lines of the in-scope pages that tenxgraph provides: (line, pages).
DOCUMENTED_IMPORTS: tuple[tuple[str, str], ...] = (
    (
        "from tenxgraph.core import Agent, StateGraph",
        "how-to/python/use-context-manager, tutorials/from-examples/custom-state",
    ),
    (
        "from tenxgraph.core import Agent, StateGraph, ToolNode",
        "get-started/first-agent, get-started/index, how-to/python/handoff-between-agents, reference/python/command-handoff, tutorials/from-examples/react-agent-validation, tutorials/from-examples/react-agent, tutorials/from-examples/react-streaming, tutorials/from-examples/stream-sync",
    ),
    (
        "from tenxgraph.core import StateGraph",
        "concepts/context-id-background, how-to/python/configure-id-generator, how-to/python/run-background-tasks",
    ),
    (
        "from tenxgraph.core import ToolNode",
        "concepts/prebuilt-agents-and-tools, reference/python/command-handoff, tutorials/from-examples/mcp-react-agent",
    ),
    ("from tenxgraph.core.exceptions import GraphError", "troubleshooting/error-codes"),
    (
        "from tenxgraph.core.exceptions import GraphError, GraphRecursionError, StorageError, TransientStorageError",
        "troubleshooting/error-codes",
    ),
    ("from tenxgraph.core.exceptions import GraphRecursionError", "troubleshooting/error-codes"),
    ("from tenxgraph.core.exceptions import GraphStopRequested", "troubleshooting/error-codes"),
    (
        "from tenxgraph.core.exceptions import NodeError",
        "troubleshooting/error-codes, troubleshooting/error-patterns",
    ),
    ("from tenxgraph.core.exceptions import NodeTimeoutError", "troubleshooting/error-codes"),
    ("from tenxgraph.core.exceptions import ResourceNotFoundError", "troubleshooting/error-codes"),
    ("from tenxgraph.core.exceptions import SerializationError", "troubleshooting/error-codes"),
    (
        "from tenxgraph.core.exceptions import StaleStateError",
        "how-to/python/set-up-checkpointing, troubleshooting/error-codes",
    ),
    (
        "from tenxgraph.core.exceptions import TransientStorageError",
        "troubleshooting/error-codes, troubleshooting/error-patterns",
    ),
    (
        "from tenxgraph.core.graph import Agent",
        "concepts/agents-and-tools, concepts/index, concepts/media-and-files, concepts/providers-and-adapters, how-to/python/configure-agent, how-to/python/use-custom-state, how-to/python/use-dependency-injection",
    ),
    (
        "from tenxgraph.core.graph import Agent, StateGraph",
        "beginner/your-first-agent, concepts/media-and-files, integrations/agentflow-with-postgres, tutorials/from-examples/agent-class",
    ),
    (
        "from tenxgraph.core.graph import Agent, StateGraph, ToolNode",
        "beginner/add-a-tool, beginner/add-memory, beginner/run-with-api, beginner/your-first-agent, how-to/python/use-prebuilt-tools, how-to/python/use-tool-decorator, tutorials/from-examples/agent-class",
    ),
    (
        "from tenxgraph.core.graph import Agent, ToolNode",
        "concepts/agents-tools-control, concepts/memory-and-store, how-to/python/use-prebuilt-tools, how-to/python/use-tool-decorator, reference/python/agent, reference/python/stream-emitter",
    ),
    ("from tenxgraph.core.graph import Agent, ToolNode, StateGraph", "reference/python/skills"),
    (
        "from tenxgraph.core.graph import StateGraph",
        "beginner/mental-model, concepts/dependency-injection, concepts/serving-agents, concepts/state-and-messages, concepts/state-graph, how-to/python/use-custom-nodes, how-to/python/use-custom-state, how-to/python/use-dependency-injection, how-to/python/use-publishers, reference/python/graph, reference/python/lifecycle-callbacks, reference/python/state, tutorials/from-examples/stop-stream",
    ),
    (
        "from tenxgraph.core.graph import StateGraph, Agent",
        "how-to/python/send-traces-to-logfire-langsmith, how-to/python/set-up-checkpointing, how-to/python/stream-graph, how-to/python/use-memory-store, how-to/python/use-publishers",
    ),
    (
        "from tenxgraph.core.graph import StateGraph, Agent, ToolNode",
        "concepts/agents-and-tools, concepts/index, concepts/memory-and-store, how-to/python/build-a-graph, how-to/python/choose-the-right-abstraction, how-to/python/emit-tool-progress, how-to/python/use-custom-nodes, how-to/python/use-custom-state, how-to/python/use-mcp, reference/python/agent, reference/python/graph, reference/python/tools",
    ),
    (
        "from tenxgraph.core.graph import StateGraph, ToolNode",
        "concepts/dependency-injection, how-to/python/use-dependency-injection, reference/python/testing, reference/python/tools",
    ),
    (
        "from tenxgraph.core.graph import ToolNode",
        "concepts/agents-and-tools, concepts/agents-tools-control, concepts/index, how-to/python/configure-agent, how-to/python/use-mcp, reference/python/tools, tutorials/from-examples/agent-class",
    ),
    (
        "from tenxgraph.core.graph.agent_internal.constants import RetryConfig",
        "concepts/agents-and-tools, how-to/python/configure-agent, reference/python/agent",
    ),
    (
        "from tenxgraph.core.graph.tool_node import ToolNode",
        "tutorials/from-examples/tool-decorator",
    ),
    (
        "from tenxgraph.core.llm import get_default_llm_timeout, set_default_llm_timeout",
        "reference/python/llm",
    ),
    (
        "from tenxgraph.core.llm import set_default_llm_timeout, get_default_llm_timeout",
        "how-to/python/configure-agent",
    ),
    (
        "from tenxgraph.core.state import AgentState",
        "beginner/add-a-tool, beginner/mental-model, beginner/run-with-api, beginner/your-first-agent, concepts/agents-and-tools, concepts/agents-tools-control, concepts/dependency-injection, concepts/extensibility, concepts/index, concepts/state-and-messages, concepts/state-graph, get-started/index, how-to/python/choose-the-right-abstraction, how-to/python/configure-agent, how-to/python/handoff-between-agents, how-to/python/use-custom-state, reference/python/command-handoff, reference/python/graph, reference/python/lifecycle-callbacks, reference/python/realtime, reference/python/skills, reference/python/state, reference/python/stream-emitter, tutorials/from-examples/custom-state, tutorials/from-examples/react-agent, tutorials/from-examples/tool-decorator",
    ),
    (
        "from tenxgraph.core.state import AgentState, Message",
        "beginner/add-a-tool, beginner/add-memory, beginner/your-first-agent, concepts/callbacks-and-command, concepts/checkpointing-and-threads, concepts/dependency-injection, concepts/extensibility, get-started/first-agent, how-to/python/build-a-graph, how-to/python/choose-the-right-abstraction, how-to/python/emit-tool-progress, how-to/python/run-background-tasks, how-to/python/set-up-checkpointing, how-to/python/use-custom-nodes, how-to/python/use-custom-state, how-to/python/use-dependency-injection, how-to/python/use-mcp, how-to/python/use-memory-store, how-to/python/use-publishers, how-to/python/use-tool-decorator, integrations/agentflow-with-postgres, reference/python/checkpointers, reference/python/lifecycle-callbacks, reference/python/testing, tutorials/from-examples/custom-state, tutorials/from-examples/dependency-injection, tutorials/from-examples/react-agent-validation, tutorials/from-examples/react-agent, tutorials/from-examples/react-streaming, tutorials/from-examples/stop-stream, tutorials/from-examples/stream-sync",
    ),
    ("from tenxgraph.core.state import AgentState, add_messages, Message", "concepts/memory"),
    ("from tenxgraph.core.state import AudioBlock", "concepts/state-and-messages"),
    (
        "from tenxgraph.core.state import AudioBlock, DocumentBlock, ImageBlock, MediaRef, Message, TextBlock, VideoBlock",
        "concepts/media-and-files",
    ),
    (
        "from tenxgraph.core.state import BaseContextManager",
        "concepts/memory, reference/python/context-manager",
    ),
    (
        "from tenxgraph.core.state import BaseContextManager, AgentState",
        "how-to/python/use-context-manager, reference/python/context-manager",
    ),
    (
        "from tenxgraph.core.state import BaseContextManager, MessageContextManager",
        "reference/python/context-manager",
    ),
    ("from tenxgraph.core.state import DataBlock", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import DocumentBlock", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import ErrorBlock", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import ImageBlock, MediaRef", "concepts/state-and-messages"),
    (
        "from tenxgraph.core.state import ImageBlock, MediaRef, Message, TextBlock",
        "concepts/media-and-files, reference/python/media",
    ),
    ("from tenxgraph.core.state import MediaRef", "concepts/media-and-files"),
    (
        "from tenxgraph.core.state import Message",
        "beginner/mental-model, beginner/your-first-agent, concepts/agents-tools-control, concepts/index, concepts/qa, concepts/state-and-messages, concepts/state-graph, concepts/streaming, get-started/first-agent, how-to/python/configure-agent, how-to/python/use-custom-nodes, how-to/python/use-custom-state, reference/python/command-handoff, reference/python/messages, tutorials/from-examples/custom-state, tutorials/from-examples/react-agent-validation, tutorials/from-examples/react-agent, tutorials/from-examples/stop-stream",
    ),
    (
        "from tenxgraph.core.state import MessageContextManager",
        "concepts/context-id-background, how-to/python/use-context-manager, reference/python/context-manager",
    ),
    (
        "from tenxgraph.core.state import MessageContextManager, SummaryContextManager",
        "concepts/memory",
    ),
    ("from tenxgraph.core.state import TextBlock, AnnotationRef", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import ToolCallBlock", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import ToolResultBlock", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import VideoBlock", "concepts/state-and-messages"),
    ("from tenxgraph.core.state import add_messages, Message", "concepts/index"),
    (
        "from tenxgraph.core.state.agent_state import AgentState",
        "tutorials/from-examples/agent-class",
    ),
    ("from tenxgraph.core.state.base_context import BaseContextManager", "concepts/extensibility"),
    ("from tenxgraph.core.state.message import Message", "tutorials/from-examples/agent-class"),
    ("from tenxgraph.core.state.message import TokenUsages", "reference/python/messages"),
    (
        "from tenxgraph.core.state.message_block import AnnotationBlock",
        "concepts/state-and-messages",
    ),
    (
        "from tenxgraph.core.state.message_block import ReasoningBlock",
        "concepts/state-and-messages",
    ),
    (
        "from tenxgraph.core.state.message_block import TextBlock",
        "how-to/python/use-dependency-injection, reference/python/messages",
    ),
    (
        "from tenxgraph.core.state.message_block import TextBlock, ImageBlock, AudioBlock, VideoBlock, DocumentBlock, DataBlock, ToolCallBlock, RemoteToolCallBlock, ToolResultBlock, ReasoningBlock, AnnotationBlock, ErrorBlock, MediaRef, AnnotationRef, ContentBlock",
        "reference/python/messages",
    ),
    (
        "from tenxgraph.core.state.message_block import TextBlock, ToolCallBlock",
        "reference/python/messages",
    ),
    (
        "from tenxgraph.core.state.message_block import TextBlock, ToolResultBlock",
        "how-to/python/use-dependency-injection",
    ),
    (
        "from tenxgraph.core.state.message_block import ToolResultBlock",
        "how-to/python/use-dependency-injection, tutorials/from-examples/dependency-injection",
    ),
    ("from tenxgraph.core.state.reducers import add_messages", "reference/python/state"),
    (
        "from tenxgraph.core.state.reducers import add_messages, Message",
        "how-to/python/use-custom-state",
    ),
    (
        "from tenxgraph.core.state.reducers import add_messages, replace_messages, append_items, replace_value",
        "reference/python/state",
    ),
    ("from tenxgraph.core.state.reducers import append_items", "reference/python/state"),
    ("from tenxgraph.core.state.reducers import replace_messages", "reference/python/state"),
    ("from tenxgraph.core.state.reducers import replace_value", "reference/python/state"),
    (
        "from tenxgraph.core.state.tool_result import ToolResult",
        "concepts/agents-and-tools, concepts/state-and-messages",
    ),
    (
        "from tenxgraph.prebuilt.tools import create_handoff_tool",
        "concepts/prebuilt-agents-and-tools, how-to/python/handoff-between-agents, how-to/python/use-prebuilt-tools, reference/python/command-handoff, tutorials/from-examples/handoff",
    ),
    (
        "from tenxgraph.prebuilt.tools import create_handoff_tool, is_handoff_tool",
        "reference/python/command-handoff",
    ),
    ("from tenxgraph.prebuilt.tools import is_handoff_tool", "reference/python/command-handoff"),
    (
        "from tenxgraph.prebuilt.tools.handoff import create_handoff_tool, is_handoff_tool",
        "prebuild/tools/handoff, glossary/what-is-multi-agent-orchestration",
    ),
    ("from tenxgraph.models.google import GoogleModel", "providers/google (tenxgraph adapter)"),
    ("from tenxgraph.models.anthropic import AnthropicModel", "tenxgraph adapter"),
    ("from tenxgraph.models.openai import OpenAIModel", "tenxgraph adapter (extra openai)"),
    ("from tenxgraph.prebuilt import ReactAgent", "get-started/first-agent, get-started/index"),
    ("from tenxgraph.prebuilt.agent import ReactAgent", "prebuild/agents/react-agent"),
    (
        "from tenxgraph.storage.checkpointer import BaseCheckpointer",
        "concepts/memory, how-to/python/use-custom-nodes, reference/python/checkpointers",
    ),
    (
        "from tenxgraph.storage.checkpointer import BaseCheckpointer, InMemoryCheckpointer",
        "reference/python/checkpointers",
    ),
    (
        "from tenxgraph.storage.checkpointer import InMemoryCheckpointer",
        "beginner/add-memory, beginner/run-with-api, concepts/checkpointing-and-threads, concepts/dependency-injection, concepts/media-and-files, get-started/first-agent, how-to/production/checkpointing, how-to/python/emit-tool-progress, how-to/python/set-up-checkpointing, how-to/python/stream-graph, how-to/python/use-dependency-injection, how-to/python/use-mcp, how-to/python/use-memory-store, how-to/python/use-publishers, how-to/python/use-realtime-audio, reference/python/checkpointers, tutorials/from-examples/custom-state, tutorials/from-examples/dependency-injection, tutorials/from-examples/react-agent-validation, tutorials/from-examples/react-agent, tutorials/from-examples/react-streaming, tutorials/from-examples/stop-stream, tutorials/from-examples/stream-sync",
    ),
    (
        "from tenxgraph.storage.checkpointer import InMemoryCheckpointer, PgCheckpointer",
        "concepts/memory, how-to/python/use-realtime-audio",
    ),
    (
        "from tenxgraph.storage.checkpointer import PgCheckpointer",
        "beginner/add-memory, concepts/checkpointing-and-threads, how-to/production/checkpointing, how-to/python/set-up-checkpointing, integrations/agentflow-with-postgres, reference/python/checkpointers",
    ),
    (
        "from tenxgraph.storage.checkpointer import SqliteCheckpointer",
        "concepts/checkpointing-and-threads, how-to/python/set-up-checkpointing, reference/python/checkpointers",
    ),
    (
        "from tenxgraph.storage.checkpointer.base_checkpointer import BaseCheckpointer",
        "concepts/extensibility",
    ),
    (
        "from tenxgraph.utils import BaseValidator",
        "concepts/security-and-validators, reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils import CallbackManager",
        "concepts/callbacks-and-command, concepts/security-and-validators, how-to/python/protect-against-prompt-injection, reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils import CallbackManager, InvocationType",
        "concepts/callbacks-and-command, how-to/python/protect-against-prompt-injection",
    ),
    (
        "from tenxgraph.utils import CallbackManager, InvocationType, BeforeInvokeCallback, AfterInvokeCallback, OnErrorCallback, BaseValidator, CallbackContext",
        "reference/python/callback-manager",
    ),
    ("from tenxgraph.utils import Command", "reference/python/command-handoff"),
    (
        "from tenxgraph.utils import Command, END",
        "concepts/agents-tools-control, concepts/callbacks-and-command, how-to/python/handoff-between-agents, how-to/python/use-custom-nodes, reference/python/command-handoff",
    ),
    (
        "from tenxgraph.utils import END",
        "beginner/add-a-tool, beginner/add-memory, beginner/mental-model, beginner/run-with-api, beginner/your-first-agent, concepts/agents-and-tools, concepts/media-and-files, concepts/memory-and-store, how-to/python/choose-the-right-abstraction, how-to/python/handoff-between-agents, how-to/python/run-background-tasks, how-to/python/send-traces-to-logfire-langsmith, how-to/python/use-context-manager, how-to/python/use-custom-nodes, how-to/python/use-custom-state, how-to/python/use-mcp, how-to/python/use-memory-store, how-to/python/use-publishers, how-to/python/use-tool-decorator, integrations/agentflow-with-postgres, reference/python/command-handoff, reference/python/testing",
    ),
    ("from tenxgraph.utils import END, ResponseGranularity", "how-to/python/stream-graph"),
    (
        "from tenxgraph.utils import END, START, get_tool_metadata, has_tool_decorator, tool",
        "tutorials/from-examples/tool-decorator",
    ),
    ("from tenxgraph.utils import InvocationType", "reference/python/callback-manager"),
    (
        "from tenxgraph.utils import ResponseGranularity",
        "concepts/state-graph, concepts/streaming, how-to/python/build-a-graph, how-to/python/stream-graph, reference/python/state, reference/python/testing, tutorials/from-examples/custom-state, tutorials/from-examples/react-streaming",
    ),
    (
        "from tenxgraph.utils import START, END",
        "concepts/index, how-to/python/build-a-graph, reference/python/agent, reference/python/graph, reference/python/skills, reference/python/testing, reference/python/tools",
    ),
    ("from tenxgraph.utils import SecretRedactionFilter", "how-to/production/troubleshooting"),
    (
        "from tenxgraph.utils import has_tool_decorator, get_tool_metadata",
        "tutorials/from-examples/tool-decorator",
    ),
    ("from tenxgraph.utils import install_secret_redaction", "how-to/production/troubleshooting"),
    ("from tenxgraph.utils import mask_secrets", "how-to/production/troubleshooting"),
    (
        "from tenxgraph.utils import tool",
        "concepts/agents-and-tools, concepts/agents-tools-control, how-to/python/use-realtime-audio",
    ),
    (
        "from tenxgraph.utils import tool, get_tool_metadata, has_tool_decorator, END, START",
        "tutorials/from-examples/tool-decorator",
    ),
    (
        "from tenxgraph.utils.callbacks import AfterInvokeCallback",
        "how-to/python/protect-against-prompt-injection",
    ),
    (
        "from tenxgraph.utils.callbacks import AfterInvokeCallback, CallbackContext",
        "reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils.callbacks import BaseValidator",
        "concepts/agents-tools-control, concepts/extensibility",
    ),
    (
        "from tenxgraph.utils.callbacks import BaseValidator, CallbackManager",
        "tutorials/from-examples/react-agent-validation",
    ),
    (
        "from tenxgraph.utils.callbacks import BeforeInvokeCallback, CallbackContext",
        "how-to/python/protect-against-prompt-injection, reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils.callbacks import CallbackManager",
        "concepts/dependency-injection, reference/python/lifecycle-callbacks, troubleshooting/error-patterns, tutorials/from-examples/dependency-injection",
    ),
    (
        "from tenxgraph.utils.callbacks import CallbackManager, CallbackContext, InvocationType",
        "concepts/agents-tools-control",
    ),
    (
        "from tenxgraph.utils.callbacks import CallbackManager, InvocationType",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.utils.callbacks import OnErrorCallback, CallbackContext",
        "reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils.constants import END",
        "concepts/state-graph, get-started/first-agent, get-started/index, how-to/python/emit-tool-progress, how-to/python/use-dependency-injection, tutorials/from-examples/agent-class, tutorials/from-examples/react-agent-validation, tutorials/from-examples/react-agent, tutorials/from-examples/react-streaming, tutorials/from-examples/stop-stream, tutorials/from-examples/stream-sync",
    ),
    (
        "from tenxgraph.utils.decorators import get_tool_metadata, has_tool_decorator",
        "how-to/python/use-tool-decorator",
    ),
    (
        "from tenxgraph.utils.decorators import tool",
        "how-to/python/configure-agent, how-to/python/use-prebuilt-tools, how-to/python/use-tool-decorator",
    ),
    (
        "from tenxgraph.utils.logging import SecretRedactionFilter, install_secret_redaction, mask_secrets",
        "how-to/production/logging-and-metrics",
    ),
    (
        "from tenxgraph.utils.logging import bind_log_context_from_config, get_log_context, set_log_context",
        "how-to/production/logging-and-metrics",
    ),
    (
        "from tenxgraph.utils.logging import setup_structured_logging",
        "how-to/production/logging-and-metrics",
    ),
    (
        "from tenxgraph.utils.validators import MessageContentValidator",
        "reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils.validators import MessageContentValidator, PromptInjectionValidator, ValidationError",
        "tutorials/from-examples/react-agent-validation",
    ),
    (
        "from tenxgraph.utils.validators import PromptInjectionValidator",
        "concepts/agents-tools-control, concepts/callbacks-and-command, how-to/python/protect-against-prompt-injection, reference/python/callback-manager, troubleshooting/error-patterns",
    ),
    (
        "from tenxgraph.utils.validators import PromptInjectionValidator, MessageContentValidator",
        "concepts/agents-tools-control",
    ),
    (
        "from tenxgraph.utils.validators import PromptInjectionValidator, MessageContentValidator, ValidationError, register_default_validators",
        "reference/python/callback-manager",
    ),
    (
        "from tenxgraph.utils.validators import ValidationError",
        "concepts/security-and-validators, how-to/python/protect-against-prompt-injection, reference/python/callback-manager, troubleshooting/error-codes",
    ),
    (
        "from tenxgraph.utils.validators import register_default_validators",
        "how-to/python/protect-against-prompt-injection, reference/python/callback-manager",
    ),
    ("from tenxgraph.utils import BackgroundTaskManager", "reference/python/background-tasks"),
    (
        "from tenxgraph.utils import BaseIDGenerator, UUIDGenerator, BigIntIDGenerator",
        "reference/python/id-generator",
    ),
    ("from tenxgraph.utils import UUIDGenerator", "concepts/context-id-background"),
    (
        "from tenxgraph.utils.background_task_manager import BackgroundTaskManager",
        "concepts/agents-tools-control, how-to/python/run-background-tasks, reference/python/background-tasks",
    ),
    (
        "from tenxgraph.utils.background_task_manager import BackgroundTaskManager, TaskMetadata",
        "reference/python/background-tasks",
    ),
    (
        "from tenxgraph.utils.id_generator import AsyncIDGenerator, IDType",
        "how-to/python/configure-id-generator, reference/python/id-generator",
    ),
    ("from tenxgraph.utils.id_generator import BaseIDGenerator", "concepts/extensibility"),
    (
        "from tenxgraph.utils.id_generator import BaseIDGenerator, AsyncIDGenerator, DefaultIDGenerator, UUIDGenerator, BigIntIDGenerator, TimestampIDGenerator, IntIDGenerator, HexIDGenerator, ShortIDGenerator, IDType",
        "reference/python/id-generator",
    ),
    (
        "from tenxgraph.utils.id_generator import BaseIDGenerator, IDType",
        "how-to/python/configure-id-generator, reference/python/id-generator",
    ),
    (
        "from tenxgraph.utils.id_generator import BigIntIDGenerator",
        "how-to/python/configure-id-generator",
    ),
    (
        "from tenxgraph.utils.id_generator import DefaultIDGenerator",
        "reference/python/id-generator",
    ),
    ("from tenxgraph.utils.id_generator import TimestampIDGenerator", "concepts/extensibility"),
    (
        "from tenxgraph.utils.metrics import counter, timer, snapshot",
        "how-to/production/logging-and-metrics",
    ),
    (
        "from tenxgraph.utils.metrics import setup_otel_metrics",
        "how-to/production/logging-and-metrics",
    ),
    ("from tenxgraph.utils.metrics import snapshot", "how-to/production/logging-and-metrics"),
    (
        "from tenxgraph.runtime.publisher import BasePublisher",
        "how-to/python/use-custom-nodes, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import Event, EventType, ContentType",
        "how-to/python/use-publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import ObservabilityLevel, OtelPublisher, setup_tracing",
        "reference/python/publishers",
    ),
    ("from tenxgraph.runtime.publisher import OtelPublisher", "concepts/serving-agents"),
    (
        "from tenxgraph.runtime.publisher import setup_tracing, ObservabilityLevel",
        "how-to/python/use-publishers",
    ),
    (
        "from tenxgraph.runtime.publisher.base_publisher import BasePublisher",
        "concepts/extensibility, concepts/serving-agents",
    ),
    ("from tenxgraph.runtime.publisher.events import ContentType", "reference/python/publishers"),
    (
        "from tenxgraph.runtime.publisher.events import Event",
        "reference/python/evaluation-harness, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher.events import Event, EventType, ContentType, EventModel",
        "reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher.events import EventModel",
        "concepts/extensibility, concepts/serving-agents, reference/python/publishers",
    ),
    ("from tenxgraph.runtime.publisher.events import EventType", "reference/python/publishers"),
    (
        "from tenxgraph.runtime.publisher.otel_publisher import ObservabilityLevel",
        "concepts/serving-agents",
    ),
    # Graph lifecycle hooks (reference/python/lifecycle-callbacks).
    (
        "from tenxgraph.utils.callbacks import CallbackManager, GraphLifecycleHook",
        "reference/python/realtime",
    ),
    (
        "from tenxgraph.utils.callbacks import GraphLifecycleHook",
        "reference/python/lifecycle-callbacks",
    ),
    (
        "from tenxgraph.utils.callbacks import GraphLifecycleHook, GraphLifecycleContext",
        "concepts/agents-tools-control, concepts/callbacks-and-command, reference/python/lifecycle-callbacks",
    ),
    # Agent extension point (concepts/extensibility).
    ("from tenxgraph.core.graph.base_agent import BaseAgent", "concepts/extensibility"),
    # Tool progress (reference/python/stream-emitter).
    (
        "from tenxgraph.core.state.stream_emitter import StreamEmitter",
        "how-to/python/emit-tool-progress, reference/python/stream-emitter",
    ),
    # Skills (reference/python/skills).
    ("from tenxgraph.core.skills import SkillConfig", "tutorials/from-examples/skills"),
    ("from tenxgraph.core.skills import SkillsRegistry", "reference/python/skills"),
    ("from tenxgraph.core.skills.models import SkillConfig", "reference/python/skills"),
    ("from tenxgraph.core.skills.models import SkillConfig, SkillMeta", "reference/python/skills"),
    (
        "from tenxgraph.runtime.publisher import BasePublisher, ConsolePublisher",
        "reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import ConsolePublisher",
        "concepts/publishers-and-runtime-protocols, how-to/python/use-publishers, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.adapters.llm.base_converter import BaseConverter",
        "concepts/extensibility",
    ),
    (
        "from tenxgraph.runtime.adapters.llm.model_response_converter import ModelResponseConverter",
        "how-to/python/use-custom-nodes",
    ),
    (
        "from tenxgraph.prebuilt import ReactAgent, SupervisorTeamAgent, SwarmAgent",
        "concepts/prebuilt-agents-and-tools",
    ),
    (
        "from tenxgraph.prebuilt.agent import PlanActReflectAgent",
        "how-to/python/use-prebuilt-agents",
    ),
    ("from tenxgraph.prebuilt.agent import RAGAgent", "how-to/python/use-prebuilt-agents"),
    (
        "from tenxgraph.prebuilt.agent import ReactAgent, PlanActReflectAgent, StructuredOutputAgent, SupervisorTeamAgent, SwarmAgent, RAGAgent",
        "how-to/python/use-prebuilt-agents",
    ),
    (
        "from tenxgraph.prebuilt.agent import StructuredOutputAgent",
        "how-to/python/use-prebuilt-agents",
    ),
    (
        "from tenxgraph.prebuilt.agent import SupervisorTeamAgent, WorkerConfig",
        "how-to/python/use-prebuilt-agents",
    ),
    (
        "from tenxgraph.prebuilt.agent import SwarmAgent, SwarmMemberConfig",
        "how-to/python/use-prebuilt-agents",
    ),
    (
        "from tenxgraph.prebuilt.agent.react import ReactAgent",
        "how-to/python/choose-the-right-abstraction",
    ),
    ("from tenxgraph.prebuilt.tools import fetch_url", "how-to/python/use-prebuilt-tools"),
    (
        "from tenxgraph.prebuilt.tools import fetch_url, google_web_search",
        "how-to/python/use-prebuilt-agents",
    ),
    ("from tenxgraph.prebuilt.tools import google_web_search", "how-to/python/use-prebuilt-tools"),
)

#: Provided by the run-behaviour half of issue 12 (streaming).
RUNS_HALF_IMPORTS: tuple[tuple[str, str], ...] = (
    (
        "from tenxgraph.core.state import AgentState, Message, StreamEvent",
        "how-to/python/stream-graph",
    ),
    ("from tenxgraph.core.state import Message, StreamEvent", "how-to/python/stream-graph"),
    ("from tenxgraph.core.state import StreamChunk, StreamEvent", "how-to/python/stream-graph"),
    (
        "from tenxgraph.core.state import StreamEvent",
        "how-to/python/build-a-graph, how-to/python/stream-graph, tutorials/from-examples/stream-sync",
    ),
    (
        "from tenxgraph.core.state.stream_chunks import StreamChunk, StreamEvent",
        "concepts/streaming",
    ),
    (
        "from tenxgraph.core.state.stream_chunks import StreamEvent",
        "concepts/state-graph, concepts/streaming",
    ),
    ("from tenxgraph.storage.media import BaseMediaStore", "reference/python/media"),
    (
        "from tenxgraph.storage.media import DocumentHandling, ImageHandling, InMemoryMediaStore, MultimodalConfig",
        "concepts/media-and-files",
    ),
    (
        "from tenxgraph.storage.media import DocumentHandling, ImageHandling, MultimodalConfig",
        "concepts/media-and-files, reference/python/media",
    ),
    ("from tenxgraph.storage.media import InMemoryMediaStore", "concepts/media-and-files"),
    (
        "from tenxgraph.storage.media import LocalFileMediaStore",
        "reference/python/media, troubleshooting/error-patterns",
    ),
    ("from tenxgraph.storage.media import MediaOffloadPolicy", "reference/python/media"),
    (
        "from tenxgraph.storage.media import MediaOffloadPolicy, ensure_media_offloaded",
        "reference/python/media",
    ),
    ("from tenxgraph.storage.media import MediaRefResolver", "reference/python/media"),
    (
        "from tenxgraph.storage.media import create_openai_file_attachment, create_openai_file_search_tool",
        "reference/python/media",
    ),
    ("from tenxgraph.storage.media.config import MultimodalConfig", "reference/python/agent"),
    ("from tenxgraph.storage.media.storage import CloudMediaStore", "concepts/media-and-files"),
    ("from tenxgraph.storage.media.storage import LocalFileMediaStore", "concepts/media-and-files"),
    ("from tenxgraph.storage.media.storage.base import BaseMediaStore", "concepts/extensibility"),
)

#: Documented utilities tenxgraph does not provide (listed in docs/compat-10xgraph.md).
NOT_PROVIDED_IMPORTS: tuple[tuple[str, str], ...] = (
    (
        "from tenxgraph.core.llm import DEFAULT_LLM_TIMEOUT_SECONDS, call_llm, create_llm_client, detect_provider, get_default_llm_timeout, set_default_llm_timeout",
        "reference/python/llm",
    ),
)

#: Features outside tenxgraph's scope (DESIGN section 1; docs/compat-10xgraph.md).
OUT_OF_SCOPE_IMPORTS: tuple[tuple[str, str], ...] = (
    (
        "from tenxgraph.core.exceptions.media_exceptions import UnsupportedMediaInputError",
        "troubleshooting/error-codes",
    ),
    (
        "from tenxgraph.core.realtime import GeminiLiveClient, normalize_message",
        "reference/python/realtime",
    ),
    (
        "from tenxgraph.core.realtime import LiveInputQueue, LiveInput, LiveInputKind, RealtimeConfig, VADConfig, ReconnectConfig, RealtimeEvent, AudioDeltaEvent, InputTranscriptEvent, OutputTranscriptEvent, ToolCallEvent, ToolResultEvent, TurnCompleteEvent, InterruptedEvent, SessionUpdateEvent, GoAwayEvent, AgentChangedEvent, ErrorEvent, RealtimeClient, GeminiLiveClient, normalize_message",
        "reference/python/realtime",
    ),
    ("from tenxgraph.core.realtime import RealtimeClient", "reference/python/realtime"),
    ("from tenxgraph.core.realtime import RealtimeConfig", "reference/python/realtime"),
    ("from tenxgraph.core.realtime import RealtimeEvent", "reference/python/realtime"),
    ("from tenxgraph.core.realtime import ReconnectConfig", "reference/python/realtime"),
    ("from tenxgraph.core.realtime import VADConfig", "reference/python/realtime"),
    (
        "from tenxgraph.core.realtime.base import INPUT_SAMPLE_RATE, OUTPUT_SAMPLE_RATE",
        "reference/python/realtime",
    ),
    (
        "from tenxgraph.core.realtime.base import OUTPUT_SAMPLE_RATE, RealtimeConfig",
        "how-to/python/use-realtime-audio",
    ),
    ("from tenxgraph.core.realtime.base import RealtimeConfig", "how-to/python/use-realtime-audio"),
    (
        "from tenxgraph.core.realtime.base import RealtimeConfig, ReconnectConfig",
        "how-to/python/use-realtime-audio",
    ),
    (
        "from tenxgraph.core.realtime.base import RealtimeConfig, VADConfig",
        "how-to/python/use-realtime-audio",
    ),
    (
        "from tenxgraph.core.realtime.queue import LiveInputQueue",
        "how-to/python/use-realtime-audio",
    ),
    (
        "from tenxgraph.prebuilt.agent import AudioAgent",
        "concepts/prebuilt-agents-and-tools, how-to/python/use-realtime-audio, reference/python/realtime",
    ),
    (
        "from tenxgraph.prebuilt.agent import RAGAgent, CohereReranker",
        "how-to/python/use-prebuilt-agents",
    ),
    (
        "from tenxgraph.prebuilt.tools import fetch_url, file_read, file_write, file_search, safe_calculator, google_web_search, vertex_ai_search, memory_tool, make_user_memory_tool, make_agent_memory_tool, create_handoff_tool",
        "how-to/python/use-prebuilt-tools",
    ),
    (
        "from tenxgraph.prebuilt.tools import fetch_url, safe_calculator",
        "how-to/python/use-prebuilt-agents, how-to/python/use-prebuilt-tools",
    ),
    (
        "from tenxgraph.prebuilt.tools import fetch_url, safe_calculator, file_read",
        "concepts/agents-tools-control",
    ),
    (
        "from tenxgraph.prebuilt.tools import file_read, file_write, file_search",
        "how-to/python/use-prebuilt-tools",
    ),
    (
        "from tenxgraph.prebuilt.tools import make_user_memory_tool, make_agent_memory_tool",
        "how-to/python/use-prebuilt-tools",
    ),
    ("from tenxgraph.prebuilt.tools import memory_tool", "how-to/python/use-prebuilt-tools"),
    (
        "from tenxgraph.prebuilt.tools import safe_calculator",
        "how-to/python/use-mcp, how-to/python/use-prebuilt-tools",
    ),
    ("from tenxgraph.prebuilt.tools import vertex_ai_search", "how-to/python/use-prebuilt-tools"),
    (
        "from tenxgraph.qa.evaluation import AgentEvaluator, CriteriaConfig, CriterionConfig, EvalCase, EvalConfig, EvalSet, MatchType, ToolCall, create_eval_app",
        "reference/python/evaluation",
    ),
    (
        "from tenxgraph.qa.evaluation import AgentEvaluator, EvalConfig",
        "reference/python/evaluation",
    ),
    (
        "from tenxgraph.qa.evaluation import AgentEvaluator, EvalConfig, CriteriaConfig, CriterionConfig, MatchType, Rubric, EvalSet, EvalSetBuilder, EvalCase, Invocation, MessageContent, SessionInput, ToolCall, TrajectoryStep, StepType, EvalReport, EvalCaseResult, CriterionResult, TrajectoryCollector, make_trajectory_callback",
        "reference/python/evaluation",
    ),
    ("from tenxgraph.qa.evaluation import AgentEvaluator, EvalConfig, EvalPresets", "concepts/qa"),
    (
        "from tenxgraph.qa.evaluation import AgentEvaluator, create_eval_app",
        "reference/python/evaluation",
    ),
    (
        "from tenxgraph.qa.evaluation import AgentEvaluator, parametrize_eval_cases",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation import BaseCriterion, CriterionConfig",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import BaseCriterion, SyncCriterion, CompositeCriterion, WeightedCriterion, ExactMatchCriterion, ContainsKeywordsCriterion, ResponseMatchCriterion, RougeMatchCriterion, LLMJudgeCriterion, RubricBasedCriterion, FactualAccuracyCriterion, HallucinationCriterion, SafetyCriterion, TrajectoryMatchCriterion, NodeOrderMatchCriterion, ToolNameMatchCriterion, CriterionConfig, MatchType, Rubric",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation import BatchSimulator", "concepts/qa"),
    (
        "from tenxgraph.qa.evaluation import CompositeCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import CompositeCriterion, ContainsKeywordsCriterion, CriterionConfig, ToolNameMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import ConsoleReporter, HTMLReporter, JSONReporter, JUnitXMLReporter, print_report",
        "reference/python/evaluation",
    ),
    (
        "from tenxgraph.qa.evaluation import ContainsKeywordsCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import ContainsKeywordsCriterion, CriterionConfig",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation import ConversationScenario", "concepts/qa"),
    (
        "from tenxgraph.qa.evaluation import CriteriaConfig, CriterionConfig, EvalConfig, MatchType",
        "reference/python/evaluation",
    ),
    (
        "from tenxgraph.qa.evaluation import CriterionConfig, MatchType, TrajectoryMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import CriterionConfig, ResponseMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation import EvalCase, EvalSet, EvalSetBuilder", "concepts/qa"),
    ("from tenxgraph.qa.evaluation import EvalCase, ToolCall", "reference/python/evaluation"),
    ("from tenxgraph.qa.evaluation import EvalFixtures", "reference/python/evaluation-harness"),
    ("from tenxgraph.qa.evaluation import EvalSet", "reference/python/evaluation"),
    (
        "from tenxgraph.qa.evaluation import EvaluationRunner, ReporterManager, ReporterOutput, EvalFixtures, EvalPlugin, EvalTestCase, EvalSummary, EventCollector, ExecutionResult, NodeResponseData, SessionInput, MessageContent, PublisherCallback, eval_test, parametrize_eval_cases, assert_eval_passed, assert_criterion_passed, create_eval_app, create_simple_eval_set, run_eval",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation import EvaluationRunner, create_eval_app",
        "reference/python/evaluation-harness",
    ),
    ("from tenxgraph.qa.evaluation import EventCollector", "reference/python/evaluation-harness"),
    (
        "from tenxgraph.qa.evaluation import ExactMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import FactualAccuracyCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import HallucinationCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import LLMJudgeCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import MessageContent, SessionInput",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation import NodeOrderMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import PublisherCallback, TrajectoryCollector",
        "reference/python/evaluation-harness",
    ),
    ("from tenxgraph.qa.evaluation import QuickEval", "concepts/qa"),
    (
        "from tenxgraph.qa.evaluation import ReporterManager, ReporterConfig",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation import ResponseMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import RougeMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation import Rubric", "reference/python/evaluation"),
    (
        "from tenxgraph.qa.evaluation import RubricBasedCriterion, Rubric",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation import SafetyCriterion", "reference/python/evaluation-criteria"),
    ("from tenxgraph.qa.evaluation import SyncCriterion", "reference/python/evaluation-criteria"),
    ("from tenxgraph.qa.evaluation import ToolCall", "reference/python/evaluation"),
    (
        "from tenxgraph.qa.evaluation import ToolNameMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import TrajectoryCollector, make_trajectory_callback",
        "reference/python/evaluation",
    ),
    (
        "from tenxgraph.qa.evaluation import TrajectoryMatchCriterion",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation import TrajectoryStep", "reference/python/evaluation"),
    ("from tenxgraph.qa.evaluation import UserSimulator, UserSimulatorConfig", "concepts/qa"),
    (
        "from tenxgraph.qa.evaluation import WeightedCriterion",
        "reference/python/evaluation-criteria",
    ),
    (
        "from tenxgraph.qa.evaluation import assert_criterion_passed, assert_eval_passed",
        "reference/python/evaluation-harness",
    ),
    ("from tenxgraph.qa.evaluation import create_eval_app", "reference/python/evaluation-harness"),
    (
        "from tenxgraph.qa.evaluation import create_eval_app, eval_test",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation import create_eval_app, run_eval",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation import create_simple_eval_set",
        "reference/python/evaluation-harness",
    ),
    (
        "from tenxgraph.qa.evaluation.config.types import DEFAULT_JUDGE_MODEL",
        "reference/python/evaluation",
    ),
    ("from tenxgraph.qa.evaluation.criteria import BaseCriterion", "concepts/qa"),
    (
        "from tenxgraph.qa.evaluation.criteria import CRITERIA_REGISTRY",
        "reference/python/evaluation-criteria",
    ),
    ("from tenxgraph.qa.evaluation.criteria import SimulationGoalsCriterion", "concepts/qa"),
    ("from tenxgraph.qa.evaluation.criteria.base import BaseCriterion", "concepts/extensibility"),
    ("from tenxgraph.qa.evaluation.reporters import BaseReporter", "concepts/qa"),
    ("from tenxgraph.qa.evaluation.reporters.base import BaseReporter", "concepts/extensibility"),
    ("from tenxgraph.qa.testing import InMemoryStore", "reference/python/testing"),
    ("from tenxgraph.qa.testing import MockMCPClient", "reference/python/testing"),
    ("from tenxgraph.qa.testing import MockToolRegistry", "concepts/qa, reference/python/testing"),
    (
        "from tenxgraph.qa.testing import QuickTest",
        "concepts/qa, reference/python/testing, tutorials/from-examples/testing",
    ),
    ("from tenxgraph.qa.testing import TestAgent", "concepts/qa, reference/python/testing"),
    (
        "from tenxgraph.qa.testing import TestAgent, QuickTest, TestResult, MockMCPClient, MockToolRegistry, InMemoryStore",
        "reference/python/testing",
    ),
    (
        "from tenxgraph.qa.testing import TestAgent, TestResult, QuickTest",
        "reference/python/testing",
    ),
    (
        "from tenxgraph.runtime.adapters.llm import GoogleGenAIConverter",
        "tutorials/from-examples/google-genai",
    ),
    (
        "from tenxgraph.runtime.publisher import CompositePublisher",
        "concepts/extensibility, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import CompositePublisher, ConsolePublisher, RedisPublisher",
        "how-to/python/use-publishers, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import KafkaPublisher",
        "how-to/python/use-publishers, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import LangsmithPublisher, LogfirePublisher, ObservabilityLevel, OtelPublisher, setup_langsmith, setup_logfire, setup_observability, setup_tracing",
        "reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import LangsmithPublisher, ObservabilityLevel",
        "how-to/python/send-traces-to-logfire-langsmith",
    ),
    (
        "from tenxgraph.runtime.publisher import RabbitMQPublisher",
        "how-to/python/use-publishers, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import RedisPublisher",
        "how-to/python/use-publishers, reference/python/publishers",
    ),
    (
        "from tenxgraph.runtime.publisher import RedisPublisher, KafkaPublisher, CompositePublisher",
        "concepts/serving-agents",
    ),
    ("from tenxgraph.runtime.publisher import setup_langsmith", "reference/python/publishers"),
    (
        "from tenxgraph.runtime.publisher import setup_langsmith, ObservabilityLevel",
        "how-to/python/send-traces-to-logfire-langsmith",
    ),
    ("from tenxgraph.runtime.publisher import setup_logfire", "reference/python/publishers"),
    (
        "from tenxgraph.runtime.publisher import setup_logfire, ObservabilityLevel",
        "how-to/python/send-traces-to-logfire-langsmith",
    ),
    (
        "from tenxgraph.runtime.publisher import setup_observability",
        "how-to/python/send-traces-to-logfire-langsmith, reference/python/publishers",
    ),
    (
        "from tenxgraph.storage.store import BaseStore",
        "concepts/memory, how-to/python/choose-the-right-abstraction, how-to/python/use-custom-nodes, reference/python/graph, reference/python/memory-stores",
    ),
    ("from tenxgraph.storage.store import Mem0Store", "reference/python/memory-stores"),
    (
        "from tenxgraph.storage.store import Mem0Store, create_mem0_store, create_mem0_store_with_qdrant",
        "how-to/python/use-memory-store",
    ),
    ("from tenxgraph.storage.store import MemoryConfig", "how-to/python/use-memory-store"),
    (
        "from tenxgraph.storage.store import MemoryConfig, UserMemoryConfig",
        "how-to/python/use-prebuilt-tools",
    ),
    (
        "from tenxgraph.storage.store import MemoryConfig, UserMemoryConfig, AgentMemoryConfig",
        "concepts/memory-and-store",
    ),
    (
        "from tenxgraph.storage.store import MemoryConfig, UserMemoryConfig, AgentMemoryConfig, ReadMode",
        "how-to/python/use-memory-store",
    ),
    (
        "from tenxgraph.storage.store import MemoryConfig, UserMemoryConfig, create_local_qdrant_store, OpenAIEmbedding",
        "how-to/python/use-memory-store",
    ),
    (
        "from tenxgraph.storage.store import MemoryIntegration, QdrantStore, OpenAIEmbedding, create_local_qdrant_store",
        "concepts/memory-and-store",
    ),
    (
        "from tenxgraph.storage.store import MemoryType, DistanceMetric",
        "how-to/python/use-memory-store",
    ),
    (
        "from tenxgraph.storage.store import OpenAIEmbedding, GoogleEmbedding",
        "how-to/python/use-memory-store",
    ),
    ("from tenxgraph.storage.store import QdrantStore", "reference/python/memory-stores"),
    (
        "from tenxgraph.storage.store import QdrantStore, MemoryConfig, OpenAIEmbedding, create_local_qdrant_store",
        "concepts/memory-and-store",
    ),
    (
        "from tenxgraph.storage.store import QdrantStore, OpenAIEmbedding, DistanceMetric",
        "how-to/python/use-memory-store",
    ),
    (
        "from tenxgraph.storage.store import QdrantStore, OpenAIEmbedding, create_local_qdrant_store",
        "how-to/python/use-memory-store",
    ),
    ("from tenxgraph.storage.store import QdrantStore, ReadMode", "concepts/memory"),
    (
        "from tenxgraph.storage.store import QdrantStore, create_local_qdrant_store, OpenAIEmbedding",
        "concepts/memory-and-store",
    ),
    (
        "from tenxgraph.storage.store import create_cloud_qdrant_store, GoogleEmbedding",
        "how-to/python/use-memory-store",
    ),
    (
        "from tenxgraph.storage.store import create_local_qdrant_store, OpenAIEmbedding",
        "how-to/python/use-memory-store, how-to/python/use-prebuilt-agents, how-to/python/use-prebuilt-tools",
    ),
    ("from tenxgraph.storage.store import create_memory_preload_node", "concepts/memory-and-store"),
    (
        "from tenxgraph.storage.store import create_remote_qdrant_store, OpenAIEmbedding",
        "how-to/python/use-memory-store",
    ),
    ("from tenxgraph.storage.store import get_memory_system_prompt", "concepts/memory-and-store"),
    (
        "from tenxgraph.storage.store.base_store import BaseStore",
        "concepts/dependency-injection, concepts/extensibility, tutorials/from-examples/dependency-injection",
    ),
    ("from tenxgraph.storage.store.embedding import BaseEmbedding", "concepts/memory"),
    (
        "from tenxgraph.storage.store.embedding import OpenAIEmbedding",
        "concepts/memory, reference/python/memory-stores",
    ),
    (
        "from tenxgraph.storage.store.embedding.base_embedding import BaseEmbedding",
        "concepts/extensibility",
    ),
    (
        "from tenxgraph.storage.store.memory_config import MemoryConfig",
        "concepts/memory, reference/python/agent, reference/python/memory-stores",
    ),
    (
        "from tenxgraph.storage.store.store_schema import MemoryType, RetrievalStrategy",
        "reference/python/memory-stores",
    ),
    (
        "from tenxgraph.storage.store.store_schema import MemoryType, RetrievalStrategy, DistanceMetric, MemorySearchResult, MemoryRecord",
        "reference/python/memory-stores",
    ),
    (
        "from tenxgraph_cli import BaseAuth",
        "concepts/extensibility, concepts/serving-agents, how-to/production/auth-and-authorization",
    ),
    (
        "from tenxgraph_cli.src.app.core.auth.authorization import AuthorizationBackend",
        "concepts/extensibility, concepts/serving-agents",
    ),
    (
        "from tenxgraph_cli.src.app.core.middleware.rate_limit.base import BaseRateLimitBackend",
        "concepts/extensibility, concepts/serving-agents",
    ),
    (
        "from tenxgraph_cli.src.app.utils.thread_name_generator import ThreadNameGenerator",
        "concepts/extensibility, concepts/serving-agents",
    ),
)


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("line", "pages"),
    DOCUMENTED_IMPORTS + RUNS_HALF_IMPORTS,
    ids=[x[0] for x in DOCUMENTED_IMPORTS + RUNS_HALF_IMPORTS],
)
def test_documented_import_line_runs_in_a_fresh_interpreter(line: str, pages: str) -> None:
    proc = _run(line)
    assert proc.returncode == 0, f"{line!r} (from {pages}) failed:\n{proc.stderr}"


def test_documented_but_not_provided_imports_fail_cleanly() -> None:
    # One interpreter for all: each line must raise ImportError (ModuleNotFoundError included),
    # never import, and never fail in another way (a crash would hide a broken package).
    lines = [line for line, _ in NOT_PROVIDED_IMPORTS + OUT_OF_SCOPE_IMPORTS]
    code = (
        "import json, sys\n"
        "bad = {}\n"
        "for line in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        exec(line, {})\n"
        "        bad[line] = 'imported'\n"
        "    except ImportError:\n"
        "        pass\n"
        "    except Exception as exc:\n"
        "        bad[line] = repr(exc)\n"
        "print(json.dumps(bad))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(lines)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {}


def test_the_durability_guide_imports_are_all_provided() -> None:
    guide = "how-to/python/set-up-checkpointing"
    provided = {line for line, pages in DOCUMENTED_IMPORTS if guide in pages}
    assert provided >= {
        "from tenxgraph.core.graph import StateGraph, Agent",
        "from tenxgraph.storage.checkpointer import InMemoryCheckpointer",
        "from tenxgraph.core.state import AgentState, Message",
        "from tenxgraph.storage.checkpointer import PgCheckpointer",
        "from tenxgraph.storage.checkpointer import SqliteCheckpointer",
        "from tenxgraph.core.exceptions import StaleStateError",
    }
    for pending in RUNS_HALF_IMPORTS + NOT_PROVIDED_IMPORTS:
        assert guide not in pending[1]


def test_tool_decorator_imports_in_a_fresh_interpreter() -> None:
    # The lazy attribute once recursed because a submodule was also named ``tool``: only a
    # fresh interpreter (nothing imported before) shows it.
    code = (
        "from tenxgraph.utils import tool, get_tool_metadata, has_tool_decorator\n"
        "@tool(name='adder')\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "assert add(1, 2) == 3 and has_tool_decorator(add)\n"
        "assert get_tool_metadata(add)['name'] == 'adder'\n"
        "import tenxgraph.utils.decorators as d\n"
        "assert d.tool is tool\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr


def test_design_section_1_imports() -> None:
    code = (
        "from tenxgraph.core.graph import StateGraph, Agent, ToolNode\n"
        "from tenxgraph.core.state import AgentState, Message\n"
        "from tenxgraph.core.state.reducers import add_messages, replace_messages, append_items, replace_value\n"
        "from tenxgraph.core.exceptions import StaleStateError, GraphError, GraphRecursionError, NodeTimeoutError, StorageError, TransientStorageError, SerializationError, SchemaVersionError, ResourceNotFoundError, LedgerWriteError, MetricsError, NodeError, GraphStopRequested\n"
        "from tenxgraph.storage.checkpointer import PgCheckpointer, SqliteCheckpointer, InMemoryCheckpointer\n"
        "from tenxgraph.utils import START, END, tool, Command, ResponseGranularity\n"
        "from tenxgraph.utils import add_messages as a2, ThreadInfo\n"
        "from tenxgraph.utils.thread_info import ThreadInfo as T2\n"
        "assert a2 is add_messages and T2 is ThreadInfo\n"
        "assert (START, END) == ('__start__', '__end__')\n"
    )
    proc = _run(code)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        (
            "tenxgraph.core",
            {"Agent", "AgentState", "CompiledGraph", "Message", "StateGraph", "ToolNode"},
        ),
        (
            "tenxgraph.core.graph",
            {"Agent", "CompiledGraph", "StateGraph", "StreamChunk", "StreamEvent", "ToolNode"},
        ),
        (
            "tenxgraph.storage.checkpointer",
            {
                "ADMIN_SCOPE",
                "BaseCheckpointer",
                "InMemoryCheckpointer",
                "Loaded",
                "PgCheckpointer",
                "SqliteCheckpointer",
                "StateSnapshot",
            },
        ),
        (
            "tenxgraph.utils",
            {
                "END",
                "START",
                "Command",
                "ResponseGranularity",
                "SecretRedactionFilter",
                "ThreadInfo",
                "add_messages",
                "GraphInterrupt",
                "Interrupt",
                "AfterInvokeCallback",
                "BaseValidator",
                "BeforeInvokeCallback",
                "CallbackContext",
                "CallbackManager",
                "convert_messages",
                "InvocationType",
                "OnErrorCallback",
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
                "AsyncIDGenerator",
                "BaseIDGenerator",
                "BigIntIDGenerator",
                "DefaultIDGenerator",
                "HexIDGenerator",
                "IDType",
                "IntIDGenerator",
                "ShortIDGenerator",
                "TimestampIDGenerator",
                "UUIDGenerator",
                "BackgroundTaskManager",
                "TaskMetadata",
            },
        ),
    ],
)
def test_all_is_what_we_export(module: str, expected: set[str]) -> None:
    mod = importlib.import_module(module)
    assert set(mod.__all__) == expected
    assert list(mod.__all__) == sorted(mod.__all__)
    for name in mod.__all__:
        assert getattr(mod, name) is not None


def test_every_error_code_is_registered() -> None:
    from tenxgraph.core import exceptions

    for name in exceptions.__all__:
        cls = getattr(exceptions, name)
        if isinstance(cls, type) and issubclass(cls, exceptions.TenxGraphError):
            assert cls.default_code in exceptions.ERROR_CODES, name
