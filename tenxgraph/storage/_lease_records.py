"""What a store answers about a thread's run lease (no I/O; shared by every tier).

The lease itself (DESIGN section 3, "One run per thread at a time") is kept by the source of
truth: a row per thread with the current ``holder`` (a run id, ``""`` when released), a
``fence`` (incremented by every acquisition, checked by every fenced checkpoint write) and
``expires_at`` (UNIX seconds on the store's clock: Postgres's for Postgres, this machine's
for SQLite and memory). Runs waiting for it (``enqueue``, ``interrupt``, ``rollback`` and
resumes) register as waiters, ordered by arrival, and keep their registration alive by
retrying; a waiter not seen for ``lapse_s`` seconds no longer holds its place.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LeaseGrant"]


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """The answer of one acquisition attempt.

    Attributes:
        fence: the fencing token granted to the caller, or ``None`` when the lease is held by
            another run (or an earlier waiter goes first).
        expires_in_s: when granted, seconds until the caller's lease lapses unless renewed;
            when refused, seconds until the current holder's lease lapses unless renewed
            (``0.0`` when it already lapsed and only the queue holds the caller back; ``None``
            when the store could not tell).
        ahead: when refused, the number of live waiters queued before the caller (``0``: the
            caller is next, so it retries sooner); ``None`` when granted or unknown.
    """

    fence: int | None
    expires_in_s: float | None
    ahead: int | None = None
