"""Execution bookkeeping kept in ``AgentState.execution_meta`` and checkpointed with the state."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

__all__ = ["ExecutionState", "ExecutionStatus", "StopRequestStatus"]


class ExecutionStatus(StrEnum):
    """Where a thread's run stands.

    ``IDLE``: no run yet. ``RUNNING``: a run is under way or was cut off (crash); the checkpoint's
    ``current_node`` is the next node to execute. ``INTERRUPTED_BEFORE`` / ``INTERRUPTED_AFTER``:
    paused at a static interrupt. ``INTERRUPTED``: paused by ``interrupt()`` inside a node.
    ``STOPPED``: halted by ``stop()`` between nodes (resumable). ``COMPLETED``: reached ``END``.
    ``ERROR``: a node raised; the last checkpoint is resumable.
    """

    IDLE = "idle"
    RUNNING = "running"
    INTERRUPTED_BEFORE = "interrupted_before"
    INTERRUPTED_AFTER = "interrupted_after"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"
    COMPLETED = "completed"
    ERROR = "error"


class StopRequestStatus(StrEnum):
    """Whether a stop was requested for the running thread."""

    NONE = "none"
    STOP_REQUESTED = "stop_requested"


#: Statuses whose run is not finished: a new input first completes the run.
UNFINISHED = frozenset(
    {
        ExecutionStatus.RUNNING,
        ExecutionStatus.STOPPED,
        ExecutionStatus.ERROR,
        ExecutionStatus.INTERRUPTED_BEFORE,
        ExecutionStatus.INTERRUPTED_AFTER,
        ExecutionStatus.INTERRUPTED,
    }
)


class ExecutionState(BaseModel):
    """Framework-managed run bookkeeping (read-only for application code).

    Attributes:
        current_node: while ``RUNNING``, the next node to execute; otherwise the last node run
            (or the node paused at).
        step: node executions in the thread so far (count).
        status: :class:`ExecutionStatus`.
        run_id: id of the run that wrote this checkpoint.
        interrupt_node: the node of the pending pause, if any.
        interrupt_reason: why the run paused (``None`` when not paused).
        interrupt_data: the payload of the pending pause (``None`` when not paused).
        stop_current_execution: :class:`StopRequestStatus`.
        error: the message of the last node error (``status == ERROR``).
        internal_data: runtime scratch space (resume answers, interrupt ids), JSON only.
    """

    current_node: str = "__start__"
    step: int = 0
    status: ExecutionStatus = ExecutionStatus.IDLE
    run_id: str | None = None
    interrupt_node: str | None = None
    interrupt_reason: str | None = None
    interrupt_data: dict[str, Any] | None = None
    stop_current_execution: StopRequestStatus = StopRequestStatus.NONE
    error: str | None = None
    internal_data: dict[str, Any] = Field(default_factory=dict)

    def is_running(self) -> bool:
        """``True`` while a run is under way (or was cut off before finishing)."""
        return self.status == ExecutionStatus.RUNNING

    def is_interrupted(self) -> bool:
        """``True`` when paused at an interrupt."""
        return self.status in (
            ExecutionStatus.INTERRUPTED,
            ExecutionStatus.INTERRUPTED_BEFORE,
            ExecutionStatus.INTERRUPTED_AFTER,
        )
