"""The records the runtime and the storage tiers exchange: plain data, no I/O, no behaviour.

This module sits beside ``tenxgraph.core`` and ``tenxgraph.storage`` and imports neither at run
time, so both can import it and imports keep running one way (the runtime never imports a
storage module to name a record; a storage tier never imports the runtime). It holds:

* :class:`ThreadKey`: a thread within an owner scope;
* :data:`Range` and its helpers: a thread's message list as ``[start, end)`` intervals of
  per-thread message sequence numbers (``seq``), in list order. An append-only thread has one
  range; appending ``k`` messages extends it, so a checkpoint writes only its ``k`` new message
  rows and an ``O(1)`` range list, whatever the length of the thread (diff-only writes);
* :class:`StoredCheckpoint` (one encoded durable version) and :class:`CheckpointWrite` (a
  compare-and-swap write computed by the checkpointer);
* :class:`DurableView` and :class:`Loaded`: a decoded version as the runtime holds it between
  steps;
* :class:`LedgerEntry` (one recorded tool execution) and :class:`ThreadInfo` (a thread as
  listed for its owner);
* :class:`LeaseGrant`: what a store answers about a thread's run lease.

Records carry *encoded* data (``bytes`` from :mod:`tenxgraph.storage.serde`) where they cross a
tier, so a tier never needs to know the application's state class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenxgraph.core.state import AgentState

__all__ = [
    "CheckpointWrite",
    "DurableView",
    "LeaseGrant",
    "LedgerEntry",
    "Loaded",
    "Range",
    "StoredCheckpoint",
    "ThreadInfo",
    "ThreadKey",
    "expand_ranges",
    "ranges_extend",
    "ranges_len",
    "tail_seqs",
]

#: ``(start, end)``: message seqs ``start, start+1, ..., end-1``.
Range = tuple[int, int]


def ranges_len(ranges: tuple[Range, ...] | list[Range]) -> int:
    """Number of messages described by ``ranges``."""
    return sum(e - s for s, e in ranges)


def expand_ranges(ranges: tuple[Range, ...] | list[Range]) -> list[int]:
    """The seqs of ``ranges`` in list order (``O(n)``; for reads and tests)."""
    out: list[int] = []
    for s, e in ranges:
        out.extend(range(s, e))
    return out


def ranges_extend(old: tuple[Range, ...], new: tuple[Range, ...]) -> bool:
    """Whether ``new`` only appends to ``old``: same ranges, the last one possibly longer,
    more ranges after it. Then every message of ``old`` keeps its place."""
    n = len(old)
    if n == 0:
        return True
    if len(new) < n or new[: n - 1] != old[: n - 1]:
        return False
    (os_, oe), (ns, ne) = old[n - 1], new[n - 1]
    return os_ == ns and ne >= oe


def tail_seqs(old: tuple[Range, ...], new: tuple[Range, ...]) -> list[int]:
    """Seqs ``new`` adds after ``old`` when ``ranges_extend(old, new)``, in list order."""
    n = len(old)
    out: list[int] = []
    if n:
        out.extend(range(old[n - 1][1], new[n - 1][1]))
    for s, e in new[n:]:
        out.extend(range(s, e))
    return out


@dataclass(frozen=True, slots=True)
class ThreadKey:
    """Identifies a thread within an owner scope.

    Attributes:
        thread_id: the conversation id (non-empty ``str``, at most 255 characters).
        user_id: the caller's user id. Tiers compare it with the thread's owner inside every
            query; the facade sets it to ``"*"`` for every caller when user isolation is off.
    """

    thread_id: str
    user_id: str


@dataclass(slots=True)
class StoredCheckpoint:
    """One durable version of a thread, encoded.

    Attributes:
        thread_id: the thread.
        user_id: its owner scope.
        version: 1, 2, 3, ... without gaps.
        values: JSON bytes of every state field except ``context`` (``serde.encode_values``).
        ranges: the message list of this version as seq ranges, in list order.
        messages: the encoded messages of ``ranges``, in list order (``len == ranges_len``);
            ``None`` when the reader asked for metadata only.
        next_seq: the next unused message seq of the thread after this version.
        status: ``ExecutionStatus`` value of this checkpoint (``"running"``, ``"completed"``...).
        created_at: UNIX time in seconds.
        decoded: in-process attachment (a decoded state object) kept by the LRU tier only; never
            serialized, never shared across processes.
    """

    thread_id: str
    user_id: str
    version: int
    values: bytes
    ranges: tuple[Range, ...]
    messages: list[bytes] | None
    next_seq: int
    status: str
    created_at: float
    decoded: Any = field(default=None, repr=False, compare=False)


@dataclass(slots=True)
class CheckpointWrite:
    """A compare-and-swap checkpoint write, computed without I/O by the facade.

    Attributes:
        thread_id: the thread.
        user_id: the writer's owner scope.
        expected_version: the version this run last read or wrote; ``0`` means "the thread must
            not exist yet". The write succeeds only if the stored version equals it; the new
            version is ``expected_version + 1``.
        values: JSON bytes of the state fields except ``context``.
        new_messages: ``(seq, data)`` rows to insert: only messages new or changed since the
            last durable version.
        ranges: the full message list of the new version as seq ranges.
        next_seq: next unused seq after this write.
        status: ``ExecutionStatus`` value.
        history_limit: keep this many newest versions (prune older ones in the same round
            trip); ``None`` keeps all.
        created_at: UNIX time in seconds.
        token: identifies this write (``"<run_id>:<step>:<random>"``); it is also stored inside
            ``values`` (key ``serde.WRITE_TOKEN_KEY``), so a tier whose connection broke after
            sending the write recognises its own commit by reading the new version's
            ``values`` back and comparing the bytes (see ``PostgresStore.write``).
        base_created_at: ``created_at`` of version ``expected_version`` as this run read it,
            or ``None`` when unknown (or ``expected_version == 0``). Version numbers start
            again at 1 when a thread is deleted and created anew, so a version number alone
            does not identify a checkpoint: a cache tier applies ``new_messages`` on top of
            its copy of ``expected_version`` only when that copy's ``created_at`` is this one.
        fence: the run lease's fencing token this write carries (``None``: a write outside a
            lease, checked by the compare-and-swap alone; the SQL statements send it as ``-1``).
            A fenced write succeeds only while ``fence`` is the thread's current fence (no
            other run took the lease since), in the same atomic step as the compare-and-swap.
        release: give the lease of ``fence`` up in the same atomic step when the write
            succeeds (the run's last checkpoint).
        decoded: in-process decoded messages of the new version, by convention
            ``(message_list, length)``; copied into the record :meth:`to_record` makes, so a
            private cache tier (the LRU) receives them with the write-through instead of in a
            later ``attach_decoded`` call. Never serialized, never sent to a server.
    """

    thread_id: str
    user_id: str
    expected_version: int
    values: bytes
    new_messages: list[tuple[int, bytes]]
    ranges: tuple[Range, ...]
    next_seq: int
    status: str
    history_limit: int | None
    created_at: float
    token: str = ""
    base_created_at: float | None = None
    fence: int | None = None
    release: bool = False
    decoded: Any = field(default=None, repr=False, compare=False)

    def to_record(self, messages: list[bytes] | None = None) -> StoredCheckpoint:
        """The :class:`StoredCheckpoint` this write creates once it succeeds (its ``decoded``
        is the write's)."""
        return StoredCheckpoint(
            thread_id=self.thread_id,
            user_id=self.user_id,
            version=self.expected_version + 1,
            values=self.values,
            ranges=self.ranges,
            messages=messages,
            next_seq=self.next_seq,
            status=self.status,
            created_at=self.created_at,
            decoded=self.decoded,
        )


@dataclass(slots=True)
class LedgerEntry:
    """One recorded tool execution.

    Attributes:
        call_key: the idempotency key: ``tool_call_id`` qualified by the assistant message that
            made the call and a digest of the call (name and arguments), so a reused
            ``tool_call_id`` for a different call is a different key.
        tool_call_id: the model's id of the call.
        tool_name: the tool's name.
        result: JSON bytes of the recorded result (``serde.dumps``).
        created_at: UNIX seconds.
    """

    call_key: str
    tool_call_id: str
    tool_name: str
    result: bytes
    created_at: float


@dataclass(slots=True)
class ThreadInfo:
    """A thread as listed for its owner.

    Attributes:
        thread_id: the thread.
        user_id: the owner scope (only ever returned to that owner).
        version: its latest version.
        status: ``ExecutionStatus`` value of the latest checkpoint.
        created_at: UNIX time in seconds of the thread's first checkpoint.
        updated_at: UNIX time in seconds of its latest checkpoint.
        metadata: application metadata set with ``aput_thread``.
        thread_name (str | None): 10xGraph's display name of the thread:
            ``metadata["thread_name"]`` when the application set one with ``aput_thread``,
            else ``None``.
    """

    thread_id: str
    user_id: str
    version: int
    status: str
    created_at: float
    updated_at: float
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def thread_name(self) -> str | None:
        """The thread's display name (``metadata["thread_name"]``), or ``None``."""
        name = self.metadata.get("thread_name")
        return None if name is None else str(name)

    def model_dump(self) -> dict[str, Any]:
        """The record as a dict (10xGraph's ``ThreadInfo`` is a Pydantic model), ``thread_name``
        included."""
        return {
            "thread_id": self.thread_id,
            "thread_name": self.thread_name,
            "user_id": self.user_id,
            "version": self.version,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "metadata": dict(self.metadata),
        }


@dataclass(slots=True)
class DurableView:
    """The message side of a thread's last durable version.

    Attributes:
        messages: the durable message list (objects as held by the state), oldest first.
        length: ``len(messages)`` when it became durable (a later in-place append to the same
            list object does not change it).
        ranges: their seqs as ranges, in list order.
        next_seq: next unused seq of the thread.
    """

    messages: list[Any]
    length: int
    ranges: tuple[Range, ...]
    next_seq: int

    @classmethod
    def empty(cls) -> DurableView:
        """The view of a thread with no durable version."""
        return cls(messages=[], length=0, ranges=(), next_seq=1)


@dataclass(slots=True)
class Loaded:
    """A decoded durable version, as the runtime holds it between steps.

    Attributes:
        state: the state object (its ``context`` is a private copy the run may extend).
        version: the durable version it came from (or was written as).
        view: the message side of that version, for diff-only writes.
        created_at: UNIX seconds of the version.
    """

    state: AgentState
    version: int
    view: DurableView
    created_at: float


@dataclass(frozen=True, slots=True)
class LeaseGrant:
    """The answer of one attempt to take a thread's run lease.

    The lease itself (DESIGN section 3, "One run per thread at a time") is kept by the source of
    truth: a row per thread with the current ``holder`` (a run id, ``""`` when released), a
    ``fence`` (incremented by every acquisition, checked by every fenced checkpoint write) and
    ``expires_at`` (UNIX seconds on the store's clock: Postgres's for Postgres, this machine's
    for SQLite and memory). Runs waiting for it (``enqueue``, ``interrupt``, ``rollback`` and
    resumes) register as waiters, ordered by arrival, and keep their registration alive by
    retrying; a waiter not seen for ``lapse_s`` seconds no longer holds its place.

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
