"""The small protocols every storage tier implements, and the records they exchange.

Two kinds of tier:

* a **source of truth** (:class:`StoreTier`: in-memory, SQLite, Postgres) owns versions, does the
  compare-and-swap, keeps history, the tool ledger and the stop flags;
* a **cache tier** (:class:`CacheTier`: in-process LRU, Redis) holds copies of the latest
  checkpoint of a thread and is never authoritative.

:class:`tenxgraph.storage.layered.LayeredStore` stacks cache tiers over a source of truth and is
itself a :class:`StoreTier`, so the checkpointer facades see one interface.

Records carry *encoded* data (``bytes`` from :mod:`tenxgraph.storage.serde`), so a tier never
needs to know the application's state class. A thread's message list is described by
``ranges``: ``[start, end)`` intervals of per-thread message sequence numbers (``seq``), in list
order. An append-only thread has one range; appending ``k`` messages extends it, so a
checkpoint writes only its ``k`` new message rows and an ``O(1)`` range list, whatever the
length of the thread (diff-only writes). Any kept version still reconstructs exactly: its
message list is the rows of its ranges, in order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tenxgraph.storage._lease_records import LeaseGrant

__all__ = [
    "CacheTier",
    "CheckpointWrite",
    "LedgerEntry",
    "Range",
    "StoreTier",
    "StoredCheckpoint",
    "ThreadInfo",
    "ThreadKey",
    "expand_ranges",
    "ranges_len",
    "report_skipped",
    "threads_from_rows",
]

_log = logging.getLogger("tenxgraph.storage")

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
        fence: the run lease's fencing token this write carries (``None``: a write outside a
            lease, checked by the compare-and-swap alone). A fenced write succeeds only while
            ``fence`` is the thread's current fence (no other run took the lease since), in
            the same atomic step as the compare-and-swap.
        release: give the lease of ``fence`` up in the same atomic step when the write
            succeeds (the run's last checkpoint).
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
    fence: int | None = None
    release: bool = False

    def to_record(self, messages: list[bytes] | None = None) -> StoredCheckpoint:
        """The :class:`StoredCheckpoint` this write creates once it succeeds."""
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
        )


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

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> ThreadInfo:
        """Build from a ``(thread_id, owner, version, status, created_at, updated_at,
        metadata_json_bytes)`` row, the column order every tier's thread listing uses.

        Raises:
            SerializationError: ``STORAGE_SERIALIZATION_000`` when the metadata is not a
                decodable JSON object (``context``: ``thread_id``, ``path`` ``"$.metadata"``).
        """
        from tenxgraph.core.exceptions import SerializationError
        from tenxgraph.storage import serde

        tid, owner, version, status, created, updated, meta = row
        data = serde.decode_payload(meta, thread_id=str(tid), what="metadata", path="$.metadata")
        if not isinstance(data, dict):
            raise SerializationError(
                f"the stored metadata of thread {tid!r} is a {type(data).__name__}, not a JSON "
                "object; the row is damaged",
                context={
                    "thread_id": str(tid),
                    "version": None,
                    "path": "$.metadata",
                    "type": type(data).__name__,
                },
            )
        return cls(tid, owner, version, status, created, updated, data)


def report_skipped(operation: str, errors: list[Any]) -> None:
    """Report, once per call of a list operation, the rows it skipped as undecodable: one
    warning (logger ``tenxgraph.storage``) and one ``tenxgraph.row.skipped`` event on the
    current span, naming the count and the first few ``(thread, version, path)`` (no values).

    Args:
        operation: the list operation (``"list_threads"``, ``"get_state_history"``).
        errors: the ``SerializationError`` s of the skipped rows (nothing is reported when
            empty).
    """
    if not errors:
        return
    from opentelemetry import trace

    from tenxgraph.telemetry import ATTR, EVENT

    where = [
        f"{e.context.get('thread_id')!r}@{e.context.get('version')}:{e.context.get('path')}"
        for e in errors[:5]
    ]
    _log.warning(
        "%s skipped %d stored row(s) that cannot be decoded (%s%s); the other rows are "
        "returned. Restore or delete the damaged rows",
        operation,
        len(errors),
        ", ".join(where),
        ", ..." if len(errors) > 5 else "",
    )
    sp = trace.get_current_span()
    if sp.is_recording():
        sp.add_event(
            EVENT.ROW_SKIPPED,
            {ATTR.DB_OPERATION: operation, ATTR.ROWS_SKIPPED: len(errors)},
        )


def threads_from_rows(rows: Iterable[tuple[Any, ...]]) -> list[ThreadInfo]:
    """``ThreadInfo.from_row`` of each row, skipping (and reporting once, see
    ``report_skipped``) those whose stored data cannot be decoded, so one damaged row does
    not hide every other thread of its owner."""
    from tenxgraph.core.exceptions import SerializationError

    out: list[ThreadInfo] = []
    bad: list[SerializationError] = []
    for row in rows:
        try:
            out.append(ThreadInfo.from_row(row))
        except SerializationError as exc:
            bad.append(exc)
    report_skipped("list_threads", bad)
    return out


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


@runtime_checkable
class StoreTier(Protocol):
    """A source of truth (or a :class:`~tenxgraph.storage.layered.LayeredStore` over one).

    Every method enforces the owner scope of ``key.user_id`` inside its query: a thread owned
    by another user reads as missing, and writes, deletes or ledger access raise
    ``StorageError`` (``STORAGE_FORBIDDEN_001``) without revealing the owner. Driver errors are
    translated to the error family (``TransientStorageError`` for retryable ones).
    """

    #: tier name used in telemetry: ``"memory"``, ``"sqlite"``, ``"postgresql"``, ``"layered"``.
    name: str

    async def asetup(self) -> None:
        """Create or migrate the schema; idempotent, safe from several processes at once."""

    async def aclose(self) -> None:
        """Release connections and pools; idempotent."""

    async def read(
        self, key: ThreadKey, version: int | None = None, *, with_messages: bool = True
    ) -> StoredCheckpoint | None:
        """The latest (or the given kept) version, or ``None`` when missing or not owned."""

    async def current_version(self, key: ThreadKey) -> int | None:
        """The latest version number (cheap), or ``None`` when missing or not owned."""

    async def write(self, w: CheckpointWrite) -> StoredCheckpoint:
        """Compare-and-swap ``w`` in one round trip / one transaction.

        Returns the new record (``messages`` may be ``None``). Raises ``StaleStateError`` when
        the stored version is not ``w.expected_version`` (nothing of ``w`` is visible), or the
        forbidden ``StorageError`` when another user owns the thread.
        """

    async def history(
        self, key: ThreadKey, *, limit: int | None = None, before: int | None = None
    ) -> list[StoredCheckpoint]:
        """Kept versions, newest first, with messages, below ``before`` when given; a constant
        number of queries whatever the count."""

    async def delete_thread(self, key: ThreadKey) -> bool:
        """Delete every version, message, ledger row and flag of the thread; ``True`` if it
        existed. Forbidden for a non-owner."""

    async def list_threads(
        self, user_id: str, *, limit: int | None = None, offset: int = 0
    ) -> list[ThreadInfo]:
        """Threads owned by ``user_id`` (``"*"``: all), most recently updated first."""

    async def set_thread_metadata(self, key: ThreadKey, metadata: dict[str, Any]) -> None:
        """Replace the application metadata of an existing thread (owner only)."""

    async def ledger_get(self, key: ThreadKey, call_key: str) -> LedgerEntry | None:
        """The recorded execution for ``call_key``, or ``None``."""

    async def ledger_put(self, key: ThreadKey, entry: LedgerEntry) -> LedgerEntry:
        """Record ``entry`` durably; if ``call_key`` is already recorded (a racing replay),
        keep the first and return it. Failures raise ``LedgerWriteError``."""

    async def ledger_count(self, key: ThreadKey) -> int:
        """Number of ledger rows of the thread (for verification and tests)."""

    async def set_stop(self, key: ThreadKey, requested: bool, at: float | None = None) -> None:
        """Record (``requested``) or withdraw the caller's durable stop request for a thread,
        made at ``at`` (UNIX seconds, default now); the newest request time is kept. Works
        before the thread's first checkpoint; any instance may call. Raises forbidden when
        another user owns the thread."""

    async def lease_acquire(
        self, key: ThreadKey, holder: str, *, ttl_s: float, lapse_s: float, queue: bool
    ) -> LeaseGrant:
        """One attempt to take the thread's run lease for ``holder`` (a run id): granted when
        nobody holds it (or the holder's lease lapsed) and no earlier live waiter is queued;
        ``queue`` registers (or keeps alive) the caller's place when refused. See
        :mod:`tenxgraph.storage._lease_records`."""
        ...

    async def lease_peek(self, key: ThreadKey, holder: str, *, lapse_s: float) -> LeaseGrant:
        """What an acquisition attempt would find, changing nothing and taking no lock (a
        waiting run's poll): ``expires_in_s`` ``0.0`` when free, ``ahead`` the live waiters
        queued before ``holder``."""
        ...

    async def lease_renew(self, key: ThreadKey, holder: str, fence: int, ttl_s: float) -> bool:
        """Extend the holder's lease by ``ttl_s`` seconds from now; ``False`` once another run
        took the lease."""
        ...

    async def lease_release(self, key: ThreadKey, holder: str, fence: int | None) -> None:
        """Give the lease of ``fence`` up and withdraw ``holder`` from the queue."""
        ...

    async def get_stop(self, key: ThreadKey, since: float | None = None) -> bool:
        """Whether the caller has a stop request for the thread, made at or after ``since``
        (UNIX seconds) when given; ``False`` when another user owns the thread."""


@runtime_checkable
class CacheTier(Protocol):
    """A cache of each thread's latest :class:`StoredCheckpoint`; never authoritative.

    A failing or garbage-holding cache is a miss (reported as a span event and a warning),
    never an error for the run.
    """

    #: tier name used in telemetry: ``"lru"`` or ``"redis"``.
    name: str

    async def get(self, key: ThreadKey) -> StoredCheckpoint | None:
        """The cached latest checkpoint of ``key`` (same owner scope only), or ``None``."""

    async def put(
        self, record: StoredCheckpoint, new_messages: list[tuple[int, bytes]] | None = None
    ) -> None:
        """Cache ``record`` as the thread's latest (ignored if older than what is cached).

        Either ``record.messages`` is complete (a read filled the tier), or ``new_messages``
        holds only the rows this version added (a write-through after a CAS write): the tier
        then applies them on top of the version it holds, ``record.version - 1``, and drops the
        thread when it does not hold exactly that version. ``record.decoded`` may carry the
        in-process message objects (``(message_list, length)``); only the LRU keeps it.
        """

    async def invalidate(self, key: ThreadKey) -> None:
        """Drop every entry of the thread (any owner scope)."""

    async def aclose(self) -> None:
        """Release connections; idempotent."""
