"""In-process LRU cache tier: each thread's latest checkpoint, kept in this process's memory.

The fastest tier of the layered store (``LRU -> Redis -> source of truth``, see
``docs/architecture.md``). It keeps, per thread, the latest :class:`StoredCheckpoint` it has seen
(read fills and write-throughs) with its encoded message blobs and, optionally, the in-process
decoded message objects (``record.decoded``) the checkpointer attached. A warm read therefore
costs no network round trip and no decoding.

An entry is private to this process and may be stale when other instances write the same
thread; :class:`~tenxgraph.storage.layered.LayeredStore` validates every LRU hit against a
cheap version stamp (Redis) or the source's ``current_version`` before relying on it
(``shared = False`` tells it to).

The tier is bounded by entries and by bytes. Bytes are the size of ``values`` plus the message
blobs, plus, when the entry also keeps decoded message objects, an estimate of their memory:
``_DECODED_FACTOR`` times the blobs' size (CPython's Pydantic objects take about eight times
their JSON size; measured on the bundled trajectories). So ``max_bytes`` bounds real memory,
not only the encoded payload.

The most recently used entry is kept even when it alone is larger than ``max_bytes`` (every
other entry is evicted then): a thread longer than the budget would otherwise be dropped at
each write and every later run would decode its whole history again. Memory stays bounded by
``max_bytes`` plus that one thread, whose decoded messages the run using it holds anyway.

The tier never awaits inside an operation, so each call is atomic on its event loop; a
``threading.Lock`` makes it safe across OS threads too (it is never held across an ``await``).
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tenxgraph.records import (
    Range,
    StoredCheckpoint,
    ThreadKey,
    expand_ranges,
    ranges_extend,
    ranges_len,
    tail_seqs,
)
from tenxgraph.telemetry import ATTR, METRIC, SPAN, SpanKind, counter, enabled, span

__all__ = ["LRUCache"]

#: Estimated encoded size (bytes) of one message known only as a decoded object.
_DECODED_MESSAGE_BYTES = 512
#: Memory of decoded message objects relative to their encoded JSON size (about 8x measured).
_DECODED_FACTOR = 8


def _refs_of_blobs(e: Any) -> int:
    """Reference count of ``e.messages`` as seen from here (see :func:`_handed_out`)."""
    return sys.getrefcount(e.messages)


class _Probe:
    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[bytes] = []


#: What ``_refs_of_blobs`` counts for a list referred to by its entry alone (measured once, so
#: it holds whatever the interpreter counts for the argument); ``None`` where reference counts
#: cannot tell (no ``sys.getrefcount``, or a free-threaded build): lists are then copied.
_SOLE_REFS: int | None = (
    _refs_of_blobs(_Probe())
    if hasattr(sys, "getrefcount") and getattr(sys, "_is_gil_enabled", lambda: True)()
    else None
)


def _handed_out(e: Any) -> bool:
    """Whether the blob list of entry ``e`` may still be seen outside the tier.

    A list handed out by :meth:`LRUCache.get` is copied before it is extended (copy-on-write),
    unless nothing but the entry refers to it any more: a run's first read drops its record
    once decoded, so the write-through of the run's first step extends the list in place
    instead of copying every blob of the thread (at 15,000 messages the copy took about 1 ms,
    touching each blob's reference count).
    """
    return _SOLE_REFS is None or _refs_of_blobs(e) != _SOLE_REFS


# Skip even the (cheap) no-op span and its attribute dict unless a tracer provider is
# installed: an LRU hit takes about a microsecond.
_tracing_enabled = enabled


def _write_bytes(record: StoredCheckpoint, new_messages: list[tuple[int, bytes]] | None) -> int:
    """Bytes a put hands the tier (telemetry): ``values`` plus the message blobs it carries."""
    if record.messages is not None:
        blobs = sum(len(b) for b in record.messages)
    else:
        blobs = sum(len(b) for _, b in new_messages or ())
    return len(record.values) + blobs


def _decoded_len(decoded: Any) -> int:
    """Number of messages of a decoded attachment: ``(message_list, length)`` or a list."""
    if isinstance(decoded, tuple) and len(decoded) == 2 and isinstance(decoded[1], int):
        return decoded[1]
    try:
        return len(decoded)
    except TypeError:
        return 1


@dataclass(slots=True)
class _Entry:
    """One thread's cached latest checkpoint.

    ``messages`` is the blob list (``None`` when unknown); ``shared`` is ``True`` once the list
    object has been handed out (by :meth:`LRUCache.get` or received from a caller), so it is
    copied before being extended in place. ``msg_bytes`` is the blobs' total size, or the
    estimate used when only ``decoded`` is known. An entry with neither messages nor decoded
    is a *shell*: invisible to :meth:`LRUCache.get`, kept so :meth:`LRUCache.attach_decoded`
    can complete it.
    """

    user_id: str
    version: int
    values: bytes
    ranges: tuple[Range, ...]
    next_seq: int
    status: str
    created_at: float
    messages: list[bytes] | None
    msg_bytes: int
    decoded: Any
    shared: bool
    nbytes: int = 0

    def servable(self) -> bool:
        """Whether :meth:`LRUCache.get` may return the entry (it has blobs or decoded objects)."""
        return self.messages is not None or self.decoded is not None

    def size(self) -> int:
        """Bytes counted against ``max_bytes``: values plus blobs (or the decoded estimate),
        plus the estimated memory of decoded objects when the entry keeps them."""
        if not self.servable():
            return len(self.values)
        decoded = self.msg_bytes * _DECODED_FACTOR if self.decoded is not None else 0
        return len(self.values) + self.msg_bytes + decoded


class LRUCache:
    """In-process cache tier holding each thread's latest checkpoint (least recently used out).

    Implements :class:`~tenxgraph.storage.base.CacheTier` (``name == "lru"``). Entries are
    looked up by ``thread_id`` and answered only to the same owner scope (``user_id``): a read
    by another user is a miss, exactly as if the entry did not exist. One entry per thread
    suffices because a thread has one owner in the source of truth.

    Args:
        max_entries: at most this many threads are cached (``>= 1``).
        max_bytes: at most this many bytes of ``values`` plus message blobs (or, for an entry
            holding only decoded objects, their estimated encoded size) are cached, except
            that the most recently used entry stays even when it alone is larger (every other
            entry is evicted). Default 64 MiB.

    Raises:
        ValueError: ``max_entries`` or ``max_bytes`` is below 1.

    Attributes:
        name: ``"lru"`` (telemetry tier name).
        shared: ``False``: entries are private to this process, so the layered store validates
            a hit before relying on it.
        suspends: ``False``: no operation yields to the event loop, so none can be cancelled
            half-way.
    """

    name = "lru"
    shared = False
    #: no operation of this tier yields to the event loop (the layered store relies on it to
    #: skip shielding its write-through from cancellation)
    suspends = False

    def __init__(self, max_entries: int = 1024, max_bytes: int = 64 * 2**20) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("LRUCache needs max_entries >= 1 and max_bytes >= 1")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ CacheTier

    async def get(self, key: ThreadKey) -> StoredCheckpoint | None:
        """The cached latest checkpoint of ``key``, or ``None``.

        Args:
            key: the thread and the caller's owner scope.

        Returns:
            A new :class:`StoredCheckpoint` (``decoded`` set when the checkpointer attached
            decoded objects; ``messages`` ``None`` when only those are held), or ``None`` on a
            miss: nothing cached, another owner's entry, or an entry without messages. The
            ``messages`` list is shared with the cache: do not mutate it.
        """
        if _tracing_enabled():
            with span(
                SPAN.CHECKPOINT_READ,
                SpanKind.INTERNAL,
                {ATTR.TIER: self.name, ATTR.THREAD_ID: key.thread_id},
            ) as sp:
                rec = self._get(key)
                sp.set_attribute(ATTR.HIT, rec is not None)
                if rec is not None:
                    sp.set_attribute(ATTR.VERSION, rec.version)
                return rec
        return self._get(key)

    async def put(
        self,
        record: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None = None,
        base_created_at: float | None = None,
    ) -> None:
        """Cache ``record`` as the thread's latest (ignored when older than the cached one).

        Args:
            record: the checkpoint. Complete when ``record.messages`` is set (a read fill);
                otherwise ``new_messages`` describes it relative to the previous version.
            new_messages: ``(seq, blob)`` rows version ``record.version`` added (write-through
                after a CAS write). Applied on top of the cached ``record.version - 1``:
                ``O(k)`` for ``k`` rows when the ranges only extend, ``O(n)`` when they change.
                When the cached entry is not that version (or lacks blobs) and the rows do not
                cover the whole record, the thread's messages are dropped; ``record.decoded``
                is then kept alone when set.
            base_created_at: ``created_at`` of the version ``new_messages`` apply to; a cached
                entry of that version created at another time (the thread was deleted and
                created anew) is not extended. ``None``: not checked.
        """
        if _tracing_enabled():
            with span(
                SPAN.CHECKPOINT_WRITE,
                SpanKind.INTERNAL,
                {
                    ATTR.TIER: self.name,
                    ATTR.THREAD_ID: record.thread_id,
                    ATTR.VERSION: record.version,
                    ATTR.BYTES: _write_bytes(record, new_messages),
                },
            ):
                self._put(record, new_messages, base_created_at)
            return
        self._put(record, new_messages, base_created_at)

    async def invalidate(self, key: ThreadKey) -> None:
        """Drop the thread's entry, whatever its owner scope."""
        with self._lock:
            self._remove(key.thread_id)

    async def erase(self, thread_ids: list[str] | tuple[str, ...], owner: str | None = None) -> int:
        """Drop the entries of ``thread_ids`` (any owner scope) and, with ``owner``, every
        entry of that owner scope (erasure and retention, :mod:`tenxgraph.storage.retention`).

        Returns:
            The number of entries dropped.
        """
        with self._lock:
            doomed = {t for t in thread_ids if t in self._entries}
            if owner is not None:
                doomed.update(t for t, e in self._entries.items() if e.user_id == owner)
            for tid in doomed:
                self._remove(tid)
            return len(doomed)

    async def aclose(self) -> None:
        """Drop every entry; idempotent (the cache stays usable)."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    # ------------------------------------------------------------------ extras

    async def attach_decoded(self, key: ThreadKey, version: int, decoded: Any) -> bool:
        """Attach in-process decoded message objects to the cached ``version`` of ``key``.

        The checkpointer calls this after a write (or a read it decoded), so the next warm
        read returns ``decoded`` and skips decoding.

        Args:
            key: the thread and its owner scope.
            version: the version ``decoded`` belongs to; nothing happens when the cached entry
                is another version or another owner's.
            decoded: opaque to the cache; by convention ``(message_list, length)``: the list
                object and how many of its items belong to ``version`` (the runtime may append
                to the list afterwards).

        Returns:
            ``True`` when attached.
        """
        with self._lock:
            e = self._entries.get(key.thread_id)
            if e is None or e.user_id != key.user_id or e.version != version:
                return False
            if e.messages is None and e.decoded is None:
                e.msg_bytes = e.msg_bytes or _decoded_len(decoded) * _DECODED_MESSAGE_BYTES
            e.decoded = decoded
            self._entries.move_to_end(key.thread_id)
            self._resize(key.thread_id, e)
            return True

    def stats(self) -> dict[str, int]:
        """Counters since creation: ``hits`` (entries returned; the layered store may still
        reject one as stale, see its ``stale`` counter), ``misses``, ``evictions``, and the
        current ``entries`` and ``bytes``."""
        with self._lock:
            return {
                "hits": self._hits,
                "misses": self._misses,
                "evictions": self._evictions,
                "entries": len(self._entries),
                "bytes": self._bytes,
            }

    def __len__(self) -> int:
        """Number of cached threads (shells included)."""
        return len(self._entries)

    # ------------------------------------------------------------------ internals

    def _get(self, key: ThreadKey) -> StoredCheckpoint | None:
        """Look ``key`` up under the lock; count the hit or miss (see :meth:`get`)."""
        with self._lock:
            e = self._entries.get(key.thread_id)
            if e is None or e.user_id != key.user_id or not e.servable():
                self._misses += 1
                hit = False
                rec = None
            else:
                self._entries.move_to_end(key.thread_id)
                self._hits += 1
                hit = True
                if e.messages is not None:
                    e.shared = True
                rec = StoredCheckpoint(
                    thread_id=key.thread_id,
                    user_id=e.user_id,
                    version=e.version,
                    values=e.values,
                    ranges=e.ranges,
                    messages=e.messages,
                    next_seq=e.next_seq,
                    status=e.status,
                    created_at=e.created_at,
                    decoded=e.decoded,
                )
        counter(METRIC.CACHE_HITS if hit else METRIC.CACHE_MISSES).add(1, {ATTR.TIER: self.name})
        return rec

    def _put(
        self,
        record: StoredCheckpoint,
        new_messages: list[tuple[int, bytes]] | None,
        base_created_at: float | None = None,
    ) -> None:
        """Store ``record`` under the lock (see :meth:`put`), then evict to the bounds."""
        tid = record.thread_id
        with self._lock:
            cur = self._entries.get(tid)
            if (
                cur is not None
                and new_messages is not None
                and record.messages is None
                and cur.version == record.version - 1
                and cur.user_id == record.user_id
                and (base_created_at is None or cur.created_at == base_created_at)
                and self._append_in_place(cur, record, new_messages)
            ):
                self._entries.move_to_end(tid)
                self._resize(tid, cur)
                return
            if cur is not None and cur.user_id != record.user_id:
                cur = None  # another owner's entry never mixes with this one: replaced below
            if cur is not None:
                if cur.version > record.version:
                    return  # older than what is cached
                if cur.version == record.version and cur.created_at == record.created_at:
                    self._complete_same(tid, cur, record)
                    return
            if (
                cur is not None
                and base_created_at is not None
                and cur.version == record.version - 1
                and cur.created_at != base_created_at
            ):
                cur = None  # same version number, another checkpoint: never extended
            entry = self._build(record, new_messages, cur)
            self._remove(tid)
            entry.nbytes = entry.size()
            self._entries[tid] = entry
            self._bytes += entry.nbytes
            self._evict()

    @staticmethod
    def _append_in_place(
        cur: _Entry, record: StoredCheckpoint, rows: list[tuple[int, bytes]]
    ) -> bool:
        """The write-through of a step that only appended (the common case): when ``record``
        grows ``cur``'s last range by exactly ``rows``, turn ``cur`` into ``record``'s entry in
        place (``O(k)`` for ``k`` rows, no new entry) and answer ``True``; else change nothing
        and answer ``False`` (the general path of :meth:`_build` decides)."""
        old, new = cur.ranges, record.ranges
        msgs = cur.messages
        if msgs is None or not old or len(new) != len(old):
            return False
        (os_, oe), (ns, ne) = old[-1], new[-1]
        if ns != os_ or ne - oe != len(rows) or (len(old) > 1 and new[:-1] != old[:-1]):
            return False
        if len(rows) == 1:  # a step's usual write: one message
            s, b = rows[0]
            if s != oe:
                return False
            added = len(b)
        else:
            seq = oe
            added = 0
            for s, b in rows:
                if s != seq:
                    return False
                seq += 1
                added += len(b)
        if cur.shared:
            del msgs  # not counted by _handed_out
            if _handed_out(cur):  # still seen outside: copy before extending (copy-on-write)
                cur.messages = list(cur.messages or ())
            cur.shared = False
            msgs = cur.messages
            assert msgs is not None
        if len(rows) == 1:
            msgs.append(rows[0][1])
        else:
            msgs.extend([b for _, b in rows])
        cur.msg_bytes += added
        cur.version = record.version
        cur.values = record.values
        cur.ranges = tuple(new)
        cur.next_seq = record.next_seq
        cur.status = record.status
        cur.created_at = record.created_at
        cur.decoded = record.decoded
        return True

    def _complete_same(self, tid: str, cur: _Entry, record: StoredCheckpoint) -> None:
        """Same checkpoint seen again: keep what is cached, add what it lacked."""
        if cur.messages is None and record.messages is not None:
            cur.messages = record.messages
            cur.shared = True
            cur.msg_bytes = sum(map(len, record.messages))
        if cur.decoded is None and record.decoded is not None:
            cur.decoded = record.decoded
            if cur.messages is None and not cur.msg_bytes:
                cur.msg_bytes = _decoded_len(record.decoded) * _DECODED_MESSAGE_BYTES
        self._entries.move_to_end(tid)
        self._resize(tid, cur)

    def _build(
        self,
        record: StoredCheckpoint,
        rows: list[tuple[int, bytes]] | None,
        cur: _Entry | None,
    ) -> _Entry:
        """The entry for ``record``: complete, incremental over ``cur``, decoded-only or shell."""
        messages: list[bytes] | None = None
        shared = False
        msg_bytes = 0
        if record.messages is not None:
            messages, shared = record.messages, True
            msg_bytes = sum(map(len, messages))
        elif rows is not None:
            if cur is not None and cur.version == record.version - 1 and cur.messages is not None:
                built = self._apply(cur, record.ranges, rows)
                if built is not None:
                    messages, msg_bytes = built
            if messages is None and len(rows) == ranges_len(record.ranges):
                messages = self._from_rows(record.ranges, rows)
                if messages is not None:
                    msg_bytes = sum(map(len, messages))
            if messages is None and record.decoded is not None:
                # Decoded objects only: estimate their size from what the previous version
                # weighed plus the new rows, else from a per-message constant.
                if cur is not None and cur.version == record.version - 1 and cur.msg_bytes:
                    msg_bytes = cur.msg_bytes + sum(len(b) for _, b in rows)
                else:
                    msg_bytes = _decoded_len(record.decoded) * _DECODED_MESSAGE_BYTES
        elif record.decoded is not None:
            msg_bytes = _decoded_len(record.decoded) * _DECODED_MESSAGE_BYTES
        return _Entry(
            user_id=record.user_id,
            version=record.version,
            values=record.values,
            ranges=tuple(record.ranges),
            next_seq=record.next_seq,
            status=record.status,
            created_at=record.created_at,
            messages=messages,
            msg_bytes=msg_bytes,
            decoded=record.decoded,
            shared=shared,
        )

    @staticmethod
    def _apply(
        cur: _Entry, ranges: tuple[Range, ...], rows: list[tuple[int, bytes]]
    ) -> tuple[list[bytes], int] | None:
        """Messages of the next version from ``cur``'s blobs plus ``rows``; ``None`` when a
        seq of ``ranges`` is in neither."""
        old = cur.messages
        assert old is not None
        if ranges_extend(cur.ranges, ranges):
            by_seq = dict(rows)
            try:
                tail = [by_seq[s] for s in tail_seqs(cur.ranges, ranges)]
            except KeyError:
                return None
            # Extend in place unless the list object was handed out (copy-on-write).
            del old  # not counted by _handed_out
            if cur.shared and _handed_out(cur):
                cur.messages = list(cur.messages or ())
            msgs = cur.messages
            assert msgs is not None
            msgs.extend(tail)
            return msgs, cur.msg_bytes + sum(map(len, tail))
        by_seq = dict(zip(expand_ranges(cur.ranges), old, strict=False))
        by_seq.update(rows)
        try:
            msgs = [by_seq[s] for s in expand_ranges(ranges)]
        except KeyError:
            return None
        return msgs, sum(map(len, msgs))

    @staticmethod
    def _from_rows(ranges: tuple[Range, ...], rows: list[tuple[int, bytes]]) -> list[bytes] | None:
        """Messages when ``rows`` hold every seq of ``ranges`` (a thread's first version)."""
        by_seq = dict(rows)
        try:
            return [by_seq[s] for s in expand_ranges(ranges)]
        except KeyError:
            return None

    def _remove(self, tid: str) -> None:
        """Drop the entry of ``tid`` (if any) and its bytes."""
        e = self._entries.pop(tid, None)
        if e is not None:
            self._bytes -= e.nbytes

    def _resize(self, tid: str, e: _Entry) -> None:
        """Re-count the bytes of entry ``e`` after it changed; evict to the bounds."""
        # e.size(), inline (twice per step)
        if e.decoded is not None:
            size = len(e.values) + e.msg_bytes * (1 + _DECODED_FACTOR)
        elif e.messages is not None:
            size = len(e.values) + e.msg_bytes
        else:
            size = len(e.values)
        self._bytes += size - e.nbytes
        e.nbytes = size
        if len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._evict()

    def _evict(self) -> None:
        """Drop least recently used entries until both bounds hold, except that the most
        recently used entry stays even when it alone is larger than ``max_bytes``."""
        entries = self._entries
        while len(entries) > self.max_entries or (
            len(entries) > 1 and self._bytes > self.max_bytes
        ):
            _, e = entries.popitem(last=False)
            self._bytes -= e.nbytes
            self._evictions += 1
