"""The run lease of the in-memory store (and the rules every store follows), no I/O.

One :class:`LeaseTable` per :class:`~tenxgraph.storage.memory.MemoryStore`; its methods run
under the store's lock, with the time passed in (UNIX seconds), so the rules are plain code:

* a run takes the lease when no one holds it (never held, released, or lapsed: ``expires_at``
  in the past) and no earlier, still-live waiter is queued; each grant increments the fence;
* a refused caller that asked to queue is registered (arrival order; a waiter not seen for
  ``lapse_s`` seconds loses its place);
* renewal and release succeed only for the current holder with the current fence;
* a fenced checkpoint write succeeds only while its fence is the current one (a holder whose
  lease lapsed may still write until another run takes over, which cannot harm anyone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tenxgraph.records import LeaseGrant

__all__ = ["Lease", "LeaseTable", "acquire_on", "peek_on"]


@dataclass(slots=True)
class Lease:
    """One thread's lease: owner scope, holder (run id, ``""`` when free), fence, expiry
    (UNIX seconds) and the queue of waiters."""

    owner: str
    holder: str = ""
    fence: int = 0
    expires_at: float = 0.0
    #: waiter id -> (arrived_at, seen_at), UNIX seconds
    waiters: dict[str, tuple[float, float]] = field(default_factory=dict)


def acquire_on(
    lease: Lease,
    owner: str,
    holder: str,
    *,
    now: float,
    ttl_s: float,
    lapse_s: float,
    queue: bool,
    thread_exists: bool,
) -> LeaseGrant | None:
    """One acquisition attempt on ``lease`` (changed in place; see ``StoreTier.lease_acquire``).

    Args:
        lease: the thread's lease as stored.
        owner: the caller's owner scope.
        holder: the caller's run id.
        now: UNIX seconds.
        ttl_s: seconds the granted lease lasts unless renewed.
        lapse_s: seconds after which a waiter not seen again loses its place.
        queue: register (or keep alive) the caller's place in the queue when refused.
        thread_exists: whether the thread has a checkpoint (a lease of another user on a
            thread id that has none, e.g. after the thread was deleted, passes to the caller
            once free; its fence keeps counting, so no old fence becomes valid again).

    Returns:
        The grant, or ``None`` when another user's lease holds the thread id (the caller
        raises forbidden).
    """
    if lease.owner != owner:
        if thread_exists or (lease.holder != "" and lease.expires_at > now):
            return None
        lease.owner = owner
        lease.waiters.clear()
    mine = lease.waiters.get(holder)
    my_arrival = mine[0] if mine is not None else float("inf")
    ahead = sum(
        1
        for wid, (arrived, seen) in lease.waiters.items()
        if wid != holder and (arrived, wid) < (my_arrival, holder) and seen > now - lapse_s
    )
    # The caller itself may be the holder: an attempt whose answer was lost, sent again.
    free = lease.holder in ("", holder) or lease.expires_at <= now
    if free and not ahead:
        lease.holder = holder
        lease.fence += 1
        lease.expires_at = now + ttl_s
        lease.waiters.pop(holder, None)
        return LeaseGrant(lease.fence, ttl_s)
    if queue and (mine is None or mine[1] <= now - lapse_s / 4):
        # A place is refreshed a few times per lapse, not at every attempt (fewer writes).
        lease.waiters[holder] = (mine[0] if mine is not None else now, now)
    # Lapsed waiters are forgotten on the way (bounded queue).
    for wid in [w for w, (_, seen) in lease.waiters.items() if seen <= now - lapse_s]:
        del lease.waiters[wid]
    return LeaseGrant(None, max(0.0, lease.expires_at - now) if not free else 0.0, ahead)


def peek_on(lease: Lease | None, holder: str, *, now: float, lapse_s: float) -> LeaseGrant:
    """What an acquisition attempt would find, changing nothing (a waiter's cheap poll).

    Returns:
        ``LeaseGrant(None, expires_in_s, ahead)``: ``expires_in_s`` is ``0.0`` when the lease
        is free (released, lapsed, or held by ``holder`` itself), ``ahead`` the live waiters
        queued before ``holder``.
    """
    if lease is None:
        return LeaseGrant(None, 0.0, 0)
    mine = lease.waiters.get(holder)
    my_arrival = mine[0] if mine is not None else float("inf")
    ahead = sum(
        1
        for wid, (arrived, seen) in lease.waiters.items()
        if wid != holder and (arrived, wid) < (my_arrival, holder) and seen > now - lapse_s
    )
    free = lease.holder in ("", holder) or lease.expires_at <= now
    return LeaseGrant(None, 0.0 if free else lease.expires_at - now, ahead)


class LeaseTable:
    """Leases of one in-process store, keyed by thread id (see the module docstring)."""

    __slots__ = ("_leases",)

    def __init__(self) -> None:
        self._leases: dict[str, Lease] = {}

    def acquire(
        self,
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
        """One acquisition attempt on the thread's lease (see :func:`acquire_on`)."""
        lease = self._leases.get(thread_id)
        if lease is None:
            lease = self._leases[thread_id] = Lease(owner=owner)
        return acquire_on(
            lease,
            owner,
            holder,
            now=now,
            ttl_s=ttl_s,
            lapse_s=lapse_s,
            queue=queue,
            thread_exists=thread_exists,
        )

    def peek(self, thread_id: str, holder: str, *, now: float, lapse_s: float) -> LeaseGrant:
        """See :func:`peek_on`."""
        return peek_on(self._leases.get(thread_id), holder, now=now, lapse_s=lapse_s)

    def renew(self, thread_id: str, holder: str, fence: int, *, now: float, ttl_s: float) -> bool:
        """Extend the holder's lease to ``now + ttl_s``; ``False`` when it is no longer the
        holder (another run took the lease)."""
        lease = self._leases.get(thread_id)
        if lease is None or lease.holder != holder or lease.fence != fence:
            return False
        lease.expires_at = now + ttl_s
        return True

    def release(self, thread_id: str, holder: str, fence: int | None) -> None:
        """Give the lease up (when ``fence`` is the current one and ``holder`` holds it) and
        withdraw ``holder``'s place in the queue, if any."""
        lease = self._leases.get(thread_id)
        if lease is None:
            return
        lease.waiters.pop(holder, None)
        if fence is not None and lease.holder == holder and lease.fence == fence:
            lease.holder = ""
            lease.expires_at = 0.0

    def fence_ok(self, thread_id: str, fence: int) -> bool:
        """Whether a write fenced with ``fence`` may commit (it is the current fence)."""
        lease = self._leases.get(thread_id)
        return lease is not None and lease.fence == fence

    def release_by_fence(self, thread_id: str, fence: int) -> None:
        """Release folded into a checkpoint write: give the lease up if ``fence`` is current."""
        lease = self._leases.get(thread_id)
        if lease is not None and lease.fence == fence:
            lease.holder = ""
            lease.expires_at = 0.0

    def live(self, thread_id: str, now: float) -> bool:
        """Whether a run holds the thread's lease at ``now`` (UNIX seconds; not lapsed)."""
        lease = self._leases.get(thread_id)
        return lease is not None and lease.holder != "" and lease.expires_at > now

    def owned_by(self, owner: str) -> list[str]:
        """Thread ids whose lease is kept under ``owner``'s scope."""
        return [tid for tid, lease in self._leases.items() if lease.owner == owner]

    def drop(self, thread_ids: list[str], owner: str | None) -> tuple[int, int]:
        """Delete the leases of ``thread_ids`` (and, with ``owner``, every lease kept under
        that owner's scope) with their queues (erasure and retention).

        Returns:
            ``(leases, waiters)`` deleted.
        """
        gone = set(thread_ids)
        if owner is not None:
            gone.update(self.owned_by(owner))
        leases = waiters = 0
        for tid in gone:
            lease = self._leases.pop(tid, None)
            if lease is not None:
                leases += 1
                waiters += len(lease.waiters)
        return leases, waiters
