"""The record of a submitted (background) run, as the stores keep it: plain data, no I/O.

Neutral like :mod:`tenxgraph.records` (imported by ``tenxgraph.core`` and ``tenxgraph.storage``,
importing neither). The runtime's view of it is :mod:`tenxgraph.core.runs`; the recovery loop
that moves a run through its statuses is :mod:`tenxgraph.core._recovery`; the user's view is the
"Background runs and workers" page (docs/how-to/background-runs.md).

Statuses (``RunRecord.status``):

* ``pending``: recorded by ``asubmit``, no worker started it yet;
* ``running``: a worker claimed it (``attempts`` counts the claims);
* ``interrupted``: it paused (``interrupt_before`` / ``interrupt_after`` / ``interrupt()``) and
  waits for its resume, which is a new run;
* ``completed``, ``error``, ``cancelled``: final.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["FINAL_STATUSES", "OPEN_STATUSES", "RUN_STATUSES", "RunRecord"]

#: Every status a run record can have.
RUN_STATUSES: tuple[str, ...] = (
    "pending",
    "running",
    "interrupted",
    "completed",
    "error",
    "cancelled",
)
#: Statuses a worker still has to act on (claim, or recover once its lease lapsed).
OPEN_STATUSES: tuple[str, ...] = ("pending", "running")
#: Statuses a run never leaves (``interrupted`` is final too: its resume is a new run).
FINAL_STATUSES: tuple[str, ...] = ("interrupted", "completed", "error", "cancelled")


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One submitted run as stored (encoded payloads; decoded by :mod:`tenxgraph.core.runs`).

    Attributes:
        run_id: the run's id (also ``config["run_id"]`` of every attempt).
        thread_id: its thread.
        owner: the submitting ``user_id`` (``"*"`` when the store does not isolate users).
        status: one of :data:`RUN_STATUSES`.
        input: the run's input, orjson bytes.
        config: the run's config (JSON-able keys only), orjson bytes.
        attempts: how many times a worker claimed the run (0 while pending).
        crashes: attempts in a row that ended with their worker gone (the lease lapsed while
            running); reaching the recovery's ``max_crashes`` marks the run ``error``.
        holder: the lease holder id of the current (or last) attempt, ``""`` before the first.
        worker: the id of the worker that made the current (or last) attempt, ``""`` before.
        last_error: the last failure (``"ErrorCode: message"``), ``""`` when none.
        output: the result (orjson bytes) once ``completed`` or ``interrupted``, else ``None``.
        created_at: submission time, UNIX seconds.
        updated_at: time of the last change, UNIX seconds.
    """

    run_id: str
    thread_id: str
    owner: str
    status: str
    input: bytes
    config: bytes
    attempts: int = 0
    crashes: int = 0
    holder: str = ""
    worker: str = ""
    last_error: str = ""
    output: bytes | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> RunRecord:
        """A record from a stored row, columns in field order (the stores' ``runs`` queries
        select them so; ``bytea`` / BLOB values may come as ``memoryview``)."""
        return cls(
            str(row[0]),
            str(row[1]),
            str(row[2]),
            str(row[3]),
            bytes(row[4]),
            bytes(row[5]),
            int(row[6]),
            int(row[7]),
            str(row[8]),
            str(row[9]),
            str(row[10]),
            None if row[11] is None else bytes(row[11]),
            float(row[12]),
            float(row[13]),
        )
