"""The run lease of the SQLite store: the rules of :mod:`tenxgraph.storage._lease_memory` applied
to the ``thread_leases`` and ``lease_waiters`` rows of the file, each call inside one
``BEGIN IMMEDIATE`` transaction of the caller (so it is serialized with every other process's
lease calls and checkpoint writes on the same file).

The clock is this machine's (``time.time()``): every process sharing a SQLite file runs on it.
"""

from __future__ import annotations

import sqlite3

from tenxgraph.records import LeaseGrant
from tenxgraph.storage import _sqlite_sql as q
from tenxgraph.storage._lease_memory import Lease, acquire_on, peek_on

__all__ = ["acquire", "fence_ok", "peek", "release", "release_by_fence", "renew"]


def _load(conn: sqlite3.Connection, thread_id: str, owner: str) -> tuple[Lease, bool]:
    """The thread's lease as stored (a new one when there is no row) and whether a row was
    found."""
    row = conn.execute(q.LEASE_GET, (thread_id,)).fetchone()
    lease = (
        Lease(owner=owner)
        if row is None
        else Lease(str(row[0]), str(row[1]), int(row[2]), float(row[3]))
    )
    lease.waiters = {
        str(w): (float(a), float(seen))
        for w, a, seen in conn.execute(q.LEASE_WAITERS, (thread_id,)).fetchall()
    }
    return lease, row is not None


def peek(
    conn: sqlite3.Connection, thread_id: str, holder: str, *, now: float, lapse_s: float
) -> LeaseGrant:
    """What an acquisition attempt would find, read-only (see ``peek_on``)."""
    lease, found = _load(conn, thread_id, "")
    return peek_on(lease if found else None, holder, now=now, lapse_s=lapse_s)


def acquire(
    conn: sqlite3.Connection,
    thread_id: str,
    owner: str,
    holder: str,
    *,
    now: float,
    ttl_s: float,
    lapse_s: float,
    queue: bool,
    thread_exists: bool,
) -> LeaseGrant | None:
    """One acquisition attempt (see :func:`tenxgraph.storage._lease_memory.acquire_on`);
    ``None`` when another user's lease holds the thread id."""
    lease, found = _load(conn, thread_id, owner)
    before = (lease.owner, lease.holder, lease.fence, lease.expires_at, dict(lease.waiters))
    grant = acquire_on(
        lease,
        owner,
        holder,
        now=now,
        ttl_s=ttl_s,
        lapse_s=lapse_s,
        queue=queue,
        thread_exists=thread_exists,
    )
    if grant is None:
        return None
    if not found or (lease.owner, lease.holder, lease.fence, lease.expires_at) != before[:4]:
        conn.execute(
            q.LEASE_PUT, (thread_id, lease.owner, lease.holder, lease.fence, lease.expires_at)
        )
    if lease.waiters != before[4]:
        conn.execute(q.LEASE_WAITERS_CLEAR, (thread_id,))
        conn.executemany(
            q.LEASE_WAITER_PUT,
            [(thread_id, w, a, seen) for w, (a, seen) in lease.waiters.items()],
        )
    return grant


def renew(
    conn: sqlite3.Connection, thread_id: str, holder: str, fence: int, *, now: float, ttl_s: float
) -> bool:
    """Extend the holder's lease to ``now + ttl_s``; ``False`` when another run took it."""
    return conn.execute(q.LEASE_RENEW, (now + ttl_s, thread_id, holder, fence)).rowcount == 1


def release(conn: sqlite3.Connection, thread_id: str, holder: str, fence: int | None) -> None:
    """Give the lease of ``fence`` up (when current) and withdraw ``holder`` from the queue."""
    conn.execute(q.LEASE_WAITER_DELETE, (thread_id, holder))
    if fence is not None:
        conn.execute(q.LEASE_RELEASE, (thread_id, holder, fence))


def fence_ok(conn: sqlite3.Connection, thread_id: str, fence: int) -> bool:
    """Whether a write fenced with ``fence`` may commit (it is the thread's current fence)."""
    row = conn.execute(q.LEASE_FENCE, (thread_id,)).fetchone()
    return row is not None and int(row[0]) == fence


def release_by_fence(conn: sqlite3.Connection, thread_id: str, fence: int) -> None:
    """The release folded into a run's last checkpoint write (same transaction)."""
    conn.execute(q.LEASE_RELEASE_BY_FENCE, (thread_id, fence))
