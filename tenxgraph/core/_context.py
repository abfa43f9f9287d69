"""Context variables that publish the current run and tool call to nodes and tools.

The runner sets :data:`_RUN` around each node; ``ToolNode`` sets :data:`_TOOL_CALL` around each
tool. Code inside a node or tool reads them with :func:`current_run` and
:func:`current_tool_call` (e.g. to pass ``tool_call_id`` on as an idempotency key).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenxgraph.core._lease import RunLease
    from tenxgraph.records import ThreadKey
    from tenxgraph.storage.checkpointer.base import BaseCheckpointer

__all__ = ["RunContext", "ToolCallContext", "current_run", "current_tool_call"]


@dataclass(slots=True)
class RunContext:
    """The run a node executes in.

    Attributes:
        checkpointer: the graph's checkpointer.
        config: the run's (validated) config dict.
        key: the thread key (owner scope applied).
        node: the node being executed.
        replayed: ``True`` when this node execution replays one cut off by a crash or a stop.
        stats: counters the runtime keeps for this run (``ledger_hits``, ``tool_runs``...).
        nodes: the compiled graph's nodes by name (an ``Agent`` finds its ``ToolNode`` here).
        step: ``execution_meta.step`` of the node execution (count of nodes run before it).
        answers: human answers to ``interrupt()`` calls, by interrupt id.
        interrupt_seq: ``interrupt()`` calls made so far by this node execution (count).
        stream: ``True`` when the run's chunks are consumed (``astream`` / ``stream``): an
            ``Agent`` then asks its model to stream and yields the token deltas.
        graph: the compiled graph being run (its ``context_manager``, ``callback_manager``).
        validated: the run's input user messages as the graph's input validators left them
            (copies, by ``message_id``); an ``Agent`` sends these instead of validating again.
        lease: the thread's run lease while this run holds one (a multitask strategy or a
            resume), else ``None``; ``ToolNode`` checks it before every tool call.
    """

    checkpointer: BaseCheckpointer[Any]
    config: dict[str, Any]
    key: ThreadKey
    node: str = ""
    replayed: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    answers: dict[str, Any] = field(default_factory=dict)
    interrupt_seq: int = 0
    stream: bool = False
    graph: Any = None
    validated: dict[str | int, Any] = field(default_factory=dict)
    lease: RunLease | None = None


@dataclass(slots=True)
class ToolCallContext:
    """The tool call being executed.

    Attributes:
        tool_call_id: the model's id of the call; pass it on as an idempotency key.
        name: the tool's name.
        call_key: the ledger key (``tool_call_id`` qualified by the assistant message and a
            digest of the call).
        interrupt_seq: ``interrupt()`` calls made so far by this tool call (count).
        timed_out: set when the call ran past its ``tool_timeout`` (for the tool metrics).
        fence: the run lease's fencing token when the run holds a lease (checked just before
            the call), else ``None``. Hand it to a downstream system that keeps the highest
            token it has seen and refuses lower ones (Kleppmann's fencing tokens): a holder
            whose lease lapsed can then not act there even if it is still running.
        idempotency_key: the key to pass downstream: ``tool_call_id``, or, when the run asked
            for re-execution of replayed calls (``config["replay_tools"]``, time travel), a new
            key per run (``f"{tool_call_id}:replay:{run_id}"``); ``""`` is read as
            ``tool_call_id``.
    """

    tool_call_id: str
    name: str
    call_key: str
    fence: int | None = None
    interrupt_seq: int = 0
    timed_out: bool = False
    idempotency_key: str = ""


_RUN: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar(
    "tenxgraph_run", default=None
)
_TOOL_CALL: contextvars.ContextVar[ToolCallContext | None] = contextvars.ContextVar(
    "tenxgraph_tool_call", default=None
)


def current_run() -> RunContext | None:
    """The :class:`RunContext` of the node executing on this task, or ``None`` outside a run."""
    return _RUN.get()


def current_tool_call() -> ToolCallContext | None:
    """The :class:`ToolCallContext` of the tool executing on this task, or ``None``."""
    return _TOOL_CALL.get()
