"""``MemoryStore``: the in-process source of truth (:class:`~tenxgraph.storage.base.StoreTier`).

Everything is held as encoded bytes, exactly as a durable tier would hold it, so a record read
back is a private copy that no caller can mutate behind the store's back. Per thread the store
keeps

* its versions (``version -> _Version``: values bytes, ranges, next seq, status, time),
* its message rows (``seq -> bytes``), written once and shared by every version whose ranges
  cover them,
* its ledger rows, owner and metadata,

and, apart from the threads (a stop may be requested before a thread's first checkpoint), each
user's newest stop request per thread id, with its time.

A write is ``O(k)`` for ``k`` new messages whatever the thread's length: the compare-and-swap
is a comparison of two integers, the rows go into the thread's dict, and pruning uses a
sliding-window minimum over the kept versions' smallest seqs (amortized ``O(1)`` per write) to
find the message rows no kept version can reach any more.

Concurrency: every operation runs its critical section under one ``threading.Lock`` that is
never held across an ``await`` (the sections are plain dict work, microseconds long), so the
store is safe from several tasks, several event loops and several OS threads at once. Each
operation first yields to the event loop (``tenxgraph.core._aio.checkpoint``:
``asyncio.sleep(0)`` on asyncio, anyio's checkpoint otherwise), as real I/O would, so a tight
loop of store calls cannot starve other tasks and honours cancellation. The checkpoint reads
and writes of the step path (``read``, ``read_since``, ``write``, ``current_version``) yield
when :data:`YIELD_EVERY_S` or more has passed since this store last yielded: a round trip
through the event loop costs ~10 microseconds under a graph run's coroutine stack, as much as
the write itself, and once per millisecond keeps other tasks and cancellation at most that
late.

Telemetry: an INTERNAL span per checkpoint read and write, version check, history read and
ledger access (``tenxgraph.cache.tier = "memory"``; no ``db.*`` attributes: this is not a
database client). Without an SDK the spans are the API's no-ops and no attribute dict is built.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from tenxgraph.core._aio import checkpoint
from tenxgraph.core.exceptions import (
    LedgerWriteError,
    ResourceNotFoundError,
    StorageError,
    fence_lost,
    forbidden,
    stale,
)
from tenxgraph.records import (
    CheckpointWrite,
    LeaseGrant,
    LedgerEntry,
    Range,
    StoredCheckpoint,
    ThreadInfo,
    ThreadKey,
    ranges_extend,
    tail_seqs,
)
from tenxgraph.run_records import RunRecord
from tenxgraph.storage import serde
from tenxgraph.storage._lease_memory import LeaseTable
from tenxgraph.storage.base import threads_from_rows
from tenxgraph.storage.retention import ERASE_TABLES, Removal, victims
from tenxgraph.storage.runs import RunTable
from tenxgraph.telemetry import ATTR, SPAN, add_conflict_event, enabled, span

__all__ = ["MemoryStore", "ledger_missing_thread", "min_seq_of", "thread_missing"]

_EMPTY_METADATA = serde.dumps({})

#: Seconds of store work after which a step-path operation yields to the event loop (see the
#: module docstring); the other operations always yield.
YIELD_EVERY_S = 0.001


def min_seq_of(ranges: tuple[Range, ...], next_seq: int) -> int:
    """The smallest message seq a version references.

    Args:
        ranges: the version's ``[start, end)`` seq ranges, in list order.
        next_seq: the version's next unused seq (returned when ``ranges`` is empty, because such
            a version references no row at all).

    Returns:
        ``min(start)`` over the non-empty ranges, else ``next_seq``. Message rows below the
        minimum of this value over every kept version are unreachable and may be deleted.
    """
    return min((s for s, e in ranges if e > s), default=next_seq)


@dataclass(slots=True)
class _Version:
    values: bytes
    ranges: tuple[Range, ...]
    next_seq: int
    status: str
    created_at: float


@dataclass(slots=True)
class _Thread:
    owner: str
    created_at: float
    updated_at: float
    status: str = ""
    latest: int = 0
    first_kept: int = 1
    versions: dict[int, _Version] = dataclasses.field(default_factory=dict)
    rows: dict[int, bytes] = dataclasses.field(default_factory=dict)
    #: every seq below it has been pruned (rows below it no longer exist)
    row_floor: int = 1
    #: sliding-window minimum of kept versions' min seqs: ``(version, min_seq)``, min_seq
    #: strictly increasing from left to right; the left end is the window's minimum.
    window: deque[tuple[int, int]] = dataclasses.field(default_factory=deque)
    ledger: dict[str, LedgerEntry] = dataclasses.field(default_factory=dict)
    metadata: bytes = _EMPTY_METADATA
    #: the thread's own retention override in seconds (``None``: the checkpointer's)
    ttl_s: float | None = None

    def record(self, thread_id: str, version: int, with_messages: bool) -> StoredCheckpoint:
        v = self.versions[version]
        messages = None
        if with_messages:
            rows = self.rows
            messages = [rows[seq] for s, e in v.ranges for seq in range(s, e)]
        return StoredCheckpoint(
            thread_id=thread_id,
            user_id=self.owner,
            version=version,
            values=v.values,
            ranges=v.ranges,
            messages=messages,
            next_seq=v.next_seq,
            status=v.status,
            created_at=v.created_at,
        )

    def prune(self, history_limit: int | None) -> int:
        """Drop versions older than the newest ``history_limit`` and unreachable rows."""
        if not history_limit or history_limit <= 0:
            return 0
        keep_from = self.latest - history_limit + 1
        dropped = 0
        while self.first_kept < keep_from:
            self.versions.pop(self.first_kept, None)
            self.first_kept += 1
            dropped += 1
        if not dropped:
            return 0
        window = self.window
        while window and window[0][0] < self.first_kept:
            window.popleft()
        floor = window[0][1]
        if floor > self.row_floor:
            rows = self.rows
            if floor - self.row_floor <= len(rows):
                for seq in range(self.row_floor, floor):
                    rows.pop(seq, None)
            else:  # a large seq gap: cheaper to scan the rows that exist
                self.rows = {s: d for s, d in rows.items() if s >= floor}
            self.row_floor = floor
        return dropped


class MemoryStore:
    """In-memory source of truth: every :class:`~tenxgraph.storage.base.StoreTier` guarantee
    that applies to one process (compare-and-swap, versions without gaps, history pruning, owner
    isolation, ledger, stop flags), with no durability across restarts.

    The store starts empty; ``asetup`` and ``aclose`` are no-ops kept for the protocol. Data
    lives as long as the object: share one instance between the checkpointers (or graphs) that
    must see the same threads.
    """

    #: tier name used in telemetry.
    name = "memory"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[str, _Thread] = {}
        #: thread id -> owner -> time (UNIX seconds) of that user's newest stop request
        self._stops: dict[str, dict[str, float]] = {}
        #: the run leases (docs/how-to/run-lease.md), under the same lock as the threads
        self._leases = LeaseTable()
        #: the submitted runs (tenxgraph.storage.runs), under the same lock
        self._runs = RunTable()
        #: ``time.monotonic()`` of this store's last yield to the event loop
        self._yielded_at = 0.0

    def __repr__(self) -> str:
        return f"MemoryStore(threads={len(self._threads)})"

    # -- lifecycle -------------------------------------------------------------------------------
    async def asetup(self) -> None:
        """No schema to create; present for the protocol (idempotent)."""
        await checkpoint()

    async def aclose(self) -> None:
        """Nothing to release; the data stays readable (idempotent)."""
        await checkpoint()

    async def _pace(self) -> None:
        """Yield to the event loop when :data:`YIELD_EVERY_S` has passed since the last yield
        (the step path's operations; see the module docstring)."""
        now = time.monotonic()
        if now - self._yielded_at >= YIELD_EVERY_S:
            self._yielded_at = now
            await checkpoint()

    def _attrs(self, thread_id: str) -> dict[str, Any] | None:
        """Initial span attributes, or ``None`` (no dict built) when tracing is off."""
        if not enabled():
            return None
        return {ATTR.TIER: self.name, ATTR.THREAD_ID: thread_id}

    # -- owner scope helpers ---------------------------------------------------------------------
    def _owned(self, key: ThreadKey) -> _Thread | None:
        """The thread when it exists and ``key.user_id`` owns it (reads)."""
        t = self._threads.get(key.thread_id)
        if t is None or t.owner != key.user_id:
            return None
        return t

    def _mine_or_raise(self, key: ThreadKey) -> _Thread | None:
        """The thread (``None`` when missing); raises forbidden when another user owns it."""
        t = self._threads.get(key.thread_id)
        if t is not None and t.owner != key.user_id:
            raise forbidden(key.thread_id)
        return t

    def _existing(self, key: ThreadKey) -> _Thread:
        """The caller's thread, to change it; raises when missing or another user's."""
        t = self._mine_or_raise(key)
        if t is None:
            raise thread_missing(key.thread_id)
        return t

    # -- checkpoints -----------------------------------------------------------------------------
    async def read(
        self, key: ThreadKey, version: int | None = None, *, with_messages: bool = True
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, or the given kept version.

        Args:
            key: thread and owner scope.
            version: a kept version number, or ``None`` for the latest.
            with_messages: fill ``messages`` (list order, ``len == ranges_len(ranges)``);
                ``False`` leaves it ``None`` and costs ``O(1)``.

        Returns:
            A private copy of the record, or ``None`` when the thread or version does not exist
            or another user owns the thread (exactly as if it did not exist).
        """
        await self._pace()
        with span(SPAN.CHECKPOINT_READ, attributes=self._attrs(key.thread_id)) as sp:
            with self._lock:
                t = self._owned(key)
                v = None if t is None else (t.latest if version is None else version)
                rec = (
                    t.record(key.thread_id, v, with_messages)
                    if t is not None and v in t.versions
                    else None
                )
            sp.set_attribute(ATTR.HIT, rec is not None)
            if rec is not None:
                sp.set_attribute(ATTR.VERSION, rec.version)
            return rec

    async def read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, read against the cached copy ``known`` (see
        :meth:`_read_since`)."""
        return await self._read_since(key, known)

    async def _read_since(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The latest version of ``key``'s thread, read against the cached copy ``known``.

        Args:
            key: thread and owner scope.
            known: a cache's copy of some version of the thread, or ``None`` (a full read).

        Returns:
            ``known`` itself when it is still the latest version (same ``version`` and
            ``created_at``); else the latest version with its complete message list, reusing
            ``known.messages`` (and ``known.decoded``) when the thread only appended since;
            ``None`` when the thread does not exist or another user owns it.
        """
        await self._pace()
        if not enabled():  # no span to record: the read alone
            with self._lock:
                return self._read_since_locked(key, known)
        with span(SPAN.CHECKPOINT_READ, attributes=self._attrs(key.thread_id)) as sp:
            with self._lock:
                rec = self._read_since_locked(key, known)
            sp.set_attribute(ATTR.HIT, rec is not None)
            if rec is not None:
                sp.set_attribute(ATTR.VERSION, rec.version)
            return rec

    def _read_since_locked(
        self, key: ThreadKey, known: StoredCheckpoint | None
    ) -> StoredCheckpoint | None:
        """The body of :meth:`_read_since`, under the lock."""
        t = self._owned(key)
        cur = None if t is None else t.versions.get(t.latest)
        if t is None or cur is None:
            return None
        old = None if known is None else t.versions.get(known.version)
        if known is None or old is None or old.created_at != known.created_at:
            return t.record(key.thread_id, t.latest, True)
        if t.latest == known.version:
            return known
        if known.messages is None or not ranges_extend(old.ranges, cur.ranges):
            return t.record(key.thread_id, t.latest, True)
        rows = t.rows
        tail = [rows[seq] for seq in tail_seqs(old.ranges, cur.ranges)]
        return StoredCheckpoint(
            thread_id=key.thread_id,
            user_id=t.owner,
            version=t.latest,
            values=cur.values,
            ranges=cur.ranges,
            messages=known.messages + tail,
            next_seq=cur.next_seq,
            status=cur.status,
            created_at=cur.created_at,
            decoded=known.decoded,
        )

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number, or ``None`` when missing or owned by another user."""
        await self._pace()
        with span(SPAN.CURRENT_VERSION, attributes=self._attrs(key.thread_id)):
            with self._lock:
                t = self._owned(key)
                return None if t is None else t.latest

    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` as version ``w.expected_version + 1``.

        Inserts the version and ``w.new_messages`` (``O(k)`` for ``k`` rows), then prunes
        versions older than the newest ``w.history_limit`` and the message rows whose seq is
        below the smallest range start of every kept version. All or nothing.

        Returns:
            The new record, ``messages=None``.

        Raises:
            StaleStateError: ``STORAGE_CONFLICT_000`` when the thread's latest version is not
                ``w.expected_version`` (``current_version`` is ``None`` for a missing thread);
                nothing of ``w`` is stored.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread;
                ``STORAGE_000`` when a new row reuses a stored seq (a caller bug).
        """
        now = time.monotonic()  # self._pace(), inline: one coroutine less per step
        if now - self._yielded_at >= YIELD_EVERY_S:
            self._yielded_at = now
            await checkpoint()
        if not enabled():  # no span to record: the write alone
            with self._lock:
                self._apply(w)
            return w.to_record(None)
        attrs = self._attrs(w.thread_id)
        if attrs is not None:
            attrs[ATTR.VERSION] = w.expected_version + 1
            attrs[ATTR.MESSAGES_WRITTEN] = len(w.new_messages)
            attrs[ATTR.BYTES] = len(w.values) + sum(len(d) for _, d in w.new_messages)
        with span(SPAN.CHECKPOINT_WRITE, attributes=attrs) as sp:
            try:
                with self._lock:
                    self._apply(w)
            except StorageError as exc:
                if exc.error_code == "STORAGE_CONFLICT_000":
                    add_conflict_event(
                        sp, w.thread_id, w.expected_version, exc.context.get("current_version")
                    )
                raise
        return w.to_record(None)

    def _apply(self, w: CheckpointWrite) -> None:
        t = self._threads.get(w.thread_id)
        if t is None:
            if w.expected_version != 0:
                raise stale(w.thread_id, w.expected_version, None, w.fence)
        elif t.owner != w.user_id:
            raise forbidden(w.thread_id)
        elif t.latest != w.expected_version:
            raise stale(w.thread_id, w.expected_version, t.latest, w.fence)
        if w.fence is not None and not self._leases.fence_ok(w.thread_id, w.fence):
            # Another run took the lease since this one did: refused like a lost CAS.
            raise fence_lost(w.thread_id, w.expected_version, w.fence)
        # Validate every row before touching anything (all or nothing).
        new_rows = w.new_messages
        if len(new_rows) == 1:  # a step's usual write: one new message
            reused = t is not None and new_rows[0][0] in t.rows
        else:
            seqs = {seq for seq, _ in new_rows}
            reused = len(seqs) != len(new_rows) or (
                t is not None and not t.rows.keys().isdisjoint(seqs)
            )
        if reused:
            raise StorageError(
                f"checkpoint write for thread {w.thread_id!r} reuses a stored message seq; "
                "compute writes with tenxgraph.storage._diff from the latest read",
                context={"thread_id": w.thread_id},
            )
        if t is None:
            t = _Thread(owner=w.user_id, created_at=w.created_at, updated_at=w.created_at)
            self._threads[w.thread_id] = t
        new_version = w.expected_version + 1
        rows = t.rows
        for seq, data in new_rows:
            rows[seq] = bytes(data)
        if len(w.ranges) == 1:  # the usual shape: one contiguous range (no comprehension)
            ((s0, e0),) = w.ranges
            ranges: tuple[Range, ...] = ((int(s0), int(e0)),)
        else:
            ranges = tuple([(int(s), int(e)) for s, e in w.ranges])
        t.versions[new_version] = _Version(
            bytes(w.values), ranges, w.next_seq, w.status, w.created_at
        )
        if len(ranges) == 1:  # the usual shape: one contiguous range
            start, end = ranges[0]
            ms = start if end > start else w.next_seq
        else:
            ms = min_seq_of(ranges, w.next_seq)
        window = t.window
        while window and window[-1][1] >= ms:
            window.pop()
        window.append((new_version, ms))
        t.latest = new_version
        t.status = w.status
        t.updated_at = w.created_at
        t.prune(w.history_limit)
        if w.release and w.fence is not None:
            self._leases.release_by_fence(w.thread_id, w.fence)

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages.

        Args:
            key: thread and owner scope.
            limit: at most this many versions (``None``: all kept; ``<= 0``: none).
            before: only versions ``< before`` when given.

        Returns:
            Records newest first; ``[]`` when the thread is missing or owned by another user.
        """
        await checkpoint()
        with span(SPAN.HISTORY, attributes=self._attrs(key.thread_id)), self._lock:
            t = self._owned(key)
            if t is None:
                return []
            top = t.latest if before is None else min(t.latest, before - 1)
            out: list[StoredCheckpoint] = []
            for v in range(top, t.first_kept - 1, -1):
                if limit is not None and len(out) >= limit:
                    break
                out.append(t.record(key.thread_id, v, True))
            return out

    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete every version, message row, ledger row and flag of the thread.

        Returns:
            ``True`` if the thread existed.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await checkpoint()
        with self._lock:
            if self._mine_or_raise(key) is None:
                return False
            del self._threads[key.thread_id]
            self._stops.pop(key.thread_id, None)
            return True

    async def list_threads(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ThreadInfo]:
        """Threads owned by ``user_id`` (``"*"``: every thread), most recently updated first
        (ties by ``thread_id``), paginated by ``offset`` and ``limit`` (counts)."""
        await checkpoint()
        with self._lock:
            rows = [
                (tid, t.owner, t.latest, t.status, t.created_at, t.updated_at, t.metadata)
                for tid, t in self._threads.items()
                if user_id == "*" or t.owner == user_id
            ]
        rows.sort(key=lambda r: (-r[5], r[0]))
        offset = max(offset or 0, 0)
        rows = rows[offset : None if limit is None else offset + max(limit, 0)]
        return threads_from_rows(rows)

    async def set_thread_metadata(self, key: ThreadKey, metadata: dict[str, Any]) -> None:
        """Replace the application metadata of an existing thread.

        Args:
            key: thread and owner scope.
            metadata: JSON-compatible dict (the tagged types of :mod:`serde` are kept too).

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            SerializationError: ``STORAGE_SERIALIZATION_000`` for a value that cannot be stored.
        """
        data = serde.dumps(dict(metadata), "$.metadata")
        await checkpoint()
        with self._lock:
            self._existing(key).metadata = data

    # -- ledger ----------------------------------------------------------------------------------
    async def ledger_get(self, key: ThreadKey, call_key: str) -> LedgerEntry | None:
        """The recorded execution for ``call_key``, or ``None`` (also for a missing thread).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await checkpoint()
        with span(SPAN.LEDGER_READ, attributes=self._attrs(key.thread_id)), self._lock:
            t = self._mine_or_raise(key)
            entry = None if t is None else t.ledger.get(call_key)
            return None if entry is None else dataclasses.replace(entry)

    async def ledger_put(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Record ``entry`` unless ``entry.call_key`` is recorded already; return the winner.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
            LedgerWriteError: ``STORAGE_LEDGER_001`` when the thread does not exist (a tool call
                is recorded only on a thread with a durable checkpoint).
        """
        await checkpoint()
        with span(SPAN.LEDGER_WRITE, attributes=self._attrs(key.thread_id)), self._lock:
            t = self._mine_or_raise(key)
            if t is None:
                raise ledger_missing_thread(key, entry)
            won = t.ledger.setdefault(entry.call_key, dataclasses.replace(entry))
            return dataclasses.replace(won)

    async def ledger_count(self, key: ThreadKey) -> int:
        """Number of ledger rows of the thread (0 when missing).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await checkpoint()
        with self._lock:
            t = self._mine_or_raise(key)
            return 0 if t is None else len(t.ledger)

    # -- run leases ------------------------------------------------------------------------------
    async def lease_acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the thread's run lease (see ``StoreTier.lease_acquire``).

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await checkpoint()
        return self._acquire(key, holder, ttl_s=ttl_s, lapse_s=lapse_s, queue=queue)

    def _acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        with self._lock:
            t = self._mine_or_raise(key)
            grant = self._leases.acquire(
                key.thread_id,
                key.user_id,
                holder,
                now=time.time(),
                ttl_s=ttl_s,
                lapse_s=lapse_s,
                queue=queue,
                thread_exists=t is not None,
            )
        if grant is None:
            raise forbidden(key.thread_id)
        return grant

    async def lease_read(
        self,
        key: ThreadKey,
        known: StoredCheckpoint | None,
        holder: str,
        *,
        ttl_s: float,
        lapse_s: float,
        queue: bool,
    ) -> tuple[LeaseGrant, StoredCheckpoint | None]:
        """One attempt to take the thread's run lease and, when granted, the thread's latest
        version read against ``known`` (see ``StoreTier.lease_read``). The read follows the
        grant, so it sees every write committed before it.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await checkpoint()
        grant = self._acquire(key, holder, ttl_s=ttl_s, lapse_s=lapse_s, queue=queue)
        if grant.fence is None:
            return grant, None
        return grant, await self._read_since(key, known)

    async def lease_peek(self, key: ThreadKey, holder: str, *, lapse_s: float) -> LeaseGrant:
        """What an acquisition attempt would find, changing nothing."""
        await checkpoint()
        with self._lock:
            return self._leases.peek(key.thread_id, holder, now=time.time(), lapse_s=lapse_s)

    async def lease_renew(self, key: ThreadKey, holder: str, fence: int, ttl_s: float) -> bool:
        """Extend the holder's lease by ``ttl_s`` seconds from now; ``False`` once lost."""
        await checkpoint()
        with self._lock:
            return self._leases.renew(key.thread_id, holder, fence, now=time.time(), ttl_s=ttl_s)

    async def lease_release(self, key: ThreadKey, holder: str, fence: int | None) -> None:
        """Give the lease of ``fence`` up and withdraw ``holder`` from the queue."""
        await checkpoint()
        with self._lock:
            self._leases.release(key.thread_id, holder, fence)

    # -- stop flags ------------------------------------------------------------------------------
    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record (``requested``) or withdraw the caller's stop request for the thread.

        A request is kept with its time, ``at`` (UNIX seconds, default now; the newest of
        several wins), also for a thread without a checkpoint yet.

        Raises:
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        when = float(time.time() if at is None else at)
        await checkpoint()
        with self._lock:
            self._mine_or_raise(key)
            if requested:
                mine = self._stops.setdefault(key.thread_id, {})
                mine[key.user_id] = max(when, mine.get(key.user_id, when))
            else:
                mine = self._stops.get(key.thread_id, {})
                mine.pop(key.user_id, None)
                if not mine:
                    self._stops.pop(key.thread_id, None)

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request for the thread, made at or after ``since``
        (UNIX seconds) when given (``False`` when another user owns the thread)."""
        await checkpoint()
        with self._lock:
            t = self._threads.get(key.thread_id)
            if t is not None and t.owner != key.user_id:
                return False
            requested_at = self._stops.get(key.thread_id, {}).get(key.user_id)
            return requested_at is not None and (since is None or requested_at >= since)

    # -- time travel (tenxgraph.storage._fork) ------------------------------------------------
    # -- key rotation (tenxgraph.storage._rotate) ------------------------------------------------
    async def rotate_page(
        self,
        table: str,
        after: tuple[str, int | str] | None,
        limit: int,
        header: bytes | None,
        older_than: float,
    ) -> list[tuple[str, str, int | str, bytes]]:
        """See :meth:`tenxgraph.storage._rotate.RotatableStore.rotate_page`."""
        await checkpoint()
        out: list[tuple[str, str, int | str, bytes]] = []
        with self._lock:
            if table.startswith("runs."):
                return self._runs.payloads(table.removeprefix("runs."), after, header)[:limit]
            for tid in sorted(self._threads):
                t = self._threads[tid]
                rows: list[tuple[int | str, bytes]]
                if table == "checkpoints":
                    rows = [
                        (v, c.values) for v, c in t.versions.items() if c.created_at < older_than
                    ]
                elif table == "messages":
                    rows = list(t.rows.items())
                else:
                    rows = [(k, e.result) for k, e in t.ledger.items()]
                for pos, blob in sorted(rows, key=lambda r: r[0]):
                    if after is not None and (tid, pos) <= after:
                        continue
                    if header is not None and blob.startswith(header):
                        continue
                    out.append((tid, t.owner, pos, blob))
                    if len(out) == limit:
                        return out
        return out

    async def rotate_swap(self, table: str, rows: list[tuple[str, int | str, bytes, bytes]]) -> int:
        """See :meth:`tenxgraph.storage._rotate.RotatableStore.rotate_swap`."""
        await checkpoint()
        done = 0
        with self._lock:
            for tid, pos, old, new in rows:
                if table.startswith("runs."):
                    column = table.removeprefix("runs.")
                    done += self._runs.swap_payload(column, tid, str(pos), old, new)
                    continue
                t = self._threads.get(tid)
                if t is None:
                    continue
                if table == "checkpoints":
                    c = t.versions.get(int(pos))
                    if c is not None and c.values == old:
                        t.versions[int(pos)] = dataclasses.replace(c, values=new)
                        done += 1
                elif table == "messages":
                    if t.rows.get(int(pos)) == old:
                        t.rows[int(pos)] = new
                        done += 1
                else:
                    e = t.ledger.get(str(pos))
                    if e is not None and e.result == old:
                        t.ledger[str(pos)] = dataclasses.replace(e, result=new)
                        done += 1
        return done

    async def kept_versions(self, key: ThreadKey) -> tuple[int, int] | None:
        """``(oldest kept, latest)`` version of the thread, or ``None`` when missing or owned
        by another user."""
        await checkpoint()
        with self._lock:
            t = self._owned(key)
            return None if t is None else (t.first_kept, t.latest)

    async def fork(
        self,
        src: ThreadKey,
        version: int,
        w: CheckpointWrite,
        copy: tuple[Range, ...],
        metadata: bytes,
    ) -> StoredCheckpoint:
        """Create thread ``w.thread_id`` at version 1 from ``w``, sharing the message rows of
        ``copy`` (seq ranges of version ``version`` of ``src``) and copying ``src``'s ledger
        entries; ``w.new_messages`` are the fork's own new rows, ``metadata`` (encoded JSON
        object) its thread metadata. All or nothing.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when ``src`` (for its owner) or
                its version ``version`` is not kept (``context["oldest_kept"]``).
            StaleStateError: ``STORAGE_CONFLICT_000`` when thread ``w.thread_id`` exists.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns ``w.thread_id``.
        """
        from tenxgraph.storage._fork import target_exists, version_missing

        await checkpoint()
        with self._lock:
            s = self._owned(src)
            if s is None or version not in s.versions:
                kept = None if s is None else (s.first_kept, s.latest)
                raise version_missing(src.thread_id, version, *(kept or (None, None)))
            t = self._threads.get(w.thread_id)
            if t is not None:
                if t.owner != w.user_id:
                    raise forbidden(w.thread_id)
                raise target_exists(w.thread_id, t.latest)
            t = _Thread(owner=w.user_id, created_at=w.created_at, updated_at=w.created_at)
            src_rows = s.rows
            t.rows = {seq: src_rows[seq] for a, b in copy for seq in range(a, b)}
            t.rows.update((seq, bytes(data)) for seq, data in w.new_messages)
            t.versions[1] = _Version(
                bytes(w.values), tuple(w.ranges), w.next_seq, w.status, w.created_at
            )
            t.window.append((1, min_seq_of(tuple(w.ranges), w.next_seq)))
            t.latest, t.status = 1, w.status
            t.ledger = dict(s.ledger)  # entries are never mutated in place
            t.metadata = bytes(metadata)
            self._threads[w.thread_id] = t
        return w.to_record(None)

    # -- erasure and retention (tenxgraph.storage.retention) ------------------------------------
    async def erase_owner(
        self, owner: str, *, by_owner: bool, thread_ids: list[str] | tuple[str, ...] = ()
    ) -> Removal:
        """Delete every row of ``owner``'s threads (with ``by_owner``: every thread it owns,
        and every stop request, lease and run it holds elsewhere; plus ``thread_ids``), in one
        critical section (see :mod:`tenxgraph.storage.retention`).

        Returns:
            The removed thread ids and the rows deleted per table (a message, version or
            ledger entry counts as one row, as in the durable stores).
        """
        await checkpoint()
        with self._lock:
            cand = set(thread_ids)
            if by_owner:
                cand.update(tid for tid, t in self._threads.items() if t.owner == owner)
                cand.update(self._runs.threads_of(owner))
                cand.update(tid for tid, st in self._stops.items() if owner in st)
                cand.update(self._leases.owned_by(owner))
            owners = {tid: self._threads[tid].owner for tid in cand if tid in self._threads}
            ids = victims(cand, owners, owner)
            return self._remove_locked(ids, owner if by_owner else None)

    def _remove_locked(self, ids: list[str], owner: str | None) -> Removal:
        """Delete every row of ``ids`` (and, with ``owner``, the rows ``owner`` holds on other
        thread ids), under the lock; the counts of :meth:`erase_owner`."""
        rows = dict.fromkeys(ERASE_TABLES, 0)
        for tid in ids:
            t = self._threads.pop(tid, None)
            if t is not None:
                rows["threads"] += 1
                rows["checkpoints"] += len(t.versions)
                rows["messages"] += len(t.rows)
                rows["tool_executions"] += len(t.ledger)
            rows["stop_requests"] += len(self._stops.pop(tid, {}))
        if owner is not None:
            for tid in list(self._stops):
                if self._stops[tid].pop(owner, None) is not None:
                    rows["stop_requests"] += 1
                if not self._stops[tid]:
                    del self._stops[tid]
        rows["thread_leases"], rows["lease_waiters"] = self._leases.drop(ids, owner)
        rows["runs"] = self._runs.drop(ids, owner)
        return Removal(thread_ids=tuple(ids), rows=rows)

    async def sweep_idle(self, now: float, default_ttl_s: float | None, limit: int) -> Removal:
        """Delete up to ``limit`` threads idle longer than their TTL (their own ``ttl_s``, else
        ``default_ttl_s``; ``None``: no default) at ``now`` (UNIX seconds), oldest first,
        except those holding a live run lease or an open submitted run (checked on the real
        clock), with every row of them.

        Returns:
            The removed thread ids with their owners, and the rows deleted per table.
        """
        await checkpoint()
        default = math.inf if default_ttl_s is None else default_ttl_s
        clock = time.time()
        with self._lock:
            idle = sorted(
                (t.updated_at, tid)
                for tid, t in self._threads.items()
                if t.updated_at < now - (default if t.ttl_s is None else t.ttl_s)
                and not self._leases.live(tid, clock)
                and not self._runs.open_on(tid)
            )[: max(limit, 0)]
            ids = sorted(tid for _, tid in idle)
            owners = tuple(self._threads[tid].owner for tid in ids)
            removed = self._remove_locked(ids, None)
        return Removal(thread_ids=removed.thread_ids, rows=removed.rows, owners=owners)

    async def set_thread_ttl(self, key: ThreadKey, ttl_s: float | None) -> None:
        """Set (``None``: clear) the thread's own retention override, in seconds.

        Raises:
            ResourceNotFoundError: ``STORAGE_NOT_FOUND_000`` when the thread does not exist.
            StorageError: ``STORAGE_FORBIDDEN_001`` when another user owns the thread.
        """
        await checkpoint()
        with self._lock:
            self._existing(key).ttl_s = ttl_s

    async def get_thread_ttl(self, key: ThreadKey) -> tuple[bool, float | None]:
        """``(exists, override)``: whether the caller's thread exists, and its own retention
        override in seconds (``None``: none)."""
        await checkpoint()
        with self._lock:
            t = self._owned(key)
            return (False, None) if t is None else (True, t.ttl_s)

    # -- submitted runs (tenxgraph.storage.runs.RunStore) ---------------------------------------
    async def run_insert(self, key: ThreadKey, record: RunRecord) -> RunRecord:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_insert`."""
        await checkpoint()
        with self._lock:
            t = self._threads.get(key.thread_id)
            return self._runs.insert(key, record, None if t is None else t.owner)

    async def run_get(self, key: ThreadKey, run_id: str) -> RunRecord | None:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_get`."""
        await checkpoint()
        with self._lock:
            return self._runs.get(key, run_id)

    async def run_list(
        self, user_id: str, *, status: str = "", thread_id: str = "", limit: int = 100
    ) -> list[RunRecord]:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_list`."""
        await checkpoint()
        with self._lock:
            return self._runs.listing(user_id, status, thread_id, limit)

    async def run_open(self, limit: int) -> list[RunRecord]:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_open`."""
        await checkpoint()
        with self._lock:
            return self._runs.open_runs(limit)

    async def run_update(
        self, record: RunRecord, *, expect_status: str, expect_attempts: int, notify: bool = False
    ) -> bool:
        """See :meth:`tenxgraph.storage.runs.RunStore.run_update` (``notify``: nothing to wake
        in one process; the recovery's sweep finds the run)."""
        await checkpoint()
        with self._lock:
            return self._runs.update(record, expect_status, expect_attempts)


def ledger_missing_thread(key: ThreadKey, entry: LedgerEntry) -> LedgerWriteError:
    """The ``STORAGE_LEDGER_001`` error for a ledger write on a thread without a checkpoint.

    Shared by the embedded tiers so they word it identically. ``context``: ``thread_id``,
    ``tool_call_id``, ``tool``.
    """
    return LedgerWriteError(
        f"cannot record tool call {entry.tool_call_id!r} ({entry.tool_name}) on thread "
        f"{key.thread_id!r}: the thread has no checkpoint; the runtime checkpoints the model's "
        "answer before running its tools",
        context={
            "thread_id": key.thread_id,
            "tool_call_id": entry.tool_call_id,
            "tool": entry.tool_name,
        },
    )


def thread_missing(thread_id: str) -> ResourceNotFoundError:
    """The ``ResourceNotFoundError`` (``STORAGE_NOT_FOUND_000``, ``context["thread_id"]``) of
    a change to a thread that has no checkpoint yet (its metadata, its TTL), worded the same by
    every store."""
    return ResourceNotFoundError(
        f"thread {thread_id!r} does not exist; write a checkpoint first",
        context={"thread_id": thread_id},
    )
